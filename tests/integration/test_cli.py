"""The `seglog` command as users run it: `python -m seglog ...` in a subprocess, on a data dir: what only a
data dir has (the sessions both doors share are in test_cli_doors.py); every error path answered with one
line and exit status 1 (2 for bad usage); `--help` of each command. Two in-process tests drive the same
commands through other Admin implementations: a live one (records arrive while `consume` waits, as on a
broker) and the `--bootstrap-server` plug-in point."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import pytest

import seglog
from seglog.cli import main
from seglog.cli.datadir import DataDirAdmin

TIMEOUT = 60


@pytest.fixture
def data(tmp_path):
    """Where the tests' data dirs go: a tmpfs (/dev/shm) when there is one, so that the fsyncs of every
    command's clean close do not make the suite wait on a busy disk. The commands behave alike on any file
    system (tmp_path otherwise)."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        path = pathlib.Path(tempfile.mkdtemp(prefix="seglog-cli-", dir="/dev/shm"))
        yield path
        shutil.rmtree(path, ignore_errors=True)
    else:
        yield tmp_path


def run(*args, input: str | bytes | None = None) -> subprocess.CompletedProcess:
    """`python -m seglog ARGS` with the test's environment (which can import seglog)."""
    binary = isinstance(input, bytes)
    return subprocess.run([sys.executable, "-m", "seglog", *map(str, args)], input=input, capture_output=True,
                          text=not binary, env=dict(os.environ), timeout=TIMEOUT)


def ok(*args, input=None) -> str:
    r = run(*args, input=input)
    assert r.returncode == 0, (args, r.returncode, r.stdout, r.stderr)
    return r.stdout


def fails(status: int, needle: str, *args, input=None) -> str:
    """Runs a command that must fail with `status` and one stderr line containing `needle`."""
    r = run(*args, input=input)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == status, (args, r.returncode, r.stdout, r.stderr)
    assert len(lines) == 1 and "Traceback" not in r.stderr, (args, r.stderr)
    assert needle in lines[0], (args, lines[0])
    return lines[0]


def group_rows(text: str) -> dict[tuple[str, int], dict[str, str]]:
    """The rows of `groups --describe` keyed by (topic, partition)."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = lines[0].split()
    assert header == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                      "HOST", "CLIENT-ID"], lines[0]
    rows = {}
    for line in lines[1:]:
        row = dict(zip(header, line.split()))
        rows[(row["TOPIC"], int(row["PARTITION"]))] = row
    return rows


def test_group_consumer_commits_every_assigned_partition(data):
    """Stopping after a few records (all from one partition) still commits a position for the partitions it
    never reached, as Kafka's consumer does, so the next run resumes there instead of at 'latest'."""
    d = ["--data-dir", data]
    ok("topics", *d, "--create", "--topic", "t", "--partitions", "3")
    ok("produce", *d, "--topic", "t", input="".join(f"{i}\n" for i in range(30)))
    first = ok("consume", *d, "--topic", "t", "--group", "g", "--from-beginning", "--max-messages", "4").split()
    assert len(first) == 4
    rows = group_rows(ok("groups", *d, "--describe", "--group", "g"))
    assert sorted(int(r["CURRENT-OFFSET"]) for r in rows.values()) == [0, 0, 4]
    rest = ok("consume", *d, "--topic", "t", "--group", "g").split()
    assert sorted(first + rest, key=int) == [str(i) for i in range(30)]
    # without a group and without --from-beginning the console consumer starts at the end
    assert ok("consume", *d, "--topic", "t") == ""
    # the seeds' --consumer-property group.id=...; a group reading one partition by hand commits only that one
    seed = ok("consume", *d, "--topic", "t", "--consumer-property", "group.id=seed", "--from-beginning")
    assert len(seed.split()) == 30
    assert ok("consume", *d, "--topic", "t", "--group", "solo", "--partition", "1", "--offset", "7") == "22\n25\n28\n"
    assert ok("groups", *d, "--list") == "g\nseed\nsolo\n"
    rows = group_rows(ok("groups", *d, "--describe", "--group", "solo"))
    assert {tp: r["CURRENT-OFFSET"] for tp, r in rows.items()} == {("t", 1): "10"}


def test_topic_configs(data):
    d = ["--data-dir", data]
    ok("topics", *d, "--create", "--topic", "c", "--config", "retention.ms=1000", "--config", "segment.bytes=1048576")
    configs = lambda: ok("topics", *d, "--describe", "--topic", "c").splitlines()[0].split("Configs: ")[1]  # noqa: E731
    assert configs() == "retention.ms=1000,segment.bytes=1048576"
    out = ok("topics", *d, "--alter", "--topic", "c", "--config", "retention.ms=2000",
             "--add-config", "cleanup.policy=[compact,delete],max.message.bytes=5000",
             "--delete-config", "segment.bytes")
    assert out == "Completed updating config for topic c.\n"
    assert configs() == "cleanup.policy=compact,delete,max.message.bytes=5000,retention.ms=2000"
    fails(1, "retention.ms", "topics", *d, "--alter", "--topic", "c", "--config", "retention.ms=soon")
    fails(1, "Unknown topic config name: no.such", "topics", *d, "--alter", "--topic", "c",
          "--delete-config", "no.such")
    assert configs() == "cleanup.policy=compact,delete,max.message.bytes=5000,retention.ms=2000"
    # an alter that cannot be done whole changes nothing
    fails(1, "Topic currently has 1 partitions", "topics", *d, "--alter", "--topic", "c", "--partitions", "1",
          "--config", "retention.ms=1")
    fails(1, "retention.ms", "topics", *d, "--alter", "--topic", "c", "--partitions", "2", "--config", "retention.ms=x")
    assert configs() == "cleanup.policy=compact,delete,max.message.bytes=5000,retention.ms=2000"
    assert "PartitionCount: 1\t" in ok("topics", *d, "--describe", "--topic", "c")
    fails(1, "retention.ms", "topics", *d, "--create", "--topic", "d", "--config", "retention.ms=-5")
    fails(1, "Unknown topic config name: retention", "topics", *d, "--create", "--topic", "d",
          "--config", "retention=1")
    assert ok("topics", *d, "--list") == "c\n"                     # a refused create leaves nothing behind
    ok("topics", *d, "--create", "--topic", "plain")
    assert ok("topics", *d, "--describe", "--topics-with-overrides").splitlines()[0].startswith("Topic: c\t")
    assert len(ok("topics", *d, "--describe").splitlines()) == 4     # every topic: c and plain, 1 partition each
    assert ok("topics", *d, "--create", "--topic", "c", "--if-not-exists") == ""
    assert ok("topics", *d, "--delete", "--topic", "gone", "--if-exists") == ""


def test_produce_and_consume_formats(data):
    d = ["--data-dir", data]
    ok("topics", *d, "--create", "--topic", "f", "--partitions", "2")
    lines = "h1:a,h2:b\tk1=v1\nh3:c\tNULL=v2\nh4:d\tk3=NULL\n"
    ok("produce", *d, "--topic", "f", "--partition", "1", "--compression", "lz4", "--property", "parse.headers=true",
       "--key-separator", "=", "--property", "null.marker=NULL", input=lines)
    out = ok("consume", *d, "--topic", "f", "--partition", "1", "--offset", "earliest", "--property",
             "print.timestamp=true", "--property", "print.headers=true", "--property", "print.key=true",
             "--property", "print.offset=true", "--property", "key.separator=|", "--property", "null.literal=<none>")
    got = [line.split("|") for line in out.splitlines()]
    assert [g[1:] for g in got] == [["Offset:0", "h1:a,h2:b", "k1", "v1"], ["Offset:1", "h3:c", "<none>", "v2"],
                                    ["Offset:2", "h4:d", "k3", "<none>"]]
    assert all(re.fullmatch(r"CreateTime:\d{13}", g[0]) for g in got)
    dump = ok("dump-log", data / "f-1" / "00000000000000000000.log")
    assert "compresscodec: LZ4" in dump and "count: 3" in dump
    # plain lines, --partition/--offset, --max-messages, --offset without --partition, binary values
    ok("produce", *d, "--topic", "f", "--partition", "0", input=b"zero\none\r\ntwo\n\xff\xfe\nfour")
    assert ok("consume", *d, "--topic", "f", "--partition", "0", "--offset", "1", "--max-messages", "2") == "one\ntwo\n"
    r = run("consume", *d, "--topic", "f", "--partition", "0", "--from-beginning", input=b"")
    assert r.stdout == b"zero\none\ntwo\n\xff\xfe\nfour\n"
    assert ok("consume", *d, "--topic", "f", "--partition", "0", "--offset", "latest", "--timeout-ms", "50") == ""
    assert ok("consume", *d, "--topic", "f", "--offset", "earliest", "--property", "print.value=false",
              "--property", "print.partition=true").splitlines() == ["Partition:0"] * 5 + ["Partition:1"] * 3
    # a line without the key separator stops the producer with an error; the lines before it are written
    r = run("produce", *d, "--topic", "f", "--partition", "0", "--key-separator", ":", input="a:1\nno separator\nc:3\n")
    assert r.returncode == 1 and r.stderr == ("seglog produce: error: No key separator found on line number 2: "
                                              "'no separator'\n")
    assert ok("consume", *d, "--topic", "f", "--partition", "0", "--offset", "5") == "1\n"
    ok("produce", *d, "--topic", "f", "--partition", "0", "--key-separator", ":", "--property", "ignore.error=true",
       input="no separator\n")
    assert ok("consume", *d, "--topic", "f", "--partition", "0", "--offset", "6", "--property", "print.key=true") == \
        "null\tno separator\n"


def test_error_paths(data):
    """Refusals of a data dir (those a broker answers alike are in test_cli_doors.py)."""
    d = ["--data-dir", data]
    ok("topics", *d, "--create", "--topic", "pet", "--partitions", "2")
    ok("produce", *d, "--topic", "pet", input="a\nb\nc\n")
    cases = [
        # unknown topics
        (1, "Topic 'nope' does not exist.", ["produce", *d, "--topic", "nope"], "x\n"),
        (1, "Topic 'nope' does not exist.", ["consume", *d, "--topic", "nope"], None),
        (1, "Topic 'nope' does not exist.", ["groups", *d, "--reset-offsets", "--group", "g", "--topic", "nope",
                                              "--to-earliest"], None),
        # bad partitions and offsets
        (1, "Partition 7 does not exist in topic 'pet'", ["consume", *d, "--topic", "pet", "--partition", "7"], None),
        (1, "Partition 5 does not exist in topic 'pet'", ["groups", *d, "--reset-offsets", "--group", "g",
                                                           "--topic", "pet:5", "--to-earliest"], None),
        (1, "offset 99 is out of range for pet-0", ["consume", *d, "--topic", "pet", "--partition", "0",
                                                     "--offset", "99"], None),
        (2, "--offset must be earliest, latest or an offset >= 0", ["consume", *d, "--topic", "pet", "--offset", "-3"],
         None),
        (2, "argument --partition: must not be negative", ["consume", *d, "--topic", "pet", "--partition", "-1"], None),
        # bad topics and configs
        (1, "Replication factor: 4 larger than available brokers: 1.",
         ["topics", *d, "--create", "--topic", "pig", "--partitions", "3", "--replication-factor", "4"], None),
        (1, "Invalid value", ["topics", *d, "--create", "--topic", "q", "--config", "segment.bytes=big"], None),
        (2, "unknown consumer --property print.nope", ["consume", *d, "--topic", "pet", "--property",
                                                        "print.nope=true"], None),
        (2, "unknown producer --property parse.nope", ["produce", *d, "--topic", "pet", "--property",
                                                        "parse.nope=true"], "x\n"),
        (2, "property print.key must be true or false", ["consume", *d, "--topic", "pet", "--property",
                                                         "print.key=yes"], None),
        (2, "invalid --config 'retention.ms'", ["topics", *d, "--create", "--topic", "q", "--config", "retention.ms"],
         None),
        # groups
        (1, "Cannot shift offset for partition pet-0", ["groups", *d, "--reset-offsets", "--group", "ghost",
                                                          "--topic", "pet", "--shift-by", "1"], None),
        (2, "--describe needs --group or --all-groups", ["groups", *d, "--describe"], None),
        (2, "--reset-offsets needs a scope", ["groups", *d, "--reset-offsets", "--group", "g", "--to-earliest"], None),
        (2, "--reset-offsets needs --to-earliest", ["groups", *d, "--reset-offsets", "--group", "g", "--all-topics"],
         None),
        (2, "--to-latest can only be used with --reset-offsets", ["groups", *d, "--list", "--to-latest"], None),
        # usage
        (2, "one of the arguments --create --describe --list --alter --delete is required", ["topics", *d], None),
        (2, "not allowed with argument", ["topics", *d, "--list", "--delete"], None),
        (2, "--create needs --topic", ["topics", *d, "--create"], None),
        (2, "--replication-factor cannot be used with --alter",
         ["topics", *d, "--alter", "--topic", "pet", "--replication-factor", "2"], None),
        (2, "--alter needs --partitions", ["topics", *d, "--alter", "--topic", "pet"], None),
        (2, "one of the arguments --data-dir --bootstrap-server is required", ["topics", "--list"], None),
        (2, "invalid choice", ["produce", *d, "--topic", "pet", "--compression", "brotli"], "x\n"),
        (2, "invalid choice", ["frobnicate"], None),
        # where the data is
        (1, "no such data directory", ["topics", "--data-dir", data / "missing", "--list"], None),
        (1, "no such data directory", ["consume", "--data-dir", data / "missing", "--topic", "pet"], None),
    ]
    for status, needle, args, stdin in cases:
        fails(status, needle, *args, input=stdin)
    assert not (data / "missing").exists()
    # nothing above changed the topic or its records
    assert ok("topics", *d, "--list", "--exclude-internal") == "pet\n"
    assert sorted(ok("consume", *d, "--topic", "pet", "--from-beginning").split()) == ["a", "b", "c"]
    r = run("groups", *d, "--delete", "--group", "ghost")
    assert r.returncode == 1 and "* Group 'ghost' could not be deleted due to:" in r.stderr
    ok("consume", *d, "--topic", "pet", "--group", "seen")           # creates __consumer_offsets
    fails(1, "The internal topic __consumer_offsets cannot be deleted", "topics", *d, "--delete", "--topic",
          "__consumer_offsets")


def test_a_data_dir_held_by_another_process(data):
    with seglog.open(data) as node:                 # a broker would hold it the same way
        node.create_topic("busy")
        for args, stdin in ((["topics", "--list"], None), (["produce", "--topic", "busy"], "x\n"),
                            (["consume", "--topic", "busy"], None), (["groups", "--list"], None)):
            line = fails(1, "in use by another process", args[0], "--data-dir", data, *args[1:], input=stdin)
            assert "use --bootstrap-server" in line
    assert ok("topics", "--data-dir", data, "--list") == "busy\n"


def test_a_cluster_members_data_dir_is_inspected_as_that_broker(data):
    """A data dir a broker with broker.id 3 wrote (a stopped cluster member's): the commands open it as broker
    3 (a node refuses a meta.properties of another broker.id, as Kafka does)."""
    with seglog.open(data / "d3", {"broker.id": "3"}) as node:
        node.create_topic("t", 2)
        seglog.Producer(node).send("t", b"v", partition=1).result()
    assert ok("topics", "--data-dir", data / "d3", "--list").split() == ["t"]
    assert ok("consume", "--data-dir", data / "d3", "--topic", "t", "--from-beginning").split() == ["v"]
    assert "broker.id=3" in (data / "d3" / "meta.properties").read_text()
    with pytest.raises(seglog.errors.InvalidConfigError, match="stored broker.id 3"):
        seglog.open(data / "d3")


def test_bootstrap_server_without_a_broker_client(free_port):
    r = run("topics", "--bootstrap-server", f"127.0.0.1:{free_port()}", "--list")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr


def test_dump_log(data, capsys):
    """dump-log prints every batch and every record (kafka-dump-log.sh's lines), payloads on request, the entries
    of index files, and reports damage with a line and exit status 2 instead of a traceback."""
    path = data / "d-0"
    with seglog.Log(path, seglog.LogConfig(index_interval_bytes=100)) as log:
        for i in range(30):
            log.append_batch([b"v%d-%d" % (i, j) for j in range(3)], keys=[b"k%d" % i, None, b""],
                             headers=[[("h", b"x")], None, [("n", None)]], timestamps=[1000 + i] * 3,
                             compression="lz4" if i % 2 else None)
    seg = path / "00000000000000000000.log"
    out = ok("dump-log", seg).splitlines()
    assert out[0] == f"Dumping {seg}"
    batches = [line for line in out if line.startswith("baseOffset: ")]
    records = [line for line in out if line.startswith("| offset: ")]
    assert len(batches) == 30 and all(line.endswith("isvalid: true") for line in batches)
    assert batches[1].startswith("baseOffset: 3 lastOffset: 5 count: 3 ") and "compresscodec: LZ4" in batches[1]
    assert [int(r.split()[2]) for r in records] == list(range(90))
    assert records[0] == "| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 4 sequence: -1 headerKeys: [h]"
    assert records[1] == "| offset: 1 CreateTime: 1000 keySize: -1 valueSize: 4 sequence: -1 headerKeys: []"
    assert out == ok("dump-log", "--deep-iteration", seg).splitlines()
    for window in (97, 300, 1000):                   # reading in windows, some smaller than one batch: the same
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("seglog.cli.dumplog.WINDOW", window)
            assert main(["dump-log", str(seg)]) == 0
        assert capsys.readouterr().out.splitlines() == out
    payload = [line for line in ok("dump-log", "--print-payload", seg).splitlines() if line.startswith("| ")]
    assert payload[0] == records[0] + " key: k0 payload: v0-0 headers: [h:x]"
    assert payload[2] == records[2] + " key:  payload: v0-2 headers: [n:null]"

    index = ok("dump-log", seg.with_suffix(".index"), "--files", seg.with_suffix(".timeindex")).splitlines()
    offsets = [line for line in index if line.startswith("offset: ")]
    times = [line for line in index if line.startswith("timestamp: ")]
    assert offsets and times and len(index) == len(offsets) + len(times) + 2
    fields = [b.split() for b in batches]
    by_offset = {int(f[3]): int(f[f.index("position:") + 1]) for f in fields}     # last offset -> position
    for line in offsets:                               # each entry: a batch's last offset -> that batch's position
        _, off, _, pos = line.split()
        assert by_offset[int(off)] == int(pos)
    assert all(re.fullmatch(r"timestamp: 10\d\d offset: \d+", line) for line in times)

    data_bytes = seg.read_bytes()
    bad = data / "bad.log"
    second = int(batches[1].split("position: ")[1].split()[0])
    bad.write_bytes(data_bytes[:second + 70] + bytes([data_bytes[second + 70] ^ 1]) + data_bytes[second + 71:])
    r = run("dump-log", bad)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    lines = r.stdout.splitlines()
    assert lines[5].startswith("baseOffset: 3 ") and lines[5].endswith("isvalid: false")   # its records: not shown
    assert lines[6].startswith(f"corrupt batch at position {second}: CRC-32C mismatch") and lines[7].startswith("base")
    assert len([line for line in lines if line.startswith("baseOffset: ")]) == 30     # the dump goes on
    bad.write_bytes(data_bytes[:second + 8] + b"\x00\x00\x00\x05" + data_bytes[second + 12:] + b"tail")
    lines = run("dump-log", bad).stdout.splitlines()
    assert lines[-1] == f"corrupt batch at position {second}: batch length 5 is smaller than a batch header"
    assert len([line for line in lines if line.startswith("baseOffset: ")]) == 1
    bad.write_bytes(data_bytes + data_bytes[:100])
    r = run("dump-log", bad)
    assert r.returncode == 2
    assert r.stdout.splitlines()[-1] == f"100 bytes at position {len(data_bytes)} do not form a whole batch"
    w = seglog._engine.BatchWriter()
    w.add_many([b"a", b"b"])
    batch = bytearray(w.take())
    batch[61] = 0x7F                                  # the first record's length: past the batch
    batch[17:21] = seglog._engine.crc32c(bytes(batch[21:])).to_bytes(4, "big")
    bad.write_bytes(bytes(batch))
    r = run("dump-log", bad)
    assert r.returncode == 2 and r.stdout.splitlines()[1].endswith("isvalid: true"), r
    assert r.stdout.splitlines()[2].startswith("corrupt batch at position 0: corrupt records in batch: ")
    (data / "nameless.index").write_bytes(bytes(16))
    r = run("dump-log", data / "missing.log", data / "nameless.index", bad)
    assert r.returncode == 1 and r.stdout.count("Dumping") == 3, r
    assert "missing.log: No such file" in r.stderr and "cannot tell this one's base offset" in r.stderr


def test_reset_offsets_to_datetime(data):
    """kafka-consumer-groups --to-datetime YYYY-MM-DDTHH:mm:SS.sss (UTC unless a zone follows): the first
    record at or after that time, the log end where no record is that late."""
    with seglog.open(data / "d") as node:
        node.create_topic("times", 1)
        with seglog.Producer(node) as p:
            for ts in (1000, 2000, 3000):
                p.send("times", b"at %d" % ts, timestamp=ts)
    d = ["--data-dir", data / "d"]

    def reset_to(when: str) -> str:
        ok("groups", *d, "--reset-offsets", "--group", "tg", "--topic", "times", "--to-datetime", when, "--execute")
        return group_rows(ok("groups", *d, "--describe", "--group", "tg"))[("times", 0)]["CURRENT-OFFSET"]

    assert reset_to("1970-01-01T00:00:01.500") == "1"
    assert reset_to("1970-01-01T01:00:02.000+01:00") == "1"           # the same instant as 00:00:02 UTC
    assert reset_to("1970-01-01T00:00:00.000Z") == "0"
    assert reset_to("1970-01-01T00:00:03.001") == "3"                  # after every record: the end
    fails(2, "Error parsing timestamp", "groups", *d, "--reset-offsets", "--group", "tg", "--topic", "times",
          "--to-datetime", "yesterday")


def test_demo_writes_only_into_a_directory_of_its_own(data, start_broker):
    """The demo never touches data that is not its own: a live broker's data dir is in use, any other
    non-empty directory (a seglog data dir with a topic `demo`) is refused untouched; its own directory is
    removed afterwards unless --keep, and a kept one can be run over again."""
    demo = [sys.executable, "-m", "seglog", "demo", "--records", "2000"]
    r = subprocess.run(demo, cwd=data, capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0 and "verified: every record read back once" in r.stdout, r
    assert os.listdir(data) == [], "the default run leaves nothing behind (no empty ./seglog-demo)"

    broker = start_broker(data / "live")
    broker.node.create_topic("demo", 2)
    seglog.Producer(broker.node).send("demo", b"precious", partition=0).get()
    fails(1, "in use by another process", "demo", "--records", "100", "--data-dir", data / "live")
    assert [r.value for r in broker.node.partition("demo", 0).log.records()] == [b"precious"]
    broker.stop()
    fails(1, "is not the demo's own output", "demo", "--records", "100", "--data-dir", data / "live")
    with seglog.open(data / "live") as node:
        assert [r.value for r in node.partition("demo", 0).log.records()] == [b"precious"]

    mine = data / "mine"
    for keep in (["--keep"], ["--keep"], []):
        ok("demo", "--records", "100", "--data-dir", mine, *keep)
        assert sorted(os.listdir(mine)) == [".lock", ".seglog-demo", "demo-0", "demo-1"] if keep \
            else not mine.exists()
    (data / "empty").mkdir()
    ok("demo", "--records", "100", "--data-dir", data / "empty")
    assert os.listdir(data / "empty") == [], "a directory the user made stays (empty)"


def test_help_of_every_command():
    top = ok("--help")
    for command in ("topics", "produce", "consume", "groups", "demo", "dump-log"):
        assert command in top
    expected = {
        "topics": ["--create", "--describe", "--list", "--alter", "--delete", "--partitions", "--replication-factor",
                   "--config", "--delete-config", "--bootstrap-server", "--data-dir"],
        "produce": ["--topic", "--property", "--key-separator", "--compression-codec", "--bootstrap-server"],
        "consume": ["--from-beginning", "--partition", "--offset", "--group", "--max-messages", "--timeout-ms",
                    "--property", "--bootstrap-server"],
        "groups": ["--list", "--describe", "--all-groups", "--delete", "--reset-offsets", "--to-earliest",
                   "--to-latest", "--to-offset", "--to-datetime", "--execute", "--bootstrap-server"],
        "acls": ["--add", "--remove", "--list", "--allow-principal", "--deny-principal", "--allow-host",
                 "--deny-host", "--operation", "--topic", "--group", "--cluster", "--transactional-id",
                 "--resource-pattern-type", "--principal", "--force", "--bootstrap-server"],
        "configs": ["--describe", "--alter", "--entity-type", "--entity-name", "--entity-default", "--add-config",
                    "--delete-config", "--bootstrap-server"],
        "demo": ["--records"],
        "dump-log": ["--print-payload"],
    }
    for command, options in expected.items():
        text = ok(command, "--help")
        assert text.startswith(f"usage: seglog {command}"), text
        missing = [o for o in options if o not in text]
        assert not missing, (command, missing)


# -- the commands over other Admin implementations (in-process) ----------------------------------------------

class _SharedNodeAdmin(DataDirAdmin):
    """The data-dir Admin over a node the test holds open, optionally 'live' as a broker is."""

    def __init__(self, node, live: bool):
        self.node = node
        self.live = live

    def close(self) -> None:
        pass


def test_consume_on_a_live_source_waits_for_records(tmp_path, monkeypatch, capfd):
    """On a broker (Admin.live) `consume` prints records that arrive while it waits and stops only after
    --timeout-ms without one, or at --max-messages."""
    import seglog.cli.console as console

    with seglog.open(tmp_path, {"group.initial.rebalance.delay.ms": 0}) as node:
        node.create_topic("live", 2)
        monkeypatch.setattr(console, "connect", lambda args, **kw: _SharedNodeAdmin(node, live=True))

        def produce_slowly():
            with seglog.Producer(node, linger_ms=0) as p:
                for i in range(5):
                    time.sleep(0.15)
                    p.send("live", b"late %d" % i)

        t = threading.Thread(target=produce_slowly)
        t.start()
        started = time.monotonic()
        status = main(["consume", "--data-dir", str(tmp_path), "--topic", "live", "--group", "g",
                       "--from-beginning", "--timeout-ms", "1500"])
        took = time.monotonic() - started
        t.join()
        out, err = capfd.readouterr()
        assert status == 0 and sorted(out.split("\n")[:-1]) == [f"late {i}" for i in range(5)]
        assert err == "Processed a total of 5 messages\n"
        assert 0.75 + 1.5 - 0.2 < took < 15             # waited for all five, then ~1.5 s of silence
        committed = node.group_coordinator.fetch_offsets("g")
        assert sum(om.offset for om in committed.values()) == 5

        t = threading.Thread(target=produce_slowly)
        t.start()
        status = main(["consume", "--data-dir", str(tmp_path), "--topic", "live", "--group", "g",
                       "--max-messages", "3"])
        t.join()
        out, _ = capfd.readouterr()
        assert status == 0 and len(out.splitlines()) == 3


def test_groups_with_an_active_member(tmp_path, monkeypatch, capfd):
    """A group with a live member (possible on a broker): its partitions show the member's ids, --members and
    --state describe it, and reset/delete refuse to touch it."""
    import seglog.cli.groups as groups

    with seglog.open(tmp_path, {"group.initial.rebalance.delay.ms": 0}) as node:
        node.create_topic("t", 3)
        with seglog.Producer(node) as p:
            for i in range(6):
                p.send("t", b"%d" % i, partition=i % 3)
        monkeypatch.setattr(groups, "connect", lambda args, **kw: _SharedNodeAdmin(node, live=True))
        d = ["--data-dir", str(tmp_path)]
        with seglog.Consumer(node, group_id="busy", client_id="me", auto_offset_reset="earliest",
                             enable_auto_commit=False) as c:
            c.subscribe(["t"])
            c.poll(1.0, max_records=1)
            assert c.assignment() == {("t", 0), ("t", 1), ("t", 2)}
            c.commit({("t", 0): 1})
            [member] = node.group_coordinator.describe_groups(["busy"])[0].members
            assert main(["groups", *d, "--describe", "--group", "busy"]) == 0
            out, err = capfd.readouterr()
            rows = group_rows(out)
            assert err == ""
            assert [(r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"]) for _, r in sorted(rows.items())] == \
                [("1", "2", "1"), ("-", "2", "-"), ("-", "2", "-")]
            assert {(r["HOST"], r["CLIENT-ID"]) for r in rows.values()} == {("in-process", "me")}
            assert {r["CONSUMER-ID"] for r in rows.values()} == {member.member_id}
            assert main(["groups", *d, "--describe", "--group", "busy", "--members"]) == 0
            lines = capfd.readouterr()[0].split("\n")
            assert lines[1].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
            assert lines[2].split()[2:] == ["in-process", "me", "3"]
            assert main(["groups", *d, "--describe", "--all-groups", "--state"]) == 0
            assert capfd.readouterr()[0].split("\n")[2].split()[-3:] == ["range", "Stable", "1"]
            assert main(["groups", *d, "--reset-offsets", "--group", "busy", "--all-topics", "--to-earliest",
                         "--execute"]) == 1
            assert "can only be reset if the group 'busy' is inactive, but the current state is Stable" in \
                capfd.readouterr()[1]
            assert main(["groups", *d, "--delete", "--group", "busy"]) == 1
            assert "could not be deleted" in capfd.readouterr()[1]


def test_bootstrap_server_uses_the_broker_admin(tmp_path, monkeypatch, capfd):
    """--bootstrap-server gives the commands a BrokerAdmin(servers, client_id=..., security=...) (PLAINTEXT
    without --command-config); they run unchanged over whatever Admin they get."""
    calls = []
    with seglog.open(tmp_path) as node:
        node.create_topic("remote", 2)

        def broker_admin(servers, *, client_id, security):
            calls.append((servers, client_id, security.protocol))
            return _SharedNodeAdmin(node, live=False)

        monkeypatch.setattr("seglog.cli.connect.BrokerAdmin", broker_admin)
        assert main(["topics", "--bootstrap-server", "broker:9092", "--describe", "--topic", "remote"]) == 0
        assert "PartitionCount: 2" in capfd.readouterr()[0]
        assert main(["consume", "--bootstrap-server", "broker:9092", "--topic", "remote"]) == 0
        assert calls == [("broker:9092", "seglog-cli", "PLAINTEXT"), ("broker:9092", "console-consumer", "PLAINTEXT")]

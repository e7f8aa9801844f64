"""The `seglog` commands over `--bootstrap-server` (seglog.broker.admin, seglog.remote).

Against one running broker (``seglog.serve``), through ``python -m seglog`` subprocesses: the seed-style session
of test_cli.py (topics, keyed produce, consume --from-beginning, a group with lag, offset resets), records
arriving while `consume` waits, and the error paths. Against a replicated cluster of three brokers in this
process (in-memory metadata store), through ``main([...])``: `topics --describe` prints each partition's
Leader, Replicas and Isr exactly as the cluster holds them, a replication factor over the broker count is
refused with Kafka's message, and a producer finds a partition's new leader after the old one stopped. The
facade the clients run on (seglog.remote.RemoteNode) is checked directly too: acks 0/1/all, error mapping,
long polls, the group coordinator's MemberIdRequired handshake.
"""

from __future__ import annotations

import contextlib
import io
import re
import struct
import subprocess
import sys
import threading
import time

import pytest
from test_cli import TIMEOUT, fails, group_rows, ok, run

import seglog
from seglog import errors
from seglog.assignors import Assignment
from seglog.broker import RunningBroker
from seglog.broker.admin import connect
from seglog.cli import main
from seglog.cluster.memory import MemoryCluster, MemoryMetadataStore
from seglog.offsets_format import TopicPartition
from seglog.partitioner import murmur2
from seglog.remote import RemoteNode, whole_batches


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One broker for the module's subprocess tests (each test uses its own topics and groups)."""
    with seglog.serve(tmp_path_factory.mktemp("broker"), group_initial_rebalance_delay_ms=0) as b:
        yield b


def test_a_session_like_the_seeds_over_the_wire(broker):
    b = ["--bootstrap-server", broker.bootstrap_servers]
    assert ok("topics", *b, "--create", "--topic", "pet", "--partitions", "3", "--replication-factor", "1",
              "--config", "retention.ms=604800000") == "Created topic pet.\n"
    lines = ok("topics", *b, "--describe", "--topic", "pet").splitlines()
    assert re.fullmatch(r"Topic: pet\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\tReplicationFactor: 1\t"
                        r"Configs: retention\.ms=604800000", lines[0]), lines[0]
    assert lines[1:] == [f"\tTopic: pet\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in range(3)]
    assert "pet" in ok("topics", *b, "--list").split()

    # keyed lines in, then --from-beginning: Kafka's key placement, in order per partition, none missing
    records = [(f"k{i % 4}", f"value {i}") for i in range(12)]
    r = run("produce", *b, "--topic", "pet", "--property", "parse.key=true", "--property", "key.separator=:",
            input="".join(f"{k}:{v}\n" for k, v in records))
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    r = run("consume", *b, "--topic", "pet", "--from-beginning", "--max-messages", "12", "--property",
            "print.key=true", "--property", "print.partition=true", "--property", "print.offset=true")
    assert r.returncode == 0 and r.stderr == "Processed a total of 12 messages\n", r.stderr
    seen: dict[int, list[tuple[int, str, str]]] = {}
    for line in r.stdout.splitlines():
        part, off, key, value = line.split("\t")
        p = int(part.removeprefix("Partition:"))
        assert p == (murmur2(key.encode()) & 0x7FFFFFFF) % 3
        seen.setdefault(p, []).append((int(off.removeprefix("Offset:")), key, value))
    for p, rows in seen.items():
        assert [o for o, _, _ in rows] == list(range(len(rows)))
        assert [(k, v) for _, k, v in rows] == [kv for kv in records if (murmur2(kv[0].encode()) & 0x7FFFFFFF) % 3 == p]
    assert sum(map(len, seen.values())) == 12

    # a group reads everything and commits: lag 0; 5 more records: lag 5; the group reads exactly those
    values = ok("consume", *b, "--topic", "pet", "--group", "g1", "--from-beginning", "--max-messages", "12")
    assert sorted(values.splitlines()) == sorted(v for _, v in records)
    rows = group_rows(ok("groups", *b, "--describe", "--group", "g1"))
    assert set(rows) == {("pet", p) for p in range(3)}
    assert all(r["LAG"] == "0" and r["CURRENT-OFFSET"] == r["LOG-END-OFFSET"] and r["CONSUMER-ID"] == "-"
               for r in rows.values())
    ok("produce", *b, "--topic", "pet", input="".join(f"more {i}\n" for i in range(5)))
    rows = group_rows(ok("groups", *b, "--describe", "--group", "g1"))
    assert sum(int(r["LAG"]) for r in rows.values()) == 5
    assert all(int(r["LAG"]) == int(r["LOG-END-OFFSET"]) - int(r["CURRENT-OFFSET"]) for r in rows.values())
    assert sorted(ok("consume", *b, "--topic", "pet", "--group", "g1", "--max-messages", "5").splitlines()) == \
        [f"more {i}" for i in range(5)]
    assert all(r["LAG"] == "0" for r in group_rows(ok("groups", *b, "--describe", "--group", "g1")).values())
    assert ok("groups", *b, "--list") == "g1\n"
    assert ok("topics", *b, "--list") == "__consumer_offsets\npet\n"
    assert ok("topics", *b, "--list", "--exclude-internal") == "pet\n"

    # partitions only grow; config changes are refused whole over the wire (no AlterConfigs in the broker)
    assert ok("topics", *b, "--alter", "--topic", "pet", "--partitions", "4") == "Adding partitions succeeded!\n"
    fails(1, "Topic currently has 4 partitions", "topics", *b, "--alter", "--topic", "pet", "--partitions", "2")
    fails(1, "not supported over --bootstrap-server yet", "topics", *b, "--alter", "--topic", "pet",
          "--config", "retention.ms=1")
    first = ok("topics", *b, "--describe", "--topic", "pet").splitlines()[0]
    assert "PartitionCount: 4\t" in first and first.endswith("Configs: retention.ms=604800000")

    # reset offsets: a dry run changes nothing, --execute does
    before = group_rows(ok("groups", *b, "--describe", "--group", "g1"))
    r = run("groups", *b, "--reset-offsets", "--group", "g1", "--topic", "pet", "--to-earliest")
    assert r.returncode == 0 and "--execute option is missing" in r.stderr
    plan = [line.split() for line in r.stdout.splitlines() if line.strip()]
    assert plan == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]] + [["g1", "pet", str(p), "0"] for p in range(4)]
    assert group_rows(ok("groups", *b, "--describe", "--group", "g1")) == before
    ok("groups", *b, "--reset-offsets", "--group", "g1", "--topic", "pet", "--to-earliest", "--execute")
    rows = group_rows(ok("groups", *b, "--describe", "--group", "g1"))
    assert {tp: r["CURRENT-OFFSET"] for tp, r in rows.items()} == {("pet", p): "0" for p in range(4)}
    assert sum(int(r["LAG"]) for r in rows.values()) == 17
    ok("groups", *b, "--reset-offsets", "--group", "g1", "--topic", "pet:0,2", "--to-offset", "1", "--execute")
    ok("groups", *b, "--reset-offsets", "--group", "g1", "--topic", "pet:2", "--shift-by", "1", "--execute")
    rows = group_rows(ok("groups", *b, "--describe", "--group", "g1"))
    assert [rows[("pet", p)]["CURRENT-OFFSET"] for p in range(4)] == ["1", "0", "2", "0"]
    ok("groups", *b, "--reset-offsets", "--group", "g1", "--topic", "pet", "--to-latest", "--execute")
    ok("groups", *b, "--reset-offsets", "--group", "g1", "--topic", "pet:1", "--shift-by", "-2", "--execute")
    assert ok("consume", *b, "--topic", "pet", "--group", "g1", "--timeout-ms", "400").count("\n") == 2
    assert all(r["LAG"] == "0" for r in group_rows(ok("groups", *b, "--describe", "--group", "g1")).values())

    # groups cannot be deleted over the wire (no DeleteGroups in the broker); topics can
    fails(1, "not supported over --bootstrap-server yet", "groups", *b, "--delete", "--group", "g1")
    assert ok("groups", *b, "--list") == "g1\n"
    assert ok("topics", *b, "--delete", "--topic", "pet") == ""
    assert ok("topics", *b, "--list", "--exclude-internal") == ""
    fails(1, "Topic 'pet' does not exist.", "topics", *b, "--describe", "--topic", "pet")
    fails(1, "The internal topic __consumer_offsets cannot be deleted", "topics", *b, "--delete", "--topic",
          "__consumer_offsets")


def test_consume_waits_for_records_produced_meanwhile(broker):
    """On a broker `consume` keeps waiting: records produced (by seglog.Producer over the wire) after it
    started are printed, and it stops at --max-messages."""
    b = ["--bootstrap-server", broker.bootstrap_servers]
    ok("topics", *b, "--create", "--topic", "later", "--partitions", "2")
    proc = subprocess.Popen([sys.executable, "-m", "seglog", "consume", *b, "--topic", "later", "--group", "lg",
                             "--from-beginning", "--max-messages", "6", "--timeout-ms", "30000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with RemoteNode(broker.bootstrap_servers, client_id="test") as node, \
                seglog.Producer(node, linger_ms=0) as producer:
            for i in range(6):
                time.sleep(0.2)
                producer.send("later", b"late %d" % i)
            started = time.monotonic()
            out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert sorted(out.splitlines()) == [f"late {i}" for i in range(6)]
    assert err == "Processed a total of 6 messages\n"
    assert time.monotonic() - started < 20                 # it stopped at --max-messages, not at the timeout
    rows = group_rows(ok("groups", *b, "--describe", "--group", "lg"))
    assert sum(int(r["CURRENT-OFFSET"]) for r in rows.values()) == 6


def test_error_paths_over_the_wire(broker, free_port):
    b = ["--bootstrap-server", broker.bootstrap_servers]
    ok("topics", *b, "--create", "--topic", "err", "--partitions", "2")
    ok("topics", *b, "--create", "--topic", "small", "--config", "max.message.bytes=400")
    cases = [
        (1, "Topic 'nope' does not exist.", ["topics", *b, "--describe", "--topic", "nope"], None),
        (1, "Topic 'nope' does not exist.", ["topics", *b, "--delete", "--topic", "nope"], None),
        (1, "Topic 'nope' does not exist.", ["produce", *b, "--topic", "nope"], "x\n"),
        (1, "Topic 'nope' does not exist.", ["consume", *b, "--topic", "nope"], None),
        (1, "Partition 2 does not exist in topic 'err'", ["produce", *b, "--topic", "err", "--partition", "2"], "x\n"),
        (1, "Topic 'err' already exists.", ["topics", *b, "--create", "--topic", "err"], None),
        (1, "Replication factor: 4 larger than available brokers: 1.",
         ["topics", *b, "--create", "--topic", "pig", "--replication-factor", "4"], None),
        (1, "is illegal", ["topics", *b, "--create", "--topic", "no/slash"], None),
        (1, "retention.ms", ["topics", *b, "--create", "--topic", "q", "--config", "retention.ms=soon"], None),
        (1, "no broker reachable", ["topics", "--bootstrap-server", f"127.0.0.1:{free_port()}", "--list"], None),
    ]
    for status, needle, args, stdin in cases:
        fails(status, needle, *args, input=stdin)
    topics = set(ok("topics", *b, "--list").split())
    assert {"err", "small"} <= topics and not {"nope", "pig", "q"} & topics     # refused creates left nothing

    # an oversized line costs only itself, with the broker's message, exactly as on a data dir
    lines = [f"small {i}" for i in range(20)] + ["x" * 500] + [f"after {i}" for i in range(5)]
    r = run("produce", *b, "--topic", "small", input="\n".join(lines) + "\n")
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "seglog produce: line 21 not written: record batch of 570 bytes is larger than the limit of 400 bytes "
        "(max.message.bytes)", "seglog produce: error: 1 of 26 records were not written"]
    assert ok("consume", *b, "--topic", "small", "--from-beginning", "--max-messages", "25").splitlines() == \
        lines[:20] + lines[21:]


# -- the facade the clients run on ---------------------------------------------------------------------------

def test_remote_node_produce_fetch_and_errors(broker):
    with connect(broker.bootstrap_servers, client_id="facade") as admin, \
            seglog.connect(broker.bootstrap_servers, client_id="facade") as node:
        assert isinstance(node, RemoteNode)
        admin.create_topic("facade", 2, None, {"max.message.bytes": "2000"})
        for acks in ("all", 1, 0):
            with seglog.Producer(node, acks=acks, linger_ms=0) as p:
                futures = [p.send("facade", b"acks=%s %d" % (str(acks).encode(), i), key=b"k%d" % i,
                                  partition=0, headers=[("h", b"v"), ("null", None)]) for i in range(3)]
                p.flush()
                if acks != 0:                               # acks=0: the broker answers nothing
                    base = {"all": 0, 1: 3}[acks]
                    assert [f.get().offset for f in futures] == [base, base + 1, base + 2]
        part = broker.node.partition("facade", 0)            # the broker's own copy, read in-process
        deadline = time.monotonic() + 10
        while part.high_watermark < 9 and time.monotonic() < deadline:
            time.sleep(0.02)
        stored = list(part.log.records())
        assert [r.value for r in stored] == [b"acks=%s %d" % (a, i) for a in (b"all", b"1", b"0") for i in range(3)]
        assert all(tuple(r.headers) == (("h", b"v"), ("null", None)) and r.key == b"k%d" % (r.offset % 3)
                   for r in stored)

        # the consumer over the wire: manual assignment, positions, time lookups
        with seglog.Consumer(node, auto_offset_reset="earliest") as c:
            c.assign([("facade", 0), ("facade", 1)])
            got = []
            deadline = time.monotonic() + 10
            while len(got) < 9 and time.monotonic() < deadline:
                got += c.poll(1.0)
            assert [(r.offset, r.key, r.value, r.headers) for r in got] == \
                [(r.offset, r.key, r.value, r.headers) for r in stored]
            assert c.end_offsets([("facade", 0), ("facade", 1)]) == {("facade", 0): 9, ("facade", 1): 0}
            assert c.offsets_for_times({("facade", 0): stored[4].timestamp})[("facade", 0)].offset <= 4
            assert c.offsets_for_times({("facade", 0): stored[-1].timestamp + 60_000})[("facade", 0)] is None

        # error codes come back as seglog's exceptions, with the broker's details
        p0 = node.partition("facade", 0)
        with pytest.raises(errors.OffsetOutOfRangeError) as e:
            p0.fetch(50, 1 << 20)
        assert (e.value.start, e.value.end) == (0, 9)
        with seglog.Producer(node, linger_ms=0) as p:
            with pytest.raises(errors.RecordTooLargeError, match="larger than the limit of 2000 bytes"):
                p.send("facade", b"x" * 3000, partition=1).get()
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            node.partition("facade", 2)
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            node.topic("no-such-topic")
        assert node.topic("facade").partitions == 2 and "facade" in node.topics()


def test_remote_node_long_poll_wakes_on_new_records(broker):
    """Fetches do not wait; wait_for_data long-polls the partitions that came back empty, returns as soon as
    a record arrives (and hands it to the next fetch), and returns False when nothing came."""
    with connect(broker.bootstrap_servers, client_id="poll") as admin, \
            RemoteNode(broker.bootstrap_servers, client_id="poll") as node:
        admin.create_topic("poll", 1, None, {})
        part = node.partition("poll", 0)
        version = node.data_version()
        assert part.fetch(0, 1 << 20).next_offset == -1
        started = time.monotonic()
        assert node.wait_for_data(version, 0.6) is False
        assert 0.5 < time.monotonic() - started < 5

        version = node.data_version()
        assert part.fetch(0, 1 << 20).next_offset == -1

        def append_later():
            time.sleep(0.3)
            with seglog.Producer(broker.node, linger_ms=0) as p:       # in-process, into the broker's node
                p.send("poll", b"woke")

        t = threading.Thread(target=append_later)
        t.start()
        started = time.monotonic()
        assert node.wait_for_data(version, 20.0) is True
        took = time.monotonic() - started
        t.join()
        assert 0.25 < took < 10                              # woken by the record, long before the timeout
        res = part.fetch(0, 1 << 20)
        assert res.next_offset == 1 and b"woke" in bytes(res.records)


def test_remote_group_coordinator_handshake(broker):
    """JoinGroup v4+: a new member first gets MEMBER_ID_REQUIRED with the id to rejoin with; then join, sync,
    heartbeat, generation-checked commits, leave; errors as the in-process coordinator raises them."""
    with connect(broker.bootstrap_servers, client_id="hs") as admin, \
            RemoteNode(broker.bootstrap_servers, client_id="hs") as node:
        admin.create_topic("hs", 1, None, {})
        coord = node.group_coordinator
        protocols = [("range", b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff")]
        with pytest.raises(errors.MemberIdRequiredError) as e:
            coord.join_group("hs-group", "", "consumer", protocols, 10000, 10000).result()
        member = e.value.member_id
        assert member.startswith("hs-")
        joined = coord.join_group("hs-group", member, "consumer", protocols, 10000, 10000).result()
        assert joined.member_id == member and joined.is_leader and joined.generation_id == 1
        assignment = Assignment([TopicPartition("hs", 0)]).encode()
        synced = coord.sync_group("hs-group", 1, member, {member: assignment}).result()
        assert synced.assignment == assignment
        coord.heartbeat("hs-group", 1, member)
        with pytest.raises(errors.IllegalGenerationError):
            coord.heartbeat("hs-group", 7, member)
        assert coord.commit_offsets("hs-group", {("hs", 0): 3}, 1, member) == {("hs", 0): None}
        with pytest.raises(errors.IllegalGenerationError):
            coord.commit_offsets("hs-group", {("hs", 0): 4}, 2, member)
        assert coord.fetch_offsets("hs-group", [("hs", 0)])[("hs", 0)].offset == 3
        info = admin.describe_group("hs-group")
        assert (info.state, info.protocol, [m.member_id for m in info.members]) == ("Stable", "range", [member])
        assert info.members[0].assignment == (("hs", 0),) and info.members[0].client_id == "hs"
        assert coord.leave_group("hs-group", [(member, None)]) == [None]
        with pytest.raises(errors.UnknownMemberIdError):
            coord.heartbeat("hs-group", 1, member)
        assert admin.describe_group("hs-group").state == "Empty"


def test_whole_batches_stops_before_a_partial_batch():
    batch = struct.pack(">qi", 5, 49 + 10) + bytes(11) + struct.pack(">i", 2) + bytes(61 + 10 - 27)
    assert len(batch) == 71
    view, next_offset = whole_batches(batch + batch[:30])
    assert (len(view), next_offset) == (71, 8)
    assert whole_batches(b"")[1] == -1 and whole_batches(batch[:70])[1] == -1


# -- a replicated cluster in this process ----------------------------------------------------------------------

@contextlib.contextmanager
def cluster(tmp_path, n: int = 3, **overrides):
    """n brokers sharing an in-memory metadata store; stopped (in parallel) at the end."""
    state = MemoryCluster()
    brokers: list[RunningBroker] = []
    try:
        for i in range(n):
            brokers.append(RunningBroker(tmp_path / f"broker-{i}", broker_id=i,
                                         metadata_store=MemoryMetadataStore(state),
                                         group_initial_rebalance_delay_ms=0, **overrides))
        yield state, brokers
    finally:
        stoppers = [threading.Thread(target=b.stop) for b in brokers]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join()


def cli(capfd, *args, stdin: str | None = None) -> tuple[int, str, str]:
    """`seglog ARGS` in this process: (exit status, stdout, stderr)."""
    capfd.readouterr()
    old = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode()))
    try:
        status = main([str(a) for a in args])
    finally:
        sys.stdin = old
    out, err = capfd.readouterr()
    return status, out, err


def described(text: str) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """{partition: (leader, replicas, isr)} from `topics --describe` partition lines."""
    out = {}
    for line in text.splitlines()[1:]:
        m = re.fullmatch(r"\tTopic: \S+\tPartition: (\d+)\tLeader: (-?\d+)\tReplicas: ([\d,]+)\tIsr: ([\d,]*)", line)
        assert m, line
        out[int(m[1])] = (int(m[2]), tuple(map(int, m[3].split(","))),
                          tuple(map(int, m[4].split(","))) if m[4] else ())
    return out


def in_cluster(state: MemoryCluster, topic: str) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
    with state.lock:
        return {p: (state.states[(topic, p)].leader, tuple(replicas), tuple(state.states[(topic, p)].isr))
                for p, replicas in state.topics[topic].partitions.items()}


def test_replicated_cluster_describe_shows_leaders_replicas_and_isr(tmp_path, capfd):
    with cluster(tmp_path) as (state, brokers):
        b = ["--bootstrap-server", brokers[1].bootstrap_servers]
        assert cli(capfd, "topics", *b, "--create", "--topic", "disTopic", "--partitions", "4",
                   "--replication-factor", "2") == (0, "Created topic disTopic.\n", "")
        status, out, err = cli(capfd, "topics", *b, "--describe", "--topic", "disTopic")
        assert (status, err) == (0, "")
        assert re.match(r"Topic: disTopic\tTopicId: \S+\tPartitionCount: 4\tReplicationFactor: 2\tConfigs: \n", out)
        shown = described(out)
        assert shown == in_cluster(state, "disTopic")
        assert {leader for leader, _, _ in shown.values()} == {0, 1, 2}          # leaders spread over brokers
        assert all(len(set(replicas)) == 2 and leader == replicas[0] and set(isr) == set(replicas)
                   for leader, replicas, isr in shown.values())
        for other in brokers:                              # every broker answers the same, right after the create
            assert cli(capfd, "topics", "--bootstrap-server", other.bootstrap_servers, "--describe", "--topic",
                       "disTopic")[1] == out

        assert cli(capfd, "topics", *b, "--create", "--topic", "big", "--partitions", "4", "--replication-factor",
                   "4") == (1, "", "seglog topics: error: Replication factor: 4 larger than available brokers: 3.\n")
        assert cli(capfd, "topics", *b, "--list")[1] == "disTopic\n"

        # records through the partitions' leaders, a group at its coordinator, lag from every leader
        lines = "".join(f"k{i}:v{i}\n" for i in range(20))
        assert cli(capfd, "produce", *b, "--topic", "disTopic", "--key-separator", ":", stdin=lines) == (0, "", "")
        status, out, err = cli(capfd, "consume", *b, "--topic", "disTopic", "--group", "dg", "--from-beginning",
                               "--max-messages", "20", "--property", "print.key=true", "--property",
                               "print.partition=true")
        assert (status, err) == (0, "Processed a total of 20 messages\n")
        got = [line.split("\t") for line in out.splitlines()]
        assert sorted(v for _, _, v in got) == sorted(f"v{i}" for i in range(20))
        assert all(int(p.removeprefix("Partition:")) == (murmur2(k.encode()) & 0x7FFFFFFF) % 4 for p, k, _ in got)
        status, out, _ = cli(capfd, "groups", *b, "--describe", "--group", "dg")
        rows = group_rows(out)
        assert status == 0 and set(rows) == {("disTopic", p) for p in range(4)}
        assert all(r["LAG"] == "0" for r in rows.values())
        assert sum(int(r["LOG-END-OFFSET"]) for r in rows.values()) == 20
        status, out, _ = cli(capfd, "groups", *b, "--describe", "--group", "dg", "--state")
        coordinator = out.splitlines()[2].split()[1:3]
        with state.lock:
            offsets_leaders = {st.leader for (t, _), st in state.states.items() if t == "__consumer_offsets"}
        assert status == 0 and int(coordinator[1].strip("()")) in offsets_leaders

        # more partitions: placed and led like the first ones
        assert cli(capfd, "topics", *b, "--alter", "--topic", "disTopic", "--partitions", "6") == \
            (0, "Adding partitions succeeded!\n", "")
        shown = described(cli(capfd, "topics", *b, "--describe", "--topic", "disTopic")[1])
        assert len(shown) == 6 and shown == in_cluster(state, "disTopic")
        assert cli(capfd, "topics", *b, "--delete", "--topic", "disTopic") == (0, "", "")
        assert cli(capfd, "topics", *b, "--list", "--exclude-internal") == (0, "", "")


def test_cluster_producer_finds_the_new_leader(tmp_path, capfd):
    """The leader of a partition stops: the next produce fails over to the new leader (after fresh metadata),
    describe shows the new leader and the shrunk ISR, and every record acknowledged is there, in order.
    (replica.lag.time.max.ms 2 s: a leader whose ISR is itself alone advances its high watermark only at the
    broker's periodic ISR check, every replica.lag.time.max.ms / 2.)"""
    with cluster(tmp_path, replica_lag_time_max_ms=2000) as (state, brokers):
        b = ["--bootstrap-server", ",".join(x.bootstrap_servers for x in brokers)]
        assert cli(capfd, "topics", *b, "--create", "--topic", "fo", "--partitions", "1", "--replication-factor",
                   "2")[0] == 0
        assert cli(capfd, "produce", *b, "--topic", "fo", stdin="".join(f"a{i}\n" for i in range(5)))[0] == 0
        old, replicas, _ = in_cluster(state, "fo")[0]
        brokers[old].stop()
        assert cli(capfd, "produce", *b, "--topic", "fo", stdin="".join(f"b{i}\n" for i in range(5))) == (0, "", "")
        new, _, isr = in_cluster(state, "fo")[0]
        assert new != old and new in replicas and isr == (new,)
        assert described(cli(capfd, "topics", *b, "--describe", "--topic", "fo")[1]) == {0: (new, replicas, (new,))}
        status, out, _ = cli(capfd, "consume", *b, "--topic", "fo", "--from-beginning", "--max-messages", "10")
        assert status == 0 and out.split() == [f"a{i}" for i in range(5)] + [f"b{i}" for i in range(5)]

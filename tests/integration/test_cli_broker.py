"""The `seglog` commands over `--bootstrap-server` (seglog.cli.broker_admin, seglog.remote).

Against one running broker (``seglog.serve``), through ``python -m seglog`` subprocesses: what only a broker
has (the sessions both doors share are in test_cli_doors.py): records arriving while `consume` waits, topics
auto-created as Kafka's clients do, Ctrl-C of a group consumer, an unreachable broker. Against a replicated cluster of three brokers in this
process (in-memory metadata store), through ``main([...])``: `topics --describe` prints each partition's
Leader, Replicas and Isr exactly as the cluster holds them, a replication factor over the broker count is
refused with Kafka's message, and a producer finds a partition's new leader after the old one stopped. The
facade the clients run on (seglog.remote.RemoteNode) is checked directly too: acks 0/1/all, error mapping,
long polls, the group coordinator's MemberIdRequired handshake.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from helpers.kafka_wire import RawConnection, produce_body, record_batch
from test_cli import TIMEOUT, fails, group_rows, ok, run

import seglog
from seglog import _engine, errors
from seglog.assignors import Assignment
from seglog.broker import RunningBroker
from seglog.cli.broker_admin import BrokerAdmin
from seglog.cli import main
from seglog.cluster.memory import MemoryCluster, MemoryMetadataStore
from seglog.offsets_format import TopicPartition
from seglog.partitioner import murmur2
from seglog.protocol import ApiKey
from seglog.remote import RemoteNode
from seglog.wire_fetch import whole_batches


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One broker for the module's subprocess tests (each test uses its own topics and groups)."""
    with seglog.serve(tmp_path_factory.mktemp("broker"), group_initial_rebalance_delay_ms=0) as b:
        yield b


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


def test_no_broker_reachable(free_port):
    fails(1, "no broker reachable", "topics", "--bootstrap-server", f"127.0.0.1:{free_port()}", "--list")


def test_produce_and_consume_create_a_missing_topic_as_kafka_clients_do(broker, start_broker):
    """Kafka's console producer and consumer ask for the topic with allow_auto_topic_creation: a broker with
    auto.create.topics.enable (the default) creates it with num.partitions; without it the topic is unknown."""
    b = ["--bootstrap-server", broker.bootstrap_servers]
    r = run("produce", *b, "--topic", "made-by-produce", input="hello\n")
    assert (r.returncode, r.stderr) == (0, "")
    assert [r.value for r in broker.node.partition("made-by-produce", 0).log.records()] == [b"hello"]
    r = run("consume", *b, "--topic", "made-by-consume", "--timeout-ms", "300")
    assert (r.returncode, r.stderr) == (0, "Processed a total of 0 messages\n")
    assert broker.node.topic("made-by-consume").partitions == 1
    off = start_broker(auto_create_topics_enable=False)
    b = ["--bootstrap-server", off.bootstrap_servers]
    fails(1, "Topic 'nope' does not exist.", "produce", *b, "--topic", "nope", input="x\n")
    fails(1, "Topic 'nope' does not exist.", "consume", *b, "--topic", "nope")
    assert off.node.topics() == []


def test_ctrl_c_stops_a_group_consumer_cleanly_and_commits(broker):
    """Ctrl-C while `consume --group` waits in a long poll: the answer to that poll must not be read by the
    commit that follows (it used to be: "response correlation id N does not match"); exit 130, the count on
    stderr, and the records printed are committed, as without --group."""
    b = ["--bootstrap-server", broker.bootstrap_servers]
    ok("topics", *b, "--create", "--topic", "sigint", "--partitions", "2")
    ok("produce", *b, "--topic", "sigint", input="".join(f"v{i}\n" for i in range(10)))
    proc = subprocess.Popen([sys.executable, "-m", "seglog", "consume", *b, "--topic", "sigint", "--group", "sg",
                             "--from-beginning"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    try:
        reader.start()
        deadline = time.monotonic() + TIMEOUT
        while len(lines) < 10 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert len(lines) == 10, lines
        time.sleep(0.6)                                    # now inside a long-polling Fetch (up to 1 s)
        proc.send_signal(signal.SIGINT)
        proc.wait(TIMEOUT)
        reader.join(TIMEOUT)
        err = proc.stderr.read()
    finally:
        proc.kill()
    assert (proc.returncode, err) == (130, "Processed a total of 10 messages\n")
    assert sorted(lines) == sorted(f"v{i}\n" for i in range(10))
    rows = group_rows(ok("groups", *b, "--describe", "--group", "sg"))
    assert sum(int(r["CURRENT-OFFSET"]) for r in rows.values()) == 10
    assert all(r["LAG"] == "0" for r in rows.values())


def test_groups_describe_shows_the_member_host_as_kafka(broker):
    """kafka-consumer-groups prints the host the broker recorded for a member: Java's InetAddress text,
    "/127.0.0.1"."""
    b = ["--bootstrap-server", broker.bootstrap_servers]
    ok("topics", *b, "--create", "--topic", "hosted")
    with seglog.connect(broker.bootstrap_servers, client_id="hoster") as node, \
            seglog.Consumer(node, group_id="hg", client_id="hoster") as consumer:
        consumer.subscribe(["hosted"])
        deadline = time.monotonic() + TIMEOUT
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.1)
        rows = group_rows(ok("groups", *b, "--describe", "--group", "hg"))
        assert [(r["HOST"], r["CLIENT-ID"]) for r in rows.values()] == [("/127.0.0.1", "hoster")]
        lines = ok("groups", *b, "--describe", "--group", "hg", "--members").split()
        assert "/127.0.0.1" in lines


def test_connect_administers_topics_like_open(broker):
    """The README's ``node = seglog.connect(...)`` then ``node.create_topic(...)``: the Node's topic calls
    over Kafka's admin requests, with the Node's errors."""
    with seglog.connect(broker.bootstrap_servers) as node:
        t = node.create_topic("adm", partitions=2, config={"retention.ms": "604800000"})
        assert (t.name, t.partitions) == ("adm", 2)
        assert broker.node.topic("adm").overrides == {"retention.ms": "604800000"}
        with seglog.Producer(node) as p:
            assert p.send("adm", value=b"hello", key=b"k1").get().topic == "adm"
        assert node.create_partitions("adm", 3).partitions == 3
        assert broker.node.topic("adm").partitions == 3
        node.alter_topic_config("adm", {"segment.ms": "3600000", "cleanup.policy": "delete,compact"},
                                ["retention.ms"])
        assert node.topic_config("adm")[0] == {"segment.ms": "3600000", "cleanup.policy": "delete,compact"}
        assert broker.node.partition("adm", 2).log.config.segment_ms == 3_600_000
        node.alter_topic_config("adm", {"retention.ms": "1"}, validate_only=True)
        assert "retention.ms" not in broker.node.topic("adm").overrides
        with pytest.raises(errors.InvalidConfigError, match="Unknown topic config name: nope"):
            node.alter_topic_config("adm", {"nope": "1", "segment.ms": "1"})
        with pytest.raises(errors.InvalidConfigError, match="segment.ms"):
            node.alter_topic_config("adm", {"segment.ms": "soon"})
        assert broker.node.topic("adm").overrides == {"segment.ms": "3600000", "cleanup.policy": "delete,compact"}
        with pytest.raises(errors.TopicAlreadyExistsError):
            node.create_topic("adm")
        with pytest.raises(errors.InvalidPartitionsError):
            node.create_partitions("adm", 2)
        with seglog.Consumer(node, group_id="adm-readers") as c:       # its FindCoordinator creates the offsets
            assert c.committed(("adm", 0)) is None                         # topic, whatever ran before this test
        with pytest.raises(errors.InvalidTopicError):
            node.delete_topic("__consumer_offsets")
        node.delete_topic("adm")
        assert "adm" not in node.topics()
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            node.delete_topic("adm")
    for bad in (None, 9092, "localhost", "127.0.0.1:99999", " , "):
        with pytest.raises(errors.InvalidConfigError, match="bootstrap server"):
            seglog.connect(bad)


def test_broker_command_applies_a_properties_file(tmp_path):
    """`seglog broker --config server.properties`: the file's settings are in force (message.max.bytes,
    num.partitions for auto-created topics); an unknown one is a WARNING, as Kafka logs it."""
    props = tmp_path / "server.properties"
    props.write_text(f"# a Kafka-style file\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs={tmp_path / 'data'}\n"
                     f"message.max.bytes=2000\nnum.partitions=3\nsome.kafka.only.setting=1\n")
    proc = subprocess.Popen([sys.executable, "-m", "seglog", "broker", "--config", str(props)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        m = re.search(r"listening on (\S+):(\d+)", proc.stdout.readline())
        assert m, proc.stderr.read() if proc.poll() is not None else "no listening line"
        with RawConnection((m[1], int(m[2]))) as c:
            md = c.request(ApiKey.METADATA, 8, {"topics": [{"name": "props"}], "allow_auto_topic_creation": True})
            assert [len(t["partitions"]) for t in md["topics"]] == [3]
            small = record_batch([(1, None, b"s" * 100, [])])
            large = record_batch([(1, None, b"L" * 3000, [])])
            for batch, code in ((large, 10), (small, 0)):          # MESSAGE_TOO_LARGE by the file's limit
                r = c.request(ApiKey.PRODUCE, 8, produce_body("props", 0, batch))
                assert r["responses"][0]["partition_responses"][0]["error_code"] == code
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert ("WARNING seglog.config: The configuration 'some.kafka.only.setting' was supplied but isn't a known "
            "config.") in err


def test_broker_command_refuses_bad_settings_on_one_line(tmp_path):
    """Bad settings are one line and exit status 2, before anything listens; a TLS listener without a key or a
    SASL listener without a mechanism seglog serves is refused (never served in plaintext instead)."""
    d = ["broker", "--data-dir", tmp_path / "d"]
    for needle, args in [
            ("port 80000 is not in 0..65535", ["--port", "80000"]),
            ("zookeeper.connect: 'bad:zk:string' is not host:port", ["--zookeeper", "bad:zk:string"]),
            ("'127.0.0.1:notaport' is not host:port", ["--zookeeper", "127.0.0.1:notaport"]),
            ("needs a key and certificate", ["--override", "listeners=SSL://127.0.0.1:9093"]),
            ("not GSSAPI", ["--override", "listeners=SASL_PLAINTEXT://:9093", "--override",
                            "sasl.enabled.mechanisms=GSSAPI"]),
            ("--metrics-port 70000 is not a port", ["--metrics-port", "70000"]),
            ("broker.id", ["--broker-id", "-1"])]:
        fails(2, needle, *d, *args)
    assert not (tmp_path / "d").exists()


def test_broker_command_refuses_a_data_dir_of_another_broker_id(tmp_path):
    """A data dir whose meta.properties holds another broker.id: one line naming both ids, exit status 2, nothing
    listens and the file is left as it was (Kafka's InconsistentBrokerIdException)."""
    with seglog.open(tmp_path / "d", {"broker.id": 1}):
        pass
    before = (tmp_path / "d" / "meta.properties").read_text()
    line = fails(2, "Configured broker.id 2 doesn't match stored broker.id 1 in ", "broker", "--data-dir",
                 tmp_path / "d", "--broker-id", "2", "--port", "0")
    assert str(tmp_path / "d" / "meta.properties") in line
    assert (tmp_path / "d" / "meta.properties").read_text() == before


def test_find_coordinator_names_why_there_is_none(tmp_path):
    """__consumer_offsets cannot be created while fewer brokers live than offsets.topic.replication.factor:
    FindCoordinator (v1+ carries a message) and the client's error say so instead of "being created"."""
    with cluster(tmp_path, n=1) as (_, [b]):
        why = ("the offsets topic __consumer_offsets cannot be created yet: 1 live broker, "
               "offsets.topic.replication.factor=3 (start more brokers, or lower offsets.topic.replication.factor)")
        with RawConnection((b.host, b.port)) as c:
            deadline = time.monotonic() + TIMEOUT
            while not c.request(ApiKey.METADATA, 8, {"topics": []})["brokers"] and time.monotonic() < deadline:
                time.sleep(0.05)                           # until the broker has seen its own registration
            r = c.request(ApiKey.FIND_COORDINATOR, 1, {"key": "g", "key_type": 0})
            assert (r["error_code"], r["error_message"]) == (errors.CoordinatorNotAvailableError.code, why)
        with RemoteNode(b.bootstrap_servers, retry_timeout=0.3) as node:
            with pytest.raises(errors.CoordinatorNotAvailableError) as e:
                node.group_coordinator.coordinator("g")
            assert str(e.value) == why


# -- the facade the clients run on ---------------------------------------------------------------------------

def test_remote_node_produce_fetch_and_errors(broker):
    with BrokerAdmin(broker.bootstrap_servers, client_id="facade") as admin, \
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
    with BrokerAdmin(broker.bootstrap_servers, client_id="poll") as admin, \
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
    with BrokerAdmin(broker.bootstrap_servers, client_id="hs") as admin, \
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
        [refused] = admin.delete_groups(["hs-group"]).values()
        assert isinstance(refused, errors.NonEmptyGroupError)
        assert coord.leave_group("hs-group", [(member, None)]) == [None]
        with pytest.raises(errors.UnknownMemberIdError):
            coord.heartbeat("hs-group", 1, member)
        assert admin.describe_group("hs-group").state == "Empty"
        deleted = admin.delete_groups(["hs-group", "hs-ghost"])
        assert deleted["hs-group"] is None and isinstance(deleted["hs-ghost"], errors.GroupIdNotFoundError)
        assert admin.describe_group("hs-group").state == "Dead" and coord.fetch_offsets("hs-group") == {}


def test_whole_batches_stops_before_a_partial_batch():
    w = _engine.BatchWriter(next_offset=5)
    for value in (b"a", b"b", b"c"):
        w.add(value)
    w.finish()
    batch = bytes(w.take())
    view, next_offset = whole_batches(batch + batch[:30])
    assert (len(view), next_offset) == (len(batch), 8)
    assert whole_batches(b"")[1] == -1 and whole_batches(batch[:-1])[1] == -1


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

        # a config change goes to the cluster's metadata: every broker reports it and its replicas apply it
        assert cli(capfd, "topics", *b, "--alter", "--topic", "disTopic", "--config", "retention.ms=3600000") == \
            (0, "Completed updating config for topic disTopic.\n", "")
        for other in brokers:
            first = cli(capfd, "topics", "--bootstrap-server", other.bootstrap_servers, "--describe", "--topic",
                        "disTopic")[1].splitlines()[0]
            assert first.endswith("\tConfigs: retention.ms=3600000")
            assert all(part.log.config.retention_ms == 3_600_000 for part in other.node.partitions("disTopic"))
        first = cli(capfd, "topics", *b, "--describe", "--topic", "__consumer_offsets")[1].splitlines()[0]
        assert first.endswith("Configs: cleanup.policy=compact,compression.type=producer,segment.bytes=104857600")
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


def test_acks_0_sends_survive_descriptors_above_1024(broker):
    """The acks=0 socket checks whether the broker closed it before each send. select() refuses descriptors
    from 1024 up, which a long test session or a busy service reaches: every send after the first was lost."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1300:
        pytest.skip(f"the open-files limit ({hard}) is too low to hold 1,100 descriptors")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1300), hard))
    r, w = os.pipe()
    held = [os.dup(r) for _ in range(1100)]
    try:
        broker.node.create_topic("acks0", 1)
        with seglog.connect(broker.bootstrap_servers) as node, seglog.Producer(node, acks=0, linger_ms=0) as p:
            for i in range(3):
                p.send("acks0", b"v%d" % i, partition=0)
                p.flush()
        part = broker.node.partition("acks0", 0)
        deadline = time.monotonic() + 10
        while part.high_watermark < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [r.value for r in part.log.records()] == [b"v0", b"v1", b"v2"]
    finally:
        for fd in (*held, r, w):
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

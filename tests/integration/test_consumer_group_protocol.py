"""KIP-848's consumer group protocol (``group.protocol=consumer``) against librdkafka (confluent-kafka 2.16):
server-side assignment with no partition consumed twice or left out, a leaving member's partitions moving, a
killed member expired after group.consumer.session.timeout.ms, commits resumed after a restart, and the
AdminClient's describe_consumer_groups (ConsumerGroupDescribe) and list_consumer_groups (ListGroups v5) and
`seglog groups --describe` showing a CONSUMER group; the group's members, epochs and assignments reloaded from
__consumer_offsets by a restarted broker and by a new coordinator after a failover."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

ck = pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, ConsumerGroupType, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from seglog.cli import main  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

# heartbeats every 300 ms, sessions of 4 s: groups settle in about a second, a killed member goes in 4 s
OVERRIDES = {"group_consumer_heartbeat_interval_ms": 300, "group_consumer_session_timeout_ms": 4000,
             "group_consumer_min_heartbeat_interval_ms": 100, "group_consumer_min_session_timeout_ms": 1000}


@pytest.fixture
def broker(start_broker):
    return start_broker(**OVERRIDES)


def make_topic(broker, name, partitions, records=0):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(30)
    if records:
        p = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(records):
            p.produce(name, str(i).encode(), partition=i % partitions)
        assert p.flush(30) == 0


def consumer(broker, group, **conf):
    return Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, **conf})


def assignments(consumers):
    return [{tp.partition for tp in c.assignment()} for c in consumers]


def settle(consumers, done, seconds=30, seen=None, exclusive=True):
    """Poll every consumer until ``done(assignments)``; every polled record goes into ``seen`` (partition,
    offset; nothing is committed here, so a partition that moves is read again from its start by its new
    owner). Checks at each round that no partition is assigned to two consumers (unless ``exclusive`` is False:
    a fenced member's client gives its partitions up only when it next polls, as with Kafka)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for c in consumers:
            m = c.poll(0.05)
            if m is not None:
                assert m.error() is None, m.error()
                if seen is not None:
                    seen.add((m.partition(), m.offset()))
        now = assignments(consumers)
        flat = [p for a in now for p in a]
        assert not exclusive or len(flat) == len(set(flat)), f"a partition assigned twice: {now}"
        if done(now):
            return now
    raise AssertionError(f"not settled in {seconds} s: {assignments(consumers)}")


def cli(capfd, broker, *args) -> str:
    """`seglog groups ARGS` against the broker, in this process (kafka-consumer-groups.sh's output)."""
    capfd.readouterr()
    assert main(["groups", "--bootstrap-server", broker.bootstrap_servers, *args]) == 0
    return capfd.readouterr().out


def test_three_consumers_split_six_partitions_and_a_leaver_moves_its_partitions(broker, capfd):
    make_topic(broker, "six", 6, records=600)
    cs = [consumer(broker, "split") for _ in range(3)]
    seen: set = set()
    try:
        for c in cs:
            c.subscribe(["six"])
        now = settle(cs, lambda a: sorted(map(len, a)) == [2, 2, 2], seen=seen)
        assert set().union(*now) == set(range(6))
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        desc = admin.describe_consumer_groups(["split"])["split"].result(30)
        assert desc.type == ConsumerGroupType.CONSUMER and str(desc.state).endswith("STABLE")
        assert desc.partition_assignor == "uniform" and len(desc.members) == 3
        assert sorted(len(m.assignment.topic_partitions) for m in desc.members) == [2, 2, 2]
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(30).valid  # ListGroups v5
        assert [(g.group_id, g.type) for g in listed] == [("split", ConsumerGroupType.CONSUMER)]
        assert admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(30).valid == []
        state = cli(capfd, broker, "--describe", "--group", "split", "--state").splitlines()[-1].split()
        assert state[0] == "split" and state[-3:] == ["uniform", "Stable", "3"]
        rows = [line.split() for line in cli(capfd, broker, "--describe", "--group", "split", "--members").splitlines()[2:]]
        assert sorted(r[-1] for r in rows) == ["2", "2", "2"]
        cs[0].close()                                      # leaves with epoch -1: its partitions move at once
        left = cs.pop(0)
        now = settle(cs, lambda a: sorted(map(len, a)) == [3, 3], seen=seen)
        assert set().union(*now) == set(range(6))
        settle(cs, lambda a: len(seen) == 600, seen=seen)         # every record read, none left behind
        del left
    finally:
        for c in cs:
            c.close()


def test_a_regex_subscription_picks_up_new_topics_and_partitions(broker):
    """librdkafka sends a regex subscription (SubscribedTopicRegex, v1): the coordinator resolves it, and a topic
    created later or a topic that grows moves the group's epoch, so the consumer gets the new partitions."""
    make_topic(broker, "rx1", 2)
    make_topic(broker, "other", 1)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    c = consumer(broker, "regex")

    def owned():
        return sorted((tp.topic, tp.partition) for tp in c.assignment())

    try:
        c.subscribe(["^rx.*"])
        settle([c], lambda a: owned() == [("rx1", 0), ("rx1", 1)])
        make_topic(broker, "rx2", 1)
        settle([c], lambda a: owned() == [("rx1", 0), ("rx1", 1), ("rx2", 0)])
        for f in admin.create_partitions([ck.admin.NewPartitions("rx1", 3)]).values():
            f.result(30)
        settle([c], lambda a: owned() == [("rx1", 0), ("rx1", 1), ("rx1", 2), ("rx2", 0)])
    finally:
        c.close()


def test_a_killed_consumer_is_expired_after_the_session_timeout(broker):
    make_topic(broker, "four", 4)
    conf = {"bootstrap.servers": broker.bootstrap_servers, "group.id": "killed", "group.protocol": "consumer",
            "auto.offset.reset": "earliest"}
    child = subprocess.Popen([sys.executable, "-c", f"""
import confluent_kafka as ck
c = ck.Consumer({conf!r})
c.subscribe(["four"], on_assign=lambda c, ps: print("assigned", len(ps), flush=True))
while True:
    c.poll(0.1)
"""], stdout=subprocess.PIPE, text=True)
    local = None
    try:
        assert child.stdout.readline().startswith("assigned")
        local = consumer(broker, "killed")
        local.subscribe(["four"])
        settle([local], lambda a: len(a[0]) == 2)
        child.kill()                                       # no leave heartbeat: the session must run out
        child.wait(10)
        t = time.monotonic()
        settle([local], lambda a: len(a[0]) == 4, seconds=30)
        took = time.monotonic() - t
        assert took >= 2, f"moved after {took:.1f} s, before the 4 s session could end"
    finally:
        if child.poll() is None:
            child.kill()
        child.stdout.close()
        if local is not None:
            local.close()


def test_commits_are_resumed_by_a_restarted_group(broker):
    make_topic(broker, "resume", 2, records=100)
    c = consumer(broker, "resume-g")
    got = []
    try:
        c.subscribe(["resume"])
        deadline = time.monotonic() + 30
        while len(got) < 60 and time.monotonic() < deadline:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                got.append((m.partition(), m.offset()))
                c.commit(message=m, asynchronous=False)       # OffsetCommit with the member's epoch
        assert len(got) >= 60
    finally:
        c.close()
    c2 = consumer(broker, "resume-g")
    rest = []
    try:
        c2.subscribe(["resume"])
        deadline = time.monotonic() + 30
        while len(got) + len(rest) < 100 and time.monotonic() < deadline:
            m = c2.poll(0.1)
            if m is not None and m.error() is None:
                rest.append((m.partition(), m.offset()))
        committed = c2.committed([ck.TopicPartition("resume", p) for p in (0, 1)], timeout=10)
    finally:
        c2.close()
    assert not set(got) & set(rest), "records consumed again after their offsets were committed"
    assert len(set(got) | set(rest)) == 100
    assert sorted(tp.offset for tp in committed) == sorted(
        max((o for p, o in got if p == part), default=-1) + 1 for part in (0, 1))


def test_a_restarted_broker_reloads_the_group_with_its_members_and_epochs(start_broker, tmp_path):
    """The group's records in __consumer_offsets: a broker restarted on the same data dir describes the group
    as it was (member ids, epochs, assignments), with no member having heartbeated it yet."""
    data = tmp_path / "restarted"
    broker = start_broker(data_dir=data, **OVERRIDES)
    make_topic(broker, "reload", 4)
    cs = [consumer(broker, "reload-g") for _ in range(2)]
    try:
        for c in cs:
            c.subscribe(["reload"])
        settle(cs, lambda a: sorted(map(len, a)) == [2, 2])
        [before] = broker.node.group_coordinator.describe_consumer_groups(["reload-g"])
        assert str(before.state) == "Stable"
        broker.stop()
        again = start_broker(data_dir=data, **OVERRIDES)
        [after] = again.node.group_coordinator.describe_consumer_groups(["reload-g"])
    finally:
        for c in cs:
            c.close()
    assert (after.group_epoch, after.assignment_epoch, after.assignor) == (
        before.group_epoch, before.assignment_epoch, before.assignor)
    assert sorted(after.members, key=lambda m: m.member_id) == sorted(before.members, key=lambda m: m.member_id)
    assert sorted(len(m.assignment["reload"]) for m in after.members) == [2, 2]


def commit(c) -> None:
    """A synchronous commit of the consumer's positions; nothing new to commit is fine."""
    try:
        c.commit(asynchronous=False)
    except ck.KafkaException as e:
        if e.args[0].code() != ck.KafkaError._NO_OFFSET:
            raise


def test_the_group_keeps_its_assignment_when_its_coordinator_is_killed_on_three_brokers(zookeeper_server,
                                                                                       tmp_path):
    """Three brokers; two consumers split four partitions and commit. The group's coordinator (leader of its
    __consumer_offsets partition) is killed with -9: the new coordinator loads the group from its records, so
    the members go on with their member ids, epochs and partitions (no rejoin: the group epoch does not move,
    and no partition is unassigned for more than a few seconds), read every record and commit there."""
    from cluster_harness import OFFSETS_TOPIC, Cluster

    from seglog.offsets_store import partition_for_group
    from seglog.remote import RemoteNode

    def described(node):
        entry, _ = node.group_coordinator.describe_consumer_group("moved")
        return entry["group_epoch"], sorted((m["member_id"], m["member_epoch"]) for m in entry["members"])

    overrides = {"group.consumer.heartbeat.interval.ms": 300, "group.consumer.session.timeout.ms": 6000,
                 "group.consumer.min.heartbeat.interval.ms": 100, "group.consumer.min.session.timeout.ms": 1000}
    with Cluster(zookeeper_server.connect_string, tmp_path / "cluster", 3, overrides,
                 chroot=f"/kip848-{int(time.time() * 1000) % 10**8}") as cluster:
        cluster.create_topic("kc", 4)
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(400):
            p.produce("kc", str(i).encode(), partition=i % 4)
        assert p.flush(30) == 0
        conf = {"bootstrap.servers": cluster.bootstrap, "group.id": "moved", "group.protocol": "consumer",
                "auto.offset.reset": "earliest", "enable.auto.commit": False}
        cs = [Consumer(conf) for _ in range(2)]
        seen: set = set()
        try:
            for c in cs:
                c.subscribe(["kc"])
            settle(cs, lambda a: len(seen) >= 100 and sorted(map(len, a)) == [2, 2], seconds=60, seen=seen)
            for c in cs:
                commit(c)
            before = len(seen)
            with RemoteNode(cluster.bootstrap) as node:
                epochs = described(node)
            offsets_p = partition_for_group("moved", cluster.overrides["offsets.topic.num.partitions"])
            cluster.brokers[cluster.state(OFFSETS_TOPIC, offsets_p)["leader"]].kill()
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            unassigned_since: dict = {}
            longest = [0.0]

            def rejoined(a):
                try:
                    desc = admin.describe_consumer_groups(["moved"])["moved"].result(30)
                except ck.KafkaException:                  # the coordinator is moving
                    desc = None
                now, held = time.monotonic(), set().union(*a)
                for q in range(4):
                    if q in held:
                        unassigned_since.pop(q, None)
                    else:
                        longest[0] = max(longest[0], now - unassigned_since.setdefault(q, now))
                if desc is None:
                    return False
                return (len(seen) == 400 and sorted(map(len, a)) == [2, 2] and str(desc.state).endswith("STABLE")
                        and sorted(len(m.assignment.topic_partitions) for m in desc.members) == [2, 2])
            now = settle(cs, rejoined, seconds=90, seen=seen)
            assert set().union(*now) == {0, 1, 2, 3} and len(seen) >= before
            assert longest[0] < 5, f"a partition was unassigned for {longest[0]:.1f} s"
            with RemoteNode(cluster.bootstrap) as node:
                assert described(node) == epochs                 # same members, same epochs: nobody rejoined
            for c in cs:
                commit(c)                                      # accepted by the new coordinator
            committed = cs[0].committed([ck.TopicPartition("kc", q) for q in range(4)], timeout=30)
            assert [tp.offset for tp in committed] == [100, 100, 100, 100]
        finally:
            for c in cs:
                c.close()


def classic_consumer(broker, group, topic):
    from kafka import KafkaConsumer
    return KafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, group_id=group,
                         auto_offset_reset="earliest", enable_auto_commit=False, heartbeat_interval_ms=100,
                         session_timeout_ms=6000, retry_backoff_ms=50, metadata_max_age_ms=1000)


def classic_read(c, n, seconds=30):
    """Up to ``n`` (partition, offset) read by a kafka-python consumer, committed once read."""
    got = []
    deadline = time.monotonic() + seconds
    while len(got) < n and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=100, max_records=n - len(got)).values():
            got += [(r.partition, r.offset) for r in records]
    c.commit()
    return got


def group_type(broker, group):
    """The group's type as ListGroups gives it; the types filter (ListGroups v5) agrees."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    listed = {g.group_id: g.type for g in admin.list_consumer_groups().result(10).valid}.get(group)
    for kind in (ConsumerGroupType.CLASSIC, ConsumerGroupType.CONSUMER):
        only = {g.group_id: g.type for g in admin.list_consumer_groups(types={kind}).result(10).valid}
        assert (group in only) == (listed == kind) and set(only.values()) <= {kind}
    return listed


def test_an_empty_group_changes_protocol_keeping_its_offsets(broker):
    """Kafka 4.0's conversion of empty groups: a classic group whose members left (kafka-python) is taken over by
    a consumer-protocol member (librdkafka), which goes on from the committed offsets, and back again; ListGroups
    gives the group's type at each step and DescribeGroups v6 (kafka-python's admin) answers GROUP_ID_NOT_FOUND
    for the consumer group."""
    from kafka.admin import KafkaAdminClient
    make_topic(broker, "mig", 2, records=90)
    c = classic_consumer(broker, "mig-g", "mig")
    first = classic_read(c, 30)
    c.close()
    assert len(first) == 30 and group_type(broker, "mig-g") == ConsumerGroupType.CLASSIC
    k = consumer(broker, "mig-g")
    second = []
    try:
        k.subscribe(["mig"])
        deadline = time.monotonic() + 30
        while len(second) < 30 and time.monotonic() < deadline:
            m = k.poll(0.1)
            if m is not None and m.error() is None:
                second.append((m.partition(), m.offset()))
        k.commit(asynchronous=False)
        assert group_type(broker, "mig-g") == ConsumerGroupType.CONSUMER
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            assert admin.describe_groups(["mig-g"])["mig-g"]["error"] == (
                "[Error 69] GroupIdNotFoundError: Group mig-g is not a classic group.")
        finally:
            admin.close()
    finally:
        k.close()
    c = classic_consumer(broker, "mig-g", "mig")
    third = classic_read(c, 30)
    c.close()
    assert group_type(broker, "mig-g") == ConsumerGroupType.CLASSIC
    assert len(second) == 30 and len(third) == 30
    assert len(set(first) | set(second) | set(third)) == 90, "a record read twice or left out across the changes"


def test_a_classic_group_with_members_refuses_a_consumer_member_under_policy_disabled(start_broker):
    """group.consumer.migration.policy=disabled: a consumer-protocol member heartbeating to a classic group with
    members gets GROUP_ID_NOT_FOUND (librdkafka: fatal)."""
    broker = start_broker(**OVERRIDES, group_consumer_migration_policy="disabled")
    make_topic(broker, "live", 2, records=10)
    c = classic_consumer(broker, "live-c", "live")
    errors = []
    try:
        assert classic_read(c, 10)
        k = consumer(broker, "live-c", error_cb=errors.append)
        try:
            k.subscribe(["live"])
            deadline = time.monotonic() + 20
            while not errors and time.monotonic() < deadline:
                m = k.poll(0.1)
                if m is not None and m.error() is not None:
                    errors.append(m.error())
        finally:
            k.close()
        assert errors and errors[0].code() == ck.KafkaError._FATAL and "The group id does not exist" in errors[0].str()
    finally:
        c.close()


@pytest.mark.parametrize("first", ["classic", "consumer"])
def test_classic_and_consumer_members_share_a_group(broker, first):
    """Kafka 4.0's online migration (policy bidirectional): a kafka-python classic consumer and a librdkafka
    consumer-protocol consumer in one group, whichever came first (a classic group with a member is converted
    when the consumer-protocol member joins; a classic member joining a consumer group is served by it), split
    the partitions with none owned twice, and every record is read."""
    make_topic(broker, f"mixed-{first}", 4, records=200)
    seen = set()

    def poll_classic(c):
        for records in c.poll(timeout_ms=50).values():
            seen.update((r.partition, r.offset) for r in records)

    def poll_consumer(k):
        m = k.poll(0.05)
        if m is not None and m.error() is None:
            seen.add((m.partition(), m.offset()))

    c = k = None
    try:
        if first == "classic":
            c = classic_consumer(broker, f"mixed-{first}-g", f"mixed-{first}")
            deadline = time.monotonic() + 20
            while len(c.assignment()) < 4 and time.monotonic() < deadline:
                poll_classic(c)
            assert len(c.assignment()) == 4
        k = consumer(broker, f"mixed-{first}-g")
        k.subscribe([f"mixed-{first}"])
        if first == "consumer":
            settle([k], lambda a: a == [{0, 1, 2, 3}])
            c = classic_consumer(broker, f"mixed-{first}-g", f"mixed-{first}")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            poll_classic(c)
            poll_consumer(k)
            mine, theirs = {tp.partition for tp in c.assignment()}, {tp.partition for tp in k.assignment()}
            assert not mine & theirs, f"a partition owned twice: {mine} {theirs}"
            if len(mine) == len(theirs) == 2 and len(seen) == 200:
                break
        assert (len(mine), len(theirs), len(seen)) == (2, 2, 200)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        [d] = admin.describe_consumer_groups([f"mixed-{first}-g"]).values()
        assert len(d.result(10).members) == 2
    finally:
        for x in (c, k):
            if x is not None:
                x.close()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_a_group_upgraded_and_downgraded_as_its_members_change_protocol(broker, strategy):
    """librdkafka's upgrade/downgrade scenario (its suite's test_consumer_upgrade_downgrade): a classic member;
    a consumer-protocol one joins (the group becomes a CONSUMER group); the classic one leaves; a classic one
    joins (still CONSUMER); the consumer-protocol one leaves (CLASSIC again). At every step the members split
    the partitions, none owned twice."""
    topic = f"updown-{strategy}"
    make_topic(broker, topic, 4)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})

    def classic():
        return Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": topic, "group.protocol": "classic",
                         "partition.assignment.strategy": strategy, "auto.offset.reset": "earliest",
                         "heartbeat.interval.ms": 300, "session.timeout.ms": 6000})

    def group_type():
        return admin.describe_consumer_groups([topic])[topic].result(10).type

    members = []
    for add, expected in ((classic, ConsumerGroupType.CLASSIC), (lambda: consumer(broker, topic),
                                                                 ConsumerGroupType.CONSUMER),
                          (None, ConsumerGroupType.CONSUMER), (classic, ConsumerGroupType.CONSUMER),
                          (None, ConsumerGroupType.CLASSIC)):
        if add is None:
            members.pop(0).close()
        else:
            members.append(add())
            members[-1].subscribe([topic])
        share = 4 // len(members)
        settle(members, lambda a: all(len(x) == share for x in a) and len(set().union(*a)) == 4, seconds=60)
        deadline = time.monotonic() + 20
        while group_type() != expected and time.monotonic() < deadline:
            for m in members:
                m.poll(0.05)
        assert group_type() == expected
    for m in members:
        m.close()

"""A live consumer group migrating between the classic and the consumer (KIP-848) protocols, with librdkafka
(confluent-kafka) members against a seglog broker, as confluent-kafka-python's upgrade/downgrade test: a
classic member, then a consumer-protocol member (the group becomes a CONSUMER group, 5/5), the classic one
leaves, a new classic member joins the consumer group (5/5, its commits accepted), then the consumer-protocol
member leaves (the group is CLASSIC again, the last member has all 10). No partition is ever assigned to two
members at once, and every record is read."""

from __future__ import annotations

import pytest

ck = pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer, ConsumerGroupType, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from test_consumer_group_protocol import OVERRIDES, make_topic, settle  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]

PARTITIONS, RECORDS = 10, 1000


@pytest.fixture
def broker(start_broker):
    return start_broker(group_initial_rebalance_delay_ms=0, **OVERRIDES)


def member(broker, group, protocol, strategy=None):
    conf = {"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "group.protocol": protocol,
            "auto.offset.reset": "earliest", "enable.auto.commit": False}
    if protocol == "classic":
        conf.update({"partition.assignment.strategy": strategy, "heartbeat.interval.ms": 300,
                     "session.timeout.ms": 6000})
    c = Consumer(conf)
    c.subscribe([group])
    return c


def group_type(admin, group):
    return admin.describe_consumer_groups([group])[group].result(30).type


@pytest.mark.parametrize("strategy", ["roundrobin", "cooperative-sticky"])
def test_a_live_group_upgrades_and_downgrades(broker, strategy):
    group = f"migrate-{strategy}"
    make_topic(broker, group, PARTITIONS, records=RECORDS)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    seen: set = set()
    halves = lambda a: sorted(map(len, a)) == [5, 5] and len(set().union(*a)) == PARTITIONS  # noqa: E731
    members = [member(broker, group, "classic", strategy)]
    try:
        settle(members, lambda a: a == [set(range(PARTITIONS))], seen=seen)
        assert group_type(admin, group) == ConsumerGroupType.CLASSIC

        members.append(member(broker, group, "consumer"))
        settle(members, halves, seen=seen)
        assert group_type(admin, group) == ConsumerGroupType.CONSUMER

        members.pop(0).close()
        settle(members, lambda a: a == [set(range(PARTITIONS))], seen=seen)
        assert group_type(admin, group) == ConsumerGroupType.CONSUMER

        members.append(member(broker, group, "classic", strategy))
        settle(members, halves, seen=seen)
        assert group_type(admin, group) == ConsumerGroupType.CONSUMER
        desc = admin.describe_consumer_groups([group])[group].result(30)
        assert len(desc.members) == 2
        classic = members[1]
        committed = classic.commit(offsets=[TopicPartition(group, tp.partition, 0) for tp in classic.assignment()],
                                   asynchronous=False)                 # OffsetCommit of a classic member: accepted
        assert all(tp.error is None for tp in committed)

        members.pop(0).close()
        settle(members, lambda a: a == [set(range(PARTITIONS))], seen=seen)
        assert group_type(admin, group) == ConsumerGroupType.CLASSIC
        settle(members, lambda a: len(seen) == RECORDS, seen=seen)      # every record read
    finally:
        for c in members:
            c.close()

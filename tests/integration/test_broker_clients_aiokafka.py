"""seglog's broker against aiokafka (asyncio Kafka client): producer and consumer group round trip."""

from __future__ import annotations

import asyncio
import random

import pytest

aiokafka = pytest.importorskip("aiokafka")

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: E402
from aiokafka.structs import OffsetAndMetadata, TopicPartition  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]


def test_aiokafka_producer_and_consumer_group_round_trip(seglog_broker, topic_name):
    topic, group = topic_name(), topic_name()
    seglog_broker.node.create_topic(topic, partitions=3)
    bs = seglog_broker.bootstrap_servers
    rnd = random.Random(4)
    records = [(None if i % 6 == 0 else b"k%d" % (i % 10), rnd.randbytes(rnd.randrange(0, 120)),
                [("n", str(i).encode())] if i % 3 else [], 1_700_000_000_000 + i) for i in range(1200)]

    async def main():
        produced = {}
        p = AIOKafkaProducer(bootstrap_servers=bs, enable_idempotence=True, acks="all", compression_type="gzip",
                             linger_ms=5)
        await p.start()
        try:
            futs = [(await p.send(topic, value=v, key=k, headers=h, timestamp_ms=ts), (k, v, h, ts))
                    for k, v, h, ts in records]
            for fut, rec in futs:
                md = await fut
                produced[(md.partition, md.offset)] = rec
        finally:
            await p.stop()

        members = [AIOKafkaConsumer(topic, bootstrap_servers=bs, group_id=group, enable_auto_commit=False,
                                    auto_offset_reset="earliest", heartbeat_interval_ms=100,
                                    session_timeout_ms=6000, client_id=f"aio{i}") for i in range(2)]
        got = []
        for c in members:
            await c.start()
        try:
            deadline = asyncio.get_running_loop().time() + 60
            while len(got) < len(records) and asyncio.get_running_loop().time() < deadline:
                for c in members:
                    batch = await c.getmany(timeout_ms=100)
                    for tp, msgs in batch.items():
                        got.extend((m.partition, m.offset, m.key, m.value, [(k, bytes(v)) for k, v in m.headers],
                                    m.timestamp) for m in msgs)
                        await c.commit({tp: OffsetAndMetadata(msgs[-1].offset + 1, "")})
            assignments = [c.assignment() for c in members]
            committed = {p: await members[0].committed(TopicPartition(topic, p)) for p in range(3)}
        finally:
            for c in members:
                await c.stop()
        return produced, got, assignments, committed

    produced, got, assignments, committed = asyncio.run(main())
    assert len(got) == len(records) == len(produced)
    assert {(p, o) for p, o, *_ in got} == set(produced)
    last: dict[int, int] = {}
    for p, o, key, value, headers, ts in got:
        assert o > last.get(p, -1)
        last[p] = o
        assert (key, value, headers, ts) == produced[(p, o)]
    assert all(assignments) and set().union(*assignments) == {TopicPartition(topic, p) for p in range(3)}
    assert committed == {p: seglog_broker.node.partition(topic, p).high_watermark for p in range(3)}

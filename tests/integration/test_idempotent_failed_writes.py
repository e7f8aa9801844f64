"""librdkafka's idempotent producer against a lone broker whose writes fail for a while: for 1.5 s the fault
layer fails one segment write every 100 ms with ENOSPC (a disk on the edge of full), while every fsync of the
topic takes 10 ms and the producer sends batches of two messages faster than they are stored, so several produce
requests per partition are in flight and those behind a failed batch find the disk writable. They are answered
KAFKA_STORAGE_ERROR, not OUT_OF_ORDER_SEQUENCE_NUMBER, so the producer retries them with the same sequences and
never bumps its epoch (on which it sends again, as new batches, those whose requests it gave up on though they
were stored): every message is stored once, in order, under the producer's first epoch."""

import errno
import json
import time

import pytest

from seglog import _engine
from seglog.faults import FaultPlan

PARTITIONS = 2
FAIL_AFTER_S, FAIL_FOR_S, BURST_S, MESSAGES_PER_S = 0.5, 1.5, 0.1, 300


def test_idempotent_producer_keeps_its_epoch_through_failed_writes(start_broker):
    ck = pytest.importorskip("confluent_kafka")
    b = start_broker()
    b.node.create_topic("wf", PARTITIONS, config={"flush.messages": "1"})       # every append fsyncs
    delivered, errors, stats = [], [], []

    def report(err, msg):
        (errors if err is not None else delivered).append(err or msg.value())

    def on_stats(raw):
        eos = json.loads(raw).get("eos", {})
        stats.append((eos.get("idemp_state"), eos.get("producer_id"), eos.get("producer_epoch")))

    prod = ck.Producer({"bootstrap.servers": b.bootstrap_servers, "enable.idempotence": True, "acks": "all",
                        "max.in.flight.requests.per.connection": 5, "linger.ms": 10,
                        "batch.num.messages": 2, "message.timeout.ms": 60000, "retry.backoff.ms": 50,
                        "statistics.interval.ms": 100, "stats_cb": on_stats, "on_delivery": report})
    sent = {p: [] for p in range(PARTITIONS)}
    slow = FaultPlan().delay("fdatasync", 0.01, path="*/wf-*/*")
    failing = []                  # one plan per burst, over `slow`: its first segment write fails, later ones work
    i, done_failing = 0, False
    with slow:
        t0 = time.monotonic()
        while (now := time.monotonic() - t0) < FAIL_AFTER_S + FAIL_FOR_S + 0.5:
            in_window = FAIL_AFTER_S <= now < FAIL_AFTER_S + FAIL_FOR_S
            if in_window and now >= FAIL_AFTER_S + len(failing) * BURST_S:
                if failing:
                    failing[-1].uninstall()
                failing.append(FaultPlan().delay("fdatasync", 0.01, path="*/wf-*/*")
                               .fail("pwrite", errno.ENOSPC, path="*/wf-*/*.log").install())
            elif not in_window and failing and not done_failing:
                failing[-1].uninstall()
                done_failing = True
            while i < now * MESSAGES_PER_S:
                value = b"m-%06d" % i
                prod.produce("wf", value, partition=i % PARTITIONS)
                sent[i % PARTITIONS].append(value)
                i += 1
            prod.poll(0.005)
        assert prod.flush(60) == 0
    failed_writes = sum(op == "pwrite" for f in failing for op, _, _ in f.fired)
    assert failed_writes, "no write failed"
    assert not errors, errors[:3]
    assert len(delivered) == i
    for p in range(PARTITIONS):
        log = b.node.partition("wf", p).log
        stored = [r.value for r in log.records()]
        assert len(stored) == len(set(stored)), f"partition {p}: {len(stored) - len(set(stored))} stored twice"
        assert stored == sent[p], f"partition {p}: not every message once and in order"
        epochs = {x.producer_epoch for x in _engine.batches(log.read(0, 1 << 30), False)}
        assert epochs == {0}, f"partition {p}: batches stored under epochs {sorted(epochs)}"
    assert stats and {s[2] for s in stats if s[0] == "Assigned"} == {0}, f"the producer bumped its epoch: {stats}"
    print(f"{i} messages, {failed_writes} failed writes")

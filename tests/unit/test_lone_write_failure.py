"""A lone broker keeps serving after a failed write (a full disk takes writes again once space is freed), so an
idempotent producer's batches sent after the failed one reach the log while it is missing. They are refused
with KAFKA_STORAGE_ERROR, which clients retry with the same sequence, not OUT_OF_ORDER_SEQUENCE_NUMBER, on which
librdkafka bumps its epoch on every partition and sends again, as new batches, those whose requests timed out
though they were stored. The failed batch's retry is written, then the ones after it; a gap no failed write
explains is still OUT_OF_ORDER_SEQUENCE_NUMBER.

Produce requests go through the broker's handler to a lone node (LocalView); writes fail through the fault
layer."""

from __future__ import annotations

import asyncio
import errno
from types import SimpleNamespace

import pytest

from helpers.kafka_wire import record_batch
from seglog.broker.handlers import Handlers
from seglog.broker.local_view import LocalView
from seglog.broker.metrics import Metrics
from seglog.faults import FaultPlan
from seglog.node import Node
from seglog.protocol import RequestHeader
from test_broker_handlers import ALLOW_ALL

PRODUCE_V9 = RequestHeader(0, 9, 1, "test")
NONE, OUT_OF_ORDER_SEQUENCE_NUMBER, KAFKA_STORAGE_ERROR = 0, 45, 56
PID = 5000


async def _inline(fn, *args):
    return fn(*args)


@pytest.fixture
def lone(tmp_path):
    """A lone node with topic t (one partition) behind the produce handler: .produce(batch) answers
    (error code, base offset)."""
    node = Node(tmp_path / "d")
    node.create_topic("t", 1)
    handlers = Handlers(SimpleNamespace(**ALLOW_ALL, node=node, config=node.config,
                                        view=LocalView(node, 0, "127.0.0.1", 9092), metrics=Metrics(),
                                        on_disk=_inline, append_on_disk=lambda t, p, fn, *args: _inline(fn, *args)))

    def produce(batch: bytes) -> tuple[int, int]:
        body = {"transactional_id": None, "acks": -1, "timeout_ms": 10_000,
                "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}]}
        r = asyncio.run(handlers.handle_produce(PRODUCE_V9, body))["responses"][0]["partition_responses"][0]
        return r["error_code"], r["base_offset"]

    yield SimpleNamespace(produce=produce, log=node.partition("t", 0).log)
    node.close()


def batch(seq: int, value: bytes, epoch: int = 0, pid: int = PID, records: int = 1) -> bytes:
    return record_batch([(1, None, value + b"%d" % i, []) for i in range(records)], producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq)


def full_disk(times: int = 1) -> FaultPlan:
    """The next `times` segment writes fail with ENOSPC."""
    return FaultPlan().fail("pwrite", errno.ENOSPC, path="*.log", times=times)


def values(log) -> list[bytes]:
    return [r.value for r in log.records()]


def producers(log) -> list[tuple[int, int, int]]:
    return [(p.producer_id, p.producer_epoch, p.last_sequence) for p in log.active_producers()]


def test_batches_after_a_failed_write_are_storage_errors_until_it_is_retried(lone):
    assert lone.produce(batch(0, b"a")) == (NONE, 0)
    with full_disk() as plan:
        assert lone.produce(batch(1, b"b", records=2))[0] == KAFKA_STORAGE_ERROR
        assert plan.fired
        # the batches in flight behind it: missing only their predecessor
        assert lone.produce(batch(3, b"c"))[0] == KAFKA_STORAGE_ERROR
        assert lone.produce(batch(4, b"d"))[0] == KAFKA_STORAGE_ERROR
    assert lone.log.end_offset == 1
    assert lone.produce(batch(1, b"b", records=2)) == (NONE, 1)          # the retries, in order, same epoch
    assert lone.produce(batch(3, b"c")) == (NONE, 3)
    assert lone.produce(batch(4, b"d")) == (NONE, 4)
    assert lone.produce(batch(3, b"c")) == (NONE, 3)                     # a duplicate: not written again
    assert values(lone.log) == [b"a0", b"b0", b"b1", b"c0", b"d0"]
    assert producers(lone.log) == [(PID, 0, 4)]
    assert lone.produce(batch(6, b"e"))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER   # written: a gap is a gap again


def test_a_retry_that_fails_again_keeps_the_later_batches_waiting(lone):
    assert lone.produce(batch(0, b"a")) == (NONE, 0)
    with full_disk(times=2):
        assert lone.produce(batch(1, b"b"))[0] == KAFKA_STORAGE_ERROR
        assert lone.produce(batch(2, b"c"))[0] == KAFKA_STORAGE_ERROR
        assert lone.produce(batch(1, b"b"))[0] == KAFKA_STORAGE_ERROR      # still full
        assert lone.produce(batch(2, b"c"))[0] == KAFKA_STORAGE_ERROR
    assert lone.produce(batch(1, b"b")) == (NONE, 1)
    assert lone.produce(batch(2, b"c")) == (NONE, 2)
    assert values(lone.log) == [b"a0", b"b0", b"c0"] and producers(lone.log) == [(PID, 0, 2)]


def test_a_producers_first_batch_failing_holds_back_its_second(lone):
    """No state yet (any first sequence is accepted): the second batch must still not be written before the
    first."""
    with full_disk():
        assert lone.produce(batch(0, b"a"))[0] == KAFKA_STORAGE_ERROR
    assert lone.produce(batch(1, b"b"))[0] == KAFKA_STORAGE_ERROR
    assert lone.produce(batch(0, b"a")) == (NONE, 0)
    assert lone.produce(batch(1, b"b")) == (NONE, 1)
    assert values(lone.log) == [b"a0", b"b0"]


def test_gaps_no_failed_write_explains_are_still_out_of_order(lone):
    assert lone.produce(batch(0, b"a")) == (NONE, 0)
    assert lone.produce(batch(2, b"skip"))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER       # no failure at all
    assert lone.produce(batch(0, b"o", pid=PID + 1)) == (NONE, 1)
    with full_disk():
        assert lone.produce(batch(1, b"b"))[0] == KAFKA_STORAGE_ERROR
    # another producer's gap, another epoch of the same producer, a batch before the failed one: not its doing
    assert lone.produce(batch(2, b"o", pid=PID + 1))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert lone.produce(batch(3, b"x", epoch=1))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert lone.produce(batch(0, b"y", records=3))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert lone.produce(batch(1, b"b")) == (NONE, 2)
    assert values(lone.log) == [b"a0", b"o0", b"b0"]
    assert producers(lone.log) == [(PID, 0, 1), (PID + 1, 0, 0)]


def test_another_producers_write_in_between_does_not_end_the_wait(lone):
    """The disk takes writes again and another producer's batch is stored before this producer's retry: its
    batch sent after the failed one is still a storage error, not out of order."""
    assert lone.produce(batch(0, b"a")) == (NONE, 0)
    with full_disk():
        assert lone.produce(batch(1, b"b"))[0] == KAFKA_STORAGE_ERROR
    assert lone.produce(batch(0, b"o", pid=PID + 1)) == (NONE, 1)
    assert lone.produce(batch(2, b"c"))[0] == KAFKA_STORAGE_ERROR
    assert lone.produce(batch(1, b"b")) == (NONE, 2)
    assert lone.produce(batch(2, b"c")) == (NONE, 3)
    assert producers(lone.log) == [(PID, 0, 2), (PID + 1, 0, 0)]

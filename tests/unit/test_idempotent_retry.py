"""An idempotent producer's retry reaching a replicated partition's leader, as Kafka's ProducerStateManager
treats it: a batch repeating one of the producer's last five (same producer id, epoch and sequences) is not
written again and is answered with the original offsets once those are replicated, also while the original
still waits for acks=all, across an ISR shrink, a re-election of the same leader in a newer epoch and a
leadership resigned and taken again; a batch under a bumped epoch is a new batch (sequence 0) or out of order.
A leader whose disk failed refuses the batches after the failed one with KAFKA_STORAGE_ERROR, as Kafka's offline
log directory, not OUT_OF_ORDER_SEQUENCE_NUMBER (which makes librdkafka bump the epoch on all partitions and send
again, as new batches, those whose requests timed out though stored).

Produce requests go through the broker's handler to a ReplicaManager leading ``t-0`` on the in-memory metadata
store; the followers are driven by hand (``follower_fetched``)."""

from __future__ import annotations

import asyncio
import errno
from types import SimpleNamespace

import pytest

from helpers.kafka_wire import record_batch
from seglog.broker.handlers import Handlers
from seglog.broker.metrics import Metrics
from seglog.cluster.member import ClusterView
from seglog.cluster.memory import MemoryCluster, MemoryMetadataStore
from seglog.cluster.metastore import BrokerInfo, PartitionState, TopicAssignment
from seglog.config import BrokerConfig
from seglog.errors import StorageError
from seglog.faults import FaultPlan
from seglog.node import Node
from seglog.protocol import RequestHeader
from seglog.replication.manager import ReplicaManager
from test_broker_handlers import ALLOW_ALL

PRODUCE_V9 = RequestHeader(0, 9, 1, "test")
NONE, OUT_OF_ORDER_SEQUENCE_NUMBER, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS = 0, 45, 6, 19
KAFKA_STORAGE_ERROR = 56
PID = 4000


async def _inline(fn, *args):
    return fn(*args)


@pytest.fixture
def leader(tmp_path):
    """Broker 1 leading t-0 (replicas 1, 2, 3; min.insync.replicas 2) in epoch 0: .produce(batch, timeout_ms)
    answers (error code, base offset); .fetched(replica, offset) is a follower's fetch; .state(...) applies a
    partition state as the controller writes it."""
    mc = MemoryCluster()
    stores = [MemoryMetadataStore(mc) for _ in (1, 2, 3)]
    for i, s in enumerate(stores, 1):
        s.register_broker(BrokerInfo(i, "127.0.0.1", 9000 + i))
    store = stores[0]
    store.create_topic(TopicAssignment("t", {0: (1, 2, 3)}), {})
    config = BrokerConfig.from_properties({"broker.id": 1, "min.insync.replicas": 2})
    node = Node(tmp_path / "d1", config)
    node.create_topic("t", 1, {"min.insync.replicas": 2})
    rm = ReplicaManager(node, 1, config, store, lambda broker_id: None, None)
    replicas = (1, 2, 3)

    def state(leader_id=1, epoch=0, isr=replicas):
        rm.apply("t", 0, PartitionState(leader_id, epoch, tuple(isr)), replicas)

    state()
    view = ClusterView(SimpleNamespace(replicas=rm))
    handlers = Handlers(SimpleNamespace(**ALLOW_ALL, node=node, config=config, view=view, metrics=Metrics(),
                                        on_disk=_inline, append_on_disk=lambda t, p, fn, *args: _inline(fn, *args)))

    async def produce(batch: bytes, timeout_ms: int = 10_000) -> tuple[int, int]:
        body = {"transactional_id": None, "acks": -1, "timeout_ms": timeout_ms,
                "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}]}
        r = (await handlers.handle_produce(PRODUCE_V9, body))["responses"][0]["partition_responses"][0]
        return r["error_code"], r["base_offset"]

    def fetched(replica: int, offset: int) -> None:
        rm.follower_fetched("t", 0, replica, offset)

    yield SimpleNamespace(produce=produce, fetched=fetched, state=state, log=node.partition("t", 0).log, rm=rm,
                          node=node)
    rm.close()
    node.close()
    for s in stores:
        s.close()


def batch(seq: int, value: bytes, epoch: int = 0, pid: int = PID, records: int = 1) -> bytes:
    return record_batch([(1, None, value + b"%d" % i, []) for i in range(records)], producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq)


async def _waiting(coro):
    """Start `coro` as a task and let it run up to its acks=all wait."""
    task = asyncio.ensure_future(coro)
    for _ in range(20):
        await asyncio.sleep(0)
    assert not task.done()
    return task


def _values(log) -> list[bytes]:
    return [r.value for r in log.records()]


def test_a_retry_while_the_original_waits_for_acks_is_answered_with_the_original_offset(leader):
    async def scenario():
        original = await _waiting(leader.produce(batch(0, b"a")))
        other = await _waiting(leader.produce(batch(0, b"b", pid=PID + 1)))     # another producer in between
        retry = await _waiting(leader.produce(batch(0, b"a")))
        assert leader.log.end_offset == 2                          # the retry was not written
        leader.fetched(2, 2)
        leader.fetched(3, 2)
        return await original, await other, await retry
    assert asyncio.run(scenario()) == ((NONE, 0), (NONE, 1), (NONE, 0))
    assert _values(leader.log) == [b"a0", b"b0"]


def test_a_retry_after_the_original_timed_out_in_the_acks_wait_is_not_written_again(leader):
    async def scenario():
        first = await leader.produce(batch(0, b"a", records=3), timeout_ms=50)   # followers stuck: timed out
        leader.fetched(2, 3)
        leader.fetched(3, 3)
        return first, await leader.produce(batch(0, b"a", records=3))
    first, retry = asyncio.run(scenario())
    assert first[0] != NONE and retry == (NONE, 0)
    assert leader.log.end_offset == 3


def test_a_retry_across_an_isr_shrink_in_the_same_epoch_is_not_written_again(leader):
    async def scenario():
        original = await _waiting(leader.produce(batch(0, b"a")))
        leader.fetched(2, 0)
        leader.state(isr=(1, 2))                                   # broker 3 leaves the ISR, epoch kept
        retry = await _waiting(leader.produce(batch(0, b"a")))
        mid = await _waiting(leader.produce(batch(0, b"b", pid=PID + 1)))
        leader.fetched(2, 2)
        return await original, await retry, await mid
    assert asyncio.run(scenario()) == ((NONE, 0), (NONE, 0), (NONE, 1))
    assert _values(leader.log) == [b"a0", b"b0"]


def test_a_retry_below_min_insync_replicas_is_refused_before_it_is_deduplicated(leader):
    """Kafka checks the ISR against min.insync.replicas before the append (NOT_ENOUGH_REPLICAS: not written);
    once the ISR is back the retry is the duplicate it is."""
    async def scenario():
        original = await _waiting(leader.produce(batch(0, b"a")))
        leader.state(isr=(1,))
        refused = await leader.produce(batch(0, b"a"))
        leader.state(isr=(1, 2))
        leader.fetched(2, 1)
        return await original, refused, await leader.produce(batch(0, b"a"))
    original, refused, retry = asyncio.run(scenario())
    assert refused == (NOT_ENOUGH_REPLICAS, -1) and retry == (NONE, 0)
    assert leader.log.end_offset == 1


def test_a_retry_after_the_leader_is_reelected_in_a_newer_epoch_is_not_written_again(leader):
    async def scenario():
        original = await _waiting(leader.produce(batch(0, b"a")))
        leader.state(epoch=1, isr=(1, 2))                          # the same leader, a newer epoch
        retry = await _waiting(leader.produce(batch(0, b"a")))
        leader.fetched(2, 1)
        return await original, await retry
    assert asyncio.run(scenario()) == ((NONE, 0), (NONE, 0))
    assert leader.log.end_offset == 1 and leader.log.leader_epochs == [(0, 0), (1, 1)]


def test_a_retry_after_the_leadership_was_resigned_and_taken_again_is_not_written_again(leader):
    async def scenario():
        original = await _waiting(leader.produce(batch(0, b"a")))
        leader.state(leader_id=2, epoch=1)                         # broker 2 leads: the wait fails
        lost = await original
        leader.state(leader_id=1, epoch=2)                         # and broker 1 again
        retry = await _waiting(leader.produce(batch(0, b"a")))
        leader.fetched(2, 1)
        leader.fetched(3, 1)
        return lost, await retry
    lost, retry = asyncio.run(scenario())
    assert lost == (NOT_LEADER_OR_FOLLOWER, -1) and retry == (NONE, 0)
    assert leader.log.end_offset == 1


def test_a_batch_under_a_bumped_epoch_starts_over_at_sequence_zero(leader):
    """KIP-360: a producer whose epoch was bumped (InitProducerId, or librdkafka's own bump) numbers its
    batches from 0 again. Kafka takes sequence 0 of the new epoch as a new batch (a record the client sends
    again under it is stored again: the broker cannot tell), and refuses any other first sequence."""
    async def scenario():
        first = await _waiting(leader.produce(batch(0, b"a")))
        second = await _waiting(leader.produce(batch(1, b"b")))
        leader.fetched(2, 2)
        leader.fetched(3, 2)
        out = [await first, await second]
        out.append(await leader.produce(batch(1, b"b", epoch=1)))     # not 0 in the new epoch
        resent = await _waiting(leader.produce(batch(0, b"b", epoch=1)))
        leader.fetched(2, 3)
        leader.fetched(3, 3)
        out.append(await resent)
        out.append(await leader.produce(batch(0, b"b", epoch=0), timeout_ms=50))   # the old epoch is fenced
        return out
    first, second, gap, resent, fenced = asyncio.run(scenario())
    assert (first, second, resent) == ((NONE, 0), (NONE, 1), (NONE, 2))
    assert gap == (OUT_OF_ORDER_SEQUENCE_NUMBER, -1) and fenced[0] != NONE
    assert _values(leader.log) == [b"a0", b"b0", b"b0"]


def test_after_a_write_failed_on_a_full_disk_the_next_batches_are_storage_errors_not_out_of_order(leader):
    """The chaos duplicate of issue 12: a leader's write fails (ENOSPC), then the producer's next in-flight batch
    arrives. Sequence-checked, it would be OUT_OF_ORDER_SEQUENCE_NUMBER (its predecessor is missing), on which
    librdkafka bumps the epoch of every partition and resends, as sequence 0 of the new epoch, the batches of
    requests that timed out elsewhere although their leader stored them: stored twice. Kafka's log directory is
    offline after the failure and the batch gets KAFKA_STORAGE_ERROR (retried with the same sequence)."""
    async def scenario():
        first = await _waiting(leader.produce(batch(0, b"a")))
        leader.fetched(2, 1)
        leader.fetched(3, 1)
        out = [await first]
        plan = FaultPlan()
        plan.fail("pwrite", errno.ENOSPC, path="*/t-0/*.log", times=None)
        with plan:
            out.append(await leader.produce(batch(1, b"b")))
            assert plan.fired
        # what the broker does with a disk failure of a cluster member (Broker.log_dir_failed)
        leader.node.fail_log_dir(StorageError("cannot append to segment: No space left on device", None,
                                              errno.ENOSPC))
        out.append(await leader.produce(batch(2, b"c")))
        out.append(await leader.produce(batch(1, b"b")))            # the retry too, until the broker is gone
        return out
    first, failed, next_one, retry = asyncio.run(scenario())
    assert first == (NONE, 0)
    assert failed == next_one == retry == (KAFKA_STORAGE_ERROR, -1)
    assert leader.log.end_offset == 1

"""A leader refuses an acks=all batch with NOT_ENOUGH_REPLICAS (the ISR is below min.insync.replicas) before
the log, so nothing is stored; if the ISR grows back before the producer's next pipelined batch arrives, that
one would be OUT_OF_ORDER_SEQUENCE_NUMBER, on which librdkafka bumps its epoch and sends again, as new batches
under the new epoch, those it cannot tell were stored (seen in a chaos run: a batch answered
NOT_ENOUGH_REPLICAS_AFTER_APPEND was stored twice). The later batches get NOT_ENOUGH_REPLICAS too until the
refused one is retried, so the client retries them in order with their sequences.

The same for NOT_LEADER_OR_FOLLOWER from a replica that does not lead yet: clients may learn a new leader (from
any broker's metadata) before it leads, and a batch pipelined behind the refused one then finds it leading (seen
in chaos rolling restarts: librdkafka bumped its epoch on the OUT_OF_ORDER_SEQUENCE_NUMBER that followed).

Produce requests go through the broker's handler to a node whose view refuses while `refusing` (an error class)
is set."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from helpers.kafka_wire import record_batch
from seglog.broker.handlers import Handlers
from seglog.broker.local_view import LocalView
from seglog.broker.metrics import Metrics
from seglog.errors import NotEnoughReplicasError, NotLeaderOrFollowerError
from seglog.node import Node
from seglog.protocol import RequestHeader
from test_broker_handlers import ALLOW_ALL

PRODUCE_V9 = RequestHeader(0, 9, 1, "test")
NONE, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, OUT_OF_ORDER_SEQUENCE_NUMBER = 0, 6, 19, 45
PID = 7000


async def _inline(fn, *args):
    return fn(*args)


class RefusingView(LocalView):
    refusing: type | None = None

    def check_produce(self, topic, index, acks):
        if self.refusing is not None and acks == -1:
            raise self.refusing(f"{topic}-{index}: refused")
        super().check_produce(topic, index, acks)


@pytest.fixture
def leader(tmp_path):
    node = Node(tmp_path / "d")
    node.create_topic("t", 1)
    view = RefusingView(node, 0, "127.0.0.1", 9092)
    handlers = Handlers(SimpleNamespace(**ALLOW_ALL, node=node, config=node.config, view=view, metrics=Metrics(),
                                        on_disk=_inline, append_on_disk=lambda t, p, fn, *args: _inline(fn, *args)))

    def produce(seq: int, epoch: int = 0, pid: int = PID) -> int:
        batch = record_batch([(1, None, b"s%d" % seq, [])], producer_id=pid, producer_epoch=epoch,
                             base_sequence=seq)
        body = {"transactional_id": None, "acks": -1, "timeout_ms": 10_000,
                "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch}]}]}
        r = asyncio.run(handlers.handle_produce(PRODUCE_V9, body))["responses"][0]["partition_responses"][0]
        return r["error_code"]

    yield SimpleNamespace(produce=produce, view=view, log=node.partition("t", 0).log, batch=record_batch)
    node.close()


def stored(log) -> list[bytes]:
    return [r.value for r in log.records()]


def test_batches_after_a_refused_one_are_refused_alike_until_it_is_retried(leader):
    assert leader.produce(0) == NONE
    leader.view.refusing = NotEnoughReplicasError
    assert leader.produce(1) == NOT_ENOUGH_REPLICAS
    leader.view.refusing = None                                   # the ISR is back before seq 2 arrives
    assert leader.produce(2) == NOT_ENOUGH_REPLICAS, "seq 1 is missing only because it was refused"
    assert leader.produce(3) == NOT_ENOUGH_REPLICAS
    assert [leader.produce(s) for s in (1, 2, 3)] == [NONE] * 3     # the client's in-order retries
    assert stored(leader.log) == [b"s0", b"s1", b"s2", b"s3"]
    assert leader.produce(5) == OUT_OF_ORDER_SEQUENCE_NUMBER, "a gap no refusal explains"


def test_a_refusal_of_a_batch_that_was_out_of_order_anyway_changes_nothing(leader):
    assert leader.produce(0) == NONE
    leader.view.refusing = NotEnoughReplicasError
    assert leader.produce(7) == NOT_ENOUGH_REPLICAS               # not the next batch: nothing remembered
    assert leader.produce(1, pid=PID + 1) == NOT_ENOUGH_REPLICAS  # another producer, unknown here
    leader.view.refusing = None
    assert leader.produce(1) == NONE
    assert leader.produce(8) == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert leader.produce(0, pid=PID + 1) == NONE, "an unknown producer's refused batch holds nothing back"
    assert leader.produce(0, epoch=1) == NONE, "a new epoch starts again at 0"


def test_a_replica_that_refused_as_not_leader_refuses_alike_once_it_leads(leader):
    assert leader.produce(0) == NONE
    leader.view.refusing = NotLeaderOrFollowerError                 # clients think it leads; it does not yet
    assert leader.produce(1) == NOT_LEADER_OR_FOLLOWER
    leader.view.refusing = None                                     # it leads when seq 2 arrives
    assert leader.produce(2) == NOT_LEADER_OR_FOLLOWER, "seq 1 is missing only because it was refused"
    assert [leader.produce(s) for s in (1, 2)] == [NONE] * 2
    assert stored(leader.log) == [b"s0", b"s1", b"s2"]


def test_a_follower_forgets_a_refusal_once_the_producer_s_batch_is_replicated(leader):
    """The producer went on with the real leader: its batches reach this replica by replication, and so must
    its next batches once this replica leads."""
    assert leader.produce(0) == NONE
    leader.view.refusing = NotLeaderOrFollowerError
    assert leader.produce(1) == NOT_LEADER_OR_FOLLOWER
    copied = bytearray(leader.batch([(1, None, b"s1", [])], producer_id=PID, producer_epoch=0, base_sequence=1))
    copied[0:8] = (1).to_bytes(8, "big")                             # offset 1, as the leader stored it
    leader.log.append_as_follower(bytes(copied))
    leader.view.refusing = None
    assert leader.produce(2) == NONE
    assert stored(leader.log) == [b"s0", b"s1", b"s2"]

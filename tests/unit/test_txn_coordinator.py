"""The transaction coordinator (seglog.txn): Kafka's state machine, fencing by epoch, the state log in
__transaction_state and its reload, timeouts, id expiry, KIP-890 verification. Markers go to a recording
channel here (the integration tests write real ones)."""

import dataclasses
import struct
import threading
import time

import pytest

import seglog
from seglog.errors import (ConcurrentTransactionsError, CoordinatorLoadInProgressError, InvalidProducerIdMappingError,
                           InvalidRequestError, InvalidTransactionTimeoutError, InvalidTxnStateError,
                           NotCoordinatorError, ProducerFencedError, TransactionalIdNotFoundError,
                           UnknownTopicOrPartitionError)
from seglog.offsets_store import java_string_hash
from seglog.txn import log_format as fmt
from seglog.txn.coordinator import TransactionCoordinator
from seglog.txn.markers import MarkerChannel
from seglog.txn.metadata import TxnState
from seglog.txn.state_store import TransactionStateStore

PARTITIONS = 4


class RecordingChannel(MarkerChannel):
    """Answers every marker with `code` (0: written) and remembers them."""

    def __init__(self):
        self.code = 0
        self.written = []
        self.lock = threading.Lock()

    def write(self, markers):
        with self.lock:
            if self.code == 0:
                self.written += markers
            return [self.code] * len(markers)


class Clock:
    def __init__(self):
        self.now = 1_700_000_000.0

    def __call__(self):
        return self.now


@pytest.fixture
def node(tmp_path):
    n = seglog.open(tmp_path, {"transaction.state.log.num.partitions": str(PARTITIONS),
                               "transaction.max.timeout.ms": "100000"})
    n.create_topic("t", 3)
    yield n
    n.close()


def make(node, clock=None, channel=None, cleanup_ms=3_600_000):
    """A coordinator over the node's __transaction_state, owning every partition (loaded)."""
    info = node.ensure_topic(fmt.TRANSACTION_STATE_TOPIC)
    store = TransactionStateStore(info.partitions, lambda p: node.partition(fmt.TRANSACTION_STATE_TOPIC, p), None)
    cfg = dataclasses.replace(node.config, transaction_abort_timed_out_transaction_cleanup_interval_ms=cleanup_ms)
    coord = TransactionCoordinator(cfg, store, channel or RecordingChannel(), new_producer_id=node.init_producer_id,
                                   offsets_partition=lambda g: 7, clock=clock or time.time,
                                   partition_exists=lambda t, p: t == "t" and 0 <= p < 3 or t == "__consumer_offsets")
    for p in range(info.partitions):
        coord.elected(p, 0)
    wait_for(lambda: not store.loading_partitions())
    return coord


def wait_for(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def state(coord, tid):
    [d] = coord.describe([tid])
    return d


# -- the state log's format ------------------------------------------------------------------------------------

def test_key_and_value_are_kafkas_layout():
    assert fmt.encode_key("tx") == b"\x00\x00\x00\x02tx"
    v = fmt.TxnLogValue(5, 3, 60000, int(TxnState.ONGOING), frozenset({("b", 1), ("a", 2), ("a", 0)}), 111, 100)
    raw = fmt.encode_value(v, empty_state=False)
    expected = struct.pack(">hqhib", 0, 5, 3, 60000, 1) + struct.pack(">i", 2) + \
        struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 2) + \
        struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 1) + struct.pack(">qq", 111, 100)
    assert raw == expected
    assert fmt.decode_value(raw) == v
    empty = fmt.encode_value(fmt.TxnLogValue(5, 4, 60000, 0, frozenset(), 120, -1), empty_state=True)
    assert empty[17:21] == b"\xff\xff\xff\xff"                       # Empty: a null partition list
    assert fmt.decode_value(empty).partitions == frozenset()
    assert fmt.decode_key(fmt.encode_key("tx")) == "tx"


def test_flexible_value_v1_is_read():
    # v1: compact array (n+1), compact string (len+1), compact int32 array, tagged fields after each struct
    raw = struct.pack(">hqhib", 1, 9, 0, 1000, 2) + bytes([2, 2]) + b"t" + bytes([2]) + struct.pack(">i", 4) + \
        bytes([0]) + struct.pack(">qq", 5, 4) + bytes([0])
    assert fmt.decode_value(raw) == fmt.TxnLogValue(9, 0, 1000, 2, frozenset({("t", 4)}), 5, 4)


def test_partition_is_javas_hash_placement():
    for tid in ("orders-eos", "a", "transactional-id-42", "\u00e9t\u00e9"):
        assert fmt.partition_for_transactional_id(tid, 50) == abs(java_string_hash(tid)) % 50


# -- InitProducerId ------------------------------------------------------------------------------------------------

def test_init_gives_an_id_and_bumps_the_epoch_fencing_older_instances(node):
    coord = make(node)
    pid, epoch = coord.init_producer_id("tx", 60000)
    assert epoch == 0
    assert coord.init_producer_id("tx", 60000) == (pid, 1)
    with pytest.raises(ProducerFencedError):
        coord.add_partitions("tx", pid, 0, [("t", 0)])
    coord.add_partitions("tx", pid, 1, [("t", 0)])
    assert state(coord, "tx").state == "Ongoing"
    other, _ = coord.init_producer_id("other", 60000)
    assert other != pid
    assert coord.init_producer_id(None, 0)[1] == 0                     # an idempotent producer's id


def test_init_checks_its_arguments(node):
    coord = make(node)
    with pytest.raises(InvalidTransactionTimeoutError):
        coord.init_producer_id("tx", 100001)
    with pytest.raises(InvalidTransactionTimeoutError):
        coord.init_producer_id("tx", 0)
    with pytest.raises(InvalidRequestError):
        coord.init_producer_id("", 1000)


def test_init_with_the_current_epoch_bumps_it_and_a_stale_one_is_fenced(node):
    coord = make(node)
    pid, _ = coord.init_producer_id("tx", 60000)
    assert coord.init_producer_id("tx", 60000, pid, 0) == (pid, 1)     # KIP-360: the producer bumps itself
    assert coord.init_producer_id("tx", 60000, pid, 0) == (pid, 1)     # a retry of that bump: same answer
    with pytest.raises(ProducerFencedError):
        coord.init_producer_id("tx", 60000, pid + 100, 1)


def test_init_aborts_the_open_transaction_under_a_bumped_epoch(node):
    channel = RecordingChannel()
    channel.code = 6                                                   # leaders unreachable: markers wait
    coord = make(node, channel=channel)
    pid, _ = coord.init_producer_id("tx", 60000)
    coord.add_partitions("tx", pid, 0, [("t", 0), ("t", 2)])
    with pytest.raises(ConcurrentTransactionsError):
        coord.init_producer_id("tx", 60000)
    d = state(coord, "tx")
    assert (d.state, d.producer_epoch) == ("PrepareAbort", 1)
    with pytest.raises(ProducerFencedError):                           # the old instance can never commit
        coord.end_txn("tx", pid, 0, True)
    with pytest.raises(ConcurrentTransactionsError):                   # markers pending: retry later
        coord.init_producer_id("tx", 60000)
    channel.code = 0
    wait_for(lambda: state(coord, "tx").state == "CompleteAbort")
    assert sorted((m.topic, m.partition, m.producer_epoch, m.commit) for m in channel.written) == \
        [("t", 0, 1, False), ("t", 2, 1, False)]
    assert coord.init_producer_id("tx", 60000) == (pid, 2)


# -- a transaction's life --------------------------------------------------------------------------------------

def test_commit_writes_markers_to_every_partition_then_completes(node):
    channel = RecordingChannel()
    coord = make(node, channel=channel)
    pid, epoch = coord.init_producer_id("tx", 60000)
    coord.add_partitions("tx", pid, epoch, [("t", 0)])
    coord.add_partitions("tx", pid, epoch, [("t", 1), ("t", 0)])
    coord.add_offsets("tx", pid, epoch, "group")
    assert state(coord, "tx").partitions == (("__consumer_offsets", 7), ("t", 0), ("t", 1))
    coord.end_txn("tx", pid, epoch, True)
    wait_for(lambda: state(coord, "tx").state == "CompleteCommit")
    assert sorted((m.topic, m.partition, m.commit, m.coordinator_epoch) for m in channel.written) == \
        [("__consumer_offsets", 7, True, 0), ("t", 0, True, 0), ("t", 1, True, 0)]
    assert state(coord, "tx").partitions == ()
    coord.end_txn("tx", pid, epoch, True)                              # a retried EndTxn: answered again
    with pytest.raises(InvalidTxnStateError):
        coord.end_txn("tx", pid, epoch, False)                         # it committed: no abort any more
    coord.add_partitions("tx", pid, epoch, [("t", 2)])                 # the next transaction
    assert state(coord, "tx").state == "Ongoing"


def test_end_txn_errors_are_kafkas(node):
    channel = RecordingChannel()
    channel.code = 6
    coord = make(node, channel=channel)
    pid, epoch = coord.init_producer_id("tx", 60000)
    with pytest.raises(InvalidTxnStateError):
        coord.end_txn("tx", pid, epoch, True)                          # nothing ongoing
    with pytest.raises(InvalidProducerIdMappingError):
        coord.end_txn("tx", pid + 1, epoch, True)
    with pytest.raises(InvalidProducerIdMappingError):
        coord.end_txn("nobody", pid, epoch, True)
    coord.add_partitions("tx", pid, epoch, [("t", 0)])
    coord.end_txn("tx", pid, epoch, False)
    with pytest.raises(ConcurrentTransactionsError):
        coord.end_txn("tx", pid, epoch, False)                         # still completing
    with pytest.raises(InvalidTxnStateError):
        coord.end_txn("tx", pid, epoch, True)
    with pytest.raises(ConcurrentTransactionsError):
        coord.add_partitions("tx", pid, epoch, [("t", 1)])


def test_add_partitions_refuses_unknown_partitions(node):
    coord = make(node)
    pid, epoch = coord.init_producer_id("tx", 60000)
    with pytest.raises(UnknownTopicOrPartitionError) as e:
        coord.add_partitions("tx", pid, epoch, [("t", 0), ("nope", 0), ("t", 3)])
    assert sorted(e.value.partitions) == [("nope", 0), ("t", 3)]
    assert state(coord, "tx").state == "Empty"


def test_markers_answered_stale_stop_without_completing(node):
    channel = RecordingChannel()
    channel.code = 52                                                  # TRANSACTION_COORDINATOR_FENCED
    coord = make(node, channel=channel)
    pid, epoch = coord.init_producer_id("tx", 60000)
    coord.add_partitions("tx", pid, epoch, [("t", 0)])
    coord.end_txn("tx", pid, epoch, True)
    time.sleep(0.5)
    assert state(coord, "tx").state == "PrepareCommit"                 # a newer coordinator finishes it


def test_verify_answers_per_partition(node):
    coord = make(node)
    pid, epoch = coord.init_producer_id("tx", 60000)
    coord.add_partitions("tx", pid, epoch, [("t", 0)])
    found = coord.verify("tx", pid, epoch, [("t", 0), ("t", 1)])
    assert found[("t", 0)] is None and isinstance(found[("t", 1)], InvalidTxnStateError)
    assert all(isinstance(e, ProducerFencedError) for e in coord.verify("tx", pid, epoch - 1, [("t", 0)]).values())
    assert all(isinstance(e, InvalidProducerIdMappingError)
               for e in coord.verify("tx", pid + 5, epoch, [("t", 0)]).values())


# -- timers ----------------------------------------------------------------------------------------------------

def test_a_transaction_older_than_its_timeout_is_aborted_and_its_producer_fenced(node):
    clock = Clock()
    channel = RecordingChannel()
    coord = make(node, clock=clock, channel=channel)
    pid, epoch = coord.init_producer_id("tx", 5000)
    coord.add_partitions("tx", pid, epoch, [("t", 1)])
    clock.now += 4
    assert coord.abort_timed_out() == 0
    clock.now += 2
    assert coord.abort_timed_out() == 1
    wait_for(lambda: state(coord, "tx").state == "CompleteAbort")
    assert state(coord, "tx").producer_epoch == epoch + 1
    assert [(m.topic, m.partition, m.producer_epoch, m.commit) for m in channel.written] == [("t", 1, epoch + 1, False)]
    with pytest.raises(ProducerFencedError):
        coord.end_txn("tx", pid, epoch, True)


def test_idle_transactional_ids_expire(node):
    clock = Clock()
    coord = make(node, clock=clock)
    coord.init_producer_id("old", 60000)
    clock.now += 604_800 - 10
    coord.init_producer_id("young", 60000)
    clock.now += 11
    assert coord.expire_transactional_ids() == 1
    assert isinstance(coord.describe(["old"])[0], TransactionalIdNotFoundError)
    assert state(coord, "young").state == "Empty"
    assert [t.transactional_id for t in coord.list()[1]] == ["young"]


# -- the state log ---------------------------------------------------------------------------------------------

def test_a_partition_led_again_in_a_newer_epoch_keeps_its_ids_and_markers_take_the_epoch(node):
    """Kafka's onElection of a loaded partition: the ids stay loaded (no reload), their coordinator epoch moves."""
    channel = RecordingChannel()
    channel.code = 6
    coord = make(node, channel=channel)
    pid, epoch = coord.init_producer_id("tx", 60000)
    coord.add_partitions("tx", pid, epoch, [("t", 0)])
    coord.end_txn("tx", pid, epoch, True)
    p = coord.store.partition_for("tx")
    coord.reelected(p, 4)
    assert coord.store.loading_partitions() == []
    assert state(coord, "tx").state == "PrepareCommit"
    channel.code = 0
    wait_for(lambda: state(coord, "tx").state == "CompleteCommit")
    assert [(m.topic, m.partition, m.coordinator_epoch) for m in channel.written] == [("t", 0, 4)]
    assert coord.init_producer_id("tx", 60000) == (pid, epoch + 1)
    coord.close()


def test_state_survives_a_reload_and_prepared_transactions_are_finished(node):
    channel = RecordingChannel()
    channel.code = 6
    coord = make(node, channel=channel)
    pid, epoch = coord.init_producer_id("tx", 60000)
    coord.add_partitions("tx", pid, epoch, [("t", 0), ("t", 1)])
    coord.end_txn("tx", pid, epoch, True)
    coord.init_producer_id("idle", 30000)
    p = coord.store.partition_for("tx")
    coord.resigned(p)
    assert isinstance(coord.describe(["tx"])[0], NotCoordinatorError)
    with pytest.raises(NotCoordinatorError):
        coord.end_txn("tx", pid, epoch, True)
    coord.close()

    fresh = RecordingChannel()
    again = make(node, channel=fresh)                                  # a new coordinator reads the log
    wait_for(lambda: state(again, "tx").state == "CompleteCommit")
    assert sorted((m.topic, m.partition, m.commit) for m in fresh.written) == [("t", 0, True), ("t", 1, True)]
    d = state(again, "idle")
    assert (d.state, d.timeout_ms) == ("Empty", 30000)
    assert again.init_producer_id("tx", 60000) == (pid, epoch + 1)
    again.close()


def test_loading_partitions_answer_load_in_progress(node):
    coord = make(node)
    p = coord.store.partition_for("tx")
    coord.store.begin_load(p, 1)
    with pytest.raises(CoordinatorLoadInProgressError):
        coord.init_producer_id("tx", 1000)
    coord.store.finish_load(p, 1)
    coord.init_producer_id("tx", 1000)


def test_list_filters_by_state_and_producer(node):
    coord = make(node)
    a, _ = coord.init_producer_id("a", 60000)
    b, e = coord.init_producer_id("b", 60000)
    coord.add_partitions("b", b, e, [("t", 0)])
    unknown, found = coord.list(["Ongoing", "Bogus"])
    assert unknown == ["Bogus"] and [(t.transactional_id, t.state) for t in found] == [("b", "Ongoing")]
    assert [t.transactional_id for t in coord.list((), [a])[1]] == ["a"]
    assert [t.transactional_id for t in coord.list()[1]] == ["a", "b"]

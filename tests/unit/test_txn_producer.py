"""seglog's transactional Producer in process: Kafka's TransactionManager states (ready, in a transaction,
abortable after a failed batch, fatal once fenced), partitions added before their first batch, transactional
batches, the epoch bump after an abortable error. Markers go to a recording channel (the integration tests
write and read real ones)."""

import time

import pytest

import seglog
from seglog import _engine
from seglog.errors import (IllegalStateError, InvalidArgumentError, InvalidTimestampError, ProducerFencedError,
                           TransactionalIdAuthorizationFailedError)
from seglog.txn.markers import MarkerChannel


class RecordingChannel(MarkerChannel):
    def __init__(self):
        self.written = []

    def write(self, markers):
        self.written += markers
        return [0] * len(markers)


@pytest.fixture
def node(tmp_path):
    n = seglog.open(tmp_path, {"transaction.state.log.num.partitions": "3"})
    channel = RecordingChannel()
    n.marker_channel_factory = lambda _: channel
    n.channel = channel
    n.create_topic("t", 2)
    n.create_topic("strict", 1, {"message.timestamp.before.max.ms": "60000"})
    yield n
    n.close()


def state(node, tid):
    [d] = node.txn_coordinator.describe([tid])
    return d


def wait_state(node, tid, name):
    deadline = time.monotonic() + 10
    while state(node, tid).state != name:
        assert time.monotonic() < deadline, state(node, tid)
        time.sleep(0.01)


def batches(node, topic, p):
    return _engine.batches(node.partition(topic, p).log.read(0), False)


def test_arguments_are_checked(node):
    with pytest.raises(InvalidArgumentError):
        seglog.Producer(node, transactional_id="x", enable_idempotence=False)
    with pytest.raises(InvalidArgumentError):
        seglog.Producer(node, transactional_id="x", acks=1)
    with pytest.raises(InvalidArgumentError):
        seglog.Producer(node, transactional_id="")


def test_calls_in_the_wrong_state_are_illegal(node):
    p = seglog.Producer(node, transactional_id="tx")
    with pytest.raises(IllegalStateError):
        p.begin_transaction()                             # before init_transactions
    p.init_transactions()
    with pytest.raises(IllegalStateError):
        p.send("t", b"outside a transaction")
    with pytest.raises(IllegalStateError):
        p.commit_transaction()
    with pytest.raises(IllegalStateError):
        p.init_transactions()
    p.begin_transaction()
    with pytest.raises(IllegalStateError):
        p.begin_transaction()
    p.commit_transaction()                                # nothing sent: no EndTxn needed
    assert state(node, "tx").state == "Empty"
    p.close()
    with pytest.raises(IllegalStateError):
        seglog.Producer(node).begin_transaction()         # not a transactional producer


def test_a_transaction_adds_its_partitions_and_writes_transactional_batches(node):
    p = seglog.Producer(node, transactional_id="tx", linger_ms=0)
    p.init_transactions()
    p.begin_transaction()
    p.send("t", b"a", partition=0)
    p.send("t", b"b", partition=1)
    assert state(node, "tx").partitions == (("t", 0), ("t", 1))
    p.commit_transaction()
    wait_state(node, "tx", "CompleteCommit")
    assert sorted((m.topic, m.partition, m.commit) for m in node.channel.written) == [("t", 0, True), ("t", 1, True)]
    [b] = batches(node, "t", 0)
    assert (b.is_transactional, b.producer_id, b.producer_epoch, b.base_sequence) == (True, p.producer_id, 0, 0)
    p.begin_transaction()
    p.send("t", b"c", partition=0)
    p.commit_transaction()
    assert batches(node, "t", 0)[-1].base_sequence == 1    # sequences go on across transactions
    p.close()


def test_a_fenced_producer_is_done(node):
    old = seglog.Producer(node, transactional_id="tx")
    old.init_transactions()
    old.begin_transaction()
    old.send("t", b"x", partition=0)
    old.flush()
    new = seglog.Producer(node, transactional_id="tx")
    new.init_transactions()
    assert new.producer_epoch == 2                      # the abort took epoch 1, the new instance 2
    with pytest.raises(ProducerFencedError):
        old.commit_transaction()
    for call in (old.begin_transaction, old.commit_transaction, old.abort_transaction):
        with pytest.raises(ProducerFencedError):
            call()
    old.close()
    new.close()


def test_a_failed_batch_makes_the_transaction_abortable_and_abort_recovers(node):
    p = seglog.Producer(node, transactional_id="tx", linger_ms=0)
    p.init_transactions()
    p.begin_transaction()
    p.send("t", b"fine", partition=0)
    stale = p.send("strict", b"too old", timestamp=int(time.time() * 1000) - 3_600_000)
    with pytest.raises(InvalidTimestampError):
        stale.get()
    with pytest.raises(InvalidTimestampError):
        p.commit_transaction()
    with pytest.raises(InvalidTimestampError):
        p.commit_transaction()                           # abortable: only abort_transaction() goes on
    epoch = p.producer_epoch
    p.abort_transaction()
    assert p.producer_epoch == epoch + 1                  # sequences restart under a new epoch
    assert (state(node, "tx").state, state(node, "tx").producer_epoch) == ("Empty", epoch + 1)
    assert sorted((m.topic, m.commit, m.producer_epoch) for m in node.channel.written) == \
        [("strict", False, epoch), ("t", False, epoch)]       # the failed batch's partition was added first
    p.begin_transaction()
    p.send("t", b"again", partition=0)
    p.commit_transaction()
    assert batches(node, "t", 0)[-1].producer_epoch == epoch + 1
    p.close()


def test_abort_drops_what_was_not_sent(node):
    p = seglog.Producer(node, transactional_id="tx", linger_ms=60_000)
    p.init_transactions()
    p.begin_transaction()
    f = p.send("t", b"never appended", partition=1)
    p.abort_transaction()
    with pytest.raises(IllegalStateError):
        f.get()
    assert batches(node, "t", 1) == [] and state(node, "tx").state == "Empty"
    p.close()


def test_close_aborts_an_open_transaction(node):
    p = seglog.Producer(node, transactional_id="tx", linger_ms=0)
    p.init_transactions()
    p.begin_transaction()
    p.send("t", b"x", partition=0)
    p.close()
    wait_state(node, "tx", "CompleteAbort")


def test_a_transactional_batch_needs_the_transactional_id(node):
    w = _engine.BatchWriter(producer_id=5, producer_epoch=0, next_sequence=0, transactional=True)
    w.add(b"v", None, None, None)
    w.finish()
    with pytest.raises(TransactionalIdAuthorizationFailedError):
        node.partition("t", 0).append(w.take())

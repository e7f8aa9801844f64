"""The log side of transactions: the control batch codec, producer state with open transactions (snapshot,
recovery), the last stable offset, the .txnindex (Kafka's format, rebuilt on recovery, cut and deleted with its
segment) and read_committed reads of a data directory (Log.records, the in-process Consumer)."""

import os
import struct

import pytest

import seglog
from seglog import Log, LogConfig, _engine
from seglog.errors import (CorruptRecordError, InvalidArgumentError, InvalidProducerEpochError,
                           TransactionCoordinatorFencedError)
from seglog.producer_state import ProducerStateManager
from seglog.txn_index import AbortedTxn, ENTRY_SIZE, read_index


def txn_batch(pid, seq, values, epoch=0):
    w = _engine.BatchWriter(producer_id=pid, producer_epoch=epoch, next_sequence=seq, transactional=True)
    for v in values:
        w.add(v)
    w.finish()
    return w.take()


def values(log, **kw):
    return [r.value for r in log.records(**kw)]


@pytest.fixture
def log(tmp_path):
    with Log(tmp_path / "t-0", LogConfig(segment_bytes=4096)) as lg:
        yield lg


# -- the control batch codec ---------------------------------------------------------------------------------------

def test_control_batch_is_kafkas_end_transaction_marker():
    data = _engine.control_batch(42, 3, True, 7, 1234, base_offset=10, leader_epoch=2)
    [b] = _engine.batches(data)                                   # CRC checked
    assert (b.base_offset, b.producer_id, b.producer_epoch, b.base_sequence, b.records_count) == (10, 42, 3, -1, 1)
    assert b.is_control and b.is_transactional and b.size == len(data) == 78
    assert b.leader_epoch == 2 and b.max_timestamp == 1234
    # the record: key = version 0, type 1 (COMMIT); value = version 0, coordinator epoch 7
    assert data[61:] == bytes([32, 0, 0, 0, 8]) + struct.pack(">hh", 0, 1) + bytes([12]) + \
        struct.pack(">hi", 0, 7) + bytes([0])
    assert _engine.control_marker(data) == (True, 7)
    assert _engine.control_marker(_engine.control_batch(1, 0, False, -1, 0)) == (False, -1)
    assert list(_engine.decode_records(data)) == []              # markers never reach applications


def test_control_batch_errors():
    with pytest.raises(InvalidArgumentError):
        _engine.control_batch(-1, 0, True, 0, 0)
    plain = _engine.BatchWriter()
    plain.add(b"x")
    plain.finish()
    with pytest.raises(CorruptRecordError):
        _engine.control_marker(plain.take())


def test_kafka_python_reads_our_markers():
    from kafka.record.default_records import DefaultRecordBatch
    data = _engine.control_batch(5, 1, False, 3, 99)
    batch = DefaultRecordBatch(bytearray(data))
    assert batch.is_control_batch and batch.is_transactional and batch.validate_crc()
    [rec] = list(batch)
    assert struct.unpack(">hh", rec.key) == (0, 0) and struct.unpack(">hi", rec.value) == (0, 3)


def test_kafka_python_reads_a_segment_with_markers(log):
    from kafka.record import MemoryRecords
    log.append(b"plain")
    log.append_raw(txn_batch(5, 0, [b"a1", b"a2"]))
    log.append_control(5, 0, False, 2)
    log.append_raw(txn_batch(5, 2, [b"b1"]))
    log.append_control(5, 0, True, 2)
    log.flush()
    data = open(os.path.join(log.path, "%020d.log" % 0), "rb").read()
    records = MemoryRecords(data)
    seen = []
    while True:
        batch = records.next_batch()
        if batch is None:
            break
        assert batch.validate_crc()
        for r in batch:
            if batch.is_control_batch:
                seen.append(("control", struct.unpack(">hh", r.key)[1], r.offset))
            else:
                seen.append((r.value, r.offset, batch.is_transactional, batch.producer_id))
    assert seen == [(b"plain", 0, False, -1), (b"a1", 1, True, 5), (b"a2", 2, True, 5), ("control", 0, 3),
                    (b"b1", 4, True, 5), ("control", 1, 5)]


# -- producer state ---------------------------------------------------------------------------------------------

def test_producer_state_tracks_open_transactions(tmp_path):
    pm = ProducerStateManager(str(tmp_path))
    pm.update(1, 0, 0, 2, 10, 11, 100, transactional=True)
    pm.update(2, 0, 0, 1, 12, 12, 100, transactional=True)
    pm.update(1, 0, 2, 1, 13, 13, 100, transactional=True)
    assert pm.open_transactions() == {1: 10, 2: 12}
    assert pm.first_unstable_offset(20) == 10
    done = pm.complete_txn(1, 0, False, 4, 14, 101)
    assert done.first_offset == 10 and done.last_offset == 14 and done.aborted and done.last_stable_offset == 12
    assert pm.first_unstable_offset(14) == 10        # its marker is not below the high watermark yet
    assert pm.first_unstable_offset(15) == 12
    assert pm.complete_txn(2, 0, True, 4, 15, 102).last_stable_offset == 16
    assert pm.first_unstable_offset(16) is None
    assert pm.complete_txn(3, 0, True, 4, 17, 102) is None        # a marker where the producer wrote nothing


def test_stale_markers_are_refused(tmp_path):
    pm = ProducerStateManager(str(tmp_path))
    pm.update(1, 5, 0, 1, 0, 0, 100, transactional=True)
    pm.complete_txn(1, 5, True, 3, 1, 100)
    with pytest.raises(InvalidProducerEpochError):
        pm.check_marker(1, 4, 3)
    with pytest.raises(TransactionCoordinatorFencedError):
        pm.check_marker(1, 5, 2)
    pm.check_marker(1, 6, 3)                       # a bumped epoch (the coordinator aborting on a timeout)


def test_open_transactions_survive_the_snapshot(tmp_path):
    pm = ProducerStateManager(str(tmp_path))
    pm.update(1, 2, 0, 3, 40, 42, 100, transactional=True)
    pm.update(2, 0, 0, 1, 43, 43, 100)
    pm.complete_txn(3, 1, True, 9, 44, 100)
    pm.write_snapshot(45)
    again = ProducerStateManager(str(tmp_path))
    again.load_snapshot(45)
    assert again.open_transactions() == {1: 40}
    assert {a.producer_id: (a.producer_epoch, a.coordinator_epoch, a.current_txn_start_offset)
            for a in again.active()} == {1: (2, -1, 40), 2: (0, -1, -1), 3: (1, 9, -1)}
    with pytest.raises(TransactionCoordinatorFencedError):
        again.check_marker(3, 1, 8)


def test_producers_with_open_transactions_do_not_expire(tmp_path):
    pm = ProducerStateManager(str(tmp_path))
    pm.update(1, 0, 0, 1, 0, 0, 100, transactional=True)
    pm.update(2, 0, 0, 1, 1, 1, 100)
    assert pm.expire(10_000, 1000) == 1 and pm.open_transactions() == {1: 0}


# -- the last stable offset and read_committed reads ------------------------------------------------------------

def test_last_stable_offset_and_read_committed_records(log):
    log.append(b"plain")
    log.append_raw(txn_batch(5, 0, [b"a1", b"a2"]))
    log.append_raw(txn_batch(6, 0, [b"c1"]))
    assert (log.last_stable_offset, log.high_watermark) == (1, 4)
    assert values(log, isolation="read_committed") == [b"plain"]
    assert log.append_control(5, 0, False, 0) == 4
    assert log.last_stable_offset == 3                     # producer 6 is still open
    log.append_raw(txn_batch(5, 2, [b"a3"]))
    log.append_control(6, 0, True, 0)
    log.append_control(5, 0, True, 0)
    assert log.last_stable_offset == log.end_offset == 8
    assert log.aborted_transactions(0, 8) == [AbortedTxn(5, 1, 4, 3)]
    assert log.aborted_transactions(5, 8) == []
    assert values(log) == [b"plain", b"a1", b"a2", b"c1", b"a3"]          # markers are never records
    assert values(log, isolation="read_committed") == [b"plain", b"c1", b"a3"]
    assert values(log, start=2, isolation="read_committed") == [b"c1", b"a3"]
    with pytest.raises(InvalidArgumentError):
        log.records(isolation="committed")


def test_the_lso_stops_at_the_high_watermark(log):
    log.append_raw(txn_batch(5, 0, [b"a"]))
    log.append_control(5, 0, True, 0)
    log.high_watermark = 1
    assert log.last_stable_offset == 0                     # the marker is not replicated yet
    log.high_watermark = 2
    assert log.last_stable_offset == 2


def test_a_stale_marker_is_refused_by_the_log(log):
    log.append_raw(txn_batch(5, 0, [b"a"], epoch=3))
    with pytest.raises(InvalidProducerEpochError):
        log.append_control(5, 2, False, 0)
    assert log.end_offset == 1 and log.last_stable_offset == 0


# -- the .txnindex -------------------------------------------------------------------------------------------------

def _aborts(log, n):
    """n aborted transactions of producer 5 (2 records each), one committed of producer 6 spanning them."""
    log.append_raw(txn_batch(6, 0, [b"long"]))
    for i in range(n):
        log.append_raw(txn_batch(5, 2 * i, [b"x%d" % i, b"y%d" % i]))
        log.append_control(5, 0, False, 1)
    log.append_control(6, 0, True, 1)


def test_txnindex_is_kafkas_format(log):
    _aborts(log, 2)
    path = os.path.join(log.path, "%020d.txnindex" % 0)
    data = open(path, "rb").read()
    assert len(data) == 2 * ENTRY_SIZE == 68
    assert struct.unpack(">hqqqq", data[:34]) == (0, 5, 1, 3, 0)
    assert struct.unpack(">hqqqq", data[34:]) == (0, 5, 4, 6, 0)
    assert read_index(path) == [AbortedTxn(5, 1, 3, 0), AbortedTxn(5, 4, 6, 0)]
    open(path, "ab").write(b"\0")
    with pytest.raises(CorruptRecordError):
        read_index(path)


def test_txnindex_is_rebuilt_after_being_deleted(tmp_path):
    path = tmp_path / "t-0"
    with Log(path, LogConfig(segment_bytes=300)) as lg:
        _aborts(lg, 6)
        lg.append(b"after")
        bases = lg.segment_bases
        want = lg.aborted_transactions(0, lg.end_offset)
        committed = values(lg, isolation="read_committed")
    indexes = sorted(p.name for p in path.glob("*.txnindex"))
    assert len(bases) > 3 and len(indexes) > 1 and len(want) == 6
    for name in indexes:
        os.unlink(path / name)
    for snap in path.glob("*.snapshot"):               # producer state rebuilt from the log: so is the index
        os.unlink(snap)
    with Log(path, LogConfig(segment_bytes=300)) as lg:
        assert lg.aborted_transactions(0, lg.end_offset) == want
        assert values(lg, isolation="read_committed") == committed == [b"long", b"after"]
    assert sorted(p.name for p in path.glob("*.txnindex")) == indexes


def test_txnindex_recovers_after_a_crash(tmp_path):
    """An abort marker written but its entry lost (the process died between the two writes): the replay of
    the producer state at the next open puts it back."""
    path = tmp_path / "t-0"
    lg = Log(path)
    _aborts(lg, 2)
    lg.flush()
    want = lg.aborted_transactions(0, lg.end_offset)
    os.unlink(path / ("%020d.txnindex" % 0))
    lg._local.release_dir_lock()                      # "killed": no close, no clean-shutdown marker
    with Log(path) as again:
        assert not again.recovery.clean_shutdown
        assert again.aborted_transactions(0, again.end_offset) == want
        assert values(again, isolation="read_committed") == [b"long"]
        assert again.last_stable_offset == again.end_offset


def test_txnindex_is_cut_with_truncation_and_deleted_with_its_segment(tmp_path):
    path = tmp_path / "t-0"
    with Log(path, LogConfig(segment_bytes=300)) as lg:
        _aborts(lg, 6)
        assert len(lg.aborted_transactions(0, lg.end_offset)) == 6
        lg.truncate_to(5)                                   # keeps the first abort (marker at 3)
        assert lg.aborted_transactions(0, lg.end_offset) == [AbortedTxn(5, 1, 3, 0)]
        assert read_index(str(path / ("%020d.txnindex" % 0))) == [AbortedTxn(5, 1, 3, 0)]
        assert lg.last_stable_offset == 0                   # producer 6's transaction is open again
        lg.append(b"more")
        lg.roll()
        lg.delete_records_before(lg.end_offset)
        lg.config = LogConfig(segment_bytes=300, retention_ms=-1)
        assert lg.enforce_retention() >= 1
        assert lg.aborted_transactions(lg.start_offset, lg.end_offset) == []
        assert not list(path.glob("*.txnindex"))            # renamed .deleted with their segments


# -- the in-process Consumer over a data directory -----------------------------------------------------------------

def test_consumer_read_committed_over_a_data_dir(tmp_path):
    with seglog.open(tmp_path / "data") as node:
        node.create_topic("t", 1)
        part = node.partition("t", 0)
        lg = part.log
        lg.append(b"a")
        lg.append_raw(txn_batch(9, 0, [b"aborted-1", b"aborted-2"]))
        lg.append_raw(txn_batch(8, 0, [b"committed"]))
        node.write_txn_marker("t", 0, 9, 0, False, 0)
        lg.append(b"b")
        counts = {}
        for level in ("read_uncommitted", "read_committed"):
            with seglog.Consumer(node, auto_offset_reset="earliest", isolation_level=level) as c:
                c.assign([("t", 0)])
                counts[level] = [r.value for r in c.poll(1.0)]
                counts[level + " end"] = c.end_offsets([("t", 0)])[("t", 0)]
        # producer 8's transaction is open: read_committed stops before it
        assert counts["read_uncommitted"] == [b"a", b"aborted-1", b"aborted-2", b"committed", b"b"]
        assert counts["read_committed"] == [b"a"] and counts["read_committed end"] == 3
        node.write_txn_marker("t", 0, 8, 0, True, 0)
        with seglog.Consumer(node, auto_offset_reset="earliest", isolation_level="read_committed") as c:
            c.assign([("t", 0)])
            assert [r.value for r in c.poll(1.0)] == [b"a", b"committed", b"b"]
        with pytest.raises(InvalidArgumentError):
            seglog.Consumer(node, isolation_level="committed")


# -- compaction -------------------------------------------------------------------------------------------------

def _keyed_txn(pid, seq, pairs):
    w = _engine.BatchWriter(producer_id=pid, producer_epoch=0, next_sequence=seq, transactional=True)
    for k, v in pairs:
        w.add(v, k)
    w.finish()
    return w.take()


def _batches(lg):
    return [b for view in lg._local.views(lg.start_offset, lg.end_offset) for b in _engine.batches(view)]


def test_compaction_drops_aborted_data_and_removes_markers_after_their_horizon(tmp_path):
    cfg = LogConfig(segment_bytes=400, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.0)
    now = 1_800_000_000_000
    with Log(tmp_path / "c-0", cfg) as lg:
        lg.append_raw(_keyed_txn(1, 0, [(b"k", b"committed")]))
        lg.append_control(1, 0, True, 0)
        lg.append_raw(_keyed_txn(2, 0, [(b"k", b"aborted"), (b"j", b"aborted-j")]))
        lg.append_control(2, 0, False, 0)
        for i in range(30):
            lg.append(b"filler %d" % i, key=b"f%d" % (i % 3))
        lg.roll()
        res = lg.compact(now)
        assert res.aborted is None and res.aborted_dropped == 2 and res.markers_removed == 0
        markers = {b.base_offset: b for b in _batches(lg) if b.is_control}
        assert sorted(markers) == [1, 4]
        assert not markers[1].attributes & 0x40                 # its transaction's record stays: kept as it is
        assert markers[4].attributes & 0x40 and markers[4].base_timestamp == now + cfg.delete_retention_ms
        assert _engine.control_marker(_engine.control_batch(2, 0, False, 0, 5, 4, 0, now)) == (False, 0)
        assert [(r.key, r.value) for r in lg.records(0, 5)] == [(b"k", b"committed")]   # aborted k never won
        assert lg.compact(now + cfg.delete_retention_ms - 1).markers_removed == 0
        assert lg.compact(now + cfg.delete_retention_ms).markers_removed == 1
        assert [b.base_offset for b in _batches(lg) if b.is_control] == [1]
        assert [r.value for r in lg.records(isolation="read_committed") if r.key in (b"k", b"j")] == [b"committed"]
        assert lg.last_stable_offset == lg.end_offset


def test_compaction_stops_at_the_last_stable_offset(tmp_path):
    cfg = LogConfig(segment_bytes=400, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.0)
    with Log(tmp_path / "c-0", cfg) as lg:
        lg.append(b"committed", key=b"k")
        lg.append_raw(_keyed_txn(3, 0, [(b"k", b"undecided")]))      # open: the cleaner stops before it
        for i in range(30):
            lg.append(b"filler %d" % i, key=b"f%d" % (i % 3))
        lg.roll()
        assert lg.last_stable_offset == 1
        lg.compact()
        assert [r.value for r in lg.records(0, 2)] == [b"committed", b"undecided"]
        lg.append_control(3, 0, True, 0)
        lg.roll()
        lg.compact()
        assert [r.value for r in lg.records() if r.key == b"k"] == [b"undecided"]

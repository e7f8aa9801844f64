"""The idempotent producer state stays in step with the log: a batch is either in the log and in the state, or
in neither, through writes that fail after the segment took the bytes and through segment rolls in the middle
of a follower's fetch (whose snapshot must describe the log up to the roll). Otherwise a retried batch is
accepted as new and stored twice."""

import errno

import pytest

from seglog import Log, LogConfig, _engine
from seglog.errors import StorageError
from seglog.faults import FaultPlan


def idempotent_batch(pid, epoch, seq, value, base_offset=0, leader_epoch=0):
    w = _engine.BatchWriter(next_offset=base_offset, producer_id=pid, producer_epoch=epoch, next_sequence=seq)
    w.add(value)
    w.finish()
    data = bytearray(w.take())
    _engine.stamp_batch(data, base_offset, leader_epoch, -1)
    return bytes(data)


def values(lg):
    return [r.value for r in lg.records()]


def test_a_batch_whose_flush_failed_is_taken_back_so_its_retry_is_stored_once(tmp_path):
    """flush.messages=1: the append's fsync fails after the segment took the batch. The producer is answered
    with an error and retries; the batch must end up in the log once."""
    with Log(tmp_path / "t-0", LogConfig(flush_messages=1)) as lg:
        assert lg.append_raw(idempotent_batch(7, 0, 0, b"a")) == 0
        with FaultPlan().fail("fdatasync", errno.EIO, path="*.log"), pytest.raises(StorageError):
            lg.append_raw(idempotent_batch(7, 0, 1, b"b"))
        lg.append_raw(idempotent_batch(8, 0, 0, b"other"))       # another producer's record in between
        lg.append_raw(idempotent_batch(7, 0, 1, b"b"))           # the retry
        assert values(lg).count(b"b") == 1
        assert lg.append_raw(idempotent_batch(7, 0, 2, b"c")) > 0     # the sequence goes on


def test_a_marker_whose_flush_failed_is_taken_back(tmp_path):
    """The same for a transaction marker: after a failed write the transaction is still open here, and the
    retried marker is the only one in the log."""
    w = _engine.BatchWriter(producer_id=5, producer_epoch=0, next_sequence=0, transactional=True)
    w.add(b"t")
    w.finish()
    with Log(tmp_path / "t-0", LogConfig(flush_messages=1)) as lg:
        lg.append_raw(w.take())
        with FaultPlan().fail("fdatasync", errno.EIO, path="*.log"), pytest.raises(StorageError):
            lg.append_control(5, 0, True, 0)
        assert lg._producers.open_transactions() == {5: 0}
        assert lg.append_raw(idempotent_batch(8, 0, 0, b"other")) == 1
        assert lg.append_control(5, 0, True, 0) == 2
        assert lg._producers.open_transactions() == {}
    with Log(tmp_path / "t-0") as again:
        assert [(b.base_offset, b.is_control) for b in _engine.batches(again.read(0))] == \
            [(0, False), (1, False), (2, True)]


def test_a_followers_fetch_across_a_roll_snapshots_the_batches_before_the_roll(tmp_path):
    """A follower appends a fetch whose batches fill a segment: the log rolls in the middle and snapshots the
    producer state at the new segment's base. That snapshot must include the batches before the roll, or a
    replica restarted after a crash (state = that snapshot + the batches after it) forgets a producer whose
    batches all came before the roll and, once leader, stores its retried batch a second time."""
    path = tmp_path / "t-0"
    fetched = [idempotent_batch(3, 0, seq, b"x" * 100, base_offset=seq) for seq in range(4)]
    fetched += [idempotent_batch(4, 0, seq, b"y" * 100, base_offset=4 + seq) for seq in range(10)]
    lg = Log(path, LogConfig(segment_bytes=1024))
    lg.append_as_follower(b"".join(fetched))
    assert lg.segment_bases[1] > 4 and lg.end_offset == 14
    lg._local.release_dir_lock()                       # killed: no clean shutdown, no snapshot at the end
    with Log(path, LogConfig(segment_bytes=1024)) as again:
        assert not again.recovery.clean_shutdown
        assert again.append_raw(idempotent_batch(3, 0, 3, b"x" * 100)) == 3       # a retry: not written again
        assert again.end_offset == 14
        assert [p.last_sequence for p in again.active_producers()] == [3, 9]


def test_a_roll_while_the_append_journal_is_replayed_leaves_no_empty_snapshot(tmp_path):
    """Records append() had buffered (in the journal) when the process died are written at the next open,
    before the producer state is loaded; if they fill the segment, the roll must not leave a snapshot of that
    not-yet-loaded (empty) state, which the load would then trust and forget every earlier producer."""
    path = tmp_path / "t-0"
    lg = Log(path, LogConfig(segment_bytes=2048))
    seq = 0
    while lg.size_bytes < 2048 - 200:
        lg.append_raw(idempotent_batch(3, 0, seq, b"x" * 100))
        seq += 1
    lg.append(b"z" * 100)                              # buffered: in the journal, not yet in the segment
    lg.append(b"z" * 100)
    assert lg.segment_count == 1
    lg._local.release_dir_lock()                       # killed
    with Log(path, LogConfig(segment_bytes=2048)) as again:
        assert again.recovery.journal_records == 2 and again.segment_count == 2
        last = seq - 1
        assert again.append_raw(idempotent_batch(3, 0, last, b"x" * 100)) == last     # a retry: not written again
        assert again.end_offset == seq + 2

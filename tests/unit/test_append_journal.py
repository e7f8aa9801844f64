"""The append journal (engine journal.pxi): what append() has buffered is found again after a crash, repaired
into valid batches, written once, and a journal that cannot take a record refuses the append cleanly."""

import errno
import os

import pytest

from faults import crash_copy
from seglog import Log, LogConfig, _engine
from seglog.errors import StorageError
from seglog.faults import FaultPlan

JOURNAL = ".append-journal"


def _values(log):
    return [(r.offset, r.value) for r in log.records()]


def test_buffered_records_come_back_after_a_crash(tmp_path):
    with Log(tmp_path / "t-0") as log:
        offsets = [log.append(b"small-%d" % i, key=b"k") for i in range(5)]
        copy = crash_copy(tmp_path / "t-0", tmp_path / "copy-0")
        offsets.append(log.append(b"L" * 200_000))              # grows the journal past its first 64 KiB
        offsets.append(log.append(b"after"))
        copy2 = crash_copy(tmp_path / "t-0", tmp_path / "copy2-0")
    with Log(copy) as log:
        assert log.recovery.journal_records == 5
        assert _values(log) == [(i, b"small-%d" % i) for i in range(5)]
    with Log(copy2) as log:
        assert log.recovery.journal_records == 1                # the large record filled a batch: written
        got = _values(log)
        assert [o for o, _ in got] == offsets
        assert got[-2][1] == b"L" * 200_000 and got[-1][1] == b"after"
        assert _engine.journal_batches((copy2 / JOURNAL).read_bytes()) == b""     # emptied once written


def test_log_append_time_batches_are_repaired_with_their_append_time(tmp_path):
    cfg = LogConfig(message_timestamp_type="LogAppendTime")
    with Log(tmp_path / "t-0", cfg) as log:
        log.append(b"a", timestamp=5)
        log.append(b"b", timestamp=6)
        copy = crash_copy(tmp_path / "t-0", tmp_path / "copy-0")
    with Log(copy, cfg) as log:
        ts = [r.timestamp for r in log.records()]
        assert len(ts) == 2 and all(t > 1_000_000_000_000 for t in ts)


def test_a_journal_batch_already_in_the_segment_is_not_written_twice(tmp_path):
    path = tmp_path / "t-0"
    with Log(path) as log:
        for i in range(10):
            log.append(b"%d" % i)
        stale = (path / JOURNAL).read_bytes()      # as a crash between the segment write and the reset leaves it
        log.flush()
        copy = crash_copy(path, tmp_path / "copy-0")
    (copy / JOURNAL).write_bytes(stale)
    with Log(copy) as log:
        assert log.recovery.journal_records == 0
        assert [v for _, v in _values(log)] == [b"%d" % i for i in range(10)]


def test_torn_record_after_the_commit_is_ignored_and_the_open_batch_repaired(tmp_path):
    j = _engine.AppendJournal(str(tmp_path / JOURNAL))
    w = _engine.BatchWriter(next_offset=100)
    for i in range(3):
        j.add(w, b"v%d" % i, None, None, 1000 + i)
    finished, records = j.committed
    assert (finished, records) == (0, 3)
    data = bytearray((tmp_path / JOURNAL).read_bytes())
    end = 64 + w.open_bytes
    data[end:end + 40] = b"\x7f" * 40               # a record whose copy was cut short by the kill
    batches = _engine.journal_batches(bytes(data))
    [b] = _engine.batches(batches)
    assert (b.base_offset, b.records_count, b.max_timestamp) == (100, 3, 1002)
    assert [r.value for r in _engine.decode_records(batches)] == [b"v0", b"v1", b"v2"]      # CRC checked
    data[64 + 61] = 0x7F                             # a committed record's framing damaged: not served
    assert _engine.journal_batches(bytes(data)) == b""
    j.close()


def test_a_full_disk_refuses_the_append_that_needs_more_journal(tmp_path):
    with Log(tmp_path / "t-0") as log:
        log.append(b"before")
        with FaultPlan().fail("fallocate", errno.ENOSPC, path="*/" + JOURNAL):
            with pytest.raises(StorageError) as e:
                log.append(b"B" * 100_000)
        assert e.value.path.endswith(JOURNAL) and e.value.errno == errno.ENOSPC
        assert log.end_offset == 1                   # not taken
        assert log.append(b"next") == 1
        copy = crash_copy(tmp_path / "t-0", tmp_path / "copy-0")
    with Log(copy) as log:
        assert [v for _, v in _values(log)] == [b"before", b"next"]


def test_a_failed_segment_write_keeps_the_records_for_the_next_call(tmp_path):
    with Log(tmp_path / "t-0") as log:
        offsets = [log.append(b"%d" % i) for i in range(20)]
        with FaultPlan().fail("pwrite", errno.EIO, path="*.log", times=None):
            with pytest.raises(StorageError):
                log.flush()
            with pytest.raises(StorageError):
                log.append(b"refused")               # the pending write is retried first, and fails again
        assert log.end_offset == 20
        log.flush()
        assert [o for o, _ in _values(log)] == offsets
    assert not os.path.exists(tmp_path / "t-0" / (JOURNAL + ".tmp"))


def test_a_writer_encoding_into_the_journal_keeps_its_bytes_when_the_journal_goes(tmp_path):
    j = _engine.AppendJournal(str(tmp_path / JOURNAL))
    w = _engine.BatchWriter(next_offset=0, batch_bytes=1000)
    values = [b"v%03d-" % i * 12 for i in range(60)]
    for i, v in enumerate(values):                   # several batches: the writer encodes into the mapping
        assert j.add(w, v, None, None, 1000 + i) == i
        committed = _engine.journal_batches((tmp_path / JOURNAL).read_bytes())
        assert [r.value for r in _engine.decode_records(committed)] == values[:i + 1]
    j.close()                                        # the writer takes its bytes back before the unmapping
    w.add(b"after")
    w.finish()
    assert [r.value for r in _engine.decode_records(bytes(w))] == values + [b"after"]
    j2 = _engine.AppendJournal(str(tmp_path / "other"))
    w2 = _engine.BatchWriter(next_offset=0)
    j2.add(w2, b"x")
    del j2                                           # the writer keeps the mapping it encodes into alive
    w2.add(b"y" * 100_000)                           # grows past the mapping: into memory of its own
    w2.finish()
    assert [r.value for r in _engine.decode_records(bytes(w2))] == [b"x", b"y" * 100_000]

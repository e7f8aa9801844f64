"""Segment: one .log plus indexes: append, roll decisions, reads, recovery, truncation under live views."""

import os

import pytest

from seglog import _engine
from seglog.errors import CorruptRecordError, ReadOnlyLogError


def batches(base, n, size=100, per_batch=1, ts0=1_000):
    """n batches of per_batch records of `size` bytes, offsets from base, timestamps ts0, ts0+1, ..."""
    w = _engine.BatchWriter(next_offset=base, batch_records=per_batch)
    for i in range(n * per_batch):
        w.add(bytes([i % 251]) * size, None, None, ts0 + i)
    w.finish()
    return w.take()


@pytest.fixture
def seg(tmp_path):
    s = _engine.Segment(str(tmp_path), 0, index_interval_bytes=400, create=True)
    s.activate(1 << 20)
    yield s
    s.close()


def test_files_and_names(seg, tmp_path):
    assert sorted(os.listdir(tmp_path)) == ["00000000000000000000.index", "00000000000000000000.log",
                                            "00000000000000000000.timeindex"]
    assert _engine.segment_name(1234) == "00000000000000001234"


def test_append_indexes_every_interval_like_kafka(seg):
    data = batches(0, 20)                     # each batch is 61 + ~107 bytes
    size = _engine.batches(data)[0].size
    seg.append(data)
    assert seg.size == len(data) and seg.next_offset == 20
    # Kafka's rule: an entry (batch last offset -> batch position) when > interval bytes since the last
    expected, since = [], 0
    for i in range(20):
        if since > 400:
            expected.append((i, i * size))
            since = 0
        since += size
    idx = seg.offset_index
    assert [idx.entry(i) for i in range(idx.entries)] == expected
    assert seg.time_index.last_entry[0] == 1000 + expected[-1][0]


def test_read_whole_batches(seg):
    seg.append(batches(0, 10))
    size = _engine.batches(batches(0, 1))[0].size
    view, nxt, next_offset = seg.read(0, size * 3 + 5)
    assert len(view) == size * 3 and nxt == size * 3 and next_offset == 3
    view, _, _ = seg.read(0, 10)                      # smaller than one batch: still one batch
    assert len(view) == size
    view, _, _ = seg.read(0, 10, min_one=False)
    assert len(view) == 0
    view, _, next_offset = seg.read(0, 10**9, max_offset=4)
    assert len(view) == 4 * size and next_offset == 4
    assert seg.find_position(7) == 7 * size
    assert seg.find_position(10) == -1
    assert [r.offset for r in _engine.decode_records(seg.read(seg.find_position(5), 10**6)[0])] == list(range(5, 10))


def test_read_is_zero_copy(seg):
    seg.append(batches(0, 5))
    a, _, _ = seg.read(0, 10**6)
    b, _, _ = seg.read(0, 10**6)
    c, _, _ = seg.read(seg.find_position(3), 10**6)
    assert _engine.view_address(a) == _engine.view_address(b) == seg.mapping.address    # no copy: the mapping itself
    assert _engine.view_address(c) == seg.mapping.address + seg.find_position(3)
    assert a.readonly


def test_fits_roll_reasons(seg):
    one = batches(0, 1)
    size = len(one)
    assert seg.fits(one, 0, 10, 10**9) == size        # an empty segment always takes one batch
    seg.append(one)
    assert seg.fits(batches(1, 1), 0, size * 2 - 1, 10**9) == 0              # size
    assert seg.fits(batches(1, 1, ts0=1000 + 61), 0, 10**9, 60) == 0         # age (by message timestamps)
    assert seg.fits(batches(1, 1, ts0=1000 + 60), 0, 10**9, 60) == size
    far = batches(2**31, 1)
    assert seg.fits(far, 0, 10**9, 10**9) == 0                               # relative offset overflow
    two = batches(1, 2)
    assert seg.fits(two, 0, size * 2, 10**9) == size                         # partial: first batch fits


def test_index_full_rolls(tmp_path):
    # both indexes get max_index_bytes, so the time index (12-byte entries) fills first, as in Kafka
    s = _engine.Segment(str(tmp_path), 0, index_interval_bytes=0, max_index_bytes=12 * 3, create=True)
    s.activate(1 << 20)
    data = batches(0, 10)
    end = s.fits(data, 0, 10**9, 10**9)
    s.append(data, 0, end)
    assert (s.time_index.entries, s.offset_index.entries, s.next_offset) == (3, 3, 4)
    assert s.fits(data, end, 10**9, 10**9) == end
    s.close()


def test_recover_cuts_torn_tail_and_rebuilds_indexes(tmp_path):
    s = _engine.Segment(str(tmp_path), 0, index_interval_bytes=400, create=True)
    s.activate(1 << 20)
    s.append(batches(0, 20))
    entries = [s.offset_index.entry(i) for i in range(s.offset_index.entries)]
    good = s.size
    s.close()
    log = tmp_path / "00000000000000000000.log"
    with open(log, "ab") as f:
        f.write(batches(20, 1)[:50])                 # torn batch
    os.remove(tmp_path / "00000000000000000000.index")
    s = _engine.Segment(str(tmp_path), 0, index_interval_bytes=400)
    truncated, reason = s.recover()
    assert truncated == 50 and reason is not None
    assert s.size == good == os.path.getsize(log) and s.next_offset == 20
    assert [s.offset_index.entry(i) for i in range(s.offset_index.entries)] == entries
    s.close()


def test_recover_stops_at_crc_mismatch(tmp_path):
    s = _engine.Segment(str(tmp_path), 0, create=True)
    data = batches(0, 5)
    size = len(data) // 5
    s.append(data)
    s.close()
    with open(tmp_path / "00000000000000000000.log", "r+b") as f:
        f.seek(2 * size + 70)
        f.write(b"\xff")
    s = _engine.Segment(str(tmp_path), 0)
    truncated, reason = s.recover()
    assert "CRC" in reason and s.size == 2 * size and truncated == 3 * size and s.next_offset == 2
    s.close()


def test_corrupt_batch_is_never_served(tmp_path):
    s = _engine.Segment(str(tmp_path), 0, create=True)
    data = batches(0, 3)
    size = len(data) // 3
    s.append(data)
    s.close()
    with open(tmp_path / "00000000000000000000.log", "r+b") as f:
        f.seek(size + 80)
        f.write(b"\x00\x01")
    s = _engine.Segment(str(tmp_path), 0)              # reopened without recovery (as after a clean shutdown)
    view, _, next_offset = s.read(0, 10**6)
    assert len(view) == size and next_offset == 1 or pytest.fail("must stop before the corrupt batch")
    with pytest.raises(CorruptRecordError) as e:
        s.read(size, 10**6)
    assert e.value.offset == 1 and e.value.path.endswith(".log")
    s.close()


def test_truncate_without_views_cuts_in_place(seg):
    seg.append(batches(0, 10))
    size = seg.size // 10
    assert seg.truncate_to(6) == 4 * size
    assert seg.next_offset == 6 and seg.size == 6 * size
    assert os.path.getsize(seg.log_path) == 6 * size
    assert all(seg.offset_index.entry(i)[0] < 6 for i in range(seg.offset_index.entries))
    seg.append(batches(6, 2))
    assert seg.next_offset == 8


def test_truncate_keeps_live_views_intact(seg):
    seg.append(batches(0, 10))
    view, _, _ = seg.read(0, 10**6)
    copy = bytes(view)
    inode = os.stat(seg.log_path).st_ino
    seg.truncate_to(3)
    seg.append(batches(3, 7, ts0=9_000))               # overwrite the same file positions with new data
    assert bytes(view) == copy                         # the view still shows the old bytes
    assert os.stat(seg.log_path).st_ino != inode       # the kept prefix was copied to a new file
    assert [r.timestamp for r in _engine.decode_records(seg.read(0, 10**6)[0])][3:5] == [9000, 9001]
    del view


def test_views_outlive_close(seg):
    seg.append(batches(0, 3))
    view, _, _ = seg.read(0, 10**6)
    copy = bytes(view)
    seg.close()
    os.remove(seg.log_path)
    assert bytes(view) == copy


def test_seal_trims_indexes(seg):
    seg.append(batches(0, 30))
    entries = seg.offset_index.entries
    seg.seal()
    assert os.path.getsize(seg.index_path) == 8 * entries
    assert seg.time_index.last_entry == (1029, 29)     # final entry: the segment's largest timestamp
    assert seg.largest_timestamp == 1029


def test_read_only_segment_sees_whole_batches_only(tmp_path, seg):
    data = batches(0, 4)
    seg.append(data)
    with open(seg.log_path, "ab") as f:                # a batch being written by the other process
        f.write(batches(4, 1)[:30])
    ro = _engine.Segment(str(tmp_path), 0, writable=False)
    assert ro.scan_tail() == len(data)
    assert [r.offset for r in _engine.decode_records(ro.read(0, 10**6)[0])] == [0, 1, 2, 3]
    with pytest.raises(ReadOnlyLogError):
        ro.append(data)
    ro.close()


def test_find_offset_by_timestamp(seg):
    seg.append(batches(0, 5, per_batch=4, ts0=100))    # records 0..19 with timestamps 100..119
    assert seg.find_offset_by_timestamp(107, 0) == (7, 107)
    assert seg.find_offset_by_timestamp(50, 0) == (0, 100)
    assert seg.find_offset_by_timestamp(107, 10) == (10, 110)
    assert seg.find_offset_by_timestamp(500, 0) is None

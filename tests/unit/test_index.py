"""OffsetIndex / TimeIndex: entry format, lookups at every edge, growth, trimming, truncation, sanity checks."""

import os
import struct

import pytest

from seglog import _engine
from seglog.errors import InvalidArgumentError, ReadOnlyLogError, StorageError


@pytest.fixture
def oindex(tmp_path):
    idx = _engine.OffsetIndex(str(tmp_path / "00000000000000000100.index"), 100, max_index_bytes=8 * 64)
    yield idx
    idx.close()


def test_offset_entries_are_kafkas_format(oindex):
    oindex.append(105, 4200)
    oindex.append(130, 9000)
    oindex.trim()
    raw = open(oindex.path, "rb").read()
    assert raw == struct.pack(">ii", 5, 4200) + struct.pack(">ii", 30, 9000)


def test_offset_lookup_edges(oindex):
    assert oindex.lookup(500) == (100, 0)                 # empty: scan from the start
    for rel, pos in [(10, 1000), (20, 2000), (30, 3000)]:
        oindex.append(100 + rel, pos)
    assert oindex.lookup(50) == (100, 0)                  # before the segment
    assert oindex.lookup(109) == (100, 0)                 # before the first entry
    assert oindex.lookup(110) == (110, 1000)              # exact
    assert oindex.lookup(119) == (110, 1000)              # between
    assert oindex.lookup(120) == (120, 2000)
    assert oindex.lookup(10**12) == (130, 3000)           # past the last
    assert oindex.last_entry == (130, 3000)


def test_offset_lookup_matches_bisect_on_many_entries(tmp_path):
    import bisect
    import random
    idx = _engine.OffsetIndex(str(tmp_path / "x.index"), 0, max_index_bytes=8 * 5000)
    offs = sorted(random.Random(1).sample(range(1, 10**6), 4999))
    for i, o in enumerate(offs):
        idx.append(o, (i + 1) * 10)
    for target in random.Random(2).sample(range(0, 10**6 + 10), 2000):
        i = bisect.bisect_right(offs, target) - 1
        assert idx.lookup(target) == ((offs[i], (i + 1) * 10) if i >= 0 else (0, 0))
    idx.close()


def test_append_rules(oindex):
    oindex.append(110, 100)
    with pytest.raises(InvalidArgumentError):
        oindex.append(110, 200)                           # offset must grow
    with pytest.raises(InvalidArgumentError):
        oindex.append(120, 100)                           # position must grow
    with pytest.raises(InvalidArgumentError):
        oindex.append(99, 300)                            # below base offset
    with pytest.raises(InvalidArgumentError):
        oindex.append(100 + 2**31, 300)                   # relative offset overflows int32
    for i in range(63):
        oindex.append(200 + i, 1000 + i)
    assert oindex.is_full
    with pytest.raises(StorageError, match="full"):
        oindex.append(1000, 10**6)


def test_truncate_and_reopen_untrimmed(tmp_path):
    path = str(tmp_path / "00000000000000000000.index")
    idx = _engine.OffsetIndex(path, 0, max_index_bytes=8 * 100)
    idx.grow()
    for i in range(1, 11):
        idx.append(i * 10, i * 100)
    idx.truncate_to(55)                                   # drops entries for offsets >= 55
    assert idx.entries == 5 and idx.last_entry == (50, 500)
    idx.close()
    assert os.path.getsize(path) == 800                   # still preallocated (sparse)
    again = _engine.OffsetIndex(path, 0, max_index_bytes=8 * 100)
    assert again.entries == 5 and again.last_entry == (50, 500)
    again.trim()
    assert os.path.getsize(path) == 40
    again.close()


def test_sanity_check(tmp_path):
    path = str(tmp_path / "0.index")
    idx = _engine.OffsetIndex(path, 0)
    idx.append(10, 100)
    idx.append(20, 200)
    idx.trim()
    idx.sanity_check(log_size=300)
    with pytest.raises(_engine.CorruptIndexError):
        idx.sanity_check(log_size=150)                    # an entry points past the log
    idx.close()
    with open(path, "r+b") as f:
        f.seek(8)
        f.write(struct.pack(">ii", 5, 50))                # offsets go backwards
    idx = _engine.OffsetIndex(path, 0)
    with pytest.raises(_engine.CorruptIndexError):
        idx.sanity_check(log_size=300)
    idx.close()


def test_time_index(tmp_path):
    path = str(tmp_path / "00000000000000000050.timeindex")
    t = _engine.TimeIndex(path, 50, max_index_bytes=12 * 4)
    assert t.lookup(10**13) == (-1, 50)
    t.maybe_append(1000, 55)
    t.maybe_append(1000, 60)                              # not newer: ignored
    t.maybe_append(900, 61)                               # older: ignored
    t.maybe_append(2000, 70)
    assert t.entries == 2
    assert t.lookup(999) == (-1, 50)
    assert t.lookup(1000) == (1000, 55)
    assert t.lookup(1999) == (1000, 55)
    assert t.lookup(5000) == (2000, 70)
    with pytest.raises(InvalidArgumentError):
        t.maybe_append(3000, 65)                          # offset going back
    t.maybe_append(3000, 80)
    t.maybe_append(4000, 90)
    assert t.is_full
    t.maybe_append(5000, 95)                              # full: ignored ...
    assert t.entries == 4
    t.maybe_append(5000, 95, True)                        # ... except the final entry of a rolling segment
    assert t.last_entry == (5000, 95)
    t.trim()
    t.close()
    raw = open(path, "rb").read()
    assert raw[:12] == struct.pack(">qi", 1000, 5)
    t = _engine.TimeIndex(path, 50)
    assert t.entries == 5
    t.sanity_check(next_offset=96)
    with pytest.raises(_engine.CorruptIndexError):
        t.sanity_check(next_offset=90)
    t.close()


def test_read_only_index_is_a_snapshot(tmp_path):
    path = str(tmp_path / "0.index")
    w = _engine.OffsetIndex(path, 0)
    w.grow()
    w.append(10, 100)
    r = _engine.OffsetIndex(path, 0, writable=False)
    assert r.entries == 1
    w.append(20, 200)
    assert r.entries == 1
    r.reload()
    assert r.entries == 2 and r.lookup(25) == (20, 200)
    w.trim()                                              # the writer shrinks the file under the reader
    assert r.lookup(25) == (20, 200)
    with pytest.raises(ReadOnlyLogError):
        r.append(30, 300)
    missing = _engine.OffsetIndex(str(tmp_path / "nope.index"), 0, writable=False)
    assert missing.entries == 0 and missing.lookup(5) == (0, 0)
    for i in (w, r, missing):
        i.close()

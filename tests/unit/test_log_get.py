"""Log.get / Log.get_many: one record by offset (engine point.pxi), checked against records() — every offset,
every codec, several segments — and at the edges: the log's start and end, offsets compaction removed,
control records, truncation, read-only logs, and damaged batches (bad CRC, a cut file, records that do not
parse under a valid CRC)."""

from __future__ import annotations

import os
import random
import struct

import pytest

from seglog import Log, LogConfig, _engine
from seglog.errors import CorruptRecordError, InvalidArgumentError, LogClosedError, OffsetOutOfRangeError
from seglog.scheduler import Task

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def fields(r):
    return None if r is None else (r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers, r.topic,
                                   r.partition)


def fill(log, n, rng, codec="none", per_call=50):
    """n records with keys, headers and nulls mixed in, appended per call and in batches."""
    i = 0
    while i < n:
        k = min(per_call, n - i)
        vals = [None if rng.random() < 0.05 else os.urandom(rng.randrange(0, 300)) for _ in range(k)]
        keys = [b"k%d" % rng.randrange(10) if rng.random() < 0.7 else None for _ in range(k)]
        hdrs = [[("h", b"%d" % j), ("n", None)] if j % 3 == 0 else None for j in range(k)]
        if rng.random() < 0.3:
            for v, key, h in zip(vals, keys, hdrs):
                log.append(v, key=key, headers=h)
        else:
            log.append_batch(vals, keys=keys, headers=hdrs, compression=codec)
        i += k


@pytest.mark.parametrize("codec", CODECS)
def test_every_offset_matches_records(tmp_path, codec):
    rng = random.Random(3)
    with Log(tmp_path / "t-0", LogConfig(segment_bytes=64 << 10, index_interval_bytes=512)) as log:
        fill(log, 3000, rng, codec)
        assert log.segment_count > 3
        expected = [fields(r) for r in log.records()]
        assert [fields(log.get(o)) for o in range(log.end_offset)] == expected
        order = list(range(log.end_offset))
        rng.shuffle(order)
        assert [fields(log.get(o)) for o in order] == [expected[o] for o in order]
        assert [fields(r) for r in log.get_many(order)] == [expected[o] for o in order]
        assert log._points.held_batches <= 16 and log._points.held_bytes <= 8 << 20


def test_log_append_time_and_buffered_records(tmp_path):
    with Log(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime")) as log:
        log.append_batch([b"a", b"b"], timestamps=[5, 6])
        log.append(b"c", timestamp=7)                        # still buffered by append(): get sees it
        got = log.get_many([0, 1, 2])
        assert [r.value for r in got] == [b"a", b"b", b"c"]
        assert all(r.timestamp_type == 1 and r.timestamp > 7 for r in got)
        assert [fields(r) for r in got] == [fields(r) for r in log.records()]


def test_edges_of_the_log(tmp_path):
    with Log(tmp_path / "t-0", LogConfig(segment_bytes=4096)) as log:
        log.append_batch([b"v%d" % i for i in range(500)])
        assert log.get(log.end_offset) is None               # the log end: nothing yet, as a fetch there
        with pytest.raises(OffsetOutOfRangeError) as e:
            log.get(log.end_offset + 1)
        assert (e.value.start, e.value.end) == (0, 500)
        log.delete_records_before(100)
        with pytest.raises(OffsetOutOfRangeError):
            log.get(99)
        assert log.get(100).value == b"v100"
        with pytest.raises(OffsetOutOfRangeError):         # every offset checked before any is read
            log.get_many([100, 101, 501])
        assert log.get_many([]) == []
        assert [r.value for r in log.get_many([499, 100, 499])] == [b"v499", b"v100", b"v499"]
        for bad in (-1, 1.5, "3", True, None):
            with pytest.raises(InvalidArgumentError):
                log.get(bad)
        log.high_watermark = 200                            # get reads to the end, as records() does
        assert log.get(300).value == b"v300"
    with pytest.raises(LogClosedError):
        log.get(100)


def test_truncation_and_reappend_are_seen(tmp_path):
    for codec in ("none", "lz4"):
        with Log(tmp_path / codec / "t-0") as log:
            log.append_batch([b"old%d" % i for i in range(100)], compression=codec)
            assert log.get(50).value == b"old50"           # cached: checked (and decompressed) once
            log.truncate_to(0)
            log.append_batch([b"new%d" % i for i in range(100)], compression=codec)
            assert log.get(50).value == b"new50"
            assert log.get_many([0, 99])[1].value == b"new99"


class ManualScheduler:
    def schedule(self, fn, delay, period=None, name=""):
        return Task(fn, period, name)


def test_offsets_removed_by_compaction_are_none(tmp_path):
    cfg = LogConfig(segment_bytes=4096, cleanup_policy=("compact",), file_delete_delay_ms=0)
    with Log(tmp_path / "t-0", cfg, scheduler=ManualScheduler()) as log:
        latest = {}
        for i in range(1500):
            key = b"key-%d" % (i % 20)
            latest[key] = log.append(b"value-%d" % i, key=key, timestamp=1_700_000_000_000 + i)
        log.roll()
        assert log.get(0).value == b"value-0"               # read (and remembered) before the swap
        log.compact(now_ms=1_700_000_000_000)
        kept = set(latest.values())
        for off in range(0, 1500):
            r = log.get(off)
            assert (r is not None) == (off in kept), off
            if r is not None:
                assert r.value == b"value-%d" % off
        # records() goes on with the next record, get() names only its own offset
        assert next(log.records(0)).offset == min(kept)


def control_batch(base_offset: int) -> bytes:
    """A transaction marker (control batch, one abort record) at base_offset, as a leader writes it."""
    w = _engine.BatchWriter(next_offset=base_offset, producer_id=7, producer_epoch=0)
    w.add(b"\x00\x00\x00\x00\x00\x00", key=b"\x00\x00\x00\x00")
    w.finish()
    data = bytearray(w.take())
    attrs = struct.unpack_from(">h", data, 21)[0] | 0x30       # transactional + control
    struct.pack_into(">h", data, 21, attrs)
    struct.pack_into(">I", data, 17, _engine.crc32c(bytes(data[21:])))
    return bytes(data)


def test_control_records_are_none(tmp_path):
    with Log(tmp_path / "t-0") as log:
        log.append_batch([b"a", b"b"])
        log.append_as_follower(control_batch(2))
        log.append_batch([b"c"])
        assert [fields(r)[4] if r else None for r in log.get_many([0, 1, 2, 3])] == [b"a", b"b", None, b"c"]
        assert [r.offset for r in log.records()] == [0, 1, 3]


def test_read_only_log(tmp_path):
    path = tmp_path / "t-0"
    with Log(path, LogConfig(segment_bytes=8192)) as log:
        log.append_batch([b"v%d" % i for i in range(300)])
        log.append_batch([b"z%d" % i for i in range(300)], compression="zstd")
        log.append(b"journaled")                           # in the append journal only, until close
        with Log(path, readonly=True) as ro:
            assert [ro.get(o).value for o in (0, 299, 300, 599)] == [b"v0", b"v299", b"z0", b"z299"]
            assert ro.get(600).value == b"journaled"
            assert [fields(r) for r in ro.get_many(range(601))] == [fields(r) for r in ro.records()]
            assert ro.get(601) is None


def segment_file(path, base=0):
    return os.path.join(path, _engine.segment_name(base) + ".log")


def test_bad_crc_raises_and_other_batches_read(tmp_path):
    path = tmp_path / "t-0"
    with Log(path, LogConfig(segment_bytes=1 << 20)) as log:
        for i in range(3):
            log.append_batch([b"batch%d-%d" % (i, j) for j in range(50)])
        infos = _engine.batches(log.read(0, 1 << 20))
        log.roll()                                           # sealed: kept whole at open, damage and all
        log.append_batch([b"after"])
    with open(segment_file(path), "r+b") as f:               # a value byte of the middle batch
        f.seek(infos[1].position + infos[1].size - 5)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    for readonly in (False, True):
        with Log(path, readonly=readonly) as log:
            assert log.get(10).value == b"batch0-10"
            for _ in range(2):                               # not remembered as good after failing
                with pytest.raises(CorruptRecordError) as e:
                    log.get(60)
                assert e.value.position == infos[1].position
            with pytest.raises(CorruptRecordError):
                log.get_many([10, 60])
            assert log.get(149).value == b"batch2-49"
            assert log.get(150).value == b"after"


def test_cut_segment_raises(tmp_path):
    path = tmp_path / "t-0"
    with Log(path, LogConfig(segment_bytes=4096)) as log:
        log.append_batch([os.urandom(100) for _ in range(200)])
        first_segment_end = log.segment_bases[1]
    size = os.path.getsize(segment_file(path))
    with open(segment_file(path), "r+b") as f:               # a sealed segment cut inside its last batch
        f.truncate(size - 40)
    with Log(path) as log:
        assert log.get(0) is not None
        with pytest.raises(CorruptRecordError):
            log.get(first_segment_end - 1)
        assert log.get(first_segment_end) is not None


def test_records_that_do_not_parse_under_a_valid_crc(tmp_path):
    w = _engine.BatchWriter(next_offset=0)
    for i in range(40):
        w.add(b"v%d" % i)
    w.finish()
    good = bytes(w.take())
    for cut in (1, 30):                                     # records section cut short; the lengths lie
        bad = bytearray(good[:-cut])
        struct.pack_into(">i", bad, 8, len(bad) - 12)
        struct.pack_into(">I", bad, 17, _engine.crc32c(bytes(bad[21:])))
        with Log(tmp_path / f"t{cut}-0") as log:
            log.append_as_follower(bytes(bad))
            with pytest.raises(CorruptRecordError):
                log.get(39)
            with pytest.raises(CorruptRecordError):
                log.get(0)                                  # the batch is walked whole once, before any record


def test_cache_bounds(tmp_path):
    cache = _engine.BatchCache()
    with Log(tmp_path / "t-0") as log:
        vals = [os.urandom(1000) for _ in range(20_000)]
        for i in range(40):                                 # ~500 KB inflated each: LZ4 frames of 8 blocks
            log.append_batch(vals[i * 500:(i + 1) * 500], compression="lz4")
        seg = log._local.active
        for i in range(40):
            assert _engine.point_record(seg, i * 500 + 7, cache).value == vals[i * 500 + 7]
            assert cache.held_batches <= 16 and cache.held_bytes <= 8 << 20
        assert cache.held_batches >= 8
        cache.clear()
        assert (cache.held_batches, cache.held_bytes, cache.checked_batches) == (0, 0, 0)

"""Log compaction (seglog.cleaner): every test compares the log with a plain-Python model of what Kafka's cleaner
keeps — the latest record per key below the cleaned offset, tombstones until their delete horizon, everything
else untouched — and reads the cleaned files back through the engine and, where it matters, through
kafka-python's independent reader."""

from __future__ import annotations

import os
import random
import struct

import pytest

from seglog import _engine, cleaner
from seglog.config import LogConfig
from seglog.errors import InvalidArgumentError, InvalidRecordError
from seglog.log import Log
from seglog.scheduler import Task

T0 = 1_700_000_000_000          # record timestamps start here
DAY = 86_400_000


class ManualScheduler:
    """Records tasks and never runs them: the tests drive maintain() and the cleaner with their own clock (the
    log's periodic tick would run them with the real one)."""

    def __init__(self):
        self.tasks = []

    def schedule(self, fn, delay, period=None, name=""):
        self.tasks.append(Task(fn, period, name))
        return self.tasks[-1]


@pytest.fixture
def sched():
    return ManualScheduler()


def compact_config(**kw) -> LogConfig:
    base = dict(segment_bytes=4096, cleanup_policy=("compact",), file_delete_delay_ms=0,
                delete_retention_ms=DAY)
    base.update(kw)
    return LogConfig(**base)


def open_log(path, sched, **kw) -> Log:
    return Log(str(path), compact_config(**kw), scheduler=sched)


def rows(log, start=None, end=None):
    return [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in log.records(start, end)]


def compacted(model, below, drop_tombstones=False):
    """The model's records after a full pass whose offset map covers [.., below): the latest record of each key
    below `below` (tombstones too, unless dropped; keyless records go) and everything at or past `below`."""
    latest = {}
    for off, key, value, ts, hdrs in model:
        if off < below and key is not None:
            latest[key] = off
    out = []
    for rec in model:
        off, key, value = rec[0], rec[1], rec[2]
        if off < below and (key is None or latest[key] != off or (value is None and drop_tombstones)):
            continue
        out.append(rec)
    return out


def fill(log, model, n, keys, rng, *, tombstone_every=0, ts_start=None, roll_every=None, headers=False):
    ts = (model[-1][3] + 1) if model and ts_start is None else (T0 if ts_start is None else ts_start)
    for i in range(n):
        key = b"key-%03d" % rng.randrange(keys)
        value = None if tombstone_every and rng.randrange(tombstone_every) == 0 else b"value-%d-%s" % (
            len(model), b"x" * rng.randrange(40))
        hdrs = (("h", b"%d" % i), ("n", None)) if headers and i % 3 == 0 else ()
        off = log.append(value, key=key, headers=list(hdrs) or None, timestamp=ts)
        model.append((off, key, value, ts, tuple(hdrs)))
        ts += 1
        if roll_every and (i + 1) % roll_every == 0:
            log.roll()


# --------------------------------------------------------------------------------------------------- basics

def test_latest_value_per_key_kept_offsets_preserved(tmp_path, sched):
    rng = random.Random(1)
    model = []
    with open_log(tmp_path / "t-0", sched) as log:
        fill(log, model, 3000, 40, rng, tombstone_every=25, headers=True)
        before_segments = log.segment_count
        active = log.segment_bases[-1]
        res = log.compact(now_ms=T0)
        assert res.aborted is None and res.map_end == active == res.first_uncleanable
        expected = compacted(model, active)
        assert rows(log) == expected
        assert log.segment_count < before_segments
        assert res.records_kept == len([r for r in expected if r[0] < active])
        # reading by offset: a kept offset is in the batch read returns; a removed one reads the next kept record
        kept = {r[0] for r in expected}
        for off in range(0, log.end_offset, 97):
            nxt = min(o for o in kept if o >= off)
            assert rows(log, off)[0][0] == nxt
            assert _engine.decode_records(log.read(off), off)[0].offset == nxt
        # each key's latest record is readable exactly once
        seen = {}
        for off, key, *_ in rows(log):
            seen[key] = seen.get(key, 0) + (1 if off < active else 0)
        assert all(c <= 1 for c in seen.values())
    with Log(str(tmp_path / "t-0"), compact_config(), scheduler=sched) as log:
        assert rows(log) == expected


def test_second_pass_is_idempotent_and_incremental(tmp_path, sched):
    rng = random.Random(2)
    model = []
    with open_log(tmp_path / "t-0", sched) as log:
        fill(log, model, 1500, 30, rng)
        first = log.compact(now_ms=T0)
        segments = log.segment_count
        again = log.compact(now_ms=T0)                 # nothing dirty: same records; small segments regrouped
        assert again.first_dirty == first.map_end and again.keys_mapped == 0
        assert rows(log) == compacted(model, first.map_end)
        assert log.segment_count < segments and again.segments_out == 1
        fill(log, model, 1500, 30, rng)
        third = log.compact(now_ms=T0)
        assert third.first_dirty == first.map_end      # only the new data was mapped
        assert third.keys_mapped <= 30
        assert rows(log) == compacted(model, third.map_end)
    with open(tmp_path / "t-0" / cleaner.CHECKPOINT_FILE) as f:
        assert f.read().split("\n") == ["0", "1", f"t 0 {third.map_end}", ""]


def test_active_segment_and_data_above_high_watermark_untouched(tmp_path, sched):
    rng = random.Random(3)
    model = []
    with open_log(tmp_path / "t-0", sched) as log:
        fill(log, model, 2000, 20, rng)
        bases = log.segment_bases
        hw = bases[len(bases) // 2] + 5                     # inside a sealed segment
        log.high_watermark = hw
        log.flush()
        stem = tmp_path / "t-0" / _engine.segment_name(bases[-1])
        active_bytes = (tmp_path / "t-0" / (stem.name + ".log")).read_bytes()
        active_ino = os.stat(str(stem) + ".log").st_ino
        untouched = [b for i, b in enumerate(bases) if i + 1 < len(bases) and bases[i + 1] > hw]
        stats = {b: os.stat(tmp_path / "t-0" / (_engine.segment_name(b) + ".log")) for b in untouched}
        res = log.compact(now_ms=T0)
        limit = max(b for b in bases if b <= hw)            # base of the segment holding the high watermark
        assert res.first_uncleanable == limit
        assert rows(log) == compacted(model, limit)
        assert (tmp_path / "t-0" / (stem.name + ".log")).read_bytes() == active_bytes
        assert os.stat(str(stem) + ".log").st_ino == active_ino
        for b, st in stats.items():
            now = os.stat(tmp_path / "t-0" / (_engine.segment_name(b) + ".log"))
            assert (now.st_ino, now.st_size, now.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)


def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path, sched):
    rng = random.Random(4)
    model = []
    with open_log(tmp_path / "t-0", sched, min_compaction_lag_ms=60_000) as log:
        fill(log, model, 600, 10, rng, ts_start=T0)
        log.roll()
        recent_base = log.end_offset
        fill(log, model, 600, 10, rng, ts_start=T0 + 120_000)   # newer than now - lag below
        log.roll()
        res = log.compact(now_ms=T0 + 120_000 + 30_000)
        assert res.first_uncleanable == recent_base
        assert rows(log) == compacted(model, recent_base)
        res = log.compact(now_ms=T0 + 10 * 60_000)              # everything old enough now
        assert res.first_uncleanable == log.segment_bases[-1]
        assert rows(log) == compacted(model, log.segment_bases[-1])


def test_not_compact_policy_refused(tmp_path, sched):
    with Log(str(tmp_path / "t-0"), LogConfig(cleanup_policy=("delete",)), scheduler=sched) as log:
        with pytest.raises(InvalidArgumentError):
            log.compact()


# ------------------------------------------------------------------------------------------------ tombstones

def test_tombstones_kept_until_delete_horizon(tmp_path, sched):
    retention = 10_000
    with open_log(tmp_path / "t-0", sched, delete_retention_ms=retention) as log:
        for i in range(50):
            log.append(b"old-%d" % i, key=b"gone", timestamp=T0 + i)
            log.append(b"v-%d" % i, key=b"stay", timestamp=T0 + i)
        tomb = log.append(None, key=b"gone", timestamp=T0 + 100)
        log.roll()
        log.append(b"x", key=b"other", timestamp=T0 + 200)
        now = T0 + 1000
        log.compact(now_ms=now)
        got = rows(log)
        assert [r[:3] for r in got] == [(99, b"stay", b"v-49"), (tomb, b"gone", None), (101, b"other", b"x")]
        info = [b for b in _engine.batches(log.read(tomb)) if b.base_offset <= tomb <= b.last_offset][0]
        assert info.attributes & 0x40 and info.base_timestamp == now + retention      # Kafka 3.x delete horizon
        assert got[1][3] == T0 + 100                                                # record timestamp unchanged
        log.compact(now_ms=now + retention - 1)
        assert [r[:3] for r in rows(log)][1] == (tomb, b"gone", None)
        res = log.compact(now_ms=now + retention)
        assert res.tombstones_dropped == 1
        assert [r[:3] for r in rows(log)] == [(99, b"stay", b"v-49"), (101, b"other", b"x")]
        assert all(r[1] != b"gone" for r in rows(log))                              # no old value resurrected


def test_capped_passes_continue_from_the_checkpoint(tmp_path, sched):
    """A pass stopped by its offset-map bound keeps everything at or past map_end as it is (tombstones too); the
    next passes continue from the checkpoint, each leaving exactly the latest record per key below its map_end."""
    rng = random.Random(5)
    model = []
    with open_log(tmp_path / "t-0", sched) as log:
        fill(log, model, 3000, 400, rng, tombstone_every=5)
        res = cleaner.clean(log, T0, max_map_keys=50)
        assert res.capped and 0 < res.map_end < log.segment_bases[-1]
        assert rows(log) == compacted(model, res.map_end)
        passes = 1
        while res.capped:
            prev = res.map_end
            res = cleaner.clean(log, T0, max_map_keys=50)
            passes += 1
            assert res.aborted is None and res.first_dirty == prev and res.map_end > prev
            assert rows(log) == compacted(model, res.map_end)
        assert passes > 2 and res.map_end == log.segment_bases[-1]


# ---------------------------------------------------------------------------------------- batch re-encoding

def kafka_python_records(data):
    from kafka.record.default_records import DefaultRecordBatch
    from kafka.record.memory_records import MemoryRecords

    out, batches = [], []
    mr = MemoryRecords(bytes(data))
    while mr.has_next():
        batch = mr.next_batch()
        assert isinstance(batch, DefaultRecordBatch) and batch.validate_crc()
        batches.append((batch.base_offset, batch.last_offset_delta, batch.compression_type))
        for r in batch:
            out.append((r.offset, r.key, r.value, r.timestamp))
    return out, batches


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_reencoded_batches_keep_offsets_codec_and_last_offset_delta(tmp_path, sched, codec):
    rng = random.Random(6)
    model = []
    with open_log(tmp_path / "t-0", sched, segment_bytes=1 << 20) as log:
        for _ in range(6):
            keys = [b"k%d" % rng.randrange(300) for _ in range(200)]
            values = [None if rng.randrange(10) == 0 else b"val-%d" % rng.randrange(10**6) for _ in keys]
            ts = [T0 + len(model) + i for i in range(len(keys))]
            first, last = log.append_batch(values, keys=keys, timestamps=ts, compression=codec)
            model += [(first + i, k, v, t, ()) for i, (k, v, t) in enumerate(zip(keys, values, ts))]
        original = {b.base_offset: b for b in _engine.batches(log.read(0, 1 << 30))}
        for b in original.values():                     # supersede each batch's last record: its batch must
            key = model[b.last_offset][1]               # still describe the original last offset
            off = log.append(b"newer", key=key, timestamp=T0 + 10_000)
            model.append((off, key, b"newer", T0 + 10_000, ()))
        log.roll()
        log.compact(now_ms=T0)
        expected = compacted(model, log.segment_bases[-1])
        assert rows(log) == expected
        data = log.read(0, 1 << 30)
        for b in _engine.batches(data):
            o = original.get(b.base_offset)
            if o is None:
                continue                                 # the batch of the superseding records
            assert (b.last_offset_delta, b.codec, b.producer_id, b.base_sequence) == \
                   (o.last_offset_delta, o.codec, o.producer_id, o.base_sequence)
            assert b.records_count < o.records_count        # every batch lost records
        recs, batches = kafka_python_records(data)
        assert [r for r in recs] == [(o, k, v, t) for o, k, v, t, _ in expected]
        assert all(lod == original[base].last_offset_delta for base, lod, _ in batches if base in original)
        assert sum(base in original for base, _, _ in batches) >= 2


def test_keyless_records_are_refused_then_dropped_headers_survive(tmp_path, sched):
    """A compacted log refuses records without a key (Kafka's INVALID_RECORD); ones written while the topic was
    cleanup.policy=delete are dropped by the first pass after it turned compact, as Kafka's cleaner does."""
    with Log(str(tmp_path / "t-0"), compact_config(cleanup_policy=("delete",)), scheduler=sched) as log:
        model = []
        for i in range(300):
            key = None if i % 7 == 0 else b"k%d" % (i % 5)
            hdrs = (("trace", b"%d" % i), ("empty", None)) if i % 2 else ()
            off = log.append(b"v%d" % i, key=key, headers=list(hdrs) or None, timestamp=T0 + i)
            model.append((off, key, b"v%d" % i, T0 + i, hdrs))
        log.config = compact_config()
        end = log.end_offset
        with pytest.raises(InvalidRecordError, match="without a key") as e:
            log.append(b"no key")
        assert e.value.code == 87
        with pytest.raises(InvalidRecordError):
            log.append_batch([b"a", b"b"], keys=[b"k", None])
        with pytest.raises(InvalidRecordError):
            log.append_batch([b"a"])
        w = _engine.BatchWriter()
        w.add_many([b"a", b"b"], keys=[b"k", None])
        with pytest.raises(InvalidRecordError):
            log.append_raw(w.take())
        assert log.end_offset == end                      # nothing written
        log.roll()
        res = log.compact(now_ms=T0)
        assert rows(log) == compacted(model, log.segment_bases[-1])
        assert res.keyless_dropped == len([m for m in model if m[1] is None]) > 0
        assert not any(r[1] is None for r in rows(log))


def test_log_append_time_batches(tmp_path, sched):
    with open_log(tmp_path / "t-0", sched, message_timestamp_type="LogAppendTime") as log:
        for i in range(400):
            log.append(b"v%d" % i, key=b"k%d" % (i % 8))
        before = {r.offset: r.timestamp for r in log.records()}
        log.roll()
        log.compact()
        after = list(log.records())
        assert len(after) == 8
        assert all(r.timestamp == before[r.offset] and r.timestamp_type == 1 for r in after)


# ------------------------------------------------------------------------------------------ reads and indexes

def test_offset_for_timestamp_after_compaction(tmp_path, sched):
    rng = random.Random(7)
    model = []
    with open_log(tmp_path / "t-0", sched, index_interval_bytes=256) as log:
        fill(log, model, 2500, 25, rng)
        log.compact(now_ms=T0)
        kept = compacted(model, log.segment_bases[-1])
        for ts in range(T0 - 5, T0 + 2600, 37):
            want = next(((o, t) for o, _, _, t, _ in kept if t >= ts), None)
            got = log.offset_for_timestamp(ts)
            assert (tuple(got) if got else None) == want
        for base in log.segment_bases[:-1]:
            log._local.segment(base).check_indexes()


def test_views_taken_before_a_swap_stay_valid(tmp_path, sched):
    rng = random.Random(8)
    model = []
    with open_log(tmp_path / "t-0", sched) as log:
        fill(log, model, 2000, 10, rng)
        views = [log.read(off, 1 << 16) for off in (0, 500, 1000)]
        copies = [bytes(v) for v in views]
        inode = os.stat(os.path.join(log.path, "00000000000000000000.log")).st_ino
        segments = log.segment_count
        log.compact(now_ms=T0)
        assert log.segment_count < segments
        assert os.stat(os.path.join(log.path, "00000000000000000000.log")).st_ino != inode
        for v, c in zip(views, copies):
            assert bytes(v) == c                             # the unlinked files stay mapped
            assert len(_engine.decode_records(v)) > 0
        assert not [n for n in os.listdir(log.path) if n.endswith(".deleted")]   # file.delete.delay.ms = 0


def test_first_segment_cleaned_empty_keeps_start_offset(tmp_path, sched):
    with open_log(tmp_path / "t-0", sched) as log:
        for i in range(100):
            log.append(b"a%d" % i + b"." * 20, key=b"k%d" % (i % 10), timestamp=T0 + i)
        log.roll()
        for i in range(10):                                  # supersedes every key of the first segment
            log.append(b"b%d" % i + b"." * 200, key=b"k%d" % i, timestamp=T0 + 200 + i)
        log.roll()
        log.append(b"tail", key=b"z", timestamp=T0 + 300)
        sizes = [os.path.getsize(os.path.join(log.path, _engine.segment_name(b) + ".log")) for b in (0, 100)]
        assert sum(sizes) > log.config.segment_bytes          # so the first segment is a group of its own
        log.compact(now_ms=T0)
        assert log.segment_bases[0] == 0 and log.start_offset == 0
        assert os.path.getsize(os.path.join(log.path, "00000000000000000000.log")) == 0
        assert [r.offset for r in log.records()] == list(range(100, 111))
        assert [r.offset for r in log.records(start=0)] == list(range(100, 111))
        assert log.read(0).nbytes > 0
    with Log(str(tmp_path / "t-0"), compact_config(), scheduler=sched) as log:
        assert log.start_offset == 0 and [r.offset for r in log.records()] == list(range(100, 111))


def test_truncation_during_a_pass_aborts_it(tmp_path, sched, monkeypatch):
    rng = random.Random(9)
    model = []
    with open_log(tmp_path / "t-0", sched) as log:
        fill(log, model, 2000, 10, rng)
        cut = log.segment_bases[2] + 3
        real = cleaner._BatchFilter.filter_into
        calls = []

        def truncating(self, view, out, path):
            if not calls:
                log.truncate_to(cut)                         # a replica truncating its diverged tail
            calls.append(1)
            return real(self, view, out, path)

        monkeypatch.setattr(cleaner._BatchFilter, "filter_into", truncating)
        res = log.compact(now_ms=T0)
        assert res.aborted is not None and res.groups == 0
        monkeypatch.undo()
        truncated = [m for m in model if m[0] < log.end_offset]
        assert rows(log) == truncated
        assert not [n for n in os.listdir(log.path) if n.endswith((".cleaned", ".swap"))]
        assert not os.path.exists(os.path.join(log.path, cleaner.WORK_DIR))
        res = log.compact(now_ms=T0)
        assert res.aborted is None
        assert rows(log) == compacted(truncated, log.segment_bases[-1])


def test_replace_segments_refuses_changed_or_active_segments(tmp_path, sched):
    with open_log(tmp_path / "t-0", sched) as log:
        for i in range(300):
            log.append(b"v" * 50, key=b"k%d" % i)
        bases = log.segment_bases
        assert log.replace_segments([bases[-1]], None) is False              # the active segment
        assert log.replace_segments([bases[0], bases[2]], None) is False     # not consecutive
        assert log.replace_segments([bases[0]], None, lambda: False) is False
        assert log.segment_bases == bases
        with pytest.raises(InvalidArgumentError):
            log.replace_segments([bases[0]], bases[1])


def test_compaction_concurrent_with_appends_and_reads(tmp_path, sched):
    import threading

    written = {}
    seen = []
    errors = []
    done = threading.Event()
    with open_log(tmp_path / "t-0", sched) as log:
        def writer():
            try:
                for i in range(12_000):
                    key, value = b"k%d" % (i % 60), (None if i % 17 == 0 else b"v%d" % i)
                    off = log.append(value, key=key, timestamp=T0 + i)
                    written[off] = (key, value)
            except BaseException as e:          # surfaced below
                errors.append(e)
            finally:
                done.set()

        def reader():
            try:
                while not done.is_set():
                    got = [(r.offset, r.key, r.value) for r in log.records()]
                    assert [o for o, _, _ in got] == sorted({o for o, _, _ in got})
                    seen.extend(got)
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
        for t in threads:
            t.start()
        passes = 0
        while not done.is_set():
            res = log.compact(now_ms=T0)
            passes += res.aborted is None
        for t in threads:
            t.join()
        assert not errors, errors
        assert passes > 0
        assert all(written[o] == (k, v) for o, k, v in seen)
        log.roll()
        log.compact(now_ms=T0)
        model = [(o, k, v, T0 + o, ()) for o, (k, v) in sorted(written.items())]
        assert rows(log) == compacted(model, log.segment_bases[-1])


# ------------------------------------------------------------------------------------------------ scheduling

def test_maintain_cleans_on_dirty_ratio_with_backoff(tmp_path, sched):
    rng = random.Random(10)
    model = []
    with open_log(tmp_path / "t-0", sched, min_cleanable_dirty_ratio=0.5) as log:
        fill(log, model, 2000, 300, rng)
        now = T0 + 1000
        log.maintain(now_ms=now)
        res = cleaner.last_result(log)
        assert res is not None and res.groups > 0
        assert rows(log) == compacted(model, res.map_end)
        clean_size = log.size_bytes
        # a little new dirty data: the ratio stays under 0.5, so the next checks do not clean
        fill(log, model, 20, 300, rng)
        log.roll()
        ltc = cleaner.cleanable(log, now + 20_000)
        assert 0 < ltc.dirty_ratio < 0.5 and not ltc.should_clean(0.5)
        log.maintain(now_ms=now + 20_000)
        assert cleaner.last_result(log) is res
        # lots of dirty data, but within log.cleaner.backoff.ms of the last check: no pass yet
        fill(log, model, 3000, 300, rng)
        log.maintain(now_ms=now + 20_000 + cleaner.CLEANER_BACKOFF_MS - 1)
        assert cleaner.last_result(log) is res
        log.maintain(now_ms=now + 20_000 + cleaner.CLEANER_BACKOFF_MS)
        res2 = cleaner.last_result(log)
        assert res2 is not res and res2.first_dirty == res.map_end
        assert rows(log) == compacted(model, res2.map_end)
        assert log.size_bytes < clean_size + 3 * 4096


def test_max_compaction_lag_forces_a_pass_below_the_ratio(tmp_path, sched):
    rng = random.Random(11)
    model = []
    lag = 3_600_000
    with open_log(tmp_path / "t-0", sched, min_cleanable_dirty_ratio=0.9, max_compaction_lag_ms=lag) as log:
        fill(log, model, 1500, 10, rng, ts_start=T0)
        log.compact(now_ms=T0)
        fill(log, model, 30, 10, rng, ts_start=T0 + 10)
        log.roll()
        ltc = cleaner.cleanable(log, T0 + lag)
        assert not ltc.should_clean(0.9) and ltc.dirty_bytes > 0
        assert cleaner.maybe_clean(log, T0 + lag) is None
        assert cleaner.maybe_clean(log, T0 + 10 + lag + cleaner.CLEANER_BACKOFF_MS + 1).groups > 0
        assert rows(log) == compacted(model, log.segment_bases[-1])


def test_maybe_clean_marks_log_uncleanable_after_an_error(tmp_path, sched, monkeypatch):
    rng = random.Random(12)
    model = []
    with open_log(tmp_path / "t-0", sched) as log:
        fill(log, model, 1500, 10, rng)

        def boom(*a, **k):
            raise RuntimeError("disk on fire")

        monkeypatch.setattr(cleaner, "_group_segments", boom)
        assert cleaner.maybe_clean(log, T0) is None
        assert "disk on fire" in cleaner.uncleanable_reason(log)
        monkeypatch.undo()
        assert cleaner.maybe_clean(log, T0 + 10 * cleaner.CLEANER_BACKOFF_MS) is None      # not retried
        assert rows(log) == model
        assert log.compact(now_ms=T0).aborted is None                                    # explicit runs do


# --------------------------------------------------------------------------------------- idempotent producers

def producer_batch(pid, epoch, seq, kvs, ts):
    w = _engine.BatchWriter(producer_id=pid, producer_epoch=epoch, next_sequence=seq, batch_bytes=1 << 20)
    for k, v in kvs:
        w.add(v, k, None, ts)
    w.finish()
    return w.take()


def test_idempotent_producer_still_deduplicates_after_cleaning(tmp_path, sched):
    path = tmp_path / "t-0"
    with open_log(path, sched) as log:
        b1 = producer_batch(7, 0, 0, [(b"a", b"a1"), (b"b", b"b1")], T0)
        b2 = producer_batch(7, 0, 2, [(b"c", b"c1"), (b"d", b"d1")], T0 + 1)
        log.append_raw(b1, now_ms=T0)
        last_base = log.append_raw(b2, now_ms=T0)
        for k in (b"a", b"b", b"c", b"d"):                   # other writers supersede every record of producer 7
            log.append(k + b"2", key=k, timestamp=T0 + 2)
        log.roll()
        log.append(b"tail", key=b"z", timestamp=T0 + 3)
        log.compact(now_ms=T0)
        assert [(r.key, r.value) for r in log.records()] == [(k, k + b"2") for k in (b"a", b"b", b"c", b"d")] + \
            [(b"z", b"tail")]
        kept = [b for b in _engine.batches(log.read(0, 1 << 20)) if b.producer_id == 7]
        assert [(b.base_offset, b.last_offset, b.records_count, b.base_sequence) for b in kept] == \
            [(last_base, last_base + 1, 0, 2)]             # Kafka's RETAIN_EMPTY header batch
        end = log.end_offset
        assert log.append_raw(b2, now_ms=T0) == last_base  # a retry of the last batch is still a duplicate
        assert log.end_offset == end
    with open_log(path, sched) as log:                     # and after a restart (producer snapshot)
        assert log.append_raw(b2, now_ms=T0) == last_base
        nxt = log.append_raw(producer_batch(7, 0, 4, [(b"e", b"e1")], T0 + 4), now_ms=T0)
        assert nxt == log.end_offset - 1


def test_idempotent_state_rebuilt_from_compacted_log_without_snapshots(tmp_path, sched):
    """Replaying a compacted log (no producer snapshot) must take a batch's sequence span from lastOffsetDelta,
    as Kafka does, not from its (reduced) record count."""
    path = tmp_path / "t-0"
    with open_log(path, sched) as log:
        log.append_raw(producer_batch(7, 0, 0, [(b"a", b"a1"), (b"b", b"b1")], T0), now_ms=T0)
        b2 = producer_batch(7, 0, 2, [(b"c", b"c1"), (b"d", b"d1")], T0 + 1)
        last_base = log.append_raw(b2, now_ms=T0)
        for k in (b"a", b"b", b"c", b"d"):
            log.append(k + b"2", key=k, timestamp=T0 + 2)
        log.roll()
        log.compact(now_ms=T0)
    for name in os.listdir(path):
        if name.endswith(".snapshot"):
            os.unlink(path / name)
    with open_log(path, sched) as log:
        assert log.append_raw(b2, now_ms=T0) == last_base


# ---------------------------------------------------------------------------------------- __consumer_offsets

def test_consumer_offsets_commits_survive_compaction_and_restart(tmp_path):
    from seglog.node import Node
    from seglog.offsets_format import OffsetAndMetadata, TopicPartition
    from seglog.offsets_store import LogOffsetStore

    props = {"offsets.topic.num.partitions": "2", "offsets.topic.segment.bytes": "8192"}
    latest = {}
    with Node(tmp_path / "data", props) as node:
        store = LogOffsetStore(node)
        for i in range(3000):
            group = f"group-{i % 7}"
            tp = TopicPartition("orders", i % 3)
            om = OffsetAndMetadata(i, metadata=f"m{i}", commit_timestamp=T0 + i)
            store.commit(group, {tp: om})
            latest[(group, tp)] = om
        parts = node.partitions("__consumer_offsets")
        before = sum(len(list(p.log.records())) for p in parts)
        for p in parts:
            assert p.log.segment_count > 2
            res = p.log.compact(now_ms=T0)
            assert res.aborted is None
        after = sum(len(list(p.log.records())) for p in parts)
        assert before == 3000 and after < 300
        assert all(store.fetch(g)[tp] == om for (g, tp), om in latest.items())
    with Node(tmp_path / "data", props) as node:
        store = LogOffsetStore(node)
        for (group, tp), om in latest.items():
            assert store.fetch(group)[tp] == om
        assert store.groups() == {f"group-{i}" for i in range(7)}


# -------------------------------------------------------------------------------------------------- the format

def test_cleaner_header_layout_matches_the_engine():
    """The cleaner's header struct and the engine agree on every field (decoded by batches())."""
    class Info:
        base_offset, leader_epoch, attributes, last_offset_delta = 1000, 3, 0x08 | 0x10, 9
        max_timestamp, producer_id, producer_epoch, base_sequence = T0, 42, 5, 77

    b = _engine.batches(bytes(cleaner._empty_batch(Info)))[0]
    assert (b.base_offset, b.last_offset, b.leader_epoch, b.records_count, b.max_timestamp, b.producer_id,
            b.producer_epoch, b.base_sequence, b.base_timestamp, b.codec, b.timestamp_type,
            b.is_transactional) == (1000, 1009, 3, 0, T0, 42, 5, 77, -1, 0, 1, True)
    assert struct.calcsize(">qiibIhiqqqhii") == 61

"""Readers: threads reading one Log while a thread appends, a read-only process following a writing one, a second
writing process refused, zero-copy views outliving truncation, retention and close, and kafka-python's
independent reader parsing every segment file of a directory."""

import json
import os
import random
import shutil
import struct
import subprocess
import sys
import textwrap
import threading
import time
import types
from pathlib import Path

from helpers.content import append_many, append_one, check_records, mismatch
from seglog import Log, LogConfig, _engine

READER = Path(__file__).resolve().parents[1] / "helpers" / "readonly_reader.py"


def config(segment_bytes: int = 16384, **kw) -> LogConfig:
    return LogConfig(segment_bytes=segment_bytes, index_interval_bytes=512, segment_index_bytes=4096,
                     retention_ms=-1, **kw)


def write(log, total: int, seed: int, pause: float = 0.0) -> None:
    """Append offset-derived records up to `total` (single and lz4/plain batches, some flushes)."""
    rng = random.Random(seed)
    while log.end_offset < total:
        if rng.random() < 0.4:
            append_one(log)
        else:
            append_many(log, min(rng.randint(1, 60), total - log.end_offset), compression=rng.choice(["lz4", None]))
        if rng.random() < 0.05:
            log.flush()
        if pause:
            time.sleep(pause)


def follow_records(log, total: int) -> int:
    """Read with records() until `total`; checks content, contiguity and a never-decreasing end offset.
    Returns how many distinct end offsets it saw."""
    pos, ends = 0, [0]
    while pos < total:
        end = log.end_offset
        assert end >= ends[-1], f"end offset went back from {ends[-1]} to {end}"
        if end == pos:
            time.sleep(0.001)                              # nothing new yet: let the writer run
            continue
        ends.append(end)
        check_records(log.records(pos, end), pos, end)
        pos = end
    return len(ends)


def follow_views(log, total: int) -> int:
    """Read with read() views: each starts with the batch holding the offset asked for, CRC-valid, records right."""
    pos, reads = 0, 0
    while pos < total:
        if pos == log.end_offset:
            time.sleep(0.001)
            continue
        view = log.read(pos, 4096)
        batches = _engine.batches(view)                    # checks every CRC
        assert batches[0].base_offset <= pos <= batches[0].last_offset
        for r in _engine.decode_records(view, pos):
            assert r.offset == pos and mismatch(r) is None, mismatch(r) or f"offset {r.offset} != {pos}"
            pos += 1
        reads += 1
    return reads


def test_reader_threads_see_a_growing_contiguous_log(tmp_path):
    total = 20_000
    errors, progress = [], {}
    with Log(tmp_path / "r-0", config()) as log:
        def run(name, fn, *args):
            try:
                progress[name] = fn(*args)
            except BaseException as e:                     # noqa: BLE001 - reported below
                errors.append(f"{name}: {type(e).__name__}: {e}")

        threads = [threading.Thread(target=run, args=("writer", write, log, total, 1))]
        threads += [threading.Thread(target=run, args=(f"records-{i}", follow_records, log, total)) for i in range(3)]
        threads += [threading.Thread(target=run, args=(f"views-{i}", follow_views, log, total)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads), "a thread hangs"
        assert not errors, "\n".join(errors)
        assert all(progress[f"records-{i}"] > 2 for i in range(3)), f"readers never saw the log grow: {progress}"
        assert log.segment_count > 10


def test_read_only_process_follows_a_writing_one(tmp_path):
    path, total = tmp_path / "ro-0", 15_000
    with Log(path, config()) as log:
        append_many(log, 100)
        log.flush()
        reader = subprocess.Popen([sys.executable, str(READER), str(path), str(total)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        write(log, total, seed=2, pause=0.0005)
        log.flush()
        out, err = reader.communicate(timeout=90)
    assert reader.returncode == 0, f"read-only reader failed ({reader.returncode}):\n{err[-3000:]}"
    report = json.loads(out)
    assert report["seen"] == total and report["ends"] >= 3, report


def test_read_only_refresh_after_its_index_file_appears(tmp_path):
    """A reader that opened the active segment while the writer was still creating its index files (a roll in
    progress) refreshes fine once they exist."""
    path = tmp_path / "ro-0"
    with Log(path, config()) as log:
        append_many(log, 10)
    index = path / ("%020d.timeindex" % 0)
    saved = index.read_bytes()
    index.unlink()
    with Log(path, readonly=True) as ro:
        index.write_bytes(saved)
        ro.refresh()
        check_records(ro.records(), 0, 10)


def test_second_writer_process_is_refused(tmp_path):
    path = tmp_path / "w-0"
    code = ("import sys\nfrom seglog import Log\nfrom seglog.errors import StorageError\n"
            "try:\n    Log(sys.argv[1]).close()\nexcept StorageError as e:\n    print(e)\n    sys.exit(3)\n")
    with Log(path, config()) as log:
        append_one(log)
        res = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
        assert res.returncode == 3 and "locked" in res.stdout, res.stdout + res.stderr
        append_one(log)                                    # the owner is unaffected
    res = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr    # released on close
    with Log(path, config()) as log:
        check_records(log.records(), 0, 2)


# ------------------------------------------------------------------------------------------------------ views

def held_view(log, offset: int = 0) -> tuple[memoryview, bytes]:
    view = log.read(offset, 1 << 20)
    assert _engine.view_address(view) != 0 and len(view) > 0
    return view, bytes(view)


def test_view_outlives_truncation_and_overwriting_appends(tmp_path):
    with Log(tmp_path / "v-0", config(segment_bytes=1 << 20)) as log:
        append_many(log, 500)
        view, copy = held_view(log)
        log.truncate_to(10)
        while log.end_offset < 600:                        # new bytes where the old ones were
            log.append(b"X" * 200)
        log.flush()
        assert bytes(view) == copy
        assert struct.unpack_from(">q", view)[0] == 0
        assert [r.value for r in log.records(log.end_offset - 1)] == [b"X" * 200]
        log.truncate_fully_and_start_at(1000)
        assert bytes(view) == copy


def test_view_outlives_retention_deleting_its_segment(tmp_path):
    path = tmp_path / "v-0"
    with Log(path, config(segment_bytes=2048, file_delete_delay_ms=0)) as log:
        append_many(log, 400)
        view, copy = held_view(log)
        first = path / ("%020d.log" % 0)
        log.delete_records_before(log.segment_bases[3])
        assert log.enforce_retention() >= 3
        assert not first.exists() and log.start_offset > 0
        assert bytes(view) == copy


def test_view_outlives_close_and_the_directory(tmp_path):
    path = tmp_path / "v-0"
    log = Log(path, config())
    append_many(log, 300)
    views = [held_view(log, off) for off in (0, 150, 299)]
    log.close()
    shutil.rmtree(path)
    assert not os.path.exists(path)
    for view, copy in views:
        assert bytes(view) == copy


# Views across Segment objects and mappings: each scenario runs in a child process, so a SIGBUS (the symptom of a
# file shrunk under a live view) fails the test instead of killing pytest.

def run_child(code: str, *args) -> str:
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, f"child exited {res.returncode} (-7: SIGBUS)\n{res.stdout}{res.stderr[-3000:]}"
    return res.stdout


def test_view_outlives_truncation_after_its_segment_left_the_open_segment_cache(tmp_path):
    """The view's segment is closed by the open-segment cache; truncation reopens it as a new Segment object
    that never mapped the file itself."""
    assert run_child("""
        import sys
        from seglog import Log, LogConfig
        with Log(sys.argv[1], LogConfig(segment_bytes=8192, retention_ms=-1), max_open_segments=1) as log:
            for i in range(400):
                log.append(b"%05d" % i * 40)
            log.flush()
            bases = log.segment_bases
            assert len(bases) > 4
            view = log.read(0, 1 << 20)
            copy = bytes(view)
            for base in bases[1:3]:
                log.read(base)                  # segment 0 leaves the cache (closed; the view keeps its mapping)
            log.truncate_to(0)                  # reopens segment 0 and empties it
            log.append(b"after")
            assert bytes(view) == copy
        print("ok")
        """, tmp_path / "v-0") == "ok\n"


def test_view_outlives_a_second_truncation_after_its_mapping_was_replaced(tmp_path):
    """Truncation makes a sealed segment active again; the view is served from the segment's old, short mapping,
    appends outgrow it (a new mapping replaces it), and a second truncation must still not shrink the file."""
    assert run_child("""
        import sys
        from seglog import Log, LogConfig
        path, cfg = sys.argv[1], LogConfig(segment_bytes=1 << 20, retention_ms=-1)
        with Log(path, cfg) as log:
            for i in range(400):
                log.append(b"a" * 200)          # 16 KiB batches of ~80 records
            log.roll()
            for i in range(100):
                log.append(b"b" * 200)
        with Log(path, cfg) as log:
            log.read(0)                         # sealed segment 0 is mapped at its size; no view kept
            log.truncate_to(300)                # segment 0 active again, cut in place (no view yet)
            view = log.read(0, 1 << 20)         # served from the old mapping
            copy = bytes(view)
            for i in range(300):
                log.append(b"c" * 200)
            log.read(log.end_offset - 1)        # past the old mapping: a new one replaces it
            log.truncate_to(0)
            assert bytes(view) == copy
        print("ok")
        """, tmp_path / "v-0") == "ok\n"


def test_view_outlives_recovery_cutting_its_file(tmp_path):
    """A view from an earlier Log object of the same process; the file is damaged inside the view's range and the
    next open's recovery cuts it there. The view keeps showing the (damaged) bytes instead of faulting."""
    assert run_child("""
        import os, sys
        from seglog import Log, LogConfig
        path, cfg = sys.argv[1], LogConfig(retention_ms=-1)
        with Log(path, cfg) as log:
            for i in range(40):
                log.append_batch([b"%04d" % i * 100] * 10)
        with Log(path, cfg) as log:
            view = log.read(0, 1 << 20)
        seg = os.path.join(path, "%020d.log" % 0)
        with open(seg, "r+b") as f:            # damage a batch early in the file, inside the view
            f.seek(5000)
            f.write(b"\\xff")
        os.remove(os.path.join(path, ".clean-shutdown"))
        copy = bytes(view)
        with Log(path, cfg) as log:
            assert log.recovery.bytes_truncated > 0 and log.end_offset < 400
        assert bytes(view) == copy
        print("ok")
        """, tmp_path / "v-0") == "ok\n"


# ------------------------------------------------------------------------------------------ independent reader

class ManualScheduler:
    """Never runs the log's periodic work: the test compacts when it chooses."""

    def schedule(self, fn, delay, period=None, name=""):
        return types.SimpleNamespace(cancel=lambda: None)


def test_kafka_python_reads_every_segment_file(tmp_path):
    """A directory written by Log through appends of every kind and codec, rolls, a truncation into a sealed
    segment and a compaction pass is parsed .log by .log with kafka-python's reader (MemoryRecords,
    DefaultRecordBatch.validate_crc()): every batch's CRC holds, every file is whole batches from its base
    offset on, and every record equals what the Log returns."""
    from kafka.record.default_records import DefaultRecordBatch
    from kafka.record.memory_records import MemoryRecords

    path, rng = tmp_path / "k-0", random.Random(11)
    cfg = LogConfig(segment_bytes=8192, cleanup_policy=("compact", "delete"), retention_ms=-1,
                    file_delete_delay_ms=0, delete_retention_ms=1000)
    codecs = [None, "gzip", "snappy", "lz4", "zstd"]

    def fill(log, n):
        for i in range(n):
            keys = [b"key-%d" % rng.randrange(1500) for _ in range(rng.randint(1, 30))]
            values = [None if rng.random() < 0.1 else b"v%d-" % log.end_offset * rng.randint(1, 20) for _ in keys]
            if i % 3 == 0:
                for k, v in zip(keys, values):
                    log.append(v, key=k, headers=[("i", b"%d" % i), ("none", None)], timestamp=1000 + log.end_offset)
            else:
                log.append_batch(values, keys=keys, timestamps=[1000 + log.end_offset + j for j in range(len(keys))],
                                 headers=[[("h", k)] for k in keys], compression=codecs[i % 5])

    with Log(path, cfg, scheduler=ManualScheduler()) as log:
        fill(log, 60)
        bases = log.segment_bases
        assert len(bases) > 4
        log.truncate_to(bases[3] + 7)                        # into a sealed segment: later ones go
        fill(log, 60)
        log.roll()
        result = log.compact(now_ms=10_000)
        assert result.groups > 0 and result.records_kept < result.records_read
        want = [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in log.records()]
        files = sorted(path.glob("*.log"))
        assert [int(f.name[:20]) for f in files] == log.segment_bases

    got, previous = [], -1
    for f in files:
        data = f.read_bytes()
        mr, size = MemoryRecords(data), 0
        while mr.has_next():
            batch = mr.next_batch()
            assert isinstance(batch, DefaultRecordBatch) and batch.validate_crc(), f"{f.name}: bad batch at {size}"
            assert batch.base_offset > previous and batch.base_offset >= int(f.name[:20])
            previous = batch.base_offset + batch.last_offset_delta
            size += batch.size_in_bytes
            got += [(r.offset, r.key, r.value, tuple(r.headers), r.timestamp) for r in batch]
        assert size == len(data), f"{f.name}: {len(data) - size} bytes after the last whole batch"
    assert got == want and len(want) > 500

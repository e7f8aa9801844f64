"""Concurrent readers: threads reading one Log while a thread appends, a read-only process following a writing
one, a second writing process refused, and zero-copy views outliving truncation, retention and close."""

import json
import os
import random
import shutil
import struct
import subprocess
import sys
import threading
import time
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

"""Scale: thousands of segments open fast and keep file descriptors bounded, scanning memory does not grow
with the log, offset lookups stay exact with a million index entries, and long loops over a large segment let
other threads run."""

import os
import random
import subprocess
import sys
import threading
import time

import pytest

from helpers.content import append_many, mismatch, timestamp_for, value_for
from seglog import Log, LogConfig, _engine


def open_fds(under) -> int:
    """File descriptors of this process open on files below `under` (other threads' descriptors don't count)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith(str(under) + os.sep)
        except OSError:                     # closed meanwhile
            pass
    return count


def first_batch(view):
    info = _engine.batches(view)[0]
    return info.base_offset, info.last_offset


@pytest.fixture
def fast_dir(mount_tmpfs, tmp_path_factory):
    """A tmpfs directory when one can be had (rolls fsync; thousands of them on a disk take ~20 s), else disk."""
    try:
        return mount_tmpfs("256m")
    except pytest.skip.Exception:
        return tmp_path_factory.mktemp("scale")


@pytest.mark.slow
def test_three_thousand_segments(fast_dir):
    path, n, max_open = fast_dir / "many-0", 3000, 16
    cfg = LogConfig(segment_bytes=14, segment_index_bytes=1024, retention_ms=-1)   # one batch per segment
    with Log(path, cfg) as log:
        append_many(log, n)
        assert log.segment_count == n
    baseline = open_fds(path)
    assert baseline == 0

    started = time.monotonic()
    log = Log(path, cfg, max_open_segments=max_open)
    assert time.monotonic() - started < 2.0, "a clean open of 3,000 segments is slow"
    assert open_fds(path) - baseline <= 8, "the open touched many segment files"
    assert log.end_offset == n and log.recovery.clean_shutdown

    bound = 3 * (max_open + 1) + 4                      # .log + 2 indexes per open segment, the lock, slack
    for off in random.Random(5).sample(range(n), 1500):
        view = log.read(off, 1)
        assert first_batch(view) == (off, off)
        [rec] = _engine.decode_records(view)
        assert mismatch(rec) is None
        assert open_fds(path) - baseline <= bound, "open segments are not bounded by max_open_segments"
    log.close()
    assert open_fds(path) == baseline, "close() leaks file descriptors"

    for name in (".clean-shutdown", "log-state-checkpoint"):       # unclean, and no recovery point
        os.unlink(path / name)
    with Log(path, cfg, max_open_segments=max_open) as log:
        assert log.recovery.segments_scanned == n and log.end_offset == n
        assert open_fds(path) - baseline <= bound
    (path / ".clean-shutdown").unlink()                 # unclean, with the recovery point close() left
    started = time.monotonic()
    with Log(path, cfg, max_open_segments=max_open) as log:
        assert time.monotonic() - started < 2.0
        assert log.recovery.segments_scanned <= 2 and log.end_offset == n


SCAN = """
import resource, sys
from seglog import Log, LogConfig
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
seen = 0
with Log(sys.argv[1], LogConfig(segment_bytes=8 << 20, retention_ms=-1), max_open_segments=4) as log:
    for r in log.records():
        seen += len(r.value)
print(seen, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""


def scan_peak_rss(path) -> tuple[int, int]:
    """(value bytes read, peak RSS growth in bytes) of a fresh process reading the whole log with records()."""
    res = subprocess.run([sys.executable, "-c", SCAN, str(path)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    seen, kib = map(int, res.stdout.split())
    return seen, kib * 1024


@pytest.mark.slow
def test_scanning_memory_does_not_grow_with_the_log(tmp_path):
    value = bytes(range(256)) * 4
    sizes = {}
    for mib in (20, 200):
        path = tmp_path / f"rss{mib}-0"
        with Log(path, LogConfig(segment_bytes=8 << 20, retention_ms=-1)) as log:
            for _ in range(mib):
                log.append_batch([value] * 1000)
        sizes[mib] = scan_peak_rss(path)
        assert sizes[mib][0] == mib * 1000 * len(value)
    small, large = sizes[20][1], sizes[200][1]
    assert large - small < 64 << 20, f"peak RSS grew {small >> 20} MiB -> {large >> 20} MiB from 20 to 200 MB of log"


@pytest.mark.slow
def test_offset_lookups_with_a_million_index_entries(tmp_path):
    n, path = 1_000_000, tmp_path / "idx-0"
    cfg = LogConfig(index_interval_bytes=0, segment_index_bytes=16 << 20, retention_ms=-1)
    w = _engine.BatchWriter(next_offset=0, batch_records=1)     # one record per batch: every batch indexed
    w.add_many([value_for(o) for o in range(n)], timestamps=[timestamp_for(o) for o in range(n)])
    with Log(path, cfg) as log:
        assert log.append_as_follower(w) == n
        del w
    assert os.path.getsize(path / "00000000000000000000.index") // 8 >= n - 1
    rng = random.Random(9)

    def check(log):
        assert log.segment_count == 1
        for off in rng.sample(range(n), 20_000):
            view = log.read(off, 1)
            assert first_batch(view) == (off, off)
            assert _engine.decode_records(view)[0].value == value_for(off)
        for off in rng.sample(range(n), 2_000):
            assert log.offset_for_timestamp(timestamp_for(off)) == (off, timestamp_for(off))

    with Log(path, cfg) as log:
        check(log)
    os.unlink(path / "00000000000000000000.index")
    os.unlink(path / "00000000000000000000.timeindex")
    with Log(path, cfg) as log:                             # rebuilt from the .log
        check(log)
        assert log.recovery.indexes_rebuilt == 1


class Spinner(threading.Thread):
    """Spins in Python, noting every stretch of time it could not run (it needs the GIL to run at all)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.running = True
        self.stalls: list[tuple[float, float]] = []

    def run(self):
        clock, last = time.perf_counter, time.perf_counter()
        while self.running:
            now = clock()
            if now - last > 0.002:
                self.stalls.append((last, now))
            last = now

    def longest_stall(self, fn) -> tuple[float, float]:
        """(the longest time the spinner could not run during fn(), fn's duration)."""
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        time.sleep(0.02)                                   # the spinner notes the stall fn may have left open
        return max([min(b, t1) - max(a, t0) for a, b in self.stalls] + [0.0]), t1 - t0


@pytest.mark.slow
def test_long_storage_loops_let_other_threads_run(tmp_path):
    """Recovery of a 192 MiB segment, CRC-checked walks of it (batches(), decode_records()) and a read-only read
    of it release the GIL: a spinning thread is never kept waiting for much of the call (holding the GIL, the
    call would stall it throughout). Batches are 16 KiB, below the size at which one CRC call releases the GIL
    by itself. A call that looks stalled is retried twice: the machine may be busy."""
    path, record = tmp_path / "gil-0", b"r" * 1000
    with Log(path, LogConfig(segment_bytes=1 << 30, retention_ms=-1)) as log:
        for _ in range(192 << 10):
            log.append(record)
    with open(path / "00000000000000000000.log", "rb") as f:
        data = f.read()
    writable, readonly = _engine.Segment(str(path), 0), _engine.Segment(str(path), 0, writable=False)
    calls = {"recover": writable.recover, "batches": lambda: _engine.batches(data),
             "decode_records": lambda: _engine.decode_records(data, max_offset=0),
             "read-only read": lambda: readonly.read(0, len(data))}
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    spinner = Spinner()
    spinner.start()
    try:
        for name, call in calls.items():
            tries = [spinner.longest_stall(call) for _ in range(3)]
            assert any(stall < 0.5 * took for stall, took in tries), f"{name} kept the other thread waiting: " + \
                ", ".join(f"{s * 1e3:.0f} of {t * 1e3:.0f} ms" for s, t in tries)
    finally:
        spinner.running = False
        spinner.join()
        sys.setswitchinterval(interval)
        writable.close()
        readonly.close()

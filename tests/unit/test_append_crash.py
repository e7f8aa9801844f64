"""An offset returned is an offset kept: a process calling Log.append() per record is killed with SIGKILL at
random moments, and every offset append() returned before the kill is in the log afterwards with its value.
Readers in other processes see appended records before any flush().

The short loop (20 kills) runs in CI; the full proof (200 kills, ~4 minutes) is marked long:
    python -m pytest -m long tests/unit/test_append_crash.py
"""

import os
import random
import select
import signal
import struct
import subprocess
import sys
import time

import pytest

from seglog import Log, LogConfig

CONFIG = LogConfig(segment_bytes=65536, index_interval_bytes=1024)

CHILD = r"""
import os, struct, sys
from seglog import Log, LogConfig
out = int(sys.argv[2])
log = Log(sys.argv[1], LogConfig(segment_bytes=65536, index_interval_bytes=1024))
os.write(out, struct.pack(">q", -1))                     # open: appending from here
while True:
    o = log.end_offset
    off = log.append(b"%012d" % o + b"x" * (o % 97))
    os.write(out, struct.pack(">q", off))
"""


def value(offset: int) -> bytes:
    return b"%012d" % offset + b"x" * (offset % 97)


def _run_and_kill(path: str, rng: random.Random) -> list[int]:
    """Start a child appending to path, SIGKILL it at a random moment (one time in five while it may still be
    opening and recovering the log, else a random time after it reported the log open), and return the
    offsets it reported as returned by append()."""
    r, w = os.pipe()
    child = subprocess.Popen([sys.executable, "-c", CHILD, path, str(w)], pass_fds=(w,))
    os.close(w)
    buf = b""
    early = rng.random() < 0.2
    deadline = time.monotonic() + (rng.uniform(0.0, 0.5) if early else 60)
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([r], [], [], max(deadline - time.monotonic(), 0))
            if ready:
                chunk = os.read(r, 1 << 16)
                if not chunk:
                    break
                if not early and not buf:          # the log is open: appends run from here
                    deadline = time.monotonic() + rng.uniform(0.0, 0.4)
                buf += chunk
        child.send_signal(signal.SIGKILL)
        child.wait()
        while True:                                # what it reported before it died
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            buf += chunk
    finally:
        os.close(r)
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL, "the child died on its own"
    n = len(buf) // 8
    return [o for (o,) in struct.iter_unpack(">q", buf[:n * 8]) if o >= 0]


def _check(path: str, reported: list[int], readonly: bool) -> int:
    """Every reported offset holds its value; the log is whole. Returns its end offset."""
    with Log(path, CONFIG, readonly=readonly) as log:
        start = min(reported) if reported else log.end_offset
        got = {r.offset: r.value for r in log.records(start)}
        lost = [o for o in reported if got.get(o) != value(o)]
        assert not lost, f"{len(lost)} returned offsets lost after kill -9, first {lost[:5]}"
        assert all(v == value(o) for o, v in got.items())
        return log.end_offset


def kill_loop(path: str, kills: int, seed: int) -> int:
    """The crash loop: `kills` children killed, the log checked after each (alternately by a reader in this
    process, read-only so the next child recovers the crash itself, and by a writable open that recovers
    it). Returns the records returned in all."""
    rng = random.Random(seed)
    total = 0
    for i in range(kills):
        reported = _run_and_kill(path, rng)
        total += len(reported)
        if os.path.isdir(path):
            _check(path, reported, readonly=(i % 2 == 0))
    return total


def test_kill_9_loses_no_returned_offset(tmp_path):
    total = kill_loop(str(tmp_path / "crash-0"), 20, seed=11)
    assert total > 500                             # the children got to append


@pytest.mark.long
def test_kill_9_loses_no_returned_offset_200_kills(tmp_path):
    total = kill_loop(str(tmp_path / "crash-0"), 200, seed=12)
    assert total > 5000


READER = r"""
import sys
from seglog import Log
with Log(sys.argv[1], readonly=True) as log:
    print(log.end_offset, *[r.value.decode() for r in log.records()])
"""


def test_a_reader_in_another_process_sees_appends_before_any_flush(tmp_path):
    path = str(tmp_path / "t-0")
    with Log(path, CONFIG) as log:
        for i in range(10):                        # fewer than a batch: all of it still buffered
            log.append(b"r%d" % i)
        out = subprocess.run([sys.executable, "-c", READER, path], capture_output=True, text=True, check=True)
        assert out.stdout.split() == ["10"] + ["r%d" % i for i in range(10)]
        for i in range(10, 3000):                  # written batches, the open one, a roll
            log.append(b"r%d" % i)
        out = subprocess.run([sys.executable, "-c", READER, path], capture_output=True, text=True, check=True)
        assert out.stdout.split() == ["3000"] + ["r%d" % i for i in range(3000)]


REFRESHER = r"""
import sys, time
from seglog import Log
seen = 0
with Log(sys.argv[1], readonly=True) as log:
    deadline = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < deadline:
        log.refresh()
        for r in log.records(seen):
            assert r.offset == seen and r.value == b"%012d" % seen + b"x" * (seen % 97), (r.offset, seen)
            seen += 1
print(seen)
"""


def test_readers_in_another_process_follow_a_writer_without_flushes(tmp_path):
    """A reader refreshing while the writer appends sees every record in order with its value, never a batch
    it has to reject, as the writer's open batch grows and moves to the segments."""
    path = str(tmp_path / "t-0")
    with Log(path, CONFIG) as log:
        log.append(value(0))
        reader = subprocess.Popen([sys.executable, "-c", REFRESHER, path, "1.5"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            for _ in range(50):
                log.append(value(log.end_offset))
        out, err = reader.communicate(timeout=60)
        assert reader.returncode == 0, err
        assert 0 < int(out) <= log.end_offset

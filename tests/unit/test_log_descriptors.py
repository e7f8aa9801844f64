"""No descriptor outlives a failed open (issue 11, item 6): counted in /proc/self/fd."""

import os

import pytest

from seglog import _engine
from seglog.errors import StorageError
from seglog.log import CLEAN_SHUTDOWN_FILE, Log, LogConfig


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_failed_segment_create_keeps_no_descriptor(tmp_path):
    _engine.Segment(str(tmp_path), 0, create=True).append(_batch())
    before = open_fds()
    for _ in range(20):
        with pytest.raises(StorageError, match="already exists"):
            _engine.Segment(str(tmp_path), 0, create=True)
    assert open_fds() == before


def test_dropped_segment_closes_its_descriptor(tmp_path):
    _engine.Segment(str(tmp_path), 0, create=True).append(_batch())
    before = open_fds()
    for _ in range(20):
        _engine.Segment(str(tmp_path), 0, create=False)      # opened lazily, never closed by its owner
    assert open_fds() == before


def _batch() -> bytes:
    w = _engine.BatchWriter()
    w.add(b"x")
    w.finish()
    return bytes(w.take())


@pytest.mark.parametrize("clean", [True, False])
def test_failed_log_open_closes_the_segments_it_opened(tmp_path, clean):
    """An index that cannot be opened (here a directory in its place) fails the open after other segments were
    opened: recovery (unclean) or the active segment's check (clean) must not leave their files open."""
    path = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=2000)
    with Log(path, cfg) as lg:
        for _ in range(100):
            lg.append(b"x" * 100)
    if not clean:
        os.remove(path / CLEAN_SHUTDOWN_FILE)
    last = sorted(n for n in os.listdir(path) if n.endswith(".log"))[-1]
    timeindex = path / last.replace(".log", ".timeindex")
    os.remove(timeindex)
    os.mkdir(timeindex)
    before = open_fds()
    for _ in range(10):
        with pytest.raises(StorageError, match="Is a directory"):
            Log(path, cfg)
    assert open_fds() == before
    os.rmdir(timeindex)
    with Log(path, cfg) as lg:                               # and the directory lock went too
        assert lg.end_offset == 100

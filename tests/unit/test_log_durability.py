"""What opening and truncating leave on disk: a corrupt state checkpoint is recovered from and rewritten at
open; a segment's truncation is fsynced (the cut file, or the directory after a copy-and-rename)."""

import os

import pytest

from seglog import Log, LogConfig, _engine
from seglog.checkpoints import read_checkpoint
from seglog.faults import FaultPlan

STATE = "log-state-checkpoint"


def test_a_corrupt_state_checkpoint_is_recovered_from_and_rewritten(tmp_path, caplog):
    path = tmp_path / "s-0"
    with Log(path, LogConfig(segment_bytes=4096)) as log:
        log.append_batch([b"%d" % i for i in range(300)])
        end, segments = log.end_offset, log.segment_count
    (path / STATE).write_bytes(b"garbage\n")
    with Log(path) as log:                    # the warning promised a recovery: segments_scanned was 0
        assert log.recovery.corrupt_checkpoint and log.recovery.clean_shutdown     # the marker was there
        assert log.recovery.segments_scanned == segments and log.end_offset == end
        assert "rescanning every segment" in caplog.text
        assert read_checkpoint(str(path / STATE), 2) is not None     # valid again before anything is appended
        assert not (path / ".clean-shutdown").exists()              # a crash now must not look like a clean close
    caplog.clear()
    with Log(path) as log:
        assert log.recovery.clean_shutdown and not log.recovery.corrupt_checkpoint
        assert "does not parse" not in caplog.text


def test_a_read_only_open_says_what_it_does_with_a_corrupt_checkpoint(tmp_path, caplog):
    path = tmp_path / "s-0"
    with Log(path) as log:
        log.append(b"x")
    (path / STATE).write_bytes(b"garbage\n")
    with Log(path, readonly=True) as log:
        assert log.recovery.corrupt_checkpoint and log.end_offset == 1
        assert "reading on with the log start offset at the first segment's base" in caplog.text
    assert (path / STATE).read_bytes() == b"garbage\n"                # read-only: nothing written


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to name the synced files")
@pytest.mark.parametrize("view_alive", [False, True])
def test_segment_truncation_is_fsynced(tmp_path, view_alive):
    """In place: the cut file is fsynced. With a live view the kept prefix is copied (and fsynced, in C) and
    renamed over the .log: the directory is fsynced, so a crash finds the cut file under the segment's name."""
    w = _engine.BatchWriter(batch_records=1)
    w.add_many([b"%06d" % i for i in range(50)])
    seg = _engine.Segment(str(tmp_path), 0, create=True)
    try:
        seg.activate(1 << 20)
        seg.append(w.take())
        view = seg.read(0, 100)[0] if view_alive else None
        with FaultPlan() as spy:                  # no rules: records the engine's file calls
            seg.truncate_to(20)
        assert seg.next_offset == 20
        synced = [path for op, path in spy.calls if op in ("fsync", "fdatasync")]
        assert (str(tmp_path) if view_alive else seg.log_path) in synced
        assert view is None or len(view) > 0
    finally:
        seg.close()

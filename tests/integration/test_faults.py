"""Damaged partition directories: torn and garbage tails, flipped bytes, zeroed pages, missing or garbage indexes,
corrupt checkpoints, stray temporary files. After each fault the log opens, never serves a corrupt batch, and
everything written and flushed before the fault point is intact. File-system calls that fail surface as
StorageError naming the file, and the log works again once they succeed."""

import errno
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from faults import (HEADER, Span, append_bytes, batch_spans, crash_copy, fail_os_call, flip_byte, garbage,
                    invalid_batches, segment_files, segment_path, truncate_at, zero_range)
from helpers.content import append_many, append_one, check_records, timestamp_for
from seglog import Log, LogConfig
from seglog.checkpoints import read_checkpoint, write_checkpoint
from seglog.errors import CorruptRecordError, StorageError
from seglog.faults import FaultPlan

RECORDS = 600


def config(segment_bytes: int = 4096) -> LogConfig:
    return LogConfig(segment_bytes=segment_bytes, index_interval_bytes=256, segment_index_bytes=4096,
                     retention_ms=-1)


def build(tmp_path, *, crash: bool, segment_bytes: int = 4096, epochs: bool = False) -> Path:
    """A flushed log of RECORDS offset-derived records over several segments (lz4 and plain batches, per-record
    appends). crash=False closes it cleanly; crash=True returns the directory as a kill -9 would leave it."""
    live = tmp_path / "live-0"
    log = Log(live, config(segment_bytes))
    while log.end_offset < RECORDS:
        if epochs:
            log.leader_epoch = 1 + log.end_offset // 200
        n = min(37, RECORDS - log.end_offset)
        if log.end_offset % 3 == 2:
            for _ in range(n):
                append_one(log)
        else:
            append_many(log, n, compression="lz4" if log.end_offset % 2 else None)
    log.flush()
    if not crash:
        log.close()
        return live
    copy = crash_copy(live, tmp_path / "t-0")
    log.close()
    return copy


def check_intact(log, end: int) -> None:
    """Records 0..end-1 are all there and right, and the log takes an append at `end`."""
    assert log.end_offset == end
    check_records(log.records(), 0, end)
    assert append_one(log) == end
    log.flush()
    check_records(log.records(end), end, end + 1)


def middle_batch(path) -> Span:
    spans = batch_spans(path)
    assert len(spans) >= 3, f"{path} has too few batches for this test"
    return spans[len(spans) // 2]


# ---------------------------------------------------------------------------------------- torn and garbage tails

@pytest.mark.parametrize("keep", ["header", "half", "all_but_one"])
def test_torn_last_batch_is_cut_on_unclean_open(tmp_path, keep):
    d = build(tmp_path, crash=True)
    last_file = segment_files(d)[-1]
    last = batch_spans(last_file)[-1]
    cut = last.position + {"header": 30, "half": last.size // 2, "all_but_one": last.size - 1}[keep]
    truncate_at(last_file, cut)
    with Log(d, config()) as log:
        rep = log.recovery
        assert not rep.clean_shutdown and rep.bytes_truncated == cut - last.position and rep.corruption
        assert invalid_batches(last_file) == []
        check_intact(log, last.base_offset)


@pytest.mark.parametrize("tail", ["random", "zeros", "half_header"])
def test_garbage_after_the_last_batch_is_cut(tmp_path, tail):
    d = build(tmp_path, crash=True)
    last_file = segment_files(d)[-1]
    junk = {"random": garbage(1000, seed=3), "zeros": bytes(4096), "half_header": b"\x00" * 7 + b"\x01" * 20}[tail]
    append_bytes(last_file, junk)
    with Log(d, config()) as log:
        assert log.recovery.bytes_truncated == len(junk) and log.recovery.corruption
        check_intact(log, RECORDS)


def test_torn_tail_with_a_clean_shutdown_marker_is_dropped(tmp_path):
    """The marker says the files are whole, but the active segment lost its tail (a truncated copy or restore):
    the torn batch is no part of the log, and records acknowledged afterwards survive a reopen."""
    d = build(tmp_path, crash=False)
    last_file = segment_files(d)[-1]
    last = batch_spans(last_file)[-1]
    truncate_at(last_file, last.position + last.size - 10)
    with Log(d, config()) as log:
        assert log.end_offset == last.base_offset
        check_intact(log, last.base_offset)
    with Log(d, config()) as log:
        check_records(log.records(), 0, last.base_offset + 1)


# ------------------------------------------------------------------------------------------------ flipped bytes

def test_flipped_byte_in_the_active_segment_is_cut_on_unclean_open(tmp_path):
    d = build(tmp_path, crash=True, segment_bytes=16384)
    last_file = segment_files(d)[-1]
    bad = middle_batch(last_file)
    flip_byte(last_file, bad.position + bad.size - 5)
    n_segments, size = len(segment_files(d)), os.path.getsize(last_file)
    with Log(d, config(16384)) as log:
        rep = log.recovery
        assert "CRC" in rep.corruption and str(last_file) in rep.corruption
        assert rep.bytes_truncated == size - bad.position
        assert log.segment_count == n_segments and invalid_batches(last_file) == []
        check_intact(log, bad.base_offset)


def test_flipped_byte_mid_log_with_a_lost_checkpoint_cuts_there_and_drops_later_segments(tmp_path):
    d = build(tmp_path, crash=True)
    files = segment_files(d)
    victim = files[len(files) // 2]
    bad = middle_batch(victim)
    flip_byte(victim, bad.position + bad.size // 2)
    os.unlink(d / "log-state-checkpoint")                  # no recovery point: the whole log is rescanned
    with Log(d, config()) as log:
        rep = log.recovery
        assert "CRC" in rep.corruption and str(victim) in rep.corruption
        assert rep.segments_deleted == len(files) - files.index(victim) - 1
        assert segment_files(d) == files[:files.index(victim) + 1]
        assert os.path.getsize(victim) == bad.position
        check_intact(log, bad.base_offset)


@pytest.mark.parametrize("shutdown", ["clean", "unclean_below_the_recovery_point"])
def test_flipped_byte_is_never_served(tmp_path, shutdown):
    """Where nothing rescans the segment on open, reads meet the corrupt batch and refuse to serve it."""
    d = build(tmp_path, crash=shutdown != "clean")
    victim = segment_files(d)[1]
    spans = batch_spans(victim)
    bad = middle_batch(victim)
    flip_byte(victim, bad.position + HEADER + (bad.size - HEADER) // 2)     # the header stays readable
    with Log(d, config()) as log:
        assert log.end_offset == RECORDS
        seen = []
        with pytest.raises(CorruptRecordError) as err:
            for r in log.records():
                seen.append(r)
        assert (err.value.path, err.value.offset) == (str(victim), bad.base_offset)
        check_records(seen, 0, bad.base_offset)
        for off in (bad.base_offset, bad.last_offset):
            with pytest.raises(CorruptRecordError):
                log.read(off)
        before = spans[spans.index(bad) - 1]
        view = log.read(before.base_offset, 1 << 20)       # stops short of the corrupt batch
        assert len(view) == bad.position - before.position
        check_records(log.records(bad.last_offset + 1), bad.last_offset + 1, RECORDS)
        assert append_one(log) == RECORDS


def test_zeroed_page_in_the_active_segment(tmp_path):
    d = build(tmp_path, crash=True, segment_bytes=16384)
    last_file = segment_files(d)[-1]
    assert os.path.getsize(last_file) > 8192
    zero_range(last_file, 4096, 4096)
    hit = next(s for s in batch_spans(last_file) if s.position + s.size > 4096)
    with Log(d, config(16384)) as log:
        assert log.recovery.corruption and os.path.getsize(last_file) == hit.position
        check_intact(log, hit.base_offset)


def test_zeroed_page_after_a_clean_shutdown_is_never_served(tmp_path):
    d = build(tmp_path, crash=False, segment_bytes=16384)
    victim = segment_files(d)[0]
    hit = next(s for s in batch_spans(victim) if s.position + s.size > 4096)
    zero_range(victim, 4096, 4096)
    with Log(d, config(16384)) as log:
        with pytest.raises(CorruptRecordError):
            check_records(log.records(), 0, RECORDS)
        check_records(log.records(0, hit.base_offset), 0, hit.base_offset)
        with pytest.raises(CorruptRecordError):
            log.read(hit.base_offset)


# ------------------------------------------------------------------------------------------------------ indexes

def check_lookups(log) -> None:
    """read(o) starts with the batch holding o, and offset_for_timestamp finds o, for every offset."""
    for o in range(log.start_offset, log.end_offset):
        view = log.read(o, 1)
        base, = struct.unpack_from(">q", view)
        (delta,) = struct.unpack_from(">i", view, 23)
        assert base <= o <= base + delta, f"read({o}) returned batch {base}..{base + delta}"
        if o % 7 == 0:
            assert log.offset_for_timestamp(timestamp_for(o)) == (o, timestamp_for(o))


@pytest.mark.parametrize("damage", ["missing", "garbage"])
def test_bad_indexes_are_rebuilt_and_lookups_stay_right(tmp_path, damage):
    d = build(tmp_path, crash=False)
    bases = [int(f.name[:20]) for f in segment_files(d)]
    assert segment_path(d, bases[1], ".index").stat().st_size > 0, "no index entries to lose"
    for base in (bases[1], bases[-1]):
        for suffix in (".index", ".timeindex"):
            p = segment_path(d, base, suffix)
            if damage == "missing":
                p.unlink()
            else:
                p.write_bytes(garbage(800, seed=base))
    with Log(d, config()) as log:
        check_lookups(log)
        assert log.recovery.indexes_rebuilt >= 2
        check_intact(log, RECORDS)


def test_rebuilt_index_of_a_sealed_segment_is_the_one_written_at_roll(tmp_path):
    d = build(tmp_path, crash=False)
    sealed = int(segment_files(d)[1].name[:20])
    paths = [segment_path(d, sealed, suffix) for suffix in (".index", ".timeindex")]
    original = [p.read_bytes() for p in paths]
    for p in paths:
        p.unlink()
    with Log(d, config()) as log:
        check_lookups(log)
    assert [p.read_bytes() for p in paths] == original


def test_rebuild_fills_an_index_lowered_since_the_segments_were_written(tmp_path):
    """segment.index.bytes was lowered after the segments were written, then an unclean open rebuilds every
    index (it used to fail: "offset index is full"). Each index takes entries until it is full; lookups past
    its last entry scan the .log from there."""
    d = build(tmp_path, crash=True, segment_bytes=8192)
    (d / "log-state-checkpoint").unlink()                     # no recovery point: every segment is rebuilt
    sealed = lambda suffix: [f.stat().st_size for f in segment_files(d, suffix)[:-1]]   # noqa: E731
    assert min(sealed(".index")) > 48
    small = config(8192).replace(segment_index_bytes=48)      # 6 offset entries, 4 time entries
    with Log(d, small) as log:
        assert log.recovery.segments_scanned == log.segment_count > 1
        check_lookups(log)
        check_intact(log, RECORDS)
    assert set(sealed(".index")) == {48}
    assert max(sealed(".timeindex")) <= 60                    # + the final entry written when a segment seals
    with Log(d, small) as log:
        assert log.recovery.clean_shutdown
        check_lookups(log)
        check_records(log.records(), 0, RECORDS + 1)


def plausible_bad_index(d: Path, length_field: str) -> None:
    """Give the active segment an offset index whose one entry passes the sanity check (increasing, inside the
    file) but points inside a batch, where the batch-length field reads negative, too small or too large."""
    last = segment_files(d)[-1]
    data = last.read_bytes()
    starts = {s.position for s in batch_spans(last)}
    wanted = {"negative": lambda n: n < 0, "small": lambda n: 0 <= n < HEADER - 12,
              "large": lambda n: n > len(data)}[length_field]
    pos = next(p for p in range(HEADER + 1, len(data) - HEADER)
               if p not in starts and wanted(struct.unpack_from(">i", data, p + 8)[0]))
    last.with_suffix(".index").write_bytes(struct.pack(">ii", 1, pos))
    last.with_suffix(".timeindex").write_bytes(b"")


@pytest.mark.parametrize("length_field", ["negative", "small", "large"])
def test_index_entry_inside_a_batch_does_not_break_the_open(tmp_path, length_field):
    d = build(tmp_path, crash=False, segment_bytes=16384)
    plausible_bad_index(d, length_field)
    code = ("import sys; sys.path[:0] = sys.argv[1:3]\n"
            "from helpers.content import check_records\n"
            "from test_faults import config\n"
            "from seglog import Log\n"
            "with Log(sys.argv[3], config(16384)) as log:\n"
            "    check_records(log.records(), 0, log.end_offset)\n"
            "    print(log.end_offset)\n")
    tests = Path(__file__).resolve().parents[1]
    res = subprocess.run([sys.executable, "-c", code, str(tests), str(tests / "integration"), str(d)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, f"exit {res.returncode} (negative: that signal):\n{res.stderr[-2000:]}"
    assert int(res.stdout) == RECORDS


# -------------------------------------------------------------------------------------------------- checkpoints

@pytest.mark.parametrize("crash", [True, False])
def test_corrupt_log_state_checkpoint_falls_back_to_a_full_scan(tmp_path, crash):
    d = build(tmp_path, crash=crash)
    (d / "log-state-checkpoint").write_bytes(b"0\n3\nrecovery-point x\n\x00\xff")
    with Log(d, config()) as log:
        if crash:
            assert log.recovery.segments_scanned == log.segment_count
        assert log.start_offset == 0
        check_intact(log, RECORDS)
    with Log(d, config()) as log:                              # and it was rewritten whole
        assert log.recovery.clean_shutdown and log.end_offset == RECORDS + 1


def test_corrupt_leader_epoch_checkpoint_falls_back_safely(tmp_path):
    d = build(tmp_path, crash=True, epochs=True)
    with Log(tmp_path / "live-0", config()) as live:
        original = live.leader_epochs
    assert len(original) == 3
    (d / "leader-epoch-checkpoint").write_bytes(b"0\n3\n1 0\n2 garbage")
    with Log(d, config()) as log:
        assert log.leader_epochs in ([], original)
        check_intact(log, RECORDS)
        log.leader_epoch = 9
        append_one(log)
    with Log(d, config()) as log:
        assert log.leader_epochs[-1] == (9, RECORDS + 1)
        check_records(log.records(), 0, RECORDS + 2)


# ---------------------------------------------------------------------------------------------- temporary files

def test_stray_temporary_files_are_removed_on_open(tmp_path):
    d = build(tmp_path, crash=True)
    first = segment_path(d, 0).name
    strays = [first + ".deleted", "00000000000000000000.index.deleted", first + ".trunc", first + ".cleaned",
              "log-state-checkpoint.tmp", "leader-epoch-checkpoint.tmp", "00000000000000000037.snapshot.tmp",
              "%020d.log.deleted" % 99999]
    for name in strays:
        (d / name).write_bytes(garbage(300, seed=len(name)))
    with Log(d, config(), readonly=True) as ro:                # a reader never deletes another's files
        check_records(ro.records(), 0, RECORDS)
    assert all((d / name).exists() for name in strays)
    with Log(d, config()) as log:
        assert not any((d / name).exists() for name in strays)
        check_intact(log, RECORDS)


# -------------------------------------------------------------------------------------------- file-system errors

def test_failing_directory_listing_is_a_storage_error(tmp_path, monkeypatch):
    d = build(tmp_path, crash=False)
    fail_os_call(monkeypatch, "listdir", str(d))
    with pytest.raises(StorageError, match="cannot list log directory") as e:
        Log(d, config())
    assert (e.value.path, e.value.errno) == (str(d), errno.EIO)
    monkeypatch.undo()
    with Log(d, config()) as log:
        check_intact(log, RECORDS)


def test_failing_marker_removal_refuses_the_write_until_it_works(tmp_path):
    d = build(tmp_path, crash=False)
    with Log(d, config()) as log:
        with FaultPlan().fail("unlink", path="*/.clean-shutdown", times=None):
            with pytest.raises(StorageError, match="cannot delete") as e:
                append_one(log)
        assert e.value.path == str(d / ".clean-shutdown") and (d / ".clean-shutdown").exists()
        check_intact(log, RECORDS)                              # the same write goes through now
        assert not (d / ".clean-shutdown").exists()


def test_failing_segment_deletion_is_a_storage_error(tmp_path):
    d = build(tmp_path, crash=False)
    with Log(d, config()) as log:
        first = segment_path(d, 0)
        log.delete_records_before(log.segment_bases[2])
        with FaultPlan().fail("rename", path=f"*/{first.name}", times=None), \
                pytest.raises(StorageError, match="cannot delete segment file") as e:
            log.enforce_retention()
        assert e.value.path == str(first) and first.exists()


def test_failing_snapshot_deletion_is_a_storage_error(tmp_path):
    d = build(tmp_path, crash=False)
    snapshots = sorted(p for p in d.iterdir() if p.name.endswith(".snapshot"))
    assert snapshots
    with Log(d, config()) as log:
        with FaultPlan().fail("unlink", path=f"*/{snapshots[0].name}", times=None), \
                pytest.raises(StorageError, match="producer snapshot"):
            log.truncate_to(0)


def test_checkpoint_written_whole_through_partial_writes(tmp_path):
    """write may take part of the data (signals, quotas): the checkpoint is still written whole."""
    entries = [("recovery-point", 123456789), ("log-start-offset", 42), ("high-watermark", 987654321)]
    with FaultPlan().short_write("write", keep=5, times=None) as plan:
        write_checkpoint(str(tmp_path / "cp"), entries)
    assert len(plan.fired) > 3
    assert read_checkpoint(str(tmp_path / "cp"), 2) == [[k, str(v)] for k, v in entries]

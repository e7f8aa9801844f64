"""The engine's file-call seam (seglog.faults): every file call a log makes, failed with EIO and ENOSPC and,
for writes, cut short, leaves a log that raises StorageError naming the file, loses nothing it acknowledged,
and opens and reads again afterwards. A delay fault stalls the call it names.

The calls are enumerated, as Redpanda's storage tests do: the workload runs once under a recording plan, then
once per chosen call (the first, a middle and the last of each op on each kind of file) with that call faulted.
"""

import errno
import os
import re
import shutil
import time

import pytest

from faults import crash_copy
from seglog import Log, LogConfig, _engine
from seglog.errors import StorageError
from seglog.faults import FaultPlan

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=256, file_delete_delay_ms=0)
VALUES = [b"value-%05d-" % i + b"x" * (i % 37) for i in range(400)]
TIMES = [1_700_000_000_000 + 10 * i for i in range(400)]      # fixed: the time index's writes do not vary


class Workload:
    """Appends, flushes, rolls, truncates and closes a log, recording what each call acknowledged: `kept`
    maps offsets to the values a successful call promised (every offset append_batch and append return),
    `unsure` the offsets a failed truncation may or may not have removed."""

    def __init__(self, path):
        self.path = path
        self.kept = {}
        self.unsure = set()

    def run(self):
        log = Log(self.path, CONFIG)
        try:
            first, _ = log.append_batch(VALUES[:120], timestamps=TIMES[:120])
            self.kept.update((first + i, v) for i, v in enumerate(VALUES[:120]))
            for v, t in zip(VALUES[120:260], TIMES[120:260]):
                self.kept[log.append(v, timestamp=t)] = v
            log.flush()
            log.roll()
            for v, t in zip(VALUES[260:300], TIMES[260:300]):
                self.kept[log.append(v, timestamp=t)] = v
            cut = log.end_offset - 60             # into the segment before the roll: the active one goes
            view = log.read(cut)                   # alive across the cut: the segment is copied, not cut in place
            cut = _engine.batches(view)[0].base_offset                 # the batch holding it goes whole
            self.unsure.update(o for o in self.kept if o >= cut)
            log.truncate_to(cut)
            del view
            self.unsure.clear()
            for o in [o for o in self.kept if o >= cut]:
                del self.kept[o]
            first, _ = log.append_batch(VALUES[300:340], timestamps=TIMES[300:340])
            self.kept.update((first + i, v) for i, v in enumerate(VALUES[300:340]))
            for v, t in zip(VALUES[340:400], TIMES[340:400]):
                self.kept[log.append(v, timestamp=t)] = v
            log.close()
        finally:
            if not log.closed:
                try:
                    log.close()
                except StorageError:
                    pass

    def check_reopens(self):
        """Reopen without faults: every kept offset holds its value, and the log takes and returns a record."""
        with Log(self.path, CONFIG) as log:
            got = {r.offset: r.value for r in log.records()}
            lost = {o for o, v in self.kept.items() if o not in self.unsure and got.get(o) != v}
            assert not lost, f"acknowledged offsets lost or changed: {sorted(lost)[:10]} ({len(lost)})"
            off = log.append(b"after")
            assert log.read(off) and list(log.records(off))[0].value == b"after"


def _kind(path):
    """The kind of file a path names: its name with digits and temp suffixes generalized."""
    name = os.path.basename(path)
    if name.endswith("-0"):
        return "<dir>"
    return re.sub(r"\d{20}", "<base>", name)


def _recorded_calls(tmp_path):
    w = Workload(str(tmp_path / "rec-0"))
    with FaultPlan() as plan:
        w.run()
    w.check_reopens()
    return plan.calls


def _targets(calls):
    """(op, kind, nth) for the first, a middle and the last call of each op on each kind of file."""
    seen = {}
    for op, path in calls:
        if path.endswith(".deleted"):   # unlinked by the delayed delete on the scheduler's thread: how many
            continue                    # happen during a run is timing, so they cannot be counted as targets
        seen.setdefault((op, _kind(path)), []).append(path)
    out = []
    for (op, kind), paths in sorted(seen.items()):
        n = len(paths)
        for nth in sorted({1, (n + 1) // 2, n}):
            out.append((op, kind, nth))
    return out


def _faulted_run(tmp_path, name, op, kind, nth, fault):
    path = str(tmp_path / name)
    pattern = "*-0" if kind == "<dir>" else "*/" + kind.replace("<base>", "[0-9]" * 20)
    plan = FaultPlan()
    if fault == "short":
        plan.short_write(op, keep=3, path=pattern, nth=nth)
    else:
        plan.fail(op, fault, path=pattern, nth=nth)
    w = Workload(path)
    error = None
    with plan:
        try:
            w.run()
        except StorageError as e:
            error = e
    return w, plan, error


CRASHED = {}


def _crashed_log(tmp_path):
    """A log as kill -9 leaves it: records in the append journal, a torn batch at the end of the segment.
    Returns (path of a fresh copy, {offset: value} that append() returned)."""
    if "src" not in CRASHED:
        src = tmp_path / "crashed-src"
        log = Log(src / "c-0", CONFIG)
        kept = {}
        for v, t in zip(VALUES[:300], TIMES[:300]):
            kept[log.append(v, timestamp=t)] = v
        CRASHED["src"] = crash_copy(src / "c-0", tmp_path / "crashed-0")
        log.close()
        seg = sorted(p for p in CRASHED["src"].iterdir() if p.name.endswith(".log"))[-1]
        with open(seg, "ab") as f:
            f.write(b"\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x01\x00torn")
        CRASHED["kept"] = kept
    n = len(CRASHED) - 1
    dst = tmp_path / f"crashed{n}-0"
    shutil.copytree(CRASHED["src"], dst)
    CRASHED[n] = dst
    return str(dst), CRASHED["kept"]


@pytest.mark.parametrize("fault", [errno.EIO, "short"])
def test_each_file_call_of_a_crash_recovery_failing_loses_nothing(tmp_path, fault):
    """Opening a crashed log (segment cut, indexes rebuilt, the journal's records written) with each of its
    file calls failing: StorageError naming the file, and the next open recovers every returned offset."""
    CRASHED.clear()
    path, kept = _crashed_log(tmp_path)
    with FaultPlan() as plan:
        Log(path, CONFIG).close()
    targets = [t for t in _targets(plan.calls) if fault != "short" or t[0] in ("pwrite", "write")]
    assert {"ftruncate", "pwrite", "mmap"} <= {op for op, _, _ in _targets(plan.calls)}
    for op, kind, nth in targets:
        path, _ = _crashed_log(tmp_path)
        pattern = "*-0" if kind == "<dir>" else "*/" + kind.replace("<base>", "[0-9]" * 20)
        faults = FaultPlan()
        if fault == "short":
            faults.short_write(op, keep=3, path=pattern, nth=nth)
        else:
            faults.fail(op, fault, path=pattern, nth=nth)
        with faults:
            try:
                Log(path, CONFIG).close()
            except StorageError as e:
                assert e.path, (op, kind, nth, e)
        assert faults.fired, (op, kind, nth)
        w = Workload(path)
        w.kept = dict(kept)
        w.check_reopens()


def test_every_file_call_of_a_log_goes_through_the_seam(tmp_path):
    ops = {op for op, _ in _recorded_calls(tmp_path)}
    assert set(_engine.FILE_OPS) <= ops


@pytest.mark.parametrize("fault", [errno.EIO, errno.ENOSPC, "short"])
def test_each_file_call_failing_loses_nothing_acknowledged(tmp_path, fault):
    calls = _recorded_calls(tmp_path)
    targets = [t for t in _targets(calls) if fault != "short" or t[0] in ("pwrite", "write")]
    assert len(targets) > (10 if fault == "short" else 40)
    raised = 0
    for i, (op, kind, nth) in enumerate(targets):
        w, plan, error = _faulted_run(tmp_path, f"f{i}-0", op, kind, nth, fault)
        assert plan.fired, f"{op} #{nth} on {kind} was not reached"
        if error is not None:
            raised += 1
            assert error.path, f"{op} #{nth} on {kind}: {error!r} names no file"
            if fault != "short":
                assert error.errno == fault, (op, kind, nth, error)
        w.check_reopens()
    if fault != "short":                     # a short write is continued by the next call: no error
        assert raised > len(targets) // 2      # most faults surface; a few hit calls whose failure is harmless


def test_a_failed_flush_raises_storage_error_with_the_segment_path(tmp_path):
    with Log(tmp_path / "t-0") as log:
        log.append(b"a")
        with FaultPlan().fail("fdatasync", errno.EIO, path="*.log"):
            with pytest.raises(StorageError) as e:
                log.flush()
        assert e.value.path.endswith("00000000000000000000.log") and e.value.errno == errno.EIO
        log.flush()
        assert [r.value for r in log.records()] == [b"a"]


def test_a_delay_fault_stalls_the_call_it_names(tmp_path):
    with Log(tmp_path / "t-0") as log:
        log.append(b"a")
        with FaultPlan().delay("fdatasync", 0.3, path="*.log") as plan:
            t = time.monotonic()
            log.flush()
            assert time.monotonic() - t >= 0.3
            t = time.monotonic()
            log.read(0)                          # reads make no fdatasync: not delayed
            assert time.monotonic() - t < 0.2
        assert [op for op, _, _ in plan.fired] == ["fdatasync"]


def test_the_real_table_is_back_after_a_plan(tmp_path):
    with FaultPlan().fail("open", errno.EACCES, times=None):
        with pytest.raises(StorageError):
            Log(tmp_path / "t-0")
    assert _engine.set_fault_handler(None) is None
    with Log(tmp_path / "t-0") as log:
        assert log.append(b"x") == 0


def test_a_handler_that_raises_is_reported_and_the_call_runs(tmp_path):
    def broken(op, path, n, dst):
        raise RuntimeError("handler bug")
    old = _engine.set_fault_handler(broken)
    try:
        with pytest.warns(RuntimeWarning, match="handler bug"):
            with Log(tmp_path / "t-0") as log:
                log.append(b"x")
    finally:
        _engine.set_fault_handler(old)
    with Log(tmp_path / "t-0") as log:
        assert [r.value for r in log.records()] == [b"x"]

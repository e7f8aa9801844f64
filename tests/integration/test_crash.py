"""kill -9 a writer process at random moments and inside segment rolls, then reopen: every acknowledged
(flushed) record is there with its exact content, offsets are contiguous, every .log file is whole CRC-valid
batches, the shutdown counts as unclean, and the recovered log takes appends.

The writer (helpers/crash_writer.py) keeps running on the same directory across kills, recovering it each
time it starts; the test checks a copy of the directory as the kill left it, so the next writer still
recovers from the raw crash state."""

import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from faults import batch_spans, crash_copy, invalid_batches, segment_files
from helpers.content import append_one, check_records
from seglog import Log, LogConfig

pytestmark = pytest.mark.slow

WRITER = Path(__file__).resolve().parents[1] / "helpers" / "crash_writer.py"
CHAIN = 6                                       # kills (and recoveries) in a row on one directory


def config(segment_bytes: int) -> LogConfig:
    """The writer's configuration (see crash_writer.config)."""
    return LogConfig(segment_bytes=segment_bytes, index_interval_bytes=512, segment_index_bytes=64 * 1024,
                     retention_ms=-1)


def run_writer(directory, seed: int, segment_bytes: int, out: Path, *extra: str,
               kill_after: float | None = None) -> subprocess.CompletedProcess:
    """Run the writer with stdout to `out`; SIGKILL it kill_after seconds after it reported its log open
    (so a slow interpreter start on a loaded machine does not eat the time), else wait for it to die."""
    with open(out, "wb") as stdout:
        proc = subprocess.Popen([sys.executable, str(WRITER), str(directory), str(seed), str(segment_bytes),
                                 *extra], stdout=stdout, stderr=subprocess.PIPE)
        if kill_after is not None:
            deadline = time.monotonic() + 30
            while b"ready " not in out.read_bytes() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
        try:
            _, err = proc.communicate(timeout=kill_after if kill_after is not None else 30)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            _, err = proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, None, err)


def writer_report(out: Path) -> tuple[int | None, int]:
    """(end offset the writer found on open or None if it never got there, last acknowledged end offset)."""
    ready, acked = None, 0
    for line in out.read_bytes().split(b"\n")[:-1]:           # complete lines only
        if line.startswith(b"ready "):
            ready = int(line.split()[1])
        else:
            acked = int(line)
    return ready, acked


def check_recovered_copy(directory, copy: Path, acked: int, segment_bytes: int) -> int:
    """Reopen a copy of the crashed directory and check it; returns the recovered end offset."""
    crash_copy(directory, copy)
    try:
        with Log(copy, config(segment_bytes)) as log:
            assert not log.recovery.clean_shutdown
            end = log.end_offset
            assert end >= acked, f"acknowledged offsets {end}..{acked - 1} were lost ({log.recovery})"
            check_records(log.records(), 0, end)
            files = segment_files(copy)
            assert [int(f.name[:20]) for f in files] == log.segment_bases
            for i, f in enumerate(files):
                assert invalid_batches(f) == []
                upper = log.segment_bases[i + 1] if i + 1 < len(files) else end
                spans = batch_spans(f)
                assert all(log.segment_bases[i] <= s.base_offset <= s.last_offset < upper for s in spans), \
                    f"{f} holds batches outside its offset range"
            assert append_one(log) == end                      # the recovered log takes appends
            log.flush()
            check_records(log.records(end), end, end + 1)
        return end
    finally:
        shutil.rmtree(copy)


def crash_loop(tmp_path, segment_bytes: int, iterations: int, max_delay: float, seed: int) -> None:
    rng = random.Random(seed)
    total_acked = 0
    for i in range(iterations):
        if i % CHAIN == 0:                      # a fresh log now and then keeps the full checks cheap
            directory, acked = tmp_path / f"crash-{i}", 0
        out = tmp_path / f"out-{i}"
        res = run_writer(directory, rng.randrange(1 << 30), segment_bytes, out,
                         kill_after=rng.uniform(0.02, max_delay))
        assert res.returncode == -signal.SIGKILL, f"writer died on its own:\n{res.stderr.decode()}"
        ready, flushed = writer_report(out)
        if ready is not None:
            assert ready >= acked, f"the writer's own recovery lost acknowledged offsets {ready}..{acked - 1}"
        acked = max(acked, flushed)
        if directory.exists():                  # else killed before it created the directory
            check_recovered_copy(directory, tmp_path / "copy", acked, segment_bytes)
            total_acked += flushed
    assert total_acked > 0, "no flush was ever acknowledged: the kills came too early to test anything"


def test_kill_9_at_random_moments(tmp_path):
    crash_loop(tmp_path, segment_bytes=64 * 1024, iterations=24, max_delay=0.5, seed=1)


def test_kill_9_with_a_roll_every_few_appends(tmp_path):
    crash_loop(tmp_path, segment_bytes=1024, iterations=12, max_delay=0.5, seed=2)


@pytest.mark.parametrize("stage", ["snapshot", "checkpoint", "done"])
def test_kill_9_inside_a_segment_roll(tmp_path, stage):
    directory = tmp_path / "roll-0"
    acked = 0
    for i, rolls in enumerate([1, 3, 2, 5]):
        out = tmp_path / f"out-{i}"
        res = run_writer(directory, i, 2048, out, "--die-in-roll", stage, str(rolls))
        assert res.returncode == -signal.SIGKILL, f"writer did not die in its roll:\n{res.stderr.decode()}"
        ready, flushed = writer_report(out)
        assert ready is not None and ready >= acked
        acked = max(acked, flushed)
        end = check_recovered_copy(directory, tmp_path / "copy", acked, 2048)
    assert len(segment_files(directory)) > 4 and end > 0

"""Groups that recover (issue 12): how long a consumer group takes to go on after a member is stopped in the
middle of a rebalance, and how long a faust-streaming app takes to catch up after kill -9 and a restart.

    python -m bench.group_recovery [--runs 20] [--faust-session 10] [--dir DIR] [--quick]

One seglog broker (``seglog.serve``, group.initial.rebalance.delay.ms=3000 as Kafka's default) in this
process; the clients are processes of their own (tests/helpers/group_faults.py, shared with
tests/integration/test_group_recovery.py). Per run, a fresh topic and group:

- SIGINT mid-join: a ``seglog consume --group`` (session.timeout.ms=20000) is interrupted while its JoinGroup
  waits out the initial delay; another one starts: seconds from its start to its first record (10 records).
  Target: the initial delay plus start-up (< 9 s), not the first member's session.
- kill -9 mid-join: the same, killed with SIGKILL (no LeaveGroup: the broker sees the connection close).
- faust kill -9 + restart: a faust-streaming word count (aiokafka; session and rebalance timeout
  --faust-session s) caught up on 1,000 words is killed with SIGKILL, 500 more words are written, and it is
  started again 0.5 s after the kill: seconds from the restart until the group is Stable again with the new
  member (the killed one never left, so the group waits for its session; target: session + 4 s), and until
  its group committed every word (faust's start-up on top: table recovery from a changelog that grows run
  after run; target: session + 24 s).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time

TESTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
if TESTS_DIR not in sys.path:
    sys.path.append(TESTS_DIR)
from helpers import group_faults as faults  # noqa: E402 - the group fault drivers of tests/ (not a package)

import seglog  # noqa: E402

DELAY_MS = faults.DELAY_MS
MID_JOIN_TARGET_S = faults.MID_JOIN_BOUND_S


def _sigint(consumer) -> None:
    status, err = consumer.stop(signal.SIGINT)
    if status != 130:
        raise AssertionError(f"seglog consume exited {status} on SIGINT: {err}")


def _summary(name: str, values: list[float], target: float) -> str:
    over = sum(v > target for v in values)
    return (f"| {name} | {len(values)} | {statistics.median(values):.1f} | {max(values):.1f} | "
            f"{min(values):.1f} | < {target:.0f} | {over} |")


def run(runs: int, faust_runs: int, faust_session: float, work: str) -> list[str]:
    rows = []
    with seglog.serve(os.path.join(work, "broker"), group_initial_rebalance_delay_ms=DELAY_MS) as broker:
        for name, stop in (("SIGINT mid-join: next member's first record", _sigint),
                           ("kill -9 mid-join: next member's first record", lambda c: c.kill())):
            took = []
            for i in range(runs):
                tag = f"{'int' if stop is _sigint else 'kill'}-{i}"
                took.append(faults.next_member_timing(broker, f"t-{tag}", f"g-{tag}", stop))
                print(f"{name}, run {i + 1}: {took[-1]:.2f} s", flush=True)
            rows.append(_summary(name, took, MID_JOIN_TARGET_S))
        if faust_runs:
            stable_target, target = faults.faust_bounds_s(faust_session)
            app = faults.FaustWordCount(broker, os.path.join(work, "faust"), session_s=faust_session)
            try:
                app.produce(1000)
                app.start()
                app.catch_up(120)
                stable, took = [], []
                for i in range(faust_runs):
                    s, t = app.restart_after_kill(500, 4 * target)
                    stable.append(s)
                    took.append(t)
                    print(f"faust kill -9 + restart, run {i + 1}: group Stable in {s:.2f} s, caught up in {t:.2f} s",
                          flush=True)
            finally:
                app.close()
            name = f"faust kill -9 + restart (session {faust_session:.0f} s)"
            rows.append(_summary(f"{name}: group Stable again", stable, stable_target))
            rows.append(_summary(f"{name}: app caught up", took, target))
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.group_recovery", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=20, help="runs of each measurement (default 20)")
    p.add_argument("--faust-session", type=float, default=10.0, help="the faust app's session timeout, s")
    p.add_argument("--dir", help="scratch directory (default: under $TMPDIR)")
    p.add_argument("--quick", action="store_true", help="2 runs each")
    args = p.parse_args(argv)
    runs = 2 if args.quick else args.runs
    try:
        import faust  # noqa: F401
        faust_runs = runs
    except ImportError:
        print("faust-streaming is not installed: the faust runs are skipped", file=sys.stderr)
        faust_runs = 0
    work = tempfile.mkdtemp(prefix="seglog-groups-", dir=args.dir)
    try:
        t0 = time.monotonic()
        rows = run(runs, faust_runs, args.faust_session, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{runs} runs, {time.monotonic() - t0:.0f} s\n")
    print("| measurement | runs | median s | max s | min s | target s | over target |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0 if faust_runs else 1


if __name__ == "__main__":
    sys.exit(main())

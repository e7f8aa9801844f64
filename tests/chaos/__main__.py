"""``python -m tests.chaos``: one seeded chaos run (or ``--check`` of a recorded history). See README.md."""

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv=None) -> int:
    sys.path.insert(0, str(TESTS))                # cluster_harness, faults (as under pytest)
    # SIGTERM, and SIGINT even when started in the background (which ignores it), stop the run cleanly: the
    # brokers and ZooKeeper are killed and the data dirs unmounted
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    from .checker import check, format_report
    from .history import read_history
    from .nemesis import KINDS

    ap = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    ap.add_argument("--faults", type=int, default=20, help="how many faults to inject (default 20)")
    ap.add_argument("--seed", type=int, default=None, help="the schedule's seed (default: from the clock)")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated fault kinds (default all: "
                                                             f"{','.join(KINDS)})")
    ap.add_argument("--dir", default=None, help="work dir for history.jsonl, report.json and the logs "
                                                "(default: a new temporary dir, kept)")
    ap.add_argument("--rate", type=float, default=50.0, help="records/s per producer (default 50)")
    ap.add_argument("--producers", type=int, default=3)
    ap.add_argument("--groups", type=int, default=2)
    ap.add_argument("--members", type=int, default=2, help="members per group")
    ap.add_argument("--txn-writers", type=int, default=1, help="transactional producers (commit or abort, "
                                                               "read back by a read_committed consumer)")
    ap.add_argument("--max-minutes", type=float, default=None, help="inject no fault after this many minutes")
    ap.add_argument("--keep-data", action="store_true",
                    help="when the checker finds a violation, copy the brokers' data dirs into <dir>/data before "
                         "their tmpfs mounts go (read them with seglog's log reader)")
    ap.add_argument("--client-debug", metavar="CONTEXTS", default=None,
                    help="librdkafka debug contexts of the idempotent producers (e.g. eos,msg), logged to clients.log")
    ap.add_argument("--check", metavar="HISTORY", default=None, help="only check a recorded history.jsonl")
    args = ap.parse_args(argv)

    if args.check:
        report = check(read_history(args.check))
        print(format_report(report))
        return 0 if report.ok else 1
    try:
        import seglog  # noqa: F401
    except ImportError:
        ap.error("seglog is not importable: build it and set PYTHONPATH (see README.md, Testing)")
    from .runner import run

    kinds = [k for k in args.kinds.split(",") if k]
    unknown = set(kinds) - set(KINDS)
    if unknown:
        ap.error(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(KINDS)}")
    seed = args.seed if args.seed is not None else int(time.time())
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix=f"chaos-{seed}-"))
    print(f"chaos run: seed {seed}, {args.faults} faults, work dir {work}", flush=True)
    t0 = time.monotonic()
    report = run(work, seed=seed, faults=args.faults, kinds=kinds, producers=args.producers, rate=args.rate,
                 groups=args.groups, members=args.members, txn_writers=args.txn_writers,
                 max_minutes=args.max_minutes, keep_data=args.keep_data,
                 client_debug=args.client_debug)
    print(f"\nseed {seed}: {report.counts.get('fault_start', 0)} faults in {time.monotonic() - t0:.0f} s")
    print(format_report(report))
    print(f"history: {work / 'history.jsonl'}  report: {work / 'report.json'}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())

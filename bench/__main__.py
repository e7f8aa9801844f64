"""Run the whole benchmark suite (~10 min on 2 cores) and write bench/RESULTS.md plus bench/charts/*.png.

    python -m bench                       # everything, 3 runs per figure; one log and its raw baseline grown to 20 GiB (~46 GiB disk)
    python -m bench --log-sizes 1,4       # ... the log-size scaling stops at 4 GiB (less disk, ~1 min less)
    python -m bench --quick               # small sizes, 1 run: checks the suite itself (results in the scratch dir)
    python -m bench --only stores,micro   # some sections (the machine limits always run first)
    python -m bench --only append_calls --update   # ... and replace only their parts of bench/RESULTS.md

Each section runs in its own process (python -m bench.suite SECTION ...) so memory figures and failures stay
apart. The exit status is 1 when a selected section did not give its figures: it failed, or it was skipped
because an optional dependency (pyspark, ZooKeeper, ...) is missing; RESULTS.md is written either way.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from bench import machine, report, suite

# in running order; broker (issue 4), security (issue 16), cluster (issue 5) and spark_source (issue 6) need their
# optional dependencies
SECTIONS = ["limits", "storage", "stores", "point_reads", "append_calls", "messaging", "broker", "security",
            "cluster", "spark_source", "scale_record_size", "scale_partitions", "scale_log_size", "micro"]
SECTION_TIMEOUT_S = 1800


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=None, help="timed runs per figure (default 3; 1 with --quick)")
    p.add_argument("--records", type=int, default=1_000_000, help="records of the store comparison")
    p.add_argument("--log-sizes", default="1,4,20",
                   help="GiB sizes at which the log-size scaling measures its one growing log (default 1,4,20)")
    p.add_argument("--all-records", action="store_true", help="give the slow stores every record too")
    p.add_argument("--quick", action="store_true", help="tiny sizes and 1 run: a check of the suite itself")
    p.add_argument("--only", default="", help="comma-separated sections (see --list)")
    p.add_argument("--skip", default="", help="comma-separated sections to leave out")
    p.add_argument("--list", action="store_true", help="print the sections and exit")
    p.add_argument("--update", action="store_true",
                   help="with --only: replace only these sections (text, Targets and guard rows) in the existing "
                        "RESULTS.md, keeping the other sections' figures")
    p.add_argument("--label", default="", help="what was measured, for the Versions table (e.g. the commit a wheel "
                                                "was built from)")
    p.add_argument("--dir", default=None, help="scratch directory (default: a new one under $TMPDIR)")
    p.add_argument("--out", default=None, help="where RESULTS.md and charts/ go (default: bench/; with --quick "
                                               "the scratch directory)")
    return p.parse_args(argv)


def selected(args) -> list[str]:
    names = SECTIONS
    only = [s for s in args.only.split(",") if s]
    skip = {s for s in args.skip.split(",") if s}
    for s in [*only, *skip]:
        if s not in names:
            raise SystemExit(f"unknown section {s!r}; sections: {', '.join(names)}")
    chosen = [s for s in names if (not only or s in only or s == "limits") and s not in skip]
    return chosen


def run_section(name: str, ctx: suite.Context, root: str) -> dict:
    """python -m bench.suite NAME CTX OUT in a child process; its output streams to ours."""
    ctx_path, out_path = os.path.join(root, name + ".ctx.json"), os.path.join(root, name + ".out.json")
    with open(ctx_path, "w") as f:
        json.dump(dataclasses.asdict(ctx), f)
    env = dict(os.environ, MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (suite.REPO_DIR, env.get("PYTHONPATH")) if p)
    t = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "bench.suite", name, ctx_path, out_path], cwd=suite.REPO_DIR,
                              env=env, timeout=SECTION_TIMEOUT_S)
        error = None if done.returncode == 0 else f"the section's process exited with {done.returncode}"
    except subprocess.TimeoutExpired:
        error = f"timed out after {SECTION_TIMEOUT_S} s"
    if error is None and os.path.exists(out_path):
        with open(out_path) as f:
            return json.load(f)
    return {"module": name, "title": name, "rows": [], "notes": [], "charts": [], "libraries": [],
            "seconds": time.perf_counter() - t, "error": error or "no result written", "skipped": None}


def exit_status(results: list[dict]) -> int:
    """1 if a section did not give its figures: it failed (raised, had no run(ctx), returned no rows, crashed,
    timed out) or was skipped (a missing optional dependency); or if a guarded figure fell below its floor (a
    regression, report.guard_rows); else 0."""
    if any(r.get("error") or r.get("skipped") for r in results):
        return 1
    return 1 if any(not g["held"] for g in report.guard_rows(results)) else 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.list:
        print("\n".join(SECTIONS))
        return 0
    runs = args.runs or (1 if args.quick else 3)
    sizes = sorted(float(s) for s in args.log_sizes.split(",") if s)
    root = args.dir or tempfile.mkdtemp(prefix="seglog-bench-")
    os.makedirs(root, exist_ok=True)
    out = args.out or (os.path.join(root, "out") if args.quick else suite.BENCH_DIR)
    charts_dir = os.path.join(out, "charts")
    names = selected(args)
    if args.update and not args.only:
        raise SystemExit("--update replaces the sections named by --only")
    if not args.only and os.path.isdir(charts_dir):        # a full run replaces every chart
        for f in os.listdir(charts_dir):
            if f.endswith(".png"):
                os.remove(os.path.join(charts_dir, f))
    started, t0 = time.time(), time.perf_counter()
    command = "python -m bench" + ("" if argv is None and len(sys.argv) <= 1 else
                                   " " + shlex.join(argv if argv is not None else sys.argv[1:]))
    desc = machine.describe(root)
    print(f"seglog benchmark suite: sections {', '.join(names)}; {runs} run(s) per figure; scratch {root}")
    for k, v in desc:
        print(f"  {k}: {v}")
    limits: dict = {}
    libraries: list[str] = []
    results = []
    for name in names:
        print(f"\n== {name}", flush=True)
        ctx = suite.Context(dir=os.path.join(root, name), charts_dir=charts_dir, runs=runs, records=args.records,
                            quick=args.quick, all_records=args.all_records, log_sizes_gib=sizes, limits=limits)
        result = run_section(name, ctx, root)
        results.append(result)
        libraries += result.get("libraries", [])
        if name == "limits":
            limits.update({r["data"]["key"]: r["data"]["value"] for r in result["rows"] if "data" in r})
        print(f"== {name}: {result['seconds']:.0f} s" + (" FAILED" if result.get("error") else "")
              + (f" skipped: {result['skipped']}" if result.get("skipped") else ""), flush=True)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "RESULTS.md")
    versions = machine.versions(libraries)
    if args.label:
        versions.insert(2, ("build measured", args.label))
    if args.update:
        report.update(path, command, started, [r for r in results if r["module"] in args.only.split(",")])
    else:
        report.write(path, command, started, time.perf_counter() - t0, runs, desc, versions, results,
                     report.load_average())
    if not args.dir:
        for f in os.listdir(root):
            if f != "out":
                p = os.path.join(root, f)
                shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
        if not args.quick:
            os.rmdir(root)
    failed = [r["module"] for r in results if r.get("error")]
    failed += [f"{g['section']} ({g['figure']}: {g['value']} below its floor {g['floor']})"
               for g in report.guard_rows(results) if not g["held"]]
    skipped = [f"{r['module']} ({r['skipped']})" for r in results if r.get("skipped")]
    print(f"\nwrote {path} ({(time.perf_counter() - t0) / 60:.1f} min)"
          + (f"; NOT RUN (optional dependency missing): {'; '.join(skipped)}" if skipped else "")
          + (f"; FAILED sections: {', '.join(failed)}" if failed else ""))
    return exit_status(results)


if __name__ == "__main__":
    raise SystemExit(main())

"""The pytest-benchmark micro suites (bench/test_micro.py) compared with the baseline saved in bench/baselines.

    python -m pytest bench/test_micro.py --benchmark-storage=file://bench/baselines --benchmark-compare
    python -m pytest bench/test_micro.py --benchmark-storage=file://bench/baselines --benchmark-compare \\
        --benchmark-compare-fail=median:25%          # exit non-zero when a median is 25% slower
    python -m pytest bench/test_micro.py --benchmark-storage=file://bench/baselines --benchmark-save=baseline

pytest-benchmark keeps baselines per machine id (OS-implementation-Python version-bits), so a baseline saved
with CPython 3.11 is compared only with CPython 3.11 runs.
"""

from __future__ import annotations

import glob
import json
import os
import platform
import subprocess
import sys

from bench import suite

TITLE = "Micro benchmarks (pytest-benchmark) vs the saved baseline"
LIBRARIES = ["pytest-benchmark"]
BASELINES = os.path.join(suite.BENCH_DIR, "baselines")
SLOWER, FASTER = 1.25, 0.8           # median ratios read as a change; in between is this machine's noise


def machine_id() -> str:
    return "{}-{}-{}-{}".format(platform.system(), platform.python_implementation(),
                                ".".join(platform.python_version_tuple()[:2]), platform.architecture()[0])


def latest_baseline() -> str | None:
    saved = sorted(glob.glob(os.path.join(BASELINES, machine_id(), "*.json")))
    return saved[-1] if saved else None


def run_pytest(out_json: str, quick: bool) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", os.path.join(suite.BENCH_DIR, "test_micro.py"), "-q",
           "-p", "no:cacheprovider", f"--benchmark-storage=file://{BASELINES}", f"--benchmark-json={out_json}",
           "--benchmark-columns=median,iqr,rounds", "--benchmark-sort=name"]
    if latest_baseline():
        cmd.append("--benchmark-compare")
    if quick:
        cmd += ["--benchmark-max-time=0.05", "--benchmark-min-rounds=1"]
    return subprocess.run(cmd, cwd=suite.REPO_DIR, capture_output=True, text=True, timeout=900)


def verdict(r: float) -> str:
    return "slower" if r > SLOWER else ("faster" if r < FASTER else "same (within noise)")


def fmt(seconds: float) -> str:
    return suite.ns(seconds) if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def run(ctx: suite.Context) -> list[dict]:
    out = ctx.path("micro.json")
    done = run_pytest(out, ctx.quick)
    if done.returncode != 0:
        raise RuntimeError(f"pytest bench/test_micro.py failed:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}")
    with open(out) as f:
        current = {b["name"]: b["stats"] for b in json.load(f)["benchmarks"]}
    base_path = latest_baseline()
    base, base_info = {}, "none saved for this machine id"
    if base_path:
        with open(base_path) as f:
            saved = json.load(f)
        base = {b["name"]: b["stats"] for b in saved["benchmarks"]}
        commit = saved.get("commit_info", {})
        base_info = (f"`{os.path.relpath(base_path, suite.REPO_DIR)}` (saved {saved.get('datetime', '?')[:19]}; "
                     f"pytest-benchmark recorded the bench tree's commit {str(commit.get('id', '?'))[:10]}"
                     f"{' + uncommitted changes' if commit.get('dirty') else ''}; bench/README.md says which "
                     "seglog build it measured)")
    ctx.note(f"Baseline: {base_info}. Ratio = median now / median in the baseline (above {SLOWER} reads as "
             f"slower, below {FASTER} as faster). `python -m pytest bench/test_micro.py "
             "--benchmark-storage=file://bench/baselines --benchmark-compare --benchmark-compare-fail=median:25%` "
             "fails on a regression.")
    rows = []
    for name, st in sorted(current.items()):
        b = base.get(name)
        r = st["median"] / b["median"] if b else None
        rows.append({"benchmark": name, "median": fmt(st["median"]), "iqr": fmt(st["iqr"]),
                     "rounds": str(st["rounds"]), "baseline median": fmt(b["median"]) if b else "-",
                     "now / baseline": f"{r:.2f}" if r else "-", "verdict": verdict(r) if r else "no baseline"})
        print(f"  {name:<48} {fmt(st['median']):>10}  " + (f"{r:.2f}x baseline" if r else ""), flush=True)
    return rows

"""What every benchmark section shares: the Context it runs with, timing and formatting helpers, test data,
and the runner that executes one section in its own process.

A section is a module of this package with a TITLE string and ``run(ctx) -> list[dict]`` (see README.md,
"Adding a section"). ``python -m bench.suite MODULE CTX_JSON OUT_JSON`` runs one and writes its result. A
section whose optional dependency is missing raises ``Skip`` (``require()`` does it for Python modules): it is
listed as skipped with the reason. A section without ``run(ctx)``, or one that raises anything else, failed.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import os
import random
import resource
import shutil
import statistics
import sys
import time
import traceback
from typing import Callable

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)


@dataclasses.dataclass
class Context:
    """What a section gets: where to write, how hard to try, and the machine limits measured first."""
    dir: str                                   # scratch directory of this section (deleted afterwards)
    charts_dir: str                            # PNGs go here (ctx.chart does it)
    runs: int = 3                              # timed runs per figure; figures are medians
    records: int = 1_000_000                   # records of the store comparison
    quick: bool = False                        # a smoke run of the suite itself: small sizes, 1 run
    all_records: bool = False                  # stores: no record cap for the slow stores
    log_sizes_gib: list = dataclasses.field(default_factory=lambda: [1, 4, 20])
    limits: dict = dataclasses.field(default_factory=dict)     # bench.limits figures, by key
    notes: list = dataclasses.field(default_factory=list)      # paragraphs printed above the tables
    charts: list = dataclasses.field(default_factory=list)     # [file name, caption]
    libraries: list = dataclasses.field(default_factory=list)  # distributions whose versions to report

    def note(self, text: str) -> None:
        """A paragraph printed under the section's heading."""
        self.notes.append(text)
        print(f"  note: {text}", flush=True)

    def chart(self, fig, name: str, caption: str) -> None:
        """Save a matplotlib figure as charts/<name>.png and list it in the section."""
        import matplotlib.pyplot as plt
        os.makedirs(self.charts_dir, exist_ok=True)
        fig.savefig(os.path.join(self.charts_dir, name + ".png"), dpi=110, bbox_inches="tight")
        plt.close(fig)
        self.charts.append([name + ".png", caption])

    def path(self, *parts: str) -> str:
        return os.path.join(self.dir, *parts)

    def fresh(self, *parts: str) -> str:
        """A path under the scratch dir with nothing at it."""
        p = self.path(*parts)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        elif os.path.lexists(p):
            os.remove(p)
        return p

    def limit(self, key: str) -> float | None:
        return self.limits.get(key)


class Skip(Exception):
    """Raised by a section when an optional dependency (a library, java, ZooKeeper ...) is missing: the suite
    lists the section as skipped with this reason instead of failing."""


def require(*modules: str, hint: str = "") -> None:
    """Skip the section unless every one of these top-level modules can be imported."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise Skip(f"missing Python module{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
                   + (f" ({hint})" if hint else ""))


# -- timing --------------------------------------------------------------------------------------------------

def timings(fn: Callable[[], object], runs: int, setup: Callable[[], object] | None = None,
            warmup: int = 0) -> list[float]:
    """Seconds of `runs` calls of fn (after `warmup` untimed ones); setup runs untimed before each."""
    out = []
    for i in range(warmup + runs):
        if setup:
            setup()
        t = time.perf_counter()
        fn()
        dt = time.perf_counter() - t
        if i >= warmup:
            out.append(dt)
    return out


def median_time(fn: Callable[[], object], runs: int, setup: Callable[[], object] | None = None,
                warmup: int = 0) -> float:
    return statistics.median(timings(fn, runs, setup, warmup))


def spread(times: list[float]) -> str:
    """max/min of the runs, the noise a reader should allow for."""
    return f"{max(times) / min(times):.2f}" if len(times) > 1 and min(times) > 0 else "-"


# -- memory and disk -----------------------------------------------------------------------------------------

def rss_bytes(field: str = "VmRSS") -> int:
    """A memory figure of this process from /proc/self/status (VmRSS, RssAnon, RssFile, VmHWM)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def disk_bytes(path: str) -> int:
    """Bytes allocated on disk under path (what du counts), not apparent sizes."""
    if os.path.isfile(path):
        return os.stat(path).st_blocks * 512
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


# -- data ----------------------------------------------------------------------------------------------------

def json_records(n: int, size: int = 100) -> list[bytes]:
    """n JSON-like values of exactly `size` bytes (ids, users, events, timestamps, padding)."""
    rnd = random.Random(7)
    events = (b"click", b"view", b"buy", b"scroll")
    pad = b"x" * size
    out = []
    for i in range(n):
        v = b'{"id":%d,"user":"u%05d","event":"%s","ts":%d,"v":"' % (
            i, rnd.randrange(100_000), events[i & 3], 1_700_000_000_000 + i)
        out.append((v + pad)[:max(size - 2, 0)] + b'"}'[:size])
    return out


def random_keys(n_records: int, n_keys: int, seed: int = 11) -> list[int]:
    rnd = random.Random(seed)
    return [rnd.randrange(n_records) for _ in range(n_keys)]


# -- formatting ----------------------------------------------------------------------------------------------

def rate(n: float, seconds: float, unit: str = "rec/s") -> str:
    r = n / seconds
    if r >= 1e6:
        return f"{r / 1e6:.2f} M {unit}"
    if r >= 1e3:
        return f"{r / 1e3:.1f} k {unit}"
    return f"{r:.0f} {unit}"


def gbs(nbytes: float, seconds: float) -> str:
    return f"{nbytes / seconds / 1e9:.2f} GB/s"


def ratio(x: float | None, y: float | None) -> str:
    """x / y as '2.07x' (higher is better when x and y are rates)."""
    if not x or not y:
        return "-"
    r = x / y
    return f"{r:.2f}x" if r < 100 else f"{r:.0f}x"


def fraction(x: float | None, limit: float | None) -> str:
    if not x or not limit:
        return "-"
    return f"{x / limit:.0%}"


def mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:.0f} MB" if nbytes >= 10e6 else f"{nbytes / 1e6:.1f} MB"


def ns(seconds: float) -> str:
    v = seconds * 1e9
    return f"{v:.0f} ns" if v < 10_000 else f"{v / 1e3:.1f} us"


# -- the section runner -------------------------------------------------------------------------------------

def run_section(module_name: str, ctx: Context) -> dict:
    """Import bench.<module_name>, run it with ctx and return its result as a JSON-able dict: "error" holds the
    traceback of a failed section, "skipped" the reason a section did not run (a missing optional dependency)."""
    t = time.perf_counter()
    result = {"module": module_name, "title": module_name, "rows": [], "error": None, "skipped": None}
    os.makedirs(ctx.dir, exist_ok=True)
    try:
        mod = importlib.import_module(f"bench.{module_name}")
        result["title"] = getattr(mod, "TITLE", module_name)
        ctx.libraries.extend(getattr(mod, "LIBRARIES", ()))
        if not callable(getattr(mod, "run", None)):
            raise TypeError(f"bench/{module_name}.py has no `run(ctx)` (see bench/README.md, \"Adding a section\")")
        rows = mod.run(ctx)
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise TypeError(f"bench.{module_name}.run() must return a list of dicts, not {type(rows).__name__}")
        if not rows:
            raise ValueError(f"bench.{module_name}.run() returned no rows (raise bench.suite.Skip to skip a section)")
        result["rows"] = rows
    except Skip as e:
        result["skipped"] = str(e) or "skipped"
        print(f"  skipped: {result['skipped']}", flush=True)
    except Exception:
        result["error"] = traceback.format_exc()
        print(result["error"], file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(ctx.dir, ignore_errors=True)
    result.update(notes=ctx.notes, charts=ctx.charts, libraries=ctx.libraries,
                  seconds=time.perf_counter() - t)
    return result


def main(argv: list[str]) -> int:
    module_name, ctx_json, out_json = argv
    with open(ctx_json) as f:
        ctx = Context(**json.load(f))
    result = run_section(module_name, ctx)
    with open(out_json, "w") as f:
        json.dump(result, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    # run through the imported module, not __main__: sections raise bench.suite.Skip, which must be the class
    # run_section catches
    from bench import suite as _suite
    raise SystemExit(_suite.main(sys.argv[1:]))

"""The benchmark suite's own machinery, cheaply: bench/test_micro.py runs as plain tests (pytest-benchmark with
--benchmark-disable calls each benchmarked function once, no timing; this is how CI runs them), a section that
fails or does not run (no run(ctx), no rows, a missing optional dependency) or a guarded figure below its floor
makes `python -m bench` exit 1, and the store comparison measures its references on the capped stores' record counts."""

import os
import re
import subprocess
import sys
import types

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench import report, suite  # noqa: E402
from bench import __main__ as bench_main  # noqa: E402


def test_micro_benchmarks_run_as_tests():
    pytest.importorskip("pytest_benchmark")
    done = subprocess.run([sys.executable, "-m", "pytest", os.path.join(ROOT, "bench", "test_micro.py"), "-q",
                           "-p", "no:cacheprovider", "--benchmark-disable", "-o", "addopts="],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    m = re.search(r"(\d+) passed", done.stdout)
    assert m and int(m.group(1)) >= 9, done.stdout[-2000:]
    assert not re.search(r"\d+ (failed|error|skipped)", done.stdout), done.stdout[-2000:]


@pytest.fixture
def section(monkeypatch, tmp_path):
    """Registers a module as bench.<name> and runs it as the suite runs a section; returns the result dict."""
    def run(name: str, **attrs) -> dict:
        mod = types.ModuleType(f"bench.{name}")
        mod.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, f"bench.{name}", mod)
        ctx = suite.Context(dir=str(tmp_path / name), charts_dir=str(tmp_path / "charts"), runs=1, quick=True)
        return suite.run_section(name, ctx)
    return run


def test_a_section_without_run_fails(section):
    r = section("fake_norun", TITLE="no run")
    assert r["error"] and "has no `run(ctx)`" in r["error"] and not r["skipped"]
    assert bench_main.exit_status([r]) == 1


def test_a_failing_section_fails(section):
    def run(ctx):
        raise RuntimeError("broken")
    r = section("fake_broken", TITLE="broken", run=run)
    assert "RuntimeError: broken" in r["error"]
    assert bench_main.exit_status([r]) == 1
    empty = section("fake_empty", TITLE="empty", run=lambda ctx: [])
    assert "returned no rows" in empty["error"]


def test_a_missing_optional_dependency_skips_and_fails_the_run(section, tmp_path):
    def run(ctx):
        suite.require("no_such_module_for_the_bench_test", hint="pip install it")
        return [{"figure": "x"}]
    r = section("fake_optional", TITLE="optional", run=run)
    assert r["error"] is None
    assert "no_such_module_for_the_bench_test" in r["skipped"] and "pip install it" in r["skipped"]
    ok = section("fake_ok", TITLE="fine", run=lambda ctx: [{"figure": "f", "median": "1", "summary": {
        "figure": "f", "target": ">= 1", "measured": "1", "met": "yes"}}])
    assert bench_main.exit_status([ok]) == 0
    assert bench_main.exit_status([r, ok]) == 1              # a section that did not run is not a success

    out = tmp_path / "RESULTS.md"
    report.write(str(out), "python -m bench", 0, 1.0, 1, [("CPU", "x")], [("Python", "3")], [r, ok], "0")
    text = out.read_text()
    assert "skipped: missing Python module no_such_module_for_the_bench_test" in text
    assert "| fine | f | >= 1 | 1 | yes |" in text            # the targets table
    assert "summary" not in text.split("## fine")[1]          # a hidden key, not a column


def test_every_section_is_a_module_with_run():
    import importlib.util
    assert bench_main.SECTIONS[0] == "limits" and len(set(bench_main.SECTIONS)) == len(bench_main.SECTIONS)
    for name in bench_main.SECTIONS:
        assert importlib.util.find_spec(f"bench.{name}") is not None, name
    assert {"messaging", "broker", "cluster", "spark_source"} <= set(bench_main.SECTIONS)


def test_capped_stores_are_compared_on_equal_record_counts():
    from bench import stores
    jobs = stores.jobs(1_000_000)
    counts = dict(jobs[:len(stores.STORES)])
    assert counts["seglog_batch"] == counts["lmdb"] == 1_000_000
    for name, cap in stores.SLOW_STORE_RECORDS.items():
        assert counts[name] == cap
        assert {(ref, cap) for ref in stores.REFERENCES} <= set(jobs), (name, jobs)
    assert [j for j in stores.jobs(1_000_000, all_records=True)] == [(s.name, 1_000_000) for s in stores.STORES]

    def result(store, n, write_s):
        return {"store": store, "records": n, "keys": 10, "write_s": [write_s], "read_s": [1.0], "get_s":
                [] if store == "persist_queue" else [1.0], "disk_bytes": [100 * n], "rss_input": 0,
                "peak_rss": n}
    results = [result(s.name, counts[s.name], 1.0) for s in stores.STORES]
    for name, cap in stores.SLOW_STORE_RECORDS.items():       # the references at the cap: 10x faster there
        results += [result("seglog_batch", cap, 0.1), result("plain", cap, 0.5)]
    rows = stores.rows_and_chart(None, results)
    versus = {r["store"]: r for r in rows if r["table"].startswith("seglog append_batch compared")}
    first = {r["store"]: r for r in rows if "data" in r}
    for name, cap in stores.SLOW_STORE_RECORDS.items():
        label = stores.BY_NAME[name].label
        assert versus[label]["records"] == f"{cap:,}"
        assert versus[label]["write"] == "10.00x"            # seglog at the cap, not seglog on 1M records
        assert versus[label]["peak RSS over input"] == "1.00x"
        assert first[label]["write vs plain"] == "0.50x"     # the plain baseline at the cap
        assert first[label]["records"] == f"{cap:,} (capped)"
    assert versus[stores.BY_NAME["lmdb"].label]["write"] == "1.00x"


def test_a_guarded_figure_below_its_floor_fails_the_run(section, tmp_path):
    def rows(value):
        return lambda ctx: [{"figure": "x", "guard": {"figure": "x vs y", "value": value, "floor": 0.5}}]
    held, fell = section("fake_held", TITLE="held", run=rows(0.6)), section("fake_fell", TITLE="fell", run=rows(0.4))
    assert bench_main.exit_status([held]) == 0
    assert bench_main.exit_status([held, fell]) == 1
    assert [g["held"] for g in report.guard_rows([held, fell])] == [True, False]
    out = tmp_path / "RESULTS.md"
    report.write(str(out), "python -m bench", 0, 1, 1, [], [], [held, fell], "-")
    text = out.read_text()
    assert "## Regression guards" in text and "**no: regression**" in text and "guard" not in text.split("##")[-1]


def test_update_replaces_only_the_sections_run(section, tmp_path):
    def rows(value, met):
        return lambda ctx: [{"figure": f"f={value}", "summary": {"figure": "f", "target": ">= 1", "measured": value,
                                                                "met": met},
                             "guard": {"figure": "f vs g", "value": value, "floor": 0.5}}]
    a, b = section("fake_a", TITLE="Alpha", run=rows(0.6, "no")), section("fake_b", TITLE="Beta", run=rows(0.7, "no"))
    out = tmp_path / "RESULTS.md"
    report.write(str(out), "python -m bench", 0, 1, 1, [], [], [a, b], "-")
    again = section("fake_a", TITLE="Alpha", run=rows(2.0, "yes"))
    report.update(str(out), "python -m bench --only fake_a --update", 0, [again])
    text = out.read_text()
    assert "Every issue target this run measured: 1 of 2 met." in text
    assert "| Alpha | f | >= 1 | 2.0 | yes |" in text and "| Beta | f | >= 1 | 0.7 | no |" in text
    assert "| Alpha | f vs g | 2.00x | 0.50x | yes |" in text and "| Beta | f vs g | 0.70x | 0.50x | yes |" in text
    assert text.count("## Alpha") == 1 and "| f=2.0 |" in text and "f=0.6" not in text and "| f=0.7 |" in text
    assert text.index("| Alpha | f |") < text.index("| Beta | f |")            # rows stay where they were
    assert "This section alone was measured again by `python -m bench --only fake_a --update`" in text

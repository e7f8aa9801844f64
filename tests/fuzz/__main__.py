"""python -m tests.fuzz <target|all> [--runs N] [--max-len BYTES] [--rss-limit-mb MB] [--seed S] (see __init__)."""

import argparse
import gc
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import types

TARGET_NAMES = ("batch", "records", "codecs", "frame", "sasl")


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _mutate(rng: random.Random, seed: bytes, pool: list[bytes], max_len: int) -> bytes:
    data = bytearray(seed)
    for _ in range(rng.randint(1, 8)):
        op = rng.randrange(6)
        at = rng.randint(0, len(data))
        if op == 0 and data:
            data[min(at, len(data) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1 and data:
            data[min(at, len(data) - 1)] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        elif op == 2:
            data[at:at] = rng.randbytes(rng.randint(1, 8))
        elif op == 3:
            del data[at:at + rng.randint(1, 16)]
        elif op == 4:
            other = rng.choice(pool)
            start = rng.randint(0, len(other))
            data[at:at] = other[start:start + rng.randint(1, 64)]
        else:
            del data[at:]
    return bytes(data[:max_len])


def run_plain(name: str, runs: int, max_len: int, seed: int) -> int:
    """The mutation loop used when atheris is missing: returns the number of runs (raises on a finding)."""
    from tests.fuzz.seeds import SEEDS
    from tests.fuzz.targets import TARGETS
    target, pool, rng = TARGETS[name], SEEDS[name](), random.Random(seed)
    for data in pool:
        target(data)
    for i in range(runs):
        data = _mutate(rng, rng.choice(pool), pool, max_len)
        try:
            target(data)
        except BaseException:
            print(f"{name}: finding on input {data!r}", file=sys.stderr)
            raise
    print(f"{name}: {runs} runs, 0 crashes, peak RSS {_peak_rss_mib():.0f} MiB (plain mutation loop)", flush=True)
    return runs


def run_atheris(name: str, runs: int, max_len: int, rss_limit_mb: int, seed: int, artifacts: str) -> None:
    """Fuzz in this process under libFuzzer; never returns (libFuzzer exits)."""
    import atheris
    with atheris.instrument_imports(include=["seglog", "tests.fuzz"]):
        from tests.fuzz.seeds import SEEDS
        from tests.fuzz.targets import TARGETS
    pool = SEEDS[name]()
    target = TARGETS[name]
    for data in pool:                  # every seed passes, and the protocol codecs they need are compiled now ...
        target(data)
    if name == "frame":                # ... so the generated codec functions can be instrumented too
        for obj in gc.get_objects():
            if isinstance(obj, types.FunctionType) and obj.__code__.co_filename.startswith("<seglog.protocol"):
                atheris.instrument_func(obj)
    corpus = tempfile.mkdtemp(prefix=f"seglog-fuzz-{name}-")
    for i, data in enumerate(pool):
        with open(os.path.join(corpus, f"seed-{i}"), "wb") as f:
            f.write(data)
    os.makedirs(artifacts, exist_ok=True)
    atheris.Setup([sys.argv[0], f"-runs={runs}", f"-max_len={max_len}", f"-rss_limit_mb={rss_limit_mb}",
                   f"-seed={seed}", "-keep_seed=1", "-use_value_profile=1",
                   "-print_final_stats=1", f"-artifact_prefix={artifacts}/", corpus],
                  target)
    atheris.Fuzz()


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FLOAT_CMP_STUBS = b"void __sanitizer_cov_trace_cmpf(float a, float b) {}\n" \
                  b"void __sanitizer_cov_trace_cmpd(double a, double b) {}\n"


def traced_engine_env() -> dict | None:
    """The environment of a child that fuzzes an engine whose C compares libFuzzer sees (-use_value_profile
    makes them coverage features: a few thousand instead of a few dozen from the Python code alone).

    build/fuzz/seglog is the package with an _engine compiled by gcc with -fsanitize-coverage=trace-cmp from
    the C file the regular build generated (src/engine/_engine.c; rebuilt when that is newer), beside a stub
    for the float compares libFuzzer does not define; atheris's libFuzzer runtime is preloaded so the trace
    calls resolve. None (fuzz the regular build) without atheris, gcc or a generated _engine.c."""
    import shutil
    import sysconfig
    try:
        import atheris
    except ImportError:
        return None
    source = os.path.join(ROOT, "src", "engine", "_engine.c")
    runtime = os.path.join(atheris.path(), "ubsan_with_fuzzer.so")
    if not (os.path.exists(source) and os.path.exists(runtime) and shutil.which("gcc")):
        return None
    out = os.path.join(ROOT, "build", "fuzz")
    package = os.path.join(out, "seglog")
    os.makedirs(package, exist_ok=True)
    pyapi = os.path.join(ROOT, "src", "pyapi")
    for entry in os.listdir(pyapi):
        link = os.path.join(package, entry)
        if not entry.startswith("_engine") and not os.path.lexists(link):
            os.symlink(os.path.join(pyapi, entry), link)
    engine = os.path.join(package, "_engine" + sysconfig.get_config_var("EXT_SUFFIX"))
    stubs = os.path.join(out, "libfloatcmp.so")
    if not os.path.exists(stubs):
        with open(stubs + ".c", "wb") as f:
            f.write(FLOAT_CMP_STUBS)
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", stubs + ".c", "-o", stubs], check=True)
    if not os.path.exists(engine) or os.path.getmtime(engine) < os.path.getmtime(source):
        print("building the compare-traced engine for fuzzing (about a minute) ...", file=sys.stderr, flush=True)
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-fno-strict-aliasing", "-fsanitize-coverage=trace-cmp",
                        "-D_GNU_SOURCE", "-I", sysconfig.get_paths()["include"], "-I", os.path.dirname(source),
                        source, os.path.join(ROOT, "src", "engine", "crc32c_impl.c"), "-o", engine + ".tmp"],
                       check=True)
        os.replace(engine + ".tmp", engine)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([out, ROOT]),
               LD_PRELOAD=os.pathsep.join(filter(None, [runtime, stubs, os.environ.get("LD_PRELOAD")])))
    return env


def run_child(name: str, args) -> int:
    """Run one target in a child process (libFuzzer ends its process) and print its summary line."""
    env = None
    if not args.plain and not args.no_trace_cmp and name not in ("frame", "sasl"):
        env = traced_engine_env()
    cmd = [sys.executable, "-m", "tests.fuzz", name, "--runs", str(args.runs), "--max-len", str(args.max_len),
           "--rss-limit-mb", str(args.rss_limit_mb), "--seed", str(args.seed), "--artifacts", args.artifacts,
           "--child"]
    if args.plain:
        cmd.append("--plain")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    out = proc.stdout + proc.stderr
    summary = [line for line in out.splitlines() if line.startswith(f"{name}: ")]
    if summary:
        print(summary[-1], flush=True)
        return proc.returncode
    runs = re.search(r"stat::number_of_executed_units:\s*(\d+)", out)
    rss = re.search(r"stat::peak_rss_mb:\s*(\d+)", out)
    done = re.findall(r"(?:DONE|pulse|NEW|REDUCE)\s+cov: (\d+) ft: (\d+) corp: (\d+)", out)
    if proc.returncode == 0 and runs and rss:
        mode = "atheris, C compares traced" if env else "atheris"
        reach = f", {done[-1][1]} features, corpus {done[-1][2]}" if done else ""
        print(f"{name}: {runs.group(1)} runs, 0 crashes, peak RSS {rss.group(1)} MiB ({mode}{reach})", flush=True)
    else:
        print(out[-6000:], file=sys.stderr)
        print(f"{name}: FAILED (exit {proc.returncode})", flush=True)
    return proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("target", choices=TARGET_NAMES + ("all",))
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--max-len", type=int, default=4096)
    parser.add_argument("--rss-limit-mb", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--artifacts", default=os.path.join(tempfile.gettempdir(), "seglog-fuzz-artifacts"))
    parser.add_argument("--plain", action="store_true", help="the plain mutation loop even if atheris is there")
    parser.add_argument("--no-trace-cmp", action="store_true",
                        help="fuzz the regular engine build, without the compare-traced one (see traced_engine_env)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.plain:
        try:
            import atheris  # noqa: F401
        except ImportError:
            args.plain = True
    if not args.child:
        names = TARGET_NAMES if args.target == "all" else (args.target,)
        return max(run_child(name, args) for name in names)
    if args.plain:
        run_plain(args.target, args.runs, args.max_len, args.seed)
        return 0
    run_atheris(args.target, args.runs, args.max_len, args.rss_limit_mb, args.seed, args.artifacts)
    return 0


if __name__ == "__main__":
    sys.exit(main())

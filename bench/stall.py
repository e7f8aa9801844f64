"""A stalled disk stays with its partition (issue 11): fetch latency of healthy partitions while another
partition's every fdatasync takes 2 s longer, next to the same workload without the stall, in the same run.

    python -m bench.stall [--seconds 8] [--stall 2.0] [--dir DIR]

One in-process broker (seglog.serve, default config) holds a topic ``stalled`` (1 partition, flush.messages=1:
every append is fdatasynced) and a topic ``healthy`` (4 partitions, 2,000 records of 100 bytes each). Two
phases of --seconds each: a producer connection appends one batch at a time to ``stalled`` while four fetcher
connections (one per healthy partition) fetch from offset 0 back to back (max_wait_ms=0, 1 MiB). In the second
phase the engine's fault seam (seglog.faults) delays every fdatasync of ``stalled``'s files by --stall
seconds. Figures: fetch latency p50 / p99 / max and fetches/s of the healthy partitions, and the stalled
producer's append latency, per phase; the ratio stalled/baseline of each. Target: the healthy fetches' p99
stays below a tenth of the stall (their max is shown too: on a shared 2-core machine it carries scheduling noise
in both phases) (the broker's disk work runs on its disk threads,
not its event loop, so a slow disk holds only its partition).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

TESTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
if TESTS_DIR not in sys.path:
    sys.path.append(TESTS_DIR)
from helpers.kafka_wire import RawConnection, fetch_body, produce_body, record_batch  # noqa: E402

from seglog.protocol import ApiKey  # noqa: E402

HEALTHY_PARTITIONS = 4
RECORDS = 2000
VALUE = b"x" * 100


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def _phase(broker, seconds: float) -> dict:
    addr = (broker.host, broker.port)
    stop = threading.Event()
    fetches: list[float] = []
    appends: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def fetcher(p: int) -> None:
        with RawConnection(addr, timeout=60) as c:
            while not stop.is_set():
                t = time.perf_counter()
                r = c.request(ApiKey.FETCH, 11, fetch_body("healthy", p, 0, max_bytes=1 << 20,
                                                           partition_max_bytes=1 << 20))
                dt = time.perf_counter() - t
                part = r["responses"][0]["partitions"][0]
                with lock:
                    fetches.append(dt)
                    if part["error_code"] or not part["records"]:
                        errors.append(f"fetch healthy-{p}: error {part['error_code']}")

    def producer() -> None:
        batch = record_batch([(int(time.time() * 1000), None, VALUE, [])])
        with RawConnection(addr, timeout=60) as c:
            while not stop.is_set():
                t = time.perf_counter()
                r = c.request(ApiKey.PRODUCE, 8, produce_body("stalled", 0, batch, acks=1, timeout_ms=60000))
                dt = time.perf_counter() - t
                code = r["responses"][0]["partition_responses"][0]["error_code"]
                with lock:
                    appends.append(dt)
                    if code:
                        errors.append(f"produce stalled-0: error {code}")

    threads = [threading.Thread(target=fetcher, args=(p,)) for p in range(HEALTHY_PARTITIONS)]
    threads.append(threading.Thread(target=producer))
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    return {"fetch_p50": _pct(fetches, 0.5), "fetch_p99": _pct(fetches, 0.99), "fetch_max": max(fetches),
            "fetches_per_s": len(fetches) / seconds, "append_p50": _pct(appends, 0.5), "append_max": max(appends),
            "appends": len(appends), "errors": errors}


def measure(root: str, seconds: float, stall: float, say=print) -> dict:
    import seglog
    from seglog.faults import FaultPlan

    with seglog.serve(os.path.join(root, "broker")) as broker:
        broker.node.create_topic("stalled", 1, config={"flush.messages": "1"})
        broker.node.create_topic("healthy", HEALTHY_PARTITIONS)
        for p in range(HEALTHY_PARTITIONS):
            broker.node.partition("healthy", p).log.append_batch([VALUE] * RECORDS)
            broker.node.partition("healthy", p).log.high_watermark = RECORDS
        say(f"baseline: {seconds:.0f} s, no stall")
        base = _phase(broker, seconds)
        say(f"stalled: {seconds:.0f} s, every fdatasync of stalled-0 +{stall} s")
        with FaultPlan().delay("fdatasync", stall, path="*/stalled-0/*"):
            stalled = _phase(broker, seconds)
    return {"baseline": base, "stalled": stalled, "stall": stall, "seconds": seconds}


def met(r: dict) -> bool:
    return r["stalled"]["fetch_p99"] < r["stall"] / 10 and not r["baseline"]["errors"] and not r["stalled"]["errors"]


def markdown(r: dict) -> str:
    b, s = r["baseline"], r["stalled"]
    ms = lambda v: f"{v * 1e3:.1f} ms"  # noqa: E731
    lines = ["| figure | no stall | stalled-0 fdatasync +%.1f s | ratio |" % r["stall"], "|---|---|---|---|"]
    for key, name in (("fetch_p50", "healthy fetch p50"), ("fetch_p99", "healthy fetch p99"),
                      ("fetch_max", "healthy fetch max")):
        lines.append(f"| {name} | {ms(b[key])} | {ms(s[key])} | {s[key] / b[key]:.2f}x |")
    lines.append(f"| healthy fetches/s (4 connections) | {b['fetches_per_s']:.0f} | {s['fetches_per_s']:.0f} | "
                 f"{s['fetches_per_s'] / b['fetches_per_s']:.2f}x |")
    lines.append(f"| stalled-0 append p50 / max | {ms(b['append_p50'])} / {ms(b['append_max'])} | "
                 f"{ms(s['append_p50'])} / {ms(s['append_max'])} | |")
    lines.append(f"| stalled-0 appends in {r['seconds']:.0f} s | {b['appends']} | {s['appends']} | |")
    lines.append(f"| target: healthy fetch p99 < stall / 10 = {ms(r['stall'] / 10)} | | {ms(s['fetch_p99'])} | "
                 f"{'yes' if met(r) else 'no'} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=8.0, help="length of each phase (default 8)")
    p.add_argument("--stall", type=float, default=2.0, help="seconds added to each fdatasync (default 2)")
    p.add_argument("--dir", default=None)
    a = p.parse_args(argv)
    root = a.dir or tempfile.mkdtemp(prefix="seglog-bench-stall-")
    os.makedirs(root, exist_ok=True)
    try:
        r = measure(root, a.seconds, a.stall, say=lambda s: print(s, flush=True))
    finally:
        if not a.dir:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print(markdown(r))
    errors = r["baseline"]["errors"] + r["stalled"]["errors"]
    if errors:
        print("errors:", "; ".join(errors[:5]))
    return 0 if met(r) else 1


if __name__ == "__main__":
    raise SystemExit(main())

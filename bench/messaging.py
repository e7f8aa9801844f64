"""Messaging in-process (issue 3): Producer and Consumer throughput, produce -> poll latency.

    python -m bench.messaging [--records 1000000] [--runs 5] [--latency-seconds 3] [--dir /tmp/seglog-msg-bench]
                              [--readme]

- producer: --records 100-byte JSON-like values (null keys, so round-robin) sent one ``Producer.send()`` call
  per record into a 6-partition topic, then ``flush()``; defaults otherwise (linger_ms=5, batch_size=16384,
  idempotent). Codecs none and lz4. Fresh data directory per run; the page cache, no fsync.
- consumer: the records written by the producer runs, read back by a fresh ``Consumer`` with the 6 partitions
  assigned, ``poll()`` until every record was returned (max_poll_records 500, the default, and 10,000).
- latency: a producer thread sends 100-byte records at 10,000 rec/s (linger_ms=0, paced on a schedule with
  sleeps) into the 6-partition topic; a consumer thread in the same process polls (timeout 1 s). Latency of a
  record = the time poll() returned it - the time just before its send(); p50 / p99 / max over every record of
  a run (--latency-seconds long), medians over the runs.

Same-run baselines: a Python loop calling one builtin per record (the floor of any per-record API), one
``Log.append_batch`` of the same records into one partition log (storage alone), ``Log.records()`` over one
partition log holding the same records (decode alone). Targets (issue 3): producer >= 2 M rec/s, consumer
>= 3 M rec/s on one core, p99 produce -> poll < 1 ms at 10k rec/s. Figures are medians of --runs runs.
``--readme`` replaces the "Messaging (in-process)" section of bench/README.md with the table.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import struct
import sys
import threading
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
if __package__ in (None, ""):                  # python bench/messaging.py
    sys.path.insert(0, os.path.dirname(BENCH_DIR))

import seglog                                   # noqa: E402
from bench.suite import json_records            # noqa: E402

TITLE = "Messaging, in-process (issue 3)"
README = os.path.join(BENCH_DIR, "README.md")
SECTION = "## Messaging (in-process)"
PARTITIONS = 6
TOPIC = "bench"
LATENCY_RATE = 10_000


def _fresh(path: str) -> str:
    shutil.rmtree(path, ignore_errors=True)
    return path


def _median(xs):
    return statistics.median(xs)


# -- producer -------------------------------------------------------------------------------------------------

def produce_once(path: str, values: list[bytes], codec: str | None, keep: bool = False) -> float:
    """Seconds to send every value (one send() per record) and flush, on a fresh data directory."""
    node = seglog.open(_fresh(path))
    try:
        node.create_topic(TOPIC, PARTITIONS)
        prod = seglog.Producer(node, compression_type=codec)
        send = prod.send
        t = time.perf_counter()
        for v in values:
            send(TOPIC, v)
        prod.flush()
        dt = time.perf_counter() - t
        prod.close()
        return dt
    finally:
        node.close()
        if not keep:
            shutil.rmtree(path, ignore_errors=True)


def consume_once(path: str, total: int, max_poll_records: int) -> float:
    """Seconds for a fresh Consumer, assigned every partition, to poll `total` records."""
    with seglog.open(path) as node:
        c = seglog.Consumer(node, auto_offset_reset="earliest", enable_auto_commit=False,
                            max_poll_records=max_poll_records)
        c.assign([(TOPIC, p) for p in range(PARTITIONS)])
        got = 0
        t = time.perf_counter()
        poll = c.poll
        while got < total:
            n = len(poll(0))
            if not n:
                raise RuntimeError(f"only {got} of {total} records came back")
            got += n
        dt = time.perf_counter() - t
        c.close()
        return dt


# -- baselines ------------------------------------------------------------------------------------------------

def call_floor_once(values: list[bytes]) -> float:
    f = len
    t = time.perf_counter()
    for v in values:
        f(v)
    return time.perf_counter() - t


def append_batch_once(path: str, values: list[bytes], codec: str | None) -> float:
    with seglog.Log(_fresh(path)) as lg:
        t = time.perf_counter()
        lg.append_batch(values, compression=codec)
        dt = time.perf_counter() - t
    shutil.rmtree(path, ignore_errors=True)
    return dt


def records_once(path: str) -> tuple[float, int]:
    with seglog.Log(path, readonly=True) as lg:
        t = time.perf_counter()
        n = 0
        for _r in lg.records():
            n += 1
        return time.perf_counter() - t, n


# -- latency --------------------------------------------------------------------------------------------------

def latency_once(path: str, seconds: float, rate: int = LATENCY_RATE) -> dict:
    """One paced run: per-record latencies (ns) of produce -> poll, and the rate actually sent."""
    node = seglog.open(_fresh(path))
    node.create_topic(TOPIC, PARTITIONS)
    n = int(seconds * rate)
    pad = b"x" * 92
    pack = struct.Struct(">q").pack
    lat = []
    ready = threading.Event()
    done = threading.Event()
    errors = []

    def consume():
        try:
            c = seglog.Consumer(node, auto_offset_reset="earliest", enable_auto_commit=False)
            c.assign([(TOPIC, p) for p in range(PARTITIONS)])
            for p in range(PARTITIONS):
                c.position((TOPIC, p))
            ready.set()
            got = 0
            clock = time.perf_counter_ns
            unpack = struct.Struct(">q").unpack_from
            while got < n:
                recs = c.poll(1.0)
                now = clock()
                if not recs and done.is_set():
                    break
                for r in recs:
                    lat.append(now - unpack(r.value)[0])
                got += len(recs)
            c.close()
        except BaseException as e:                  # pragma: no cover - reported by the caller
            errors.append(e)
            ready.set()

    reader = threading.Thread(target=consume, name="latency-consumer")
    reader.start()
    ready.wait()
    prod = seglog.Producer(node, linger_ms=0)
    send = prod.send
    clock = time.perf_counter_ns
    interval = 1_000_000_000 // rate
    start = clock()
    for i in range(n):
        due = start + i * interval
        now = clock()
        if due > now:
            time.sleep((due - now) / 1e9)
        send(TOPIC, pack(clock()) + pad)
    sent_s = (clock() - start) / 1e9
    prod.close()
    reader.join(30)
    done.set()
    node.close()
    shutil.rmtree(path, ignore_errors=True)
    if errors:
        raise errors[0]
    if len(lat) != n:
        raise RuntimeError(f"{len(lat)} of {n} records were polled")
    lat.sort()
    return {"p50": lat[len(lat) // 2], "p99": lat[int(len(lat) * 0.99)], "max": lat[-1], "rate": n / sent_s}


# -- the figures ----------------------------------------------------------------------------------------------

def _rate(n: int, seconds: float) -> str:
    r = n / seconds
    return f"{r / 1e6:.2f} M rec/s" if r >= 1e6 else f"{r / 1e3:.0f} k rec/s"


def _us(ns: float) -> str:
    return f"{ns / 1e3:.0f} us"


def _spread(times: list[float]) -> str:
    return f"{max(times) / min(times):.2f}" if len(times) > 1 and min(times) > 0 else "-"


def figures(root: str, records: int, runs: int, latency_seconds: float, log=print) -> list[dict]:
    """Every figure as a table row dict (figure, median, spread, baseline, target, met)."""
    os.makedirs(root, exist_ok=True)
    values = json_records(records)
    rows: list[dict] = []

    def row(figure, median, spread="-", baseline="", target="", met=""):
        rows.append({"figure": figure, "median": median, "spread (max/min)": spread, "same-run baseline": baseline,
                     "target": target, "met": met})
        if target:
            rows[-1]["summary"] = {"figure": figure, "target": target, "measured": median, "met": met}
        log(f"  {figure:<52} {median:>16}  spread {spread:<5} {baseline}" + (f"  [target {target}: {met}]"
                                                                                 if target else ""))

    floor = [call_floor_once(values) for _ in range(runs)]
    floor_ns = _median(floor) / records * 1e9
    for codec in (None, "lz4"):
        name = codec or "none"
        data = os.path.join(root, f"produced-{name}")
        times = [produce_once(data, values, codec, keep=True) for _ in range(runs)]
        base = [append_batch_once(os.path.join(root, "append-batch"), values, codec) for _ in range(runs)]
        t = _median(times)
        row(f"producer, 100 B, 6 partitions, {name}", _rate(records, t), _spread(times),
            f"{t / records * 1e9:.0f} ns/rec; Log.append_batch {_rate(records, _median(base))}; "
            f"Python call-per-record floor {floor_ns:.0f} ns", ">= 2 M rec/s", "yes" if records / t >= 2e6 else "no")
        for mpr in (500, 10_000):
            ctimes = [consume_once(data, records, mpr) for _ in range(runs)]
            ct = _median(ctimes)
            extra = ""
            if mpr == 500:
                dec = [records_once(os.path.join(data, f"{TOPIC}-0")) for _ in range(runs)]
                dt, dn = _median([d[0] for d in dec]), dec[0][1]
                extra = f"; Log.records() of one partition {_rate(dn, dt)}"
            row(f"consumer, {name}, max_poll_records={mpr}", _rate(records, ct), _spread(ctimes),
                f"{ct / records * 1e9:.0f} ns/rec{extra}", ">= 3 M rec/s", "yes" if records / ct >= 3e6 else "no")
        shutil.rmtree(data, ignore_errors=True)
    lats = [latency_once(os.path.join(root, "latency"), latency_seconds) for _ in range(runs)]
    p50, p99 = _median([x["p50"] for x in lats]), _median([x["p99"] for x in lats])
    rate = _median([x["rate"] for x in lats])
    row("produce -> poll latency p50, 10k rec/s", _us(p50), _spread([x["p50"] for x in lats]),
        f"sent at {rate / 1e3:.1f} k rec/s, {int(latency_seconds * LATENCY_RATE):,} records per run")
    row("produce -> poll latency p99, 10k rec/s", _us(p99), _spread([x["p99"] for x in lats]),
        f"max {_us(_median([x['max'] for x in lats]))} (median of the runs' maxima)", "< 1 ms",
        "yes" if p99 < 1e6 else "no")
    return rows


def run(ctx) -> list[dict]:
    """bench.suite section."""
    records = 100_000 if ctx.quick else ctx.records
    seconds = 1.0 if ctx.quick else 3.0
    ctx.note(f"{records:,} records of 100 B, in-process Node, page cache, no fsync; medians of {ctx.runs} runs. "
             "Also `python -m bench.messaging` on its own.")
    return figures(ctx.dir, records, ctx.runs, seconds)


def markdown(rows: list[dict]) -> str:
    cols = [c for c in rows[0] if c != "summary"]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(out)


def write_section(text: str) -> None:
    """Replace (or add) the "## Messaging (in-process)" section of bench/README.md, keeping everything else."""
    body = ""
    if os.path.exists(README):
        with open(README, encoding="utf-8") as f:
            body = f.read()
    if not body.strip():
        body = "# Benchmarks\n\n"
    pattern = re.compile(r"^## Messaging \(in-process\)\n.*?(?=^## |\Z)", re.S | re.M)
    section = text.rstrip("\n") + "\n\n"
    if pattern.search(body):
        body = pattern.sub(lambda _: section, body, count=1)
    else:
        body = body.rstrip("\n") + "\n\n" + section
    tmp = README + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(body.rstrip("\n") + "\n")
    os.replace(tmp, README)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--latency-seconds", type=float, default=3.0)
    p.add_argument("--dir", default="/tmp/seglog-msg-bench")
    p.add_argument("--readme", action="store_true", help="write the table into bench/README.md")
    a = p.parse_args(argv)
    print(f"seglog messaging benchmark: {a.records:,} records of 100 B, median of {a.runs} runs, in {a.dir}",
          flush=True)
    rows = figures(a.dir, a.records, a.runs, a.latency_seconds)
    shutil.rmtree(a.dir, ignore_errors=True)
    table = markdown(rows)
    print()
    print(table)
    if a.readme:
        cmd = "python -m bench.messaging" + ("" if (a.records, a.runs) == (1_000_000, 5) else
                                             f" --records {a.records} --runs {a.runs}")
        write_section(f"{SECTION}\n\n`{cmd} --readme` (issue 3 targets; {a.records:,} x 100 B records, in-process "
                      f"Node, page cache, medians of {a.runs} runs; 2-core shared VM):\n\n{table}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

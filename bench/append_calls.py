"""append_batch by call size (issue 17): 1M x 100 B records handed over in calls of 100, 1,000, 10,000 and
1,000,000 records, one fsync at the end (each writer's file or Log opened and closed outside the timing), against the strongest pure-Python writer (records accumulated into a
bytearray, written 1 MiB at a time) and the plain writer of the store comparison (one write per length and per
value), given the same calls; and, at 1,000,000 per call, against the machine's write + fdatasync limit
(bench.limits' measure, taken in every round). All in one process, interleaved round by round, so each ratio
is the median of ratios of the same round.

    python -m bench.append_calls [--records 1000000] [--runs 5] [--dir /tmp/seglog-calls]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import struct
import time

from bench import limits, suite

TITLE = "append_batch by call size (issue 17)"
CALLS = [100, 1_000, 10_000, 1_000_000]
CHUNK = 1 << 20
LEN = struct.Struct(">I")
BUFFERED_TARGET = 2.5               # issue 17: append_batch >= 2.5x the bytearray writer at 10,000 per call
LIMIT_TARGET = 0.8                  # ... and >= 80% of write + fdatasync at 1,000,000 per call
# The regression guards compare CPU per record (the bytearray writer's over seglog's), which the disk's speed
# on a shared machine does not move (the wall figures at 10,000 and 1,000,000 per call wait on the same fsync
# and follow the disk: 1.4-2.4x and 60-110% in runs here); floor: the ~2.3-2.7x reached, less the noise.
CPU_FLOOR = 1.8
CPU_FLOOR_1000 = 1.4                # at 1,000 per call (a pwrite per call): 1.7-2.1x in runs here
# ... and the wall figure at 10,000 per call, which the disk's speed does move: 1.36-1.46x before append()
# started the disk writing as it goes (Segment._start_writeback), 1.9-2.4x since; the floor is above the former
WALL_FLOOR = 1.55


def seglog_writer(path: str):
    """Log.append_batch per call, then flush() (the fsync); the Log is opened and closed outside the timing."""
    from seglog import Log
    log = Log(path)

    def run(calls: list) -> int:
        append_batch = log.append_batch
        for values in calls:
            append_batch(values)
        log.flush()
        return log.size_bytes
    return run, log.close


def buffered_writer(path: str):
    """The strongest plain writer: length-prefixed records accumulated in a bytearray, written 1 MiB at a
    time (the fastest of the pure-Python loops tried: += per field, extend, one join per call, struct arrays)."""
    f = open(path, "wb")

    def run(calls: list) -> int:
        pack = LEN.pack
        buf = bytearray()
        w = f.write
        for values in calls:
            for v in values:
                buf += pack(len(v))
                buf += v
                if len(buf) >= CHUNK:
                    w(buf)
                    buf.clear()
        w(buf)
        f.flush()
        os.fsync(f.fileno())
        return f.tell()
    return run, f.close


def plain_writer(path: str):
    """bench.stores' plain baseline: one f.write per length and per value."""
    f = open(path, "wb")

    def run(calls: list) -> int:
        pack = LEN.pack
        w = f.write
        for values in calls:
            for v in values:
                w(pack(len(v)))
                w(v)
        f.flush()
        os.fsync(f.fileno())
        return f.tell()
    return run, f.close


WRITERS = [("seglog append_batch", seglog_writer), ("bytearray writer (1 MiB writes)", buffered_writer),
           ("plain writer (write per field)", plain_writer)]


def measure(root: str, records: int, runs: int, calls=CALLS) -> dict:
    """{"times" and "cpu": {(writer, per_call): [wall / CPU seconds per round]}, "limit": [write + fdatasync GB/s
    per round], "sizes": {(writer, per_call): bytes written}}."""
    values = suite.json_records(records)
    times: dict = {}
    cpu: dict = {}                                  # process CPU seconds (encoding, copies, syscalls; not the wait)
    sizes: dict = {}
    limit = []
    for r in range(runs + 1):                       # round 0 warms up: imports, first-call costs, page cache
        if r:
            limit.append(limits.sync_write_gbs(os.path.join(root, "limit.bin"), 1))
        for per in calls:
            chunks = [values[i:i + per] for i in range(0, len(values), per)]     # the caller's lists, untimed
            for name, opener in WRITERS:
                path = os.path.join(root, "w-0")
                shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else (
                    os.path.exists(path) and os.remove(path))
                write, close = opener(path)
                c = time.process_time()
                t = time.perf_counter()
                size = write(chunks)
                t = time.perf_counter() - t
                c = time.process_time() - c
                close()
                if r:
                    times.setdefault((name, per), []).append(t)
                    cpu.setdefault((name, per), []).append(c)
                sizes[(name, per)] = size
    return {"times": times, "cpu": cpu, "limit": limit, "sizes": sizes, "records": records}


def rows(m: dict, guards: bool = True) -> list[dict]:
    """The table; rows at 10,000 and 1,000,000 per call carry the targets and (unless `guards` is false: a
    --quick run's sizes say nothing) the regression guards."""
    times, lim, sizes, n = m["times"], m["limit"], m["sizes"], m["records"]
    out = []
    for per in sorted({p for _, p in times}):
        seg = times[("seglog append_batch", per)]
        buf = times[("bytearray writer (1 MiB writes)", per)]
        plain = times[("plain writer (write per field)", per)]
        vs_buf = statistics.median(b / s for s, b in zip(seg, buf))
        vs_plain = statistics.median(p / s for s, p in zip(seg, plain))
        of_limit = statistics.median(sizes[("seglog append_batch", per)] / s / 1e9 / g for s, g in zip(seg, lim))
        row = {"records per call": f"{per:,}",
               "seglog append_batch": suite.rate(n, statistics.median(seg)),
               "bytearray writer": suite.rate(n, statistics.median(buf)),
               "plain writer": suite.rate(n, statistics.median(plain)),
               "seglog / bytearray writer": f"{vs_buf:.2f}x", "seglog / plain writer": f"{vs_plain:.2f}x",
               "seglog of write+fdatasync limit": f"{of_limit:.0%}",
               "CPU per record: seglog / bytearray writer": "{:.0f} / {:.0f} ns".format(
                   *(statistics.median(m["cpu"][(w, per)]) / n * 1e9
                     for w in ("seglog append_batch", "bytearray writer (1 MiB writes)"))),
               "spread seglog (max/min)": suite.spread(seg)}
        if per == 10_000:
            row["summary"] = {"figure": "append_batch + fsync, calls of 10,000 x 100 B",
                              "target": f">= {BUFFERED_TARGET}x the bytearray writer",
                              "measured": f"{row['seglog append_batch']}; {vs_buf:.2f}x the bytearray writer",
                              "met": "yes" if vs_buf >= BUFFERED_TARGET else "no"}
        cpu_ratio = statistics.median(b / s for s, b in zip(m["cpu"][("seglog append_batch", per)],
                                                             m["cpu"][("bytearray writer (1 MiB writes)", per)]))
        if per in (1_000, 10_000, 1_000_000) and guards:
            row["guard"] = {"figure": f"append_batch ({per:,} per call) vs the bytearray writer, CPU per record",
                            "value": round(cpu_ratio, 3), "floor": CPU_FLOOR_1000 if per == 1_000 else CPU_FLOOR}
        if per == 1_000_000:
            row["summary"] = {"figure": "append_batch + fsync, one call of 1,000,000 x 100 B",
                              "target": f">= {LIMIT_TARGET:.0%} of write + fdatasync",
                              "measured": f"{row['seglog append_batch']}; {of_limit:.0%} of write + fdatasync",
                              "met": "yes" if of_limit >= LIMIT_TARGET else "no"}
        if per == 10_000 and guards:
            row["guard"] = [row["guard"], {"figure": "append_batch + fsync (10,000 per call) vs the bytearray writer, "
                                                     "wall time", "value": round(vs_buf, 3), "floor": WALL_FLOOR}]
        out.append(row)
    return out


def run(ctx: suite.Context) -> list[dict]:
    records = 100_000 if ctx.quick else ctx.records
    runs = max(ctx.runs, 1 if ctx.quick else 5)
    ctx.note(f"{records:,} records of 100 B JSON-like values per writer and call size, one fsync at the end; the "
             f"writers and call sizes interleaved, {runs} rounds after a warm-up round; every ratio is the median "
             "of the ratios of the same round. 'of write+fdatasync limit' = bytes written / time, over "
             "bench.limits' write + one fdatasync of 128 MiB measured in the same round. 'CPU per record' is the "
             "process's CPU time (encoding, copies, the write calls into the page cache; not the wait for the "
             "disk), which the disk's speed on a shared machine does not move.")
    return rows(measure(ctx.dir, records, runs), guards=not ctx.quick)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--dir", default="/tmp/seglog-calls")
    p.add_argument("--calls", default=",".join(map(str, CALLS)))
    a = p.parse_args(argv)
    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    try:
        m = measure(a.dir, a.records, a.runs, [int(c) for c in a.calls.split(",")])
        for r in rows(m):
            print("  ".join(f"{k}: {v}" for k, v in r.items() if k not in ("summary", "guard")))
    finally:
        shutil.rmtree(a.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

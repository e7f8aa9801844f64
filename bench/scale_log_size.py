"""Throughput vs log size: one log grown GiB by GiB to 20 GiB, measured at 1, 4 and 20 GiB on the way.

One pass, so a 20 GiB point fits the suite's budget: Log.append_batch of 1 KiB records in 64 MiB calls (1 GiB
segments) grows a single log, each GiB timed. A raw baseline grows next to it all the way, GiB for GiB (a
GiB of seglog, then a GiB of the raw file in 8 MiB write() calls), so both meet the same memory and the same
load: growth is judged against the raw writer's own growth over the same GiBs. At every checkpoint (ctx.log_sizes_gib) the pass stops: flush() (and the raw file's fsync), a
clean reopen, a CRC-checked scan of the whole log through read() (raw: a cached read of the whole file), random
single-record reads, the process's memory; then the log is reopened and grows on. If the cost grows linearly
or better, the seconds per GiB stay flat as the log grows and reads do not slow down with size.

    python -m bench --only scale_log_size [--log-sizes 1,4,20]
"""

from __future__ import annotations

import os
import statistics
import time

from bench import suite

TITLE = "Scaling: log size"
GIB = 1 << 30
RECORD = 1024
CHUNK_RECORDS = 65536          # 64 MiB per append_batch call
READ_CHUNK = 8 << 20
RANDOM_READS = 2_000


def settle() -> None:
    """Write back every dirty page first, so a timed writer does not pay for the previous one's writeback."""
    os.sync()


class RawFile:
    """The baseline: bytes appended to one file in READ_CHUNK write() calls."""

    def __init__(self, path: str, payload: bytes):
        self.path, self.mv, self.written = path, memoryview(payload), 0
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def grow(self, nbytes: int) -> float:
        """Seconds to append nbytes (whole payloads, the last one cut)."""
        t = time.perf_counter()
        left = nbytes
        while left > 0:
            for i in range(0, min(len(self.mv), left), READ_CHUNK):
                left -= os.write(self.fd, self.mv[i:i + min(READ_CHUNK, left)])
                if left <= 0:
                    break
        self.written += nbytes
        return time.perf_counter() - t

    def fsync(self) -> float:
        t = time.perf_counter()
        os.fsync(self.fd)
        return time.perf_counter() - t

    def read_gbs(self, runs: int) -> float:
        buf = bytearray(READ_CHUNK)

        def read():
            with open(self.path, "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass
        return self.written / suite.median_time(read, runs) / 1e9

    def remove(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if os.path.exists(self.path):
            os.remove(self.path)


def checkpoint_reads(path: str, runs: int, scan_runs: int) -> dict:
    """On the closed log: reopen time, CRC-checked scan GB/s, random single-record reads (us)."""
    from seglog import Log, _engine
    t = time.perf_counter()
    Log(path).close()
    t_open = time.perf_counter() - t
    with Log(path) as lg:
        end, size = lg.end_offset, lg.size_bytes

    def scan():
        # a fresh open has verified nothing: each read() CRC-checks its batches once
        with Log(path) as fresh:
            offset, stop = fresh.start_offset, fresh.end_offset
            while offset < stop:
                _view, offset = fresh.read_next(offset, READ_CHUNK)
                if offset < 0:
                    break
    t_scan = suite.median_time(scan, scan_runs)
    keys = suite.random_keys(end, RANDOM_READS)

    def random_records():
        with Log(path) as rlog:
            get = rlog.get
            for k in keys:
                assert get(k).offset == k

    def random_batches():
        with Log(path) as rlog:
            read, decode = rlog.read, _engine.decode_records
            for k in keys:
                assert decode(read(k, 1), k, k + 1, verify_crc=False)[0].offset == k
    t_random = suite.median_time(random_records, runs)
    t_random_batch = suite.median_time(random_batches, runs)
    return {"open": t_open, "scan_gbs": size / t_scan / 1e9, "random_us": t_random / len(keys) * 1e6,
            "random_batch_us": t_random_batch / len(keys) * 1e6, "records": end}


def grow(ctx: suite.Context, sizes: list[int], values: list[bytes], payload: bytes, raw_bytes: int) -> dict:
    """The single pass: per-unit seconds of seglog and raw, and the measurements at each checkpoint."""
    from seglog import Log
    path = ctx.fresh("big-0")
    unit = min(GIB, sizes[0])
    raw = RawFile(ctx.fresh("raw.bin"), payload) if raw_bytes else None
    settle()
    anon0 = suite.rss_bytes("RssAnon")
    log = Log(path)
    seg_units: list[float] = []
    raw_units: list[float] = []
    seg_total = raw_total = 0.0
    points = []
    first = True
    for target in sizes:
        while log.size_bytes < target:
            before = log.size_bytes
            goal = min(before + unit, target)
            t = time.perf_counter()
            while log.size_bytes < goal:
                log.append_batch(values)
            dt = time.perf_counter() - t
            seg_total += dt
            seg_units.append(dt * unit / (log.size_bytes - before))
            if raw is not None and raw.written < raw_bytes:
                n = min(unit, raw_bytes - raw.written)
                dt = raw.grow(n)
                raw_total += dt
                raw_units.append(dt * unit / n)
        t = time.perf_counter()
        log.flush()
        t_flush = time.perf_counter() - t
        point = {"size": log.size_bytes, "gib": target / GIB, "segments": log.segment_count, "units": len(seg_units),
                 "write": seg_total + t_flush, "flush": t_flush, "anon": suite.rss_bytes("RssAnon") - anon0}
        if raw is not None and raw.written == target:          # the raw file is as large as the log: compare
            point["raw_write"] = raw_total + raw.fsync()
            point["raw_bytes"] = raw.written
            point["raw_read_gbs"] = raw.read_gbs(ctx.runs if first else 1)
        log.close()
        if raw is not None and raw.written >= raw_bytes and target >= raw_bytes:
            raw.remove()                   # before the next (larger) checkpoint's reads need the page cache
            raw = None
        point.update(checkpoint_reads(path, ctx.runs, ctx.runs if first else 1))
        points.append(point)
        print(f"  {target / GIB:g} GiB: last unit {seg_units[-1]:.2f} s/GiB (raw median "
              f"{statistics.median(raw_units) if raw_units else 0:.2f} over {len(raw_units)} units), flush "
              f"{t_flush:.1f} s, scan {point['scan_gbs']:.2f} GB/s, random {point['random_us']:.1f} us, reopen "
              f"{point['open'] * 1e3:.0f} ms", flush=True)
        first = False
        if target != sizes[-1]:
            log = Log(path)
    if raw is not None:
        raw.remove()
    ctx.fresh("big-0")
    return {"unit": unit, "seg_units": seg_units, "raw_units": raw_units, "points": points}


def _span(a: int, b: int) -> str:
    return f"GiB {a}" if a == b else f"GiBs {a}-{b}"


def run(ctx: suite.Context) -> list[dict]:
    sizes_gib = [0.25, 0.5] if ctx.quick else sorted(ctx.log_sizes_gib)
    values = suite.json_records(CHUNK_RECORDS if not ctx.quick else 8192, RECORD)
    payload = b"".join(values)
    free = os.statvfs(ctx.dir)
    free_bytes = free.f_bavail * free.f_frsize
    fits = [s for s in sizes_gib if 2 * s * GIB * 1.1 <= free_bytes]       # the log and the raw file
    if len(fits) < len(sizes_gib):
        ctx.note(f"Skipped {', '.join(f'{s:g}' for s in sizes_gib if s not in fits)} GiB: not enough free disk "
                 f"({free_bytes / GIB:.0f} GiB free).")
    if not fits:
        raise RuntimeError("not enough free disk for the smallest log size")
    unit_text = "GiB" if fits[0] >= 1 else f"{int(min(GIB, fits[0] * GIB)) >> 20} MiB"
    ctx.note(f"One log of {RECORD} B records grown to {fits[-1]:g} GiB in a single pass (append_batch of "
             f"{len(values):,} records per call, 1 GiB segments), each {unit_text} timed; the pass stops at "
             f"{', '.join(f'{s:g}' for s in fits)} GiB for flush(), a clean reopen, a CRC-checked scan of the whole "
             f"log (median of {ctx.runs} runs at the first stop, one run at the others), {RANDOM_READS:,} random "
             "single-record reads on the freshly opened log (through the public get(o) and through "
             f"read(o, 1) + _engine.decode_records; medians of {ctx.runs} runs), and the process's anonymous memory. "
             "The raw baseline (8 MiB write() calls to one file, one fsync, a cached read) grows next to the log, "
             f"{unit_text} for {unit_text}, as far as the log. Both writers fill page-cache memory that is new to the process; on a VM the host may back such "
             "memory only on first use, which can hold both well below the page-cache write limit that "
             "bench.limits measures on reused memory: read seglog against the raw writer of the same run."
             + (" At 20 GiB the log and the raw file no longer fit in the page cache together: the later GiBs of "
                "both writers meet page reclaim, and the last scan and random reads partly read the disk."
                if fits[-1] >= 16 else ""))
    g = grow(ctx, [int(s * GIB) for s in fits], values, payload, int(fits[-1] * GIB))
    seg_u, raw_u, pts = g["seg_units"], g["raw_units"], g["points"]
    first_n = pts[-2]["units"] if len(pts) > 1 else len(seg_u)   # the units before the last stop, then the rest
    first_seg = statistics.median(seg_u[:first_n])
    rows = []
    prev = 0
    for p in pts:
        span = seg_u[prev:p["units"]]
        raw_span = raw_u[prev:p["units"]]
        med = statistics.median(span)
        raw_ref = statistics.median(raw_span)
        unit_gib = g["unit"] / GIB
        rows.append({
            "log size": f"{p['gib']:g} GiB", "segments": f"{p['segments']}",
            "GiBs timed": _span(round(prev * unit_gib) + 1, round(p["units"] * unit_gib)) if unit_gib >= 1 else
                          f"{len(span)} x {g['unit'] >> 20} MiB",
            "append (median of those)": f"{med:.2f} s/GiB",
            "raw write": f"{raw_ref:.2f} s/GiB",
            "seglog / raw speed": suite.ratio(raw_ref, med),
            "vs seglog's first GiBs": f"{med / first_seg:.2f}x cost",
            "write + flush, whole log": f"{p['write']:.1f} s ({p['size'] / p['write'] / 1e9:.2f} GB/s)",
            "raw write + fsync": (f"{p['raw_write']:.1f} s ({p['raw_bytes'] / p['raw_write'] / 1e9:.2f} GB/s)"
                                  if "raw_write" in p else "-"),
            "reopen": f"{p['open'] * 1e3:.0f} ms",
            "CRC-checked scan": f"{p['scan_gbs']:.2f} GB/s",
            "raw cached read": f"{p['raw_read_gbs']:.2f} GB/s" if "raw_read_gbs" in p else "-",
            "scan vs raw read": suite.ratio(p["scan_gbs"], p.get("raw_read_gbs")),
            "random read: get(o)": f"{p['random_us']:.1f} us",
            "random read: read(o, 1) + decode": f"{p['random_batch_us']:.1f} us",
            "memory (anon)": suite.mb(max(p["anon"], 0)),
            "data": {"gib": p["gib"], "scan": p["scan_gbs"], "raw_read": p.get("raw_read_gbs"),
                     "random_us": p["random_us"], "random_batch_us": p["random_batch_us"]},
        })
        prev = p["units"]
    rows[0]["data"].update(seg_units=seg_u, raw_units=raw_u, unit_gib=g["unit"] / GIB)
    if len(rows) > 1:
        a, b = pts[0], pts[-1]
        last_seg = statistics.median(seg_u[first_n:])
        first_raw, last_raw = statistics.median(raw_u[:first_n]), statistics.median(raw_u[first_n:])
        growth, raw_growth = last_seg / first_seg, last_raw / first_raw
        ctx.note(f"From {a['gib']:g} to {b['gib']:g} GiB: the {len(seg_u) - first_n} {unit_text}s after the last "
                 f"stop cost {growth:.2f}x seglog's first {first_n}, the raw writer's the same GiBs {raw_growth:.2f}x "
                 f"its first {first_n} (so {growth / raw_growth:.2f}x of the machine's own growth); the scan runs at "
                 f"{b['scan_gbs'] / a['scan_gbs']:.2f}x the GB/s, a random read takes "
                 f"{b['random_us'] / a['random_us']:.2f}x the time, reopening {b['open'] / a['open']:.2f}x.")
        rows[-1]["summary"] = {
            "figure": f"scaling: append cost per {unit_text}, the last {len(seg_u) - first_n} of a {b['gib']:g} GiB "
                      f"log vs its first {first_n}",
            "target": "linear or better (<= 1.25x, or <= 1.25x of the raw writer's own growth)",
            "measured": f"{growth:.2f}x ({last_seg:.2f} vs {first_seg:.2f} s/GiB; raw writer {raw_growth:.2f}x: "
                        f"{last_raw:.2f} vs {first_raw:.2f} s/GiB)",
            "met": "yes" if growth <= 1.25 or growth <= 1.25 * raw_growth else "no"}
        chart(ctx, rows)
    return rows


def chart(ctx: suite.Context, rows: list[dict]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    d = [r["data"] for r in rows]
    seg_u, raw_u, unit = d[0]["seg_units"], d[0]["raw_units"], d[0]["unit_gib"]
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(17, 4.5))
    xs = [(i + 1) * unit for i in range(len(seg_u))]
    a1.plot(xs, seg_u, "o-", ms=3, color="tab:orange", label="seglog append_batch")
    a1.plot(xs[:len(raw_u)], raw_u, "o-", ms=3, color="tab:gray", label="raw sequential write (baseline)")
    for x in d:
        a1.axvline(x["gib"], color="black", lw=0.5, ls=":")
    a1.set_ylim(bottom=0)
    a1.set_xlabel(f"GiB written so far (one {d[-1]['gib']:g} GiB log; dotted: the stops)")
    a1.set_ylabel("seconds for this GiB")
    a1.set_title("write cost per GiB as the log grows (flat = linear)", fontsize=10)
    a1.legend(fontsize=8)
    first_n = round(d[-2]["gib"] / unit) if len(d) > 1 else len(seg_u)
    first = statistics.median(seg_u[:first_n])
    same = [r / s for r, s in zip(raw_u, seg_u)]
    a2.plot(xs[:len(same)], same, "o-", ms=3, color="tab:gray", label="seglog speed / raw speed, same GiB")
    a2.plot(xs, [first / s for s in seg_u], "s--", ms=3, color="tab:red",
            label=f"seglog speed / its own first {first_n} GiB")
    a2.axhline(1.0, color="black", lw=0.8, ls="--")
    a2.set_ylim(0, max(2.0, max(same) * 1.1))
    a2.set_xlabel("GiB written so far")
    a2.set_ylabel("ratio (above 1 = seglog faster)")
    a2.set_title("ratios to the baselines of the same run", fontsize=10)
    a2.legend(fontsize=8)
    sizes = [x["gib"] for x in d]
    a3.plot(sizes, [x["scan"] for x in d], "o-", color="tab:orange", label="seglog CRC-checked scan (GB/s)")
    raw_pts = [(x["gib"], x["raw_read"]) for x in d if x["raw_read"]]
    if raw_pts:
        a3.plot(*zip(*raw_pts), "o-", color="tab:gray", label="raw cached read (GB/s)")
    a3.set_xlabel("log size (GiB)")
    a3.set_ylabel("GB/s")
    a3.set_ylim(bottom=0)
    a4 = a3.twinx()
    a4.plot(sizes, [x["random_us"] for x in d], "s--", color="tab:green", label="random read, get() (us, right)")
    a4.plot(sizes, [x["random_batch_us"] for x in d], "^--", color="tab:olive",
            label="random read, read() + decode (us, right)")
    a4.set_ylabel("us per random read")
    a4.set_ylim(bottom=0)
    h1, l1 = a3.get_legend_handles_labels()
    h2, l2 = a4.get_legend_handles_labels()
    a3.legend(h1 + h2, l1 + l2, fontsize=8, loc="lower left")
    a3.set_title("reads vs log size", fontsize=10)
    fig.tight_layout()
    ctx.chart(fig, "scale_log_size", "Write seconds per GiB as one log grows to its largest size, the same GiBs as "
                                     "ratios to the raw writer and to seglog's own first GiBs, and scan and "
                                     "random-read speed at each stop.")

"""Throughput vs log size: a log grown to 1, 4, 8 GiB (20 GiB with `python -m bench --big-log`).

Per size, first a raw baseline (the same number of bytes written to one file in 8 MiB calls, one fsync, then
read back from the page cache), then seglog: Log.append_batch of 1 KiB records in 64 MiB calls (1 GiB
segments), timed GiB by GiB, one flush(), a clean reopen, a CRC-checked scan of every batch through read(),
and random single-record reads. If the cost grows linearly or better, the seconds per GiB stay flat as the log
grows and reads do not slow down with size. Writes past ~20% of RAM hit the kernel's dirty-page limit and run
at disk speed: the raw baseline of the same size shows where that happens.
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
RANDOM_READS = 5_000


def per_gib_times(total: int, write_step) -> tuple[list[float], int]:
    """Call write_step() (-> bytes written) until `total` bytes; seconds per GiB of each successive GiB (of the
    whole pass when total < 1 GiB). A final partial GiB is added to the last whole one."""
    unit = min(GIB, total)
    marks, written, t0 = [], 0, time.perf_counter()
    while written < total:
        written += write_step()
        while written >= unit * (len(marks) + 1):
            marks.append(time.perf_counter())
    if marks:
        marks[-1] = time.perf_counter()
    times = [marks[0] - t0] + [b - a for a, b in zip(marks, marks[1:])]
    return [t * GIB / unit for t in times], written


def pretouch(ctx: suite.Context, total: int, buf: bytes) -> None:
    """Write `total` bytes to a file and delete it, untimed, so later writers get already-touched memory."""
    path = ctx.fresh("pretouch.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for _ in range(max(1, total // len(buf))):
        os.write(fd, buf)
    os.close(fd)
    os.remove(path)
    settle()


def settle() -> None:
    """Write back every dirty page first, so a timed writer does not pay for the previous one's writeback."""
    os.sync()


def raw_baseline(ctx: suite.Context, total: int, buf: bytes) -> dict:
    path = ctx.fresh("raw.bin")
    settle()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    mv = memoryview(buf)

    def step():
        for i in range(0, len(mv), READ_CHUNK):
            os.write(fd, mv[i:i + READ_CHUNK])
        return len(mv)
    t = time.perf_counter()
    gib_times, written = per_gib_times(total, step)
    t_write = time.perf_counter() - t
    t = time.perf_counter()
    os.fsync(fd)
    t_sync = time.perf_counter() - t
    os.close(fd)
    rbuf = bytearray(READ_CHUNK)

    def read():
        with open(path, "rb", buffering=0) as f:
            while f.readinto(rbuf):
                pass
    t_read = suite.median_time(read, ctx.runs)
    os.remove(path)
    return {"gib_times": gib_times, "write": t_write, "sync": t_sync, "read_gbs": written / t_read / 1e9,
            "bytes": written}


def seglog_log(ctx: suite.Context, total: int, values: list[bytes]) -> dict:
    from seglog import Log
    path = ctx.fresh("big-0")
    settle()
    anon0 = suite.rss_bytes("RssAnon")
    log = Log(path)
    append_batch = log.append_batch
    before = [0]

    def step():
        append_batch(values)
        size = log.size_bytes
        grown, before[0] = size - before[0], size
        return grown
    t = time.perf_counter()
    gib_times, written = per_gib_times(total, step)
    t_write = time.perf_counter() - t
    t = time.perf_counter()
    log.flush()
    t_sync = time.perf_counter() - t
    end, segments = log.end_offset, log.segment_count
    log.close()

    t = time.perf_counter()
    Log(path).close()
    t_open = time.perf_counter() - t

    def scan():
        # a fresh open has verified nothing: each read() CRC-checks its batches once
        with Log(path) as fresh:
            offset, stop = fresh.start_offset, fresh.end_offset
            while offset < stop:
                view, offset = fresh.read_next(offset, READ_CHUNK)
                if offset < 0:
                    break
    t_scan = suite.median_time(scan, ctx.runs)
    keys = suite.random_keys(end, RANDOM_READS)

    def random_records():
        with Log(path) as rlog:
            records = rlog.records
            for k in keys:
                assert next(records(k, k + 1)).offset == k

    def random_batches():
        from seglog import _engine
        with Log(path) as rlog:
            read, decode = rlog.read, _engine.decode_records
            for k in keys:
                assert decode(read(k, 1), k, k + 1, verify_crc=False)[0].offset == k
    t_random = suite.median_time(random_records, ctx.runs)
    t_random_batch = suite.median_time(random_batches, ctx.runs)
    anon = suite.rss_bytes("RssAnon") - anon0
    ctx.fresh("big-0")
    return {"gib_times": gib_times, "write": t_write, "sync": t_sync, "open": t_open, "scan_gbs": written / t_scan / 1e9,
            "random_us": t_random / len(keys) * 1e6, "random_batch_us": t_random_batch / len(keys) * 1e6,
            "anon": anon, "segments": segments, "bytes": written,
            "records": end}


def run(ctx: suite.Context) -> list[dict]:
    sizes = [0.25, 0.5] if ctx.quick else ctx.log_sizes_gib
    values = suite.json_records(CHUNK_RECORDS if not ctx.quick else 8192, RECORD)
    payload = b"".join(values)
    free = os.statvfs(ctx.dir)
    free_gib = free.f_bavail * free.f_frsize / GIB
    ctx.note(f"Log sizes {', '.join(f'{s:g}' for s in sizes)} GiB of {RECORD} B records (append_batch of "
             f"{len(values):,} records per call, 1 GiB segments); default sizes fit the suite's 10-minute budget, "
             f"`python -m bench --big-log` adds 20 GiB ({free_gib:.0f} GiB free here). Each size is written once "
             "(the raw baseline first), each writer after an os.sync() so it does not pay for the previous one's "
             "writeback; 'median GiB' = the median of the seconds each successive GiB took, 'write + flush' = "
             "the whole pass including the final sync. Past ~20% of RAM in dirty pages the kernel throttles "
             "writers to disk speed, for seglog and the raw file alike. Reads are medians "
             f"of {ctx.runs} runs; {RANDOM_READS:,} random single-record reads by offset on a freshly opened log, through "
             "the public records(o, o+1) and through read(o, 1) (the one batch holding o) + _engine.decode_records. "
             "Before the first size, an untimed write of the largest size touches the page-cache memory once "
             "(on this VM the first touch of fresh memory costs 3-10x: without it the first writer pays for it).")
    results = []
    fits = [s for s in sizes if s * GIB * 1.1 <= free.f_bavail * free.f_frsize]
    if fits:
        pretouch(ctx, int(max(fits) * GIB), payload)
    for s in sizes:
        if s * GIB * 1.1 > free.f_bavail * free.f_frsize:
            ctx.note(f"Skipped {s:g} GiB: not enough free disk.")
            continue
        total = int(s * GIB)
        raw = raw_baseline(ctx, total, payload)
        seg = seglog_log(ctx, total, values)
        results.append((s, raw, seg))
        print(f"  {s:g} GiB: seglog {statistics.median(seg['gib_times']):.2f} s/GiB "
              f"(raw {statistics.median(raw['gib_times']):.2f}), flush {seg['sync']:.1f} s "
              f"(raw fsync {raw['sync']:.1f}), scan {seg['scan_gbs']:.2f} GB/s, random {seg['random_us']:.1f} us",
              flush=True)
    rows = []
    for s, raw, seg in results:
        sg, rg = statistics.median(seg["gib_times"]), statistics.median(raw["gib_times"])
        seg_total, raw_total = seg["write"] + seg["sync"], raw["write"] + raw["sync"]
        rows.append({
            "log size": f"{s:g} GiB", "segments": f"{seg['segments']}",
            "append (median GiB)": f"{sg:.2f} s/GiB", "raw write (median GiB)": f"{rg:.2f} s/GiB",
            "last GiB / first GiB": f"{seg['gib_times'][-1] / seg['gib_times'][0]:.2f}x"
                                    if len(seg["gib_times"]) > 1 else "-",
            "write + flush": f"{seg_total:.1f} s ({seg['bytes'] / seg_total / 1e9:.2f} GB/s)",
            "raw write + fsync": f"{raw_total:.1f} s ({raw['bytes'] / raw_total / 1e9:.2f} GB/s)",
            "vs raw": suite.ratio(raw_total, seg_total),
            "reopen": f"{seg['open'] * 1e3:.0f} ms",
            "CRC-checked scan": f"{seg['scan_gbs']:.2f} GB/s", "raw cached read": f"{raw['read_gbs']:.2f} GB/s",
            "scan vs raw read": suite.ratio(seg["scan_gbs"], raw["read_gbs"]),
            "random read: records(o, o+1)": f"{seg['random_us']:.1f} us",
            "random read: read(o, 1) + decode": f"{seg['random_batch_us']:.1f} us",
            "memory (anon)": suite.mb(max(seg["anon"], 0)),
            "data": {"gib": s, "seg_gib_times": seg["gib_times"], "raw_gib_times": raw["gib_times"],
                     "scan": seg["scan_gbs"], "raw_read": raw["read_gbs"], "random_us": seg["random_us"]},
        })
    if len(rows) > 1:
        a, b = rows[0]["data"], rows[-1]["data"]
        ctx.note(f"From {a['gib']:g} to {b['gib']:g} GiB: append s/GiB "
                 f"{statistics.median(b['seg_gib_times']) / statistics.median(a['seg_gib_times']):.2f}x "
                 f"(raw write {statistics.median(b['raw_gib_times']) / statistics.median(a['raw_gib_times']):.2f}x), "
                 f"scan GB/s {b['scan'] / a['scan']:.2f}x, random read time {b['random_us'] / a['random_us']:.2f}x.")
        chart(ctx, rows)
    return rows


def chart(ctx: suite.Context, rows: list[dict]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    d = [r["data"] for r in rows]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    big = d[-1]
    xs = range(1, len(big["seg_gib_times"]) + 1)
    a1.plot(xs, big["seg_gib_times"], "o-", color="tab:orange", label="seglog append_batch")
    a1.plot(range(1, len(big["raw_gib_times"]) + 1), big["raw_gib_times"], "o-", color="tab:gray",
            label="raw sequential write (baseline)")
    a1.set_ylim(bottom=0)
    a1.set_xlabel(f"GiB written so far ({big['gib']:g} GiB log)")
    a1.set_ylabel("seconds for this GiB")
    a1.set_title("write cost per GiB as the log grows (flat = linear)", fontsize=10)
    a1.legend(fontsize=8)
    sizes = [x["gib"] for x in d]
    a2.plot(sizes, [x["scan"] for x in d], "o-", color="tab:orange", label="seglog CRC-checked scan (GB/s)")
    a2.plot(sizes, [x["raw_read"] for x in d], "o-", color="tab:gray", label="raw cached read (GB/s)")
    a2.set_xlabel("log size (GiB)")
    a2.set_ylabel("GB/s")
    a2.set_ylim(bottom=0)
    a3 = a2.twinx()
    a3.plot(sizes, [x["random_us"] for x in d], "s--", color="tab:green", label="seglog random read (us, right)")
    a3.set_ylabel("us per random read")
    a3.set_ylim(bottom=0)
    h1, l1 = a2.get_legend_handles_labels()
    h2, l2 = a3.get_legend_handles_labels()
    a2.legend(h1 + h2, l1 + l2, fontsize=8, loc="lower left")
    a2.set_title("reads vs log size", fontsize=10)
    fig.tight_layout()
    ctx.chart(fig, "scale_log_size", "Write seconds per GiB as the log grows; scan and random-read speed vs size.")

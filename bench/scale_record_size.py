"""Throughput vs record size, 10 B .. 64 KiB: does the cost grow linearly with the bytes, or better?

For each size, about TARGET_BYTES of records (at most MAX_RECORDS) are written by Log.append_batch, by
per-record Log.append and by the plain Python length-prefixed writer (each with one sync at the end; the same
writers as bench.stores), then read back into Python objects by Log.records() and by the plain reader.
Medians of ctx.runs runs. Linear or better = the cost per byte does not rise as records grow.
"""

from __future__ import annotations

import statistics

from bench import suite
from bench.stores import Plain, SeglogBatch, SeglogEach

TITLE = "Scaling: record size"
SIZES = [10, 100, 1024, 4096, 16384, 65536]
TARGET_BYTES = 128 << 20
MAX_RECORDS = 1_000_000


def measure_size(ctx: suite.Context, size: int, target: int, max_records: int) -> dict:
    n = max(64, min(max_records, target // size))
    values = suite.json_records(n, size)
    writers = {"batch": SeglogBatch(), "each": SeglogEach(), "plain": Plain()}
    times = {k: [] for k in ("batch", "each", "plain", "read", "plain_read")}
    for _ in range(ctx.runs):
        for key, store in writers.items():
            path = ctx.fresh(f"{key}-0")
            times[key].append(suite.timings(lambda: store.write(path, values), 1)[0])
        got = []
        times["read"].append(suite.timings(lambda: got.append(writers["batch"].read(ctx.path("batch-0"))), 1)[0])
        times["plain_read"].append(suite.timings(lambda: got.append(Plain().read(ctx.path("plain-0"))), 1)[0])
        assert got == [(n, n * size)] * 2, got
    for key in writers:
        ctx.fresh(f"{key}-0")
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"size": size, "n": n, "med": med, "spread": suite.spread(times["batch"])}


def run(ctx: suite.Context) -> list[dict]:
    target = (16 << 20) if ctx.quick else TARGET_BYTES
    max_records = 100_000 if ctx.quick else MAX_RECORDS
    sync_limit = ctx.limit("sync_write_gbs")
    ctx.note(f"Per size: min({max_records:,}, {target >> 20} MiB / size) records, each writer with one sync at "
             f"the end (so the ceiling is the machine's write + fdatasync speed, "
             f"{sync_limit or 0:.2f} GB/s in this run), then a full read back into Python objects. "
             f"Medians of {ctx.runs} runs. ns/B = nanoseconds per payload byte; 'per-byte cost vs 100 B' below "
             "1.00x means larger records are cheaper per byte (better than linear).")
    results = []
    for size in SIZES:
        r = measure_size(ctx, size, target, max_records)
        results.append(r)
        m = r["med"]
        print(f"  {size:>6} B x {r['n']:>9,}: append_batch {m['batch'] / r['n'] * 1e9:8.0f} ns/rec, "
              f"append {m['each'] / r['n'] * 1e9:8.0f}, plain {m['plain'] / r['n'] * 1e9:8.0f}, "
              f"records() {m['read'] / r['n'] * 1e9:8.0f}", flush=True)
    ref = next(r for r in results if r["size"] == 100)
    ref_per_byte = ref["med"]["batch"] / (ref["n"] * ref["size"])
    rows = []
    for r in results:
        m, n, size = r["med"], r["n"], r["size"]
        nbytes = n * size
        batch_gbs = nbytes / m["batch"] / 1e9
        per_byte = m["batch"] / nbytes
        rows.append({
            "record size": f"{size:,} B", "records": f"{n:,}",
            "append_batch": f"{m['batch'] / n * 1e9:,.0f} ns/rec, {per_byte * 1e9:.2f} ns/B",
            "GB/s": f"{batch_gbs:.2f}", "of write+sync limit": suite.fraction(batch_gbs, sync_limit),
            "vs plain writer": suite.ratio(m["plain"], m["batch"]),
            "per-byte cost vs 100 B": f"{per_byte / ref_per_byte:.2f}x",
            "append()": f"{m['each'] / n * 1e9:,.0f} ns/rec", "append() vs plain": suite.ratio(m["plain"], m["each"]),
            "records()": f"{m['read'] / n * 1e9:,.0f} ns/rec, {nbytes / m['read'] / 1e9:.2f} GB/s",
            "records() vs plain reader": suite.ratio(m["plain_read"], m["read"]),
            "spread": r["spread"],
            "data": {"size": size, **{k: v / n for k, v in m.items()}},
        })
    first, last = results[0], results[-1]
    grow = (last["med"]["batch"] / last["n"]) / (first["med"]["batch"] / first["n"])
    worst = max((row for row in rows if row["data"]["size"] >= 100),
                key=lambda row: row["data"]["batch"] / row["data"]["size"])
    verdict = ("linear or better" if worst["data"]["batch"] / worst["data"]["size"] <= ref_per_byte * 1.25
               else "WORSE than linear")
    ctx.note(f"From {first['size']} B to {last['size']:,} B records ({last['size'] // first['size']:,}x the bytes) "
             f"append_batch's cost per record grows {grow:,.0f}x. From 100 B up the highest per-byte cost is at "
             f"{worst['record size']}: {worst['per-byte cost vs 100 B']} the 100 B cost, so the cost is {verdict} "
             "(threshold 1.25x for noise).")
    chart(ctx, rows, sync_limit)
    return rows


def chart(ctx: suite.Context, rows: list[dict], sync_limit: float | None) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    d = [r["data"] for r in rows]
    sizes = [x["size"] for x in d]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    series = [("batch", "seglog append_batch", "tab:orange"), ("each", "seglog append()", "tab:red"),
              ("plain", "plain writer (baseline)", "tab:gray"), ("read", "seglog records()", "tab:green"),
              ("plain_read", "plain reader (baseline)", "silver")]
    for key, label, color in series:
        a1.plot(sizes, [x[key] * 1e9 for x in d], "o-", label=label, color=color)
    ref = d[1]
    a1.plot(sizes, [ref["batch"] * 1e9 * s / ref["size"] for s in sizes], ":", color="black",
            label="linear in bytes (from append_batch at 100 B)")
    a1.set_xscale("log")
    a1.set_yscale("log")
    a1.set_xlabel("record size (bytes)")
    a1.set_ylabel("ns per record")
    a1.set_title("cost per record (write includes one sync)", fontsize=10)
    a1.legend(fontsize=8)
    for key, label, color in series:
        a2.plot(sizes, [x["size"] / x[key] / 1e9 for x in d], "o-", label=label, color=color)
    if sync_limit:
        a2.axhline(sync_limit, ls="--", color="black", label="machine: write + fdatasync")
    a2.set_xscale("log")
    a2.set_xlabel("record size (bytes)")
    a2.set_ylabel("GB/s of payload")
    a2.set_title("throughput", fontsize=10)
    a2.legend(fontsize=8)
    fig.tight_layout()
    ctx.chart(fig, "scale_record_size", "Cost per record and throughput vs record size (log scales).")

"""Throughput vs number of partitions: the same records written round-robin over 1 .. 1,000 logs.

Three writers, each over P partition directories/files, one sync of every partition after each:
  - Log.append(v) per record, record i to partition i % P (what a broker does with single-record requests)
  - then, on the same open logs, Log.append_batch(chunk) with chunks of CHUNK records, chunk j to partition j % P
  - the plain Python length-prefixed writer over P files (baseline)
Reported per record: append time (page cache) and, separately, the time to sync all P partitions, plus what
opening and closing a log costs and the memory each open log holds. Medians of ctx.runs runs.
"""

from __future__ import annotations

import os
import resource
import statistics
import struct
import time

from bench import suite

TITLE = "Scaling: number of partitions"
PARTITIONS = [1, 10, 100, 1000]
CHUNK = 100
FDS_PER_LOG = 5            # .lock, .log, .index, .timeindex, plus slack


def raise_fd_limit(needed: int) -> int:
    """Raise the soft open-file limit toward the hard one; returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        want = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        soft = want
    return soft


def seglog_round(ctx: suite.Context, p: int, values: list[bytes]) -> dict:
    """Open P logs; append() every record round-robin, flush all; append_batch chunks round-robin (on the same
    logs); close all (which syncs). Seconds of each step and the anonymous memory the open logs hold."""
    from seglog import Log
    paths = [ctx.fresh(f"logs{p}", f"t-{i}") for i in range(p)]
    anon0 = suite.rss_bytes("RssAnon")
    t = time.perf_counter()
    logs = [Log(path) for path in paths]
    out = {"open": time.perf_counter() - t}
    targets = [logs[i % p].append for i in range(len(values))]
    t = time.perf_counter()
    for f, v in zip(targets, values):
        f(v)
    out["each"] = time.perf_counter() - t
    del targets
    out["anon"] = suite.rss_bytes("RssAnon") - anon0
    t = time.perf_counter()
    for log in logs:
        log.flush()
    out["flush"] = time.perf_counter() - t
    chunks = [values[s:s + CHUNK] for s in range(0, len(values), CHUNK)]
    targets = [logs[j % p].append_batch for j in range(len(chunks))]
    t = time.perf_counter()
    for f, c in zip(targets, chunks):
        f(c)
    out["batch"] = time.perf_counter() - t
    assert sum(log.end_offset for log in logs) == 2 * len(values)
    t = time.perf_counter()
    for log in logs:
        log.close()
    out["close"] = time.perf_counter() - t
    return out


def plain_round(ctx: suite.Context, p: int, values: list[bytes]) -> dict:
    root = ctx.fresh(f"plain{p}")
    os.makedirs(root)
    files = [open(os.path.join(root, f"t-{i}"), "wb") for i in range(p)]
    targets = [files[i % p].write for i in range(len(values))]
    pack = struct.Struct(">I").pack
    t = time.perf_counter()
    for w, v in zip(targets, values):
        w(pack(len(v)))
        w(v)
    t_append = time.perf_counter() - t
    t = time.perf_counter()
    for f in files:
        f.flush()
        os.fsync(f.fileno())
    t_flush = time.perf_counter() - t
    for f in files:
        f.close()
    return {"append": t_append, "flush": t_flush}


def run(ctx: suite.Context) -> list[dict]:
    n = 100_000 if ctx.quick else ctx.records
    values = suite.json_records(n)
    limit = raise_fd_limit(max(PARTITIONS) * FDS_PER_LOG + 256)
    parts = [p for p in PARTITIONS if p * FDS_PER_LOG + 64 <= limit]
    ctx.note(f"{n:,} records of 100 B over P partitions, round-robin; append() sends record i to partition i % P, "
             f"append_batch sends chunk j of {CHUNK} records to partition j % P. 'append' is the time to hand every "
             "record over (page cache), 'sync all' the flush()/fsync of all P partitions after it. The open-file "
             f"limit was raised to {limit} (a log holds 4 descriptors while open). Medians of {ctx.runs} runs."
             + ("" if parts == PARTITIONS else f" Skipped P > {parts[-1]}: the open-file limit is too low."))
    results = []
    for p in sorted(parts, reverse=True):       # the largest first: its memory figure sees a fresh process
        seg_runs, plain_runs = [], []
        for _ in range(ctx.runs):
            seg_runs.append(seglog_round(ctx, p, values))
            plain_runs.append(plain_round(ctx, p, values))
            ctx.fresh(f"logs{p}")
            ctx.fresh(f"plain{p}")
        e = {k: statistics.median(r[k] for r in seg_runs) for k in seg_runs[0]}
        pl = {k: statistics.median(r[k] for r in plain_runs) for k in plain_runs[0]}
        e["anon_first"] = seg_runs[0]["anon"]
        results.append((p, e, pl))
        print(f"  P={p:>5}: append {e['each'] / n * 1e9:6.0f} ns/rec, append_batch {e['batch'] / n * 1e9:6.0f}, "
              f"plain {pl['append'] / n * 1e9:6.0f}; sync all {e['flush'] * 1e3:7.1f} ms "
              f"(plain {pl['flush'] * 1e3:7.1f}); open {e['open'] / p * 1e3:.2f} ms/log, "
              f"close {e['close'] / p * 1e3:.2f} ms/log", flush=True)
    results.sort(key=lambda r: r[0])
    _, one, _ = results[0]
    rows = []
    for p, e, pl in results:
        rows.append({
            "partitions": f"{p:,}",
            "append()": f"{e['each'] / n * 1e9:.0f} ns/rec",
            "append() vs 1 partition": f"{e['each'] / one['each']:.2f}x cost",
            "vs plain writer": suite.ratio(pl["append"], e["each"]),
            "append_batch(100)": f"{e['batch'] / n * 1e9:.0f} ns/rec",
            "append_batch vs 1 partition": f"{e['batch'] / one['batch']:.2f}x cost",
            "plain writer": f"{pl['append'] / n * 1e9:.0f} ns/rec",
            "sync all": f"{e['flush'] * 1e3:.1f} ms",
            "plain fsync all": f"{pl['flush'] * 1e3:.1f} ms",
            "open / log": f"{e['open'] / p * 1e3:.2f} ms",
            "close / log": f"{e['close'] / p * 1e3:.2f} ms",
            "data": {"p": p, "each": e["each"] / n, "batch": e["batch"] / n, "plain": pl["append"] / n,
                     "sync": e["flush"], "plain_sync": pl["flush"]},
        })
    pmax, emax, _ = results[-1]
    ctx.note(f"Memory: {pmax:,} open logs holding their pending batches grew the process's anonymous memory by "
             f"{suite.mb(emax['anon_first'])} ({emax['anon_first'] / pmax / 1024:.0f} KiB per log; measured on the "
             "first run, before any other log was opened in the process).")
    worst = max(rows, key=lambda r: r["data"]["each"])
    ctx.note(f"Per-record append() cost at {parts[-1]:,} partitions is "
             f"{rows[-1]['data']['each'] / rows[0]['data']['each']:.2f}x the cost at 1 partition "
             f"(highest: {worst['append() vs 1 partition']} at {worst['partitions']}); append_batch "
             f"{rows[-1]['data']['batch'] / rows[0]['data']['batch']:.2f}x. Syncing grows with P by construction "
             "(one fsync per partition), for seglog and the plain files alike.")
    chart(ctx, rows)
    return rows


def chart(ctx: suite.Context, rows: list[dict]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    d = [r["data"] for r in rows]
    ps = [x["p"] for x in d]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for key, label, color in [("each", "seglog append() round-robin", "tab:red"),
                              ("batch", f"seglog append_batch({CHUNK}) round-robin", "tab:orange"),
                              ("plain", "plain writer over P files (baseline)", "tab:gray")]:
        a1.plot(ps, [x[key] * 1e9 for x in d], "o-", label=label, color=color)
    a1.set_xscale("log")
    a1.set_ylim(bottom=0)
    a1.set_xlabel("partitions")
    a1.set_ylabel("ns per record (append, page cache)")
    a1.set_title("per-record cost vs partitions (flat = linear in records)", fontsize=10)
    a1.legend(fontsize=8)
    a2.plot(ps, [x["sync"] * 1e3 for x in d], "o-", color="tab:red", label="seglog: flush() every partition")
    a2.plot(ps, [x["plain_sync"] * 1e3 for x in d], "o-", color="tab:gray", label="plain: fsync every file")
    a2.set_xscale("log")
    a2.set_yscale("log")
    a2.set_xlabel("partitions")
    a2.set_ylabel("ms")
    a2.set_title("one sync of all partitions at the end", fontsize=10)
    a2.legend(fontsize=8)
    fig.tight_layout()
    ctx.chart(fig, "scale_partitions", "Per-record append cost and final sync time vs number of partitions.")

"""Throughput vs number of partitions: the same records written round-robin over 1 .. 1,000 logs.

Three writers, each over P partition directories/files opened once per P, each making ctx.runs timed passes
over the same ctx.records records (1M):
  - Log.append(v) per record, record i to partition i % P (what a broker does with single-record requests)
  - then, on the same open logs, Log.append_batch(chunk) with chunks of CHUNK records, chunk j to partition j % P
  - the plain Python length-prefixed writer over P files (baseline)
Reported per record: append time (page cache, medians of the passes) and, separately, the time of one sync of
all P partitions, plus what opening and closing a log costs and the memory each open log holds.
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
GROWTH_FLOOR = 1 / 1.6     # guard: seglog's growth at most 1.6x the plain writer's (the target 1.25x, less the noise)


def raise_fd_limit(needed: int) -> int:
    """Raise the soft open-file limit toward the hard one; returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        want = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        soft = want
    return soft


def seglog_partitions(ctx: suite.Context, p: int, values: list[bytes], runs: int) -> dict:
    """Open P logs once; `runs` times append() every record round-robin; flush all (the sync); `runs` times
    append_batch the chunks round-robin (on the same logs); flush all again; close all. Seconds of each step
    (lists for the timed runs) and the anonymous memory the open logs hold after the first run."""
    from seglog import Log
    paths = [ctx.fresh(f"logs{p}", f"t-{i}") for i in range(p)]
    anon0 = suite.rss_bytes("RssAnon")
    t = time.perf_counter()
    logs = [Log(path) for path in paths]
    out = {"open": time.perf_counter() - t, "each": [], "batch": []}
    anon_targets = suite.rss_bytes("RssAnon")
    targets = [logs[i % p].append for i in range(len(values))]
    anon_targets = suite.rss_bytes("RssAnon") - anon_targets     # the bench's own bound methods, not the logs'
    for r in range(runs):
        t = time.perf_counter()
        for f, v in zip(targets, values):
            f(v)
        out["each"].append(time.perf_counter() - t)
        if r == 0:
            out["anon"] = suite.rss_bytes("RssAnon") - anon0 - anon_targets
    del targets
    t = time.perf_counter()
    for log in logs:
        log.flush()
    out["flush"] = time.perf_counter() - t
    chunks = [values[s:s + CHUNK] for s in range(0, len(values), CHUNK)]
    targets = [logs[j % p].append_batch for j in range(len(chunks))]
    for _ in range(runs):
        t = time.perf_counter()
        for f, c in zip(targets, chunks):
            f(c)
        out["batch"].append(time.perf_counter() - t)
    assert sum(log.end_offset for log in logs) == 2 * runs * len(values)
    t = time.perf_counter()
    for log in logs:
        log.flush()
    out["flush2"] = time.perf_counter() - t
    t = time.perf_counter()
    for log in logs:
        log.close()
    out["close"] = time.perf_counter() - t
    ctx.fresh(f"logs{p}")
    return out


def plain_partitions(ctx: suite.Context, p: int, values: list[bytes], runs: int) -> dict:
    """The plain length-prefixed writer over P files: `runs` timed passes, then one fsync of every file."""
    root = ctx.fresh(f"plain{p}")
    os.makedirs(root)
    files = [open(os.path.join(root, f"t-{i}"), "wb") for i in range(p)]
    targets = [files[i % p].write for i in range(len(values))]
    pack = struct.Struct(">I").pack
    out = {"append": []}
    for _ in range(runs):
        t = time.perf_counter()
        for w, v in zip(targets, values):
            w(pack(len(v)))
            w(v)
        out["append"].append(time.perf_counter() - t)
    t = time.perf_counter()
    for f in files:
        f.flush()
        os.fsync(f.fileno())
    out["flush"] = time.perf_counter() - t
    for f in files:
        f.close()
    ctx.fresh(f"plain{p}")
    return out


def interleaved_growth(ctx: suite.Context, p: int, values: list[bytes], rounds: int) -> dict:
    """append() round-robin over 1 log and over p logs, and the plain writer over 1 file and over p files, all
    open at once, one pass of each per round in turn: {"seglog": [t_p / t_1 per round], "plain": [...]}. The
    same-round ratios keep the machine's load (which moves both by 1.5-2x here) out of the growth figure."""
    from seglog import Log
    logs = {n: [Log(ctx.fresh(f"growth{n}", f"t-{i}")) for i in range(n)] for n in (1, p)}
    root = ctx.fresh("growth-plain")
    os.makedirs(root)
    files = {n: [open(os.path.join(root, f"{n}-{i}"), "wb") for i in range(n)] for n in (1, p)}
    pack = struct.Struct(">I").pack
    out: dict = {"seglog": [], "plain": []}
    try:
        for r in range(rounds + 1):                 # round 0 warms up
            t: dict = {}
            for n in (1, p):
                targets = [logs[n][i % n].append for i in range(len(values))]
                c = time.perf_counter()
                for f, v in zip(targets, values):
                    f(v)
                t[("seglog", n)] = time.perf_counter() - c
                writes = [files[n][i % n].write for i in range(len(values))]
                c = time.perf_counter()
                for w, v in zip(writes, values):
                    w(pack(len(v)))
                    w(v)
                t[("plain", n)] = time.perf_counter() - c
                del targets, writes
            if r:
                for k in ("seglog", "plain"):
                    out[k].append(t[(k, p)] / t[(k, 1)])
    finally:
        for n in (1, p):
            for log in logs[n]:
                log.close()
            for f in files[n]:
                f.close()
        for n in (1, p):
            ctx.fresh(f"growth{n}")
        ctx.fresh("growth-plain")
    return out


def run(ctx: suite.Context) -> list[dict]:
    n = 100_000 if ctx.quick else ctx.records
    values = suite.json_records(n)
    limit = raise_fd_limit((max(PARTITIONS) + 1) * (FDS_PER_LOG + 1) + 256)
    parts = [p for p in PARTITIONS if p * FDS_PER_LOG + 64 <= limit]
    ctx.note(f"{n:,} records of 100 B per run over P partitions, round-robin; append() sends record i to partition "
             f"i % P, append_batch sends chunk j of {CHUNK} records to partition j % P; the plain writer (the "
             "baseline) writes the same records over P files. Per P the logs are opened once and each writer makes "
             f"{ctx.runs} timed passes over the records (medians; the logs grow by every pass). 'append' is the "
             "time to hand every record over (page cache); 'sync all' is one flush() of all P logs after the "
             "append() passes (one fsync per partition), against one fsync of every plain file holding the same "
             "bytes; close / log comes after a second flush, so it measures closing, not syncing. The open-file "
             f"limit was raised to {limit} (a log holds 4 descriptors while open)."
             + ("" if parts == PARTITIONS else f" Skipped P > {parts[-1]}: the open-file limit is too low."))
    results = []
    for p in sorted(parts, reverse=True):       # the largest first: its memory figure sees a fresh process
        seg = seglog_partitions(ctx, p, values, ctx.runs)
        pl = plain_partitions(ctx, p, values, ctx.runs)
        e = {k: statistics.median(v) if isinstance(v, list) else v for k, v in seg.items()}
        e["each_spread"] = suite.spread(seg["each"])
        pl = {"append": statistics.median(pl["append"]), "flush": pl["flush"]}
        results.append((p, e, pl))
        print(f"  P={p:>5}: append {e['each'] / n * 1e9:6.0f} ns/rec, append_batch {e['batch'] / n * 1e9:6.0f}, "
              f"plain {pl['append'] / n * 1e9:6.0f}; sync all {e['flush'] * 1e3:7.1f} ms "
              f"(plain {pl['flush'] * 1e3:7.1f}); open {e['open'] / p * 1e3:.2f} ms/log, "
              f"close {e['close'] / p * 1e3:.2f} ms/log", flush=True)
    results.sort(key=lambda r: r[0])
    _, one, one_plain = results[0]
    rows = []
    for p, e, pl in results:
        rows.append({
            "partitions": f"{p:,}",
            "append()": f"{e['each'] / n * 1e9:.0f} ns/rec",
            "append() vs 1 partition": f"{e['each'] / one['each']:.2f}x cost",
            "append() vs plain writer": suite.ratio(pl["append"], e["each"]),
            "append_batch(100)": f"{e['batch'] / n * 1e9:.0f} ns/rec",
            "append_batch vs 1 partition": f"{e['batch'] / one['batch']:.2f}x cost",
            "append_batch vs plain writer": suite.ratio(pl["append"], e["batch"]),
            "plain writer": f"{pl['append'] / n * 1e9:.0f} ns/rec",
            "plain vs 1 partition": f"{pl['append'] / one_plain['append']:.2f}x cost",
            "sync all": f"{e['flush'] * 1e3:.1f} ms",
            "plain fsync all": f"{pl['flush'] * 1e3:.1f} ms",
            "sync vs plain": suite.ratio(pl["flush"], e["flush"]),
            "open / log": f"{e['open'] / p * 1e3:.2f} ms",
            "close / log": f"{e['close'] / p * 1e3:.2f} ms",
            "append() spread": e["each_spread"],
            "data": {"p": p, "each": e["each"] / n, "batch": e["batch"] / n, "plain": pl["append"] / n,
                     "sync": e["flush"], "plain_sync": pl["flush"]},
        })
    pmax, emax, _ = results[-1]
    ctx.note(f"Memory: {pmax:,} open logs holding their pending batches grew the process's anonymous memory by "
             f"{suite.mb(emax['anon'])} ({emax['anon'] / pmax / 1024:.0f} KiB per log; measured after the first "
             "append() pass, before any other log was opened in the process, less the bench's own list of one "
             "bound append method per record, which earlier runs counted as the logs' (~72 KiB per log at 1,000 "
             "logs)). append()'s pending batch (~16 KiB) is encoded straight into the log's 64 KiB append journal, a "
             "file mapping (not anonymous memory; until the journal's first commit, a writer buffer of its own).")
    worst = max(rows, key=lambda r: r["data"]["each"])
    growth = rows[-1]["data"]["each"] / rows[0]["data"]["each"]
    plain_growth = rows[-1]["data"]["plain"] / rows[0]["data"]["plain"]
    ctx.note(f"Per-record append() cost at {parts[-1]:,} partitions is {growth:.2f}x the cost at 1 partition "
             f"(highest: {worst['append() vs 1 partition']} at {worst['partitions']}; the plain writer's "
             f"{plain_growth:.2f}x); append_batch {rows[-1]['data']['batch'] / rows[0]['data']['batch']:.2f}x. "
             "Syncing grows with P by construction (one fsync per partition), for seglog and the plain files "
             "alike.")
    if len(rows) > 1:
        # linear in records whatever P: the cost per record at the most partitions, relative to the plain writer
        # over as many files (both pay for P open files and cold caches), within noise of the 1-partition ratio;
        # measured again with 1 and P partitions open together and their passes interleaved (same-round ratios)
        pmax = parts[-1]
        rounds = 1 if ctx.quick else max(ctx.runs, 5)
        g = interleaved_growth(ctx, pmax, values[:max(n // 2, 1)], rounds)
        sg, pg = statistics.median(g["seglog"]), statistics.median(g["plain"])
        rel = statistics.median(s / q for s, q in zip(g["seglog"], g["plain"]))
        ctx.note(f"Growth measured interleaved (1 and {pmax:,} logs, 1 and {pmax:,} plain files open together, one "
                 f"pass of {max(n // 2, 1):,} records each in turn, {rounds} rounds after a warm-up): append() "
                 f"costs {sg:.2f}x at {pmax:,} partitions what it costs at 1 (each round: "
                 f"{', '.join(f'{x:.2f}' for x in g['seglog'])}), the plain writer {pg:.2f}x ("
                 f"{', '.join(f'{x:.2f}' for x in g['plain'])}); seglog's growth over the plain writer's, median "
                 f"of the rounds: {rel:.2f}x. The target row uses these figures; the table's come from passes "
                 "measured one partition count after another, minutes apart.")
        met = "yes" if sg <= 1.25 or rel <= 1.25 else "no"
        rows[-1]["summary"] = {
            "figure": f"scaling: append() cost per record at {pmax:,} partitions vs 1 partition",
            "target": "linear or better (<= 1.25x, or <= 1.25x of the plain writer's own growth)",
            "measured": f"{sg:.2f}x (plain writer {pg:.2f}x; {rel:.2f}x its growth; interleaved rounds)",
            "met": met}
        if not ctx.quick:
            rows[-1]["guard"] = {"figure": f"append() growth 1 -> {pmax:,} partitions over the plain writer's "
                                           "(inverse: plain growth / seglog growth)",
                                 "value": round(1 / rel, 3), "floor": GROWTH_FLOOR}
    chart(ctx, rows)
    return rows


def chart(ctx: suite.Context, rows: list[dict]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    d = [r["data"] for r in rows]
    ps = [x["p"] for x in d]
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(16, 4.5))
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
    for key, label, color in [("each", "append() / plain writer", "tab:red"),
                              ("batch", f"append_batch({CHUNK}) / plain writer", "tab:orange")]:
        ratios = [x["plain"] / x[key] for x in d]
        a2.plot(ps, ratios, "o-", label=label, color=color)
        for p, r in zip(ps, ratios):
            a2.annotate(f"{r:.2f}x", (p, r), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7,
                        color=color)
    a2.axhline(1.0, color="tab:gray", ls="--", lw=1, label="plain writer (1.0x)")
    a2.set_xscale("log")
    a2.set_ylim(bottom=0)
    a2.set_xlabel("partitions")
    a2.set_ylabel("speed / plain writer's at the same P")
    a2.set_title("ratio to the baseline of the same run (above 1 = faster)", fontsize=10)
    a2.legend(fontsize=8)
    a3.plot(ps, [x["sync"] * 1e3 for x in d], "o-", color="tab:red", label="seglog: flush() every partition")
    a3.plot(ps, [x["plain_sync"] * 1e3 for x in d], "o-", color="tab:gray", label="plain: fsync every file")
    for x in d:
        a3.annotate(f"{x['plain_sync'] / x['sync']:.2f}x", (x["p"], x["sync"] * 1e3), textcoords="offset points",
                    xytext=(0, 6), ha="center", fontsize=7, color="tab:red")
    a3.set_xscale("log")
    a3.set_yscale("log")
    a3.set_xlabel("partitions")
    a3.set_ylabel("ms")
    a3.set_title("one sync of all partitions (labels: plain time / seglog time)", fontsize=10)
    a3.legend(fontsize=8)
    fig.tight_layout()
    ctx.chart(fig, "scale_partitions", "Per-record append cost vs number of partitions, the same costs as ratios to "
                                       "the plain writer over as many files, and the final sync of all partitions.")

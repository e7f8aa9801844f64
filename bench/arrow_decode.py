"""The Spark reader's decode path outside Spark, stage by stage (what seglog adds to each row Spark reads).

    python -m bench.arrow_decode [--records 10000000] [--partitions 6] [--runs 3] [--codecs none,lz4] [--dir D]

Data: as bench.spark_source writes it (100-byte JSON-like values, no keys, Log.append_batch), once per codec.
Each run reads every partition the way seglog.spark.arrow_reader.read_split does (Log.read_next chunks of
CHUNK_BYTES, _engine.arrow_columns cut at BATCH_BYTES of output, BatchBuilder.build) and charges each stage
this thread's CPU time, so other processes' load inflates the figures little; wall time is given too.
Medians of --runs runs after a warm-up.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

from bench.spark_source import TOPIC, make_data

STAGES = ("read", "decode", "build")


def one_run(data: str, partitions: int) -> dict:
    """CPU seconds per stage, wall seconds and rows of one pass over every partition."""
    from seglog import Log, _engine
    from seglog.spark.arrow_reader import BATCH_BYTES, CHUNK_BYTES, BatchBuilder, arrow_schema

    cpu = dict.fromkeys(STAGES, 0.0)
    rows = batches = 0
    wall = time.perf_counter()
    for p in range(partitions):
        build = BatchBuilder(TOPIC, p, arrow_schema(False)).build
        with Log(os.path.join(data, f"{TOPIC}-{p}"), readonly=True) as lg:
            offset = lg.start_offset
            while True:
                t = time.thread_time()
                view, next_offset = lg.read_next(offset, CHUNK_BYTES)
                cpu["read"] += time.thread_time() - t
                if next_offset < 0:
                    break
                chunk, pos = memoryview(view), 0
                while pos < len(chunk):
                    t = time.thread_time()
                    cols = _engine.arrow_columns(chunk[pos:], max_output_bytes=BATCH_BYTES)
                    t2 = time.thread_time()
                    batch = build(cols)
                    cpu["decode"] += t2 - t
                    cpu["build"] += time.thread_time() - t2
                    rows += batch.num_rows
                    batches += 1
                    if cols["consumed"] == 0:
                        break
                    pos += cols["consumed"]
                    del batch, cols
                del chunk, view
                offset = next_offset
    return {"cpu": cpu, "wall": time.perf_counter() - wall, "rows": rows, "batches": batches}


def measure(root: str, records: int, partitions: int, runs: int, codecs: list[str], say=print) -> list[dict]:
    out = []
    for codec in codecs:
        t = time.perf_counter()
        data = make_data(root, records, partitions, None if codec == "none" else codec)
        say(f"{codec}: wrote {records:,} records in {time.perf_counter() - t:.1f} s")
        one_run(data, partitions)                                   # warm-up: page cache, scratch pool
        done = [one_run(data, partitions) for _ in range(runs)]
        rows = done[0]["rows"]
        row = {"codec": codec, "rows": f"{rows:,}", "RecordBatches": f"{done[0]['batches']:,}"}
        total = [sum(d["cpu"].values()) for d in done]
        for stage in STAGES:
            row[f"{stage} (CPU ns/row)"] = f"{statistics.median(d['cpu'][stage] for d in done) / rows * 1e9:.1f}"
        row["total (CPU ns/row)"] = f"{statistics.median(total) / rows * 1e9:.1f}"
        wall = statistics.median(d["wall"] for d in done)
        row["wall"] = f"{rows / wall / 1e6:.1f} M rows/s ({wall:.2f} s; {min(d['wall'] for d in done):.2f}-" \
                      f"{max(d['wall'] for d in done):.2f})"
        say("  " + "  ".join(f"{k} {v}" for k, v in row.items()))
        out.append(row)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--codecs", default="none,lz4", help="comma-separated: none, gzip, snappy, lz4, zstd")
    ap.add_argument("--dir", default=None, help="scratch directory (default: a fresh temporary one, removed after)")
    args = ap.parse_args(argv)
    root = args.dir or tempfile.mkdtemp(prefix="seglog-arrow-decode-")
    try:
        rows = measure(root, args.records, args.partitions, args.runs, args.codecs.split(","))
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    cols = list(rows[0])
    print()
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(r[c] for c in cols) + " |")
    print(f"\nload average at the end: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

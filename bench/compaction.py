"""Log compaction speed: one pass of Log.compact() over a compacted log, in MB/s of segment bytes read.

    python -m bench.compaction [--records 400000] [--keys 20000] [--value-bytes 100] [--runs 3]
                               [--codec none|gzip|lz4|zstd|snappy] [--dir /tmp/seglog-compaction]

The log holds ``records`` keyed records (``keys`` distinct keys, uniformly drawn, 1 in 50 a tombstone) in
batches of 50 records, in 4 MiB segments, with a high watermark at its end. Each run copies that directory and
times one pass (``CleanResult.seconds``: offset map, filtering and re-encoding, segment writes and swaps), so
every run compacts the same bytes. Printed: per run MB/s (bytes_in / seconds) and the median, with the records
kept and the output size, as JSON on the last line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile

from seglog import Log, LogConfig

T0 = 1_700_000_000_000


def build(path: str, records: int, keys: int, value_bytes: int, codec: str | None, seed: int = 7) -> None:
    """The source log (see the module docstring)."""
    rng = random.Random(seed)
    cfg = LogConfig.from_kafka({"cleanup.policy": "compact", "segment.bytes": str(4 << 20),
                                "min.cleanable.dirty.ratio": "0.01"})
    value = b"v" * value_bytes
    with Log(path, cfg) as log:
        for start in range(0, records, 50):
            n = min(50, records - start)
            ks = [b"key-%08d" % rng.randrange(keys) for _ in range(n)]
            vals = [None if rng.random() < 0.02 else value for _ in range(n)]
            log.append_batch(vals, keys=ks, timestamps=[T0 + start + i for i in range(n)], compression=codec)
        log.roll()
        log.high_watermark = log.end_offset


def run_once(src: str, scratch: str) -> dict:
    """Copy the source log and compact the copy once; the pass's figures."""
    work = os.path.join(scratch, "run-0")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(src, work)
    os.unlink(os.path.join(work, ".lock"))
    with Log(work, LogConfig.from_kafka({"cleanup.policy": "compact", "segment.bytes": str(4 << 20)})) as log:
        res = log.compact(now_ms=T0 + 10 ** 9)
    shutil.rmtree(work, ignore_errors=True)
    return {"bytes_in": res.bytes_in, "bytes_out": res.bytes_out, "seconds": res.seconds,
            "records_read": res.records_read, "records_kept": res.records_kept,
            "mb_s": res.bytes_in / 1e6 / res.seconds if res.seconds else 0.0}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m bench.compaction", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=400_000)
    p.add_argument("--keys", type=int, default=20_000)
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--codec", default="none")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--dir", default=None, help="scratch directory (default: a temporary one)")
    args = p.parse_args(argv)
    scratch = args.dir or tempfile.mkdtemp(prefix="seglog-compaction-")
    os.makedirs(scratch, exist_ok=True)
    src = os.path.join(scratch, "source-0")
    shutil.rmtree(src, ignore_errors=True)
    try:
        build(src, args.records, args.keys, args.value_bytes, None if args.codec == "none" else args.codec)
        runs = [run_once(src, scratch) for _ in range(args.runs)]
    finally:
        if args.dir is None:
            shutil.rmtree(scratch, ignore_errors=True)
    for r in runs:
        print(f"{r['bytes_in'] / 1e6:8.1f} MB in {r['seconds']:.3f} s: {r['mb_s']:7.1f} MB/s "
              f"({r['records_kept']} of {r['records_read']} records kept, {r['bytes_out'] / 1e6:.1f} MB out)")
    out = {"codec": args.codec, "records": args.records, "keys": args.keys,
           "median_mb_s": statistics.median(r["mb_s"] for r in runs), "runs": runs}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()

"""`seglog demo`: append and read back a million records on a local data dir; print the throughput."""

from __future__ import annotations

import os
import shutil
import time

from .. import __version__
from .common import positive


def register(sub) -> None:
    d = sub.add_parser("demo", help="append and read back a million records on a local data dir",
                       description=cmd_demo.__doc__)
    d.add_argument("--data-dir", default="seglog-demo", help="where the demo partitions go (default ./seglog-demo)")
    d.add_argument("--records", type=positive, default=1_000_000, help="records to write (default 1,000,000)")
    d.add_argument("--size", type=positive, default=100, help="bytes per record value (default 100)")
    d.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    d.add_argument("--segment-mb", type=positive, default=1024, help="segment.bytes in MiB (default 1024)")
    d.add_argument("--keep", action="store_true", help="keep the demo partitions afterwards")
    d.set_defaults(func=cmd_demo)


def _fmt_rate(n: float, seconds: float, unit: str = "rec/s") -> str:
    rate = n / seconds if seconds > 0 else float("inf")
    return f"{rate / 1e6:8.2f} M {unit}"


def cmd_demo(args) -> int:
    """Append `--records` JSON-like records of `--size` bytes to one partition log with append_batch and with
    per-record append(), fsync, read them back, reopen (clean and after a simulated crash), and verify."""
    from .. import Log, LogConfig, _engine

    n, size = args.records, args.size
    base = os.path.join(args.data_dir, "demo-0")
    per_record = os.path.join(args.data_dir, "demo-1")
    for d in (base, per_record):
        if os.path.isdir(d):
            shutil.rmtree(d)
    os.makedirs(args.data_dir, exist_ok=True)
    pad = b" " * size
    values = [(b'{"id":%d,"user":"u%05d","event":"click","ts":%d}' % (i, i % 99_991, 1_700_000_000_000 + i)
               + pad)[:size] for i in range(n)]
    cfg = LogConfig(segment_bytes=args.segment_mb << 20)
    print(f"seglog {__version__} demo: {n:,} records of {size} B into {os.path.abspath(args.data_dir)} "
          f"(segments of {args.segment_mb} MiB, compression {args.compression})")

    t = time.perf_counter()
    with Log(base, cfg) as log:
        log.append_batch(values, compression=args.compression)
        log.flush()
        segments = log.segment_count
        disk = log.size_bytes
    t_batch = time.perf_counter() - t
    print(f"  append_batch + fsync   {_fmt_rate(n, t_batch)}   {disk / t_batch / 1e9:6.2f} GB/s   "
          f"{segments} segments, {disk / 1e6:.0f} MB")

    t = time.perf_counter()
    with Log(per_record, cfg) as log:
        append = log.append
        for v in values:
            append(v)
        log.flush()
    t_rec = time.perf_counter() - t
    print(f"  append() per record    {_fmt_rate(n, t_rec)}")

    t = time.perf_counter()
    with Log(base, cfg) as log:
        opened = time.perf_counter() - t
        t = time.perf_counter()
        count = 0
        checksum = 0
        for r in log.records():
            count += 1
            checksum ^= hash(r.value)
        t_read = time.perf_counter() - t
        t = time.perf_counter()
        scanned = 0
        for seg_base in log.segment_bases:
            view = log.read(seg_base, 1 << 62)
            scanned += len(_engine.batches(view))          # every batch header walked, every CRC checked
        t_scan = time.perf_counter() - t
    expected = 0
    for v in values:
        expected ^= hash(v)
    ok = count == n and checksum == expected
    print(f"  records() into Python  {_fmt_rate(n, t_read)}   (clean reopen took {opened * 1e3:.1f} ms)")
    print(f"  CRC-checked scan       {disk / t_scan / 1e9:8.2f} GB/s   {scanned} batches")

    os.remove(os.path.join(base, ".clean-shutdown"))        # pretend the writer died: full recovery scan
    with open(os.path.join(base, "log-state-checkpoint"), "w") as f:
        f.write("0\n0\n")
    t = time.perf_counter()
    with Log(base, cfg) as log:
        t_rec_open = time.perf_counter() - t
        recovered = log.end_offset
    print(f"  crash recovery scan    {disk / t_rec_open / 1e9:8.2f} GB/s   {recovered:,} records recovered")
    print("  verified: every record read back once, byte for byte" if ok and recovered == n
          else f"  VERIFICATION FAILED: read {count} records, recovered {recovered}")
    if not args.keep:
        shutil.rmtree(base)
        shutil.rmtree(per_record)
    return 0 if ok and recovered == n else 1

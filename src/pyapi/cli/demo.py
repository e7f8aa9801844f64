"""`seglog demo` and `seglog dump-log`.

    seglog demo        append and read back a million records on a local data dir; print the throughput
    seglog dump-log    every batch and record of segment files, like kafka-dump-log.sh
"""

from __future__ import annotations

import os
import shutil
import sys
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

    dl = sub.add_parser("dump-log", help="print the batches and records of segment files",
                        description=cmd_dump_log.__doc__)
    dl.add_argument("files", nargs="*", metavar="FILE.log")
    dl.add_argument("--files", dest="more_files", nargs="+", default=[], metavar="FILE.log",
                    help="the same, spelled as kafka-dump-log.sh spells it")
    dl.add_argument("--print-records", "--deep-iteration", action="store_true", help="print every record")
    dl.add_argument("--print-payload", action="store_true", help="print keys and values (implies --print-records)")
    dl.set_defaults(func=cmd_dump_log)


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


def cmd_dump_log(args) -> int:
    """Print every batch (and with --print-records every record) of .log files, like kafka-dump-log.sh."""
    from .. import _engine
    if args.print_payload:
        args.print_records = True
    status = 0
    paths = args.files + args.more_files
    if not paths:
        print("seglog dump-log: give at least one FILE.log", file=sys.stderr)
        return 2
    for path in paths:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            print(f"{path}: {e.strerror}", file=sys.stderr)
            status = 1
            continue
        print(f"Dumping {path}")
        pos = 0
        while pos < len(data):
            try:
                infos = _engine.batches(memoryview(data)[pos:], path=path)
            except Exception as e:                 # a corrupt batch: report it and stop this file
                print(f"corrupt batch at position {pos}: {e}")
                status = 2
                break
            if not infos:
                if pos < len(data):
                    print(f"{len(data) - pos} trailing bytes at position {pos} do not form a whole batch")
                    status = 2
                break
            for b in infos:
                _print_batch(b, pos + b.position, memoryview(data)[pos + b.position:pos + b.position + b.size],
                             args, path)
            pos += infos[-1].position + infos[-1].size
    return status


def _print_batch(b, position, raw, args, path) -> None:
    from .. import _engine
    last_seq = b.base_sequence + b.records_count - 1 if b.base_sequence >= 0 else -1
    fields = {"baseOffset": b.base_offset, "lastOffset": b.last_offset, "count": b.records_count,
              "baseSequence": b.base_sequence, "lastSequence": last_seq, "producerId": b.producer_id,
              "producerEpoch": b.producer_epoch, "partitionLeaderEpoch": b.leader_epoch,
              "isTransactional": b.is_transactional, "isControl": b.is_control, "position": position,
              ("LogAppendTime" if b.timestamp_type else "CreateTime"): b.max_timestamp, "size": b.size,
              "magic": b.magic, "compresscodec": b.compression.upper(), "crc": b.crc, "isvalid": True}
    print(" ".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}" for k, v in fields.items()))
    if args.print_records:
        for r in _engine.decode_records(raw, path=path):
            line = (f"| offset: {r.offset} {'LogAppendTime' if r.timestamp_type else 'CreateTime'}: {r.timestamp} "
                    f"keySize: {-1 if r.key is None else len(r.key)} "
                    f"valueSize: {-1 if r.value is None else len(r.value)} "
                    f"headerKeys: [{','.join(k for k, _ in r.headers)}]")
            if args.print_payload:
                line += f" key: {_show(r.key)} payload: {_show(r.value)}"
            print(line)


def _show(b) -> str:
    if b is None:
        return "null"
    return b.decode("utf-8", "backslashreplace")

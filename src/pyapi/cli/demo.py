"""`seglog demo`: append and read back a million records on a local data dir; print the throughput.

The demo writes only into a directory of its own (default ./seglog-demo): a new or empty directory, which it
marks with DEMO_MARKER, or its own earlier output (--keep). Anything else, such as a seglog data directory
(a broker's, or one holding a topic called ``demo``), is refused before anything is written, and a directory a
running broker holds is refused as in use. While it runs it holds the directory's lock as every data-dir
command does. Without --keep it removes everything it wrote, including the directory if it made it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time

from .. import __version__
from ..errors import StorageError
from .common import CliError, positive

DEMO_MARKER = ".seglog-demo"
"""The file that marks a directory as the demo's own output."""
DEMO_PARTITIONS = ("demo-0", "demo-1")
LOCK_FILE = ".lock"


def register(sub) -> None:
    d = sub.add_parser("demo", help="append and read back a million records on a local data dir",
                       description=cmd_demo.__doc__)
    d.add_argument("--data-dir", default="seglog-demo",
                   help="a new or empty directory for the demo's partitions, or its own earlier output "
                        "(default ./seglog-demo; removed afterwards unless --keep)")
    d.add_argument("--records", type=positive, default=1_000_000, help="records to write (default 1,000,000)")
    d.add_argument("--size", type=positive, default=100, help="bytes per record value (default 100)")
    d.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    d.add_argument("--segment-mb", type=positive, default=1024, help="segment.bytes in MiB (default 1024)")
    d.add_argument("--keep", action="store_true", help="keep the demo partitions afterwards")
    d.set_defaults(func=cmd_demo)


@contextlib.contextmanager
def _demo_dir(path: str, keep: bool):
    """Claim `path` for the demo (see the module docstring), hold its lock while the demo runs, and remove
    what the demo wrote afterwards unless `keep` (the directory too, when it was new or the demo's own)."""
    created = not os.path.exists(path)
    ours = created
    if not created:
        if not os.path.isdir(path):
            raise CliError(f"{path} exists and is not a directory: pick another --data-dir")
        _check_not_in_use(path)
        entries = set(os.listdir(path))
        ours = DEMO_MARKER in entries
        if entries and not ours:
            raise CliError(f"{path} is not empty and is not the demo's own output (it holds "
                           f"{', '.join(sorted(entries)[:5])}{' ...' if len(entries) > 5 else ''}): the demo "
                           f"writes only into a new or empty directory; pick another --data-dir")
    try:
        os.makedirs(path, exist_ok=True)
        fd = os.open(os.path.join(path, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise StorageError(f"cannot use the demo directory: {e.strerror}", path) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise _in_use(path) from None
        with open(os.path.join(path, DEMO_MARKER), "w") as f:
            f.write("written by `seglog demo`: this directory holds only its partitions and may be deleted\n")
        for name in DEMO_PARTITIONS:                  # the demo's own leftovers from an earlier run
            shutil.rmtree(os.path.join(path, name), ignore_errors=True)
        yield
    finally:
        if not keep:
            for name in DEMO_PARTITIONS:
                shutil.rmtree(os.path.join(path, name), ignore_errors=True)
            for name in (DEMO_MARKER, LOCK_FILE):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(path, name))
        os.close(fd)
        if not keep and ours:
            with contextlib.suppress(OSError):
                os.rmdir(path)                        # only if empty (nothing else was put there meanwhile)


def _in_use(path: str) -> StorageError:
    return StorageError("data directory is in use by another process (a running broker?); use "
                        "--bootstrap-server to reach it, and another --data-dir for the demo", path)


def _check_not_in_use(path: str) -> None:
    """Refuse a directory whose lock another process holds (without creating a lock file there)."""
    try:
        fd = os.open(os.path.join(path, LOCK_FILE), os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    except OSError:
        return                                        # unreadable: the checks that follow report the directory
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        raise _in_use(path) from None
    finally:
        os.close(fd)


def _fmt_rate(n: float, seconds: float, unit: str = "rec/s") -> str:
    rate = n / seconds if seconds > 0 else float("inf")
    return f"{rate / 1e6:8.2f} M {unit}"


def cmd_demo(args) -> int:
    """Append `--records` JSON-like records of `--size` bytes to one partition log with append_batch and with
    per-record append(), fsync, read them back, reopen (clean and after a simulated crash), and verify. The
    demo writes only into a new or empty --data-dir (or its own earlier output) and removes what it wrote
    unless --keep; a seglog data directory or any other non-empty directory is refused, untouched."""
    from .. import Log, LogConfig, _engine

    n, size = args.records, args.size
    with _demo_dir(args.data_dir, args.keep):
        status = _run(args, Log, LogConfig, _engine, n, size)
    print(f"  kept in {os.path.abspath(args.data_dir)}" if args.keep
          else "  the demo's files are removed (--keep keeps them)")
    return status


def _run(args, Log, LogConfig, _engine, n: int, size: int) -> int:
    base = os.path.join(args.data_dir, DEMO_PARTITIONS[0])
    per_record = os.path.join(args.data_dir, DEMO_PARTITIONS[1])
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
    return 0 if ok and recovered == n else 1

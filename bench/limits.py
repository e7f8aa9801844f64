"""What this machine can do at best, measured in the same run: the ceilings the seglog figures are read
against (sequential write to the page cache and to disk, cached read, memcpy, CRC-32C, the Python per-record
loop). Each function returns a median over `runs` runs after one untimed warm-up.

    python -m bench.limits [--runs 3] [--dir /tmp/seglog-limits]
"""

from __future__ import annotations

import argparse
import os

from bench import suite

TITLE = "Machine limits (same run)"

WRITE_BYTES = 1 << 30            # page-cache write / cached read: 1 GiB in 8 MiB calls
CHUNK = 8 << 20
SYNC_BYTES = 128 << 20           # written then fdatasync'ed: what the disk takes (the size of 1M x 100 B)


def _write_file(path: str, buf: bytes, total: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for _ in range(total // len(buf)):
            os.write(fd, buf)
    finally:
        os.close(fd)


def seq_write_gbs(path: str, runs: int, total: int = WRITE_BYTES) -> float:
    """Sequential write into the page cache (no sync), to a new file each run."""
    buf = os.urandom(CHUNK)

    def unlink():
        if os.path.exists(path):
            os.remove(path)
    t = suite.median_time(lambda: _write_file(path, buf, total), runs, unlink, warmup=1)
    unlink()
    return total / t / 1e9


def sync_write_gbs(path: str, runs: int, total: int = SYNC_BYTES) -> float:
    """Sequential write followed by one fdatasync: the disk's sustained write speed."""
    buf = os.urandom(CHUNK)

    def write_sync():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for _ in range(total // len(buf)):
                os.write(fd, buf)
            os.fdatasync(fd)
        finally:
            os.close(fd)

    def unlink():
        if os.path.exists(path):
            os.remove(path)
    t = suite.median_time(write_sync, runs, unlink, warmup=0)
    unlink()
    return total / t / 1e9


def cached_read_gbs(path: str, runs: int, total: int = WRITE_BYTES) -> float:
    """Sequential read of a file that is in the page cache, into one reused buffer."""
    _write_file(path, os.urandom(CHUNK), total)
    buf = bytearray(CHUNK)

    def read():
        with open(path, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass
    t = suite.median_time(read, runs, warmup=1)
    os.remove(path)
    return total / t / 1e9


def memcpy_gbs(runs: int, size: int = 256 << 20) -> float:
    """Copy between two preallocated buffers (memoryview slice assignment is one memcpy)."""
    src = os.urandom(size)
    dst = memoryview(bytearray(size))

    def copy():
        dst[:] = src
    return size / suite.median_time(copy, runs, warmup=1) / 1e9


def crc32c_gbs(runs: int, size: int = 64 << 20) -> float:
    """The engine's CRC-32C over one large buffer (hardware instruction where the CPU has it)."""
    from seglog import _engine
    buf = os.urandom(size)
    return size / suite.median_time(lambda: _engine.crc32c(buf), runs, warmup=1) / 1e9


def crc32c_call_ns(runs: int, calls: int = 200_000) -> float:
    """One crc32c call on 100 bytes from Python: the per-call floor of any per-record C function."""
    from seglog import _engine
    data = os.urandom(100)
    f = _engine.crc32c

    def loop():
        for _ in range(calls):
            f(data)
    return suite.median_time(loop, runs, warmup=1) / calls * 1e9


def python_loop_ns(runs: int, n: int = 1_000_000) -> tuple[float, float]:
    """(a bare `for v in values` loop, a loop calling one builtin per value) in ns per record."""
    values = [b"x"] * n

    def bare():
        for _v in values:
            pass

    def call():
        f = len
        for v in values:
            f(v)
    return (suite.median_time(bare, runs, warmup=1) / n * 1e9,
            suite.median_time(call, runs, warmup=1) / n * 1e9)


def measure(scratch: str, runs: int, quick: bool = False) -> dict:
    """Every limit, by key (the keys sections use with ctx.limit())."""
    os.makedirs(scratch, exist_ok=True)
    path = os.path.join(scratch, "limits.bin")
    total = (128 << 20) if quick else WRITE_BYTES
    loop_ns, call_ns = python_loop_ns(runs)
    return {
        "seq_write_gbs": seq_write_gbs(path, runs, total),
        "sync_write_gbs": sync_write_gbs(path, runs, (32 << 20) if quick else SYNC_BYTES),
        "read_gbs": cached_read_gbs(path, runs, total),
        "memcpy_gbs": memcpy_gbs(runs),
        "crc32c_gbs": crc32c_gbs(runs),
        "crc32c_call_ns": crc32c_call_ns(runs),
        "loop_ns": loop_ns,
        "call_ns": call_ns,
    }


DESCRIPTIONS = {
    "seq_write_gbs": ("sequential write to the page cache (1 GiB in 8 MiB writes, new file)", "GB/s"),
    "sync_write_gbs": ("sequential write + one fdatasync (128 MiB): the disk", "GB/s"),
    "read_gbs": ("sequential read of a cached 1 GiB file (8 MiB reads)", "GB/s"),
    "memcpy_gbs": ("memcpy of 256 MiB", "GB/s"),
    "crc32c_gbs": ("CRC-32C of a 64 MiB buffer (seglog._engine.crc32c)", "GB/s"),
    "crc32c_call_ns": ("one crc32c() call on 100 B from Python", "ns"),
    "loop_ns": ("Python `for v in values: pass`, per record", "ns"),
    "call_ns": ("Python loop calling one builtin per record", "ns"),
}


def run(ctx: suite.Context) -> list[dict]:
    limits = measure(ctx.dir, ctx.runs, ctx.quick)
    rows = []
    for key, value in limits.items():
        what, unit = DESCRIPTIONS[key]
        figure = f"{value:.2f} {unit}" if unit == "GB/s" else f"{value:.0f} {unit}"
        rows.append({"limit": what, "median": figure, "key": key, "data": {"key": key, "value": value}})
        print(f"  {what:<72} {figure:>12}", flush=True)
    ctx.note("The ceilings every other section is read against, measured at the start of the same run. "
             "`key` is the name sections use for the limit.")
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--dir", default="/tmp/seglog-limits")
    a = p.parse_args(argv)
    for key, value in measure(a.dir, a.runs).items():
        what, unit = DESCRIPTIONS[key]
        print(f"{what:<72} {value:8.2f} {unit}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

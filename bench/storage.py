"""Storage engine figures, each next to a baseline measured in the same run (medians of --runs runs).

    python -m bench.storage [--records 1000000] [--runs 5] [--dir /tmp/seglog-bench] [--recovery-gib 1]

Records are 100-byte JSON-like values, written to the page cache with one fsync at the end.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import struct
import time
import tracemalloc

from seglog import Log, LogConfig, _engine


def json_records(n: int, size: int = 100) -> list[bytes]:
    rnd = random.Random(7)
    events = ("click", "view", "buy", "scroll")
    out = []
    for i in range(n):
        v = b'{"id":%d,"user":"u%05d","event":"%s","ts":%d,"v":' % (
            i, rnd.randrange(100_000), events[i & 3].encode(), 1_700_000_000_000 + i)
        out.append((v + b'"' + b"x" * size)[:size - 2] + b'"}')
    return out


def median_time(fn, runs: int, setup=None) -> float:
    times = []
    for _ in range(runs):
        if setup:
            setup()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


class Bench:
    def __init__(self, root: str, n: int, runs: int):
        self.root, self.n, self.runs = root, n, runs
        self.values = json_records(n)
        self.rows: list[tuple[str, str, str]] = []

    def path(self, name: str) -> str:
        return os.path.join(self.root, name)

    def fresh(self, name: str) -> None:
        p = self.path(name)
        if os.path.isdir(p):
            shutil.rmtree(p)
        elif os.path.exists(p):
            os.remove(p)

    def row(self, what: str, figure: str, vs: str = "") -> None:
        self.rows.append((what, figure, vs))
        print(f"  {what:<44} {figure:>18}   {vs}")

    # -- baselines ----------------------------------------------------------------------------------------
    def plain_writer(self) -> float:
        path = self.path("plain.bin")

        def run():
            pack = struct.Struct(">I").pack
            with open(path, "wb") as f:
                w = f.write
                for v in self.values:
                    w(pack(len(v)))
                    w(v)
                f.flush()
                os.fsync(f.fileno())
        return median_time(run, self.runs, lambda: self.fresh("plain.bin"))

    def lmdb_writer(self) -> float | None:
        try:
            import lmdb
        except ImportError:
            return None
        path = self.path("lmdb")

        def run():
            env = lmdb.open(path, map_size=4 << 30, sync=False, metasync=False, writemap=False)
            with env.begin(write=True) as txn:
                put = txn.put
                for i, v in enumerate(self.values):
                    put(i.to_bytes(8, "big"), v, append=True)
            env.sync(True)
            env.close()
        return median_time(run, self.runs, lambda: self.fresh("lmdb"))

    # -- seglog -------------------------------------------------------------------------------------------------
    def append_batch(self) -> float:
        def run():
            with Log(self.path("batch-0")) as log:
                log.append_batch(self.values)
                log.flush()
        return median_time(run, self.runs, lambda: self.fresh("batch-0"))

    def append_each(self) -> float:
        def run():
            with Log(self.path("each-0")) as log:
                append = log.append
                for v in self.values:
                    append(v)
                log.flush()
        return median_time(run, self.runs, lambda: self.fresh("each-0"))

    def scan(self) -> tuple[float, float, int]:
        """Full scan of the batch-0 log: (records() seconds, CRC-checked batch scan seconds, bytes)."""
        path = self.path("batch-0")
        with Log(path) as log:
            size = log.size_bytes

            def records():
                for _ in log.records():
                    pass
            t_records = median_time(records, self.runs)

        def crc_scan():
            # a fresh open verifies nothing yet: every read below CRC-checks its batches once
            with Log(path) as fresh:
                offset, end = fresh.start_offset, fresh.end_offset
                while offset < end:
                    view = fresh.read(offset, 8 << 20)
                    last = _engine.batches(view, False)[-1]     # header walk; CRCs were checked by read()
                    offset = last.next_offset
        return t_records, median_time(crc_scan, self.runs), size

    def zero_copy(self) -> tuple[bool, int, int]:
        """(view points into the mapping, bytes allocated by a 1 MiB read, bytes returned)."""
        with Log(self.path("batch-0")) as log:
            seg = log._segment_object(0)
            pos = seg.find_position(self.n // 2)
            log.read(self.n // 2, 1 << 20)          # warm: mapping created
            tracemalloc.start()
            view = log.read(self.n // 2, 1 << 20)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            inside = _engine.view_address(view) == seg.mapping.address + pos
            return inside, peak, len(view)

    def lookup(self, entries: int = 1_000_000) -> tuple[float, float]:
        """(index lookup seconds, find_position seconds) on a segment with `entries` index entries."""
        path = self.path("lookup-0")
        self.fresh("lookup-0")
        os.makedirs(path)
        w = _engine.BatchWriter(batch_records=1)
        w.add_many([b"v"] * (entries + 1))
        seg = _engine.Segment(path, 0, index_interval_bytes=0, max_index_bytes=(entries + 8) * 12, create=True)
        seg.activate(1 << 30)
        seg.append(w.take())
        idx = seg.offset_index
        assert idx.entries == entries
        targets = [random.randrange(entries) for _ in range(200_000)]

        def lookups():
            lk = idx.lookup
            for t in targets:
                lk(t)

        def finds():
            fp = seg.find_position
            for t in targets:
                fp(t)
        t_lookup = median_time(lookups, self.runs) / len(targets)
        t_find = median_time(finds, self.runs) / len(targets)
        seg.close()
        return t_lookup, t_find

    def recovery(self, gib: float) -> tuple[float, int]:
        """(seconds to reopen after a crash with the whole log to rescan, bytes)."""
        path = self.path("recover-0")
        self.fresh("recover-0")
        chunk = self.values[:200_000]
        with Log(path) as log:
            while log.size_bytes < gib * (1 << 30):
                log.append_batch(chunk)
            size = log.size_bytes

        def crash_state():
            for f in (".clean-shutdown", "log-state-checkpoint"):
                if os.path.exists(os.path.join(path, f)):
                    os.remove(os.path.join(path, f))

        def reopen():
            with Log(path) as log:
                assert log.recovery.bytes_scanned == size
        t = median_time(reopen, self.runs, crash_state)
        return t, size

    def physical(self) -> tuple[float, float]:
        """Same-run machine limits: (page-cache sequential write GB/s, CRC-32C GB/s on 64 MiB)."""
        buf = os.urandom(64 << 20)
        path = self.path("raw.bin")

        def write():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            for _ in range(4):
                os.write(fd, buf)
            os.close(fd)
        t_write = median_time(write, self.runs)
        t_crc = median_time(lambda: _engine.crc32c(buf), self.runs)
        os.remove(path)
        return 4 * len(buf) / t_write / 1e9, len(buf) / t_crc / 1e9


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--dir", default="/tmp/seglog-bench")
    p.add_argument("--recovery-gib", type=float, default=1.0)
    a = p.parse_args(argv)
    os.makedirs(a.dir, exist_ok=True)
    b = Bench(a.dir, a.records, a.runs)
    n = a.records
    mrec = lambda t: f"{n / t / 1e6:.2f} M rec/s"  # noqa: E731
    print(f"seglog storage benchmark: {n:,} records of 100 B, median of {a.runs} runs, in {a.dir}")
    write_gbs, crc_gbs = b.physical()
    b.row("machine: page-cache sequential write", f"{write_gbs:.2f} GB/s")
    b.row("machine: CRC-32C of 64 MiB", f"{crc_gbs:.1f} GB/s")
    t_plain = b.plain_writer()
    b.row("baseline: Python length-prefixed writer", mrec(t_plain))
    t_lmdb = b.lmdb_writer()
    if t_lmdb:
        b.row("baseline: lmdb put(append=True), one txn", mrec(t_lmdb))
    t_batch = b.append_batch()
    vs = f"{t_plain / t_batch:.2f}x plain writer"
    if t_lmdb:
        vs += f", {t_lmdb / t_batch:.2f}x lmdb"
    b.row("seglog append_batch + fsync", mrec(t_batch), vs)
    t_each = b.append_each()
    b.row("seglog append() per record + fsync", mrec(t_each), f"{t_plain / t_each:.2f}x plain writer")
    t_records, t_crc, size = b.scan()
    b.row("seglog records() into Python objects", mrec(t_records))
    b.row("seglog CRC-checked scan of every batch", f"{size / t_crc / 1e9:.2f} GB/s",
          f"{size / t_crc / 1e9 / crc_gbs:.0%} of raw CRC-32C speed")
    inside, peak, got = b.zero_copy()
    b.row("seglog read() of 1 MiB: bytes copied", f"{peak if not inside else 0} B",
          f"view inside the mapping: {inside}; {peak} B allocated for a {got:,} B view")
    t_lookup, t_find = b.lookup()
    b.row("offset index lookup, 1M entries", f"{t_lookup * 1e6:.2f} us")
    b.row("offset -> batch position, 1M entries", f"{t_find * 1e6:.2f} us", "index lookup + header scan")
    t_rec, rsize = b.recovery(a.recovery_gib)
    b.row(f"recovery scan of {rsize / (1 << 30):.2f} GiB after a crash", f"{rsize / t_rec / 1e9:.2f} GB/s",
          f"{rsize / t_rec / 1e9 / write_gbs:.1f}x page-cache write speed")
    shutil.rmtree(a.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Storage engine figures, each next to a baseline measured in the same run (medians of --runs runs).

    python -m bench.storage [--records 1000000] [--runs 5] [--dir /tmp/seglog-bench] [--recovery-gib 1]

Records are 100-byte JSON-like values, written to the page cache with one fsync at the end.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import struct
import tracemalloc

from bench import limits
from bench.suite import json_records, median_time
from seglog import Log, _engine

TITLE = "Storage engine targets (issue 2)"


class Bench:
    def __init__(self, root: str, n: int, runs: int):
        self.root, self.n, self.runs = root, n, runs
        self.values = json_records(n)
        self.rows: list[tuple[str, str, str, str, bool | None]] = []

    def path(self, name: str) -> str:
        return os.path.join(self.root, name)

    def fresh(self, name: str) -> None:
        p = self.path(name)
        if os.path.isdir(p):
            shutil.rmtree(p)
        elif os.path.exists(p):
            os.remove(p)

    def row(self, what: str, figure: str, vs: str = "", target: str = "", met: bool | None = None) -> None:
        self.rows.append((what, figure, vs, target, met))
        print(f"  {what:<44} {figure:>18}   {vs}" + (f"   [target {target}: {'yes' if met else 'NO'}]"
                                                       if target else ""), flush=True)

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
            seg = log._local.segment(0)
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
        """Same-run machine limits (bench.limits): (page-cache sequential write GB/s, CRC-32C GB/s on 64 MiB)."""
        return (limits.seq_write_gbs(self.path("raw.bin"), self.runs, 256 << 20),
                limits.crc32c_gbs(self.runs))


def figures(b: Bench, recovery_gib: float, machine: dict | None = None) -> None:
    """Measure every issue-2 figure into b.rows. `machine`: bench.limits figures of this run, if measured."""
    n = b.n
    mrec = lambda t: f"{n / t / 1e6:.2f} M rec/s"  # noqa: E731
    if machine:
        write_gbs, crc_gbs = machine["seq_write_gbs"], machine["crc32c_gbs"]
        src = " (bench.limits)"
    else:
        write_gbs, crc_gbs = b.physical()
        src = ""
    b.row("machine: page-cache sequential write" + src, f"{write_gbs:.2f} GB/s")
    b.row("machine: CRC-32C of 64 MiB" + src, f"{crc_gbs:.1f} GB/s")
    t_plain = b.plain_writer()
    b.row("baseline: Python length-prefixed writer", mrec(t_plain))
    t_lmdb = b.lmdb_writer()
    if t_lmdb:
        b.row("baseline: lmdb put(append=True), one txn", mrec(t_lmdb))
    t_batch = b.append_batch()
    vs = f"{t_plain / t_batch:.2f}x plain writer"
    if t_lmdb:
        vs += f", {t_lmdb / t_batch:.2f}x lmdb"
    b.row("seglog append_batch + fsync", mrec(t_batch), vs, ">= 2x plain writer, >= 5x lmdb",
          t_plain / t_batch >= 2 and (t_lmdb is None or t_lmdb / t_batch >= 5))
    t_each = b.append_each()
    b.row("seglog append() per record + fsync", mrec(t_each), f"{t_plain / t_each:.2f}x plain writer",
          ">= 1 M rec/s", n / t_each >= 1e6)
    t_records, t_crc, size = b.scan()
    b.row("seglog records() into Python objects", mrec(t_records), "", ">= 3 M rec/s", n / t_records >= 3e6)
    b.row("seglog CRC-checked scan of every batch", f"{size / t_crc / 1e9:.2f} GB/s",
          f"{size / t_crc / 1e9 / crc_gbs:.0%} of raw CRC-32C speed", ">= 2 GB/s", size / t_crc >= 2e9)
    inside, peak, got = b.zero_copy()
    b.row("seglog read() of 1 MiB: bytes copied", f"{peak if not inside else 0} B",
          f"view inside the mapping: {inside}; {peak} B allocated for a {got:,} B view", "0 B", bool(inside))
    t_lookup, t_find = b.lookup()
    b.row("offset index lookup, 1M entries", f"{t_lookup * 1e6:.2f} us", "", "<= 2 us", t_lookup <= 2e-6)
    b.row("offset -> batch position, 1M entries", f"{t_find * 1e6:.2f} us", "index lookup + header scan")
    t_rec, rsize = b.recovery(recovery_gib)
    b.row(f"recovery scan of {rsize / (1 << 30):.2f} GiB after a crash", f"{rsize / t_rec / 1e9:.2f} GB/s",
          f"{rsize / t_rec / 1e9 / write_gbs:.1f}x page-cache write speed", ">= 1 GB/s", rsize / t_rec >= 1e9)


def run(ctx) -> list[dict]:
    """bench.suite section: the issue-2 table, with the machine limits measured at the start of the run."""
    n = 100_000 if ctx.quick else ctx.records
    ctx.note(f"{n:,} records of 100 B, page cache, one fsync at the end; medians of {ctx.runs} runs. "
             "Also `python -m bench.storage` on its own.")
    b = Bench(ctx.dir, n, ctx.runs)
    figures(b, 0.25 if ctx.quick else 1.0, ctx.limits or None)
    rows = []
    for what, fig, vs, target, met in b.rows:
        row = {"figure": what, "median": fig, "same-run comparison": vs, "issue-2 target": target,
               "met": "" if not target else ("yes" if met else "no")}
        if target:
            row["summary"] = {"figure": what, "target": target, "measured": f"{fig}; {vs}" if vs else fig,
                              "met": row["met"]}
        rows.append(row)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--dir", default="/tmp/seglog-bench")
    p.add_argument("--recovery-gib", type=float, default=1.0)
    a = p.parse_args(argv)
    os.makedirs(a.dir, exist_ok=True)
    print(f"seglog storage benchmark: {a.records:,} records of 100 B, median of {a.runs} runs, in {a.dir}")
    figures(Bench(a.dir, a.records, a.runs), a.recovery_gib)
    shutil.rmtree(a.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

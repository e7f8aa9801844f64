"""Point reads by offset (issue 17): random single-record reads of seglog's Log.get (uncompressed and lz4) and
Log.get_many against lmdb's txn.get and a plain file read through a positions array, all in one process,
interleaved round by round, so every ratio compares figures of the same round.

    python -m bench.point_reads [--records 1000000] [--keys 20000] [--runs 5] [--dir /tmp/seglog-points]

Each store holds the same 100 B JSON-like records (written untimed, as bench.stores writes them). A round opens
each store afresh and reads the same random offsets one call each (get_many: one call for all), so the
batches seglog checks, walks and decompresses on first touch are paid inside the figure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics

from bench import stores, suite

TITLE = "Point reads by offset (issue 17)"
LIBRARIES = ["lmdb"]
KEYS = 20_000
GET_TARGET = 0.5                    # issue 17: Log.get >= 0.5x lmdb's get, uncompressed
GET_FLOOR = 0.4                     # the regression guard: the level reached here (0.54-0.64x) less the noise


class SeglogGetMany(stores.SeglogBatch):
    name, label = "seglog_get_many", "seglog get_many (uncompressed)"

    def get_many(self, path, keys):
        from seglog import Log
        with Log(path) as log:
            got = log.get_many(keys)
        return len(got), sum(len(r.value) for r in got)


READERS = [  # (label, store writing the data, reader, how)
    ("seglog get (uncompressed)", "seglog", stores.SeglogBatch, "Log.get(k) per key"),
    ("seglog get_many (uncompressed)", "seglog", SeglogGetMany, "Log.get_many(keys), one call"),
    ("seglog get (lz4)", "seglog_lz4", stores.SeglogLz4, "Log.get(k) per key, lz4 batches"),
    ("lmdb", "lmdb", stores.Lmdb, "txn.get(8-byte big-endian key) per key, one read txn"),
    ("plain file + positions array", "plain", stores.Plain, "positions[k], length and value sliced from an mmap"),
]


def measure(root: str, records: int, n_keys: int, runs: int) -> dict:
    """Per reader: seconds of each round (every reader once per round, in READERS order)."""
    suite.require("lmdb", hint="pip install lmdb, or the bench extra")
    values = suite.json_records(records)
    keys = suite.random_keys(records, n_keys)
    expect = (len(keys), sum(len(values[k]) for k in keys))
    paths = {}
    for label, data, reader, _ in READERS:
        path = os.path.join(root, data)
        if data not in paths:
            writer = {"seglog": stores.SeglogBatch, "seglog_lz4": stores.SeglogLz4, "lmdb": stores.Lmdb,
                      "plain": stores.Plain}[data]()
            writer.write(path, values)
            paths[data] = path
    del values
    times = {label: [] for label, *_ in READERS}
    for _ in range(runs + 1):                       # the first round warms imports and the page cache
        for label, data, reader, _how in READERS:
            got = []
            t = suite.timings(lambda: got.append(reader().get_many(paths[data], keys)), 1)[0]
            assert got[0] == expect, (label, got[0], expect)
            times[label].append(t)
    return {label: ts[1:] for label, ts in times.items()}


def rows(times: dict, n_keys: int, guards: bool = True) -> list[dict]:
    """The table; Log.get's row carries the target and (unless `guards` is false: --quick) the guard."""
    lmdb, plain = times["lmdb"], times["plain file + positions array"]
    out = []
    for label, _data, _reader, how in READERS:
        ts = times[label]
        vs_lmdb = [l / t for t, l in zip(ts, lmdb)]          # same round: rate ratio = inverse time ratio
        vs_plain = [p / t for t, p in zip(ts, plain)]
        row = {"reader": label, "how": how, "reads/s (median)": suite.rate(n_keys, statistics.median(ts), "reads/s"),
               "vs lmdb (median of rounds)": f"{statistics.median(vs_lmdb):.2f}x",
               "vs plain file": f"{statistics.median(vs_plain):.2f}x", "spread (max/min)": suite.spread(ts)}
        if label == "seglog get (uncompressed)":
            r = statistics.median(vs_lmdb)
            row["summary"] = {"figure": "random Log.get(offset), 100 B records, uncompressed",
                              "target": f">= {GET_TARGET}x lmdb get", "met": "yes" if r >= GET_TARGET else "no",
                              "measured": f"{n_keys / statistics.median(ts) / 1e3:.0f} k reads/s; {r:.2f}x lmdb"}
            if guards:
                row["guard"] = {"figure": "Log.get vs lmdb get", "value": round(r, 3), "floor": GET_FLOOR}
        out.append(row)
    return out


def run(ctx: suite.Context) -> list[dict]:
    records = 100_000 if ctx.quick else ctx.records
    n_keys = 2_000 if ctx.quick else KEYS
    runs = max(ctx.runs, 1 if ctx.quick else 5)
    ctx.note(f"{records:,} records of 100 B JSON-like values per store, written untimed; each round opens every "
             f"store afresh and reads the same {n_keys:,} random offsets, the readers interleaved; medians of "
             f"{runs} rounds after a warm-up round. Ratios are medians of the per-round ratios. seglog's first "
             "read of a batch checks its CRC and walks it once into a skip table (a compressed one is also "
             "decompressed into the log's cache of 16 recent batches): that cost is inside the figures.")
    times = measure(ctx.dir, records, n_keys, runs)
    return rows(times, n_keys, guards=not ctx.quick)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--keys", type=int, default=KEYS)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--dir", default="/tmp/seglog-points")
    a = p.parse_args(argv)
    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    try:
        for r in rows(measure(a.dir, a.records, a.keys, a.runs), a.keys):
            print("  ".join(f"{v}" for k, v in r.items() if k not in ("summary", "guard", "how")))
    finally:
        shutil.rmtree(a.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

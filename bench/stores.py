"""Embedded store comparison: the same 100-byte JSON-like records written (one sync at the end), read back
sequentially into Python objects, and read at random by offset/key, by seglog and by the stores people would
use instead. Each store runs in its own process so peak RSS figures do not mix.

    python -m bench.stores [--records 1000000] [--runs 3] [--dir /tmp/seglog-stores]   # all stores, a table
    python -m bench.stores --one lmdb ...      # one store; prints its measurements as JSON (used by the above)

diskcache (~15-40 k rec/s) and persist-queue (0.5-7 k rec/s here) would take 1-30 minutes per run for 1M
records, so by default they get only the first SLOW_STORE_RECORDS records, and seglog and the plain baseline are
measured again on exactly as many records: every ratio involving a capped store compares equal record counts.
--all-records gives them every record.
"""

from __future__ import annotations

import argparse
import array
import json
import mmap
import os
import shutil
import sqlite3
import struct
import subprocess
import sys

from bench import suite

TITLE = "Embedded stores: write, read back, random reads"
LIBRARIES = ["lmdb", "rocksdict", "persist-queue", "diskcache"]
# the two slow stores get a prefix of the records (their rates stay comparable; --all-records lifts this)
SLOW_STORE_RECORDS = {"diskcache": 50_000, "persist_queue": 2_000}
RANDOM_KEYS = 20_000
LEN = struct.Struct(">I")


class Store:
    """One way of storing records 0..n-1. Subclasses fill in write/read/get_many (None: not supported)."""
    name = label = how = ""

    def write(self, path: str, values: list[bytes]) -> None:
        raise NotImplementedError

    def read(self, path: str) -> tuple[int, int]:
        """Every record in order, as Python bytes objects: (count, total value bytes)."""
        raise NotImplementedError

    get_many = None     # (path, keys) -> (count, total value bytes) of the values at those offsets/keys


class SeglogBatch(Store):
    name, label = "seglog_batch", "seglog append_batch"
    how = "Log.append_batch(values); close() fsyncs"

    def write(self, path, values):
        from seglog import Log
        with Log(path) as log:
            log.append_batch(values)

    def read(self, path):
        from seglog import Log
        n = total = 0
        with Log(path) as log:
            for r in log.records():
                total += len(r.value)
                n += 1
        return n, total

    def get_many(self, path, keys):
        from seglog import Log
        n = total = 0
        with Log(path) as log:
            get = log.get
            for k in keys:
                total += len(get(k).value)
                n += 1
        return n, total


class SeglogEach(SeglogBatch):
    name, label = "seglog_append", "seglog append()"
    how = "Log.append(v) per record; close() fsyncs"

    def write(self, path, values):
        from seglog import Log
        with Log(path) as log:
            append = log.append
            for v in values:
                append(v)


class SeglogLz4(SeglogBatch):
    name, label = "seglog_lz4", "seglog append_batch lz4"
    how = "Log.append_batch(values, compression='lz4'); close() fsyncs"

    def write(self, path, values):
        from seglog import Log
        with Log(path) as log:
            log.append_batch(values, compression="lz4")


class Plain(Store):
    name, label = "plain", "plain file (baseline)"
    how = "f.write(len) + f.write(v) per record, positions array, fsync"

    def write(self, path, values):
        os.makedirs(path)
        positions = array.array("q")
        pos = 0
        pack = LEN.pack
        with open(os.path.join(path, "data"), "wb") as f:
            w = f.write
            add = positions.append
            for v in values:
                add(pos)
                w(pack(len(v)))
                w(v)
                pos += 4 + len(v)
            f.flush()
            os.fsync(f.fileno())
        with open(os.path.join(path, "positions"), "wb") as f:
            positions.tofile(f)
            f.flush()
            os.fsync(f.fileno())

    def read(self, path):
        n = total = pos = 0
        with open(os.path.join(path, "data"), "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
            unpack = LEN.unpack_from
            end = len(m)
            while pos < end:
                (size,) = unpack(m, pos)
                v = m[pos + 4:pos + 4 + size]
                pos += 4 + size
                total += len(v)
                n += 1
        return n, total

    def get_many(self, path, keys):
        positions = array.array("q")
        with open(os.path.join(path, "positions"), "rb") as f:
            positions.frombytes(f.read())
        n = total = 0
        with open(os.path.join(path, "data"), "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
            unpack = LEN.unpack_from
            for k in keys:
                pos = positions[k]
                (size,) = unpack(m, pos)
                total += len(m[pos + 4:pos + 4 + size])
                n += 1
        return n, total


class Lmdb(Store):
    name, label = "lmdb", "lmdb"
    how = "txn.put(key, v, append=True) in one txn, env.sync()"

    def write(self, path, values):
        import lmdb
        env = lmdb.open(path, map_size=max(1 << 30, len(values) * 512), sync=False, metasync=False)
        with env.begin(write=True) as txn:
            put = txn.put
            for i, v in enumerate(values):
                put(i.to_bytes(8, "big"), v, append=True)
        env.sync(True)
        env.close()

    def read(self, path):
        import lmdb
        n = total = 0
        env = lmdb.open(path, readonly=True, lock=False)
        with env.begin() as txn:
            for v in txn.cursor().iternext(keys=False, values=True):
                total += len(v)
                n += 1
        env.close()
        return n, total

    def get_many(self, path, keys):
        import lmdb
        n = total = 0
        env = lmdb.open(path, readonly=True, lock=False)
        with env.begin() as txn:
            get = txn.get
            for k in keys:
                total += len(get(k.to_bytes(8, "big")))
                n += 1
        env.close()
        return n, total


class Sqlite(Store):
    name, label = "sqlite3", "sqlite3 (WAL)"
    how = "executemany INSERT in one transaction, WAL, synchronous=FULL"

    def _connect(self, path):
        con = sqlite3.connect(os.path.join(path, "db.sqlite"))
        con.execute("PRAGMA journal_mode=WAL")
        return con

    def write(self, path, values):
        os.makedirs(path)
        con = self._connect(path)
        con.execute("PRAGMA synchronous=FULL")
        con.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB NOT NULL)")
        with con:
            con.executemany("INSERT INTO t VALUES (?, ?)", enumerate(values))
        con.close()

    def read(self, path):
        n = total = 0
        con = self._connect(path)
        for (v,) in con.execute("SELECT v FROM t ORDER BY k"):
            total += len(v)
            n += 1
        con.close()
        return n, total

    def get_many(self, path, keys):
        n = total = 0
        con = self._connect(path)
        ex = con.execute
        for k in keys:
            total += len(ex("SELECT v FROM t WHERE k = ?", (k,)).fetchone()[0])
            n += 1
        con.close()
        return n, total


class RocksDict(Store):
    name, label = "rocksdict", "RocksDB (rocksdict)"
    how = "WriteBatch.put(key, v) per record, one db.write(batch) (raw mode), flush_wal(sync=True)"

    def _open(self, path):
        from rocksdict import Options, Rdict
        return Rdict(path, Options(raw_mode=True))

    def write(self, path, values):
        from rocksdict import WriteBatch
        db = self._open(path)
        batch = WriteBatch(raw_mode=True)          # RocksDB's atomic multi-put, as lmdb's one transaction
        put = batch.put
        for i, v in enumerate(values):
            put(i.to_bytes(8, "big"), v)
        db.write(batch)
        db.flush_wal(True)
        db.close()

    def read(self, path):
        n = total = 0
        db = self._open(path)
        for v in db.values():
            total += len(v)
            n += 1
        db.close()
        return n, total

    def get_many(self, path, keys):
        n = total = 0
        db = self._open(path)
        for k in keys:
            total += len(db[k.to_bytes(8, "big")])
            n += 1
        db.close()
        return n, total


class DiskCache(Store):
    name, label = "diskcache", "diskcache"
    how = "cache[i] = v in one transact(), sqlite_synchronous=FULL; reads cache[i] in key order"

    def write(self, path, values):
        import diskcache
        with diskcache.Cache(path, sqlite_synchronous=2) as cache:
            with cache.transact():
                for i, v in enumerate(values):
                    cache[i] = v

    def read(self, path):
        import diskcache
        n = total = 0
        # by key in order: Cache.iterkeys() pages with an OR query that sqlite cannot serve from the index
        # (~3.6 k keys/s at 1M entries), so it is not used
        with diskcache.Cache(path) as cache:
            for k in range(len(cache)):
                total += len(cache[k])
                n += 1
        return n, total

    def get_many(self, path, keys):
        import diskcache
        n = total = 0
        with diskcache.Cache(path) as cache:
            for k in keys:
                total += len(cache[k])
                n += 1
        return n, total


class PersistQueue(Store):
    name, label = "persist_queue", "persist-queue"
    how = "SQLiteQueue(auto_commit=False).put(v), one commit; reads drain it"

    def _open(self, path):
        import persistqueue
        return persistqueue.SQLiteQueue(path, auto_commit=False, multithreading=False)

    def write(self, path, values):
        q = self._open(path)
        for v in values:
            q.put(v)
        q.task_done()           # the commit

    def read(self, path):
        n = total = 0
        q = self._open(path)
        for _ in range(q.qsize()):
            total += len(q.get(block=False))
            n += 1
        q.task_done()
        return n, total


STORES = [SeglogBatch, SeglogEach, SeglogLz4, Plain, Lmdb, Sqlite, RocksDict, DiskCache, PersistQueue]
BY_NAME = {s.name: s for s in STORES}


def _timed(fn) -> float:
    return suite.timings(fn, 1)[0]


def measure_one(name: str, records: int, runs: int, scratch: str, n_keys: int) -> dict:
    """Write / read / random-read one store `runs` times on fresh directories; raw seconds per run."""
    store = BY_NAME[name]()
    n = records
    values = suite.json_records(n)
    keys = suite.random_keys(n, min(n_keys, n))
    expect_bytes = sum(map(len, values))
    expect_key_bytes = sum(len(values[k]) for k in keys)
    rss_input, anon_input = suite.rss_bytes(), suite.rss_bytes("RssAnon")
    out = {"store": name, "records": n, "keys": len(keys), "write_s": [], "read_s": [], "get_s": [],
           "disk_bytes": [], "value_bytes": expect_bytes}
    os.makedirs(scratch, exist_ok=True)
    path = os.path.join(scratch, name + "-0")
    warm = os.path.join(scratch, name + "-warmup-0")      # imports and first-call costs, untimed
    store.write(warm, values[:100])
    store.read(warm)
    if store.get_many is not None:
        store.get_many(warm, [k for k in keys if k < 100][:10] or [0])
    shutil.rmtree(warm)
    for _ in range(runs):
        if os.path.exists(path):
            shutil.rmtree(path)
        out["write_s"].append(_timed(lambda: store.write(path, values)))
        out["disk_bytes"].append(suite.disk_bytes(path))
        got = []
        out["read_s"].append(_timed(lambda: got.append(store.read(path))))
        assert got[-1] == (n, expect_bytes), (name, got[-1], (n, expect_bytes))
        if store.get_many is not None:
            out["get_s"].append(_timed(lambda: got.append(store.get_many(path, keys))))
            assert got[-1] == (len(keys), expect_key_bytes), (name, got[-1])
    shutil.rmtree(path, ignore_errors=True)
    out.update(rss_input=rss_input, peak_rss=suite.peak_rss_bytes(),
               anon_growth=suite.rss_bytes("RssAnon") - anon_input)
    return out


REFERENCES = ("seglog_batch", "plain")     # measured again at each capped store's record count


def jobs(records: int, all_records: bool = False) -> list[tuple[str, int]]:
    """(store, record count) to measure, in order: every store (the slow ones capped unless all_records), then
    seglog append_batch and the plain baseline at each capped count, so capped stores compare like with like."""
    counts = {s.name: records if all_records else min(records, SLOW_STORE_RECORDS.get(s.name, records))
              for s in STORES}
    out = [(s.name, counts[s.name]) for s in STORES]
    for n in sorted({n for n in counts.values() if n != records}, reverse=True):
        out += [(name, n) for name in REFERENCES]
    return out


def run_all(scratch: str, records: int, runs: int, n_keys: int, all_records: bool = False) -> list[dict]:
    """Each job of jobs() in its own process (python -m bench.stores --one NAME); their JSON results, in order."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (suite.REPO_DIR, env.get("PYTHONPATH")) if p)
    results = []
    for name, n in jobs(records, all_records):
        cmd = [sys.executable, "-m", "bench.stores", "--one", name, "--records", str(n),
               "--runs", str(runs), "--dir", scratch, "--keys", str(n_keys)]
        print(f"  {BY_NAME[name].label}: {n:,} records ...", flush=True)
        done = subprocess.run(cmd, cwd=suite.REPO_DIR, env=env, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise RuntimeError(f"{name} ({n:,} records) failed:\n{done.stdout}\n{done.stderr}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return results


def _med(xs):
    import statistics
    return statistics.median(xs) if xs else None


def rows_and_chart(ctx: suite.Context | None, results: list[dict]) -> list[dict]:
    """Two tables. Every store at its own record count (its first result), with ratios to the plain baseline
    measured on as many records; then seglog append_batch divided by each store, again on as many records."""
    by = {(r["store"], r["records"]): r for r in results}
    full = results[0]["records"]
    own: dict[str, dict] = {}
    for r in results:
        own.setdefault(r["store"], r)

    def rates(r):
        w = r["records"] / _med(r["write_s"])
        rd = r["records"] / _med(r["read_s"])
        g = r["keys"] / _med(r["get_s"]) if r["get_s"] else None
        return w, rd, g

    def disk_per_record(r):
        return _med(r["disk_bytes"]) / r["records"]

    sync_write = ctx.limit("sync_write_gbs") if ctx else None
    rows = []
    for r in own.values():
        store = BY_NAME[r["store"]]
        plain = by[("plain", r["records"])]
        (w, rd, g), (pw, pr, pg) = rates(r), rates(plain)
        write_gbs = _med(r["disk_bytes"]) / _med(r["write_s"]) / 1e9
        peak_over = r["peak_rss"] - r["rss_input"]
        rows.append({
            "table": "Each store, same run (medians; vs plain = ratio to the plain-file baseline on the same number "
                     "of records, higher is faster)",
            "store": store.label, "how": store.how,
            "records": f"{r['records']:,}" + ("" if r["records"] == full else " (capped)"),
            "write + sync": suite.rate(w, 1), "write vs plain": suite.ratio(w, pw),
            "write of write+sync limit": suite.fraction(write_gbs, sync_write),
            "read into Python": suite.rate(rd, 1), "read vs plain": suite.ratio(rd, pr),
            "random reads": suite.rate(g, 1) if g else "n/a (a queue)",
            "random vs plain": suite.ratio(g, pg) if g else "-",
            "disk / record": f"{disk_per_record(r):.0f} B",
            "peak RSS over input": suite.mb(peak_over),
            "write spread (max/min)": suite.spread(r["write_s"]),
            "data": {"store": r["store"], "label": store.label, "records": r["records"], "write": w, "read": rd,
                     "get": g, "disk_per_record": disk_per_record(r), "peak_over": peak_over,
                     "plain": {"write": pw, "read": pr, "get": pg, "disk_per_record": disk_per_record(plain)}},
        })
    for r in own.values():
        if r["store"] == "seglog_batch":
            continue
        seg = by[("seglog_batch", r["records"])]
        (w, rd, g), (sw, sr, sg) = rates(r), rates(seg)
        rows.append({
            "table": "seglog append_batch compared with each store on the same number of records (seglog / store "
                     "for speed, store / seglog for space)",
            "store": BY_NAME[r["store"]].label, "records": f"{r['records']:,}",
            "write": suite.ratio(sw, w), "sequential read": suite.ratio(sr, rd),
            "random read": suite.ratio(sg, g) if g else "-",
            "disk used": suite.ratio(disk_per_record(r), disk_per_record(seg)),
            "peak RSS over input": suite.ratio(r["peak_rss"] - r["rss_input"], seg["peak_rss"] - seg["rss_input"]),
        })
    if ctx is not None:
        chart(ctx, rows)
    return rows


def _short(v: float) -> str:
    return f"{v / 1e6:.2f}M" if v >= 1e6 else (f"{v / 1e3:.0f}k" if v >= 1e3 else f"{v:.0f}")


def chart(ctx: suite.Context, rows: list[dict]) -> None:
    """Each store's figures as bars of their ratio to the plain-file baseline of the same run on the same number
    of records (log scale, 1.0 = the baseline), labelled with the ratio and the figure itself."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    data = [r["data"] for r in rows if "data" in r]
    full = data[0]["records"]
    labels = [d["label"] + (f" ({d['records']:,} rec.)" if d["records"] != full else "") for d in data]
    fig, axes = plt.subplots(2, 2, figsize=(13, 8))
    panels = [("write", "write + one sync: speed / plain writer's", "rec/s"),
              ("read", "sequential read into Python: speed / plain reader's", "rec/s"),
              ("get", "random reads by offset/key: speed / plain file's", "reads/s"),
              ("disk_per_record", "disk used per record: bytes / plain file's (lower is better)", "B")]
    for ax, (key, title, unit) in zip(axes.flat, panels):
        ratios = [(d[key] / d["plain"][key]) if d[key] and d["plain"][key] else 0 for d in data]
        colors = ["tab:orange" if d["store"].startswith("seglog") else
                  ("tab:gray" if d["store"] == "plain" else "tab:blue") for d in data]
        ys = range(len(data))
        ax.barh([y for y in ys if ratios[y]], [r for r in ratios if r],
                color=[c for c, r in zip(colors, ratios) if r])
        ax.set_yticks(list(ys), labels)
        ax.set_ylim(len(data) - 0.5, -0.5)
        ax.set_xscale("log")
        ax.axvline(1.0, color="black", lw=0.8, ls="--")
        ax.set_title(title, fontsize=10)
        lo = min([r for r in ratios if r] + [0.5])
        hi = max(ratios + [2.0])
        ax.set_xlim(lo / 3, hi * 8)
        for y, (r, d) in enumerate(zip(ratios, data)):
            if r:
                ax.text(r, y, f" {r:.0f}x" if r >= 100 else (f" {r:.2f}x" if r >= 0.01 else f" {r:.4f}x"),
                        va="center", fontsize=8)
                ax.text(r, y + 0.32, f" {_short(d[key])} {unit}", va="center", fontsize=6, color="dimgray")
            else:
                ax.text(0.01, y, " n/a", va="center", fontsize=8, transform=ax.get_yaxis_transform())
    fig.suptitle("seglog and embedded stores as ratios to the plain-file baseline of the same run "
                 "(orange: seglog, gray: the baseline, dashed line: 1.0x)", fontsize=11)
    fig.tight_layout()
    ctx.chart(fig, "stores", "Each store's write, sequential read and random read speed and disk per record, as a "
                             "ratio to the plain length-prefixed file measured in the same run (log scale; the label "
                             "gives the ratio and the figure).")


def run(ctx: suite.Context) -> list[dict]:
    records = 100_000 if ctx.quick else ctx.records
    n_keys = 10_000 if ctx.quick else RANDOM_KEYS
    capped = {BY_NAME[k].label: min(v, records) for k, v in SLOW_STORE_RECORDS.items()
              if not ctx.all_records and v < records}
    ctx.note(f"{records:,} records of 100 B JSON-like values, page cache, one sync at the end; then a sequential read "
             f"of every record into a Python bytes object and {n_keys:,} random reads by offset/key. Medians of "
             f"{ctx.runs} runs, each on a fresh directory, each store in its own process after an untimed warm-up. "
             "'write of write+sync limit' = bytes on disk / write time, as a fraction of the machine's write + "
             "fdatasync speed (bench.limits). Disk = allocated blocks after the write; peak RSS over input = the "
             "process's peak RSS minus its RSS once the input list existed (mapped file pages count, so stores "
             "that read through mmap — seglog, lmdb, the plain baseline — include the pages they touched).")
    if capped:
        ctx.note("Not every store gets every record (column 'records'): "
                 + ", ".join(f"{k} gets the first {v:,}" for k, v in capped.items())
                 + f" of the {records:,}. At their speed here (diskcache ~15-40 k, persist-queue ~0.5-7 k records/s) "
                 "all of them would take 1 to 30 minutes per run, past the suite's 10-minute budget. So seglog "
                 "append_batch and the plain baseline are measured again on exactly as many records, and every "
                 "ratio of a capped store (vs plain, seglog / store, peak memory included) compares equal record "
                 "counts. `python -m bench --all-records` (or `python -m bench.stores --all-records`) gives them "
                 "every record.")
    results = run_all(ctx.dir, records, ctx.runs, n_keys, ctx.all_records)
    return rows_and_chart(ctx, results)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--one", choices=sorted(BY_NAME))
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--keys", type=int, default=RANDOM_KEYS)
    p.add_argument("--dir", default="/tmp/seglog-stores")
    p.add_argument("--all-records", action="store_true", help="no record cap for the slow stores")
    a = p.parse_args(argv)
    if a.one:
        print(json.dumps(measure_one(a.one, a.records, a.runs, a.dir, a.keys)))
        return 0
    results = run_all(a.dir, a.records, a.runs, a.keys, a.all_records)
    shutil.rmtree(a.dir, ignore_errors=True)
    for r in rows_and_chart(None, results):
        print("  ".join(f"{v}" for k, v in r.items() if k not in ("data", "table", "how")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

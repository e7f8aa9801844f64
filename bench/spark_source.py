"""Spark data source throughput against same-session baselines (medians of --runs timed runs, after a warm-up).

    python -m bench.spark_source [--records 10000000] [--partitions 6] [--runs 5] [--dir /tmp/seglog-spark-bench]
                                 [--readme]

Data: --records records with 100-byte JSON-like values (no key, no headers) in --partitions partitions, written
with Log.append_batch (uncompressed, 1 GiB segments). Spark runs local[2] with 2 GiB of driver memory.

Queries, each timed for three readers of the same records in the same SparkSession:
- count:  ``df.count()``
- length: ``df.agg(sum(length(value)))``
Readers:
- seglog:      ``spark.read.format("seglog")`` (Cython decode straight into Arrow buffers)
- parquet:     the same rows written by Spark as Parquet (snappy), read with ``spark.read.parquet``
- pure Python: a data source with the same splits whose read() decodes with ``Log.records()`` and builds the
               Arrow arrays in Python (pa.array over lists)
Outside Spark, the decode alone is also timed for seglog's arrow_columns and the pure-Python path.

Targets: seglog >= 0.5x Parquet's rows/s, >= 1.5x the pure-Python reader's. ``--readme`` replaces the
"Spark data source" section of bench/README.md with the table (other sections are left alone).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(BENCH_DIR, "README.md")
SECTION = "## Spark data source"
VALUE_BYTES = 100


def json_values(n: int, seed: int = 7) -> list[bytes]:
    """n distinct JSON-like values of exactly VALUE_BYTES bytes."""
    rnd = random.Random(seed)
    names = [b"cat", b"dog", b"fish", b"bird", b"hamster", b"rabbit"]
    out = []
    for i in range(n):
        body = b'{"id":%d,"pet":"%s","age":%d,"owner":"user-%06d","note":"' % (
            i, names[i % 6], rnd.randrange(20), rnd.randrange(1_000_000))
        out.append(body + b"x" * (VALUE_BYTES - len(body) - 2) + b'"}')
    return out


def make_data(root: str, records: int, partitions: int) -> str:
    from seglog import Log

    data = os.path.join(root, "data")
    if os.path.isdir(data):
        shutil.rmtree(data)
    os.makedirs(data)
    per = records // partitions
    chunk = 500_000
    values = json_values(chunk)
    for p in range(partitions):
        with Log(os.path.join(data, f"bench-{p}")) as lg:
            left = per + (1 if p < records % partitions else 0)
            while left > 0:
                n = min(left, chunk)
                lg.append_batch(values[:n])
                left -= n
    return data


def session(workers_path: str):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (workers_path, os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("seglog-bench")
             .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def python_source():
    """The pure-Python baseline: seglog's planning, Log.records() decoding, Arrow arrays built in Python."""
    from pyspark.sql.datasource import DataSource, DataSourceReader

    class PythonRecordsReader(DataSourceReader):
        def __init__(self, options):
            self.options = options

        def partitions(self):
            from seglog.spark.batch_reader import plan_batch
            return plan_batch(self.options)

        def read(self, split):
            import pyarrow as pa
            from seglog import Log
            from seglog.spark.arrow_reader import arrow_schema

            schema = arrow_schema(False)
            ts_type = pa.timestamp("us", tz="UTC")
            lg = Log(split.location, readonly=True)
            try:
                keys, values, offsets, stamps, types = [], [], [], [], []
                for r in lg.records(split.start, split.end):
                    keys.append(r.key)
                    values.append(r.value)
                    offsets.append(r.offset)
                    stamps.append(r.timestamp * 1000)
                    types.append(r.timestamp_type)
                    if len(offsets) == 65536:
                        yield _batch(pa, schema, ts_type, split, keys, values, offsets, stamps, types)
                        keys, values, offsets, stamps, types = [], [], [], [], []
                if offsets:
                    yield _batch(pa, schema, ts_type, split, keys, values, offsets, stamps, types)
            finally:
                lg.close()

    class PythonRecordsSource(DataSource):
        @classmethod
        def name(cls):
            return "seglog_pyrecords"

        def schema(self):
            from seglog.spark.arrow_reader import spark_schema
            return spark_schema(False)

        def reader(self, schema):
            from seglog.spark.options import parse_read_options
            return PythonRecordsReader(parse_read_options(self.options, streaming=False))

    return PythonRecordsSource


def _batch(pa, schema, ts_type, split, keys, values, offsets, stamps, types):
    n = len(offsets)
    return pa.RecordBatch.from_arrays([
        pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
        pa.repeat(pa.scalar(split.topic, pa.string()), n), pa.repeat(pa.scalar(split.partition, pa.int32()), n),
        pa.array(offsets, pa.int64()), pa.array(stamps, ts_type), pa.array(types, pa.int32())], schema=schema)


def timed(fn, runs: int) -> list[float]:
    """Seconds of `runs` calls of fn after one untimed warm-up call."""
    fn()
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def decode_only(data: str, partitions: int, runs: int) -> tuple[float, float, int]:
    """Seconds to decode every partition into Arrow outside Spark: (seglog arrow_columns, pure Python, rows)."""
    import pyarrow as pa
    from seglog import Log
    from seglog.spark.arrow_reader import arrow_schema, read_split
    from seglog.spark.splits import OffsetRangeSplit

    def splits():
        out = []
        for p in range(partitions):
            loc = os.path.join(data, f"bench-{p}")
            with Log(loc, readonly=True) as lg:
                out.append(OffsetRangeSplit("bench", p, lg.start_offset, lg.end_offset, loc))
        return out

    todo = splits()
    rows = [0]

    def seglog_decode():
        rows[0] = sum(b.num_rows for s in todo for b in read_split(s))

    ts_type = pa.timestamp("us", tz="UTC")
    schema = arrow_schema(False)

    def python_decode():
        for s in todo:
            lg = Log(s.location, readonly=True)
            keys, values, offsets, stamps, types = [], [], [], [], []
            for r in lg.records(s.start, s.end):
                keys.append(r.key)
                values.append(r.value)
                offsets.append(r.offset)
                stamps.append(r.timestamp * 1000)
                types.append(r.timestamp_type)
                if len(offsets) == 65536:
                    _batch(pa, schema, ts_type, s, keys, values, offsets, stamps, types)
                    keys, values, offsets, stamps, types = [], [], [], [], []
            if offsets:
                _batch(pa, schema, ts_type, s, keys, values, offsets, stamps, types)
            lg.close()

    a = statistics.median(timed(seglog_decode, runs))
    b = statistics.median(timed(python_decode, max(1, runs // 2)))
    return a, b, rows[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default="/tmp/seglog-spark-bench")
    ap.add_argument("--workers-path", default=os.environ.get("SEGLOG_WORKERS_PATH", ""),
                    help="PYTHONPATH entry that lets Spark's Python workers import seglog (if not installed)")
    ap.add_argument("--readme", action="store_true", help="write the table into bench/README.md")
    args = ap.parse_args(argv)

    os.makedirs(args.dir, exist_ok=True)
    t = time.perf_counter()
    data = make_data(args.dir, args.records, args.partitions)
    print(f"wrote {args.records:,} records of {VALUE_BYTES} B in {args.partitions} partitions "
          f"in {time.perf_counter() - t:.1f} s", flush=True)

    spark = session(args.workers_path)
    import seglog.spark
    from pyspark.sql import functions as F

    seglog.spark.register(spark)
    spark.dataSource.register(python_source())
    opts = {"path": data, "subscribe": "bench"}
    readers = {
        "seglog": spark.read.format("seglog").options(**opts).load(),
        "pure Python": spark.read.format("seglog_pyrecords").options(**opts).load(),
    }
    parquet = os.path.join(args.dir, "parquet")
    shutil.rmtree(parquet, ignore_errors=True)
    readers["seglog"].write.parquet(parquet)
    readers["parquet"] = spark.read.parquet(parquet)

    expected = args.records
    names = ("seglog", "parquet", "pure Python")
    for name in names:                          # check every reader, and warm it up (JIT, workers, cache)
        df = readers[name]
        got = df.count()
        total = df.agg(F.sum(F.length("value"))).collect()[0][0]
        if got != expected or total != expected * VALUE_BYTES:
            raise SystemExit(f"{name}: wrong result {got} rows / {total} bytes")
    samples: dict[tuple[str, str], list[float]] = {(n, q): [] for n in names for q in ("count", "length")}
    for run in range(args.runs):                # interleaved, so load changes hit every reader alike
        for name in names:
            df = readers[name]
            for query, fn in (("count", df.count),
                              ("length", lambda: df.agg(F.sum(F.length("value"))).collect())):
                t = time.perf_counter()
                fn()
                samples[(name, query)].append(time.perf_counter() - t)
        print(f"  run {run + 1}: " + "  ".join(f"{n} {samples[(n, 'count')][-1]:.2f}/{samples[(n, 'length')][-1]:.2f} s"
                                                for n in names), flush=True)
    results = {k: statistics.median(v) for k, v in samples.items()}
    dec_seglog, dec_python, rows = decode_only(data, args.partitions, args.runs)
    spark.stop()

    table = render(args, results, dec_seglog, dec_python, rows)
    print()
    print(table)
    if args.readme:
        write_section(table)
        print(f"wrote the section to {README}")
    return 0


def render(args, results, dec_seglog: float, dec_python: float, rows: int) -> str:
    n = args.records
    rate = {k: n / v / 1e6 for k, v in results.items()}
    lines = [
        SECTION, "",
        f"`python -m bench.spark_source --records {n} --partitions {args.partitions} --runs {args.runs}`: "
        f"{n:,} records of {VALUE_BYTES} B (uncompressed, no keys) in {args.partitions} partitions, Spark "
        f"local[2] on this 2-core machine, one SparkSession for every reader. Medians of {args.runs} timed "
        "runs after a warm-up, the readers interleaved run by run. M rows/s = records / median seconds.", "",
        "| query | seglog | Parquet | pure-Python Arrow reader | seglog / Parquet (target >= 0.5) | "
        "seglog / pure Python (target >= 1.5) |",
        "|---|---|---|---|---|---|",
    ]
    for q, label in (("count", "`df.count()`"), ("length", "`sum(length(value))`")):
        s, p, y = rate[("seglog", q)], rate[("parquet", q)], rate[("pure Python", q)]
        lines.append(f"| {label} | {s:.2f} M rows/s ({results[('seglog', q)]:.2f} s) | {p:.2f} M rows/s "
                     f"({results[('parquet', q)]:.2f} s) | {y:.2f} M rows/s ({results[('pure Python', q)]:.2f} s) "
                     f"| {s / p:.2f}x | {s / y:.2f}x |")
    lines += [
        "", f"Decode alone, outside Spark ({rows:,} records into Arrow record batches): seglog "
        f"`arrow_columns` {rows / dec_seglog / 1e6:.1f} M rows/s ({dec_seglog:.2f} s), pure Python "
        f"`Log.records()` + `pa.array` {rows / dec_python / 1e6:.1f} M rows/s ({dec_python:.2f} s): "
        f"{dec_python / dec_seglog:.1f}x.", "",
    ]
    return "\n".join(lines)


def write_section(table: str) -> None:
    """Replace (or add) the "## Spark data source" section of bench/README.md, keeping everything else."""
    text = ""
    if os.path.exists(README):
        with open(README, encoding="utf-8") as f:
            text = f.read()
    if not text.strip():
        text = "# Benchmarks\n\n"
    pattern = re.compile(r"^## Spark data source\n.*?(?=^## |\Z)", re.S | re.M)
    body = table.rstrip("\n") + "\n\n"
    if pattern.search(text):
        text = pattern.sub(lambda _: body, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + body
    tmp = README + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text.rstrip("\n") + "\n")
    os.replace(tmp, README)


if __name__ == "__main__":
    sys.exit(main())

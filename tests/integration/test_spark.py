"""The Spark data source (seglog.spark) against seglog's own reader, Log.records().

One local[2] SparkSession serves every test (the ``spark`` fixture in conftest.py). Topics are written with
seglog.Log directly: several small segments per partition, every codec, null keys and values, headers
(with a non-ASCII key), non-monotonic CreateTime timestamps, a LogAppendTime partition, a control batch,
and a partition whose start offset was raised. Every Spark result is compared with the records
Log.records() returns for the same offsets.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from seglog import Log, LogConfig, _engine, serve  # noqa: E402
from seglog.partitioner import murmur2  # noqa: E402

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PETS_PARTITIONS = 3
PETS_RECORDS = 1500            # per append round; two rounds per partition
DELETED_BEFORE = 100           # pets-1 starts here after delete_records_before


# -- data ------------------------------------------------------------------------------------------------------

def _records(rnd: random.Random, n: int, first_ts: int):
    values, keys, headers, stamps = [], [], [], []
    for i in range(n):
        size = rnd.choice((0, 5, 60, 120, 300))
        values.append(None if rnd.random() < 0.03 else bytes(rnd.randrange(256) for _ in range(size)))
        keys.append(None if rnd.random() < 0.3 else b"key-%d" % rnd.randrange(50))
        h = rnd.random()
        headers.append(None if h < 0.5 else [("trace", b"t%d" % i)] if h < 0.8
                       else [("héader", None), ("n", b"%d" % i), ("empty", b"")])
        stamps.append(first_ts + 10 * i + rnd.randrange(-30, 31))      # not monotonic in offset order
    return values, keys, headers, stamps


def _control_batch(offset: int) -> bytes:
    """A transaction marker (control batch) at `offset`, as a transactional producer's abort leaves one."""
    return _engine.control_batch(7, 0, False, 0, T0, base_offset=offset)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A data dir: pets (3 partitions, many segments), codecs (one partition per codec), logs.a / logs.b /
    __internal (for patterns), stream (2 empty partitions) and sink (3 empty partitions)."""
    root = str(tmp_path_factory.mktemp("spark-data"))
    rnd = random.Random(2024)
    small = LogConfig(segment_bytes=64 * 1024)
    for p in range(PETS_PARTITIONS):
        cfg = small.replace(message_timestamp_type="LogAppendTime") if p == 2 else small
        with Log(os.path.join(root, f"pets-{p}"), cfg) as lg:
            values, keys, headers, stamps = _records(rnd, PETS_RECORDS, T0)
            lg.append_batch(values, keys=keys, headers=headers, timestamps=stamps, compression=CODECS[p])
            if p == 0:
                lg.append_as_follower(_control_batch(lg.end_offset))
            values, keys, headers, stamps = _records(rnd, PETS_RECORDS, T0 + 10 * PETS_RECORDS)
            lg.append_batch(values, keys=keys, headers=headers, timestamps=stamps, compression="lz4")
            if p == 1:
                lg.delete_records_before(DELETED_BEFORE)
    for p, codec in enumerate(CODECS):
        with Log(os.path.join(root, f"codecs-{p}")) as lg:
            values, keys, headers, stamps = _records(rnd, 700, T0)
            lg.append_batch(values, keys=keys, headers=headers, timestamps=stamps, compression=codec)
    for name in ("logs.a-0", "logs.a-1", "logs.b-0", "__internal-0", "logsx-0"):
        with Log(os.path.join(root, name)) as lg:
            lg.append_batch([b"%s:%d" % (name.encode(), i) for i in range(20)])
    for name in ("stream-0", "stream-1", "sink-0", "sink-1", "sink-2"):
        Log(os.path.join(root, name)).close()
    return root


def expected(root: str, topic: str, partitions, start: dict | None = None, end: dict | None = None) -> list:
    """What Log.records() gives, normalized like _rows(): sorted (topic, partition, offset, key, value,
    timestamp ms, timestamp type, headers or None)."""
    def opener(t, p):
        return Log(os.path.join(root, f"{t}-{p}"), readonly=True)
    return expected_from(opener, topic, partitions, start, end)


def expected_from(opener, topic: str, partitions, start: dict | None = None, end: dict | None = None) -> list:
    """expected() over logs from opener(topic, partition) (a context manager giving a Log)."""
    out = []
    for p in partitions:
        with opener(topic, p) as lg:
            for r in lg.records((start or {}).get(p), (end or {}).get(p)):
                out.append((r.topic, r.partition, r.offset, r.key, r.value, r.timestamp, r.timestamp_type,
                            r.headers or None))
    return sorted(out, key=lambda t: (t[0], t[1], t[2]))


def _rows(df, headers: bool = True) -> list:
    from pyspark.sql import functions as F

    cols = ["topic", "partition", "offset", "key", "value", F.unix_millis("timestamp").alias("ts"), "timestampType"]
    if headers:
        cols.append("headers")
    out = []
    for r in df.select(*cols).collect():
        hs = None
        if headers and r["headers"] is not None:
            hs = tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"])
        out.append((r["topic"], r["partition"], r["offset"], None if r["key"] is None else bytes(r["key"]),
                    None if r["value"] is None else bytes(r["value"]), r["ts"], r["timestampType"], hs))
    return sorted(out, key=lambda t: (t[0], t[1], t[2]))


def _read(spark, root: str, **options):
    reader = spark.read.format("seglog").option("path", root)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


# -- schema and whole reads ---------------------------------------------------------------------------------

def test_schema_is_spark_kafka_source_schema(spark, data):
    import pyarrow as pa
    from seglog.spark.arrow_reader import arrow_schema

    df = _read(spark, data, subscribe="pets")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"), ("offset", "bigint"),
        ("timestamp", "timestamp"), ("timestampType", "int")]
    with_headers = _read(spark, data, subscribe="pets", includeHeaders="true")
    assert with_headers.schema["headers"].dataType.simpleString() == "array<struct<key:string,value:binary>>"
    schema = arrow_schema(True)
    assert schema.field("value").type == pa.binary() and schema.field("offset").type == pa.int64()
    assert schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    try:
        from pyspark.sql.pandas.types import to_arrow_schema
        assert to_arrow_schema(with_headers.schema, timezone="UTC").equals(schema)
    except TypeError:           # pyspark 4.0's to_arrow_schema has no timezone argument
        pass


def test_batch_read_equals_log_records(spark, data):
    df = _read(spark, data, subscribe="pets", includeHeaders="true")
    want = expected(data, "pets", range(PETS_PARTITIONS))
    assert _rows(df) == want
    assert {r[6] for r in want if r[1] == 2} == {1} and {r[6] for r in want if r[1] != 2} == {0}
    assert min(r[2] for r in want if r[1] == 1) == DELETED_BEFORE
    assert all(r[2] != 1500 for r in want if r[1] == 0)             # the control batch's offset holds no record
    from pyspark.sql import functions as F
    agg = df.groupBy("partition").agg(F.count("*").alias("n"), F.min("offset").alias("lo"),
                                      F.max("offset").alias("hi"), F.sum(F.length("value")).alias("bytes"))
    got = {r["partition"]: (r["n"], r["lo"], r["hi"], r["bytes"]) for r in agg.collect()}
    for p in range(PETS_PARTITIONS):
        mine = [r for r in want if r[1] == p]
        assert got[p] == (len(mine), mine[0][2], mine[-1][2], sum(len(r[4]) for r in mine if r[4] is not None))


def test_every_codec(spark, data):
    df = _read(spark, data, subscribe="codecs", includeHeaders="true")
    assert _rows(df) == expected(data, "codecs", range(len(CODECS)))


def test_small_splits_and_min_partitions(spark, data):
    want = expected(data, "pets", range(PETS_PARTITIONS))
    whole = _read(spark, data, subscribe="pets", includeHeaders="true")
    small = _read(spark, data, subscribe="pets", includeHeaders="true", splitSize="16k")
    many = _read(spark, data, subscribe="pets", includeHeaders="true", minPartitions="40")
    assert whole.rdd.getNumPartitions() == PETS_PARTITIONS           # 256 MiB default: one split per partition
    assert small.rdd.getNumPartitions() > 3 * PETS_PARTITIONS
    assert many.rdd.getNumPartitions() >= 40
    assert _rows(small) == want
    assert _rows(many) == want


# -- ranges ---------------------------------------------------------------------------------------------------

def test_offset_ranges(spark, data):
    starting = '{"pets": {"0": 10, "1": -2, "2": 2999}}'
    ending = '{"pets": {"0": 1200, "1": 1700, "2": -1}}'
    df = _read(spark, data, subscribe="pets", includeHeaders="true", startingOffsets=starting,
               endingOffsets=ending)
    assert _rows(df) == expected(data, "pets", range(3), {0: 10, 2: 2999}, {0: 1200, 1: 1700})
    only_start = _read(spark, data, subscribe="pets", startingOffsets='{"pets": {"0": 2990}}')
    # partitions the JSON does not name take the default: earliest for a start
    assert only_start.count() == len(expected(data, "pets", range(3), {0: 2990}))


def _first_at_or_after(records, ts):
    return next((r[2] for r in records if r[5] >= ts), None)


def test_timestamp_ranges(spark, data):
    recs = {p: expected(data, "pets", [p]) for p in range(2)}
    start_ts, end_ts = T0 + 5_000, T0 + 21_000
    df = _read(spark, data, assign='{"pets": [0, 1]}', includeHeaders="true", startingTimestamp=str(start_ts),
               endingTimestamp=str(end_ts))
    want = expected(data, "pets", range(2), {p: _first_at_or_after(recs[p], start_ts) for p in range(2)},
                    {p: _first_at_or_after(recs[p], end_ts) for p in range(2)})
    assert want and _rows(df) == want
    assert any(r[5] < start_ts for r in want)      # Kafka semantics: a start offset, not a row filter
    by_partition = _read(spark, data, assign='{"pets": [0, 1]}', includeHeaders="true",
                         startingOffsetsByTimestamp=f'{{"pets": {{"0": {start_ts}}}}}')
    assert _rows(by_partition) == expected(data, "pets", range(2), {0: _first_at_or_after(recs[0], start_ts)})
    with pytest.raises(Exception, match="no record at or after timestamp"):
        _read(spark, data, subscribe="pets", startingTimestamp=str(T0 + 10**9)).count()
    late = _read(spark, data, assign='{"pets": [0, 1]}', startingTimestamp=str(T0 + 10**9),
                 startingOffsetsByTimestampStrategy="latest")
    assert late.count() == 0
    appended = _read(spark, data, assign='{"pets": [2]}', startingTimestamp=str(T0 + 10**9))
    assert appended.count() == 2 * PETS_RECORDS         # LogAppendTime: every record got the (later) append time


def test_assign_and_subscribe_pattern(spark, data):
    assigned = _read(spark, data, assign='{"pets": [0, 2]}', includeHeaders="true")
    assert _rows(assigned) == expected(data, "pets", [0, 2])
    pattern = _read(spark, data, subscribePattern=r"logs\..*")
    got = sorted((r["topic"], r["partition"]) for r in pattern.select("topic", "partition").distinct().collect())
    assert got == [("logs.a", 0), ("logs.a", 1), ("logs.b", 0)]
    internal = _read(spark, data, subscribe="__internal")          # named explicitly: internal topics are readable
    assert internal.count() == 20
    everything = _read(spark, data, subscribePattern=".*").select("topic").distinct().collect()
    assert "__internal" not in {r["topic"] for r in everything}


# -- pushdown -------------------------------------------------------------------------------------------------

def test_filter_pushdown_is_opt_in_per_query(spark, data):
    import seglog.spark
    from pyspark.sql import functions as F

    assert spark.conf.get(seglog.spark.PUSHDOWN_CONF) == "true"        # the session allows pushdown
    query = "partition = 1 AND offset >= 300 AND offset < 420"
    ts_from = T0 + 12_000
    all_pets = expected(data, "pets", range(PETS_PARTITIONS))
    want_offsets = [r for r in all_pets if r[1] == 1 and 300 <= r[2] < 420]
    want_ts = [r for r in all_pets if r[5] >= ts_from]

    def run(**opts):
        """Every query on a freshly loaded DataFrame: the one case opt-in pushdown is correct for."""
        def load():
            return _read(spark, data, subscribe="pets", includeHeaders="true", splitSize="16k", **opts)
        by_offset = load().filter(query)
        by_ts = load().filter(F.col("timestamp") >= F.timestamp_millis(F.lit(ts_from)))
        return load().rdd.getNumPartitions(), by_offset.rdd.getNumPartitions(), _rows(by_offset), _rows(by_ts)

    splits_all, splits_plain, rows_offset, rows_ts = run()
    assert rows_offset == want_offsets and rows_ts == want_ts
    assert splits_plain == splits_all                                  # default: nothing pushed, nothing pruned
    splits_all2, splits_pushed, rows_offset2, rows_ts2 = run(pushFilters="true")
    assert rows_offset2 == want_offsets and rows_ts2 == want_ts
    assert splits_all2 == splits_all and splits_pushed < splits_all and splits_pushed <= 2   # partition 1, 300..419
    spark.conf.set(seglog.spark.PUSHDOWN_CONF, "false")
    try:
        assert _read(spark, data, subscribe="pets").filter(query).count() == len(want_offsets)
        with pytest.raises(Exception, match="DATA_SOURCE_PUSHDOWN_DISABLED"):       # pyspark refuses the reader
            _read(spark, data, subscribe="pets", pushFilters="true").filter(query).count()
    finally:
        spark.conf.set(seglog.spark.PUSHDOWN_CONF, "true")


def _reused_dataframe_queries(df) -> list:
    """A filtered, unfiltered, other filtered and unfiltered query on one DataFrame (Spark plans a Python
    source's scan once per loaded DataFrame, so a pushed plan must not leak into the later queries)."""
    first, other = "offset >= 300 AND offset < 420", "partition = 1 AND offset < 150"
    return [(df.filter(first).count(), len(df.filter(first).collect()), df.filter(first).rdd.getNumPartitions()),
            (df.count(), len(df.collect()), df.rdd.getNumPartitions()),
            (df.filter(other).count(), len(df.filter(other).collect()), df.filter(other).rdd.getNumPartitions()),
            (df.count(), len(df.collect()), df.rdd.getNumPartitions()),
            (df.filter(first).union(df.filter(other)).count(),)]


def test_reused_dataframe_after_filtered_queries_reads_everything(spark, data):
    all_pets = expected(data, "pets", range(PETS_PARTITIONS))
    n_first = sum(1 for r in all_pets if 300 <= r[2] < 420)
    n_other = sum(1 for r in all_pets if r[1] == 1 and r[2] < 150)
    assert 0 < n_first < n_other + n_first < len(all_pets)
    splits_all = _read(spark, data, subscribe="pets", splitSize="64k").rdd.getNumPartitions()
    assert splits_all > 2
    for df in (_read(spark, data, subscribe="pets", splitSize="64k"),
               _read_schema(spark, data, "offset bigint, partition int", subscribe="pets", splitSize="64k")):
        got = _reused_dataframe_queries(df)
        assert [g[:2] for g in got[:4]] == [(n_first, n_first), (len(all_pets), len(all_pets)),
                                            (n_other, n_other), (len(all_pets), len(all_pets))]
        assert [g[2] for g in got[:4]] == [splits_all] * 4                   # every query plans every split
        assert got[4] == (n_first + n_other,)                                 # both branches scan the same df


# -- user schema as a projection ----------------------------------------------------------------------------------

HEADERS_DDL = "array<struct<key:string,value:binary>>"


def _read_schema(spark, root: str, schema, **options):
    reader = spark.read.format("seglog").schema(schema).option("path", root)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _sorted(df) -> list:
    """df's rows as tuples, in a total order (values may be None)."""
    return sorted(map(tuple, df.collect()), key=repr)


def _source_batches(schema, **options) -> list:
    """The RecordBatches the source's own reader yields for `schema` (what travels to the JVM)."""
    from seglog.spark import SeglogDataSource

    reader = SeglogDataSource(options).reader(schema)
    return [b for split in reader.partitions() for b in reader.read(split)]


def test_schema_value_only_builds_one_column(spark, data):
    from pyspark.sql.types import BinaryType, StructField, StructType

    want = expected(data, "pets", range(PETS_PARTITIONS))
    df = _read_schema(spark, data, "value binary", subscribe="pets")
    assert [(f.name, f.dataType) for f in df.schema.fields] == [("value", BinaryType())]
    got = sorted((bytes(r[0]) if r[0] is not None else b"\0null") for r in df.collect())
    assert got == sorted((r[4] if r[4] is not None else b"\0null") for r in want)
    batches = _source_batches(StructType([StructField("value", BinaryType())]), path=data, subscribe="pets")
    assert {tuple(b.schema.names) for b in batches} == {("value",)}
    assert sum(b.num_rows for b in batches) == len(want)
    full = _read(spark, data, subscribe="pets")                          # the same column as the full schema's
    assert _sorted(df) == _sorted(full.select("value"))


def test_schema_several_columns_reordered_with_headers(spark, data):
    want = expected(data, "pets", range(PETS_PARTITIONS))
    ddl = f"OFFSET bigint, headers {HEADERS_DDL}, partition int, Key binary, timestampType int"
    df = _read_schema(spark, data, ddl, subscribe="pets")           # naming headers implies includeHeaders
    assert df.columns == ["OFFSET", "headers", "partition", "Key", "timestampType"]
    got = []
    for r in df.collect():
        hs = None if r["headers"] is None else tuple(
            (h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"])
        got.append((r["partition"], r["OFFSET"], None if r["Key"] is None else bytes(r["Key"]), r["timestampType"],
                    hs))
    assert sorted(got) == [(r[1], r[2], r[3], r[6], r[7]) for r in want]
    full = _read(spark, data, subscribe="pets", includeHeaders="true")
    assert _sorted(df) == _sorted(full.select("offset", "headers", "partition", "key", "timestampType"))
    no_headers = _read_schema(spark, data, "topic string, timestamp timestamp", subscribe="pets",
                              includeHeaders="true")               # includeHeaders but headers not asked for
    assert no_headers.columns == ["topic", "timestamp"] and no_headers.count() == len(want)


def test_schema_projection_with_pushed_filters(spark, data):
    want = [(r[2], r[4]) for r in expected(data, "pets", [1]) if 300 <= r[2] < 420]

    def load(**opts):
        return _read_schema(spark, data, "offset bigint, value binary", assign='{"pets": [1]}', splitSize="16k",
                            **opts)
    splits_all = load().rdd.getNumPartitions()
    pushed = load(pushFilters="true").filter("offset >= 300 AND offset < 420")
    assert pushed.rdd.getNumPartitions() < splits_all                     # offsets pushed, ranges narrowed
    assert sorted((r["offset"], None if r["value"] is None else bytes(r["value"])) for r in pushed.collect()) == want


def test_schema_errors(spark, data):
    from pyspark.sql.types import StructType

    for ddl, message in [("value binary, nope int", r"column 'nope'.* does not have; its columns are: key binary, "
                                                     r"value binary, .*timestampType int, headers array"),
                         ("value string", r"column 'value' has type binary, the schema declares string"),
                         ("offset int", r"column 'offset' has type bigint"),
                         ("headers array<string>", r"column 'headers' has type array<struct<key:string"),
                         ("value binary not null", r"column 'value' may be null"),
                         ("value binary, VALUE binary", r"names column 'value' twice")]:
        with pytest.raises(Exception, match=message):
            _read_schema(spark, data, ddl, subscribe="pets").collect()
    with pytest.raises(Exception, match="names no column; name some of: key binary"):
        _read_schema(spark, data, StructType([]), subscribe="pets").collect()
    from seglog.spark import SeglogDataSource, SourceOptionError
    with pytest.raises(SourceOptionError, match="does not have"):
        SeglogDataSource({"path": data, "subscribe": "pets"}).streamReader(
            StructType.fromDDL("value binary, extra binary"))


# -- streaming ------------------------------------------------------------------------------------------------

def _append(root: str, topic: str, partition: int, n: int, tag: str) -> None:
    with Log(os.path.join(root, f"{topic}-{partition}")) as lg:
        lg.append_batch([b"%s-%d-%d" % (tag.encode(), partition, i) for i in range(n)],
                        keys=[b"k%d" % i for i in range(n)], compression="zstd")


def test_streaming_three_triggers_and_restart(spark, data, tmp_path):
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    for p in range(2):
        _append(data, "stream", p, 500, "a")

    def start():
        stream = (spark.readStream.format("seglog").option("path", data).option("subscribe", "stream")
                  .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "400").load())
        return (stream.select("partition", "offset", "value").writeStream.format("parquet")
                .option("path", out).option("checkpointLocation", checkpoint).start())

    q = start()
    try:
        q.processAllAvailable()
        for p in range(2):
            _append(data, "stream", p, 300, "b")
        q.processAllAvailable()
        batches_first_run = [b for b in q.recentProgress if b["numInputRows"] > 0]
    finally:
        q.stop()
    for p in range(2):
        _append(data, "stream", p, 200, "c")           # written while the query is down
    q = start()
    try:
        q.processAllAvailable()
        batches_second_run = [b for b in q.recentProgress if b["numInputRows"] > 0]
    finally:
        q.stop()
    rows = [(r["partition"], r["offset"], bytes(r["value"])) for r in spark.read.parquet(out).collect()]
    assert len(rows) == len(set(rows)) == 2 * 1000                   # no duplicates, nothing lost
    want = [(r[1], r[2], r[4]) for r in expected(data, "stream", range(2))]
    assert sorted(rows) == want
    assert len(batches_first_run) + len(batches_second_run) >= 3
    assert all(b["numInputRows"] <= 402 for b in batches_first_run + batches_second_run)   # maxOffsetsPerTrigger


def test_streaming_available_now(spark, data, tmp_path):
    stream = (spark.readStream.format("seglog").option("path", data).option("subscribe", "pets")
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "2500").load())
    q = (stream.writeStream.format("memory").queryName("pets_available_now").trigger(availableNow=True)
         .option("checkpointLocation", str(tmp_path / "cp")).start())
    q.awaitTermination(120)
    batches = [b for b in q.recentProgress if b["numInputRows"] > 0]
    total = spark.sql("SELECT count(*) AS n, count(DISTINCT partition, offset) AS d "
                      "FROM pets_available_now").collect()[0]
    want = len(expected(data, "pets", range(PETS_PARTITIONS)))
    assert total["n"] == total["d"] == want
    assert len(batches) >= 3


def test_streaming_with_a_schema_projection(spark, data, tmp_path):
    stream = (spark.readStream.format("seglog").schema("value binary, Offset bigint").option("path", data)
              .option("subscribe", "pets").option("startingOffsets", "earliest").load())
    assert stream.columns == ["value", "Offset"]
    q = (stream.writeStream.format("memory").queryName("pets_projected").trigger(availableNow=True)
         .option("checkpointLocation", str(tmp_path / "cp")).start())
    q.awaitTermination(120)
    got = sorted(((r["Offset"], None if r["value"] is None else bytes(r["value"]))
                  for r in spark.sql("SELECT * FROM pets_projected").collect()), key=repr)
    assert got == sorted(((r[2], r[4]) for r in expected(data, "pets", range(PETS_PARTITIONS))), key=repr)


# -- writer ---------------------------------------------------------------------------------------------------

def test_writer_round_trip(spark, data):
    from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, StringType, StructField, StructType)

    schema = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                         StructField("partition", IntegerType()),
                         StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                                      StructField("value", BinaryType())])))])
    rows = []
    for i in range(600):
        key = None if i % 5 == 0 else b"user-%d" % (i % 37)
        part = 2 if i % 7 == 0 else None
        hdrs = [("seq", b"%d" % i)] if i % 3 == 0 else None
        rows.append((key, b"value-%d" % i, part, hdrs))
    df = spark.createDataFrame(rows, schema).repartition(2)
    df.write.format("seglog").option("path", data).option("topic", "sink").mode("append").save()
    written = [r for p in range(3) for r in expected(data, "sink", [p])]
    assert len(written) == len(rows)
    by_value = {r[4]: r for r in written}
    for key, value, part, hdrs in rows:
        got = by_value[value]
        assert got[3] == key and (got[7] or None) == (tuple(hdrs) if hdrs else None)
        if part is not None:
            assert got[1] == part
        elif key is not None:
            assert got[1] == (murmur2(key) & 0x7FFFFFFF) % 3          # where Kafka's Java producer puts it
    assert {r[1] for r in written if r[3] is None and r[4] not in {v for _, v, p, _ in rows if p is not None}} \
        == {0, 1, 2}                                                   # null keys are spread round-robin
    back = _read(spark, data, subscribe="sink", includeHeaders="true")
    assert _rows(back) == sorted(written, key=lambda t: (t[0], t[1], t[2]))

    text = spark.createDataFrame([("sink", "ключ", "значение"), ("sink", None, "plain")],
                                 "topic string, key string, value string")
    text.write.format("seglog").option("path", data).mode("append").save()   # topic from the column
    after = expected(data, "sink", range(3))
    assert len(after) == len(rows) + 2
    assert {(r[3], r[4]) for r in after} - {(r[3], r[4]) for r in written} == {
        ("ключ".encode(), "значение".encode()), (None, b"plain")}      # strings are written as UTF-8


def test_writer_errors(spark, data):
    df = spark.createDataFrame([(b"k", b"v")], "key binary, value binary")
    with pytest.raises(Exception, match="does not exist"):
        df.write.format("seglog").option("path", data).option("topic", "nope").mode("append").save()
    with pytest.raises(Exception, match="append-only"):
        df.write.format("seglog").option("path", data).option("topic", "sink").mode("overwrite").save()
    with pytest.raises(Exception, match="needs a 'value' column"):
        df.select("key").write.format("seglog").option("path", data).option("topic", "sink").mode("append").save()
    with pytest.raises(Exception, match="no topic to write to"):
        df.write.format("seglog").option("path", data).mode("append").save()


# -- bad input ------------------------------------------------------------------------------------------------

def test_bad_paths(spark, data, tmp_path):
    with pytest.raises(Exception, match="does not exist"):
        _read(spark, str(tmp_path / "missing"), subscribe="pets")
    with pytest.raises(Exception, match="partition directory, not a data directory"):
        _read(spark, os.path.join(data, "pets-0"), subscribe="pets")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "notes.txt").write_text("hello")
    with pytest.raises(Exception, match="not a seglog data directory"):
        _read(spark, str(tmp_path / "junk"), subscribe="pets")
    with pytest.raises(Exception, match="option path is required"):
        spark.read.format("seglog").option("subscribe", "pets").load()


def test_bad_topics_and_options(spark, data):
    with pytest.raises(Exception, match="'nope'.* not found"):
        _read(spark, data, subscribe="pets,nope")
    with pytest.raises(Exception, match=r"partition\(s\) \[7\] of topic 'pets' do not exist"):
        _read(spark, data, assign='{"pets": [0, 7]}')
    with pytest.raises(Exception, match="no topic in data directory .* matches subscribePattern"):
        _read(spark, data, subscribePattern="zzz.*").count()
    with pytest.raises(Exception, match="exactly one of the options subscribe, subscribePattern or assign"):
        _read(spark, data, subscribe="pets", assign='{"pets": [0]}')
    with pytest.raises(Exception, match="startingOffsets is not valid JSON"):
        _read(spark, data, subscribe="pets", startingOffsets="{pets: 1}").count()
    with pytest.raises(Exception, match="must map partitions to numbers"):
        _read(spark, data, subscribe="pets", startingOffsets='{"pets": 5}').count()
    with pytest.raises(Exception, match="'latest' \\(-1\\) is not allowed for batch queries"):
        _read(spark, data, subscribe="pets", startingOffsets="latest").count()
    with pytest.raises(Exception, match="names partition\\(s\\) pets-9"):
        _read(spark, data, subscribe="pets", endingOffsets='{"pets": {"9": 5}}').count()
    with pytest.raises(Exception, match="option splitSize must be a size"):
        _read(spark, data, subscribe="pets", splitSize="big").count()


def test_offsets_out_of_range_follow_fail_on_data_loss(spark, data):
    beyond = '{"pets": {"0": 999999}}'
    with pytest.raises(Exception, match="DataLossError.*starting offset 999999 of pets-0 is past the committed end"):
        _read(spark, data, assign='{"pets": [0]}', startingOffsets=beyond).count()
    assert _read(spark, data, assign='{"pets": [0]}', startingOffsets=beyond, failOnDataLoss="false").count() == 0
    deleted = '{"pets": {"1": 5}}'
    with pytest.raises(Exception, match="starting offset 5 of pets-1 was deleted"):
        _read(spark, data, assign='{"pets": [1]}', startingOffsets=deleted).count()
    tolerant = _read(spark, data, assign='{"pets": [1]}', startingOffsets=deleted, failOnDataLoss="false")
    assert _rows(tolerant, headers=False) == [r[:7] + (None,) for r in expected(data, "pets", [1])]
    with pytest.raises(Exception, match="ending offset 999999 of pets-0 is past the committed end"):
        _read(spark, data, assign='{"pets": [0]}', endingOffsets='{"pets": {"0": 999999}}').count()


# -- without a SparkSession: planning, decoding and data loss at read time ----------------------------------

def test_plan_covers_ranges_exactly(data):
    from seglog.spark.batch_reader import plan_batch
    from seglog.spark.options import parse_read_options

    def splits(**extra):
        return plan_batch(parse_read_options({"path": data, "subscribe": "pets", **extra}, streaming=False))

    for plan in (splits(), splits(splitSize="16k"), splits(minPartitions="25"), splits(splitSize="1")):
        for p in range(PETS_PARTITIONS):
            mine = [s for s in plan if s.partition == p]
            with Log(os.path.join(data, f"pets-{p}"), readonly=True) as lg:
                assert mine[0].start == lg.start_offset and mine[-1].end == lg.end_offset
            assert all(a.end == b.start for a, b in zip(mine, mine[1:]))
            assert all(s.start < s.end for s in mine)
    assert len(splits()) == PETS_PARTITIONS
    assert len(splits(minPartitions="25")) >= 25
    assert len(splits(splitSize="16k")) > len(splits(splitSize="64k")) > PETS_PARTITIONS


def test_timestamp_pushdown_prunes_offsets(data):
    from seglog.spark.batch_reader import plan_batch
    from seglog.spark.filters import Pushed
    from seglog.spark.options import parse_read_options

    options = parse_read_options({"path": data, "assign": '{"pets": [0]}'}, streaming=False)
    ts = T0 + 20_000
    plan = plan_batch(options, Pushed(min_timestamp=ts))
    first = _first_at_or_after(expected(data, "pets", [0]), ts)
    assert plan[0].start == first > 0 and plan[0].min_timestamp == ts
    assert all(r[5] < ts for r in expected(data, "pets", [0]) if r[2] < first)


def test_arrow_decode_in_pieces_equals_records(data):
    """Decoding one batch per call (max_output_bytes=1) gives exactly Log.records(): range ends dropped, the
    control batch skipped, headers (null lists, null values, non-ASCII keys) intact, valid Arrow arrays."""
    from seglog.spark.arrow_reader import BatchBuilder, arrow_schema

    with Log(os.path.join(data, "pets-0"), readonly=True) as lg:
        views, offset = [], 0
        while offset < lg.end_offset:                  # every segment's batches, back to back
            view, offset = lg.read_next(offset, 1 << 30)
            views.append(bytes(view))
        view = b"".join(views)
        want = [(r.offset, r.key, r.value, r.timestamp, r.headers or None) for r in lg.records(3, 2900)]
    got, pos, calls = [], 0, 0
    build = BatchBuilder("pets", 0, arrow_schema(True)).build
    data_view = memoryview(view)
    while pos < len(data_view):
        cols = _engine.arrow_columns(data_view[pos:], 3, 2900, True, max_output_bytes=1)
        calls += 1
        batch = build(cols)
        batch.validate(full=True)
        for row in batch.to_pylist():
            hs = None if row["headers"] is None else tuple((h["key"], h["value"]) for h in row["headers"])
            got.append((row["offset"], row["key"], row["value"], int(row["timestamp"].timestamp() * 1000), hs))
        if cols["done"] or not cols["consumed"]:
            break
        pos += cols["consumed"]
    assert cols["done"] and pos < len(data_view)          # stopped at the first batch past the range
    assert got == want and calls > 3


def test_data_deleted_after_planning(data, tmp_path):
    from seglog.spark.arrow_reader import read_split
    from seglog.spark.errors import DataLossError
    from seglog.spark.splits import OffsetRangeSplit

    root = str(tmp_path / "dir")
    path = os.path.join(root, "gone-0")
    with Log(path, LogConfig(segment_bytes=4096)) as lg:
        lg.append_batch([b"x" * 100 for _ in range(400)])
        end = lg.end_offset
    split = OffsetRangeSplit("gone", 0, 0, end, path)
    lenient = OffsetRangeSplit("gone", 0, 0, end, path, fail_on_data_loss=False)
    with Log(path) as lg:                       # retention after the query was planned
        lg.delete_records_before(250)
    with pytest.raises(DataLossError, match="were deleted after the query was planned"):
        list(read_split(split))
    offsets = [o for b in read_split(lenient) for o in b.column("offset").to_pylist()]
    assert offsets == list(range(250, end))
    shutil.rmtree(path)
    with pytest.raises(DataLossError, match="cannot be opened on this executor"):
        list(read_split(split))
    assert list(read_split(lenient)) == []


def test_max_records_per_partition(spark, data):
    from seglog.spark.batch_reader import plan_batch
    from seglog.spark.options import parse_read_options

    plan = plan_batch(parse_read_options({"path": data, "subscribe": "pets", "maxRecordsPerPartition": "700"},
                                         streaming=False))
    for p in range(PETS_PARTITIONS):
        mine = [s for s in plan if s.partition == p]
        assert all(0 < s.end - s.start <= 700 for s in mine)
        assert all(a.end == b.start for a, b in zip(mine, mine[1:]))
    df = _read(spark, data, subscribe="pets", includeHeaders="true", maxRecordsPerPartition="700")
    assert df.rdd.getNumPartitions() == len(plan) >= 3000 * PETS_PARTITIONS // 700
    assert _rows(df) == expected(data, "pets", range(PETS_PARTITIONS))


# -- behaviour under concurrent writers and high watermarks -----------------------------------------------------

def test_high_watermark_below_log_end_is_never_read_past(spark, tmp_path):
    """A log whose high watermark (replication's commit point) is below its end: readers stop at the high
    watermark, in the middle of a batch here, whatever the split size."""
    root = tmp_path / "hwdir"
    path = str(root / "hw-0")
    with Log(path, LogConfig(segment_bytes=4096)) as lg:
        for i in range(10):
            lg.append_batch([b"r%d" % (100 * i + j) for j in range(100)])
        lg.high_watermark = 640
    with Log(path, readonly=True) as lg:
        assert (lg.high_watermark, lg.end_offset) == (640, 1000)
    for options in ({}, {"splitSize": "1k"}, {"minPartitions": "7"}):
        df = _read(spark, str(root), subscribe="hw", **options)
        got = sorted((r["offset"], bytes(r["value"])) for r in df.select("offset", "value").collect())
        assert got == [(o, b"r%d" % o) for o in range(640)], options
    with pytest.raises(Exception, match="ending offset 900 of hw-0 is past the committed end 640"):
        _read(spark, str(root), subscribe="hw", endingOffsets='{"hw": {"0": 900}}').count()


_APPENDER = textwrap.dedent("""
    import os, sys, time
    from seglog import Log, LogConfig
    path, stop = sys.argv[1], sys.argv[2]
    with Log(path, LogConfig(segment_bytes=256 * 1024)) as lg:
        while not os.path.exists(stop):
            n = lg.end_offset
            lg.append_batch([b"v%d" % (n + i) for i in range(300)], keys=[b"k%d" % (n + i) for i in range(300)],
                            compression="lz4" if n % 600 else None)
            print(lg.end_offset, flush=True)
            time.sleep(0.01)
""")


def test_reading_while_another_process_appends(spark, tmp_path):
    """A writer process appends (~30,000 records/s, rolling 256 KiB segments) while Spark reads: every read is
    a gap-free prefix 0..n-1 of what is written, with the right keys and values, and later reads see at least
    as much."""
    root = tmp_path / "livedir"
    root.mkdir()
    path = str(root / "live-0")
    stop = str(tmp_path / "stop")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(_engine.__file__))),
                                         env.get("PYTHONPATH", "")])
    writer = subprocess.Popen([sys.executable, "-c", _APPENDER, path, stop], stdout=subprocess.PIPE, text=True,
                              env=env)
    check = ["count(*) AS n", "min(offset) AS lo", "max(offset) AS hi", "count(DISTINCT offset) AS d",
             "sum(CASE WHEN key = CAST(concat('k', offset) AS BINARY) AND value = CAST(concat('v', offset) AS BINARY) "
             "THEN 0 ELSE 1 END) AS bad"]
    seen = []
    try:
        while int(writer.stdout.readline() or 0) < 3000:
            assert writer.poll() is None, "the writer process died"
        for _ in range(3):
            r = _read(spark, str(root), subscribe="live", splitSize="512k").selectExpr(*check).collect()[0]
            assert (r["lo"], r["hi"], r["d"], r["bad"]) == (0, r["n"] - 1, r["n"], 0), r
            seen.append(r["n"])
        assert writer.poll() is None, "the writer stopped before the reads ended: nothing was concurrent"
    finally:
        open(stop, "w").close()
        writer.stdout.read()
        writer.wait(30)
    assert writer.returncode == 0
    assert seen == sorted(seen) and seen[0] >= 3000 and seen[-1] > seen[0]
    with Log(path, readonly=True) as lg:
        final = lg.end_offset
    assert _read(spark, str(root), subscribe="live").count() == final >= seen[-1]


def test_planning_reads_segment_metadata_only(data, monkeypatch):
    """Planning (batch and streaming, every kind of range and split sizing) never reads a record range: no
    Log.read/read_next/records call and no Arrow decoding. The only records decoded are those of the single
    batch answering each timestamp lookup (the time index leads to it, as Kafka's ListOffsets). The same spies
    do see a split being read."""
    from seglog.spark.arrow_reader import read_split
    from seglog.spark.batch_reader import plan_batch
    from seglog.spark.catalog import PartitionLog
    from seglog.spark.filters import Pushed
    from seglog.spark.options import parse_read_options
    from seglog.spark.stream_reader import SeglogStreamReader

    calls = []

    def spy(name, fn, method):
        if method:
            def wrapper(self, *args, **kwargs):
                calls.append((name, None))
                return fn(self, *args, **kwargs)
        else:
            def wrapper(data, *args, **kwargs):
                view = memoryview(data).cast("B")
                one_batch = len(view) >= 12 and 12 + int.from_bytes(view[8:12], "big") == len(view)
                calls.append((name, one_batch))
                return fn(data, *args, **kwargs)
        return wrapper

    for name in ("read", "read_next", "records"):
        monkeypatch.setattr(Log, name, spy(name, getattr(Log, name), True))
    monkeypatch.setattr(PartitionLog, "offset_for_timestamp",
                        spy("lookup", PartitionLog.offset_for_timestamp, True))
    for name in ("arrow_columns", "decode_records"):
        monkeypatch.setattr(_engine, name, spy(name, getattr(_engine, name), False))

    def plan(pushed=None, **extra):
        return plan_batch(parse_read_options({"path": data, "subscribe": "pets", **extra}, streaming=False), pushed)

    plans = [plan(), plan(splitSize="16k"), plan(minPartitions="25"), plan(maxRecordsPerPartition="500"),
             plan(startingOffsets='{"pets": {"0": 10, "1": 700}}', endingOffsets='{"pets": {"0": 2000}}'),
             plan(startingTimestamp=str(T0 + 5_000), endingTimestamp=str(T0 + 21_000)),
             plan(Pushed(min_timestamp=T0 + 20_000, offset_lo=300, offset_hi=2500), splitSize="16k")]
    stream = SeglogStreamReader(parse_read_options({"path": data, "subscribe": "pets", "startingOffsets": "earliest"},
                                                   streaming=True))
    start = stream.initialOffset()
    stream.partitions(start, stream.latestOffset(start, stream.getDefaultReadLimit()))
    assert all(plans)
    names = [n for n, _ in calls]
    assert not {"read", "read_next", "records", "arrow_columns"} & set(names), names
    lookups, decodes = names.count("lookup"), [one for n, one in calls if n == "decode_records"]
    assert lookups == 3 * 2 + 3 and 0 < len(decodes) <= lookups and all(decodes)
    calls.clear()
    assert sum(b.num_rows for b in read_split(plans[1][0])) > 0
    assert {"read_next", "arrow_columns"} <= {n for n, _ in calls}       # the spies see a read


def test_import_seglog_imports_neither_pyspark_nor_pyarrow():
    check = ("import sys, seglog, seglog.client, seglog.remote; seglog.connect; {extra}"
             "print(sorted({{m.split('.')[0] for m in sys.modules}} & {{'pyspark', 'pyarrow', 'pandas'}}))")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(_engine.__file__))),
                                         env.get("PYTHONPATH", "")])
    plain = subprocess.run([sys.executable, "-c", check.format(extra="")], capture_output=True, text=True, env=env)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.strip() == "[]"
    spark = subprocess.run([sys.executable, "-c", check.format(extra="import seglog.spark; ")], capture_output=True,
                           text=True, env=env)
    assert spark.returncode == 0, spark.stderr
    assert "pyspark" in spark.stdout and "pyarrow" in spark.stdout    # the check does see them when imported


def test_pyspark_floor_is_4_2():
    """maxOffsetsPerTrigger (read limits) and Trigger.AvailableNow need pyspark 4.2: the extras require it and
    seglog.spark refuses an older pyspark at import with a clear message."""
    import re

    import pyspark
    from seglog.spark import check_pyspark_version

    for old in ("4.1.3", "4.0.0", "3.5.2"):
        with pytest.raises(ImportError, match=f"needs pyspark >= 4.2 .*this is pyspark {old}"):
            check_pyspark_version(old)
    for ok in ("4.2.0", "4.3.0", "5.0.0.dev1", pyspark.__version__):
        check_pyspark_version(ok)
    pyproject = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "pyproject.toml")
    if not os.path.exists(pyproject):
        pytest.skip("not run from a source checkout")
    with open(pyproject, encoding="utf-8") as f:
        text = f.read()
    for extra in ("spark", "test"):
        body = re.search(rf"^{extra} = \[(.*?)\]$", text, re.S | re.M).group(1)
        assert re.findall(r'"pyspark([^"]*)"', body) == [">=4.2"], extra


# -- broker mode (Kafka protocol) -------------------------------------------------------------------------------

B_PETS = "spark-bpets"
B_CODECS = "spark-bcodecs"
B_APPEND = "spark-bappend"


@pytest.fixture(scope="module")
def broker_data(seglog_broker):
    """Topics on the session's broker, written through the broker's own Logs in-process like `data`: spark-bpets
    (3 partitions of 64 KiB segments, a control batch, a raised start offset), spark-bcodecs (one codec per
    partition), spark-bappend (LogAppendTime). Returns the broker."""
    node = seglog_broker.node
    rnd = random.Random(77)
    node.create_topic(B_PETS, PETS_PARTITIONS, {"segment.bytes": 64 * 1024})
    for p in range(PETS_PARTITIONS):
        lg = node.partition(B_PETS, p).log
        values, keys, headers, stamps = _records(rnd, PETS_RECORDS, T0)
        lg.append_batch(values, keys=keys, headers=headers, timestamps=stamps, compression=CODECS[p])
        if p == 0:
            lg.append_as_follower(_control_batch(lg.end_offset))
        values, keys, headers, stamps = _records(rnd, PETS_RECORDS, T0 + 10 * PETS_RECORDS)
        lg.append_batch(values, keys=keys, headers=headers, timestamps=stamps, compression=CODECS[3 + p % 2])
        if p == 1:
            lg.delete_records_before(DELETED_BEFORE)
    node.create_topic(B_CODECS, len(CODECS))
    for p, codec in enumerate(CODECS):
        values, keys, headers, stamps = _records(rnd, 700, T0)
        node.partition(B_CODECS, p).log.append_batch(values, keys=keys, headers=headers, timestamps=stamps,
                                                     compression=codec)
    node.create_topic(B_APPEND, 1, {"message.timestamp.type": "LogAppendTime"})
    values, keys, headers, stamps = _records(rnd, 500, T0)
    node.partition(B_APPEND, 0).log.append_batch(values, keys=keys, headers=headers, timestamps=stamps)
    return seglog_broker


def _broker_logs(broker):
    return lambda t, p: contextlib.nullcontext(broker.node.partition(t, p).log)


def _read_broker(spark, servers: str, **options):
    reader = spark.read.format("seglog").option("kafka.bootstrap.servers", servers)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _broker_plan(servers: str, **options):
    from seglog.spark.batch_reader import plan_batch
    from seglog.spark.options import parse_read_options

    return plan_batch(parse_read_options({"kafka.bootstrap.servers": servers, **options}, streaming=False))


def _offsets(split) -> list:
    from seglog.spark.arrow_reader import read_split

    return [o for b in read_split(split) for o in b.column("offset").to_pylist()]


def test_broker_mode_equals_log_records(spark, broker_data):
    servers, logs = broker_data.bootstrap_servers, _broker_logs(broker_data)
    df = _read_broker(spark, servers, subscribe=B_PETS, includeHeaders="true")
    want = expected_from(logs, B_PETS, range(PETS_PARTITIONS))
    assert len(want) == PETS_PARTITIONS * 2 * PETS_RECORDS - DELETED_BEFORE
    assert _rows(df) == want
    assert df.rdd.getNumPartitions() == PETS_PARTITIONS               # one split per partition's range
    from pyspark.sql import functions as F
    agg = df.groupBy("partition").agg(F.count("*").alias("n"), F.min("offset").alias("lo"),
                                      F.max("offset").alias("hi"), F.sum(F.length("value")).alias("bytes"))
    got = {r["partition"]: (r["n"], r["lo"], r["hi"], r["bytes"]) for r in agg.collect()}
    for p in range(PETS_PARTITIONS):
        mine = [r for r in want if r[1] == p]
        assert got[p] == (len(mine), mine[0][2], mine[-1][2], sum(len(r[4]) for r in mine if r[4] is not None))
    codecs = _read_broker(spark, servers, subscribe=B_CODECS, includeHeaders="true")
    assert _rows(codecs) == expected_from(logs, B_CODECS, range(len(CODECS)))
    appended = _rows(_read_broker(spark, servers, subscribe=B_APPEND), headers=False)
    assert appended == [r[:7] + (None,) for r in expected_from(logs, B_APPEND, [0])]
    assert {r[6] for r in appended} == {1}                             # LogAppendTime
    plain = _read_broker(spark, servers, subscribe=B_CODECS)            # the option without "kafka." works too
    assert spark.read.format("seglog").option("bootstrap.servers", servers).option("subscribe", B_CODECS) \
        .load().count() == plain.count() == 5 * 700


def test_broker_mode_schema_projection(spark, broker_data):
    from pyspark.sql.types import StructType

    servers, logs = broker_data.bootstrap_servers, _broker_logs(broker_data)
    want = expected_from(logs, B_PETS, range(PETS_PARTITIONS))
    ddl = f"headers {HEADERS_DDL}, offset bigint, value binary"
    df = (spark.read.format("seglog").schema(ddl).option("kafka.bootstrap.servers", servers)
          .option("subscribe", B_PETS).load())
    assert df.columns == ["headers", "offset", "value"]
    full = _read_broker(spark, servers, subscribe=B_PETS, includeHeaders="true")
    assert _sorted(df) == _sorted(full.select("headers", "offset", "value"))
    assert len(_sorted(df)) == len(want)
    batches = _source_batches(StructType.fromDDL("value binary"), **{"kafka.bootstrap.servers": servers,
                                                                    "subscribe": B_PETS})
    assert {tuple(b.schema.names) for b in batches} == {("value",)}
    assert sorted(v for b in batches for v in b.column("value").to_pylist() if v is not None) == \
        sorted(r[4] for r in want if r[4] is not None)


def test_broker_mode_offset_and_timestamp_ranges(spark, broker_data):
    servers, logs = broker_data.bootstrap_servers, _broker_logs(broker_data)
    starting = f'{{"{B_PETS}": {{"0": 10, "1": -2, "2": 2999}}}}'
    ending = f'{{"{B_PETS}": {{"0": 1200, "1": 1700, "2": -1}}}}'
    df = _read_broker(spark, servers, subscribe=B_PETS, includeHeaders="true", startingOffsets=starting,
                      endingOffsets=ending)
    assert _rows(df) == expected_from(logs, B_PETS, range(3), {0: 10, 2: 2999}, {0: 1200, 1: 1700})
    recs = {p: expected_from(logs, B_PETS, [p]) for p in range(2)}
    start_ts, end_ts = T0 + 5_000, T0 + 21_000
    assign = f'{{"{B_PETS}": [0, 1]}}'
    df = _read_broker(spark, servers, assign=assign, includeHeaders="true", startingTimestamp=str(start_ts),
                      endingTimestamp=str(end_ts))
    want = expected_from(logs, B_PETS, range(2), {p: _first_at_or_after(recs[p], start_ts) for p in range(2)},
                         {p: _first_at_or_after(recs[p], end_ts) for p in range(2)})
    assert want and _rows(df) == want
    by_partition = _read_broker(spark, servers, assign=assign, includeHeaders="true",
                                startingOffsetsByTimestamp=f'{{"{B_PETS}": {{"0": {start_ts}}}}}')
    assert _rows(by_partition) == expected_from(logs, B_PETS, range(2), {0: _first_at_or_after(recs[0], start_ts)})
    with pytest.raises(Exception, match="no record at or after timestamp"):
        _read_broker(spark, servers, subscribe=B_PETS, startingTimestamp=str(T0 + 10**9)).count()
    pattern = _read_broker(spark, servers, subscribePattern=r"spark-b(pets|codecs)")
    got = sorted((r["topic"], r["partition"]) for r in pattern.select("topic", "partition").distinct().collect())
    assert got == [(B_CODECS, p) for p in range(len(CODECS))] + [(B_PETS, p) for p in range(PETS_PARTITIONS)]
    everything = {r["topic"] for r in _read_broker(spark, servers, subscribePattern=".*").select("topic")
                  .distinct().collect()}
    assert B_PETS in everything and not any(t.startswith("__") for t in everything)
    all_pets = expected_from(logs, B_PETS, range(PETS_PARTITIONS))
    many = _read_broker(spark, servers, subscribe=B_PETS, includeHeaders="true", minPartitions="10")
    assert many.rdd.getNumPartitions() >= 10 and _rows(many) == all_pets
    capped = _read_broker(spark, servers, subscribe=B_PETS, includeHeaders="true", maxRecordsPerPartition="1000")
    sizes = [broker_data.node.partition(B_PETS, p).log.end_offset - broker_data.node.partition(B_PETS, p).log
             .start_offset for p in range(PETS_PARTITIONS)]
    assert sizes == [3001, 2900, 3000]                 # the control batch takes offset 1500 of partition 0
    assert capped.rdd.getNumPartitions() == 4 + 3 + 3 and _rows(capped) == all_pets


def test_broker_mode_errors_at_planning(spark, broker_data, free_port):
    servers = broker_data.bootstrap_servers
    dead = f"127.0.0.1:{free_port()}"
    with pytest.raises(Exception, match=f"BrokerUnavailableError: cannot reach the Kafka brokers at {dead}"):
        _read_broker(spark, dead, subscribe=B_PETS)                     # load() already asks the brokers
    with pytest.raises(Exception, match=f"'nope'.* not found on the brokers at {servers}"):
        _read_broker(spark, servers, subscribe=f"{B_PETS},nope")
    with pytest.raises(Exception, match=rf"partition\(s\) \[7\] of topic '{B_PETS}' do not exist"):
        _read_broker(spark, servers, assign=f'{{"{B_PETS}": [0, 7]}}')
    with pytest.raises(Exception, match="no topic on the brokers at .* matches subscribePattern"):
        _read_broker(spark, servers, subscribePattern="zzz.*").count()
    with pytest.raises(Exception, match="kafka.bootstrap.servers: bootstrap server 'localhost' is not host:port"):
        _read_broker(spark, "localhost", subscribe=B_PETS)
    with pytest.raises(Exception, match="options path and kafka.bootstrap.servers exclude each other"):
        _read_broker(spark, servers, subscribe=B_PETS, path="/tmp")
    with pytest.raises(Exception, match="option splitSize sizes splits from segment files"):
        _read_broker(spark, servers, subscribe=B_PETS, splitSize="16k").count()
    with pytest.raises(Exception, match="option path is required.*or read through a broker"):
        spark.read.format("seglog").option("subscribe", B_PETS).load()
    df = spark.createDataFrame([(b"k", b"v")], "key binary, value binary")
    with pytest.raises(Exception, match="the seglog writer appends to a data directory"):
        df.write.format("seglog").option("kafka.bootstrap.servers", servers).option("topic", B_PETS) \
            .mode("append").save()
    from seglog.spark.errors import BrokerUnavailableError
    with pytest.raises(BrokerUnavailableError, match="cannot reach"):
        _broker_plan(dead, subscribe=B_PETS)


def test_broker_mode_over_sasl_ssl(spark, tmp_path, certs):
    """kafka.security.protocol, kafka.ssl.* and kafka.sasl.* (Spark's Kafka source's way to pass client
    settings) reach the driver's and the executors' connections; a bad one fails at load()."""
    from seglog.spark.options import parse_read_options

    ssl = {"ssl.keystore.location": str(certs.server.keystore)}
    with serve(tmp_path, ssl=ssl, sasl_users={"alice": "alice-pw"}) as b:
        b.node.create_topic("secured", 2)
        for p in range(2):
            b.node.partition("secured", p).log.append_batch([f"{p}-{i}".encode() for i in range(50)])
        options = {"kafka.security.protocol": "SASL_SSL", "kafka.ssl.truststore.location": str(certs.ca),
                   "kafka.sasl.mechanism": "SCRAM-SHA-256", "kafka.sasl.username": "alice",
                   "kafka.sasl.password": "alice-pw"}
        df = _read_broker(spark, f"localhost:{b.port}", subscribe="secured", **options)
        assert sorted(r["value"] for r in df.select("value").collect()) == \
            sorted(f"{p}-{i}".encode() for p in range(2) for i in range(50))
        with pytest.raises(Exception, match="SaslAuthenticationError.*Authentication failed"):
            _read_broker(spark, f"localhost:{b.port}", subscribe="secured",
                         **{**options, "kafka.sasl.password": "wrong"})
    with pytest.raises(Exception, match=r"kafka.sasl.\*: sasl.username given, but security.protocol is SSL"):
        parse_read_options({"kafka.bootstrap.servers": "localhost:1", "subscribe": "t",
                            "kafka.security.protocol": "SSL", "kafka.sasl.username": "alice"}, streaming=False)
    with pytest.raises(Exception, match="option kafka.security.protocol applies to broker mode only"):
        parse_read_options({"path": str(tmp_path), "subscribe": "t", "kafka.security.protocol": "SSL"},
                           streaming=False)


def test_broker_mode_fail_on_data_loss(spark, broker_data):
    servers = broker_data.bootstrap_servers
    beyond = f'{{"{B_PETS}": {{"0": 999999}}}}'
    assign0 = f'{{"{B_PETS}": [0]}}'
    with pytest.raises(Exception,
                       match=f"DataLossError.*starting offset 999999 of {B_PETS}-0 is past the committed end"):
        _read_broker(spark, servers, assign=assign0, startingOffsets=beyond).count()
    assert _read_broker(spark, servers, assign=assign0, startingOffsets=beyond, failOnDataLoss="false").count() == 0
    with pytest.raises(Exception, match=f"starting offset 5 of {B_PETS}-1 was deleted"):
        _read_broker(spark, servers, assign=f'{{"{B_PETS}": [1]}}',
                     startingOffsets=f'{{"{B_PETS}": {{"1": 5}}}}').count()


def test_broker_split_data_lost_after_planning(seglog_broker):
    """Retention after planning (Fetch says OFFSET_OUT_OF_RANGE) and a truncation (the high watermark stays
    below the split's end) follow failOnDataLoss, as in local mode."""
    import dataclasses

    from seglog.spark.errors import DataLossError

    node, servers = seglog_broker.node, seglog_broker.bootstrap_servers
    topic = "spark-bgone"
    node.create_topic(topic, 2, {"segment.bytes": 4096})
    for p in range(2):
        for _ in range(4):
            node.partition(topic, p).log.append_batch([b"x" * 100 for _ in range(100)])
    strict = {s.partition: s for s in _broker_plan(servers, subscribe=topic)}
    assert strict[0].end == strict[1].end == 400
    lenient = {p: dataclasses.replace(s, fail_on_data_loss=False) for p, s in strict.items()}
    node.partition(topic, 0).log.delete_records_before(250)
    with pytest.raises(DataLossError, match=f"offsets 0..249 of {topic}-0 were deleted after the query was planned"):
        _offsets(strict[0])
    assert _offsets(lenient[0]) == list(range(250, 400))
    node.partition(topic, 1).log.truncate_to(300)
    quick = dataclasses.replace(strict[1], request_timeout_ms=600)      # how long a lagging leader is waited for
    with pytest.raises(DataLossError, match=f"offsets 300..399 of {topic}-1 are no longer in the log"):
        _offsets(quick)
    assert _offsets(dataclasses.replace(quick, fail_on_data_loss=False)) == list(range(300))


def test_broker_mode_high_watermark_below_log_end(spark, seglog_broker):
    """Broker mode never reads at or past the high watermark (ListOffsets latest and every Fetch stop there;
    Kafka's high watermark moves by whole batches, as followers fetch them)."""
    import dataclasses

    from seglog.spark.errors import DataLossError

    node, servers = seglog_broker.node, seglog_broker.bootstrap_servers
    topic = "spark-bhw"
    node.create_topic(topic, 1)
    lg = node.partition(topic, 0).log
    for i in range(10):
        lg.append_batch([b"r%d" % (100 * i + j) for j in range(100)])
    lg.high_watermark = 600                      # as replication leaves it while followers lag
    assert lg.end_offset == 1000
    for options in ({}, {"minPartitions": "7"}):
        df = _read_broker(spark, servers, subscribe=topic, **options)
        got = sorted((r["offset"], bytes(r["value"])) for r in df.select("offset", "value").collect())
        assert got == [(o, b"r%d" % o) for o in range(600)], options
    plan = _broker_plan(servers, subscribe=topic)
    assert [(s.start, s.end) for s in plan] == [(0, 600)]
    beyond = dataclasses.replace(plan[0], end=700, request_timeout_ms=600)   # as if planned before a truncation
    with pytest.raises(DataLossError, match="offsets 600..699 of spark-bhw-0 are no longer in the log \\(its high "
                                            "watermark is 600 now"):
        _offsets(beyond)
    assert _offsets(dataclasses.replace(beyond, fail_on_data_loss=False)) == list(range(600))


def test_fetch_responses_decode_and_cut_short_batches(broker_data, monkeypatch):
    """arrow_columns takes the records of a real Fetch response and stops before a final batch cut short (as
    brokers end responses at their byte limit); the fetch loop continues from there across responses."""
    from seglog.client import BrokerConnection
    from seglog.protocol import ApiKey
    from seglog.spark import broker as broker_mode

    host, port = broker_data.bootstrap_servers.rsplit(":", 1)
    conn = BrokerConnection(host, int(port))
    try:
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                "topics": [{"topic": B_CODECS, "partitions": [{"partition": 4, "current_leader_epoch": -1,
                                                               "fetch_offset": 0, "log_start_offset": -1,
                                                               "partition_max_bytes": 1 << 20}]}]}
        records = bytes(conn.request(ApiKey.FETCH, body, version=12)["responses"][0]["partitions"][0]["records"])
    finally:
        conn.close()
    whole = _engine.arrow_columns(records, 0, 1 << 62, True, verify_crc=True)
    assert whole["consumed"] == len(records) and whole["rows"] == 700            # zstd, every record
    bounds, pos = [], 0
    while pos < len(records):
        pos += 12 + int.from_bytes(records[pos + 8:pos + 12], "big")
        bounds.append(pos)
    assert len(bounds) > 1
    cut = _engine.arrow_columns(records[:bounds[-1] - 5], 0, 1 << 62, True, verify_crc=True)
    last_base = int.from_bytes(records[bounds[-2]:bounds[-2] + 8], "big")
    assert cut["consumed"] == bounds[-2] and cut["rows"] == last_base and cut["next_offset"] == last_base
    assert not cut["done"]
    monkeypatch.setattr(broker_mode, "FETCH_BYTES", 1)           # every Fetch returns a single batch
    split = _broker_plan(broker_data.bootstrap_servers, assign=f'{{"{B_PETS}": [0]}}')[0]
    assert _offsets(split) == [r[2] for r in expected_from(_broker_logs(broker_data), B_PETS, [0])]


def test_broker_split_follows_the_leader_when_its_hint_is_stale(broker_data, start_broker):
    """A split's leader address is a hint: a broker that does not lead the partition answers with an error
    (here UNKNOWN_TOPIC_OR_PARTITION), and the reader asks the bootstrap servers for the leader again."""
    import dataclasses

    from seglog.client import BrokerConnection
    from seglog.protocol import ApiKey

    other = start_broker()
    split = _broker_plan(broker_data.bootstrap_servers, assign=f'{{"{B_PETS}": [2]}}')[0]
    assert split.location == broker_data.bootstrap_servers
    host, port = other.bootstrap_servers.rsplit(":", 1)
    conn = BrokerConnection(host, int(port))
    try:
        body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1024, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                "topics": [{"topic": B_PETS, "partitions": [{"partition": 2, "current_leader_epoch": -1,
                                                             "fetch_offset": 0, "log_start_offset": -1,
                                                             "partition_max_bytes": 1024}]}]}
        assert conn.request(ApiKey.FETCH, body, version=12)["responses"][0]["partitions"][0]["error_code"] == 3
    finally:
        conn.close()
    stale = dataclasses.replace(split, location=other.bootstrap_servers)
    assert _offsets(stale) == [r[2] for r in expected_from(_broker_logs(broker_data), B_PETS, [2])]


def test_broker_mode_streaming_three_triggers_and_restart(spark, seglog_broker, tmp_path):
    node, servers = seglog_broker.node, seglog_broker.bootstrap_servers
    topic = "spark-bstream"
    node.create_topic(topic, 2)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def append(n: int, tag: bytes) -> None:
        for p in range(2):
            node.partition(topic, p).log.append_batch([b"%s-%d-%d" % (tag, p, i) for i in range(n)],
                                                       compression="zstd")

    def start():
        stream = (spark.readStream.format("seglog").option("kafka.bootstrap.servers", servers)
                  .option("subscribe", topic).option("startingOffsets", "earliest")
                  .option("maxOffsetsPerTrigger", "400").load())
        return (stream.select("partition", "offset", "value").writeStream.format("parquet")
                .option("path", out).option("checkpointLocation", checkpoint).start())

    append(500, b"a")
    q = start()
    try:
        q.processAllAvailable()
        append(300, b"b")
        q.processAllAvailable()
        batches = [b for b in q.recentProgress if b["numInputRows"] > 0]
    finally:
        q.stop()
    append(200, b"c")                                  # written while the query is down
    q = start()
    try:
        q.processAllAvailable()
        batches += [b for b in q.recentProgress if b["numInputRows"] > 0]
    finally:
        q.stop()
    rows = [(r["partition"], r["offset"], bytes(r["value"])) for r in spark.read.parquet(out).collect()]
    assert len(rows) == len(set(rows)) == 2 * 1000
    want = [(r[1], r[2], r[4]) for r in expected_from(_broker_logs(seglog_broker), topic, range(2))]
    assert sorted(rows) == want
    assert len(batches) >= 3 and all(b["numInputRows"] <= 402 for b in batches)


@pytest.mark.zookeeper
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_broker_mode_on_a_cluster_reads_leaders_and_follows_moves(spark, zookeeper_server, tmp_path):
    """Three `seglog broker --zookeeper` processes, a topic with RF=3: Spark reads every partition from its
    leader; a split whose hint is a follower (NOT_LEADER_OR_FOLLOWER) and one whose leader is killed after
    planning are read from the (new) leader with fresh metadata."""
    import dataclasses

    import seglog
    from cluster_harness import Cluster, consume_all
    from seglog.client import BrokerConnection
    from seglog.protocol import ApiKey

    c = Cluster(zookeeper_server.connect_string, tmp_path / "cluster", 3,
                chroot=f"/spark-broker-mode-{int(time.time() * 1000) % 10**8}")
    c.start()
    try:
        topic = "sparkrf"
        c.create_topic(topic, partitions=3, rf=3)
        with seglog.connect(c.bootstrap) as node, seglog.Producer(node, acks="all") as producer:
            for i in range(3000):
                producer.send(topic, b"v%d" % i, key=b"k%d" % i, partition=i % 3)
        want = consume_all(c.bootstrap, topic, range(3))
        assert sum(len(v) for v in want.values()) == 3000
        leaders = {p: c.leader(topic, p) for p in range(3)}
        assert len(set(leaders.values())) > 1, f"leaders not spread: {leaders}"
        df = _read_broker(spark, c.bootstrap, subscribe=topic)
        rows = sorted((r["partition"], r["offset"], bytes(r["key"]), bytes(r["value"])) for r in df.collect())
        assert rows == sorted((p, o, k, v) for p, recs in want.items() for o, k, v in recs)
        splits = {s.partition: s for s in _broker_plan(c.bootstrap, subscribe=topic)}
        for p, s in splits.items():
            assert s.location == "%s:%d" % c.client_addr[leaders[p]]
        follower = next(i for i in c.brokers if i != leaders[0])
        host, port = c.client_addr[follower]
        conn = BrokerConnection(host, port)
        try:
            body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1024, "isolation_level": 0,
                    "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                    "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                                "fetch_offset": 0, "log_start_offset": -1,
                                                                "partition_max_bytes": 1024}]}]}
            assert conn.request(ApiKey.FETCH, body, version=12)["responses"][0]["partitions"][0]["error_code"] == 6
        finally:
            conn.close()
        wanted0 = [o for o, _, _ in want[0]]
        assert _offsets(dataclasses.replace(splits[0], location=f"{host}:{port}")) == wanted0
        c.brokers[leaders[0]].kill()                    # after planning: the split's hint is now a dead broker
        t0 = time.monotonic()
        assert _offsets(splits[0]) == wanted0
        print(f"read through the new leader {time.monotonic() - t0:.1f} s after the kill")
        assert c.leader(topic, 0) != leaders[0]
    finally:
        c.close()

"""The Spark data source (seglog.spark) against seglog's own reader, Log.records().

One local[2] SparkSession serves every test (the ``spark`` fixture in conftest.py). Topics are written with
seglog.Log directly: several small segments per partition, every codec, null keys and values, headers
(with a non-ASCII key), non-monotonic CreateTime timestamps, a LogAppendTime partition, a control batch,
and a partition whose start offset was raised. Every Spark result is compared with the records
Log.records() returns for the same offsets.
"""

from __future__ import annotations

import os
import random
import shutil

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from seglog import Log, LogConfig, _engine  # noqa: E402
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
    """A transaction marker (control batch) at `offset`, as a transactional producer's commit leaves one."""
    w = _engine.BatchWriter(next_offset=offset, producer_id=7, producer_epoch=0, next_sequence=0)
    w.add(b"\x00\x00\x00\x00\x00\x00", b"\x00\x00\x00\x00", None, T0)
    w.finish()
    batch = bytearray(w.take())
    attrs = int.from_bytes(batch[21:23], "big") | 0x30          # transactional + control
    batch[21:23] = attrs.to_bytes(2, "big")
    batch[17:21] = _engine.crc32c(bytes(batch[21:])).to_bytes(4, "big")
    return bytes(batch)


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
    out = []
    for p in partitions:
        with Log(os.path.join(root, f"{topic}-{p}"), readonly=True) as lg:
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

def test_filter_pushdown_and_without_it(spark, data):
    import seglog.spark
    from pyspark.sql import functions as F

    if not seglog.spark.pushdown_available():
        pytest.skip("this pyspark has no Python data source filter pushdown (4.1+)")
    query = "partition = 1 AND offset >= 300 AND offset < 420"
    ts_from = T0 + 12_000
    all_pets = expected(data, "pets", range(PETS_PARTITIONS))
    want_offsets = [r for r in all_pets if r[1] == 1 and 300 <= r[2] < 420]
    want_ts = [r for r in all_pets if r[5] >= ts_from]

    def run():
        df = _read(spark, data, subscribe="pets", includeHeaders="true", splitSize="16k")
        by_offset = df.filter(query)
        by_ts = df.filter(F.col("timestamp") >= F.timestamp_millis(F.lit(ts_from)))
        return df.rdd.getNumPartitions(), by_offset.rdd.getNumPartitions(), _rows(by_offset), _rows(by_ts)

    splits_all, splits_pushed, rows_offset, rows_ts = run()
    assert rows_offset == want_offsets and rows_ts == want_ts
    assert splits_pushed < splits_all and splits_pushed <= 2           # pruned to partition 1, offsets 300..419
    spark.conf.set(seglog.spark.PUSHDOWN_CONF, "false")
    try:
        seglog.spark.register(spark)                                   # the reader without pushFilters
        splits_all2, splits_plain, rows_offset2, rows_ts2 = run()
        assert rows_offset2 == want_offsets and rows_ts2 == want_ts
        assert splits_plain == splits_all2                             # nothing pruned without pushdown
    finally:
        spark.conf.set(seglog.spark.PUSHDOWN_CONF, "true")
        seglog.spark.register(spark)


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
    from seglog.spark.stream_reader import ReadMaxRows
    if ReadMaxRows is not None:                        # pyspark >= 4.2 passes read limits
        assert all(b["numInputRows"] <= 402 for b in batches_first_run + batches_second_run)


def test_streaming_available_now(spark, data, tmp_path):
    from seglog.spark.stream_reader import ReadMaxRows

    if ReadMaxRows is None:
        pytest.skip("Trigger.AvailableNow for Python streaming sources needs pyspark 4.2+")
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
    from seglog.spark.arrow_reader import arrow_schema, to_record_batch

    with Log(os.path.join(data, "pets-0"), readonly=True) as lg:
        views, offset = [], 0
        while offset < lg.end_offset:                  # every segment's batches, back to back
            view, offset = lg.read_next(offset, 1 << 30)
            views.append(bytes(view))
        view = b"".join(views)
        want = [(r.offset, r.key, r.value, r.timestamp, r.headers or None) for r in lg.records(3, 2900)]
    got, pos, calls = [], 0, 0
    data_view = memoryview(view)
    while pos < len(data_view):
        cols = _engine.arrow_columns(data_view[pos:], 3, 2900, True, max_output_bytes=1)
        calls += 1
        batch = to_record_batch(cols, "pets", 0, arrow_schema(True))
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

"""The engine's Arrow decoder (arrow_columns) and the scratch objects it and read-only reads write into:
every field of Log.records() comes out of the Arrow buffers, and a reused buffer never changes under a reader."""

import gc

import pytest

from seglog import Log, _engine

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from seglog.spark.arrow_reader import BatchBuilder, arrow_schema, read_split  # noqa: E402
from seglog.spark.splits import OffsetRangeSplit  # noqa: E402


def txn_batch(pid, values, seq=0):
    w = _engine.BatchWriter(producer_id=pid, producer_epoch=0, next_sequence=seq, transactional=True)
    for v in values:
        w.add(v)
    w.finish()
    return w.take()


def whole_log(lg: Log) -> bytes:
    out, offset = [], lg.start_offset
    while offset < lg.end_offset:
        view, offset = lg.read_next(offset, 1 << 30)
        out.append(bytes(view))
    return b"".join(out)


def rows(data, lo=-1, hi=1 << 62, **kw):
    """(offset, key, value, timestamp ms, headers or None) of arrow_columns(data) as Arrow decodes them."""
    cols = _engine.arrow_columns(data, lo, hi, True, **kw)
    batch = BatchBuilder("t", 0, arrow_schema(True)).build(cols)
    batch.validate(full=True)
    return [(r["offset"], r["key"], r["value"], int(r["timestamp"].timestamp() * 1000),
             None if r["headers"] is None else [(h["key"], h["value"]) for h in r["headers"]])
            for r in batch.to_pylist()], cols


def expected(lg: Log, lo=None, hi=None):
    return [(r.offset, r.key, r.value, r.timestamp, [tuple(h) for h in r.headers] or None)
            for r in lg.records(lo, hi)]


@pytest.fixture
def mixed(tmp_path):
    """Null and empty keys and values, headers (null header values, non-ASCII keys), every codec."""
    with Log(tmp_path / "m-0") as lg:
        for codec in (None, "gzip", "snappy", "lz4", "zstd"):
            n = 50
            lg.append_batch([None if i % 7 == 0 else b"" if i % 11 == 0 else b"v%d" % i for i in range(n)],
                            keys=[None if i % 3 == 0 else b"k%d" % i for i in range(n)],
                            headers=[[] if i % 2 else [("h\u00e9", b"x"), ("n", None)] for i in range(n)],
                            timestamps=[1_700_000_000_000 + i for i in range(n)], compression=codec)
        yield lg


def test_every_field_of_every_codec(mixed):
    got, cols = rows(whole_log(mixed))
    assert got == expected(mixed) and cols["rows"] == mixed.end_offset
    assert cols["key"][3] > 0 and cols["value"][3] > 0          # null keys and values were met


def test_range_ends_inside_batches(mixed):
    data = whole_log(mixed)
    for lo, hi in ((3, 47), (49, 51), (120, 121), (0, 250), (77, 78)):
        got, cols = rows(data, lo, hi)
        assert got == expected(mixed, lo, hi), (lo, hi)
        assert cols["done"]                                       # the range ends by the last batch


def test_empty_input_and_empty_range(mixed):
    got, cols = rows(b"")
    assert got == [] and cols["consumed"] == 0 and cols["next_offset"] == -1
    got, cols = rows(whole_log(mixed), 500, 600)                  # past every record: nothing, all consumed
    assert got == [] and cols["rows"] == 0


def test_control_batches_are_skipped(tmp_path):
    with Log(tmp_path / "c-0") as lg:
        lg.append_raw(txn_batch(5, [b"a1", b"a2"]))
        lg.append_control(5, 0, True, 0)
        lg.append_raw(txn_batch(6, [b"b1"]))
        lg.append_control(6, 0, False, 0)
        lg.append_batch([b"c1"])
        got, cols = rows(whole_log(lg))
        assert [r[2] for r in got] == [b"a1", b"a2", b"b1", b"c1"] and [r[0] for r in got] == [0, 1, 3, 5]


def test_read_split_read_committed_skips_aborted_and_markers(tmp_path):
    with Log(tmp_path / "t-0") as lg:
        lg.append_raw(txn_batch(5, [b"kept1", b"kept2"]))
        lg.append_raw(txn_batch(6, [b"gone"]))
        lg.append_control(5, 0, True, 0)
        lg.append_control(6, 0, False, 0)
        lg.append_batch([b"plain"])
        lg.flush()
        end = lg.end_offset
    for committed, want in ((True, [b"kept1", b"kept2", b"plain"]),
                            (False, [b"kept1", b"kept2", b"gone", b"plain"])):
        split = OffsetRangeSplit("t", 0, 0, end, str(tmp_path / "t-0"), read_committed=committed)
        batches = list(read_split(split))
        assert [v for b in batches for v in b.column("value").to_pylist()] == want


def test_read_split_of_an_empty_range(tmp_path):
    with Log(tmp_path / "e-0") as lg:
        lg.append_batch([b"x"])
        lg.flush()
    assert list(read_split(OffsetRangeSplit("e", 0, 1, 1, str(tmp_path / "e-0")))) == []


def test_output_buffers_are_reused_only_once_released(tmp_path):
    with Log(tmp_path / "big-0") as lg:
        lg.append_batch([b"%07d" % i * 10 for i in range(20_000)])     # 1.4 MB of values: pooled sizes
        data = whole_log(lg)
    first = _engine.arrow_columns(data)
    kept = bytes(first["value"][2])
    first_id = id(first["value"][2].obj)
    second = _engine.arrow_columns(data[:len(data) // 2])          # while `first` is held: other objects
    assert id(second["value"][2].obj) != first_id
    assert bytes(first["value"][2]) == kept
    del first
    gc.collect()
    third = _engine.arrow_columns(data)
    assert id(third["value"][2].obj) == first_id                   # released: written over again
    assert bytes(third["value"][2]) == kept and len(third["value"][2]) == len(kept)
    assert bytes(second["value"][2]) == kept[:len(second["value"][2])]
    objects, size, _ = _engine.scratch_pool()
    assert 0 < objects <= 16 and size <= 128 << 20


def test_readonly_read_copies_are_reused_only_once_released(tmp_path):
    with Log(tmp_path / "r-0") as lg:
        for i in range(8):
            lg.append_batch([bytes([65 + i]) * 1000] * 300)           # 8 distinct runs of ~300 KB
        lg.flush()
    with Log(tmp_path / "r-0", readonly=True) as ro:
        views, offset = [], 0
        while offset < ro.end_offset:
            view, offset = ro.read_next(offset, 200_000)
            views.append((view, bytes(view)))
        assert len(views) > 4
        assert all(bytes(v) == copy for v, copy in views)          # none written over while held
        assert len({id(v.obj) for v, _ in views}) == len(views)
        ids = {id(v.obj) for v, _ in views}
        copies = [c for _, c in views]
        del views, view
        gc.collect()
        again, offset = [], 0
        while offset < ro.end_offset:
            view, offset = ro.read_next(offset, 200_000)
            again.append(bytes(view))
            reused = id(view.obj) in ids
            del view
        assert again == copies and reused


def spark_rows(lg: Log, tmp_path, lo, hi, headers, committed, columns=None):
    """read_split's RecordBatches of lg as tuples in Spark's full schema, and how many batches there were."""
    split = OffsetRangeSplit("t", 3, lo, hi, str(lg.path), include_headers=headers, read_committed=committed,
                             columns=columns)
    batches = list(read_split(split))
    for b in batches:
        b.validate(full=True)
        assert b.schema == arrow_schema(headers, columns)
    return [tuple(r.values()) for b in batches for r in b.to_pylist()], len(batches)


def records_as_spark(lg: Log, lo, hi, headers, committed):
    import datetime
    utc = datetime.timezone.utc
    out = []
    for r in lg.records(lo, hi, isolation="read_committed" if committed else "read_uncommitted"):
        row = (r.key, r.value, "t", 3, r.offset,
               datetime.datetime.fromtimestamp(r.timestamp / 1000, utc), r.timestamp_type)
        if headers:
            row += ([{"key": k, "value": v} for k, v in r.headers] or None,)
        out.append(row)
    return out


def test_read_split_equals_records_across_batches_codecs_and_transactions(tmp_path, monkeypatch):
    """Many RecordBatches per split (a small BATCH_BYTES), nulls first met deep inside an output batch, empty
    keys and values, headers, every codec, log-append-time batches, committed and aborted transactions with
    their markers: every column equals what Log.records() gives, for ranges cut inside batches."""
    import random
    from seglog.spark import arrow_reader
    monkeypatch.setattr(arrow_reader, "BATCH_BYTES", 3000)
    rnd = random.Random(17)
    with Log(tmp_path / "s-0") as lg:
        for round_ in range(3):
            for codec in (None, "lz4", "gzip", "snappy", "zstd"):
                n = rnd.choice((1, 40, 300))
                first_null = rnd.randrange(n + 1)
                lg.append_batch([None if i >= first_null and rnd.random() < 0.2 else b"" if rnd.random() < 0.05
                                 else bytes(rnd.randrange(256) for _ in range(rnd.randrange(60))) for i in range(n)],
                                keys=None if rnd.random() < 0.3 else
                                [None if rnd.random() < 0.3 else b"k%d" % i for i in range(n)],
                                headers=[[("h\u00e9" if i % 5 else "a", b"x" * (i % 3)), ("n", None)]
                                         if rnd.random() < 0.4 else [] for i in range(n)],
                                timestamps=[1_700_000_000_000 + round_ * 1000 + i for i in range(n)],
                                compression=codec)
            lg.append_raw(txn_batch(40 + round_, [b"t%d-%d" % (round_, i) for i in range(5)]))
            lg.append_control(40 + round_, 0, round_ != 1, 0)        # round 1's transaction is aborted
        lg.flush()
        end = lg.end_offset
        for headers in (False, True):
            for committed in (False, True):
                for lo, hi in ((0, end), (7, end - 3), (end // 2, end // 2 + 1)):
                    got, batches = spark_rows(lg, tmp_path, lo, hi, headers, committed)
                    assert got == records_as_spark(lg, lo, hi, headers, committed), (headers, committed, lo, hi)
                    if hi - lo > 100:
                        assert batches > 3                                # a split is many RecordBatches
        projected, _ = spark_rows(lg, tmp_path, 0, end, False, False, columns=("offset", "value"))
        assert projected == [(r[4], r[1]) for r in records_as_spark(lg, 0, end, False, False)]

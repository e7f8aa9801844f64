"""Property tests: every API that takes bytes accepts any buffer as its bytes (src/engine/buffers.pxi).

Buffers of every kind -- bytes, bytearray, memoryview, every array.array typecode, memoryview casts to wider
formats and to 2-D shapes, ctypes arrays, and non-contiguous (strided, reversed) views, which are copied in C
order -- round-trip byte for byte: what is appended is what is read back, ``memoryview(x).tobytes()``. str
is refused with TypeError wherever bytes are expected. A bytearray changed by a callback while a call takes
its arguments is either written as it is once every argument is taken (same length) or refused with
BufferError (a resize), the writer unchanged.
"""

import array
import ctypes
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog import _engine
from seglog.errors import CorruptRecordError
from seglog.log import Log

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KINDS = ["bytes", "bytearray", "memoryview", "array", "cast", "2d", "ctypes", "strided", "reversed"]


def make_buffer(kind: str, raw: bytes, pick: int):
    """A buffer of the given kind built from raw (possibly from a prefix of it, so items fit)."""
    if kind == "bytes":
        return raw
    if kind == "bytearray":
        return bytearray(raw)
    if kind == "memoryview":
        return memoryview(raw)
    if kind == "array":
        code = array.typecodes[pick % len(array.typecodes)]
        a = array.array(code)
        a.frombytes(raw[:len(raw) // a.itemsize * a.itemsize])
        return a
    if kind == "cast":
        fmt = "BbcHhIiQqfd"[pick % 11]
        size = memoryview(b"").cast("B").cast(fmt).itemsize
        return memoryview(raw[:len(raw) // size * size]).cast(fmt)
    if kind == "2d":
        cols = 1 + pick % 7
        rows = len(raw) // cols
        return memoryview(raw[:rows * cols]).cast("B", [rows, cols]) if rows else memoryview(b"")
    if kind == "ctypes":
        return (ctypes.c_char * len(raw)).from_buffer_copy(raw)
    if kind == "strided":
        return memoryview(raw)[::2 + pick % 3]
    if kind == "reversed":
        return memoryview(raw)[::-1]
    raise AssertionError(kind)


@st.composite
def buffers(draw, max_size=300):
    raw = draw(st.binary(max_size=max_size))
    return make_buffer(draw(st.sampled_from(KINDS)), raw, draw(st.integers(0, 100)))


def nullable_buffers(max_size=300):
    return st.one_of(st.none(), buffers(max_size))


header_lists = st.lists(st.tuples(st.one_of(st.text(max_size=10), st.binary(max_size=10).map(
    lambda b: b.decode("latin-1").encode())), nullable_buffers(50)), max_size=4)


def as_bytes(x):
    return None if x is None else memoryview(x).tobytes()


def expected_headers(headers):
    return tuple((k if isinstance(k, str) else k.decode(), as_bytes(v)) for k, v in headers)


records = st.tuples(nullable_buffers(), nullable_buffers(40), header_lists)


@SETTINGS
@given(st.lists(records, min_size=1, max_size=8), st.sampled_from([None, "gzip", "snappy", "lz4", "zstd"]))
def test_batch_writer_round_trips_any_buffer(recs, codec):
    w = _engine.BatchWriter(compression=codec, batch_bytes=500)
    for value, key, headers in recs:
        w.add(value, key, headers, 1000)
    w.finish()
    data = w.take()
    got = [(r.value, r.key, r.headers) for r in _engine.decode_records(data)]
    assert got == [(as_bytes(v), as_bytes(k), expected_headers(h)) for v, k, h in recs]
    infos = _engine.batches(data)
    assert sum(i.records_count for i in infos) == len(recs)


@SETTINGS
@given(st.lists(records, min_size=1, max_size=8))
def test_add_many_round_trips_any_buffer(recs):
    w = _engine.BatchWriter(batch_bytes=400)
    w.add_many([r[0] for r in recs], [r[1] for r in recs], [r[2] for r in recs])
    got = [(r.value, r.key, r.headers) for r in _engine.decode_records(w.take())]
    assert got == [(as_bytes(v), as_bytes(k), expected_headers(h)) for v, k, h in recs]


@settings(max_examples=25, deadline=None)
@given(st.lists(records, min_size=1, max_size=6), st.booleans())
def test_log_round_trips_any_buffer(recs, as_batch):
    with tempfile.TemporaryDirectory() as d, Log(d) as lg:
        if as_batch:
            lg.append_batch([r[0] for r in recs], [r[1] for r in recs], [r[2] for r in recs])
        else:
            for value, key, headers in recs:
                lg.append(value, key, headers)
        got = [(r.value, r.key, r.headers) for r in lg.records()]
    assert got == [(as_bytes(v), as_bytes(k), expected_headers(h)) for v, k, h in recs]


def outcome(fn, data):
    """fn(data), or the type of the CorruptRecordError it raises (garbage from a strided view of a batch)."""
    try:
        return fn(data)
    except CorruptRecordError as e:
        return type(e)


@SETTINGS
@given(st.lists(st.binary(max_size=50), min_size=1, max_size=5), st.sampled_from(KINDS), st.integers(0, 100))
def test_batch_readers_take_any_buffer(values, kind, pick):
    """decode_records, batches, validate_client_batch, crc32c, Log.append_raw and append_as_follower see a
    batch handed over in any buffer as its bytes (a strided or shortened one as those bytes: garbage, refused
    alike)."""
    raw = [_batch(values, 0), _batch(values, len(values))]
    buf = [make_buffer(kind, r, pick) for r in raw]
    expect = as_bytes(buf[0])
    assert _engine.crc32c(buf[0]) == _engine.crc32c(expect)
    assert outcome(_engine.decode_records, buf[0]) == outcome(_engine.decode_records, expect)
    assert outcome(lambda d: [i.size for i in _engine.batches(d)], buf[0]) == \
        outcome(lambda d: [i.size for i in _engine.batches(d)], expect)
    if expect == raw[0] and as_bytes(buf[1]) == raw[1]:
        assert _engine.validate_client_batch(buf[0])[0].records_count == len(values)
        with tempfile.TemporaryDirectory() as d, Log(d) as lg:
            assert lg.append_raw(buf[0]) == 0
            assert lg.append_as_follower(buf[1]) == 2 * len(values)
            assert [r.value for r in lg.records()] == values * 2


def _batch(values, base):
    w = _engine.BatchWriter(next_offset=base)
    w.add_many(values)
    return bytes(w.take())


@SETTINGS
@given(buffers())
def test_hashes_take_any_buffer(buf):
    assert _engine.murmur2(buf) == _engine.murmur2(as_bytes(buf))
    assert _engine.partitions_for_keys([buf, None], 7) == [(_engine.murmur2(as_bytes(buf)) & 0x7FFFFFFF) % 7, -1]


def test_str_is_refused_everywhere():
    w = _engine.BatchWriter()
    for call in (lambda: w.add("v"), lambda: w.add(b"v", "k"), lambda: w.add(b"v", None, [("h", "x")]),
                 lambda: w.add_many(["v"]), lambda: w.add_many([b"v"], ["k"]), lambda: _engine.murmur2("k"),
                 lambda: _engine.crc32c("x"), lambda: _engine.decode_records("x"), lambda: _engine.batches("x"),
                 lambda: _engine.validate_client_batch("x"), lambda: _engine.compress_records(1, "x")):
        with pytest.raises(TypeError, match="str"):
            call()
    assert w.count == 0 and w.finished == 0
    with tempfile.TemporaryDirectory() as d, Log(d) as lg:
        for call in (lambda: lg.append("v"), lambda: lg.append_batch(["v"]), lambda: lg.append_raw("x"),
                     lambda: lg.append_as_follower("x")):
            with pytest.raises(TypeError):
                call()
        assert lg.end_offset == 0


@SETTINGS
@given(st.lists(st.binary(min_size=1, max_size=20), min_size=1, max_size=4), st.data())
def test_bytearray_mutated_by_a_callback(initial, data):
    """Each header after the first is a pair object whose unpacking changes one of the bytearrays (header
    values) taken before it: in place, or by resizing it."""
    arrays = [bytearray(b) for b in initial]
    headers = [("h0", arrays[0])]
    resized = False
    for i in range(1, len(arrays)):
        target = arrays[data.draw(st.integers(0, i - 1))]
        grow = data.draw(st.booleans())
        resized |= grow

        class Pair:
            def __iter__(self, target=target, grow=grow, i=i):
                if grow:
                    target.extend(b"!" * 1000)
                else:
                    target[0] = (target[0] + 1) % 256
                return iter((f"h{i}", arrays[i]))

        headers.append(Pair())
    w = _engine.BatchWriter()
    w.add(b"before")
    if resized:
        with pytest.raises(BufferError):
            w.add(b"v", None, headers)
        assert w.count == 1
    else:
        w.add(b"v", None, headers)
        assert w.count == 2
    w.finish()
    got = _engine.decode_records(w.take())
    assert got[0].value == b"before"
    if not resized:
        assert got[1].headers == tuple((f"h{i}", bytes(a)) for i, a in enumerate(arrays))

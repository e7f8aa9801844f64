"""Arguments that hold bytes are taken once, as their bytes (src/engine/buffers.pxi): regressions of the
engine's buffer handling (issue 11, items 1-3) and the all-or-nothing rollback of BatchWriter.add_many.

Items wider than a byte (array.array("d"), memoryview.cast("I")) count in bytes, never in items; a
non-contiguous buffer is copied in C order; str is refused with TypeError."""

import array
import subprocess
import sys
import textwrap

import pytest

from seglog import _engine
from seglog.errors import CorruptRecordError, RecordTooLargeError
from seglog.log import Log
from tests.cluster_harness import seglog_env


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=seglog_env(), capture_output=True,
                          text=True, timeout=120)


def test_wide_header_value_is_sized_in_bytes():
    """Was a heap overflow (SIGSEGV): the header was sized with len(memoryview(v)) = items and written with
    its byte length. Run in a child so a crash fails the test instead of killing the run."""
    child = _run("""
        import array
        from seglog import _engine
        value = array.array("d", range(100000))
        w = _engine.BatchWriter()
        w.add(b"v", b"k", [("h", value)])
        w.finish()
        (r,) = _engine.decode_records(w.take())
        assert r.headers == (("h", value.tobytes()),), len(r.headers[0][1])
        print("ok")
    """)
    assert child.returncode == 0 and child.stdout.strip() == "ok", (child.returncode, child.stderr[-2000:])


def test_header_over_the_record_limit_counts_its_bytes():
    w = _engine.BatchWriter()
    with pytest.raises(RecordTooLargeError):          # 1.6 MB of doubles: 200,000 items were taken as 200 KB
        w.add(b"v", b"k", [("h", array.array("d", range(200000)))])
    assert w.count == 0 and w.finished == 0


def test_log_stores_no_batch_its_readers_reject(tmp_path):
    """Was a poisoned log: a valid CRC over a record whose length counted items, so every read raised
    CorruptRecordError."""
    ints = array.array("i", [1, 2, 3])
    with Log(tmp_path / "t-0") as lg:
        lg.append(b"v", headers=[("h", ints)])
        lg.append(array.array("q", [7]), key=memoryview(b"key").cast("c"))
        lg.flush()
        got = [(r.key, r.value, r.headers) for r in lg.records()]
    assert got == [(None, b"v", (("h", ints.tobytes()),)),
                   (b"key", array.array("q", [7]).tobytes(), ())]
    with Log(tmp_path / "t-0") as lg:
        assert len(list(lg.records())) == 2


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd", None])
def test_add_many_rollback_restores_the_open_batch_bytes(codec):
    """Was a corrupt batch ("bad record length"): the record that did not fit finished the open batch,
    compressing it in place, and the rollback restored the counters but not the bytes."""
    w = _engine.BatchWriter(compression=codec)
    w.add(b"first", None, None, 5)
    with pytest.raises(TypeError, match="not str"):
        w.add_many([b"x" * 20000, "text"])
    assert (w.count, w.finished, w.next_offset) == (1, 0, 1)
    w.add(b"second", None, None, 6)                   # still usable: the open batch goes on
    w.finish()
    assert [(r.offset, r.value) for r in _engine.decode_records(w.take())] == [(0, b"first"), (1, b"second")]


def test_add_many_rollback_after_several_batches():
    w = _engine.BatchWriter(compression="gzip", batch_bytes=1000)
    w.add(b"a" * 300, None, None, 5)
    values = [bytes([i]) * 700 for i in range(20)] + [object()]
    with pytest.raises(TypeError, match="bytes-like"):
        w.add_many(values)
    assert (w.count, w.finished, w.batches) == (1, 0, 0)
    w.finish()
    assert [r.value for r in _engine.decode_records(w.take())] == [b"a" * 300]


def test_header_value_resized_by_a_callback_is_refused():
    """The headers were walked twice: a header pair whose unpacking grew an earlier header's bytearray between
    the sizing walk and the writing walk overflowed the batch. Now each value is held from the moment it is
    taken, so the bytearray cannot resize (BufferError) and the writer is unchanged."""
    grown = bytearray(b"abc")

    class Pair:
        def __iter__(self):
            grown.extend(b"x" * 100000)
            return iter(("k2", b"v2"))

    w = _engine.BatchWriter()
    with pytest.raises(BufferError):
        w.add(b"v", None, [("k1", grown), Pair()])
    assert w.count == 0 and grown == b"abc"
    w.add(b"v", None, [("k1", grown)])
    w.finish()
    assert _engine.decode_records(w.take())[0].headers == (("k1", b"abc"),)


def test_header_value_changed_in_place_by_a_callback_is_written_whole():
    value = bytearray(b"abc")

    class Pair:
        def __iter__(self):
            value[0] = ord("z")                       # same length: allowed, the record stays consistent
            return iter(("k2", b"v2"))

    w = _engine.BatchWriter()
    w.add(b"v", None, [("k1", value), Pair()])
    w.finish()
    assert _engine.decode_records(w.take())[0].headers == (("k1", b"zbc"), ("k2", b"v2"))


def test_headers_are_iterated_once():
    def gen():
        yield ("a", b"1")
        yield ("b", None)

    w = _engine.BatchWriter()
    w.add(b"v", None, gen())
    w.finish()
    assert _engine.decode_records(w.take())[0].headers == (("a", b"1"), ("b", None))


@pytest.mark.parametrize("bad, match", [
    ("text", "record value must be bytes-like, not str"),
    (5, "record value must be bytes-like, not int"),
], ids=["str", "int"])
def test_wrong_types_raise_type_error(bad, match):
    w = _engine.BatchWriter()
    with pytest.raises(TypeError, match=match):
        w.add(bad)
    with pytest.raises(TypeError, match="record key must be bytes-like, not str"):
        w.add(b"v", "k")
    with pytest.raises(TypeError, match="header value must be bytes-like, not str"):
        w.add(b"v", None, [("h", "text")])
    with pytest.raises(TypeError, match="headers must be a sequence"):
        w.add(b"v", None, 5)
    assert w.count == 0


def test_non_contiguous_buffers_are_copied_as_their_bytes():
    strided = memoryview(b"abcdefgh")[::2]
    w = _engine.BatchWriter()
    w.add(strided, strided, [("h", strided)])
    w.finish()
    data = bytes(w.take())
    r = _engine.decode_records(data)[0]
    assert (r.key, r.value, r.headers) == (b"aceg", b"aceg", (("h", b"aceg"),))
    doubled = bytes(b for byte in data for b in (byte, 0))
    assert _engine.decode_records(memoryview(doubled)[::2]) == _engine.decode_records(data)
    assert _engine.crc32c(memoryview(doubled)[::2]) == _engine.crc32c(data)


def _batch_of_whole_ints() -> bytes:
    """A one-batch client batch whose length is a multiple of 4 (so it fits an array of int32 exactly)."""
    for pad in range(4):
        w = _engine.BatchWriter()
        w.add_many([b"a", b"b", b"c" + b"x" * pad])
        raw = bytes(w.take())
        if len(raw) % 4 == 0:
            return raw
    raise AssertionError("unreachable: one of four lengths is a multiple of 4")


def test_batch_level_entry_points_count_bytes(tmp_path):
    """A batch handed over as an array of int32: append_as_follower sliced it in items (4 bytes each) and the
    node read the last offset delta from items 23..27."""
    raw = _batch_of_whole_ints()
    as_ints = array.array("i", raw)
    values = [r.value for r in _engine.decode_records(raw)]
    assert [r.value for r in _engine.decode_records(as_ints)] == values
    assert _engine.batches(as_ints)[0].records_count == 3
    assert _engine.validate_client_batch(as_ints)[0].records_count == 3
    with Log(tmp_path / "a-0") as lg:
        assert lg.append_as_follower(as_ints) == 3
        assert lg.append_raw(as_ints) == 3
        assert [r.value for r in lg.records()] == values * 2


def test_node_append_reads_the_last_offset_in_bytes(tmp_path):
    from seglog.node import Node
    raw = _batch_of_whole_ints()
    with Node(tmp_path) as node:
        node.create_topic("t", 1)
        assert node.partition("t", 0).append(array.array("i", raw))[:2] == (0, 2)


def test_compress_records_takes_bytes_not_items():
    """The snappy framing sliced its input in items: an array of int32 lost three quarters of its bytes."""
    data = array.array("i", range(20000))
    for codec in (1, 2, 3, 4):
        assert _engine.compress_records(codec, data) == _engine.compress_records(codec, data.tobytes())
    with pytest.raises(TypeError, match="not str"):
        _engine.compress_records(1, "text")


def test_corrupt_record_error_still_raised_for_damage():
    w = _engine.BatchWriter()
    w.add(b"v")
    w.finish()
    data = bytearray(w.take())
    data[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        _engine.decode_records(data)


def test_producer_sizes_batches_in_bytes(tmp_path):
    """The producer estimated a record's size with len(value): 50 doubles counted as 50 bytes, not 400, so a
    batch took a third record and passed batch_size."""
    import seglog
    wide = array.array("d", range(50))
    with seglog.open(tmp_path / "data") as node:
        node.create_topic("t", 1)
        with seglog.Producer(node, linger_ms=60_000, batch_size=1000) as prod:
            futures = [prod.send("t", wide, key=memoryview(b"key")[::-1], partition=0) for _ in range(9)]
            prod.flush()
        assert [f.get().offset for f in futures] == list(range(9))
        lg = node.partition("t", 0).log
        infos = _engine.batches(lg.read(0, 1 << 20))
        assert all(i.size <= 1000 for i in infos), [i.size for i in infos]
        assert [(r.key, r.value) for r in lg.records()] == [(b"yek", wide.tobytes())] * 9

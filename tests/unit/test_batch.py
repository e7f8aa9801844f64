"""Record batch v2 codec: our bytes read by an independent reader (kafka-python), theirs read by us, and the
validation a broker applies to client batches."""

import os
import struct

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from seglog import _engine
from seglog.errors import (CorruptRecordError, InvalidArgumentError, InvalidRecordError, InvalidTimestampError,
                           RecordTooLargeError, UnsupportedCompressionTypeError, UnsupportedForMessageFormatError)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
KP_CODEC = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def kafka_python_records(data):
    """(offset, timestamp, key, value, headers) of every record, read by kafka-python's pure-Python reader."""
    out = []
    mr = MemoryRecords(bytes(data))
    while True:
        batch = mr.next_batch()
        if batch is None:
            return out
        assert batch.validate_crc()
        out += [(r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]) for r in batch]


def sample(n=300):
    keys = [None if i % 7 == 0 else b"k%d" % i for i in range(n)]
    values = [None if i % 11 == 0 else os.urandom(i % 90) for i in range(n)]
    headers = [[] if i % 3 else [("h%d" % i, b"v"), ("empty", None), ("ü", b"")] for i in range(n)]
    timestamps = [1_700_000_000_000 + 13 * i - (i % 5) * 1000 for i in range(n)]
    return keys, values, headers, timestamps


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_what_we_write(codec):
    keys, values, headers, timestamps = sample()
    w = _engine.BatchWriter(next_offset=1000, compression=codec, batch_bytes=2000)
    assert w.add_many(values, keys, headers, timestamps) == len(values)
    data = w.take()
    assert len(_engine.batches(data)) > 1
    got = kafka_python_records(data)
    assert got == [(1000 + i, timestamps[i], keys[i], values[i], headers[i]) for i in range(len(values))]


@pytest.mark.parametrize("codec", CODECS)
def test_we_read_kafka_python_batches(codec):
    keys, values, headers, timestamps = sample()
    b = DefaultRecordBatchBuilder(magic=2, compression_type=KP_CODEC[codec], is_transactional=False,
                                  producer_id=42, producer_epoch=3, base_sequence=7, batch_size=1 << 30)
    for i in range(len(values)):
        b.append(i, timestamps[i], keys[i], values[i], headers[i])
    data = bytes(b.build())
    recs = _engine.decode_records(data)
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in recs] == \
        [(i, timestamps[i], keys[i], values[i], [tuple(h) for h in headers[i]]) for i in range(len(values))]
    info, min_ts, max_ts = _engine.validate_client_batch(data)
    assert (info.producer_id, info.producer_epoch, info.base_sequence, info.records_count) == (42, 3, 7, len(values))
    assert (min_ts, max_ts) == (min(timestamps), max(timestamps))
    assert info.compression == codec


def test_header_layout_and_crc_coverage():
    w = _engine.BatchWriter(next_offset=5, leader_epoch=9, producer_id=77, producer_epoch=2, next_sequence=10)
    w.add(b"v", b"k", None, 1234)
    w.add(b"w", None, None, 1240)
    w.finish()
    data = w.take()
    base, length, epoch, magic, crc, attrs, lod, bts, mts, pid, pep, bseq, cnt = struct.unpack(
        ">qiibIhiqqqhii", data[:61])
    assert (base, length + 12, epoch, magic, attrs, lod, bts, mts, pid, pep, bseq, cnt) == \
        (5, len(data), 9, 2, 0, 1, 1234, 1240, 77, 2, 10, 2)
    assert crc == _engine.crc32c(data[21:])
    # base offset and leader epoch lie outside the CRC: stamping them keeps the batch valid
    stamped = bytearray(data)
    _engine.stamp_batch(stamped, 999, 4)
    info = _engine.batches(stamped)[0]
    assert (info.base_offset, info.leader_epoch, info.crc) == (999, 4, crc)
    assert w.next_sequence == 12


def test_log_append_time_stamping_rewrites_crc():
    w = _engine.BatchWriter()
    w.add(b"a", None, None, 100)
    w.finish()
    data = bytearray(w.take())
    _engine.stamp_batch(data, 0, 0, log_append_time=5555)
    [r] = _engine.decode_records(data)           # CRC verified on decode
    assert (r.timestamp, r.timestamp_type) == (5555, 1)


def test_batches_respect_byte_budget():
    w = _engine.BatchWriter(batch_bytes=1000)
    w.add_many([b"x" * 95] * 100)
    infos = _engine.batches(w.take())
    assert all(i.size <= 1000 + 61 for i in infos)
    assert sum(i.records_count for i in infos) == 100
    assert [i.base_offset for i in infos] == sorted(i.base_offset for i in infos)


def test_add_many_is_all_or_nothing():
    w = _engine.BatchWriter(next_offset=10, max_record_bytes=500)
    w.add(b"kept", None, None, 1)
    before = w.next_offset, w.count
    with pytest.raises(RecordTooLargeError):
        w.add_many([b"a", b"b", b"x" * 1000])
    with pytest.raises(TypeError, match="not str"):
        w.add_many([b"a", "text"])
    assert (w.next_offset, w.count) == before
    w.finish()
    assert [r.value for r in _engine.decode_records(w.take())] == [b"kept"]


@pytest.mark.parametrize("values", [
    [b"a", None, b"", b"b" * 300],                                  # the list fast path throughout
    [b"a", bytearray(b"ba"), None, memoryview(b"mv"), b"z"],         # fast path, generic path, back again
    (b"t", None, b"u"),                                              # not a list: the generic loop
])
def test_add_many_encodes_as_add_does(values):
    one, many = _engine.BatchWriter(batch_bytes=100), _engine.BatchWriter(batch_bytes=100)
    for v in values:
        one.add(v, None, None, 42)
    one.finish()
    many.add_many(values)                                            # one timestamp for all: now
    expected, got = bytes(one.take()), bytes(many.take())
    assert [i.size for i in _engine.batches(got)] == [i.size for i in _engine.batches(expected)]
    assert [(r.offset, r.key, r.value, r.headers) for r in _engine.decode_records(got)] == \
        [(r.offset, r.key, r.value, r.headers) for r in _engine.decode_records(expected)]
    chunked, i = _engine.BatchWriter(batch_bytes=100), 0
    while i < len(values):
        i = chunked.add_many(values, start=i, stop_bytes=1)
    chunked.finish()
    assert [r.value for r in _engine.decode_records(chunked.take())] == [None if v is None else bytes(v)
                                                                         for v in values]


@pytest.mark.parametrize("limits", [dict(batch_bytes=300), dict(batch_bytes=100_000, batch_records=7),
                                    dict(batch_bytes=100_000, max_record_bytes=61 + 3 + 2 + 2 + 130)])
def test_add_many_fast_path_sizes_and_limits(limits):
    """Values whose varints change size (lengths 63/64, 8191/8192 zigzagged; offset deltas past 63), batches cut
    by bytes and by records, and the record limit met exactly, encode as add() encodes them."""
    sizes = [0, 1, 63, 64, 127, 128, 8191, 8192, 5, 200] * 20
    values = [None if i % 17 == 0 else bytes([i % 251]) * n for i, n in enumerate(sizes)]
    if "max_record_bytes" in limits:
        values = [v for v in values if v is None or len(v) <= 120]
    one, many = _engine.BatchWriter(**limits), _engine.BatchWriter(**limits)
    for v in values:
        one.add(v, None, None, 42)
    one.finish()
    many.add_many(values)
    expected, got = bytes(one.take()), bytes(many.take())
    assert [(i.size, i.records_count) for i in _engine.batches(got)] == \
        [(i.size, i.records_count) for i in _engine.batches(expected)]
    assert [r.value for r in _engine.decode_records(got)] == values
    too_large = _engine.BatchWriter(**{**limits, "max_record_bytes": limits.get("max_record_bytes", 1000)})
    too_large.add_many([b"x"])
    with pytest.raises(RecordTooLargeError):           # refused inside an open batch: nothing changes
        too_large.add_many([b"y", b"z" * 200_000])
    too_large.finish()
    assert [r.value for r in _engine.decode_records(too_large.take())] == [b"x"]
    keyed = _engine.BatchWriter(require_keys=True, **limits)
    keyed.add(b"v", b"k")
    with pytest.raises(InvalidRecordError):             # a compacted topic's rule holds on the fast path too
        keyed.add_many([b"no key"])


def test_writer_refuses_to_move_exported_bytes():
    w = _engine.BatchWriter()
    w.add(b"a" * 10)
    w.finish()
    view = memoryview(w)
    with pytest.raises(BufferError):
        w.clear()
    with pytest.raises(BufferError):
        w.add_many([b"b"])
    snapshot = bytes(view)
    view.release()
    w.clear()
    assert _engine.decode_records(snapshot)[0].value == b"a" * 10


def test_bad_arguments():
    w = _engine.BatchWriter()
    with pytest.raises(TypeError, match="str"):
        w.add("text")
    with pytest.raises(TypeError, match="int"):
        w.add(5)
    with pytest.raises(TypeError, match="header"):
        w.add(b"v", None, [("k",)])
    with pytest.raises(TypeError, match="header key"):
        w.add(b"v", None, [(1, b"x")])
    with pytest.raises(UnsupportedCompressionTypeError):
        _engine.BatchWriter(compression="brotli")
    with pytest.raises(InvalidArgumentError, match="negative"):
        _engine.BatchWriter(next_offset=-1)
    with pytest.raises(InvalidArgumentError, match="negative"):
        w.reset(-1)                                     # was accepted: the next add() then failed with SystemError
    assert w.add(b"v") == 0
    for ts in (1 << 63, -(1 << 63) - 1):
        with pytest.raises(InvalidTimestampError, match="int64"):
            w.add(b"v", timestamp=ts)
    with pytest.raises(InvalidTimestampError):
        w.add_many([b"a", b"b"], timestamps=[0, 1 << 64])
    for ts in (-1, -5):                                 # was stored as given
        with pytest.raises(InvalidTimestampError, match="negative"):
            w.add(b"w", timestamp=ts)
    for ts in (1.9, True):                              # 1.9 was stored as 1
        with pytest.raises(TypeError, match="timestamp must be an int"):
            w.add(b"w", timestamp=ts)
    assert w.add(b"w", timestamp=np_int(7)) == 1        # integer-like objects are ints
    copier = _engine.BatchWriter(accept_no_timestamp=True)   # re-encoding a client batch keeps NO_TIMESTAMP
    assert copier.add(b"w", timestamp=-1) == 0
    with pytest.raises(InvalidTimestampError, match="negative"):
        copier.add(b"w", timestamp=-2)


class np_int:
    """An integer-like object that is not an int (as numpy.int64 is)."""

    def __init__(self, v):
        self.v = v

    def __index__(self):
        return self.v


def one_batch(n=3, codec="none", **kw):
    w = _engine.BatchWriter(compression=codec, **kw)
    for i in range(n):
        w.add(b"value-%d" % i, b"key", None, 1000 + i)
    w.finish()
    return bytearray(w.take())


def recrc(b):
    b[17:21] = _engine.crc32c(bytes(b[21:])).to_bytes(4, "big")
    return b


class TestClientBatchValidation:
    def test_valid(self):
        info, lo, hi = _engine.validate_client_batch(one_batch())
        assert (info.records_count, lo, hi) == (3, 1000, 1002)

    def test_crc_mismatch(self):
        b = one_batch()
        b[-1] ^= 0xFF
        with pytest.raises(CorruptRecordError, match="CRC"):
            _engine.validate_client_batch(b)

    def test_magic(self):
        b = one_batch()
        b[16] = 1
        with pytest.raises(UnsupportedForMessageFormatError):
            _engine.validate_client_batch(b)

    def test_two_batches(self):
        with pytest.raises(InvalidRecordError, match="exactly one"):
            _engine.validate_client_batch(one_batch() + one_batch())

    def test_truncated(self):
        with pytest.raises(CorruptRecordError):
            _engine.validate_client_batch(one_batch()[:-3])
        with pytest.raises(CorruptRecordError):
            _engine.validate_client_batch(bytes(16) + b"\x02" + bytes(20))

    def test_too_large(self):
        with pytest.raises(RecordTooLargeError):
            _engine.validate_client_batch(one_batch(), max_message_bytes=50)

    def test_control_batch(self):
        b = one_batch()
        b[21:23] = (0x20).to_bytes(2, "big")
        with pytest.raises(InvalidRecordError, match="control"):
            _engine.validate_client_batch(recrc(b))

    def test_count_mismatch(self):
        b = one_batch()
        b[57:61] = (5).to_bytes(4, "big")
        with pytest.raises(InvalidRecordError):
            _engine.validate_client_batch(recrc(b))

    def test_producer_id_without_sequence(self):
        b = one_batch(producer_id=5, producer_epoch=0, next_sequence=-1)
        with pytest.raises(InvalidRecordError, match="sequence"):
            _engine.validate_client_batch(b)

    def test_offset_deltas_must_run_0_to_n(self):
        b = one_batch(2)
        # second record's offset delta (1) is at a fixed place for these small records: rewrite it to 3
        recs = _engine.batches(b)[0]
        first_len = b[61] >> 1
        pos = 61 + 1 + first_len + 3            # after length varint, attributes, timestamp delta (1 byte each)
        assert b[pos] == 2                      # zigzag(1)
        b[pos] = 6                              # zigzag(3)
        with pytest.raises(InvalidRecordError, match="offset deltas"):
            _engine.validate_client_batch(recrc(b))
        assert recs.records_count == 2

    @pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd", "snappy"])
    def test_compressed_records_are_checked(self, codec):
        import gzip

        import cramjam
        import lz4.frame
        b = one_batch(4, codec)
        info, _, _ = _engine.validate_client_batch(b)
        assert info.compression == codec
        squash = {"gzip": gzip.compress, "lz4": lz4.frame.compress, "zstd": lambda d: bytes(cramjam.zstd.compress(d)),
                  "snappy": lambda d: bytes(cramjam.snappy.compress_raw(d))}[codec]
        garbage = bytearray(b[:61]) + squash(b"\x99" * 40)      # a well-formed blob of records that do not parse
        garbage[8:12] = (len(garbage) - 12).to_bytes(4, "big")
        with pytest.raises(CorruptRecordError):
            _engine.validate_client_batch(recrc(garbage))
        truncated = bytearray(b[:61]) + squash(b"\x99" * 40)[:-4]  # a blob that does not decompress
        truncated[8:12] = (len(truncated) - 12).to_bytes(4, "big")
        with pytest.raises(CorruptRecordError):
            _engine.validate_client_batch(recrc(truncated))


def test_decode_ignores_a_cut_final_batch_but_not_garbage():
    data = one_batch() + one_batch()
    assert len(_engine.decode_records(data[:-10])) == 3
    bad = bytearray(data)
    bad[70] ^= 1
    with pytest.raises(CorruptRecordError) as e:
        _engine.decode_records(bad, path="/x.log")
    assert e.value.path == "/x.log" and e.value.offset == 0


def test_decode_offset_window_and_topic():
    w = _engine.BatchWriter(next_offset=100)
    w.add_many([b"%d" % i for i in range(50)])
    recs = _engine.decode_records(w.take(), 110, 120, "t", 3)
    assert [r.offset for r in recs] == list(range(110, 120))
    assert {(r.topic, r.partition) for r in recs} == {("t", 3)}


def test_record_pickles_and_compares():
    import pickle
    [r] = _engine.decode_records(one_batch(1))
    assert pickle.loads(pickle.dumps(r)) == r
    assert "value-0" in repr(r)

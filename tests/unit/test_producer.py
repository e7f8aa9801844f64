"""Producer (in-process, against a Node): partitioning, futures, batching (linger, batch_size), compression,
record fields, idempotence, serializers, concurrency, close/flush and errors.

What reached the log is read back two ways: seglog's own reader (``Log.records``) and kafka-python's
independent pure-Python batch reader (``MemoryRecords`` / ``DefaultRecordBatch``), which also checks every
batch's CRC and exposes its producer id, epoch, base sequence and codec.
"""

import json
import random
import threading
import time
from collections import Counter, defaultdict

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2
from kafka.record.memory_records import MemoryRecords

import seglog
import seglog.node
from seglog.errors import (InvalidArgumentError, LogClosedError, RecordTooLargeError, UnknownTopicOrPartitionError,
                           UnsupportedCompressionTypeError)
from seglog.partitioner import DefaultPartitioner


@pytest.fixture
def node(tmp_path):
    n = seglog.open(tmp_path / "data")
    yield n
    n.close()


@pytest.fixture
def topic6(node):
    node.create_topic("t6", 6)
    return "t6"


def stored_batches(node, topic, partition):
    """kafka-python's view of every batch in the partition: a list of (batch, [records]); CRCs checked."""
    part = node.partition(topic, partition)
    out, offset = [], part.log_start_offset
    while offset < part.high_watermark:
        res = part.fetch(offset, 1 << 20)
        mr = MemoryRecords(bytes(res.records))
        while mr.has_next():
            batch = mr.next_batch()
            assert batch.validate_crc(), f"bad CRC at {batch.base_offset}"
            records = list(batch)
            if batch.base_offset + batch.last_offset_delta >= offset:
                out.append((batch, records))
        offset = res.next_offset
    return out


def stored_values(node, topic, partition):
    return [r.value for _, recs in stored_batches(node, topic, partition) for r in recs]


def all_records(node, topic):
    """{partition: [Record]} through seglog's reader."""
    return {p.index: list(p.log.records()) for p in node.partitions(topic)}


# --- partitioning --------------------------------------------------------------------------------------------

# Java's Utils.murmur2 values published in Kafka's UtilsTest, as (murmur2(key) & 0x7fffffff) % 6: where the
# Java producer's default partitioner puts these keys in a 6-partition topic.
JAVA_KEYS_6 = [(b"21", 0), (b"foobar", 0), (b"a-little-bit-long-string", 2), (b"a-little-bit-longer-string", 5),
               (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", 5), (b"abc", 3), (b"", 3)]


def test_keys_land_where_the_java_producer_puts_them(node, topic6):
    with seglog.Producer(node) as prod:
        futs = [(prod.send(topic6, b"v", key=k), want) for k, want in JAVA_KEYS_6]
        prod.flush()
        assert [f.get().partition for f, _ in futs] == [want for _, want in futs]
    for key, want in JAVA_KEYS_6:
        assert key in [r.key for r in all_records(node, topic6)[want]]


def test_keys_match_kafka_python_partitioning(node, topic6):
    rnd = random.Random(3)
    keys = [rnd.randbytes(rnd.randrange(1, 40)) for _ in range(2000)]
    with seglog.Producer(node, linger_ms=50) as prod:
        futs = [prod.send(topic6, b"v", key=k) for k in keys]
        prod.flush()
        got = [f.get().partition for f in futs]
    assert got == [(kafka_python_murmur2(k) & 0x7fffffff) % 6 for k in keys]
    assert len(set(got)) == 6


def test_explicit_partition_beats_the_key(node, topic6):
    with seglog.Producer(node) as prod:
        md = prod.send(topic6, b"v", key=b"21", partition=4).get()          # the key alone would give 0
    assert md.partition == 4
    assert [r.key for r in all_records(node, topic6)[4]] == [b"21"]


def test_null_keys_go_round_robin(node, topic6):
    with seglog.Producer(node) as prod:
        futs = [prod.send(topic6, b"%d" % i) for i in range(18)]
        prod.flush()
        parts = [f.get().partition for f in futs]
    assert Counter(parts) == {p: 3 for p in range(6)}
    assert parts[:6] == sorted(parts[:6]) or len(set(parts[:6])) == 6      # each of the first six differs
    assert all(parts[i] != parts[i + 1] for i in range(17))
    assert parts[6:] == parts[:6] * 2                                        # a fixed rotation


def test_round_robin_is_per_topic(node):
    node.create_topic("a", 3)
    node.create_topic("b", 3)
    with seglog.Producer(node) as prod:
        pa = [prod.send("a", b"x").get().partition for _ in range(3)]
        pb = prod.send("b", b"x").get().partition
        pa.append(prod.send("a", b"x").get().partition)
    assert sorted(pa[:3]) == [0, 1, 2] and pa[3] == pa[0]
    assert pb == pa[0]                 # b's counter did not advance with a's


def test_custom_partitioner_callable(node, topic6):
    calls = []

    def last_partition(topic, key, n):
        calls.append((topic, key, n))
        return n - 1
    with seglog.Producer(node, partitioner=last_partition, key_serializer=str.encode) as prod:
        a = prod.send(topic6, b"v", key="k1").get()
        b = prod.send(topic6, b"v").get()
        c = prod.send(topic6, b"v", key="k2", partition=1).get()         # explicit: partitioner not called
    assert (a.partition, b.partition, c.partition) == (5, 5, 1)
    assert calls == [(topic6, b"k1", 6), (topic6, None, 6)]               # the serialized key


@pytest.mark.parametrize("bad", [6, -1, 100])
def test_custom_partitioner_out_of_range(node, topic6, bad):
    with seglog.Producer(node, partitioner=lambda t, k, n: bad) as prod:
        with pytest.raises(InvalidArgumentError):
            prod.send(topic6, b"v")
        prod.flush()
    assert all(r == [] for r in all_records(node, topic6).values())


def test_sticky_default_partitioner_keeps_one_partition_per_batch(node, topic6):
    with seglog.Producer(node, partitioner=DefaultPartitioner(sticky=True), linger_ms=10_000,
                         batch_size=1000) as prod:
        futs = [prod.send(topic6, b"x" * 90) for _ in range(100)]
        prod.flush()
        parts = [f.get().partition for f in futs]
    runs = [p for i, p in enumerate(parts) if i == 0 or parts[i - 1] != p]
    assert len(runs) < 30                              # long runs, not a rotation
    assert len(set(parts)) > 1                         # but it moves on when a batch fills


# --- futures -------------------------------------------------------------------------------------------------

def test_futures_metadata_and_unpacking(node, topic6):
    with seglog.Producer(node, linger_ms=10_000) as prod:
        f1 = prod.send(topic6, b"a", partition=2, timestamp=1_600_000_000_000)
        f2 = prod.send(topic6, b"b", partition=2)
        assert not f1.done() and not f2.done()               # lingering
        md = f1.get()                                         # asking sends the batch at once
        assert f1.done() and f2.done()
        assert isinstance(md, seglog.RecordMetadata)
        assert (md.topic, md.partition, md.offset, md.timestamp) == (topic6, 2, 0, 1_600_000_000_000)
        partition, offset = f2
        assert (partition, offset) == (2, 1)
        assert (f2[0], f2[1], len(f2)) == (2, 1, 2)
        assert f2.offset == 1 and f2.result().offset == 1
        seen = []
        f3 = prod.send(topic6, b"c", partition=2)
        f3.add_callback(lambda m, e: seen.append((m.offset if m else None, e)))
        assert seen == []
        prod.flush()
        assert seen == [(2, None)]
        f3.add_callback(lambda m, e: seen.append(("late", m.offset)))       # already done: called at once
        assert seen[-1] == ("late", 2)


def test_offsets_are_consecutive_per_partition(node, topic6):
    with seglog.Producer(node, batch_size=500) as prod:
        futs = [prod.send(topic6, b"%d" % i, key=b"%d" % (i % 17)) for i in range(3000)]
        prod.flush()
    by_part = defaultdict(list)
    for f in futs:
        md = f.get()
        by_part[md.partition].append(md.offset)
    for p, offs in by_part.items():
        assert offs == list(range(len(offs))), p
    assert sum(len(v) for v in by_part.values()) == 3000


# --- batching: linger and batch_size --------------------------------------------------------------------------

def test_linger_sends_without_flush(node, topic6):
    part = node.partition(topic6, 0)
    with seglog.Producer(node, linger_ms=300, batch_size=1 << 20) as prod:
        t0 = time.monotonic()
        futs = [prod.send(topic6, b"x", partition=0) for _ in range(5)]
        assert part.high_watermark == 0                      # still lingering
        while part.high_watermark < 5 and time.monotonic() - t0 < 10:
            time.sleep(0.005)
        elapsed = time.monotonic() - t0
        assert part.high_watermark == 5, "linger_ms passed but the batch was not sent"
        assert elapsed >= 0.25, elapsed                      # not before linger_ms
        assert all(f.done() for f in futs)
    assert len(stored_batches(node, topic6, 0)) == 1         # one batch for all five


def test_linger_zero_sends_each_record_at_once(node, topic6):
    part = node.partition(topic6, 1)
    with seglog.Producer(node, linger_ms=0) as prod:
        for i in range(5):
            f = prod.send(topic6, b"x", partition=1)
            assert f.done() and part.high_watermark == i + 1
    assert len(stored_batches(node, topic6, 1)) == 5


def test_batch_size_sends_full_batches(node, topic6):
    part = node.partition(topic6, 3)
    with seglog.Producer(node, linger_ms=60_000, batch_size=2000) as prod:
        futs = [prod.send(topic6, b"v" * 100, partition=3) for _ in range(100)]
        assert part.high_watermark > 0                       # full batches went out without linger or flush
        assert not futs[-1].done()                           # the last, partial one still waits
        prod.flush()
    batches = stored_batches(node, topic6, 3)
    assert sum(len(r) for _, r in batches) == 100
    assert 5 <= len(batches) <= 10
    for b, _ in batches[:-1]:
        assert 1900 <= b.size_in_bytes <= 2000 + 200         # a batch closes once it reaches batch_size


def test_batch_size_zero_disables_batching(node, topic6):
    """Kafka's batch.size=0: no batching, every record is a batch of its own (even with a long linger)."""
    with seglog.Producer(node, linger_ms=60_000, batch_size=0) as prod:
        futs = [prod.send(topic6, b"v%d" % i, partition=2) for i in range(5)]
        assert all(f.done() for f in futs)                   # sent at once, no linger
    batches = stored_batches(node, topic6, 2)
    assert [[r.value for r in records] for _, records in batches] == [[b"v%d" % i] for i in range(5)]


# --- compression ---------------------------------------------------------------------------------------------

CODEC_IDS = {None: 0, "none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.mark.parametrize("codec", [None, "none", "gzip", "snappy", "lz4", "zstd"])
def test_compression_end_to_end(node, topic6, codec):
    rnd = random.Random(5)
    values = [json.dumps({"i": i, "user": f"u{rnd.randrange(1000)}", "pad": "x" * rnd.randrange(100)}).encode()
              for i in range(2000)]
    with seglog.Producer(node, compression_type=codec, linger_ms=1000) as prod:
        for i, v in enumerate(values):
            prod.send(topic6, v, key=b"k%d" % i, partition=i % 2, headers=[("n", b"%d" % i)])
    for p in (0, 1):
        want = values[p::2]
        got = [r.value for r in all_records(node, topic6)[p]]
        assert got == want                                   # seglog's reader
        if codec == "zstd":
            pytest.importorskip("zstandard", reason="kafka-python reads zstd batches only with zstandard")
        batches = stored_batches(node, topic6, p)
        assert {b.compression_type for b, _ in batches} == {CODEC_IDS[codec]}
        assert [r.value for _, recs in batches for r in recs] == want        # kafka-python's reader
    if codec not in (None, "none"):
        raw = sum(b.size_in_bytes for b, _ in stored_batches(node, topic6, 0))
        assert raw < sum(len(v) for v in values[0::2])       # it really compressed


def test_unknown_codec_is_refused(node):
    with pytest.raises(UnsupportedCompressionTypeError):
        seglog.Producer(node, compression_type="rar")


# --- record fields -------------------------------------------------------------------------------------------

def test_headers_timestamps_and_null_key_value(node, topic6):
    before = int(time.time() * 1000)
    with seglog.Producer(node, compression_type="lz4") as prod:
        prod.send(topic6, b"v1", key=b"k1", partition=0, headers=[("a", b"1"), ("b", None), ("a", b"")],
                  timestamp=1_234_567_890_123)
        prod.send(topic6, None, key=b"tombstone", partition=0)
        prod.send(topic6, b"no key", partition=0)
        prod.send(topic6, None, partition=0)
        prod.send(topic6, b"", key=b"", partition=0, headers=[("\u00e9t\u00e9", b"\x00\xff")])
    after = int(time.time() * 1000)
    recs = all_records(node, topic6)[0]
    assert [(r.key, r.value) for r in recs] == [(b"k1", b"v1"), (b"tombstone", None), (None, b"no key"),
                                                (None, None), (b"", b"")]
    assert list(recs[0].headers) == [("a", b"1"), ("b", None), ("a", b"")]
    assert list(recs[4].headers) == [("\u00e9t\u00e9", b"\x00\xff")]
    assert recs[0].timestamp == 1_234_567_890_123
    assert all(before <= r.timestamp <= after for r in recs[1:])
    kp = [r for _, rs in stored_batches(node, topic6, 0) for r in rs]          # the independent reader agrees
    assert [(r.key, r.value, r.timestamp) for r in kp] == [(r.key, r.value, r.timestamp) for r in recs]
    assert [tuple(h) for h in kp[0].headers] == [("a", b"1"), ("b", None), ("a", b"")]


def test_bytes_like_values(node, topic6):
    with seglog.Producer(node) as prod:
        prod.send(topic6, bytearray(b"ba"), key=memoryview(b"mv"), partition=0)
    (r,) = all_records(node, topic6)[0]
    assert (r.key, r.value) == (b"mv", b"ba")


# --- idempotence ---------------------------------------------------------------------------------------------

def test_idempotent_batches_carry_consecutive_sequences(node, topic6):
    with seglog.Producer(node, batch_size=700, linger_ms=1000) as prod:
        pid = prod.producer_id
        for i in range(600):
            prod.send(topic6, b"x" * 40, partition=i % 3)
    assert pid >= 0
    for p in range(3):
        batches = stored_batches(node, topic6, p)
        assert len(batches) > 5
        expected_seq = 0
        for b, recs in batches:
            assert (b.producer_id, b.producer_epoch, b.base_sequence) == (pid, 0, expected_seq)
            expected_seq += len(recs)
        assert expected_seq == 200


def test_two_producers_get_their_own_ids(node, topic6):
    with seglog.Producer(node) as a, seglog.Producer(node) as b:
        a.send(topic6, b"a", partition=0).get()
        b.send(topic6, b"b", partition=0).get()
        a.send(topic6, b"a2", partition=0).get()
        assert a.producer_id != b.producer_id
    (ba, _), (bb, _), (ba2, _) = stored_batches(node, topic6, 0)
    assert (ba.producer_id, ba.base_sequence) == (a.producer_id, 0)
    assert (bb.producer_id, bb.base_sequence) == (b.producer_id, 0)
    assert (ba2.producer_id, ba2.base_sequence) == (a.producer_id, 1)


def test_non_idempotent_producer_sends_no_producer_id(node, topic6):
    with seglog.Producer(node, enable_idempotence=False) as prod:
        prod.send(topic6, b"x", partition=0)
        assert prod.producer_id == -1
    ((b, _),) = stored_batches(node, topic6, 0)
    assert (b.producer_id, b.base_sequence) == (-1, -1)


def test_failed_append_does_not_break_later_sends(node):
    node.create_topic("small", 1, config={"max.message.bytes": "1000"})
    with seglog.Producer(node, linger_ms=0) as prod:
        ok1 = prod.send("small", b"a" * 10).get()
        bad = prod.send("small", b"x" * 1500)                  # under max_request_size, over the topic's limit
        with pytest.raises(RecordTooLargeError):
            bad.get()
        assert bad.done()
        with pytest.raises(RecordTooLargeError):
            prod.send("small", b"y" * 5000).get()
        oks = [prod.send("small", b"b%d" % i).get() for i in range(5)]     # no OutOfOrderSequence after the gap
    assert [ok1.offset] + [m.offset for m in oks] == list(range(6))
    batches = stored_batches(node, "small", 0)
    assert [r.value for _, rs in batches for r in rs] == [b"a" * 10] + [b"b%d" % i for i in range(5)]
    # the failed batches left no gap: under each producer id (and epoch) the stored sequences run on from 0
    # (a producer may go on under the same id, reusing the failed sequences, or move to a fresh id)
    next_seq = {}
    for b, recs in batches:
        ident = (b.producer_id, b.producer_epoch)
        assert b.producer_id >= 0 and b.base_sequence == next_seq.get(ident, 0), (ident, b.base_sequence)
        next_seq[ident] = b.base_sequence + len(recs)


@pytest.mark.parametrize("linger_ms", [0, 60_000])
def test_every_append_exception_reaches_the_future(node, monkeypatch, linger_ms):
    """Not only SeglogError: any exception of the append (a lost connection ...) fails the batch's futures and
    callbacks, never a RecordMetadata with offset -1; the failed records are not sent again later."""
    node.create_topic("t", 1)
    real = seglog.node.Partition.append
    calls = []

    def flaky(self, data, acks=-1):
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionResetError("peer reset")
        return real(self, data, acks)

    monkeypatch.setattr(seglog.node.Partition, "append", flaky)
    with seglog.Producer(node, linger_ms=linger_ms) as prod:
        futures = [prod.send("t", b"r%d" % i) for i in range(3)]
        seen = []
        futures[0].add_callback(lambda md, err: seen.append((md, err)))
        prod.flush()
        # the first batch failed: all three records when they linger together, only the first when each is sent
        failed = futures if linger_ms else futures[:1]
        for f in failed:
            assert f.done()
            with pytest.raises(ConnectionResetError):
                f.get()
        assert len(seen) == 1 and seen[0][0] is None and isinstance(seen[0][1], ConnectionResetError)
        later = futures[len(failed):] + [prod.send("t", b"kept")]
        assert [f.get().offset for f in later] == list(range(len(later)))
    assert stored_values(node, "t", 0) == [b"r%d" % i for i in range(len(failed), 3)] + [b"kept"]


def test_record_over_max_request_size_is_refused_at_once(node, topic6):
    with seglog.Producer(node, max_request_size=1000) as prod:
        with pytest.raises(RecordTooLargeError):
            prod.send(topic6, b"x" * 2000, partition=0)
        prod.send(topic6, b"fine", partition=0).get()
    assert [r.value for r in all_records(node, topic6)[0]] == [b"fine"]


def test_oversized_record_fails_alone_in_its_batch(node):
    node.create_topic("small", 1, config={"max.message.bytes": "1000"})
    with seglog.Producer(node, linger_ms=60_000) as prod:
        good1 = prod.send("small", b"a" * 10)
        bad = prod.send("small", b"x" * 1500)
        good2 = prod.send("small", b"b" * 10)
        prod.flush()
        with pytest.raises(RecordTooLargeError):
            bad.get()
        assert (good1.get().offset, good2.get().offset) == (0, 1)
    assert stored_values(node, "small", 0) == [b"a" * 10, b"b" * 10]


# --- serializers ---------------------------------------------------------------------------------------------

def test_serializers(node, topic6):
    with seglog.Producer(node, key_serializer=lambda k: k.encode("utf-8"),
                         value_serializer=lambda v: json.dumps(v).encode()) as prod:
        md = prod.send(topic6, {"a": 1}, key="21").get()
        prod.send(topic6, None, key="21").get()                        # None is not serialized (tombstone)
        prod.send(topic6, [1, 2], partition=5).get()
    assert md.partition == 0                                           # partitioned by the serialized key
    recs = all_records(node, topic6)
    assert [(r.key, r.value) for r in recs[0]] == [(b"21", b'{"a": 1}'), (b"21", None)]
    assert [(r.key, r.value) for r in recs[5]] == [(None, b"[1, 2]")]


def test_serializer_must_return_bytes(node, topic6):
    with seglog.Producer(node, value_serializer=lambda v: v) as prod:
        with pytest.raises(TypeError):
            prod.send(topic6, "text", partition=0)
        prod.send(topic6, b"ok", partition=0).get()
    assert [r.value for r in all_records(node, topic6)[0]] == [b"ok"]


# --- concurrency ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("linger_ms, codec", [(0, None), (5, "lz4")])
def test_many_threads_send_concurrently(node, topic6, linger_ms, codec):
    threads_n, per_thread = 8, 3000
    errors = []
    futures = {}
    start = threading.Barrier(threads_n)
    with seglog.Producer(node, linger_ms=linger_ms, batch_size=4096, compression_type=codec) as prod:
        def run(t):
            try:
                start.wait()
                fs = []
                for i in range(per_thread):
                    key = None if i % 3 == 0 else b"k%d" % (i % 50)
                    fs.append(prod.send(topic6, b"%d:%d" % (t, i), key=key))
                futures[t] = fs
            except BaseException as e:                           # pragma: no cover - reported below
                errors.append(e)
        workers = [threading.Thread(target=run, args=(t,)) for t in range(threads_n)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        prod.flush()
    assert not errors
    stored = all_records(node, topic6)
    seen = Counter()
    by_thread_part = defaultdict(list)
    for p, recs in stored.items():
        assert [r.offset for r in recs] == list(range(len(recs)))
        for r in recs:
            t, i = map(int, r.value.split(b":"))
            seen[(t, i)] += 1
            by_thread_part[(t, p)].append(i)
    assert len(seen) == threads_n * per_thread and set(seen.values()) == {1}      # every record exactly once
    for (t, p), seqs in by_thread_part.items():
        assert seqs == sorted(seqs), f"thread {t} partition {p} out of order"
    for t, fs in futures.items():                                 # futures point at the right records
        for i in (0, 1, per_thread // 2, per_thread - 1):
            md = fs[i].get()
            assert stored[md.partition][md.offset].value == b"%d:%d" % (t, i)


# --- flush and close -----------------------------------------------------------------------------------------

def test_flush_makes_everything_visible(node, topic6):
    with seglog.Producer(node, linger_ms=60_000) as prod:
        futs = [prod.send(topic6, b"%d" % i) for i in range(60)]
        assert sum(p.high_watermark for p in node.partitions(topic6)) == 0
        prod.flush()
        assert all(f.done() for f in futs)
        assert sum(p.high_watermark for p in node.partitions(topic6)) == 60


def test_close_sends_lingering_records_and_refuses_more(node, topic6):
    prod = seglog.Producer(node, linger_ms=60_000)
    futs = [prod.send(topic6, b"%d" % i, partition=i % 6) for i in range(12)]
    prod.close()
    assert all(f.done() for f in futs)
    assert sum(p.high_watermark for p in node.partitions(topic6)) == 12
    with pytest.raises(LogClosedError):
        prod.send(topic6, b"late")
    prod.close()                                                   # idempotent
    assert sum(p.high_watermark for p in node.partitions(topic6)) == 12


def test_context_manager_closes(node, topic6):
    with seglog.Producer(node, linger_ms=60_000) as prod:
        f = prod.send(topic6, b"x", partition=0)
    assert f.done() and f.get().offset == 0
    with pytest.raises(LogClosedError):
        prod.send(topic6, b"y")


# --- errors --------------------------------------------------------------------------------------------------

def test_unknown_topic_with_auto_create_off(tmp_path):
    with seglog.open(tmp_path / "d", {"auto.create.topics.enable": "false"}) as node:
        with seglog.Producer(node) as prod:
            with pytest.raises(UnknownTopicOrPartitionError):
                prod.send("missing", b"v")
            node.create_topic("missing", 2)
            assert prod.send("missing", b"v", partition=1).get().offset == 0      # works once it exists
        assert node.topics() == ["missing"]


@pytest.mark.parametrize("partition", [6, -1, 1000])
def test_bad_partition(node, topic6, partition):
    with seglog.Producer(node) as prod:
        with pytest.raises(InvalidArgumentError):
            prod.send(topic6, b"v", partition=partition)
    assert sum(p.high_watermark for p in node.partitions(topic6)) == 0


@pytest.mark.parametrize("value, key", [("text", None), (12, None), (b"ok", "text-key"), (b"ok", 5), ([b"x"], None)])
def test_non_bytes_value_or_key(node, topic6, value, key):
    with seglog.Producer(node, linger_ms=60_000) as prod:
        good = prod.send(topic6, b"before", partition=0)
        with pytest.raises(TypeError):
            prod.send(topic6, value, key=key, partition=0)
        with pytest.raises(TypeError):
            prod.send(topic6, value, key=key)                          # also on the partitioner's path
        after = prod.send(topic6, b"after", partition=0)
    assert (good.get().offset, after.get().offset) == (0, 1)
    assert [r.value for r in all_records(node, topic6)[0]] == [b"before", b"after"]


@pytest.mark.parametrize("kw", [{"acks": 2}, {"acks": "some"}, {"batch_size": -1}, {"linger_ms": -1},
                                {"max_request_size": 0}])
def test_bad_producer_settings(node, kw):
    with pytest.raises(InvalidArgumentError):
        seglog.Producer(node, **kw)


@pytest.mark.parametrize("acks", ["all", -1, 0, 1, "1"])
def test_acks_values_all_append(node, topic6, acks):
    with seglog.Producer(node, acks=acks) as prod:
        assert prod.send(topic6, b"v", partition=0).get().offset == 0

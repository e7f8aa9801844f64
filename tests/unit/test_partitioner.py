"""Partitioner: Java-compatible murmur2 (engine, src/engine/hash.pxi), the default / round-robin / sticky
partitioners and the partitioner contract.

murmur2 is checked three ways: Kafka's published UtilsTest vectors, kafka-python's pure-Python murmur2
(thousands of random keys), and the independent reference below.
"""

import array
import os
import random
import threading
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from seglog import _engine as engine
from seglog import partitioner as partitioner_mod
from seglog.errors import InvalidArgumentError


def reference_murmur2(data: bytes) -> int:
    """Java's Utils.murmur2, written from the algorithm with explicit 32-bit masking; signed result."""
    mask = 0xFFFFFFFF
    m = 0x5BD1E995
    h = (0x9747B28C ^ len(data)) & mask
    whole = len(data) - len(data) % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = data[whole:]
    if tail:
        for shift, byte in reversed(list(enumerate(tail))):
            h ^= byte << (8 * shift)
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


# --- murmur2 -------------------------------------------------------------------------------------------------

JAVA_VECTORS = [                     # org.apache.kafka.common.utils.UtilsTest.testMurmur2
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
    (b"", 275646681),
]


@pytest.mark.parametrize("key, expected", JAVA_VECTORS)
def test_murmur2_java_vectors(key, expected):
    assert engine.murmur2(key) == expected
    assert reference_murmur2(key) == expected


def test_murmur2_matches_kafka_python_on_random_keys():
    rnd = random.Random(7)
    for _ in range(5000):
        key = rnd.randbytes(rnd.randrange(0, 80))
        ours = engine.murmur2(key)
        assert ours == reference_murmur2(key)
        assert ours & 0xFFFFFFFF == kafka_python_murmur2(key), key


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300))
def test_murmur2_matches_reference(key):
    assert engine.murmur2(key) == reference_murmur2(key)


def test_murmur2_is_a_signed_int32():
    values = [engine.murmur2(os.urandom(12)) for _ in range(2000)]
    assert all(-2**31 <= v < 2**31 for v in values)
    assert any(v < 0 for v in values) and any(v > 0 for v in values)


def test_murmur2_hashes_any_buffer_as_its_bytes():
    key = b"a-little-bit-long-string"
    assert engine.murmur2(bytearray(key)) == engine.murmur2(memoryview(key)) == engine.murmur2(key)
    assert engine.murmur2(memoryview(b"xx" + key)[2:]) == engine.murmur2(key)
    with pytest.raises(TypeError):
        engine.murmur2("text")
    with pytest.raises(TypeError):
        engine.murmur2(None)
    # a strided view is hashed as the bytes it holds, the key a record written with it carries
    assert engine.murmur2(memoryview(b"abcdef")[::2]) == engine.murmur2(b"ace")
    assert engine.murmur2(array.array("i", [1, 2])) == engine.murmur2(array.array("i", [1, 2]).tobytes())


def test_partitions_for_keys():
    rnd = random.Random(3)
    keys = [None if rnd.random() < 0.2 else rnd.randbytes(rnd.randrange(20)) for _ in range(3000)]
    for n in (1, 3, 12, 50, 1000):
        expected = [-1 if k is None else (reference_murmur2(k) & 0x7FFFFFFF) % n for k in keys]
        assert engine.partitions_for_keys(keys, n) == expected
        assert engine.partitions_for_keys(tuple(keys), n) == expected
    assert engine.partitions_for_keys([b"foobar"], 50) == [16]       # toPositive(-790332482) % 50
    assert engine.partitions_for_keys([], 5) == []


def test_partitions_for_keys_null_key_fill():
    keys = [None, b"21", None, None, b"abc", None]
    hashed = [(reference_murmur2(b"21") & 0x7FFFFFFF) % 4, (reference_murmur2(b"abc") & 0x7FFFFFFF) % 4]
    assert engine.partitions_for_keys(keys, 4, 2, 1) == [2, hashed[0], 3, 0, hashed[1], 1]   # round robin
    assert engine.partitions_for_keys(keys, 4, 3, 0) == [3, hashed[0], 3, 3, hashed[1], 3]   # sticky


def test_partitions_for_keys_rejects_bad_arguments():
    with pytest.raises(ValueError):
        engine.partitions_for_keys([b"a"], 0)
    with pytest.raises(ValueError):
        engine.partitions_for_keys([None], 3, 0, -1)
    with pytest.raises(TypeError):
        engine.partitions_for_keys([b"a", "b"], 3)


def test_partitions_for_keys_agrees_with_one_python_call_per_key_over_many_keys():
    """The batch call gives what murmur2 per key gives (its speed is bench/test_micro.py's, not a unit test's)."""
    keys = [b"user-%d" % i for i in range(100_000)]
    assert list(engine.partitions_for_keys(keys, 12)) == [(partitioner_mod.murmur2(k) & 0x7FFFFFFF) % 12
                                                         for k in keys]


# --- partitioners --------------------------------------------------------------------------------------------

def test_default_partitioner_hashes_keys_like_java():
    p = partitioner_mod.DefaultPartitioner()
    for key, java_hash in JAVA_VECTORS:
        for n in (1, 7, 50):
            assert p("t", key, n) == (java_hash & 0x7FFFFFFF) % n
    assert partitioner_mod.murmur2(b"21") == -973932308


def test_default_partitioner_round_robin_for_null_keys():
    p = partitioner_mod.DefaultPartitioner()
    assert [p("a", None, 3) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert [p("b", None, 3) for _ in range(2)] == [0, 1]                 # counters are per topic
    assert p.partition_many("a", [None, b"21", None], 3) == [1, (-973932308 & 0x7FFFFFFF) % 3, 2]
    assert p("a", None, 3) == 0                                           # the batch advanced the counter


def test_partition_many_matches_single_calls():
    rnd = random.Random(11)
    keys = [None if rnd.random() < 0.3 else rnd.randbytes(8) for _ in range(500)]
    single, many = partitioner_mod.DefaultPartitioner(), partitioner_mod.DefaultPartitioner()
    assert many.partition_many("t", keys, 9) == [single("t", k, 9) for k in keys]


def test_sticky_partitioner_switches_only_on_new_batch():
    p = partitioner_mod.DefaultPartitioner(sticky=True)
    first = p("t", None, 5)
    assert {p("t", None, 5) for _ in range(100)} == {first}
    assert set(p.partition_many("t", [None] * 50, 5)) == {first}
    assert p("t", b"21", 5) == (-973932308 & 0x7FFFFFFF) % 5            # keyed records still hash
    p.on_new_batch("t", (first + 1) % 5, 5)                             # not the sticky one: ignored
    assert p("t", None, 5) == first
    p.on_new_batch("t", first, 5)
    second = p("t", None, 5)
    assert second != first and 0 <= second < 5
    assert p("single", None, 1) == 0
    p.on_new_batch("single", 0, 1)
    assert p("single", None, 1) == 0


def test_sticky_partitioner_visits_every_partition():
    p = partitioner_mod.DefaultPartitioner(sticky=True)
    seen = Counter()
    for _ in range(600):
        part = p("t", None, 6)
        seen[part] += 1
        p.on_new_batch("t", part, 6)
    assert set(seen) == set(range(6))


def test_key_distribution_is_even():
    p = partitioner_mod.DefaultPartitioner()
    counts = Counter(p.partition_many("t", [b"key-%d" % i for i in range(120_000)], 12))
    assert set(counts) == set(range(12))
    assert max(counts.values()) < 10_000 * 1.05 and min(counts.values()) > 10_000 * 0.95


def test_round_robin_partitioner_ignores_keys():
    p = partitioner_mod.RoundRobinPartitioner()
    assert [p("t", b"same", 4) for _ in range(6)] == [0, 1, 2, 3, 0, 1]
    assert p.partition_many("t", [b"same", None, b"x"], 4) == [2, 3, 0]


def test_round_robin_is_exact_across_threads():
    p = partitioner_mod.RoundRobinPartitioner()
    counts = Counter()
    lock = threading.Lock()

    def produce():
        local = Counter(p("t", None, 8) for _ in range(4000))
        local.update(p.partition_many("t", [None] * 4000, 8))
        with lock:
            counts.update(local)

    threads = [threading.Thread(target=produce) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counts == {part: 4 * 8000 // 8 for part in range(8)}


def test_partition_for_explicit_and_custom():
    pf = partitioner_mod.partition_for
    default = partitioner_mod.DefaultPartitioner()
    assert pf(default, "t", b"21", 10, partition=7) == 7
    assert pf(default, "t", b"21", 10) == (-973932308 & 0x7FFFFFFF) % 10
    with pytest.raises(InvalidArgumentError):
        pf(default, "t", b"21", 10, partition=10)
    with pytest.raises(InvalidArgumentError):
        pf(default, "t", None, 0)

    def by_first_byte(topic, key, num_partitions):
        return key[0] % num_partitions

    assert pf(by_first_byte, "t", b"\x05", 3) == 2
    assert partitioner_mod.partitions_for(by_first_byte, "t", [b"\x00", b"\x04"], 3) == [0, 1]
    with pytest.raises(InvalidArgumentError):
        pf(lambda topic, key, n: n, "t", b"", 3)
    with pytest.raises(InvalidArgumentError):
        partitioner_mod.partitions_for(lambda topic, key, n: -1, "t", [b""], 3)
    assert partitioner_mod.partitions_for(default, "t", [b"21"], 10) == [(-973932308 & 0x7FFFFFFF) % 10]


def test_str_keys_are_refused():
    p = partitioner_mod.DefaultPartitioner()
    with pytest.raises(TypeError):
        p("t", "text", 3)
    with pytest.raises(TypeError):
        p.partition_many("t", ["text"], 3)

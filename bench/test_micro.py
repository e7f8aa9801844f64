"""Micro benchmarks of the Cython core (pytest-benchmark). Not part of the test suite; run with

    python -m pytest bench/test_micro.py --benchmark-storage=bench/baselines --benchmark-autosave
    python -m pytest bench/test_micro.py --benchmark-storage=bench/baselines --benchmark-compare

so a regression shows against the saved baseline of the same machine.
"""

import os
import random

import pytest

from seglog import _engine

VALUES = [os.urandom(100) for _ in range(1000)]


@pytest.mark.parametrize("size", [100, 1 << 20])
def test_crc32c(benchmark, size):
    data = os.urandom(size)
    assert benchmark(_engine.crc32c, data) == _engine.crc32c_table(data)


def test_varint_encode_decode(benchmark):
    def run():
        for v in (0, -1, 300, -70000, 2**40):
            _engine.decode_varint(_engine.encode_varint(v), long=True)
    benchmark(run)


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_batch_encode_1000_records(benchmark, codec):
    def run():
        w = _engine.BatchWriter(compression=codec, batch_bytes=1 << 20)
        w.add_many(VALUES)
        return w.finished
    assert benchmark(run) > 0


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_batch_decode_1000_records(benchmark, codec):
    w = _engine.BatchWriter(compression=codec, batch_bytes=1 << 20)
    w.add_many(VALUES)
    data = w.take()
    assert len(benchmark(_engine.decode_records, data)) == 1000


def test_validate_client_batch(benchmark):
    w = _engine.BatchWriter(batch_bytes=1 << 20)
    w.add_many(VALUES)
    data = w.take()
    benchmark(_engine.validate_client_batch, data)


def test_index_lookup_1m_entries(benchmark, tmp_path):
    idx = _engine.OffsetIndex(str(tmp_path / "0.index"), 0, max_index_bytes=8 * 1_000_001)
    for i in range(1, 1_000_001):
        idx.append(i, i * 70)
    targets = [random.randrange(1_000_000) for _ in range(1000)]

    def run():
        for t in targets:
            idx.lookup(t)
    benchmark(run)
    idx.close()


def test_partitions_for_keys_100k(benchmark):
    """The batch partitioner (murmur2 in C for every key, one call): compare with one Python call per key."""
    keys = [b"user-%d" % i for i in range(100_000)]
    assert len(benchmark(_engine.partitions_for_keys, keys, 12)) == len(keys)

"""CRC-32C: check value, known vectors, hardware vs table path vs an independent bitwise reference."""

import os
import random

import pytest

from seglog import _engine


def reference_crc32c(data: bytes, crc: int = 0) -> int:
    """Bit-at-a-time CRC-32C (reflected polynomial 0x82F63B78): slow but obviously right."""
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_check_value():
    assert _engine.crc32c(b"123456789") == 0xE3069283
    assert _engine.crc32c_table(b"123456789") == 0xE3069283


@pytest.mark.parametrize("data, expected", [
    (b"", 0x00000000),
    (bytes(32), 0x8A9136AA),             # RFC 3720 (iSCSI) B.4 test vectors
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
])
def test_rfc3720_vectors(data, expected):
    assert _engine.crc32c(data) == expected
    assert reference_crc32c(data) == expected


@pytest.mark.parametrize("size", [1, 7, 8, 9, 63, 255, 256, 767, 768, 769, 4095, 24575, 24576, 24577, 70000])
def test_paths_agree_with_reference(size):
    data = random.Random(size).randbytes(size)
    want = reference_crc32c(data)
    assert _engine.crc32c(data) == want
    assert _engine.crc32c_table(data) == want


def test_large_buffers_and_unaligned_starts():
    data = os.urandom(3 << 20)
    whole = _engine.crc32c_table(data)
    assert _engine.crc32c(data) == whole
    for start in range(1, 9):           # unaligned views go through the alignment prologue
        view = memoryview(data)[start:]
        assert _engine.crc32c(view) == _engine.crc32c_table(view)


def test_continuation_equals_whole():
    data = os.urandom(100_000)
    for cut in (0, 1, 13, 4096, 99_999, 100_000):
        assert _engine.crc32c(data[cut:], _engine.crc32c(data[:cut])) == _engine.crc32c(data)


def test_hardware_flag_matches_cpu():
    flags = open("/proc/cpuinfo").read()
    if "sse4_2" in flags or " crc32" in flags:
        assert _engine.crc32c_hardware()


def test_rejects_non_buffers():
    with pytest.raises(TypeError):
        _engine.crc32c("text")

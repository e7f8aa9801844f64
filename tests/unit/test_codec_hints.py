"""Sizes that compressed data states are hints, never allocations to trust (a finding of tests/fuzz, `batch`).

A 343-byte gzip batch whose ISIZE trailer stated 1.9 GB made decode_records allocate and zero 1.9 GB before
failing. Run in a child: its peak RSS is the measure."""

import subprocess
import sys
import textwrap

import pytest

from tests.cluster_harness import seglog_env

CHILD = """
import resource, struct, zlib, cramjam
from seglog import _engine
from seglog.errors import CorruptRecordError
from tests.fuzz.targets import wrap_records

def gzip_lie():
    data = bytearray(zlib.compress(b"x" * 100, wbits=31))
    struct.pack_into("<I", data, len(data) - 4, 0x7F000000)         # ISIZE: 2 GB
    return bytes(data)


def lz4_lie():
    frame = bytes(cramjam.lz4.compress(b"x" * 100))
    return frame[:4] + bytes([frame[4] | 0x08, frame[5]]) + struct.pack("<Q", 0x7F000000) + frame[6:]  # 2 GB


def snappy_lie():
    return bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x07]) + b"\\x00" * 20       # varint length 2 GB, then 20 bytes

section, codec = {CASE}
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    _engine.decode_records(wrap_records(section, codec, 1))
except CorruptRecordError:
    pass
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024
print(grown)
"""


@pytest.mark.parametrize("case", ["(gzip_lie(), 1)", "(snappy_lie(), 2)", "(lz4_lie(), 3)"],
                         ids=["gzip-isize", "snappy-length", "lz4-content-size"])
def test_a_stated_size_does_not_allocate(case):
    child = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD.replace("{CASE}", case))],
                           env=seglog_env(), capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-3000:]
    assert int(child.stdout.strip()) < 64, f"peak RSS grew {child.stdout.strip()} MiB"

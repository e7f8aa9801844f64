"""Decompression is bounded: a compressed batch inflates to at most a limit (validate_client_batch: 32 x
max.message.bytes; decode_records: max_inflated_bytes), past which RecordTooLargeError is raised before more
memory is taken, for every codec and framing (gzip, lz4 frame, zstd with and without a stated content size,
snappy raw and xerial). A batch at exactly the limit still decodes."""

import subprocess
import sys

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

import seglog
from seglog import _engine
from seglog.errors import CorruptRecordError, RecordTooLargeError

CODECS = ["gzip", "snappy", "lz4", "zstd"]


def batch_of(value: bytes, codec: str) -> bytes:
    w = _engine.BatchWriter(next_offset=0, compression=codec, batch_bytes=1 << 62, max_record_bytes=1 << 62)
    w.add(value, timestamp=1)
    w.finish()
    return bytes(w.take())


def inflated_size(value: bytes) -> int:
    """The size of the records section of a batch holding `value` (its uncompressed batch less the header)."""
    return len(batch_of(value, "none")) - 61


@pytest.mark.parametrize("codec", CODECS)
def test_records_inflating_past_the_limit_are_refused(codec):
    value = bytes(1 << 20)
    data = batch_of(value, codec)
    size = inflated_size(value)
    assert _engine.validate_client_batch(data, 1 << 24, True, False, size)[0].records_count == 1
    assert [r.value for r in _engine.decode_records(data, max_inflated_bytes=size)] == [value]
    with pytest.raises(RecordTooLargeError, match="decompressed records section"):
        _engine.validate_client_batch(data, 1 << 24, True, False, size - 1)
    with pytest.raises(RecordTooLargeError):
        _engine.decode_records(data, max_inflated_bytes=size - 1)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_kafka_python_batches_are_bounded_too(codec):
    """Other writers' framings: raw snappy, zstd frames with a content size, lz4 frames of kafka-python."""
    b = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, batch_size=1 << 30)
    b.append(0, timestamp=1, key=None, value=bytes(300_000), headers=[])
    data = bytes(b.build())
    _engine.validate_client_batch(data, 1 << 24, True, False, 400_000)
    with pytest.raises(RecordTooLargeError):
        _engine.validate_client_batch(data, 1 << 24, True, False, 200_000)


def test_default_limit_is_32_times_max_message_bytes():
    assert _engine.inflate_limit(1048588) == 32 * 1048588
    data = batch_of(bytes(40 << 20), "zstd")                       # 40 MiB of zeros in a few KB
    assert len(data) < 1048588
    with pytest.raises(RecordTooLargeError):
        _engine.validate_client_batch(data, 1048588)
    _engine.validate_client_batch(data, 2 << 20)                    # 64 MiB allowed


def test_log_append_raw_refuses_a_bomb_and_stores_nothing(tmp_path):
    with seglog.Log(tmp_path / "t-0") as log:
        with pytest.raises(RecordTooLargeError):
            log.append_raw(batch_of(bytes(40 << 20), "gzip"))
        assert log.end_offset == 0 and log.size_bytes == 0
        log.append_raw(batch_of(b"fine", "gzip"))
        assert [r.value for r in log.records()] == [b"fine"]


def test_a_stated_content_size_that_lies_is_corrupt_not_trusted():
    data = bytearray(batch_of(bytes(100_000), "gzip"))
    data[-4:] = (10).to_bytes(4, "little")                          # ISIZE says 10 bytes
    with pytest.raises(CorruptRecordError):
        _engine.decode_records(bytes(data), verify_crc=False)


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd"])
def test_memory_of_refusing_a_300_mib_bomb_stays_near_the_limit(tmp_path, codec):
    """In a fresh process, refusing a bomb that inflates to 300 MiB raises the peak RSS by about the limit
    (32 MiB), not by the bomb (the unbounded decoder took 300-600 MiB)."""
    path = tmp_path / "bomb"
    path.write_bytes(batch_of(bytes(300 << 20) if codec != "lz4" else bytes(200 << 20), codec))
    code = (f"import resource, seglog._engine as e\n"
            f"data = open({str(path)!r}, 'rb').read()\n"
            f"r0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            f"try:\n    e.validate_client_batch(data, 1048588)\n    raise SystemExit('accepted')\n"
            f"except Exception as x:\n"
            f"    assert type(x).__name__ == 'RecordTooLargeError', x\n"
            f"print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - r0)\n")
    grown_kib = int(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                                   text=True).stdout)
    assert grown_kib < 40 * 1024, f"{codec}: peak RSS grew by {grown_kib / 1024:.1f} MiB"

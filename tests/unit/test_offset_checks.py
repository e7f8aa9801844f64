"""A damaged baseOffset (outside the CRC) in a cleanly closed log: every read path refuses the batch with
CorruptRecordError naming the file and where, instead of skipping its records or serving them renumbered."""

import os
import struct

import pytest

from seglog import Log, LogConfig, _engine
from seglog.errors import CorruptRecordError

BATCHES, PER_BATCH = 10, 100
SEGMENT = "00000000000000000000.log"


def write_log(path, roll_every: int = BATCHES) -> list:
    """BATCHES batches of PER_BATCH records (batch i: offsets 100i.., timestamps 1000(i+1)), a new segment
    every roll_every batches, closed cleanly; returns the BatchInfos of the first segment."""
    with Log(path) as log:
        for i in range(BATCHES):
            if i and i % roll_every == 0:
                log.roll()
            log.append_batch([b"v%d" % (i * PER_BATCH + j) for j in range(PER_BATCH)],
                             timestamps=[1000 * (i + 1)] * PER_BATCH)
    return _engine.batches((path / SEGMENT).read_bytes())


def set_base_offset(path, info, base: int, segment: str = SEGMENT) -> None:
    with open(path / segment, "r+b") as f:
        f.seek(info.position)
        f.write(struct.pack(">q", base))


def offsets_read(log, start=0) -> list[int]:
    """Offsets records(start) yields until it raises; the error (None if it did not)."""
    got = []
    try:
        for r in log.records(start):
            got.append(r.offset)
    except CorruptRecordError as e:
        return got, e
    return got, None


ISSUE_BASE = 500 - (1 << 56)                     # 500 with its first byte flipped to 0xFF: -72057594037927436


@pytest.mark.parametrize("base", [ISSUE_BASE, 500 + (1 << 40), 450, 550, -1])
@pytest.mark.parametrize("readonly", [False, True])
def test_records_stop_at_the_damaged_batch(tmp_path, base, readonly):
    """The issue's case (a flipped high bit: base -72057594037927436), a base moved far up, into the previous
    batch's offsets, into the next one's, negative: records() yields the records before the damage, then
    raises; read() never returns the damaged batch, nor records renumbered under it. When a base offset lands
    inside its neighbour's offsets either batch may be the damaged one: both are refused."""
    path = tmp_path / "t-0"
    infos = write_log(path)
    set_base_offset(path, infos[5], base)
    good = 400 if base == 450 else 500                # 450: batch 4 (400..499) may be the damaged one too
    with Log(path, readonly=readonly) as log:
        assert log.recovery.clean_shutdown or readonly
        got, err = offsets_read(log)
        assert got == list(range(good)) and err is not None
        assert err.path.endswith(SEGMENT) and "batch offsets out of order" in err.reason
        assert err.position in (infos[5].position, infos[6].position)
        assert [b.base_offset for b in _engine.batches(log.read(0))] == list(range(0, good, 100))
        for offset in (good, 550, 599):
            with pytest.raises(CorruptRecordError, match="out of order"):
                log.read(offset)
        assert [r.offset for r in log.records(900)] == list(range(900, 1000))   # past the damage: fine
        with pytest.raises(CorruptRecordError, match="out of order"):
            log.offset_for_timestamp(5500)                # its batch holds the first record at or after it


def test_read_checks_the_header_after_what_it_returns(tmp_path):
    """A base moved up into the next batch's offsets is caught by the next batch's header, even when max_bytes
    ends the read at the damaged batch."""
    path = tmp_path / "t-0"
    infos = write_log(path)
    set_base_offset(path, infos[5], 550)
    with Log(path) as log:
        with pytest.raises(CorruptRecordError, match="base offset 600 is not after offset 649"):
            log.read(500, infos[5].size)
        view = log.read(400, infos[4].size)
        assert [b.base_offset for b in _engine.batches(view)] == [400]


def test_last_batch_of_a_segment_must_end_below_the_next_segment(tmp_path):
    path = tmp_path / "t-0"
    infos = write_log(path, roll_every=3)
    with Log(path) as log:
        assert log.segment_bases == [0, 300, 600, 900]
    set_base_offset(path, infos[2], 250)                       # 250..349 reaches into the segment at 300
    with Log(path) as log:
        got, err = offsets_read(log)
        assert got == list(range(200)) and "do not end below 300" in err.reason
        assert [r.offset for r in log.records(300)] == list(range(300, 1000))


def test_recovery_cuts_a_batch_reaching_into_the_next_segment(tmp_path):
    path = tmp_path / "t-0"
    infos = write_log(path, roll_every=3)
    set_base_offset(path, infos[2], 250)
    os.unlink(path / ".clean-shutdown")
    os.unlink(path / "log-state-checkpoint")                   # no recovery point: every segment is rescanned
    with Log(path) as log:                                     # Kafka's rule: cut at the first invalid batch
        assert log.recovery.corruption.startswith("batch offsets out of order")
        assert log.end_offset == 200 and [r.offset for r in log.records()] == list(range(200))


def test_decode_records_and_arrow_columns_refuse_offsets_out_of_order(tmp_path):
    path = tmp_path / "t-0"
    infos = write_log(path)
    data = bytearray((path / SEGMENT).read_bytes())
    assert len(_engine.decode_records(data)) == BATCHES * PER_BATCH
    assert _engine.arrow_columns(data)["rows"] == BATCHES * PER_BATCH
    cases = {ISSUE_BASE: "is not after offset 499", 450: "is not after offset 499",
             550: "base offset 600 is not after offset 649", -7: "is not after offset 499"}
    for base, message in cases.items():
        damaged = bytearray(data)
        damaged[infos[5].position:infos[5].position + 8] = struct.pack(">q", base)
        for decode in (_engine.decode_records, _engine.arrow_columns):
            with pytest.raises(CorruptRecordError, match=message) as e:
                decode(damaged, path="x.log")
            assert e.value.path == "x.log" and e.value.position in (infos[5].position, infos[6].position)
    first = bytearray(data[:infos[1].position])
    first[:8] = struct.pack(">q", -1)                          # offsets are never negative
    with pytest.raises(CorruptRecordError, match="is not after offset -1"):
        _engine.decode_records(first)
    first[:8] = struct.pack(">q", 0)
    first[23:27] = struct.pack(">i", -3)                       # lastOffsetDelta (its CRC not fixed: not checked)
    with pytest.raises(CorruptRecordError, match="lastOffsetDelta -3 is negative"):
        _engine.decode_records(first, verify_crc=False)
    assert _engine.batch_offsets_error(first) == "batch offsets out of order: lastOffsetDelta -3 is negative"
    assert _engine.batch_offsets_error(data, 99) == "batch offsets out of order: base offset 0 is not after offset 99"
    assert _engine.batch_offsets_error(data, -1, 50) == "batch offsets out of order: offsets 0..99 do not end below 50"
    assert _engine.batch_offsets_error(data) is None


def test_segment_walks_check_offsets(tmp_path):
    """Segment-level: find_position's walk, read()'s, and the walk that finds next_offset at open."""
    path = tmp_path / "t-0"
    infos = write_log(path)
    set_base_offset(path, infos[5], 450)
    seg = _engine.Segment(str(path), 0)
    try:
        assert seg.find_position(350) == infos[3].position   # before the damage
        with pytest.raises(CorruptRecordError, match="base offset 450 is not after offset 499"):
            seg.find_position(520)
        with pytest.raises(CorruptRecordError) as e:                # batch 4 (400..499) or 5 (450..549)?
            seg.read(infos[4].position, 1 << 20)                       # either may be damaged: neither is read
        assert e.value.offset == 450 and e.value.position == infos[5].position
        view, _, next_offset = seg.read(infos[3].position, 1 << 20)
        assert [b.base_offset for b in _engine.batches(view)] == [300] and next_offset == 400
        seg.offset_limit = 900                                # as if a segment started at 900
        with pytest.raises(CorruptRecordError, match="do not end below 900"):
            seg.read(infos[9].position, 1 << 20)
    finally:
        seg.close()
    set_base_offset(path, infos[5], 500)
    set_base_offset(path, infos[9], 850)                       # in the walk after the last index entry
    with Log(path) as log:                                     # so the open rebuilds the segment, cutting there
        assert "batch offsets out of order" in log.recovery.corruption
        assert log.end_offset == 900

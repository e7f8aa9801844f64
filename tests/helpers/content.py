"""Records whose content is a function of their offset, so any reader (another process, a reopened log after a
crash) can check every record it sees without being told what was written.

Used by the integration tests and by the helper processes next to this file (they put tests/ on sys.path).
"""

from __future__ import annotations

BASE_TS = 1_700_000_000_000           # fixed, so writer and checker agree; configs use retention_ms=-1


def value_for(offset: int) -> bytes:
    return b"v%d|" % offset * (1 + offset % 7)


def key_for(offset: int) -> bytes | None:
    return b"k%d" % offset if offset % 3 == 0 else None


def headers_for(offset: int) -> list:
    return [("h", b"%d" % offset), ("null", None)] if offset % 5 == 0 else []


def timestamp_for(offset: int) -> int:
    return BASE_TS + offset


def append_one(log) -> int:
    """Append the record due at the log's end offset (per-record, buffered); returns its offset."""
    off = log.end_offset
    got = log.append(value_for(off), key=key_for(off), headers=headers_for(off), timestamp=timestamp_for(off))
    assert got == off, f"append returned offset {got}, expected {off}"
    return off


def append_many(log, n: int, compression: str | None = None) -> tuple[int, int]:
    """append_batch of the n records due at the log's end offset; returns (first, last)."""
    first = log.end_offset
    offs = range(first, first + n)
    got = log.append_batch([value_for(o) for o in offs], keys=[key_for(o) for o in offs],
                           headers=[headers_for(o) for o in offs], timestamps=[timestamp_for(o) for o in offs],
                           compression=compression)
    assert got == (first, first + n - 1), f"append_batch returned {got}, expected {(first, first + n - 1)}"
    return got


def mismatch(record) -> str | None:
    """Why `record` is not the record due at its offset, or None when it is."""
    o = record.offset
    want = (value_for(o), key_for(o), tuple((k, v) for k, v in headers_for(o)), timestamp_for(o))
    got = (record.value, record.key, tuple(record.headers), record.timestamp)
    return None if got == want else f"offset {o}: got {got!r}, expected {want!r}"


def check_records(records, start: int, end: int) -> None:
    """Assert `records` are exactly the records due at offsets start..end-1, in order."""
    expected = start
    for r in records:
        assert r.offset == expected, f"offset {r.offset} where {expected} was expected (gap or reorder)"
        problem = mismatch(r)
        assert problem is None, problem
        expected += 1
    assert expected == end, f"records stop at {expected}, expected them to run to {end}"

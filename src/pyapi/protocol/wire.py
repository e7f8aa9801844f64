"""Primitive wire helpers called by the generated codecs.

``buf`` is always a 1-D unsigned-byte memoryview spanning exactly one frame and ``end`` its length. Generated
decoders read fixed-width values and int16/int32 length prefixes with ``struct`` (a short read raises
``struct.error``, which the framing layer maps to :class:`InvalidRequestError`) and check every length inline
(``0 <= n <= end - pos``, counts times the element's minimum size); only a failing check calls
:func:`check_length` / :func:`check_count`, which accept -1 (null) where allowed and raise otherwise. The
compact (varint) readers return lengths that passed the same checks. After a check a caller may slice or
allocate ``n`` bytes (or ``n`` elements) safely: the frame bounds every allocation.
"""

from __future__ import annotations

import struct

from ..errors import InvalidRequestError

__all__ = ["check_length", "check_count", "compact_length", "compact_array_length", "read_uvarint", "read_tag",
           "skip_tagged_fields", "uvarint", "tagged_field", "fixed_array", "records_part"]


def check_length(n: int, pos: int, end: int, nullable: bool) -> int:
    """A string/bytes length that failed ``0 <= n <= end - pos``: -1 if null is allowed, else raise."""
    if n == -1 and nullable:
        return -1
    if n < 0:
        raise InvalidRequestError(f"invalid length {n} at byte {pos}")
    raise InvalidRequestError(f"length {n} at byte {pos} exceeds the {end - pos} bytes left")


def check_count(n: int, pos: int, end: int, nullable: bool, min_item_size: int) -> int:
    """An array count that failed ``0 <= n * min_item_size <= end - pos``: -1 if null is allowed, else raise."""
    if n == -1 and nullable:
        return -1
    if n < 0:
        raise InvalidRequestError(f"invalid array length {n} at byte {pos}")
    raise InvalidRequestError(f"array of {n} elements at byte {pos} cannot fit in the {end - pos} bytes left")


def compact_length(buf, pos: int, nullable: bool) -> tuple[int, int]:
    """Unsigned-varint length + 1 of a compact string/bytes/records (0 means null): ``(n or -1, pos)``."""
    n, pos = read_uvarint(buf, pos)
    n -= 1
    if n < 0 or n > len(buf) - pos:
        n = check_length(n, pos, len(buf), nullable)
    return n, pos


def compact_array_length(buf, pos: int, nullable: bool, min_item_size: int) -> tuple[int, int]:
    """Unsigned-varint count + 1 of a compact array (0 means null): ``(n or -1, pos)``."""
    n, pos = read_uvarint(buf, pos)
    n -= 1
    if n < 0 or n * min_item_size > len(buf) - pos:
        n = check_count(n, pos, len(buf), nullable, min_item_size)
    return n, pos


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes, as Kafka's compact lengths, counts and tags are."""
    value = shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise InvalidRequestError(f"truncated varint at byte {pos}")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift >= 35:
            raise InvalidRequestError(f"varint longer than 5 bytes at byte {pos}")


def read_tag(buf, pos: int) -> tuple[int, int, int]:
    """One tagged-field header: ``(tag, start, end)`` of its data, which lies within ``buf``."""
    tag, pos = read_uvarint(buf, pos)
    size, pos = read_uvarint(buf, pos)
    if size > len(buf) - pos:
        raise InvalidRequestError(f"tagged field {tag} of {size} bytes at byte {pos} exceeds the frame")
    return tag, pos, pos + size


def skip_tagged_fields(buf, pos: int) -> int:
    """Skip a whole tagged-field section (used for headers, whose tags seglog does not interpret)."""
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _, _, pos = read_tag(buf, pos)
    return pos


def uvarint(n: int) -> bytes:
    """Encode a non-negative int as an unsigned varint."""
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def tagged_field(tag: int, parts: list) -> bytes:
    """One tagged field: tag, size and the joined ``parts`` of its value."""
    data = b"".join(parts)
    return uvarint(tag) + uvarint(len(data)) + data


_ARRAY_STRUCTS: dict[tuple[str, int], struct.Struct] = {}


def fixed_array(code: str, items) -> bytes:
    """The elements of an array of one fixed-width type (struct format ``code``), without the count."""
    n = len(items)
    s = _ARRAY_STRUCTS.get((code, n))
    if s is None:
        s = struct.Struct(f">{n}{code}")
        if n <= 64:                      # cache the common short arrays (replica lists, partition ids)
            _ARRAY_STRUCTS[(code, n)] = s
    return s.pack(*items)


def records_part(value) -> tuple[int, object, bool]:
    """``(byte length, part, external)`` for a records value.

    bytes and bytearray go inline as they are, a memoryview as a flat byte view; any other object with
    ``__len__`` is an *external chunk* (e.g. a file slice to ``sendfile``) whose ``len()`` is its byte count.
    """
    if isinstance(value, (bytes, bytearray)):
        return len(value), value, False
    if isinstance(value, memoryview):
        if value.ndim != 1 or value.itemsize != 1:
            value = value.cast("B")
        return len(value), value, False
    if hasattr(value, "__len__"):
        return len(value), value, True
    raise TypeError(f"records must be bytes-like or an external chunk with __len__, not {type(value).__name__}")

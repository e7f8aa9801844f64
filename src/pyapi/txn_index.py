"""The aborted-transaction index of a segment: ``<base>.txnindex``, Kafka's TransactionIndex format.

One 34-byte entry per transaction aborted by a marker in the segment, in marker order: version int16 (0),
producerId int64, firstOffset int64 (the transaction's first offset in the partition, possibly in an earlier
segment), lastOffset int64 (the ABORT marker's offset), lastStableOffset int64 (the partition's last stable
offset once the marker was written). As Kafka's, the file exists only for segments holding aborts.

Read-committed fetches hand the entries overlapping the fetched range to the client, which drops the
producer's batches from firstOffset up to its marker. Not thread-safe: the owning Log's lock guards it.
"""

from __future__ import annotations

import os
import struct
from typing import Iterable, NamedTuple

from . import _engine
from .checkpoints import replace_file, storage_errors
from .errors import CorruptRecordError

__all__ = ["AbortedTxn", "ENTRY_SIZE", "SUFFIX", "read_index", "append_entries", "write_index", "sync_index"]

VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size          # 34
SUFFIX = ".txnindex"


class AbortedTxn(NamedTuple):
    """One entry of a .txnindex (Kafka's AbortedTxn)."""
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def pack(self) -> bytes:
        return _ENTRY.pack(VERSION, *self)


def read_index(path: str) -> list[AbortedTxn]:
    """The entries of the index file at `path` ([] when there is none). CorruptRecordError for a length that
    is not a multiple of 34 or an entry of an unknown version; StorageError when it cannot be read."""
    data = b""
    with storage_errors("cannot read transaction index", path, missing_ok=True), open(path, "rb") as f:
        data = f.read()
    if len(data) % ENTRY_SIZE:
        raise CorruptRecordError(f"transaction index of {len(data)} bytes is not made of {ENTRY_SIZE}-byte "
                                 "entries", path=path)
    out = []
    for version, *fields in _ENTRY.iter_unpack(data):
        if version != VERSION:
            raise CorruptRecordError(f"transaction index entry of unknown version {version}", path=path)
        out.append(AbortedTxn(*fields))
    return out


def append_entries(path: str, entries: Iterable[AbortedTxn]) -> None:
    """Append entries to the index file at `path` (created if missing; written to the page cache: it
    survives the process dying, and is fsynced with its segment at its roll). Raises StorageError."""
    data = b"".join(e.pack() for e in entries)
    with storage_errors("cannot write transaction index", path):
        fd = _engine.file_open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            _engine.file_write_all(fd, data, path)
        finally:
            os.close(fd)


def write_index(path: str, entries: list[AbortedTxn]) -> None:
    """Replace the index file at `path` atomically with `entries` (none: the file is removed)."""
    if not entries:
        with storage_errors("cannot delete transaction index", path, missing_ok=True):
            _engine.file_unlink(path)
        return
    replace_file(path, b"".join(e.pack() for e in entries), "cannot write transaction index")


def sync_index(path: str) -> None:
    """fsync the index file at `path` if it exists (a segment's roll and flush)."""
    if not os.path.exists(path):
        return
    with storage_errors("cannot fsync transaction index", path, missing_ok=True):
        fd = _engine.file_open(path, os.O_RDONLY, 0)
        try:
            _engine.file_fsync(fd, path)
        finally:
            os.close(fd)

"""Small text checkpoint files in Kafka's layout: a version line, a count line, then one entry per line.

Writes are atomic: the new content goes to ``<name>.tmp``, is fsynced, renamed over the old file, and the
directory is fsynced, so a crash leaves either the old or the new file, never a torn one. A file that does
not parse raises CorruptCheckpointError (its owner decides how to fall back).
"""

from __future__ import annotations

import os

from .errors import CorruptRecordError, StorageError

VERSION = 0


class CorruptCheckpointError(CorruptRecordError):
    """A checkpoint file does not have the version/count/entries layout."""


def write_checkpoint(path: str, entries: list[tuple], version: int = VERSION) -> None:
    """Atomically replace ``path`` with the entries (each a tuple of fields joined by spaces)."""
    lines = [str(version), str(len(entries))] + [" ".join(str(f) for f in e) for e in entries]
    data = ("\n".join(lines) + "\n").encode()
    tmp = path + ".tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        fsync_dir(os.path.dirname(path) or ".")
    except OSError as e:
        raise StorageError(f"cannot write checkpoint: {e.strerror}", path, e.errno) from None


def read_checkpoint(path: str, fields: int, version: int = VERSION) -> list[list[str]] | None:
    """The entries of a checkpoint (each split into ``fields`` strings), or None if the file does not exist."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StorageError(f"cannot read checkpoint: {e.strerror}", path, e.errno) from None
    lines = text.splitlines()
    try:
        if int(lines[0]) != version:
            raise ValueError(f"version {lines[0]}")
        count = int(lines[1])
        entries = [line.split() for line in lines[2:2 + count]]
        if len(entries) != count or any(len(e) != fields for e in entries):
            raise ValueError("entry count or shape")
    except (IndexError, ValueError) as e:
        raise CorruptCheckpointError(f"checkpoint does not parse ({e})", path=path) from None
    return entries


def fsync_dir(path: str) -> None:
    """fsync a directory so a rename or unlink inside it is durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

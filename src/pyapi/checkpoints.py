"""Small text checkpoint files in Kafka's layout: a version line, a count line, then one entry per line; and
the file-system helpers the storage modules share (``replace_file``, ``read_json``, ``fsync_dir``,
``storage_errors``).
Their file calls go through the engine's file-call table (``_engine.file_*``), so faults can be injected.

Writes are atomic: the new content goes to ``<name>.tmp``, is fsynced, renamed over the old file, and the
directory is fsynced, so a crash leaves either the old or the new file, never a torn one. A file that does
not parse raises CorruptCheckpointError (its owner decides how to fall back). File-system failures raise
StorageError, never a bare OSError.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os

from . import _engine
from .errors import CorruptRecordError, StorageError

VERSION = 0


class CorruptCheckpointError(CorruptRecordError):
    """A checkpoint file does not have the version/count/entries layout."""


def write_checkpoint(path: str, entries: list[tuple], version: int = VERSION) -> None:
    """Atomically replace ``path`` with the entries (each a tuple of fields joined by spaces)."""
    lines = [str(version), str(len(entries))] + [" ".join(str(f) for f in e) for e in entries]
    replace_file(path, ("\n".join(lines) + "\n").encode(), "cannot write checkpoint")


def replace_file(path: str, data, what: str, mode: int = 0o644) -> None:
    """Atomically replace ``path`` with ``data``: written to ``<path>.tmp`` (created with ``mode``), fsynced,
    renamed over ``path``, directory fsynced. Raises StorageError("<what>: <reason>")."""
    tmp = path + ".tmp"
    with storage_errors(what, path):
        fd = _engine.file_open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            _engine.file_write_all(fd, data, tmp)
            _engine.file_fsync(fd, tmp)
        finally:
            os.close(fd)
        _engine.file_rename(tmp, path)
    fsync_dir(os.path.dirname(path) or ".")


def read_json(path: str, what: str):
    """The JSON document in ``path``, or None if the file does not exist. Raises StorageError("<what>: <reason>")
    when it cannot be read or does not parse."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise StorageError(f"{what}: {e}", path) from None


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
    """fsync a directory so a rename or unlink inside it is durable. Raises StorageError."""
    with storage_errors("cannot fsync directory", path):
        fd = _engine.file_open(path, os.O_RDONLY | os.O_DIRECTORY, 0)
        try:
            _engine.file_fsync(fd, path)
        finally:
            os.close(fd)


def lock_directory(path: str, busy: str, open_file=None) -> int:
    """Take the writer's flock on ``<path>/.lock`` (one process writes a directory), opened with `open_file`
    (os.open by default; a partition log's goes through the engine's file calls, which tests fault); the open descriptor, which
    holds the lock until it is closed. StorageError(busy) if another process holds it."""
    with storage_errors("cannot open lock file", path):
        fd = (open_file or os.open)(os.path.join(path, ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise StorageError(busy, path) from None
    return fd


@contextlib.contextmanager
def storage_errors(what: str, path: str, missing_ok: bool = False):
    """Turn an OSError raised in the block into StorageError("<what>: <reason>") naming the file that failed
    (``path`` when the error names none) and carrying its errno. missing_ok: a FileNotFoundError ends the
    block quietly instead."""
    try:
        yield
    except OSError as e:
        if not (missing_ok and isinstance(e, FileNotFoundError)):
            raise StorageError(f"{what}: {e.strerror or e}", e.filename or path, e.errno) from None

"""Fault injection for partition directories, in the spirit of Redpanda's storage tests: damage segment,
index and checkpoint files the way crashes, torn writes and bad media do, then let the test reopen the log;
or make file-system calls fail (fail_os_call); or fill a small file system (mount_tmpfs, fill_disk, free_disk).

Batch boundaries are parsed here with struct (independently of the engine), and whole-file validity is
checked with the engine's CRC-32C only (unit-tested against the check value)."""

from __future__ import annotations

import errno
import os
import random
import shutil
import struct
from pathlib import Path
from typing import NamedTuple

from seglog import _engine

HEADER = 61                       # v2 batch header size
CRC_START = 21                    # the CRC covers bytes 21..end


class Span(NamedTuple):
    """One batch in a .log file."""
    position: int
    size: int
    base_offset: int
    last_offset: int


def segment_path(directory, base: int, suffix: str = ".log") -> Path:
    return Path(directory) / ("%020d%s" % (base, suffix))


def segment_files(directory, suffix: str = ".log") -> list[Path]:
    """The directory's segment files of one kind, oldest first."""
    return sorted(p for p in Path(directory).iterdir() if p.name.endswith(suffix) and p.name[:20].isdigit())


def batch_spans(path) -> list[Span]:
    """The batches laid out in a .log file, up to the first header that does not fit (no CRC check)."""
    data = Path(path).read_bytes()
    spans, pos = [], 0
    while pos + HEADER <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        spans.append(Span(pos, length + 12, base, base + delta))
        if length + 12 < HEADER:
            break
        pos += length + 12
    return spans


def invalid_batches(path) -> list[str]:
    """Why each part of a .log file is not a whole, CRC-valid batch (empty when the file is sound)."""
    data = Path(path).read_bytes()
    problems, pos = [], 0
    while pos < len(data):
        if pos + HEADER > len(data):
            return problems + [f"{path}: {len(data) - pos} trailing bytes at {pos}"]
        (length,) = struct.unpack_from(">i", data, pos + 8)
        size = length + 12
        if size < HEADER or pos + size > len(data):
            return problems + [f"{path}: batch at {pos} of size {size} does not fit the file"]
        (crc,) = struct.unpack_from(">I", data, pos + 17)
        if data[pos + 16] != 2 or _engine.crc32c(data[pos + CRC_START:pos + size]) != crc:
            problems.append(f"{path}: bad magic or CRC at {pos}")
        pos += size
    return problems


def truncate_at(path, size: int) -> None:
    os.truncate(path, size)


def append_bytes(path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def flip_byte(path, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        b = f.read(1)[0]
        f.seek(position)
        f.write(bytes([b ^ 0xFF]))


def zero_range(path, start: int, length: int) -> None:
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(bytes(length))


def garbage(n: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(n)


def crash_copy(src, dst) -> Path:
    """Copy a live log's directory as a kill -9 would leave it (every written byte, no lock, no close), so a
    test can reopen the copy while the original object is still open."""
    dst = Path(dst)
    dst.mkdir(parents=True)
    for p in Path(src).iterdir():
        if p.is_file() and p.name != ".lock":
            shutil.copyfile(p, dst / p.name)
    return dst


def fail_os_call(monkeypatch, name: str, match: str, err: int = errno.EIO) -> None:
    """Make os.<name> raise OSError(err) (an I/O error by default) when its first argument contains `match`;
    other calls go through. The fault lasts until monkeypatch undoes it."""
    real = getattr(os, name)

    def failing(*args, **kwargs):
        if args and match in os.fsdecode(args[0] if not isinstance(args[0], int) else ""):
            raise OSError(err, os.strerror(err), os.fsdecode(args[0]))
        return real(*args, **kwargs)
    monkeypatch.setattr(os, name, failing)


# -- a full disk ----------------------------------------------------------------------------------------------

def mount_tmpfs(target, size: str) -> None:
    """Mount a tmpfs of `size` (e.g. "256m") on the directory `target` (created). RuntimeError with mount's
    message when that is not permitted (it needs root)."""
    import subprocess

    Path(target).mkdir(parents=True, exist_ok=True)
    try:
        res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)],
                             capture_output=True, text=True)
    except FileNotFoundError as e:
        raise RuntimeError(f"cannot mount a tmpfs: {e}") from None
    if res.returncode != 0:
        raise RuntimeError(f"cannot mount a tmpfs on {target}: {res.stderr.strip()}")


def unmount(target) -> None:
    import subprocess

    subprocess.run(["umount", "-l", str(target)], check=False, capture_output=True)


BALLAST = ".ballast"


def fill_disk(directory) -> int:
    """Fill the file system holding `directory` with a ballast file in it until a write fails with ENOSPC;
    returns the ballast's size. Writers on that file system then get ENOSPC until ``free_disk``."""
    path = Path(directory) / BALLAST
    chunk = bytes(1 << 20)
    size = 0
    with open(path, "ab", buffering=0) as f:
        while True:
            try:
                n = f.write(chunk)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                if len(chunk) > 4096:           # top up the last pages
                    chunk = chunk[:4096]
                    continue
                return size
            size += n


def free_disk(directory) -> None:
    """Remove the ballast ``fill_disk`` wrote."""
    try:
        os.unlink(Path(directory) / BALLAST)
    except FileNotFoundError:
        pass

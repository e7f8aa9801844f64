"""Fault injection into seglog's file calls, for tests and benchmarks.

The engine sends every file call that changes or maps a file through one table (see the engine's fileops.pxi;
the log layer's Python-level calls use ``_engine.file_*``, which go through it too). A FaultPlan is a list of
rules; while it is installed (``with plan:``), each call is matched against them in order and the first rule
that matches and is due decides:

    plan = FaultPlan()
    plan.fail("pwrite", errno.ENOSPC, path="*.log", nth=3)   # the 3rd pwrite on a .log fails with ENOSPC
    plan.short_write("pwrite", keep=10, path="*.index")     # the next pwrite on an index moves only 10 bytes
    plan.delay("fdatasync", 2.0, times=None)                # every fdatasync takes 2 s longer
    with plan:
        ...
    plan.calls        # every (op, path) the engine made while installed, in order (rename: the source)
    plan.fired        # (op, path, what) of the faults injected

Ops: open, pwrite, write, fdatasync, fsync, ftruncate, fallocate, rename, unlink, mmap. ``path`` is an fnmatch
pattern over the full file name. ``nth`` counts the calls matching the rule's op and path (1 = the first);
``times`` is how many calls from there the rule hits (None: all). One plan is installed process-wide at a time.
"""

from __future__ import annotations

import dataclasses
import errno as _errno
import fnmatch
import threading

from . import _engine
from .errors import InvalidArgumentError

__all__ = ["FaultPlan", "OPS"]

OPS = _engine.FILE_OPS


@dataclasses.dataclass
class _Rule:
    op: str
    path: str
    nth: int
    times: int | None
    decision: object
    seen: int = 0

    def hit(self, op: str, path: str) -> bool:
        if op != self.op or not fnmatch.fnmatchcase(path, self.path):
            return False
        self.seen += 1
        return self.seen >= self.nth and (self.times is None or self.seen < self.nth + self.times)


class FaultPlan:
    """Rules for the engine's file calls (see the module docstring). Thread-safe."""

    def __init__(self):
        self._rules: list[_Rule] = []
        self._lock = threading.Lock()
        self._previous = None
        self.calls: list[tuple[str, str]] = []
        self.fired: list[tuple[str, str, object]] = []

    def _add(self, op: str, path: str, nth: int, times: int | None, decision) -> "FaultPlan":
        if op not in OPS:
            raise InvalidArgumentError(f"unknown file op {op!r} (one of {', '.join(OPS)})")
        if nth < 1 or (times is not None and times < 1):
            raise InvalidArgumentError("nth and times count from 1")
        with self._lock:
            self._rules.append(_Rule(op, path, nth, times, decision))
        return self

    def fail(self, op: str, errno: int = _errno.EIO, *, path: str = "*", nth: int = 1,
             times: int | None = 1) -> "FaultPlan":
        """The nth matching call (and times-1 after it) fails with errno, doing nothing."""
        return self._add(op, path, nth, times, errno)

    def short_write(self, op: str = "pwrite", keep: int = 0, *, path: str = "*", nth: int = 1,
                    times: int | None = 1) -> "FaultPlan":
        """The nth matching pwrite/write moves at most `keep` bytes (0: none, which writers read as ENOSPC)."""
        if op not in ("pwrite", "write"):
            raise InvalidArgumentError("short writes apply to pwrite and write")
        return self._add(op, path, nth, times, ("short", keep))

    def delay(self, op: str, seconds: float, *, path: str = "*", nth: int = 1,
              times: int | None = None) -> "FaultPlan":
        """The matching calls sleep `seconds` (without holding the GIL), then run."""
        return self._add(op, path, nth, times, ("delay", seconds))

    def __call__(self, op: str, path: str, nbytes: int, dst: str | None = None):
        with self._lock:
            self.calls.append((op, path))
            for rule in self._rules:
                if rule.hit(op, path):
                    self.fired.append((op, path, rule.decision))
                    return rule.decision
        return None

    def count(self, op: str, path: str = "*") -> int:
        """Calls of op on paths matching `path` seen so far."""
        with self._lock:
            return sum(1 for o, p in self.calls if o == op and fnmatch.fnmatchcase(p, path))

    def install(self) -> "FaultPlan":
        self._previous = _engine.set_fault_handler(self)
        return self

    def uninstall(self) -> None:
        _engine.set_fault_handler(self._previous)
        self._previous = None

    def __enter__(self) -> "FaultPlan":
        return self.install()

    def __exit__(self, *exc) -> None:
        self.uninstall()

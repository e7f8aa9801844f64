"""Run a Python program whose seglog file calls fail while a trigger file says so: a full or failing disk
switched on and off from outside the process, at a moment the test picks (a tmpfs filled with a ballast fails
only the writes that need new space, and needs root; this fails exactly the calls named, with the errno named).

    python failing_disk.py TRIGGER -m seglog broker --broker-id 0 ...     as ``python -m seglog broker ...``
    python failing_disk.py TRIGGER broker_process.py DATA_DIR ...         as ``python broker_process.py ...``

While TRIGGER exists it holds ``ERRNO_NAME op,op,...`` (e.g. ``ENOSPC pwrite,write,fallocate``; the ops of
``seglog.faults.OPS``) and every engine file call of those ops fails with that errno, doing nothing (the engine's
fault seam, ``seglog._engine.set_fault_handler``); without it every call runs. ``write_trigger`` and
``clear_trigger`` switch it from the test."""

from __future__ import annotations

import errno
import os
import runpy
import sys
from pathlib import Path


def write_trigger(trigger, error: int, ops) -> None:
    """Make the calls of `ops` fail with `error` from now on (atomically: a reader sees the old or new rule)."""
    from seglog.faults import OPS

    unknown = [op for op in ops if op not in OPS]
    if unknown:
        raise ValueError(f"unknown file ops {unknown} (one of {', '.join(OPS)})")
    tmp = Path(f"{trigger}.tmp")
    tmp.write_text(f"{errno.errorcode[error]} {','.join(ops)}\n")
    os.replace(tmp, trigger)


def clear_trigger(trigger) -> None:
    try:
        os.unlink(trigger)
    except FileNotFoundError:
        pass


class TriggeredFaults:
    """The fault handler: reads the trigger file (again only when it changed) on every call."""

    def __init__(self, trigger: str):
        self.trigger = trigger
        self._seen: tuple[int, int] | None = None
        self._rule: tuple[int, frozenset] | None = None

    def __call__(self, op: str, path: str, nbytes: int, dst: str | None = None):
        try:
            st = os.stat(self.trigger)
        except FileNotFoundError:
            return None
        if self._seen != (st.st_ino, st.st_mtime_ns):
            try:
                name, ops = Path(self.trigger).read_text().split()
            except (FileNotFoundError, ValueError):        # removed or being replaced: no rule this call
                return None
            self._rule, self._seen = (getattr(errno, name), frozenset(ops.split(","))), (st.st_ino, st.st_mtime_ns)
        error, ops = self._rule
        return error if op in ops else None


def main(argv: list[str]) -> None:
    """Install the handler, then run the program as the python command line would (its SystemExit is ours)."""
    trigger, *program = argv
    from seglog import _engine

    _engine.set_fault_handler(TriggeredFaults(trigger))
    if program[:1] == ["-m"]:
        sys.argv = [program[1], *program[2:]]
        runpy.run_module(program[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = program
        sys.path[0] = os.path.dirname(os.path.abspath(program[0]))
        runpy.run_path(program[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])

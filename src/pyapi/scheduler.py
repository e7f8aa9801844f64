"""One daemon thread that runs timed work: flush by time, retention checks, delayed file deletion.

Tasks run one at a time on the scheduler thread, so a task must be short and must take the locks it needs.
A task that raises is logged and, if periodic, still rescheduled. The process-wide instance starts on first
use; ``shutdown()`` stops it (tests use private instances).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import Callable

log = logging.getLogger("seglog.scheduler")


class Task:
    """A scheduled call; ``cancel()`` stops further runs (a run already started finishes)."""

    __slots__ = ("fn", "period", "cancelled", "name")

    def __init__(self, fn: Callable[[], object], period: float | None, name: str):
        self.fn = fn
        self.period = period
        self.cancelled = False
        self.name = name

    def cancel(self) -> None:
        self.cancelled = True


class Scheduler:
    def __init__(self, name: str = "seglog-scheduler"):
        self._heap: list[tuple[float, int, Task]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def schedule(self, fn: Callable[[], object], delay: float, period: float | None = None,
                 name: str = "") -> Task:
        """Run fn after `delay` seconds, then every `period` seconds if given. Thread-safe."""
        task = Task(fn, period, name or getattr(fn, "__qualname__", "task"))
        with self._cond:
            if self._stopped:
                raise RuntimeError("scheduler is shut down")
            heapq.heappush(self._heap, (time.monotonic() + delay, next(self._seq), task))
            self._cond.notify()
        return task

    def shutdown(self) -> None:
        """Stop the thread; pending tasks never run."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._heap or self._heap[0][0] > time.monotonic()):
                    self._cond.wait(self._heap[0][0] - time.monotonic() if self._heap else None)
                if self._stopped:
                    return
                due, _, task = heapq.heappop(self._heap)
            if task.cancelled:
                continue
            try:
                task.fn()
            except Exception:
                log.exception("scheduled task %s failed", task.name)
            if task.period is not None and not task.cancelled:
                with self._cond:
                    if not self._stopped:
                        heapq.heappush(self._heap, (max(due + task.period, time.monotonic()), next(self._seq), task))


_default: Scheduler | None = None
_default_lock = threading.Lock()


def default_scheduler() -> Scheduler:
    """The process-wide scheduler, started on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Scheduler()
        return _default

"""The one thread a metadata store runs its callbacks on, and the subscription handles it gives out."""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any, Callable

from ..errors import LogClosedError, NetworkError

__all__ = ["EventThread", "Subscription", "Watch"]

log = logging.getLogger("seglog.cluster")

_UNSET = object()
_STOP = object()


class Subscription:
    """A registered callback; ``cancel()`` stops further calls (one already running finishes). Thread-safe."""

    def __init__(self, callback: Callable[..., Any]):
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def notify(self, *args: Any) -> None:
        """Call the callback unless cancelled; an exception is logged, never propagated. Event thread only."""
        if self.cancelled:
            return
        try:
            self.callback(*args)
        except Exception:
            log.exception("metadata store callback %r failed", self.callback)


class Watch(Subscription):
    """A callback fed with ``compute()``'s value whenever ``refresh()`` finds it changed (the first refresh
    always delivers). Refresh only on the event thread: it serializes computing and delivering."""

    def __init__(self, compute: Callable[[], Any], callback: Callable[[Any], None]):
        super().__init__(callback)
        self._compute = compute
        self._last: Any = _UNSET

    def refresh(self) -> None:
        """Recompute and deliver if different. A compute failing because the store is unreachable or closed
        is skipped (stores refresh again once reconnected); other failures are logged."""
        if self.cancelled:
            return
        try:
            value = self._compute()
        except (NetworkError, LogClosedError) as exc:
            log.debug("watch refresh skipped: %r", exc)
            return
        except Exception:
            log.exception("metadata store watch %r failed to read its value", self.callback)
            return
        self._deliver(value)

    def finish(self, value: Any) -> None:
        """Deliver a last ``value`` (unless it is the one last delivered), then cancel. Event thread only."""
        if not self.cancelled:
            self._deliver(value)
            self.cancel()

    def _deliver(self, value: Any) -> None:
        if value != self._last:
            self._last = value
            self.notify(value)


class EventThread:
    """Runs submitted calls one at a time, in submission order, on one daemon thread named ``name``."""

    def __init__(self, name: str):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue ``fn(*args)``; ignored after ``stop()``. Never blocks; callable from any thread."""
        if not self._stopped:
            self._queue.put((fn, args))

    def is_current(self) -> bool:
        return threading.current_thread() is self._thread

    def stop(self, timeout: float = 5.0) -> None:
        """Run what is queued, then end the thread; waits up to ``timeout`` s unless called on the thread
        itself. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._queue.put((_STOP, ()))
        if not self.is_current():
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            fn, args = self._queue.get()
            if fn is _STOP:
                return
            try:
                fn(*args)
            except Exception:
                log.exception("metadata store event %r failed", fn)

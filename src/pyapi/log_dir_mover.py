"""ReplicaAlterLogDirs: the thread that moves replicas between a node's log directories (Kafka's
ReplicaAlterLogDirsThread).

Each moving partition has a future log (seglog.log_dirs: ``<topic>-<p>.<id>-future`` in the target directory).
The thread copies the current log's batches into it as a follower copies its leader (``append_as_follower``,
offsets and leader epochs kept), following what the current log does meanwhile: its start offset rising
(retention, DeleteRecords) is applied to the future log, and a truncation (a follower's diverged tail) cuts the
future log back to where the two agree by leader epoch, as Kafka's thread truncates by OffsetsForLeaderEpoch.
When the future log holds every offset the node swaps it in under the partition log's lock
(Node._replace_with_future, seglog.log_future), so the partition serves throughout.

The copy rate is limited by ``replica.alter.log.dirs.io.max.bytes.per.second`` (a dynamic broker config, as in
Kafka; unset: no limit), measured like the replication throttles (seglog.replication.throttle) over
replication.quota.window.num windows of replication.quota.window.size.seconds.

Locking: the node's lock, then a future's own lock. The thread holds only the future's lock while copying, so
removing a future (Node, under its lock) waits for the batch being copied.
"""

from __future__ import annotations

import logging
import os
import threading

from . import _engine
from .errors import SeglogError
from .replication.throttle import ReplicationQuota

__all__ = ["ReplicaAlterLogDirs"]

log = logging.getLogger("seglog.log_dir_mover")

COPY_BYTES = 1 << 20          # read from the current log per step (one batch at least)
IDLE_WAIT_S = 0.05            # between steps while nothing could be copied or the quota is used up


class _Future:
    """A future log being filled, and the lock its copy and its removal take."""

    def __init__(self, part, log_):
        self.part = part
        self.log = log_
        self.lock = threading.Lock()


class ReplicaAlterLogDirs:
    """The future logs of a node and the thread copying them (started with the first one)."""

    def __init__(self, node, samples: int, window_seconds: int):
        self.node = node
        self.quota = ReplicationQuota(samples, window_seconds)
        self._futures: dict[tuple[str, int], _Future] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None

    # -- the node's calls (node lock held) ------------------------------------------------------------------

    def add(self, part, future_log) -> None:
        with self._lock:
            self._futures[(part.topic, part.index)] = _Future(part, future_log)
            if self._thread is None and not self._stop:
                self._thread = threading.Thread(target=self._run, name="seglog-alter-log-dirs", daemon=True)
                self._thread.start()
        self._wake.set()

    def remove(self, tp: tuple[str, int]) -> str | None:
        """Stop moving `tp`: close its future log (after the batch being copied) and return its path."""
        with self._lock:
            fut = self._futures.pop(tp, None)
        if fut is None:
            return None
        with fut.lock:
            fut.log.close()
        return fut.log.path

    def forget(self, tp: tuple[str, int]) -> None:
        """The future log of `tp` became the current one."""
        with self._lock:
            self._futures.pop(tp, None)

    def dir_of(self, tp: tuple[str, int]) -> str | None:
        """The log directory `tp` is moving to, or None."""
        fut = self._futures.get(tp)
        return None if fut is None else os.path.dirname(fut.log.path)

    def dirs(self) -> list[str]:
        """The log directory of every future log (placement counts them)."""
        with self._lock:
            return [os.path.dirname(f.log.path) for f in self._futures.values()]

    def logs(self) -> dict:
        """{(topic, p): its future Log}."""
        with self._lock:
            return {tp: f.log for tp, f in self._futures.items()}

    def close(self) -> None:
        """Stop the thread and close the future logs (kept on disk: the next start resumes them). Not with the
        node's lock held (the thread may be waiting for it)."""
        with self._lock:
            self._stop = True
            futures = list(self._futures.values())
            self._futures.clear()
            thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        for fut in futures:
            with fut.lock:
                fut.log.close()

    # -- the thread ---------------------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stop:
                    return
                futures = list(self._futures.items())
            progressed = False
            for tp, fut in futures:
                if self._stop:
                    return
                if self.node.log_dir_failure is not None:     # as Kafka's fetchers of an offline log dir
                    break
                if self.quota.exceeded():
                    break
                try:
                    progressed |= self._step(tp, fut)
                except Exception as e:                  # never let one move stop the others
                    if self._stop or tp not in self._futures:
                        continue                        # removed meanwhile
                    log.error("moving the replica of %s-%d to %s failed; the move is abandoned: %s", tp[0], tp[1],
                              os.path.dirname(fut.log.path), e, exc_info=not isinstance(e, (SeglogError, OSError)))
                    self._abandon(tp, fut)
            if not progressed:
                self._wake.wait(IDLE_WAIT_S)
                self._wake.clear()

    def _abandon(self, tp, fut) -> None:
        """Drop a future log that failed, and its directory, unless a failed swap left it the only copy (the
        current log closed: the next start promotes it)."""
        with self.node._lock:
            if self._futures.get(tp) is not fut:
                return
            path = self.remove(tp)
            if fut.part.log.closed:
                return
            try:
                self.node._delete_dirs([self.node._dirs.retire(path)], f"delete future log {tp[0]}-{tp[1]}")
            except SeglogError as e:
                log.error("the future log %s could not be removed: %s", path, e)

    def _step(self, tp, fut) -> bool:
        """Copy one chunk into the future log, or swap it in when caught up; whether anything happened."""
        with fut.lock:
            if self._futures.get(tp) is not fut or fut.log.closed:
                return False
            cur, f = fut.part.log, fut.log
            self._follow(cur, f)
            if f.end_offset < cur.end_offset:
                view, _ = cur.read_next(f.end_offset, COPY_BYTES, None)
                if len(view):
                    base = _engine.batches(view, False)[0].base_offset
                    if base < f.end_offset:
                        # the batch holds the future's end: its start offset is inside the batch (DeleteRecords;
                        # Kafka restarts the log at the batch) or compaction rewrote the batch it ends in
                        if f.end_offset == f.start_offset:
                            f.truncate_fully_and_start_at(base)
                        else:
                            f.truncate_to(base)
                    f.append_as_follower(view)
                    self.quota.record(len(view))
                    return True
                return False
        return self.node._replace_with_future(fut.part, fut.log)

    @staticmethod
    def _follow(cur, f) -> None:
        """Apply the current log's truncation and start offset to the future log."""
        entries = f.leader_epochs
        if entries:
            _, end = cur.end_offset_for_epoch(entries[-1][0])
            if 0 <= end < f.end_offset:
                f.truncate_to(end)
        if f.end_offset > cur.end_offset:
            f.truncate_to(cur.end_offset)
        start = cur.start_offset
        if f.end_offset < start:
            f.truncate_fully_and_start_at(start)
        elif f.start_offset < start:
            f.delete_records_before(start)

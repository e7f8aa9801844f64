"""The swap of a caught-up future log in place of a log.Log (Kafka's Partition.maybeReplaceCurrentWithFutureReplica
and LogManager.replaceCurrentWithFutureLog), a base class of Log.

A future log is a second Log of the same partition in another log directory (``<topic>-<p>.<id>-future``) that
copies the current one (seglog.log_dir_mover). Once it holds every offset, :meth:`LogFuture.replace_with_future`
makes it the current log under the current Log's lock, so no append lands in between, and the Log object stays the
same (everything holding it goes on using it, now over the new directory):

1. the future log takes the current one's high watermark and leader epoch cache and is closed cleanly;
2. the current directory is renamed to ``<topic>-<p>.<id>-delete`` (directory fsynced);
3. the future directory is renamed to ``<topic>-<p>`` (directory fsynced) and the Log reopens over it.

A crash after step 2 leaves a future directory and no current one: the node's loader promotes it (it was
complete before step 2 began), so no kill -9 loses the log. A crash before step 2 leaves both: the copy resumes.
"""

from __future__ import annotations

import os

from . import _engine
from .checkpoints import fsync_dir, storage_errors
from .errors import LogClosedError, StorageError
from .local_log import LocalLog

__all__ = ["LogFuture"]


class LogFuture:
    """replace_with_future of a log.Log (see the module docstring)."""

    def replace_with_future(self, future, retired_path: str, final_path: str) -> bool:
        """Make `future` (a Log holding the same offsets) this log's data: returns False, changing nothing, while
        the future's end offset differs from this log's (more was appended: copy on and try again). On True the
        old directory is at `retired_path` (to be deleted) and this Log reads and writes `final_path`; `future` is
        closed. Raises LogClosedError, StorageError: a rename that fails is undone and the Log reopened over its
        old directory; if undoing fails too the Log stays closed and the next start promotes the future log."""
        with self._lock:
            if self._closed:
                raise LogClosedError(f"log {self.path} is closed")
            self._seal_pending()
            if future.end_offset != self.end_offset or future.start_offset != self.start_offset:
                return False
            if self._hw is not None:
                future.high_watermark = min(max(self._hw, future.start_offset), future.end_offset)
            future._epochs.entries = list(self._epochs.entries)
            future._epochs._persist()
            future.close()
            epoch = self._leader_epoch
            self._close_locked()
            old = self.path
            try:
                with storage_errors("cannot retire the current log directory", old):
                    _engine.file_rename(old, retired_path)
            except StorageError:
                self._reopen(old, epoch)
                raise
            try:
                fsync_dir(os.path.dirname(old))
                with storage_errors("cannot rename the future log directory", future.path):
                    _engine.file_rename(future.path, final_path)
                fsync_dir(os.path.dirname(final_path))
            except StorageError:
                with storage_errors("cannot restore the current log directory", retired_path):
                    _engine.file_rename(retired_path, old)     # failing too: closed, the next start promotes
                self._reopen(old, epoch)
                raise
            self._reopen(final_path, epoch)
            return True

    def _reopen(self, path: str, leader_epoch: int) -> None:
        """Open this closed Log again over `path` (lock held): the loader's state replaces the old one. The
        lock-free getters keep answering meanwhile: the old writer (end_offset) stays until the loader makes the
        new one, and the offsets the loader sets are the ones the Log had (the same log)."""
        local = self._local
        self.path = path
        self._local = LocalLog(path, self._config, readonly=False, max_open=local.max_open, scheduler=local.scheduler)
        self._journal = self._tail = None
        self._batch_writers = {}
        self._points = _engine.BatchCache()
        self._unflushed = 0
        self._marker_kept = self._dirty = False
        self._jitter_for, self._jitter_ms = None, 0
        self._leader_epoch = leader_epoch
        self._task = self._task_interval = None
        self._open(create=False)
        self._closed = False
        self._schedule_maintenance()

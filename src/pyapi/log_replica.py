"""What replication does to a partition log (part of log.Log): leader epochs, appends of a leader's batches
as they are (a follower), OffsetForLeaderEpoch, and truncation (of a diverged tail, or of everything).

``LogReplica`` is a base class of ``log.Log`` and works on its state (``_lock``, ``_local``, ``_epochs``,
``_writer``, ``_start_offset``, ``_recovery_point``, ``_hw``, ``_points``). Invariants kept by truncation:
start_offset <= recovery point, high watermark <= end offset after it, the epoch cache ends at the end offset,
the producer state is rebuilt for the new end, and the checkpoint is rewritten. Locking as stated per method;
methods without a public name run with the Log's lock held.
"""

from __future__ import annotations

from . import _engine
from .errors import InvalidRecordError
from .log_args import int_arg as _int_arg

__all__ = ["LogReplica"]


class LogReplica:
    """Leader epochs, follower appends and truncation of a log.Log (see the module docstring)."""

    @property
    def leader_epochs(self) -> list[tuple[int, int]]:
        """(epoch, start offset) entries of the leader epoch cache."""
        return list(self._epochs.entries)

    @property
    def leader_epoch(self) -> int:
        """The epoch stamped into appended batches (partitionLeaderEpoch); 0 unless replication sets it."""
        return self._leader_epoch

    @leader_epoch.setter
    def leader_epoch(self, epoch: int) -> None:
        """Become leader in `epoch`: later appends carry it, and the epoch cache records that it starts at the
        current end offset (as Kafka does when a replica becomes leader)."""
        with self._lock:
            self._check_writable()
            self._seal_pending()
            self._leader_epoch = epoch
            self._writer.leader_epoch = epoch
            self._epochs.assign(epoch, self.end_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= epoch, end offset of that epoch): Kafka's OffsetForLeaderEpoch; (-1, -1) if unknown.
        A log whose leader epoch was never set (a lone broker's) has one epoch, the current one, from its start,
        as Kafka's cache holds it from the moment a replica leads."""
        with self._lock:
            if not self._epochs.entries and 0 <= self._leader_epoch <= epoch:
                return self._leader_epoch, self.end_offset
            return self._epochs.end_offset_for(epoch, self.end_offset)

    def append_as_follower(self, data) -> int:
        """Append whole batches that already carry offsets (a replica copying its leader); returns the new end
        offset. The first batch must start at or after end_offset and offsets must increase. CRCs are checked;
        leader epochs in the batches extend the epoch cache. A write that fails is taken back whole."""
        data = _byte_view(data)
        infos = _engine.batches(data)
        if not infos:
            return self.end_offset
        view = data[:infos[-1].position + infos[-1].size]
        with self._lock:
            self._check_writable()
            self._seal_pending()
            first = expect = self.end_offset
            for b in infos:
                if b.base_offset < expect or b.last_offset < b.base_offset:
                    raise InvalidRecordError(f"replicated batch at offset {b.base_offset} does not follow {expect}")
                expect = b.next_offset
            for b in infos:
                self._epochs.assign(b.leader_epoch, b.base_offset)
            try:
                self._write(view, sum(b.records_count for b in infos), replay=True)
            except BaseException:
                self._take_back(first)
                raise
            self._writer.reset(expect)
            return expect

    def truncate_to(self, offset: int) -> None:
        """Remove every record at or after `offset` (replication truncates diverged tails this way). Batches are
        never split: one holding `offset` goes whole, so end_offset may end below `offset`. Below start_offset
        the log is emptied and restarts at `offset`; at or past end_offset nothing changes (as Kafka's
        truncateTo). Durable on return: the segment fsyncs the file it cut (and the directory when it copied
        and renamed it), and the checkpoint written last fsyncs the directory, making the removal of later
        segments durable too. Views of removed data stay valid. Raises InvalidArgumentError for a negative offset or one
        that is not an int."""
        offset = _int_arg(offset, "truncation offset")
        with self._lock:
            self._check_writable()
            self._seal_pending()
            self._truncate_locked(offset)

    def _truncate_locked(self, offset: int, keep_writer: bool = False) -> None:
        """truncate_to with the lock held and the buffered records written. keep_writer: _seal_pending
        taking back a failed write, whose records stay buffered in append()'s writer."""
        if offset >= self._local.active.next_offset:
            return
        if offset < self._start_offset:
            self._truncate_fully(offset)
            return
        self._local.truncate_to(offset)
        self._after_truncation(keep_writer)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at `offset` (a replica whose log no longer overlaps
        its leader's). Views of removed data stay valid. Raises InvalidArgumentError for a negative offset or
        one that is not an int."""
        offset = _int_arg(offset, "new start offset")
        with self._lock:
            self._check_writable()
            self._seal_pending()
            self._truncate_fully(offset)

    def _truncate_fully(self, offset: int) -> None:
        """Empty the log and restart it at `offset` (lock held); the epoch cache starts over."""
        self._local.truncate_fully(offset)
        self._start_offset = offset
        self._epochs.clear()
        self._after_truncation()

    def _after_truncation(self, keep_writer: bool = False) -> None:
        """After the segments were cut (lock held): cached batches dropped, start offset, recovery point and high
        watermark kept at or below the new end, the epoch cache cut there, producer state rebuilt for it, and the
        checkpoint rewritten."""
        self._points.clear()
        end = self._local.active.next_offset
        if end < self._start_offset:         # the batch holding the start offset went whole: start = end
            self._start_offset = end
        if not keep_writer:
            self._writer.reset(end)
        self._recovery_point = min(self._recovery_point, end)
        if self._hw is not None:
            self._hw = min(self._hw, end)
        self._epochs.truncate_from_end(end)
        self._load_producer_state()
        self._write_state()


def _byte_view(data) -> memoryview:
    """data's bytes as a flat unsigned-byte view, so lengths and slices count bytes, not items (an array of
    ints has 4 per item); a copy when data is not C-contiguous. TypeError for str and other non-buffers."""
    view = memoryview(data)
    return view.cast("B") if view.c_contiguous else memoryview(view.tobytes())

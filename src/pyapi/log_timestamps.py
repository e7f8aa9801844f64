"""The partition log's lookups by timestamp (part of log.Log): ListOffsets by time and MAX_TIMESTAMP, through the
segments' largest timestamps and time indexes.

``LogTimestamps`` is a base class of ``log.Log``; its methods take the Log's lock and read its segments
(``_local``) and start offset.
"""

from __future__ import annotations

import operator
from typing import NamedTuple

from .errors import InvalidTimestampError, LogClosedError
from .local_log import INT64_MAX as _INT64_MAX

__all__ = ["LogTimestamps", "TimestampOffset"]


class TimestampOffset(NamedTuple):
    """The first record at or after a timestamp: its offset and its timestamp."""
    offset: int
    timestamp: int


class LogTimestamps:
    """offset_for_timestamp and offset_of_max_timestamp of a log.Log."""

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The first record whose timestamp is >= timestamp (ms), via the time indexes; None if there is none.
        Raises TypeError for a timestamp that is not an int (as append() does), InvalidTimestampError for one
        outside int64."""
        if type(timestamp) is not int and (isinstance(timestamp, bool) or not hasattr(type(timestamp), "__index__")):
            raise TypeError(f"timestamp must be an int (milliseconds since the epoch), not "
                            f"{type(timestamp).__name__} {timestamp!r}")
        timestamp = operator.index(timestamp)
        if not -_INT64_MAX - 1 <= timestamp <= _INT64_MAX:
            raise InvalidTimestampError(f"timestamp {timestamp} does not fit in int64 milliseconds")
        with self._lock:
            if self._closed:
                raise LogClosedError(f"log {self.path} is closed")
            self._seal_pending()
            for base in list(self._local.bases):
                seg = self._local.segment(base)
                if seg.largest_timestamp >= timestamp:
                    found = seg.find_offset_by_timestamp(timestamp, self._start_offset)
                    if found is not None:
                        return TimestampOffset(*found)
            return None

    def offset_of_max_timestamp(self) -> TimestampOffset | None:
        """The first record holding the largest timestamp of the log (ListOffsets' MAX_TIMESTAMP, -3), found
        through the segments' largest timestamps and time indexes; None if the log holds no record."""
        with self._lock:
            if self._closed:
                raise LogClosedError(f"log {self.path} is closed")
            self._seal_pending()
            best = None
            for base in list(self._local.bases):
                seg = self._local.segment(base)
                if best is None or seg.largest_timestamp > best.largest_timestamp:
                    best = seg
            found = best.find_offset_by_timestamp(best.largest_timestamp, self._start_offset)
            return None if found is None else TimestampOffset(*found)

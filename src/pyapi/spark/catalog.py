"""What the driver plans from: topics, partitions, their offsets and (locally) segments, behind one interface.

:class:`Catalog` is what planning (seglog.spark.planning) and the readers use: ``topics()``, ``select()``,
``prepare()`` (fetch the offsets of many partitions at once), ``open(topic, p)`` -> a :class:`PartitionMeta`
(``start_offset``, ``committed_end``, ``offset_for_timestamp``, and ``extents``/``position``/``cut_points``,
which only size splits), ``split_target()`` and ``make_split()``. Two implementations:

- :class:`DataDir` (option ``path``): a seglog data dir on a file system every executor sees, described
  below; splits are sized in segment bytes.
- :class:`~seglog.spark.broker.BrokerCatalog` (option ``kafka.bootstrap.servers``): Metadata and ListOffsets
  of any Kafka-protocol broker; splits are sized in offsets and read with Fetch requests.

:func:`seglog.spark.locate.open_catalog` picks the one the options name. A catalog is a context manager (the broker one holds
connections).

A data dir (what ``seglog.open()`` manages, Kafka's ``log.dirs``) holds one directory per partition named
``<topic>-<partition>``, the partition being the number after the last '-'. Directories of deleted topics
(``<topic>-<p>.<id>-delete``) and anything else are ignored. Topics starting with ``__`` are internal
(``__consumer_offsets``): a pattern never selects them, naming them explicitly does.

Everything here reads metadata only: directory listings, file sizes, the state checkpoint, offset and time
index lookups (Log.offset_for_timestamp decodes at most the batches after one time-index entry, as Kafka's
ListOffsets does). No record range is scanned. Logs are opened read-only (pread based), so a process writing
the data dir at the same time is never disturbed and cannot crash this one by truncating files.

"""

from __future__ import annotations

import bisect
import os
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass

from .. import _engine
from ..errors import SeglogError, StorageError
from ..log import Log
from .errors import NotADataDirError, SourceOptionError, TopicNotFoundError
from .options import TopicSelection
from .splits import OffsetRangeSplit

__all__ = ["Catalog", "PartitionMeta", "DataDir", "PartitionLog", "SegmentExtent",
           "open_readonly_log"]

_PARTITION_DIR = re.compile(r"^([a-zA-Z0-9._-]+)-(\d+)$")
_SEGMENT_FILE = re.compile(r"^\d{20}\.log$")
_DATA_DIR_MARKERS = ("meta.properties", "topics.json")


@dataclass(frozen=True)
class SegmentExtent:
    """One segment as planning sees it: offsets [base, upper) and the .log size in bytes."""
    base: int
    upper: int
    size: int


class _Closing:
    """A context manager that calls close() on exit."""

    def close(self) -> None:
        """Release what the object holds (nothing by default); idempotent."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class PartitionMeta(_Closing, ABC):
    """One partition's offsets as planning sees them (see the module docstring). A context manager.

    ``start_offset`` and ``committed_end`` (the high watermark, never beyond the log end: no reader goes past
    it); ``offset_for_timestamp(ms)`` -> the first offset below the committed end whose record timestamp is
    >= ms, or None. ``extents(start, end)`` / ``position(extent, offset)`` / ``cut_points(extent, lo, hi,
    step)`` measure a range in the catalog's size unit (bytes locally, offsets through a broker)."""

    topic: str
    partition: int
    start_offset: int
    committed_end: int

    @abstractmethod
    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The first offset below committed_end whose timestamp is >= `timestamp`, or None."""

    @abstractmethod
    def extents(self, start: int, end: int) -> list[SegmentExtent]:
        """The extents covering offsets [start, end), in order."""

    @abstractmethod
    def position(self, extent: SegmentExtent, offset: int) -> int:
        """Where `offset` lies within `extent`, in the catalog's size unit."""

    @abstractmethod
    def cut_points(self, extent: SegmentExtent, lo: int, hi: int, step: int) -> list[tuple[int, int]]:
        """(offset, position) pairs about `step` apart between positions lo and hi of `extent`."""


class Catalog(_Closing, ABC):
    """The topics and partitions a query can read (see the module docstring). Subclasses provide
    ``where`` (for messages), ``topics()``, ``open()``, ``split_target()`` and ``make_split()``."""

    where = ""

    @abstractmethod
    def topics(self) -> dict[str, list[int]]:
        """topic -> sorted partition numbers, as of now."""

    def internal(self, topic: str) -> bool:
        """Whether a topic is internal: a pattern never selects it (naming it explicitly does)."""
        return topic.startswith("__")

    def prepare(self, partitions: list[tuple[str, int]]) -> None:
        """Get ready to open() these partitions (the broker catalog lists all their offsets at once)."""

    @abstractmethod
    def open(self, topic: str, partition: int) -> PartitionMeta:
        """The partition's offsets (a PartitionMeta to close after use)."""

    @abstractmethod
    def split_target(self, split_bytes: int) -> int:
        """The size (in extents' unit) planning packs into one split."""

    @abstractmethod
    def make_split(self, topic: str, partition: int, start: int, end: int, size: int,
                   **read_args) -> OffsetRangeSplit:
        """The split that reads offsets [start, end) of the partition."""

    def select(self, selection: TopicSelection, *, allow_empty: bool) -> list[tuple[str, int]]:
        """The (topic, partition) pairs a query reads, sorted. Named topics and assigned partitions must exist
        (TopicNotFoundError); a pattern matching nothing raises too unless allow_empty (a stream may wait
        for topics to appear)."""
        topics = self.topics()
        if selection.kind == "subscribe":
            missing = [t for t in selection.topics if t not in topics]
            if missing:
                raise TopicNotFoundError(f"topic(s) {', '.join(map(repr, missing))} not found {self.where} "
                                         f"(topics there: {_listing(topics)})")
            return sorted((t, p) for t in set(selection.topics) for p in topics[t])
        if selection.kind == "subscribePattern":
            rx = re.compile(selection.pattern)
            chosen = sorted((t, p) for t, parts in topics.items() if not self.internal(t) and rx.fullmatch(t)
                            for p in parts)
            if not chosen and not allow_empty:
                raise TopicNotFoundError(f"no topic {self.where} matches subscribePattern "
                                         f"{selection.pattern!r} (topics there: {_listing(topics)})")
            return chosen
        out = []
        for topic, parts in selection.assigned.items():
            if topic not in topics:
                raise TopicNotFoundError(f"assigned topic {topic!r} not found {self.where} "
                                         f"(topics there: {_listing(topics)})")
            missing = sorted(set(parts) - set(topics[topic]))
            if missing:
                raise TopicNotFoundError(f"assigned partition(s) {missing} of topic {topic!r} do not exist "
                                         f"(it has partitions {topics[topic]})")
            out.extend((topic, p) for p in parts)
        return sorted(out)


class DataDir(Catalog):
    """A seglog data directory on the local (or a shared) file system.

    Raises NotADataDirError when ``path`` does not exist, is not a directory, is a partition directory itself,
    or holds neither partition directories nor seglog's data dir files (meta.properties, topics.json).
    """

    def __init__(self, path: str, read_committed: bool = False):
        self.read_committed = read_committed
        self.path = os.path.abspath(os.path.expanduser(str(path)))
        self.where = f"in data directory {self.path}"
        if not os.path.exists(self.path):
            raise NotADataDirError("seglog data directory does not exist", self.path)
        if not os.path.isdir(self.path):
            raise NotADataDirError("not a seglog data directory: it is a file", self.path)
        names = os.listdir(self.path)
        if any(_SEGMENT_FILE.match(n) for n in names):
            raise NotADataDirError("this is a partition directory, not a data directory: pass its parent "
                                   "directory as path and select the topic with subscribe/assign", self.path)
        if not self.topics() and not any(m in names for m in _DATA_DIR_MARKERS):
            raise NotADataDirError("not a seglog data directory: it holds no <topic>-<partition> directories",
                                   self.path)

    def topics(self) -> dict[str, list[int]]:
        """topic -> sorted partition numbers, from the directory names (rescanned on every call)."""
        out: dict[str, list[int]] = {}
        try:
            names = os.listdir(self.path)
        except OSError as e:
            raise StorageError(f"cannot list data directory: {e.strerror}", self.path, e.errno) from None
        for name in names:
            m = _PARTITION_DIR.match(name)
            if m and os.path.isdir(os.path.join(self.path, name)):
                out.setdefault(m.group(1), []).append(int(m.group(2)))
        for parts in out.values():
            parts.sort()
        return out

    def partition_path(self, topic: str, partition: int) -> str:
        return os.path.join(self.path, f"{topic}-{partition}")

    def split_target(self, split_bytes: int) -> int:
        return split_bytes

    def make_split(self, topic: str, partition: int, start: int, end: int, size: int,
                   **read_args) -> OffsetRangeSplit:
        return OffsetRangeSplit(topic=topic, partition=partition, start=start, end=end,
                                location=self.partition_path(topic, partition), estimated_bytes=size, **read_args)

    def open(self, topic: str, partition: int) -> "PartitionLog":
        return PartitionLog(self.partition_path(topic, partition), topic, partition, self.read_committed)


def _listing(topics: dict) -> str:
    names = sorted(topics)
    return ", ".join(names) if names else "none"


def open_readonly_log(path: str, topic: str, partition: int) -> Log:
    """A read-only Log of a partition directory (pread based, a few segments open at a time). The open is
    consistent while another process appends: it reads the files as they are at that moment (index entries
    written after it scanned a segment are ignored). StorageError when the directory is not a log."""
    return Log(path, readonly=True, topic=topic, partition=partition, max_open_segments=4)


class PartitionLog(PartitionMeta):
    """One partition's metadata through a read-only Log. Use as a context manager (closes the Log).

    ``committed_end`` is the high watermark capped by the end offset (with read_committed, the last stable
    offset): readers never go past it.
    Raises NotADataDirError when the directory is not a partition log (no segment files).
    """

    def __init__(self, path: str, topic: str, partition: int, read_committed: bool = False):
        self.path = path
        self.topic = topic
        self.partition = partition
        try:
            self.log = open_readonly_log(path, topic, partition)
        except StorageError as e:
            raise NotADataDirError(f"cannot open partition {topic}-{partition} read-only: {e}", path) from None
        self.start_offset = self.log.start_offset
        self.committed_end = min(self.log.last_stable_offset if read_committed else self.log.high_watermark,
                                 self.log.end_offset)
        self._bases = self.log.segment_bases
        self._segments: dict[int, object] = {}

    def close(self) -> None:
        for seg in self._segments.values():
            seg.close()
        self._segments.clear()
        self.log.close()

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The first offset whose record timestamp is >= timestamp (ms), below the committed end; None if none."""
        found = self.log.offset_for_timestamp(timestamp)
        if found is None or found.offset >= self.committed_end:
            return None
        return max(found.offset, self.start_offset)

    def extents(self, start: int, end: int) -> list[SegmentExtent]:
        """The segments holding offsets of [start, end), oldest first (sizes from the file system)."""
        out = []
        bases = self._bases
        i = max(bisect.bisect_right(bases, start) - 1, 0)
        while i < len(bases) and bases[i] < end:
            upper = bases[i + 1] if i + 1 < len(bases) else max(self.committed_end, bases[i])
            if upper > start:
                try:
                    size = os.stat(os.path.join(self.path, _engine.segment_name(bases[i]) + ".log")).st_size
                except FileNotFoundError:      # deleted by retention since the listing: nothing to size
                    size = 0
                out.append(SegmentExtent(bases[i], upper, size))
            i += 1
        return out

    def _segment(self, base: int):
        seg = self._segments.get(base)
        if seg is None:
            seg = self._segments[base] = _engine.Segment(self.path, base, writable=False)
        return seg

    def position(self, extent: SegmentExtent, offset: int) -> int:
        """Estimated byte position of `offset` in the segment: its offset index entry (at most one index
        interval, 4 KiB by default, before the batch). 0 at or before the base, the size at or past the end."""
        if offset <= extent.base:
            return 0
        if offset >= extent.upper:
            return extent.size
        try:
            _, pos = self._segment(extent.base).offset_index.lookup(offset)
        except SeglogError:
            return 0
        return min(pos, extent.size)

    def cut_points(self, extent: SegmentExtent, lo: int, hi: int, step: int) -> list[tuple[int, int]]:
        """(offset, position) pairs inside (lo, hi) about `step` bytes apart, each offset starting a batch:
        taken from the offset index (an entry's offset is the last offset of the batch at its position, so
        entry offset + 1 begins the next batch). Empty when the segment has no usable index."""
        try:
            index = self._segment(extent.base).offset_index
        except SeglogError:
            return []
        n = index.entries
        if n == 0:
            return []
        out: list[tuple[int, int]] = []
        target = self.position(extent, lo) + step
        i = 0
        while target < extent.size:
            # the first entry at or past the target position (entries are sorted by position too)
            a, b = i, n
            while a < b:
                mid = (a + b) // 2
                if index.entry(mid)[1] < target:
                    a = mid + 1
                else:
                    b = mid
            if a >= n:
                break
            off, pos = index.entry(a)
            if off + 1 >= hi or pos >= extent.size:
                break
            if off + 1 > lo and (not out or off + 1 > out[-1][0]):
                out.append((off + 1, pos))
            i = a + 1
            target = pos + step
        return out


def check_not_internal(topic: str) -> None:
    """Writers refuse internal topics (seglog's own __consumer_offsets): SourceOptionError."""
    if topic.startswith("__"):
        raise SourceOptionError(f"topic {topic!r} is internal to seglog/Kafka; writing to it is not allowed")

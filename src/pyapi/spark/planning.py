"""Driver-side planning: resolve the offset range of every partition, then cut the ranges into splits.

1. :func:`resolve_ranges` turns the starting/ending specs (earliest, latest, offsets, timestamps) into one
   ``[start, end)`` per partition, checked against the log: ``start_offset <= start <= end <= committed_end``.
   Offsets outside the log follow failOnDataLoss (as Spark's Kafka source): true raises DataLossError at
   planning time, false moves them into the log (a range may become empty).
2. :func:`plan_splits` cuts the ranges into :class:`~seglog.spark.splits.OffsetRangeSplit` s from segment
   metadata only: each segment's .log size, and offset index lookups to size partial segments. Whole
   segments are packed into one split up to ``split_bytes`` (Spark pays ~35 ms per task, so tasks should be
   few and large); a stretch larger than that (a big segment) is cut at offset index entries, each cut
   starting a batch so no batch is read by two tasks. ``min_partitions`` lowers the target so that about
   that many splits exist, then halves the largest splits by offsets (such a cut may fall inside a batch)
   until at least that many do. Splits never span partitions and are ordered by (topic, partition, start).

Both steps only see a :class:`~seglog.spark.catalog.Catalog` and its
:class:`~seglog.spark.catalog.PartitionMeta` s, so the same code plans a data dir (sizes are segment bytes,
cuts fall at offset index entries) and a broker (Metadata / ListOffsets; sizes are offsets, so a range is one
split unless minPartitions or maxRecordsPerPartition cut it, as in Spark's Kafka source).
``max_records`` (maxRecordsPerPartition) finally cuts any split holding more offsets into equal parts.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass
from typing import Iterable

from .catalog import Catalog, PartitionMeta
from .errors import DataLossError, SourceOptionError
from .options import EARLIEST, LATEST, OffsetSpec
from .splits import OffsetRangeSplit

__all__ = ["PartitionRange", "resolve_ranges", "plan_splits", "resolve_position"]

log = logging.getLogger("seglog.spark")


@dataclass(frozen=True)
class PartitionRange:
    """Offsets [start, end) of one partition to read."""
    topic: str
    partition: int
    start: int
    end: int

    @property
    def count(self) -> int:
        return max(self.end - self.start, 0)


def _check_named(spec: OffsetSpec, chosen: set, option: str) -> None:
    extra = sorted(spec.named_partitions() - chosen)
    if extra:
        names = ", ".join(f"{t}-{p}" for t, p in extra)
        raise SourceOptionError(f"option {option} names partition(s) {names}, which the query does not read "
                                "(check subscribe/subscribePattern/assign and the partition numbers)")


def resolve_position(spec: OffsetSpec, part: PartitionMeta, default: str, is_start: bool,
                     timestamp_strategy: str = "error") -> tuple[int, bool]:
    """One end of one partition's range: (offset, explicit). `explicit` says the user named this offset (it is
    then range-checked); earliest/latest/timestamps always lie inside the log. `default` ("earliest" or
    "latest") is used for partitions a JSON spec does not name."""
    tp = (part.topic, part.partition)
    kind = spec.kind
    if kind == "offsets":
        value = spec.offsets.get(tp, EARLIEST if default == "earliest" else LATEST)
        if value == EARLIEST:
            return part.start_offset, False
        if value == LATEST:
            return part.committed_end, False
        return value, True
    if kind in ("timestamp", "timestamps"):
        ts = spec.timestamp if kind == "timestamp" else spec.timestamps.get(tp)
        if ts is None:
            return (part.start_offset if default == "earliest" else part.committed_end), False
        found = part.offset_for_timestamp(ts)
        if found is not None:
            return found, False
        if is_start and timestamp_strategy == "error":
            raise SourceOptionError(f"no record at or after timestamp {ts} in {part.topic}-{part.partition} "
                                    "(set startingOffsetsByTimestampStrategy=latest to start at the end instead)")
        return part.committed_end, False
    if kind == "earliest":
        return part.start_offset, False
    return part.committed_end, False


def resolve_ranges(catalog: Catalog, partitions: Iterable[tuple[str, int]], starting: OffsetSpec,
                   ending: OffsetSpec, fail_on_data_loss: bool, timestamp_strategy: str = "error",
                   start_default: str = "earliest") -> list[PartitionRange]:
    """The [start, end) of each partition (see the module docstring). Raises SourceOptionError (a spec naming
    unselected partitions, start after end, no offset for a starting timestamp) and DataLossError."""
    chosen = list(partitions)
    names = set(chosen)
    _check_named(starting, names, "startingOffsets")
    _check_named(ending, names, "endingOffsets")
    catalog.prepare(chosen)
    out = []
    for topic, p in chosen:
        with catalog.open(topic, p) as part:
            start, start_explicit = resolve_position(starting, part, start_default, True, timestamp_strategy)
            end, end_explicit = resolve_position(ending, part, "latest", False)
            lo, hi = part.start_offset, part.committed_end
            where = f"{topic}-{p}"
            if start_explicit and not lo <= start <= hi:
                what = ("was deleted (the log now starts at %d)" % lo if start < lo
                        else "is past the committed end %d" % hi)
                if fail_on_data_loss:
                    raise DataLossError(f"starting offset {start} of {where} {what}; valid offsets are "
                                        f"{lo}..{hi}", start, lo, hi)
                log.warning("%s: starting offset %d %s; reading from %d", where, start, what, min(max(start, lo), hi))
                start = min(max(start, lo), hi)
            if end_explicit and not lo <= end <= hi:
                what = ("was deleted (the log now starts at %d)" % lo if end < lo
                        else "is past the committed end %d" % hi)
                if fail_on_data_loss:
                    raise DataLossError(f"ending offset {end} of {where} {what}; valid offsets are {lo}..{hi}",
                                        end, lo, hi)
                log.warning("%s: ending offset %d %s; reading up to %d", where, end, what, min(max(end, lo), hi))
                end = min(max(end, lo), hi)
            if start > end:
                if start_explicit or end_explicit:
                    raise SourceOptionError(f"starting offset {start} of {where} is after its ending offset {end}")
                end = start            # e.g. an ending timestamp before the starting one: nothing to read
            out.append(PartitionRange(topic, p, start, end))
    return out


@dataclass
class _Piece:
    start: int
    end: int
    size: int


def _pieces(part: PartitionMeta, rng: PartitionRange, target: int) -> list[_Piece]:
    """The range as contiguous pieces: one per segment, large segment stretches cut at index entries."""
    out = []
    for ext in part.extents(rng.start, rng.end):
        lo, hi = max(rng.start, ext.base), min(rng.end, ext.upper)
        if lo >= hi:
            continue
        pos_lo, pos_hi = part.position(ext, lo), part.position(ext, hi)
        size = max(pos_hi - pos_lo, 1)
        if size <= target:
            out.append(_Piece(lo, hi, size))
            continue
        prev_off, prev_pos = lo, pos_lo
        for off, pos in part.cut_points(ext, lo, hi, target):
            out.append(_Piece(prev_off, off, max(pos - prev_pos, 1)))
            prev_off, prev_pos = off, pos
        out.append(_Piece(prev_off, hi, max(pos_hi - prev_pos, 1)))
    if out:                      # cover the range exactly, even where segment files changed since listing
        out[0].start, out[-1].end = rng.start, rng.end
    return out


def plan_splits(catalog: Catalog, ranges: list[PartitionRange], split_bytes: int,
                min_partitions: int | None = None, max_records: int | None = None,
                **read_args) -> list[OffsetRangeSplit]:
    """Splits covering every non-empty range exactly once (see the module docstring). ``read_args`` are copied
    into every split (include_headers, fail_on_data_loss, min_timestamp). Partitions are opened one at a
    time, so planning thousands of them needs no more than a few file descriptors."""
    todo = [r for r in ranges if r.count > 0]
    if not todo:
        return []
    catalog.prepare([(r.topic, r.partition) for r in todo])
    target = max(catalog.split_target(split_bytes), 1)
    if min_partitions:
        total = 0
        for r in todo:
            with catalog.open(r.topic, r.partition) as part:
                total += sum(max(part.position(e, min(r.end, e.upper)) - part.position(e, max(r.start, e.base)), 1)
                             for e in part.extents(r.start, r.end))
        target = max(min(target, math.ceil(total / min_partitions)), 1)
    splits = []
    for r in todo:
        with catalog.open(r.topic, r.partition) as part:
            pieces = _pieces(part, r, target) or [_Piece(r.start, r.end, 1)]
        current: _Piece | None = None
        for piece in pieces:
            if current is not None and current.size + piece.size > target:
                splits.append(catalog.make_split(r.topic, r.partition, current.start, current.end, current.size,
                                                 **read_args))
                current = None
            if current is None:
                current = _Piece(piece.start, piece.end, piece.size)
            else:
                current.end, current.size = piece.end, current.size + piece.size
        if current is not None:
            splits.append(catalog.make_split(r.topic, r.partition, current.start, current.end, current.size,
                                             **read_args))
    if min_partitions and len(splits) < min_partitions:
        splits = _split_evenly(splits, min_partitions)
    if max_records:
        splits = _cap_records(splits, max_records)
    return splits


def _cap_records(splits: list[OffsetRangeSplit], max_records: int) -> list[OffsetRangeSplit]:
    """Each split with more than max_records offsets cut into the fewest equal parts that hold at most that
    many (Spark's Kafka source's maxRecordsPerPartition). Cuts may fall inside a batch (see _split_evenly)."""
    out = []
    for s in splits:
        n = s.end - s.start
        parts = math.ceil(n / max_records)
        if parts <= 1:
            out.append(s)
            continue
        for i in range(parts):
            lo, hi = s.start + n * i // parts, s.start + n * (i + 1) // parts
            out.append(dataclasses.replace(s, start=lo, end=hi, estimated_bytes=s.estimated_bytes // parts))
    return out


def _split_evenly(splits: list[OffsetRangeSplit], wanted: int) -> list[OffsetRangeSplit]:
    """Halve the split with the most offsets until there are `wanted` splits (or none has two offsets left),
    as Spark's Kafka source honours minPartitions. A cut may fall inside a batch: both tasks then decode it and
    keep only their own offsets, so this is used only when byte-based cutting (at batch starts) gave too few."""
    out = list(splits)
    while len(out) < wanted:
        i = max(range(len(out)), key=lambda k: out[k].end - out[k].start)
        s = out[i]
        if s.end - s.start < 2:
            break
        mid = s.start + (s.end - s.start) // 2
        half = s.estimated_bytes // 2
        out[i:i + 1] = [dataclasses.replace(s, end=mid, estimated_bytes=half),
                        dataclasses.replace(s, start=mid, estimated_bytes=s.estimated_bytes - half)]
    return out

"""Streaming reads: ``spark.readStream.format("seglog")`` (micro-batches).

Offsets are JSON-able dicts ``{"topic": {"partition": next_offset}}`` (strings as keys, as Spark's Kafka
source writes them): a micro-batch reads [start[tp], end[tp]) of every partition. Spark checkpoints them,
so a restarted query replays exactly the batch it had planned and continues after it: no loss, no
duplicates, as long as the offsets are still in the log (otherwise ``failOnDataLoss``).

- ``initialOffset``: the startingOffsets spec (default "latest") resolved for the partitions selected now.
- ``latestOffset(start, limit)``: the committed end of every selected partition, re-listed each time (new
  topics of a pattern and new partitions appear; a new partition is read from its log start). With
  ``maxOffsetsPerTrigger`` (``ReadMaxRows``) the rows are shared out in proportion to each partition's lag,
  as Spark's Kafka source does; a partition with any lag gets at least one row (read limits and
  Trigger.AvailableNow for Python sources need pyspark >= 4.2, the floor seglog.spark checks at import).
- ``prepareForTriggerAvailableNow``: freezes the current ends; later ``latestOffset``
  calls never go past them and partitions created afterwards are not read.
- A partition that disappears, or whose start offset fell out of the log, raises DataLossError unless
  failOnDataLoss=false (then it is dropped / moved to the log start).
- ``commit`` keeps nothing: Spark's checkpoint is the only offset store (as with Spark's Kafka source).
"""

from __future__ import annotations

import logging
import math

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from .arrow_reader import read_split
from .catalog import Catalog
from .locate import open_catalog
from .errors import DataLossError
from .options import ReadOptions
from .planning import PartitionRange, plan_splits, resolve_ranges

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow  # >= 4.2

__all__ = ["SeglogStreamReader", "to_json_offsets", "from_json_offsets"]

log = logging.getLogger("seglog.spark")

Offsets = dict[tuple[str, int], int]


def to_json_offsets(offsets: Offsets) -> dict:
    """{(topic, partition): offset} -> {"topic": {"partition": offset}} (sorted, JSON-able)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, p), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(p)] = int(off)
    return out


def from_json_offsets(obj: dict | None) -> Offsets:
    """The inverse of to_json_offsets; None or {} gives {}."""
    return {(topic, int(p)): int(off) for topic, parts in (obj or {}).items() for p, off in parts.items()}


class SeglogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """See the module docstring. Created on the driver; ``read`` runs on executors."""

    def __init__(self, options: ReadOptions):
        self.options = options
        self._target: Offsets | None = None         # Trigger.AvailableNow: the ends frozen at query start

    # -- driver ---------------------------------------------------------------------------------------------

    def _catalog(self) -> Catalog:
        """A fresh catalog (data dir listing or broker metadata) for one call; close it after use."""
        return open_catalog(self.options.location, self.options.read_committed)

    def _current(self) -> dict[tuple[str, int], tuple[int, int]]:
        """(log start, committed end) of every partition the query selects right now."""
        out = {}
        with self._catalog() as catalog:
            chosen = catalog.select(self.options.selection, allow_empty=True)
            catalog.prepare(chosen)
            for topic, p in chosen:
                with catalog.open(topic, p) as part:
                    out[(topic, p)] = (part.start_offset, part.committed_end)
        return out

    def initialOffset(self) -> dict:
        with self._catalog() as catalog:
            chosen = catalog.select(self.options.selection, allow_empty=True)
            ranges = resolve_ranges(catalog, chosen, self.options.starting, self.options.ending,
                                    self.options.fail_on_data_loss, self.options.timestamp_strategy,
                                    start_default="latest")
        return to_json_offsets({(r.topic, r.partition): r.start for r in ranges})

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: end for tp, (_, end) in self._current().items()}

    def reportLatestOffset(self) -> dict | None:
        return to_json_offsets({tp: end for tp, (_, end) in self._current().items()})

    def getDefaultReadLimit(self):
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        current = self._current()
        ends = {tp: end for tp, (_, end) in current.items()}
        if self._target is not None:
            ends = {tp: min(end, self._target[tp]) for tp, end in ends.items() if tp in self._target}
        if start is None:
            return to_json_offsets(ends)
        begin = self._checked_starts(from_json_offsets(start), current)
        for tp, off in begin.items():             # a partition never loses its place in the offsets
            ends[tp] = max(ends.get(tp, off), off)
        if isinstance(limit, ReadMaxRows):
            ends = _rate_limit(begin, ends, current, limit.max_rows)
        return to_json_offsets(ends)

    def _checked_starts(self, begin: Offsets, current: dict) -> Offsets:
        """Start offsets of a micro-batch checked against the logs: gone partitions and offsets outside a log
        raise DataLossError, or (failOnDataLoss=false) are dropped / moved to the log start."""
        out = {}
        for tp, off in begin.items():
            where = f"{tp[0]}-{tp[1]}"
            if tp not in current:
                if self.options.fail_on_data_loss:
                    raise DataLossError(f"partition {where} was deleted while the stream was reading it", off)
                log.warning("%s: partition deleted; no longer read", where)
                continue
            lo, hi = current[tp]
            if off < lo or off > hi:
                what = f"was deleted (the log now starts at {lo})" if off < lo else \
                    f"is past the committed end {hi} (the log was truncated)"
                if self.options.fail_on_data_loss:
                    raise DataLossError(f"stream offset {off} of {where} {what}", off, lo, hi)
                log.warning("%s: stream offset %d %s; continuing at %d", where, off, what, min(max(off, lo), hi))
                off = min(max(off, lo), hi)
            out[tp] = off
        return out

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin, stop = from_json_offsets(start), from_json_offsets(end)
        with self._catalog() as catalog:
            ranges = []
            for tp, until in stop.items():
                if tp in begin:
                    frm = begin[tp]
                else:                              # a partition that appeared after `start`: from its log start
                    with catalog.open(*tp) as part:
                        frm = part.start_offset
                if frm < until:
                    ranges.append(PartitionRange(tp[0], tp[1], frm, until))
            return list(plan_splits(catalog, ranges, self.options.split_bytes, self.options.min_partitions,
                                    self.options.max_records_per_partition,
                                    include_headers=self.options.include_headers,
                                    columns=self.options.columns,
                                    fail_on_data_loss=self.options.fail_on_data_loss,
                                    read_committed=self.options.read_committed))

    def commit(self, end: dict) -> None:
        """Nothing to do: offsets live in Spark's checkpoint only."""

    # -- executors -------------------------------------------------------------------------------------------

    def read(self, partition: InputPartition):
        return read_split(partition)


def _rate_limit(begin: Offsets, ends: Offsets, current: dict, max_rows: int) -> Offsets:
    """Ends advanced by at most ~max_rows rows in total, shared in proportion to each partition's lag.
    A partition missing from begin (new) starts at its log start."""
    lags = {tp: end - begin.get(tp, current[tp][0]) for tp, end in ends.items()}
    total = sum(v for v in lags.values() if v > 0)
    if total <= max_rows:
        return ends
    out = {}
    for tp, end in ends.items():
        frm = begin.get(tp, current[tp][0])
        lag = lags[tp]
        if lag <= 0:
            out[tp] = end
            continue
        share = max_rows * lag / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(frm + step, end)
    return out

"""Filter pushdown: opt-in per query with ``option("pushFilters", "true")`` (pyspark >= 4.1 also needs
spark.sql.python.filterPushdown.enabled=true, or it refuses the reader).

Why it is off by default: pyspark (4.1 to 4.3 at least) plans a Python source's batch scan once per loaded
DataFrame, not once per query. The JVM side (PythonDataSourceV2, one per ``load()``) caches the pickled
read function and partitions of its first plan; a scan whose filters reach ``pushFilters`` replaces that
cache with the pruned plan, and a scan that pushes no filter (``df.count()``, or only filters Spark cannot
hand to Python) reuses whatever is cached, without calling the Python side at all. So ``df.filter("offset <
420").count()`` followed by ``df.count()`` returns the filtered count, and the two branches of
``df.filter(a).union(df.filter(b))`` both read b's plan. Nothing the reader keeps or returns can tell those
later scans apart, so pushdown is only correct when one query scans a freshly loaded DataFrame once.

:func:`push` sorts Spark's pushed filters (an AND of them) into what the reader applies itself and what Spark
must still evaluate, and collects the resulting :class:`Pushed` constraints:

==========================================  ======================================  ====================
filter                                      effect                                  Spark re-evaluates?
==========================================  ======================================  ====================
topic = / IN                                drops partitions of other topics        no (exact)
partition = / IN / < / <= / > / >=         drops partitions                        no (exact)
offset = / < / <= / > / >=                  narrows each offset range               no (exact: the reader
                                                                                    drops records outside)
offset IN                                   narrows to [min, max]                   yes
timestamp > / >= (time-zone aware value)    starts each range at the first offset   yes
                                            with a timestamp at/after it (time
                                            index), skips batches whose
                                            maxTimestamp is older
anything else                               nothing                                 yes
==========================================  ======================================  ====================

The timestamp prune is conservative: every record before Kafka's "offset for timestamp T" has a timestamp
< T, and a batch's maxTimestamp bounds its records', so no matching row is ever dropped; the filter itself
stays with Spark because timestamps are not ordered by offset. Results are identical with pushdown disabled.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

__all__ = ["Pushed", "push"]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_INT64_MAX = (1 << 63) - 1


@dataclass
class Pushed:
    """Constraints from pushed filters. ``None`` means unconstrained."""
    topics: set[str] | None = None
    partitions: set[int] | None = None
    partition_lo: int = 0                   # inclusive
    partition_hi: int = 1 << 31             # exclusive
    offset_lo: int = 0                      # inclusive
    offset_hi: int = _INT64_MAX             # exclusive
    min_timestamp: int | None = None        # ms: no matching record has an older timestamp

    def keeps(self, topic: str, partition: int) -> bool:
        """Whether a (topic, partition) can hold matching rows."""
        return ((self.topics is None or topic in self.topics)
                and (self.partitions is None or partition in self.partitions)
                and self.partition_lo <= partition < self.partition_hi)

    def narrow(self, start: int, end: int) -> tuple[int, int]:
        """[start, end) intersected with the offset bounds (empty ranges come back as start == end)."""
        lo, hi = max(start, self.offset_lo), min(end, self.offset_hi)
        return (lo, hi) if lo < hi else (lo, lo)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _ms_floor(value) -> int | None:
    """Milliseconds since the epoch, rounded down, of a time-zone aware datetime; None for anything else
    (a naive datetime's zone is unknown here, so it is not used to prune)."""
    if isinstance(value, _dt.datetime) and value.tzinfo is not None:
        return (value - _EPOCH) // _dt.timedelta(milliseconds=1)
    return None


def _intersect(current: set | None, values) -> set:
    values = set(values)
    return values if current is None else current & values


def push(filters, pushed: Pushed) -> list:
    """Apply what can be applied to `pushed`; return the filters Spark must still evaluate (the same objects)."""
    from pyspark.sql.datasource import (EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan, LessThanOrEqual)

    remaining = []
    for f in filters:
        attr = getattr(f, "attribute", None)
        column = attr[0] if isinstance(attr, tuple) and len(attr) == 1 else None
        value = getattr(f, "value", None)
        exact = False
        if column == "topic":
            if isinstance(f, EqualTo) and isinstance(value, str):
                pushed.topics, exact = _intersect(pushed.topics, [value]), True
            elif isinstance(f, In) and all(isinstance(v, str) for v in value):
                pushed.topics, exact = _intersect(pushed.topics, value), True
        elif column == "partition":
            if isinstance(f, EqualTo) and _is_int(value):
                pushed.partitions, exact = _intersect(pushed.partitions, [value]), True
            elif isinstance(f, In) and all(_is_int(v) for v in value):
                pushed.partitions, exact = _intersect(pushed.partitions, value), True
            elif _is_int(value):
                exact = _bound(f, value, pushed, "partition_lo", "partition_hi",
                               GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)
        elif column == "offset":
            if isinstance(f, EqualTo) and _is_int(value):
                pushed.offset_lo = max(pushed.offset_lo, value)
                pushed.offset_hi = min(pushed.offset_hi, value + 1)
                exact = True
            elif isinstance(f, In) and value and all(_is_int(v) for v in value):
                pushed.offset_lo = max(pushed.offset_lo, min(value))
                pushed.offset_hi = min(pushed.offset_hi, max(value) + 1)
            elif _is_int(value):
                exact = _bound(f, value, pushed, "offset_lo", "offset_hi",
                               GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)
        elif column == "timestamp" and isinstance(f, (GreaterThan, GreaterThanOrEqual)):
            ms = _ms_floor(value)
            if ms is not None:
                pushed.min_timestamp = ms if pushed.min_timestamp is None else max(pushed.min_timestamp, ms)
        if not exact:
            remaining.append(f)
    return remaining


def _bound(f, value: int, pushed: Pushed, lo_name: str, hi_name: str, gt, ge, lt, le) -> bool:
    """Tighten an integer [lo, hi) pair from a comparison filter; False if f is not a comparison."""
    if isinstance(f, gt):
        setattr(pushed, lo_name, max(getattr(pushed, lo_name), value + 1))
    elif isinstance(f, ge):
        setattr(pushed, lo_name, max(getattr(pushed, lo_name), value))
    elif isinstance(f, lt):
        setattr(pushed, hi_name, min(getattr(pushed, hi_name), value))
    elif isinstance(f, le):
        setattr(pushed, hi_name, min(getattr(pushed, hi_name), value + 1))
    else:
        return False
    return True

"""Parsing and validating the data source's options (all strings, names case-insensitive, as Spark passes them).

Reader options (batch and streaming) -> :class:`ReadOptions`::

    path                              a seglog data dir (local or shared file system), or
    kafka.bootstrap.servers           "host:9092,host2:9092" (also bootstrap.servers): read through the Kafka
                                      protocol from any Kafka-protocol broker (broker mode); exactly one of the two
    kafka.request.timeout.ms          broker mode: socket timeout, and how long leader moves and unreachable
                                      brokers are retried before failing (default 30000)
    kafka.security.protocol, kafka.ssl.*, kafka.sasl.*
                                      broker mode: the client settings of a TLS or SASL listener
                                      (seglog.security.client; files must exist on the driver and executors)
    subscribe | subscribePattern | assign
                                      exactly one: "t1,t2" | a regex matched against whole topic names
                                      (internal "__" topics excluded) | JSON {"t1": [0, 2]}
    startingOffsets / endingOffsets   "earliest" | "latest" | JSON {"t": {"0": 23, "1": -2}} (-2 earliest,
                                      -1 latest); partitions missing from the JSON take the default
    startingTimestamp / endingTimestamp            one timestamp (ms) for every partition
    startingOffsetsByTimestamp / endingOffsetsByTimestamp   JSON {"t": {"0": 1700000000000}}
    startingOffsetsByTimestampStrategy             "error" (default) | "latest": no record at/after the time
    failOnDataLoss                    "true" (default) | "false"
    includeHeaders                    "false" (default) | "true"; a user schema naming headers implies true
    splitSize                         target bytes of segment data per Spark task, e.g. "256m" (default);
                                      local mode only (a broker does not expose segment sizes)
    minPartitions                     at least about this many tasks (large segments are cut at index entries)
    maxRecordsPerPartition            at most this many offsets per task (a range is cut evenly)
    maxOffsetsPerTrigger              streaming: records per micro-batch over all partitions
    pushFilters                       "false" (default) | "true": batch filter pushdown, safe only for a
                                      DataFrame that one query scans once (see seglog.spark.filters)
    kafka.isolation.level             "read_uncommitted" (default, as Spark's Kafka source) | "read_committed":
                                      stop at each partition's last stable offset and skip the records of
                                      aborted transactions (transaction markers are never rows)

A user-specified schema (``.schema("value binary")``) is a projection: the reader builds only its columns
(see seglog.spark.projection).

Precedence of the starting (ending) position, as Spark's Kafka source: startingTimestamp, then
startingOffsetsByTimestamp, then startingOffsets. Batch queries default to earliest..latest and refuse a
"latest" start or an "earliest" end; streaming queries default to a "latest" start and refuse ending options.

In broker mode a split is one partition's offset range (cut further by minPartitions and
maxRecordsPerPartition), read by Fetch requests to the partition's leader, as Spark's Kafka source does.

Writer options -> :class:`WriteOptions`: path (required), topic (else a ``topic`` column), compression
(none, gzip, snappy, lz4, zstd), lockTimeoutMs (how long a task waits for a partition's directory lock).

Every problem raises :class:`~seglog.spark.errors.SourceOptionError` naming the option.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Mapping

from .. import _engine
from ..client import parse_bootstrap
from ..errors import InvalidConfigError
from ..security.client import ClientSecurity, is_security_setting
from .errors import SourceOptionError

__all__ = ["EARLIEST", "LATEST", "Location", "OffsetSpec", "TopicSelection", "ReadOptions", "WriteOptions",
           "parse_read_options", "parse_write_options", "parse_selection", "parse_location", "parse_size",
           "parse_bool", "lower_keys", "required_path"]

EARLIEST = -2
LATEST = -1
DEFAULT_SPLIT_BYTES = 256 << 20
DEFAULT_LOCK_TIMEOUT_MS = 60_000
DEFAULT_REQUEST_TIMEOUT_MS = 30_000
_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_BROKER_OPTIONS = ("kafka.bootstrap.servers", "bootstrap.servers")


@dataclass(frozen=True)
class TopicSelection:
    """Which partitions a query reads: ``kind`` is "subscribe" (``topics``), "subscribePattern" (``pattern``)
    or "assign" (``assigned``: topic -> partitions)."""
    kind: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: Mapping[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class OffsetSpec:
    """One end of the range to read. ``kind``: "earliest", "latest", "offsets" (``offsets``: (topic, partition)
    -> offset, -2/-1 meaning earliest/latest), "timestamp" (``timestamp`` ms for all partitions) or
    "timestamps" (``timestamps``: (topic, partition) -> ms)."""
    kind: str
    offsets: Mapping[tuple[str, int], int] = field(default_factory=dict)
    timestamp: int | None = None
    timestamps: Mapping[tuple[str, int], int] = field(default_factory=dict)

    def named_partitions(self) -> set[tuple[str, int]]:
        """The partitions this spec names explicitly (JSON forms); empty for the global forms."""
        return set(self.offsets) | set(self.timestamps)


@dataclass(frozen=True)
class Location:
    """Where the logs are: a data dir (``path``) or Kafka-protocol brokers (``bootstrap_servers``, reached with
    the client settings ``security``, checked: (name, value) pairs of seglog.security.client's names)."""
    path: str | None = None
    bootstrap_servers: str | None = None
    request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS
    security: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @property
    def broker_mode(self) -> bool:
        return self.bootstrap_servers is not None


@dataclass(frozen=True)
class ReadOptions:
    location: Location
    selection: TopicSelection
    starting: OffsetSpec
    ending: OffsetSpec
    fail_on_data_loss: bool = True
    include_headers: bool = False
    split_bytes: int = DEFAULT_SPLIT_BYTES
    min_partitions: int | None = None
    max_offsets_per_trigger: int | None = None
    timestamp_strategy: str = "error"
    push_filters: bool = False
    max_records_per_partition: int | None = None
    columns: tuple[str, ...] | None = None          # a user schema's projection (seglog.spark.projection)
    read_committed: bool = False                    # kafka.isolation.level=read_committed

    @property
    def path(self) -> str | None:
        return self.location.path


@dataclass(frozen=True)
class WriteOptions:
    path: str
    topic: str | None = None
    compression: str | None = None
    lock_timeout_ms: int = DEFAULT_LOCK_TIMEOUT_MS


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): v for k, v in dict(options).items()}


def parse_bool(value: str, name: str) -> bool:
    """"true"/"false" in any case; SourceOptionError otherwise."""
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise SourceOptionError(f"option {name} must be true or false, got {value!r}")


def parse_size(value: str, name: str) -> int:
    """Bytes from "268435456", "256m", "256MB", "1g", "64KiB" (binary multiples). Must be positive."""
    m = _SIZE.match(str(value))
    if not m:
        raise SourceOptionError(f"option {name} must be a size such as 268435456, 256m or 1g, got {value!r}")
    n = int(m.group(1)) << (10 * " kmgt".index(m.group(2).lower() or " "))
    if n <= 0:
        raise SourceOptionError(f"option {name} must be positive, got {value!r}")
    return n


def _positive_int(value: str, name: str) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise SourceOptionError(f"option {name} must be a positive integer, got {value!r}") from None
    if n <= 0:
        raise SourceOptionError(f"option {name} must be a positive integer, got {value!r}")
    return n


def _long(value: str, name: str) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise SourceOptionError(f"option {name} must be a timestamp in milliseconds (a long), got {value!r}") \
            from None


def _json_object(text: str, name: str, example: str) -> dict:
    try:
        obj = json.loads(text)
    except (TypeError, ValueError) as e:
        raise SourceOptionError(f"option {name} is not valid JSON ({e}); expected e.g. {example}") from None
    if not isinstance(obj, dict):
        raise SourceOptionError(f"option {name} must be a JSON object such as {example}, got {text!r}")
    return obj


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _per_partition(text: str, name: str, example: str) -> dict[tuple[str, int], int]:
    """{"topic": {"partition": long}} -> {(topic, partition): long}, with shape errors naming the option."""
    out: dict[tuple[str, int], int] = {}
    for topic, parts in _json_object(text, name, example).items():
        if not isinstance(parts, dict):
            raise SourceOptionError(f"option {name}: topic {topic!r} must map partitions to numbers, "
                                    f"e.g. {example}; got {parts!r}")
        for p, value in parts.items():
            try:
                partition = int(p)
            except ValueError:
                raise SourceOptionError(f"option {name}: partition {p!r} of topic {topic!r} is not a number") \
                    from None
            if partition < 0:
                raise SourceOptionError(f"option {name}: partition {p!r} of topic {topic!r} is negative")
            if not _is_int(value):
                raise SourceOptionError(f"option {name}: value for {topic}-{p} must be an integer, got {value!r}")
            out[(topic, partition)] = value
    return out


def parse_offsets(text: str, name: str) -> OffsetSpec:
    """"earliest", "latest" or the JSON per-partition form (offsets >= 0, or -2 earliest / -1 latest)."""
    word = str(text).strip().lower()
    if word == "earliest":
        return OffsetSpec("earliest")
    if word == "latest":
        return OffsetSpec("latest")
    offsets = _per_partition(text, name, '{"topic": {"0": 23, "1": -2}}')
    for (topic, p), off in offsets.items():
        if off < EARLIEST:
            raise SourceOptionError(f"option {name}: offset {off} for {topic}-{p} is not valid: use an offset "
                                    f">= 0, -2 (earliest) or -1 (latest)")
    return OffsetSpec("offsets", offsets=offsets)


def parse_selection(opts: Mapping[str, str]) -> TopicSelection:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k) not in (None, "")]
    if len(given) != 1:
        raise SourceOptionError("exactly one of the options subscribe, subscribePattern or assign must be set "
                                f"(got {len(given)}: {', '.join(given) or 'none'})")
    kind = given[0]
    value = opts[kind]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise SourceOptionError(f"option subscribe names no topic: {value!r}")
        return TopicSelection("subscribe", topics=topics)
    if kind == "subscribepattern":
        try:
            re.compile(value)
        except re.error as e:
            raise SourceOptionError(f"option subscribePattern is not a valid regular expression: {e}") from None
        return TopicSelection("subscribePattern", pattern=value)
    obj = _json_object(value, "assign", '{"topic": [0, 2]}')
    assigned = {}
    for topic, parts in obj.items():
        if not isinstance(parts, list) or not all(_is_int(p) and p >= 0 for p in parts):
            raise SourceOptionError(f"option assign: topic {topic!r} must map to a list of partition numbers, "
                                    f'e.g. {{"{topic}": [0, 2]}}; got {parts!r}')
        assigned[topic] = tuple(sorted(set(parts)))
    if not any(assigned.values()):
        raise SourceOptionError(f"option assign names no partition: {value!r}")
    return TopicSelection("assign", assigned=assigned)


def _position(opts: Mapping[str, str], which: str, default: OffsetSpec) -> OffsetSpec:
    """The starting or ending spec by Spark's precedence: xTimestamp, xOffsetsByTimestamp, xOffsets."""
    ts = opts.get(f"{which}timestamp")
    if ts not in (None, ""):
        return OffsetSpec("timestamp", timestamp=_long(ts, f"{which}Timestamp"))
    by_ts = opts.get(f"{which}offsetsbytimestamp")
    if by_ts not in (None, ""):
        name = f"{which}OffsetsByTimestamp"
        return OffsetSpec("timestamps", timestamps=_per_partition(by_ts, name, '{"topic": {"0": 1700000000000}}'))
    off = opts.get(f"{which}offsets")
    if off not in (None, ""):
        return parse_offsets(off, f"{which}Offsets")
    return default


def _reject_broker_mode(opts: Mapping[str, str]) -> None:
    for name in _BROKER_OPTIONS:
        if name in opts:
            raise SourceOptionError(f"option {name}: the seglog writer appends to a data directory (option path); "
                                    "to write through the Kafka protocol use Spark's own format(\"kafka\") sink or "
                                    "seglog.Producer(seglog.connect(servers))")


def required_path(opts: Mapping[str, str]) -> str:
    path = opts.get("path")
    if path in (None, ""):
        raise SourceOptionError("option path is required: the seglog data directory, e.g. .option(\"path\", "
                                "\"data\") or .load(\"data\")")
    return str(path)


def parse_location(opts: Mapping[str, str]) -> Location:
    """The reader's data dir (option path) or brokers (kafka.bootstrap.servers / bootstrap.servers): exactly one.
    `opts` has lower-case keys."""
    given = [n for n in _BROKER_OPTIONS if opts.get(n) not in (None, "")]
    path = opts.get("path")
    security = tuple(sorted((k[len("kafka."):], str(v)) for k, v in opts.items()
                            if k.startswith("kafka.") and is_security_setting(k[len("kafka."):])))
    if len(given) > 1 and opts[given[0]].strip() != opts[given[1]].strip():
        raise SourceOptionError("options kafka.bootstrap.servers and bootstrap.servers disagree; set one of them")
    if not given:
        for name in ["kafka.request.timeout.ms"] + [f"kafka.{k}" for k, _ in security]:
            if opts.get(name) not in (None, ""):
                raise SourceOptionError(f"option {name} applies to broker mode only (option kafka.bootstrap.servers)")
        if path in (None, ""):
            raise SourceOptionError("option path is required: the seglog data directory, e.g. .option(\"path\", "
                                    "\"data\") or .load(\"data\"); or read through a broker with "
                                    ".option(\"kafka.bootstrap.servers\", \"host:9092\")")
        return Location(path=str(path))
    if path not in (None, ""):
        raise SourceOptionError(f"options path and {given[0]} exclude each other: read a data directory (path) "
                                "or through brokers (kafka.bootstrap.servers), not both")
    servers = str(opts[given[0]]).strip()
    try:
        parse_bootstrap(servers)
    except InvalidConfigError as e:
        raise SourceOptionError(f"option {given[0]}: {e}; expected host:port[,host:port...]") from None
    try:
        ClientSecurity.from_properties(dict(security))
    except InvalidConfigError as e:
        raise SourceOptionError(f"options kafka.security.protocol / kafka.ssl.* / kafka.sasl.*: {e}") from None
    timeout = opts.get("kafka.request.timeout.ms")
    return Location(bootstrap_servers=servers,
                    request_timeout_ms=(_positive_int(timeout, "kafka.request.timeout.ms")
                                        if timeout not in (None, "") else DEFAULT_REQUEST_TIMEOUT_MS),
                    security=security)


def parse_read_options(options: Mapping[str, str], streaming: bool) -> ReadOptions:
    """Validate reader options for a batch (streaming=False) or streaming query; SourceOptionError if bad."""
    opts = lower_keys(options)
    location = parse_location(opts)
    selection = parse_selection(opts)
    if location.broker_mode and opts.get("splitsize") not in (None, ""):
        raise SourceOptionError("option splitSize sizes splits from segment files, which a broker does not "
                                "expose: in broker mode use minPartitions or maxRecordsPerPartition")
    if streaming:
        starting = _position(opts, "starting", OffsetSpec("latest"))
        for name in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
            if opts.get(name) not in (None, ""):
                raise SourceOptionError(f"option {name} is not allowed in a streaming query (a stream has no "
                                        "end); use Trigger.AvailableNow to stop at the data present at start")
        ending = OffsetSpec("latest")
    else:
        starting = _position(opts, "starting", OffsetSpec("earliest"))
        ending = _position(opts, "ending", OffsetSpec("latest"))
        if starting.kind == "latest" or any(v == LATEST for v in starting.offsets.values()):
            raise SourceOptionError("option startingOffsets: 'latest' (-1) is not allowed for batch queries "
                                    "(it would read nothing)")
        if ending.kind == "earliest" or any(v == EARLIEST for v in ending.offsets.values()):
            raise SourceOptionError("option endingOffsets: 'earliest' (-2) is not allowed for batch queries "
                                    "(it would read nothing)")
    strategy = str(opts.get("startingoffsetsbytimestampstrategy", "error")).strip().lower()
    if strategy not in ("error", "latest"):
        raise SourceOptionError("option startingOffsetsByTimestampStrategy must be 'error' or 'latest', got "
                                f"{opts['startingoffsetsbytimestampstrategy']!r}")
    max_per_trigger = opts.get("maxoffsetspertrigger")
    min_parts = opts.get("minpartitions")
    max_records = opts.get("maxrecordsperpartition")
    push = opts.get("pushfilters")
    isolation = str(opts.get("kafka.isolation.level", "read_uncommitted")).strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise SourceOptionError("option kafka.isolation.level must be 'read_uncommitted' (the default) or "
                                f"'read_committed', got {opts['kafka.isolation.level']!r}")
    return ReadOptions(
        location=location, selection=selection, starting=starting, ending=ending,
        fail_on_data_loss=parse_bool(opts.get("failondataloss", "true"), "failOnDataLoss"),
        include_headers=parse_bool(opts.get("includeheaders", "false"), "includeHeaders"),
        split_bytes=parse_size(opts.get("splitsize", str(DEFAULT_SPLIT_BYTES)), "splitSize"),
        min_partitions=_positive_int(min_parts, "minPartitions") if min_parts not in (None, "") else None,
        max_offsets_per_trigger=(_positive_int(max_per_trigger, "maxOffsetsPerTrigger")
                                 if max_per_trigger not in (None, "") else None),
        timestamp_strategy=strategy,
        push_filters=parse_bool(push, "pushFilters") if push not in (None, "") else False,
        max_records_per_partition=(_positive_int(max_records, "maxRecordsPerPartition")
                                   if max_records not in (None, "") else None),
        read_committed=isolation == "read_committed",
    )


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Validate writer options; SourceOptionError if bad. The codec name is checked by the engine's list."""
    opts = lower_keys(options)
    _reject_broker_mode(opts)
    path = required_path(opts)
    topic = opts.get("topic") or None
    compression = opts.get("compression") or None
    if compression is not None:
        try:
            compression = _engine.codec_name(compression.strip().lower())
        except Exception:
            raise SourceOptionError(f"option compression must be one of none, gzip, snappy, lz4, zstd; got "
                                    f"{compression!r}") from None
    timeout = opts.get("locktimeoutms")
    return WriteOptions(path=path, topic=topic, compression=None if compression == "none" else compression,
                        lock_timeout_ms=_positive_int(timeout, "lockTimeoutMs") if timeout else
                        DEFAULT_LOCK_TIMEOUT_MS)

"""`seglog produce` and `seglog consume`: kafka-console-producer.sh and kafka-console-consumer.sh.

    printf 'k1:hello\\nk2:world\\n' | seglog produce --data-dir data --topic pet \\
        --property parse.key=true --property key.separator=:
    seglog consume --data-dir data --topic pet --from-beginning --property print.key=true
    seglog consume --data-dir data --topic pet --group g1 --max-messages 10
    seglog consume --data-dir data --topic pet --partition 0 --offset 4
"""

from __future__ import annotations

import sys
import time

from ..errors import SeglogError, UnknownTopicOrPartitionError
from .connect import command_settings, connect, split_security
from .common import (CliError, UsageError, add_target, boolean, check_known, err, interrupt_status, key_values,
                     non_negative, positive)

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024 + 12
BATCH_SIZE = 16384
FLUSH_EVERY = 4096          # records between checks of what was written (bounds the futures kept)
MAX_REPORTED = 10           # failed records reported one by one; the rest are counted


def register(sub) -> None:
    p = sub.add_parser("produce", help="write stdin lines to a topic, one record per line "
                                       "(kafka-console-producer.sh)",
                       description="Write each line of stdin as one record to --topic. Prints nothing on "
                                   "success; a record that could not be written is reported and makes the exit "
                                   "status 1. Line format properties (--property): parse.key, key.separator "
                                   "(default TAB), parse.headers, headers.delimiter (TAB), headers.separator "
                                   "(,), headers.key.separator (:), null.marker, ignore.error.")
    add_target(p, "--broker-list", config_aliases=("--producer.config",))
    p.add_argument("--topic", required=True, metavar="NAME")
    p.add_argument("--property", action="append", metavar="KEY=VALUE",
                   help="a line-format property, e.g. parse.key=true, key.separator=: (repeatable)")
    p.add_argument("--key-separator", metavar="SEP", help="same as --property parse.key=true "
                                                          "--property key.separator=SEP")
    p.add_argument("--compression-codec", "--compression", dest="compression", nargs="?", const="gzip",
                   choices=CODECS, help="batch compression (without a value: gzip, as Kafka's script)")
    p.add_argument("--request-required-acks", dest="acks", choices=("all", "-1", "0", "1"), default=None,
                   help="acks (default all)")
    p.add_argument("--partition", type=non_negative, metavar="N",
                   help="write every record to this partition (default: by key, round-robin without one)")
    p.add_argument("--producer-property", action="append", metavar="KEY=VALUE",
                   help="a Kafka producer config, e.g. linger.ms=10 (repeatable)")
    p.set_defaults(func=cmd_produce)

    c = sub.add_parser("consume", help="print a topic's records (kafka-console-consumer.sh)",
                       description="Print the values (and with --property print.*=true keys, offsets ...) of "
                                   "--topic's records, one per line. Starts at the end unless --from-beginning "
                                   "or --offset; with --group it reads from the group's committed offsets and "
                                   "commits what it printed. Stops after --max-messages, after --timeout-ms "
                                   "without a record, or (on a data dir, where nothing new can arrive) once "
                                   "it has read everything; then prints 'Processed a total of N messages' on "
                                   "stderr. Output properties: print.timestamp, print.key, print.offset, "
                                   "print.partition, print.headers, print.value, key.separator (TAB), "
                                   "line.separator, headers.separator, null.literal.")
    add_target(c, config_aliases=("--consumer.config",))
    c.add_argument("--topic", required=True, metavar="NAME")
    c.add_argument("--from-beginning", action="store_true",
                   help="start at the earliest offset when there is no committed one")
    c.add_argument("--partition", type=non_negative, metavar="N", help="read only this partition")
    c.add_argument("--offset", metavar="N|earliest|latest",
                   help="start here (in --partition, or in every partition without one); default latest")
    c.add_argument("--group", metavar="GROUP", help="consumer group: subscribe, resume from and commit offsets")
    c.add_argument("--max-messages", type=positive, metavar="N", help="exit after N records")
    c.add_argument("--timeout-ms", type=non_negative, metavar="MS",
                   help="exit when no record arrived for this long")
    c.add_argument("--property", action="append", metavar="KEY=VALUE",
                   help="an output property, e.g. print.key=true (repeatable)")
    c.add_argument("--consumer-property", action="append", metavar="KEY=VALUE",
                   help="a Kafka consumer config, e.g. group.id=g1 (repeatable)")
    c.add_argument("--isolation-level", choices=("read_committed", "read_uncommitted"),
                   help="read_committed filters out records of transactions not committed (and stops at the "
                        "first open one); read_uncommitted reads them all (default: read_uncommitted)")
    c.set_defaults(func=cmd_consume)


# -- produce ----------------------------------------------------------------------------------------------

class LineReader:
    """kafka-console-producer's LineMessageReader: ``[headers<delimiter>][key<separator>]value`` per line."""

    PROPERTIES = ("parse.key", "key.separator", "parse.headers", "headers.delimiter", "headers.separator",
                  "headers.key.separator", "null.marker", "ignore.error")

    def __init__(self, props: dict[str, str]):
        check_known(props, self.PROPERTIES, "producer --property")
        self.parse_key = boolean(props, "parse.key", False)
        self.parse_headers = boolean(props, "parse.headers", False)
        self.ignore_error = boolean(props, "ignore.error", False)
        self.key_sep = props.get("key.separator", "\t").encode()
        self.headers_delim = props.get("headers.delimiter", "\t").encode()
        self.headers_sep = props.get("headers.separator", ",").encode()
        self.header_key_sep = props.get("headers.key.separator", ":").encode()
        marker = props.get("null.marker")
        self.null = marker.encode() if marker else None
        for name, sep in (("key.separator", self.key_sep), ("headers.delimiter", self.headers_delim),
                          ("headers.separator", self.headers_sep), ("headers.key.separator", self.header_key_sep)):
            if not sep:
                raise UsageError(f"property {name} must not be empty")

    def _split(self, enabled: bool, line: bytes, start: int, sep: bytes, what: str, lineno: int):
        if not enabled:
            return None, start
        i = line.find(sep, start)
        if i < 0:
            if self.ignore_error:
                return None, start
            raise CliError(f"No {what} found on line number {lineno}: '{_text(line)}'")
        return line[start:i], i + len(sep)

    def parse(self, line: bytes, lineno: int):
        """(key, value, headers) of one line (without its line terminator)."""
        raw_headers, pos = self._split(self.parse_headers, line, 0, self.headers_delim, "headers delimiter", lineno)
        key, pos = self._split(self.parse_key, line, pos, self.key_sep, "key separator", lineno)
        value = line[pos:]
        headers = self._headers(raw_headers, lineno) if raw_headers is not None else None
        return self._nullable(key), self._nullable(value), headers

    def _nullable(self, b: bytes | None) -> bytes | None:
        return None if b is None or (self.null is not None and b == self.null) else b

    def _headers(self, raw: bytes, lineno: int) -> list[tuple[str, bytes | None]]:
        headers = []
        for pair in raw.split(self.headers_sep):
            k, sep, v = pair.partition(self.header_key_sep)
            if not sep and not self.ignore_error:
                raise CliError(f"No header key separator found in pair '{_text(pair)}' on line number {lineno}")
            try:
                name = k.decode("utf-8")
            except UnicodeDecodeError:
                raise CliError(f"header key on line number {lineno} is not UTF-8") from None
            if self.null is not None and k == self.null:
                raise CliError(f"header key cannot match null.marker on line number {lineno}")
            headers.append((name, self._nullable(v) if sep else None))
        return headers


def _text(b: bytes) -> str:
    return b.decode("utf-8", "backslashreplace")


def _record_bound(key, value, headers) -> int:
    """An upper bound of a record's encoded size in a v2 batch (varints at their widest)."""
    n = 40 + (len(key) if key else 0) + (len(value) if value else 0)
    for k, v in headers or ():
        n += 10 + len(k.encode()) + (len(v) if v else 0)
    return n


def cmd_produce(args) -> int:
    props = key_values(args.property, "--property")
    if args.key_separator is not None:
        props.update({"parse.key": "true", "key.separator": args.key_separator})
    reader = LineReader(props)
    pprops = {"client.id": "console-producer", "batch.size": str(BATCH_SIZE), **command_settings(args)}
    if args.compression:
        pprops["compression.type"] = args.compression
    if args.acks:
        pprops["acks"] = args.acks
    pprops.update(key_values(args.producer_property, "--producer-property"))
    security, pprops = split_security(pprops)
    with connect(args, client_id="console-producer", security=security) as admin:
        desc = _topic(admin, args.topic)
        if args.partition is not None and args.partition >= len(desc.partitions):
            raise CliError(_bad_partition(args.partition, desc))
        # A batch goes to the log when it reaches batch.size and fails whole when it is over the topic's
        # max.message.bytes: keep batches well below the limit, and send any record large enough to push a
        # batch over it in a batch of its own, so one oversized line costs only itself.
        limit = int(desc.effective_config.get("max.message.bytes", DEFAULT_MAX_MESSAGE_BYTES))
        try:
            wanted = int(pprops["batch.size"])
        except ValueError:
            raise UsageError(f"batch.size must be a whole number, not {pprops['batch.size']!r}") from None
        batch_size = min(wanted, max(1, limit // 4))
        pprops["batch.size"] = str(batch_size)
        alone_above = limit - batch_size - 128
        producer = admin.producer(pprops)
        sent = failed = 0
        pending: list[tuple[int, object]] = []

        def settle() -> None:
            nonlocal failed
            producer.flush()
            for lineno, fut in pending:
                try:
                    fut.get()
                except SeglogError as e:
                    failed += 1
                    _report(failed, lineno, e)
            pending.clear()

        try:
            for lineno, line in enumerate(sys.stdin.buffer, 1):
                if line.endswith(b"\n"):
                    line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
                key, value, headers = reader.parse(line, lineno)
                alone = _record_bound(key, value, headers) > alone_above
                if alone:
                    settle()
                sent += 1
                try:
                    pending.append((lineno, producer.send(args.topic, value, key=key, partition=args.partition,
                                                          headers=headers)))
                except SeglogError as e:
                    failed += 1
                    _report(failed, lineno, e)
                if alone or len(pending) >= FLUSH_EVERY:
                    settle()
        finally:
            try:
                settle()
            finally:
                producer.close()
    if failed:
        raise CliError(f"{failed} of {sent} records were not written")
    return 0


def _report(n: int, lineno: int, e: Exception) -> None:
    if n <= MAX_REPORTED:
        err(f"seglog produce: line {lineno} not written: {e}")


def _topic(admin, name: str):
    """The topic, auto-created by a broker that allows it (as Kafka's console producer and consumer, whose
    Metadata requests ask for that: allow.auto.create.topics defaults to true)."""
    try:
        return admin.ensure_topic(name)
    except UnknownTopicOrPartitionError:
        raise CliError(f"Topic '{name}' does not exist.") from None


def _bad_partition(p: int, desc) -> str:
    return (f"Partition {p} does not exist in topic '{desc.name}' (partitions 0..{len(desc.partitions) - 1})")


# -- consume ----------------------------------------------------------------------------------------------

class MessageFormatter:
    """kafka-console-consumer's DefaultMessageFormatter: timestamp, partition, offset, headers, key, value,
    each when asked for, separated by key.separator."""

    PROPERTIES = ("print.timestamp", "print.key", "print.offset", "print.partition", "print.headers",
                  "print.value", "key.separator", "line.separator", "headers.separator", "null.literal")

    def __init__(self, props: dict[str, str]):
        check_known(props, self.PROPERTIES, "consumer --property")
        self.timestamp = boolean(props, "print.timestamp", False)
        self.partition = boolean(props, "print.partition", False)
        self.offset = boolean(props, "print.offset", False)
        self.headers = boolean(props, "print.headers", False)
        self.key = boolean(props, "print.key", False)
        self.value = boolean(props, "print.value", True)
        self.sep = props.get("key.separator", "\t").encode()
        self.eol = props.get("line.separator", "\n").encode()
        self.headers_sep = props.get("headers.separator", ",").encode()
        self.null = props.get("null.literal", "null").encode()

    def format(self, r) -> bytes:
        fields = []
        if self.timestamp:
            kind = {0: "CreateTime", 1: "LogAppendTime"}.get(r.timestamp_type)
            fields.append(f"{kind}:{r.timestamp}".encode() if kind and r.timestamp >= 0 else b"NO_TIMESTAMP")
        if self.partition:
            fields.append(b"Partition:%d" % r.partition)
        if self.offset:
            fields.append(b"Offset:%d" % r.offset)
        if self.headers:
            fields.append(self.headers_sep.join(k.encode() + b":" + (self.null if v is None else bytes(v))
                                                for k, v in r.headers) if r.headers else b"NO_HEADERS")
        if self.key:
            fields.append(self.null if r.key is None else bytes(r.key))
        if self.value:
            fields.append(self.null if r.value is None else bytes(r.value))
        return self.sep.join(fields) + self.eol


def _start_offset(text: str | None):
    if text is None or text in ("earliest", "latest"):
        return text
    try:
        v = int(text)
    except ValueError:
        v = -1
    if v < 0:
        raise UsageError(f"--offset must be earliest, latest or an offset >= 0, not {text!r}")
    return v


def cmd_consume(args) -> int:
    formatter = MessageFormatter(key_values(args.property, "--property"))
    security, cprops = split_security({**command_settings(args),
                                       **key_values(args.consumer_property, "--consumer-property")})
    if args.group and cprops.get("group.id", args.group) != args.group:
        raise UsageError("--group and the consumer config's group.id differ")
    group = args.group or cprops.get("group.id")
    offset = _start_offset(args.offset)
    if offset is not None and args.from_beginning:
        raise UsageError("--from-beginning and --offset cannot be used together")
    props = {"client.id": "console-consumer", "auto.offset.reset": "earliest" if args.from_beginning else "latest",
             "enable.auto.commit": "true"}
    props.update(cprops)
    if group:
        props["group.id"] = group
    if args.isolation_level:
        props["isolation.level"] = args.isolation_level
    with connect(args, client_id="console-consumer", security=security) as admin:
        desc = _topic(admin, args.topic)
        if args.partition is not None and args.partition >= len(desc.partitions):
            raise CliError(_bad_partition(args.partition, desc))
        consumer = admin.consumer(props)
        try:
            if group and args.partition is None and offset is None:
                consumer.subscribe([args.topic])
            else:
                parts = [args.partition] if args.partition is not None else [p.partition for p in desc.partitions]
                _position(admin, consumer, [(args.topic, p) for p in parts], offset, args.from_beginning)
            count, stopped = _consume_loop(admin, consumer, formatter, args)
            if group:
                # Kafka's consumer has a position for every assigned partition once it polled, so its commit
                # covers partitions nothing was read from; resolve them too, or the next run would start
                # those at auto.offset.reset instead of where this one stood.
                for tp in consumer.assignment():
                    consumer.position(tp)
        finally:
            consumer.close()
    err(f"Processed a total of {count} messages")
    return 0 if stopped is None else interrupt_status(stopped)


def _position(admin, consumer, tps, offset, from_beginning) -> None:
    consumer.assign(tps)
    if offset == "earliest" or offset is None and from_beginning:
        consumer.seek_to_beginning(*tps)
    elif offset == "latest" or offset is None:
        consumer.seek_to_end(*tps)
    else:
        for tp, rng in admin.offset_ranges(tps).items():
            if rng is None:
                raise CliError(f"Partition {tp.partition} does not exist in topic '{tp.topic}'")
            if not rng[0] <= offset <= rng[1]:
                raise CliError(f"offset {offset} is out of range for {tp.topic}-{tp.partition}: valid offsets "
                               f"are {rng[0]}..{rng[1]}")
            consumer.seek(tp, offset)


def _consume_loop(admin, consumer, formatter: MessageFormatter, args) -> tuple[int, KeyboardInterrupt | None]:
    """Print records until a stop condition; returns (records printed, the interrupt that stopped it: Ctrl-C
    or SIGTERM, or None)."""
    out = sys.stdout.buffer
    count = 0
    idle = None if args.timeout_ms is None else args.timeout_ms / 1000
    last = time.monotonic()
    try:
        while args.max_messages is None or count < args.max_messages:
            left = None if args.max_messages is None else args.max_messages - count
            if not admin.live:
                wait = 0.0                      # nothing can arrive: never wait, stop once caught up
            else:
                wait = 1.0 if idle is None else max(0.0, min(1.0, last + idle - time.monotonic()))
            records = consumer.poll(timeout=wait, max_records=left)
            if records:
                out.write(b"".join(formatter.format(r) for r in records))
                out.flush()
                count += len(records)
                last = time.monotonic()
                continue
            if not admin.live and _caught_up(admin, consumer):
                break
            if idle is not None and time.monotonic() - last >= idle:
                break
    except KeyboardInterrupt as e:
        return count, e
    return count, None


def _caught_up(admin, consumer) -> bool:
    """Every assigned partition read up to its end for this consumer (the high watermark, or the last stable
    offset with read_committed), or nothing assigned."""
    tps = sorted(consumer.assignment())
    ends = consumer.end_offsets(tps)
    return all(consumer.position(tp) >= ends[tp] for tp in tps)

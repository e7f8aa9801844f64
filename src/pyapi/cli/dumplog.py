"""`seglog dump-log`: the batches and records of .log files and the entries of .index / .timeindex files, in
kafka-dump-log.sh's line formats.

    seglog dump-log FILE.log ...            every batch and every record
    seglog dump-log --print-payload ...     ... with each record's key, value and headers
    seglog dump-log --offsets-decoder ...   ... with keys and values of __consumer_offsets decoded (JSON)
    seglog dump-log FILE.index FILE.timeindex

A .log is read WINDOW bytes at a time, so its size does not matter. A batch whose CRC does not match is
printed with ``isvalid: false`` and a ``corrupt batch`` line, its records are not, and the dump goes on with
the next batch; a batch length or magic byte that makes no sense ends the file's dump with a ``corrupt batch``
line (nothing after it can be framed), as bytes too few for a batch at the end are reported. A batch whose
records do not parse gets a ``corrupt batch`` line after its own, and so does a batch whose offsets are out of
order, as Log reads refuse it (baseOffset is not covered by the CRC): not after the previous batch's last offset
(the first batch: below the base offset in the file name), a negative lastOffsetDelta, or reaching the base
offset of the next segment in the same directory; its records are not printed. Index entries are printed up to the
zero-filled tail a segment's index keeps while it is active. Exit status 1 when a file cannot be read, else 2
when one is damaged, else 0.
"""

from __future__ import annotations

import os
import re
import sys

from ..errors import CorruptRecordError, SeglogError

WINDOW = 8 << 20                         # .log bytes handed to the engine at a time
_BASE_RE = re.compile(r"^(\d{20})\.")
_SEGMENT_RE = re.compile(r"^\d{20}\.log$")


def register(sub) -> None:
    dl = sub.add_parser("dump-log", help="print the batches and records of .log files, the entries of index files",
                        description=cmd_dump_log.__doc__)
    dl.add_argument("files", nargs="*", metavar="FILE", help=".log, .index or .timeindex files")
    dl.add_argument("--files", dest="more_files", nargs="+", default=[], metavar="FILE",
                    help="the same, spelled as kafka-dump-log.sh spells it")
    dl.add_argument("--print-payload", "--print-data-log", action="store_true",
                    help="print each record's key, value and headers too")
    dl.add_argument("--offsets-decoder", action="store_true",
                    help="print each record's key and value decoded as __consumer_offsets records (Kafka's JSON)")
    dl.add_argument("--deep-iteration", "--print-records", action="store_true",
                    help="accepted as kafka-dump-log.sh takes it: records are always printed")
    dl.set_defaults(func=cmd_dump_log)


def cmd_dump_log(args) -> int:
    """Print every batch and every record of .log files (--print-payload: with keys, values and headers), and the
    entries of .index and .timeindex files, like kafka-dump-log.sh. Damage is reported, not a traceback."""
    paths = args.files + args.more_files
    if not paths:
        print("seglog dump-log: give at least one FILE (.log, .index or .timeindex)", file=sys.stderr)
        return 2
    unreadable = damaged = False
    for path in paths:
        print(f"Dumping {path}")
        kind = _kind(path)
        try:
            with open(path, "rb") as f:
                shown = "offsets" if args.offsets_decoder else "raw" if args.print_payload else None
                damaged |= _dump_log(f, path, shown) if kind == "log" else _dump_index(f, path, kind)
        except (OSError, _Unreadable) as e:
            print(f"{path}: {e.strerror if isinstance(e, OSError) else e}", file=sys.stderr)
            unreadable = True
    return 1 if unreadable else 2 if damaged else 0


class _Unreadable(Exception):
    """The file cannot be dumped at all (an index file whose name gives no base offset)."""


def _kind(path: str) -> str:
    parts = os.path.basename(path).split(".")
    return "timeindex" if "timeindex" in parts else "index" if "index" in parts else "log"


# ------------------------------------------------------------------------------------------------------ .log

def _dump_log(f, path: str, payload: str | None) -> bool:
    """Print the batches and records of an open .log; True if anything was damaged."""
    from .. import _engine
    damaged = False
    prev_last, limit = _offset_bounds(path)
    for position, info, raw in _batches(f):
        if info is None:                                   # framing lost: nothing after it can be read
            print(raw)
            return True
        crc_ok = _engine.crc32c(raw[21:]) == info.crc
        _print_batch(info, position, crc_ok)
        if not crc_ok:
            print(f"corrupt batch at position {position}: CRC-32C mismatch: stored {info.crc:#010x}, computed "
                  f"{_engine.crc32c(raw[21:]):#010x}")
            damaged = True
            continue
        why = _engine.batch_offsets_error(raw, prev_last, limit)
        if why is not None:
            print(f"corrupt batch at position {position}: {why}")
            damaged = True
            continue
        prev_last = info.last_offset
        try:
            records = _engine.decode_records(raw, verify_crc=False, path=path)
        except SeglogError as e:
            print(f"corrupt batch at position {position}: {getattr(e, 'reason', e)}")
            damaged = True
            continue
        for r in records:
            _print_record(r, info, payload)
    return damaged


def _offset_bounds(path: str) -> tuple[int, int]:
    """(the offset the file's first batch must follow, the offset its batches must end below) from the segment
    names: the base offset in the file's name, the next segment's in its directory (no bounds for other
    names)."""
    m = _BASE_RE.match(os.path.basename(path))
    if m is None:
        return -1, (1 << 63) - 1
    base = int(m.group(1))
    try:
        names = os.listdir(os.path.dirname(path) or ".")
    except OSError:
        names = []
    later = [int(n[:20]) for n in names if _SEGMENT_RE.match(n) and int(n[:20]) > base]
    return base - 1, min(later, default=(1 << 63) - 1)


def _batches(f):
    """(position, BatchInfo, the batch's bytes) for each batch of an open .log, read WINDOW bytes at a time (more
    when one batch is larger); CRCs are left to the caller. Damage that ends the file comes last, as (position,
    None, what is wrong)."""
    from .. import _engine
    pos, buf = 0, b""
    while True:
        declared = 12 + int.from_bytes(buf[8:12], "big", signed=True) if len(buf) >= 12 else 0
        chunk = f.read(max(WINDOW, declared - len(buf)))
        buf += chunk
        try:
            infos, damage = _engine.batches(buf, False), None
        except CorruptRecordError as e:
            infos = _engine.batches(buf[:e.position], False)
            damage = (pos + e.position, None, f"corrupt batch at position {pos + e.position}: {e.reason}")
        view = memoryview(buf)
        for b in infos:
            yield pos + b.position, b, view[b.position:b.position + b.size]
        if damage:
            yield damage
            return
        if infos:
            used = infos[-1].position + infos[-1].size
            buf, pos = buf[used:], pos + used
        if not chunk:
            if buf:
                yield pos, None, f"{len(buf)} bytes at position {pos} do not form a whole batch"
            return


def _print_batch(b, position: int, valid: bool) -> None:
    last_seq = b.base_sequence + b.records_count - 1 if b.base_sequence >= 0 else -1
    fields = {"baseOffset": b.base_offset, "lastOffset": b.last_offset, "count": b.records_count,
              "baseSequence": b.base_sequence, "lastSequence": last_seq, "producerId": b.producer_id,
              "producerEpoch": b.producer_epoch, "partitionLeaderEpoch": b.leader_epoch,
              "isTransactional": b.is_transactional, "isControl": b.is_control, "position": position,
              ("LogAppendTime" if b.timestamp_type else "CreateTime"): b.max_timestamp, "size": b.size,
              "magic": b.magic, "compresscodec": b.compression.upper(), "crc": b.crc, "isvalid": valid}
    print(" ".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}" for k, v in fields.items()))


def _print_record(r, b, payload: str | None) -> None:
    """One record line; ``payload`` "raw" adds its key, value and headers, "offsets" its key and value decoded as
    __consumer_offsets records (cli.offsets_decoder), None nothing."""
    sequence = (b.base_sequence + r.offset - b.base_offset) % (1 << 31) if b.base_sequence >= 0 else -1
    line = (f"| offset: {r.offset} {'LogAppendTime' if r.timestamp_type else 'CreateTime'}: {r.timestamp} "
            f"keySize: {-1 if r.key is None else len(r.key)} valueSize: {-1 if r.value is None else len(r.value)} "
            f"sequence: {sequence} headerKeys: [{','.join(k for k, _ in r.headers)}]")
    if payload == "raw":
        line += (f" key: {_show(r.key)} payload: {_show(r.value)} "
                 f"headers: [{','.join(f'{k}:{_show(v)}' for k, v in r.headers)}]")
    elif payload == "offsets":
        from .offsets_decoder import key_and_payload
        key, value = key_and_payload(r.key, r.value, r.offset)
        line += f" key: {key}" + ("" if value is None else f" payload: {value}")
    print(line)


def _show(b) -> str:
    return "null" if b is None else b.decode("utf-8", "backslashreplace")


# ------------------------------------------------------------------------------------------- .index, .timeindex

def _dump_index(f, path: str, kind: str) -> bool:
    """Print the entries of an open .index / .timeindex (offsets are absolute); True if the file has a torn
    entry at its end."""
    from .. import _engine
    m = _BASE_RE.match(os.path.basename(path))
    if m is None:
        raise _Unreadable(f"an index file is named <20-digit base offset>.{kind}: cannot tell this one's base offset")
    size = os.fstat(f.fileno()).st_size
    entry = 8 if kind == "index" else 12
    cls = _engine.OffsetIndex if kind == "index" else _engine.TimeIndex
    index = cls(path, int(m.group(1)), max(size, entry), False)
    try:
        for i in range(index.entries):
            a, b = index.entry(i)
            print(f"offset: {a} position: {b}" if kind == "index" else f"timestamp: {a} offset: {b}")
    finally:
        index.close()
    if size % entry:
        print(f"{size % entry} bytes at position {size - size % entry} do not form a whole entry")
        return True
    return False

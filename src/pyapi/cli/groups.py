"""`seglog groups`: list, describe, delete consumer groups, reset and delete their offsets
(kafka-consumer-groups.sh).

    seglog groups --data-dir data --list
    seglog groups --data-dir data --describe --group g1          (or --all-groups; --members, --state)
    seglog groups --data-dir data --delete --group g1
    seglog groups --data-dir data --delete-offsets --group g1 --topic pet        (or --topic pet:0,2)
    seglog groups --data-dir data --reset-offsets --group g1 --topic pet --to-earliest --execute
    seglog groups --data-dir data --reset-offsets --group g1 --topic pet --to-datetime 2024-01-31T12:00:00.000 --execute
"""

from __future__ import annotations

import argparse
import datetime
import re

from ..errors import GroupIdNotFoundError, NonEmptyGroupError, UnknownTopicOrPartitionError
from ..offsets_format import TopicPartition
from .admin import GroupInfo
from .connect import connect
from .common import CliError, UsageError, add_target, err, non_negative, out, table

INACTIVE = ("Empty", "Dead")


def register(sub) -> None:
    p = sub.add_parser("groups", help="list, describe and delete consumer groups, reset their offsets "
                                      "(kafka-consumer-groups.sh)",
                       description="Consumer groups and their committed offsets. --describe prints, per "
                                   "partition, the committed offset (CURRENT-OFFSET), the high watermark "
                                   "(LOG-END-OFFSET) and their difference (LAG); '-' where there is none. "
                                   "--reset-offsets only shows the new offsets unless --execute is given, and "
                                   "needs the group to have no active members.")
    add_target(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list group ids (with --state: and their states)")
    action.add_argument("--describe", action="store_true", help="offsets and lag of --group / --all-groups")
    action.add_argument("--delete", action="store_true", help="delete groups without active members, "
                                                               "with their offsets")
    action.add_argument("--reset-offsets", action="store_true", help="move the committed offsets of a group")
    action.add_argument("--delete-offsets", action="store_true",
                        help="delete a group's committed offsets of --topic TOPIC[:P,P] (not of topics its "
                             "active members subscribe to)")
    p.add_argument("--group", action="append", metavar="GROUP", help="a group id (repeatable)")
    p.add_argument("--all-groups", action="store_true", help="every group")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="--describe: offsets and lag (the default)")
    view.add_argument("--members", action="store_true", help="--describe: the members and their partition counts")
    view.add_argument("--state", action="store_true", help="--describe/--list: the state of each group")
    p.add_argument("--topic", action="append", metavar="TOPIC[:P,P]",
                   help="--reset-offsets: a topic, or some of its partitions (repeatable)")
    p.add_argument("--all-topics", action="store_true", help="--reset-offsets: every partition the group has "
                                                             "an offset for")
    to = p.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true", help="reset to the log start offset")
    to.add_argument("--to-latest", action="store_true", help="reset to the end (the high watermark)")
    to.add_argument("--to-offset", type=non_negative, metavar="N", help="reset to N (kept within the log)")
    to.add_argument("--to-datetime", type=datetime_ms, metavar="YYYY-MM-DDTHH:mm:SS.sss",
                    help="reset to the first record at or after this time (Kafka's format; a zone such as Z or "
                         "+02:00 may follow, UTC without one); the log end where there is none")
    to.add_argument("--shift-by", type=int, metavar="N", help="move the committed offset by N (may be negative)")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--execute", action="store_true", help="--reset-offsets: do it")
    run.add_argument("--dry-run", action="store_true", help="--reset-offsets: only show the new offsets (default)")
    p.set_defaults(func=cmd_groups)


def cmd_groups(args) -> int:
    _check_combinations(args)
    with connect(args) as admin:
        if args.list:
            listing = admin.list_groups()
            if args.state:
                for line in table(("GROUP", "STATE"), [(g.group_id, g.state) for g in listing]):
                    out(line)
            else:
                for g in listing:
                    out(g.group_id)
            return 0
        groups = [g.group_id for g in admin.list_groups()] if args.all_groups else list(dict.fromkeys(args.group))
        if args.describe:
            return _describe(admin, groups, args)
        if args.delete:
            return _delete(admin, groups)
        if args.delete_offsets:
            return _delete_offsets(admin, groups[0], args)
        return _reset(admin, groups, args)


def _check_combinations(args) -> None:
    action = next(a for a in ("list", "describe", "delete", "reset_offsets", "delete_offsets") if getattr(args, a))
    name = "--" + action.replace("_", "-")
    if action != "list" and not args.group and not args.all_groups:
        raise UsageError(f"{name} needs --group or --all-groups")
    if args.group and args.all_groups:
        raise UsageError("--group and --all-groups cannot be used together")
    if action == "list" and (args.group or args.all_groups):
        raise UsageError("--list takes no --group")
    reset_only = ("topic", "all_topics", "to_earliest", "to_latest", "to_offset", "to_datetime", "shift_by", "execute",
                  "dry_run")
    if action == "delete_offsets":
        if not args.group or len(args.group) != 1 or args.all_groups:
            raise UsageError("--delete-offsets takes exactly one --group")
        if not args.topic:
            raise UsageError("--delete-offsets needs --topic TOPIC[:P,P]")
        reset_only = reset_only[1:]
    if action != "reset_offsets":
        used = [o for o in reset_only if getattr(args, o) not in (None, False)]
        if used:
            raise UsageError(f"--{used[0].replace('_', '-')} can only be used with --reset-offsets")
    if (args.members or args.offsets) and action != "describe" or args.state and action not in ("describe", "list"):
        raise UsageError(f"--members, --offsets and --state cannot be used with {name}")
    if action == "reset_offsets":
        if not args.topic and not args.all_topics:
            raise UsageError("--reset-offsets needs a scope: --topic TOPIC[:P,P] or --all-topics")
        if args.topic and args.all_topics:
            raise UsageError("--topic and --all-topics cannot be used together")
        if not (args.to_earliest or args.to_latest or args.to_offset is not None or args.to_datetime is not None
                or args.shift_by is not None):
            raise UsageError("--reset-offsets needs --to-earliest, --to-latest, --to-offset N, --to-datetime T or "
                             "--shift-by N")


EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})"
                       r"(Z|[+-]\d{2}(?::?\d{2})?)?")


def datetime_ms(text: str) -> int:
    """kafka-consumer-groups' --to-datetime: ``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone (``Z``,
    ``+HH``, ``+HHMM``, ``+HH:MM``); without one it is UTC, as Kafka reads it. Milliseconds since the epoch."""
    m = _DATETIME.fullmatch(text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"Error parsing timestamp {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss "
                                         f"(ISO8601, e.g. 2024-01-31T12:00:00.000, optionally with Z or +01:00)")
    year, month, day, hour, minute, second, millis = (int(g) for g in m.groups()[:7])
    zone = m.group(8) or "Z"
    if zone == "Z":
        tz = datetime.timezone.utc
    else:
        digits = zone[1:].replace(":", "")
        offset = datetime.timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
        tz = datetime.timezone(offset if zone[0] == "+" else -offset)
    try:
        when = datetime.datetime(year, month, day, hour, minute, second, millis * 1000, tzinfo=tz)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"Error parsing timestamp {text!r}: {e}") from None
    return (when - EPOCH) // datetime.timedelta(milliseconds=1)


def _dash(v) -> object:
    return "-" if v is None else v


def _exists(info: GroupInfo, committed: dict) -> bool:
    return info.state != "Dead" or bool(committed)


def _describe(admin, groups: list[str], args) -> int:
    status = 0
    for gid in groups:
        info = admin.describe_group(gid)
        committed = admin.committed_offsets(gid)
        if not _exists(info, committed):
            err(f"seglog groups: error: Consumer group '{gid}' does not exist.")
            status = 1
            continue
        if args.state:
            lines = table(("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
                          [(gid, info.coordinator or "-", info.protocol or "-", info.state, len(info.members))],
                          (15, 25, 20, 15))
        else:
            if info.state == "Empty" or info.state == "Dead":
                err(f"\nConsumer group '{gid}' has no active members.")
            elif info.state != "Stable":
                err(f"\nWarning: Consumer group '{gid}' is rebalancing.")
            if args.members:
                rows = [(gid, m.member_id, m.host, m.client_id, len(m.assignment)) for m in info.members]
                header = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
                widths = (15, 15, 15, 15)
            else:
                rows = _offset_rows(admin, info, committed)
                header = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                          "CONSUMER-ID", "HOST", "CLIENT-ID")
                widths = (15, 15, 10, 15, 15, 15, 15, 15)
            if not rows:
                continue
            lines = table(header, rows, widths)
        out()
        for line in lines:
            out(line)
    return status


def _offset_rows(admin, info: GroupInfo, committed: dict) -> list[tuple]:
    owner = {tp: m for m in info.members for tp in m.assignment}
    tps = sorted(set(committed) | set(owner))
    ranges = admin.offset_ranges(tps)
    rows = []
    for tp in tps:
        current = committed.get(tp)
        end = ranges[tp][1] if ranges.get(tp) is not None else None
        lag = end - current if current is not None and end is not None else None
        m = owner.get(tp)
        rows.append((info.group_id, tp.topic, tp.partition, _dash(current), _dash(end), _dash(lag),
                     m.member_id if m else "-", m.host if m else "-", m.client_id if m else "-"))
    for m in info.members:
        if not m.assignment:
            rows.append((info.group_id, "-", "-", "-", "-", "-", m.member_id, m.host, m.client_id))
    return rows


def _delete(admin, groups: list[str]) -> int:
    results = admin.delete_groups(groups)
    done = [g for g in groups if results.get(g) is None]
    failed = [(g, results[g]) for g in groups if results.get(g) is not None]
    if not failed:
        out(f"Deletion of requested consumer groups ({', '.join(repr(g) for g in done)}) was successful.")
        return 0
    err("Deletion of some consumer groups failed:")
    for g, e in failed:
        err(f"* Group '{g}' could not be deleted due to: {e}")
    if done:
        out(f"These consumer groups were deleted successfully: {', '.join(repr(g) for g in done)}")
    return 1


def _delete_offsets(admin, group: str, args) -> int:
    """Kafka's output: the request's outcome, then one STATUS line per partition ("Successful" or "Error: ...")."""
    tps = _scope(admin, args, {})
    try:
        results = admin.delete_offsets(group, tps)
    except GroupIdNotFoundError:
        raise CliError(f"'{group}' does not exist.") from None
    except NonEmptyGroupError:
        raise CliError(f"Deleting offsets of a consumer group '{group}' is forbidden if the group is not "
                       f"empty.") from None
    failed = any(e is not None for e in results.values())
    if failed:
        err("Encounter some partition level error, see the follow-up details:")
    else:
        out(f"Request succeed for deleting offsets with topic {', '.join(dict.fromkeys(tp.topic for tp in tps))} "
            f"group {group}")
    out("")
    for line in table(("TOPIC", "PARTITION", "STATUS"),
                      [(tp.topic, tp.partition, "Successful" if results[tp] is None else f"Error: {results[tp]}")
                       for tp in sorted(results)]):
        out(line)
    return 1 if failed else 0


def _scope(admin, args, committed: dict) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(committed)
    tps: list[TopicPartition] = []
    for spec in args.topic:
        topic, sep, parts = spec.partition(":")
        try:
            count = len(admin.describe_topic(topic).partitions)
        except UnknownTopicOrPartitionError:
            raise CliError(f"Topic '{topic}' does not exist.") from None
        if not sep:
            tps.extend(TopicPartition(topic, p) for p in range(count))
            continue
        for item in parts.split(","):
            try:
                p = int(item)
            except ValueError:
                raise UsageError(f"bad partition {item!r} in --topic {spec!r}") from None
            if not 0 <= p < count:
                raise CliError(f"Partition {p} does not exist in topic '{topic}' (partitions 0..{count - 1})")
            tps.append(TopicPartition(topic, p))
    return sorted(dict.fromkeys(tps))


def _reset(admin, groups: list[str], args) -> int:
    plans = []
    for gid in groups:
        info = admin.describe_group(gid)
        if info.state not in INACTIVE:
            raise CliError(f"Assignments can only be reset if the group '{gid}' is inactive, but the current "
                           f"state is {info.state}.")
        committed = admin.committed_offsets(gid)
        tps = _scope(admin, args, committed)
        ranges = admin.offset_ranges(tps)
        by_time = admin.offsets_for_times([tp for tp in tps if ranges[tp] is not None], args.to_datetime) \
            if args.to_datetime is not None else {}
        new: dict[TopicPartition, int] = {}
        for tp in tps:
            if ranges[tp] is None:
                err(f"Partition {tp.partition} of topic '{tp.topic}' does not exist any more: left out")
                continue
            start, end = ranges[tp]
            if args.to_earliest:
                target = start
            elif args.to_latest:
                target = end
            elif args.to_offset is not None:
                target = args.to_offset
            elif args.to_datetime is not None:
                found = by_time.get(tp)
                target = end if found is None else found          # no record that late: the end, as Kafka
            else:
                if tp not in committed:
                    raise CliError(f"Cannot shift offset for partition {tp.topic}-{tp.partition} of group "
                                   f"'{gid}' since there is no current committed offset")
                target = committed[tp] + args.shift_by
            if target < start or target > end:
                bound = start if target < start else end
                err(f"New offset ({target}) is {'lower than earliest' if target < start else 'higher than latest'}"
                    f" offset for topic partition {tp.topic}-{tp.partition}. Value will be set to {bound}")
                target = bound
            new[tp] = target
        plans.append((gid, new))
    if not args.execute and not args.dry_run:
        err("WARN: No action will be performed as the --execute option is missing. Add --execute to reset the "
            "offsets, or --dry-run to only show them.")
    for gid, new in plans:
        out()
        for line in table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
                          [(gid, tp.topic, tp.partition, o) for tp, o in new.items()], (15, 15, 10)):
            out(line)
        if args.execute and new:
            admin.alter_committed_offsets(gid, new)
    return 0

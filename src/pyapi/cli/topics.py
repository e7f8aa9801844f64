"""`seglog topics`: create, describe, list, alter and delete topics, shaped like kafka-topics.sh.

    seglog topics --data-dir data --create --topic pet --partitions 3 --config retention.ms=604800000
    seglog topics --data-dir data --describe --topic pet
    seglog topics --data-dir data --list
    seglog topics --data-dir data --alter --topic pet --partitions 4 --config retention.ms=3600000
    seglog topics --data-dir data --delete --topic pet
"""

from __future__ import annotations

import base64
import dataclasses

from ..errors import (ClusterAuthorizationFailedError, TopicAlreadyExistsError, UnknownTopicOrPartitionError,
                      UnsupportedVersionError)
from .admin import TopicDescription
from .connect import connect
from .common import CliError, UsageError, add_target, key_values, out, positive, split_config_list


def _min_isr(desc: TopicDescription) -> int:
    return int(desc.effective_config.get("min.insync.replicas", 1))


PARTITION_FILTERS = {
    "--under-replicated-partitions": ("whose ISR is smaller than their replica set",
                                      lambda desc, p: len(p.isr) < p.replication_factor),
    "--unavailable-partitions": ("without a live leader", lambda desc, p: p.leader < 0),
    "--under-min-isr-partitions": ("whose ISR is smaller than min.insync.replicas",
                                   lambda desc, p: len(p.isr) < _min_isr(desc)),
    "--at-min-isr-partitions": ("whose ISR is exactly min.insync.replicas",
                                lambda desc, p: len(p.isr) == _min_isr(desc)),
}
"""kafka-topics.sh's partition filters of --describe: flag -> (help, test of a partition of a topic)."""


def register(sub) -> None:
    p = sub.add_parser("topics", help="create, describe, list, alter and delete topics (kafka-topics.sh)",
                       description="Create, describe, list, alter and delete topics, like kafka-topics.sh: "
                                   "the same options, the same output lines. Errors exit with status 1.")
    add_target(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--create", action="store_true", help="create --topic (makes the data dir if needed)")
    action.add_argument("--describe", action="store_true", help="describe --topic, or every topic")
    action.add_argument("--list", action="store_true", help="list topic names")
    action.add_argument("--alter", action="store_true",
                        help="add partitions (--partitions N, never fewer) and/or change configs "
                             "(--config / --add-config / --delete-config)")
    action.add_argument("--delete", action="store_true", help="delete --topic and its data")
    p.add_argument("--topic", metavar="NAME", help="the topic (required except for --list and --describe)")
    p.add_argument("--partitions", type=positive, metavar="N",
                   help="partition count: on --create (default num.partitions) or the new total on --alter")
    p.add_argument("--replication-factor", type=positive, metavar="N", help="replicas per partition (--create)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="a topic config override, e.g. retention.ms=3600000 (repeatable; --create, --alter)")
    p.add_argument("--add-config", action="append", metavar="K=V,K2=[A,B]",
                   help="overrides as kafka-configs.sh takes them (--alter)")
    p.add_argument("--delete-config", action="append", metavar="KEY",
                   help="remove an override, back to the default (--alter; repeatable or comma-separated)")
    p.add_argument("--if-not-exists", action="store_true", help="--create: no error if the topic exists")
    p.add_argument("--if-exists", action="store_true", help="--alter/--delete: no error if the topic is missing")
    p.add_argument("--exclude-internal", action="store_true", help="--list/--describe: leave out __consumer_offsets")
    p.add_argument("--topics-with-overrides", action="store_true",
                   help="--describe: only topics with config overrides")
    for flag, what in PARTITION_FILTERS.items():
        p.add_argument(flag, action="store_true", help=f"--describe: only partitions {what[0]}")
    p.set_defaults(func=cmd_topics)


def cmd_topics(args) -> int:
    _check_combinations(args)
    with connect(args, create=args.create) as admin:
        if args.create:
            return _create(admin, args)
        if args.list:
            for name in admin.list_topics(include_internal=not args.exclude_internal):
                out(name)
            return 0
        if args.describe:
            return _describe(admin, args)
        if args.alter:
            return _alter(admin, args)
        return _delete(admin, args)


_FILTER_DESTS = tuple(flag[2:].replace("-", "_") for flag in PARTITION_FILTERS)


def _check_combinations(args) -> None:
    action = next(a for a in ("create", "describe", "list", "alter", "delete") if getattr(args, a))
    if action in ("create", "alter", "delete") and not args.topic:
        raise UsageError(f"--{action} needs --topic")
    allowed = {"create": {"partitions", "replication_factor", "config", "if_not_exists"},
               "alter": {"partitions", "config", "add_config", "delete_config", "if_exists"},
               "delete": {"if_exists"}, "list": {"exclude_internal"},
               "describe": {"exclude_internal", "topics_with_overrides", *_FILTER_DESTS}}[action]
    for opt in ("partitions", "replication_factor", "config", "add_config", "delete_config", "if_not_exists",
                "if_exists", "exclude_internal", "topics_with_overrides", *_FILTER_DESTS):
        if getattr(args, opt) not in (None, False) and opt not in allowed:
            raise UsageError(f"--{opt.replace('_', '-')} cannot be used with --{action}")
    if action == "alter" and not (args.partitions or args.config or args.add_config or args.delete_config):
        raise UsageError("--alter needs --partitions and/or --config/--add-config/--delete-config")


def _missing(name: str) -> CliError:
    return CliError(f"Topic '{name}' does not exist.")


def _exists(admin, args) -> bool:
    """Whether --topic exists; --alter and --delete of a missing topic fail unless --if-exists is given."""
    if args.topic in admin.list_topics():
        return True
    if args.if_exists:
        return False
    raise _missing(args.topic)


def _create(admin, args) -> int:
    config = key_values(args.config, "--config")
    try:
        admin.create_topic(args.topic, args.partitions, args.replication_factor, config)
    except TopicAlreadyExistsError:
        if args.if_not_exists:
            return 0
        raise
    out(f"Created topic {args.topic}.")
    return 0


def topic_id_text(desc: TopicDescription) -> str:
    """Kafka prints topic ids as unpadded URL-safe base64 of the 16 UUID bytes."""
    if desc.topic_id is None:
        return "AAAAAAAAAAAAAAAAAAAAAA"
    return base64.urlsafe_b64encode(desc.topic_id.bytes).decode().rstrip("=")


def describe_lines(desc: TopicDescription) -> list[str]:
    configs = ",".join(f"{k}={v}" for k, v in sorted(desc.configs.items()))
    lines = [f"Topic: {desc.name}\tTopicId: {topic_id_text(desc)}\tPartitionCount: {len(desc.partitions)}\t"
             f"ReplicationFactor: {desc.replication_factor}\tConfigs: {configs}"]
    for p in desc.partitions:
        leader = "none" if p.leader < 0 else p.leader          # as kafka-topics.sh prints a leaderless partition
        moving = (f"\tAdding Replicas: {','.join(map(str, p.adding))}\tRemoving Replicas: "
                  f"{','.join(map(str, p.removing))}" if p.adding or p.removing else "")
        lines.append(f"\tTopic: {desc.name}\tPartition: {p.partition}\tLeader: {leader}\t"
                     f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}{moving}")
    return lines


def _reassignments(admin, partitions) -> dict:
    """The partitions' reassignments under way, as kafka-topics.sh asks for them: none when the principal may not
    describe the cluster or the broker has no ListPartitionReassignments."""
    try:
        return admin.list_partition_reassignments(partitions)
    except (ClusterAuthorizationFailedError, UnsupportedVersionError):
        return {}


def with_reassignments(desc: TopicDescription, moving: dict) -> TopicDescription:
    """The description with each partition's adding and removing replicas from ``moving`` (ignored when the
    metadata's replicas show it already done, as kafka-topics.sh does)."""
    parts = []
    for p in desc.partitions:
        ra = moving.get((desc.name, p.partition))
        if ra is not None and set(ra.adding + ra.removing) & set(p.replicas):
            p = p._replace(adding=ra.adding, removing=ra.removing)
        parts.append(p)
    return dataclasses.replace(desc, partitions=tuple(parts))


def _describe(admin, args) -> int:
    if args.topic:
        try:
            descs = [admin.describe_topic(args.topic)]
        except UnknownTopicOrPartitionError:
            raise _missing(args.topic) from None
    else:
        descs = [admin.describe_topic(n) for n in admin.list_topics(include_internal=not args.exclude_internal)]
    filters = [test for flag, (_, test) in PARTITION_FILTERS.items() if getattr(args, flag[2:].replace("-", "_"))]
    moving = _reassignments(admin, [(d.name, p.partition) for d in descs for p in d.partitions]
                            if args.topic else None) if descs else {}
    for desc in descs:
        desc = with_reassignments(desc, moving)
        if args.exclude_internal and desc.internal or args.topics_with_overrides and not desc.configs:
            continue
        lines = describe_lines(desc)
        if filters:           # as kafka-topics.sh: the matching partitions' lines only, no topic line
            lines = [line for p, line in zip(desc.partitions, lines[1:]) if any(f(desc, p) for f in filters)]
        for line in lines:
            out(line)
    return 0


def _alter(admin, args) -> int:
    if not _exists(admin, args):
        return 0
    set_ = key_values(args.config, "--config")
    for chunk in args.add_config or ():
        set_.update(key_values(split_config_list(chunk), "--add-config"))
    delete = [k.strip() for chunk in args.delete_config or () for k in chunk.split(",") if k.strip()]
    both = sorted(set(set_) & set(delete))
    if both:
        raise UsageError(f"config {', '.join(both)} is both set and deleted")
    current = len(admin.describe_topic(args.topic).partitions)
    if args.partitions is not None and args.partitions <= current:      # refused before any config changes
        admin.create_partitions(args.topic, args.partitions)
    if set_ or delete:
        admin.alter_topic_config(args.topic, set_, delete)
        out(f"Completed updating config for topic {args.topic}.")
    if args.partitions is not None:
        admin.create_partitions(args.topic, args.partitions)
        out("Adding partitions succeeded!")
    return 0


def _delete(admin, args) -> int:
    if not _exists(admin, args):
        return 0
    admin.delete_topic(args.topic)
    return 0

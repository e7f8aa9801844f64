"""`seglog leader-election`: elect partition leaders, shaped like kafka-leader-election.sh (the same options, JSON
file and output lines).

    seglog leader-election --bootstrap-server localhost:9092 --election-type PREFERRED --all-topic-partitions
    seglog leader-election --bootstrap-server localhost:9092 --election-type UNCLEAN --topic pet --partition 0
    seglog leader-election --bootstrap-server localhost:9092 --election-type preferred --path-to-json-file p.json

where p.json is ``{"partitions": [{"topic": "pet", "partition": 0}]}``. A preferred election gives leadership
back to each partition's first assigned replica when it is in the ISR; an unclean one gives a leaderless
partition any live replica. Exit status 1 when a partition could not be elected.
"""

from __future__ import annotations

from ..errors import ElectionNotNeededError
from .common import CliError, UsageError, add_target, json_partitions, out
from .connect import connect

_TYPES = ("PREFERRED", "UNCLEAN")


def register(sub) -> None:
    p = sub.add_parser("leader-election", help="elect partition leaders (kafka-leader-election.sh)",
                       description="Elect partition leaders, like kafka-leader-election.sh: PREFERRED moves "
                                   "leadership back to the first assigned replica, UNCLEAN gives a leaderless "
                                   "partition any live replica (data the old leader alone had may be lost).")
    add_target(p)
    p.add_argument("--election-type", required=True, type=str.upper, choices=_TYPES, metavar="PREFERRED|UNCLEAN",
                   help="the type of election")
    p.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")
    p.add_argument("--topic", help="the topic of the partition to elect (with --partition)")
    p.add_argument("--partition", type=int, help="the partition to elect (with --topic)")
    p.add_argument("--path-to-json-file", metavar="FILE",
                   help='{"partitions": [{"topic": "t", "partition": 0}]}: the partitions to elect')
    p.set_defaults(func=cmd_leader_election)


def read_partitions(path: str) -> list[tuple[str, int]]:
    """The partitions of a kafka-leader-election.sh JSON file; CliError for anything else."""
    return json_partitions(path, ("partition",))


def _asked(args) -> list[tuple[str, int]] | None:
    chosen = sum((args.all_topic_partitions, args.topic is not None, args.path_to_json_file is not None))
    if chosen != 1:
        raise UsageError("One and only one of the following options is required: all-topic-partitions, topic, "
                         "path-to-json-file")
    if (args.topic is None) != (args.partition is None):
        raise UsageError("--topic and --partition go together")
    if args.all_topic_partitions:
        return None
    if args.topic is not None:
        return [(args.topic, args.partition)]
    return read_partitions(args.path_to_json_file)


def cmd_leader_election(args) -> int:
    asked = _asked(args)
    with connect(args) as admin:
        results = admin.elect_leaders(asked, args.election_type == "UNCLEAN")
    elected = [tp for tp, e in results.items() if e is None]
    noop = [tp for tp, e in results.items() if isinstance(e, ElectionNotNeededError)]
    failed = {tp: e for tp, e in results.items() if e is not None and tp not in noop}
    if elected:
        out(f"Successfully completed leader election ({args.election_type}) for partitions "
            + ", ".join(f"{t}-{p}" for t, p in elected))
    if noop and asked is not None:            # as Kafka's tool: with --all-topic-partitions only the changes
        out("Valid replica already elected for partitions " + ", ".join(f"{t}-{p}" for t, p in noop))
    for (t, p), e in failed.items():
        out(f"Error completing leader election ({args.election_type}) for partition: {t}-{p}: "
            f"{type(e).__name__}: {e}")
    if failed:
        raise CliError(f"{len(failed)} replica(s) could not be elected")
    return 0

"""`seglog reassign-partitions`: move partition replicas between brokers, shaped like kafka-reassign-partitions.sh
(the same options, JSON files and output lines).

    seglog reassign-partitions --bootstrap-server localhost:9092 --generate \\
        --topics-to-move-json-file topics.json --broker-list 1,2,3
    seglog reassign-partitions --bootstrap-server localhost:9092 --execute --reassignment-json-file plan.json
    seglog reassign-partitions --bootstrap-server localhost:9092 --verify --reassignment-json-file plan.json
    seglog reassign-partitions --bootstrap-server localhost:9092 --cancel --reassignment-json-file plan.json
    seglog reassign-partitions --bootstrap-server localhost:9092 --list

topics.json is ``{"version": 1, "topics": [{"topic": "pet"}]}``; plan.json is ``{"version": 1, "partitions":
[{"topic": "pet", "partition": 0, "replicas": [2, 3], "log_dirs": ["/disk2/data", "any"]}]}`` ("log_dirs",
optional, one per replica: the log directory of that broker to hold it, or "any"). --generate prints the current
assignment and a proposed one over the brokers listed (Kafka's rack-unaware placement); --execute starts the
reassignments (the controller adds the new replicas, waits until they are in sync, then removes the old ones),
printing the current assignment to keep for a rollback, then moves the replicas given a log dir there
(AlterReplicaLogDirs, retried until each replica exists, up to --timeout); --verify tells which are done, and
which replicas reached their log dir; --cancel puts the partitions still moving back on their original replicas.

--execute --throttle N sets replication throttles as Kafka's tool does: N B/s as leader.replication.throttled.rate
and follower.replication.throttled.rate on every broker the moving partitions have or get, and on each topic moved
leader.replication.throttled.replicas (the partitions' current replicas) and follower.replication.throttled.replicas
(the replicas they gain). --replica-alter-log-dirs-throttle N sets replica.alter.log.dirs.io.max.bytes.per.second
to N B/s on the brokers whose replicas change log dir (the copy between a broker's log directories). --verify
removes them all once no partition or replica of the file is still moving (unless --preserve-throttles).
"""

from __future__ import annotations

import json
import time

from ..cluster.placement import assign_replicas
from ..errors import ReplicaNotAvailableError
from ..replication.throttle import (ALTER_LOG_DIRS_RATE_KEY, BROKER_RATE_KEYS, DYNAMIC_BROKER_KEYS, FOLLOWER, LEADER,
                                    REPLICAS_KEYS)
from .common import CliError, UsageError, add_command_config, out
from .connect import connect

LEADER_REPLICAS, FOLLOWER_REPLICAS = REPLICAS_KEYS[LEADER], REPLICAS_KEYS[FOLLOWER]
_ACTIONS = ("generate", "execute", "verify", "cancel", "list")
ANY_LOG_DIR = "any"
EXISTING = ("Cannot execute because there is an existing partition assignment.  Use --additional to override this "
            "and create a new partition assignment in addition to the existing one. The --additional flag can also "
            "be used to change the throttle by resubmitting the current reassignment.")


def register(sub) -> None:
    p = sub.add_parser("reassign-partitions", help="move partition replicas between brokers "
                                                   "(kafka-reassign-partitions.sh)",
                       description="Move partition replicas between brokers, like kafka-reassign-partitions.sh.")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="a broker of the cluster")
    add_command_config(p)
    for action, text in (("generate", "propose an assignment of the topics in --topics-to-move-json-file over "
                                      "--broker-list"),
                         ("execute", "start the reassignment in --reassignment-json-file"),
                         ("verify", "tell whether the reassignment in --reassignment-json-file is done"),
                         ("cancel", "cancel the reassignment in --reassignment-json-file"),
                         ("list", "list the partitions being reassigned")):
        p.add_argument(f"--{action}", action="store_true", help=text)
    p.add_argument("--reassignment-json-file", metavar="FILE",
                   help='{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}')
    p.add_argument("--topics-to-move-json-file", metavar="FILE", help='{"version": 1, "topics": [{"topic": "t"}]}')
    p.add_argument("--broker-list", metavar="B1,B2", help="the brokers to place the topics on (--generate)")
    p.add_argument("--additional", action="store_true",
                   help="--execute even though other reassignments are in progress")
    p.add_argument("--throttle", type=int, default=-1, metavar="BYTES_PER_S",
                   help="with --execute: limit the replication of the moving replicas to this many bytes/s")
    p.add_argument("--replica-alter-log-dirs-throttle", type=int, default=-1, metavar="BYTES_PER_S",
                   help="with --execute: limit the copy of replicas moving between log directories of a broker to "
                        "this many bytes/s")
    p.add_argument("--timeout", type=int, default=10000, metavar="MS",
                   help="with --execute: how long to keep retrying the log directory moves of replicas not yet "
                        "created (default 10000)")
    p.add_argument("--preserve-throttles", action="store_true",
                   help="with --verify: keep the throttles even when the reassignment is done")
    p.set_defaults(func=cmd_reassign_partitions)


def _read_json(path: str) -> object:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except ValueError as e:
        raise CliError(f"{path} is not JSON: {e}") from None


def read_reassignment(path: str) -> tuple[dict[tuple[str, int], list[int]], dict[tuple[str, int, int], str]]:
    """The partitions and target replicas of a reassignment JSON file, in file order, and the log directory of
    each replica given one ((topic, partition, broker) -> directory; "any" is left out); CliError for anything
    else (no partitions, a partition twice, a replica twice, as many log dirs as replicas)."""
    doc = _read_json(path)
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise CliError(f'{path}: expected {{"version": 1, "partitions": [{{"topic": ..., "partition": ..., '
                       f'"replicas": [...]}}]}}')
    if not entries:
        raise CliError("Partition reassignment list cannot be empty")
    plan: dict[tuple[str, int], list[int]] = {}
    log_dirs: dict[tuple[str, int, int], str] = {}
    for e in entries:
        if not (isinstance(e, dict) and isinstance(e.get("topic"), str) and type(e.get("partition")) is int
                and isinstance(e.get("replicas"), list) and all(type(r) is int for r in e["replicas"])):
            raise CliError(f"{path}: each partition needs a string topic, an integer partition and a list of "
                           f"integer replicas: {e!r}")
        tp = (e["topic"], e["partition"])
        if tp in plan:
            raise CliError(f"Partition reassignment contains duplicate topic partitions: {_tp(tp)}")
        replicas = e["replicas"]
        if len(set(replicas)) != len(replicas):
            dup = next(r for r in replicas if replicas.count(r) > 1)
            raise CliError(f"Partition replica lists may not contain duplicate entries: {_tp(tp)} contains {dup}")
        dirs = e.get("log_dirs")
        if dirs is not None:
            if not isinstance(dirs, list) or len(dirs) != len(replicas):
                raise CliError(f"Size of replicas list {replicas} is different from size of log dirs list {dirs} "
                               f"for partition {_tp(tp)}")
            if not all(isinstance(d, str) for d in dirs):
                raise CliError(f"{path}: log_dirs must be strings (a log directory, or \"any\"): {dirs!r}")
            log_dirs.update({(*tp, b): d for b, d in zip(replicas, dirs) if d != ANY_LOG_DIR})
        plan[tp] = replicas
    return plan, log_dirs


def read_topics_to_move(path: str) -> list[str]:
    doc = _read_json(path)
    entries = doc.get("topics") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("topic"), str)
                                                for e in entries):
        raise CliError(f'{path}: expected {{"version": 1, "topics": [{{"topic": "t"}}]}}')
    topics = [e["topic"] for e in entries]
    dups = sorted({t for t in topics if topics.count(t) > 1})
    if dups:
        raise CliError(f"List of topics to reassign contains duplicate entries: {','.join(dups)}")
    return topics


def assignment_json(assignment: dict[tuple[str, int], tuple[int, ...] | list[int]]) -> str:
    """Kafka's reassignment JSON, partitions sorted by topic then partition, every log dir "any"."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(rs), "log_dirs": ["any"] * len(rs)}
        for (t, p), rs in sorted(assignment.items())]}, separators=(",", ":"))


def _tp(tp: tuple[str, int]) -> str:
    return f"{tp[0]}-{tp[1]}"


def _tps(tps) -> str:
    return ",".join(_tp(tp) for tp in sorted(tps))


def _action(args) -> str:
    chosen = [a for a in _ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise UsageError("Command must include exactly one action: --generate, --execute, --verify, --cancel, "
                         "or --list")
    action = chosen[0]
    if action in ("execute", "verify", "cancel") and not args.reassignment_json_file:
        raise UsageError(f"Missing required argument \"[reassignment-json-file]\" (with --{action})")
    if action == "generate" and not (args.topics_to_move_json_file and args.broker_list):
        raise UsageError("--generate needs --topics-to-move-json-file and --broker-list")
    return action


def _current(admin, partitions) -> dict[tuple[str, int], tuple[int, ...]]:
    """The replicas of each partition, from fresh metadata (UnknownTopicOrPartitionError for a missing one)."""
    found, topics = {}, {}
    for t, p in partitions:
        if t not in topics:
            topics[t] = {pi.partition: pi.replicas for pi in admin.describe_topic(t).partitions}
        if p not in topics[t]:
            raise CliError(f"Unable to find partition: {t}-{p}")
        found[(t, p)] = topics[t][p]
    return found


def cmd_reassign_partitions(args) -> int:
    action = _action(args)
    plan, log_dirs = read_reassignment(args.reassignment_json_file) if action in ("execute", "verify", "cancel") \
        else (None, None)
    topics = read_topics_to_move(args.topics_to_move_json_file) if action == "generate" else None
    brokers = _broker_list(args.broker_list) if action == "generate" else None
    with connect(args) as admin:
        if action == "list":
            return _list(admin)
        if action == "generate":
            return _generate(admin, topics, brokers)
        if action == "execute":
            return _execute(admin, plan, log_dirs, args.additional, args.throttle,
                            args.replica_alter_log_dirs_throttle, args.timeout)
        if action == "verify":
            return _verify(admin, plan, log_dirs, args.preserve_throttles)
        return _cancel(admin, plan)


def _broker_list(text: str) -> list[int]:
    try:
        brokers = [int(b) for b in text.split(",")]
    except ValueError:
        raise UsageError(f"--broker-list must be comma-separated broker ids, not {text!r}") from None
    dups = sorted({b for b in brokers if brokers.count(b) > 1})
    if dups:
        raise CliError(f"Broker list contains duplicate entries: {','.join(map(str, dups))}")
    return brokers


def _list(admin) -> int:
    moving = admin.list_partition_reassignments()
    if not moving:
        out("No partition reassignments found.")
        return 0
    out("Current partition reassignments:")
    for tp, ra in sorted(moving.items()):
        out(f"{_tp(tp)}: replicas: {','.join(map(str, ra.replicas))}."
            + (f" adding: {','.join(map(str, ra.adding))}." if ra.adding else "")
            + (f" removing: {','.join(map(str, ra.removing))}." if ra.removing else ""))
    return 0


def _generate(admin, topics: list[str], brokers: list[int]) -> int:
    current: dict[tuple[str, int], tuple[int, ...]] = {}
    for t in topics:
        current.update({(t, pi.partition): pi.replicas for pi in admin.describe_topic(t).partitions})
    known = set(admin.cluster.broker_ids())
    usable = [b for b in brokers if b in known]
    proposed: dict[tuple[str, int], tuple[int, ...]] = {}
    for t in topics:
        parts = sorted(p for tt, p in current if tt == t)
        placement = assign_replicas(usable, len(parts), len(current[(t, parts[0])]))
        proposed.update({(t, p): placement[p] for p in parts})
    out("Current partition replica assignment")
    out(assignment_json(current))
    out("")
    out("Proposed partition reassignment configuration")
    out(assignment_json(proposed))
    return 0


def throttled_replicas(current: dict[tuple[str, int], tuple[int, ...]], plan: dict[tuple[str, int], list[int]]
                       ) -> dict[str, tuple[str, str]]:
    """{topic: (leader.replication.throttled.replicas, follower.replication.throttled.replicas)} of a move, as
    Kafka's tool computes them: every current replica of a moving partition, and every replica it gains,
    "partition:broker" sorted as strings."""
    leaders: dict[str, set[str]] = {}
    followers: dict[str, set[str]] = {}
    for (t, p), target in plan.items():
        leaders.setdefault(t, set()).update(f"{p}:{b}" for b in current[(t, p)])
        followers.setdefault(t, set()).update(f"{p}:{b}" for b in target if b not in current[(t, p)])
    return {t: (",".join(sorted(leaders[t])), ",".join(sorted(followers[t]))) for t in leaders}


def _execute(admin, plan, log_dirs, additional: bool, throttle: int, log_dir_throttle: int, timeout_ms: int) -> int:
    if not additional and admin.list_partition_reassignments():
        raise CliError(EXISTING)
    known = set(admin.cluster.broker_ids())
    unknown = next((b for rs in plan.values() for b in rs if b not in known), None)
    if unknown is not None:
        raise CliError(f"Unknown broker id {unknown}")
    current = _current(admin, plan)
    out("Current partition replica assignment")
    out("")
    out(assignment_json(current))
    out("")
    out("Save this to use as the --reassignment-json-file option during rollback")
    if throttle >= 0:
        out("Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
            "throttle is removed.")
        for topic, (leader, follower) in sorted(throttled_replicas(current, plan).items()):
            admin.alter_topic_config(topic, {LEADER_REPLICAS: leader, FOLLOWER_REPLICAS: follower}, ())
        for b in sorted({b for tp, rs in plan.items() for b in (*current[tp], *rs)}):
            admin.alter_broker_config(b, dict.fromkeys(BROKER_RATE_KEYS, str(throttle)), ())
        out(f"The inter-broker throttle limit was set to {throttle} B/s")
    if log_dir_throttle >= 0 and log_dirs:
        for b in sorted({b for _, _, b in log_dirs}):
            admin.alter_broker_config(b, {ALTER_LOG_DIRS_RATE_KEY: str(log_dir_throttle)}, ())
        out(f"The replica-alter-dir throttle limit was set to {log_dir_throttle} B/s")
    errors = {tp: e for tp, e in admin.alter_partition_reassignments(plan).items() if e is not None}
    if errors:
        raise CliError("Error reassigning partition(s):\n"
                       + "\n".join(f"{_tp(tp)}: {errors[tp]}" for tp in sorted(errors)))
    out(f"Successfully started partition reassignment{'' if len(plan) == 1 else 's'} for {_tps(plan)}")
    if log_dirs:
        _move_replicas(admin, log_dirs, timeout_ms)
    return 0


def _tpr(r: tuple[str, int, int]) -> str:
    """A replica as Kafka's TopicPartitionReplica prints: topic-partition-broker."""
    return f"{r[0]}-{r[1]}-{r[2]}"


def _move_replicas(admin, log_dirs: dict[tuple[str, int, int], str], timeout_ms: int) -> None:
    """AlterReplicaLogDirs of every replica given a log dir, as Kafka's executeMoves: a replica its broker does not
    hold yet (REPLICA_NOT_AVAILABLE: the reassignment is still adding it) is asked again every 100 ms until
    `timeout_ms`; any other error stops the command."""
    pending = dict(log_dirs)
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        done = []
        for r, e in sorted(admin.alter_replica_log_dirs(pending).items()):
            if e is None:
                done.append(r)
            elif not isinstance(e, ReplicaNotAvailableError):
                raise CliError(f"Failed to alter dir for {_tpr(r)}: {e}")
        if done:
            out(f"Successfully started log directory move{'' if len(done) == 1 else 's'} for: "
                f"{','.join(map(_tpr, done))}")
        for r in done:
            del pending[r]
        if not pending:
            return
        if time.monotonic() >= deadline:
            raise CliError(f"Timed out before log directory move{'' if len(pending) == 1 else 's'} could be "
                           f"started for: {','.join(map(_tpr, sorted(pending)))}")
        time.sleep(0.1)


def _verify_replica_moves(admin, log_dirs: dict[tuple[str, int, int], str]) -> bool:
    """Print where each replica given a log dir is, as Kafka's verifyReplicaMoves; whether all are there."""
    found = admin.log_dirs(sorted({b for _, _, b in log_dirs}))
    where: dict[tuple[str, int, int], dict[bool, str]] = {}
    for b, dirs in found.items():
        for d in dirs:
            for p in d["partitions"]:
                where.setdefault((p["topic"], p["partition"], b), {})[p["isFuture"]] = d["logDir"]
    out("Status of replica log dir movement:")
    complete = True
    for r, target in sorted(log_dirs.items()):
        topic, p, b = r
        dirs = where.get(r, {})
        current, future = dirs.get(False), dirs.get(True)
        if current is None:
            out(f"Partition {topic}-{p} is not found in any live log dir on broker {b}. There is likely an offline "
                f"log directory on the broker.")
        elif current == target:
            out(f"Reassignment of replica {_tpr(r)} completed successfully.")
            continue
        elif future == target:
            out(f"Partition {topic}-{p} is being moved to log dir {future} on broker {b}.")
        elif future is not None:
            out(f"Partition {topic}-{p} on broker {b} is being moved to log dir {future} instead of {target}.")
        else:
            out(f"Partition {topic}-{p} on broker {b} is not being moved from log dir {current} to {target}.")
        complete = False
    return complete


def _verify(admin, plan, log_dirs, preserve_throttles: bool) -> int:
    moving = admin.list_partition_reassignments(list(plan))
    current = _current(admin, [tp for tp in plan if tp not in moving])
    out("Status of partition reassignment:")
    for tp in sorted(plan):
        if tp in moving:
            out(f"Reassignment of partition {_tp(tp)} is still in progress.")
        elif list(current[tp]) == list(plan[tp]):
            out(f"Reassignment of partition {_tp(tp)} is completed.")
        else:
            out(f"There is no active reassignment of partition {_tp(tp)}, but replica set is "
                f"{','.join(map(str, current[tp]))} rather than {','.join(map(str, plan[tp]))}.")
    moved = True
    if log_dirs:
        out("")
        moved = _verify_replica_moves(admin, log_dirs)
    if not moving and moved and not preserve_throttles:
        # as Kafka's tool: every throttle goes, on every live broker and those of the plan (which brokers an
        # earlier --execute throttled is not known here)
        brokers = sorted(set(admin.cluster.broker_ids()) | {b for rs in plan.values() for b in rs})
        topics = sorted({t for t, _ in plan})
        out("")
        out(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
            f"{','.join(map(str, brokers))}")
        for b in brokers:
            admin.alter_broker_config(b, {}, DYNAMIC_BROKER_KEYS)
        out(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {','.join(topics)}")
        for t in topics:
            admin.alter_topic_config(t, {}, (LEADER_REPLICAS, FOLLOWER_REPLICAS))
    return 0


def _cancel(admin, plan) -> int:
    moving = [tp for tp, ra in admin.list_partition_reassignments(list(plan)).items() if ra.reassigning]
    if moving:
        errors = {tp: e for tp, e in admin.alter_partition_reassignments(dict.fromkeys(moving)).items()
                  if e is not None}
        if errors:
            raise CliError(f"Error cancelling partition reassignment{'' if len(errors) == 1 else 's'} for:\n"
                           + "\n".join(f"{_tp(tp)}: {errors[tp]}" for tp in sorted(errors)))
        out(f"Successfully cancelled partition reassignment{'' if len(moving) == 1 else 's'} for: {_tps(moving)}")
    else:
        out("None of the specified partition reassignments are active.")
    return 0

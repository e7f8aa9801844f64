"""What the request handlers of every API family share: the error-code mapping, running a blocking call off
the event loop, the connection-closing answer, per-topic nesting of partition answers, and the protocol
constants they use."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, Awaitable, Callable, Iterable

from ..config import LogConfig
from ..errors import SeglogError, code_of
from ..security.acls import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -1, -2, -3, -4    # ListOffsets' special timestamps
RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4
# Kafka's controller refuses an admin request that would write more metadata records than this (a record per
# topic and per partition; QuorumController.MAX_RECORDS_PER_USER_OP) with POLICY_VIOLATION for every topic of
# the request. Here it also keeps one request (a typo, a flipped bit) from opening logs without bound.
MAX_RECORDS_PER_USER_OP = 10_000
EXCESSIVE_BATCH = "Unable to perform excessively large batch operation."
CONFIG_SOURCE_TOPIC, CONFIG_SOURCE_DEFAULT = 1, 5     # the broker-level sources: seglog.dynamic_config
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3          # IncrementalAlterConfigs operations
# Threads for group coordinator calls that may wait for an offsets write's replication (up to its 30 s timeout
# with a follower gone): JoinGroup, SyncGroup, LeaveGroup, OffsetCommit, DeleteGroups. They never run on the
# event loop (the followers' fetches that acknowledge the write are served there) and have threads of their
# own, so waiting commits hold up neither the loop nor the other requests' off-loop calls.
GROUP_THREADS = 16
TOPIC_KEYS = {f.metadata["key"].kafka: f.metadata["key"] for f in dataclasses.fields(LogConfig)}
LIST_CONFIGS = frozenset(name for name, key in TOPIC_KEYS.items() if key.kind == "list")
# DescribeConfigs' config_type (DescribeConfigsResponse.ConfigType), by a config key's kind
_CONFIG_TYPES = {"bool": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}
_CONFIG_TYPE_PASSWORD = 9


def config_type(key) -> int:
    """Kafka's DescribeConfigs type of a config key (config._Key): BOOLEAN, STRING, INT, LONG, DOUBLE, LIST, or
    PASSWORD for a secret."""
    return _CONFIG_TYPE_PASSWORD if key.secret else _CONFIG_TYPES[key.kind]


class CloseConnection(Exception):
    """Raised by a handler that answers by closing the connection (a failed acks=0 produce request): the
    server logs the message with the client's address and closes it, sending nothing."""


def authorized_operations(broker, resource_type: ResourceType, name: str = CLUSTER_NAME) -> int:
    """Kafka's authorizedOperations (KIP-430), which Metadata, DescribeGroups and DescribeCluster report when
    asked: the bit field (1 << operation code) of the operations the request's principal may do on the
    resource, of those its type supports (every one when authorization is off)."""
    ops = sorted(SUPPORTED_OPERATIONS[resource_type])
    return sum(1 << op for op in ops if broker.allowed(AclOperation(op), resource_type, name))


def point_to_leaders(view, failed: Iterable[tuple[str, int, dict]]) -> list[dict]:
    """KIP-951 (Produce v10, Fetch v16): set the ``current_leader`` of each (topic, partition, answer) refused
    because this broker does not lead it to the leader id and epoch this broker knows ((-1, -1) for a partition
    without a known leader), and return the ``node_endpoints`` to answer with: each of those leaders that is
    alive, at its address on the request's listener, once. A client then goes to the new leader without a
    Metadata round trip."""
    leaders: set[int] = set()
    for topic, p, answer in failed:
        try:
            pm = view.partition_metadata(topic, p)
            leader, epoch = pm["leader_id"], pm["leader_epoch"]
        except SeglogError:
            leader, epoch = -1, -1
        answer["current_leader"] = {"leader_id": leader, "leader_epoch": epoch}
        if leader >= 0:
            leaders.add(leader)
    return [b for b in view.brokers() if b["node_id"] in leaders] if leaders else []


def _err(exc: BaseException) -> int:
    return code_of(exc)


async def _off_loop(fn, *args, **kwargs):
    """Run a call that may block (metadata store round trips, waiting for replication) off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(None, lambda: fn(*args, **kwargs))


def by_topic(results: Iterable[tuple[tuple[str, int], Any]], answer: Callable[[int, Any], dict]
             ) -> dict[str, list[dict]]:
    """{topic: [answer(partition, result), ...]} from ((topic, partition), result) pairs, topics and partitions
    in the order given: the nesting of Kafka's per-partition responses."""
    out: dict[str, list[dict]] = {}
    for (topic, p), result in results:
        out.setdefault(topic, []).append(answer(p, result))
    return out


def error_fields(exc: BaseException | None) -> dict:
    """A partition answer's error_code and error_message: 0 and None for no error."""
    return {"error_code": 0, "error_message": None} if exc is None else {"error_code": _err(exc),
                                                                         "error_message": str(exc)}


async def answer_partitions(topics: list[dict], defaults: dict, fill: Callable[[str, Any, dict], Awaitable[None]], *,
                            topic: str = "name", partitions: str = "partitions", index: str = "partition_index",
                            messages: bool = False) -> list[dict]:
    """The per-topic, per-partition answers of a request whose partitions are answered one by one (ListOffsets,
    OffsetForLeaderEpoch, DeleteRecords, DescribeProducers): each answer starts as its partition index
    (``index``), error code 0 and ``defaults``, and ``await fill(topic name, request partition, answer)``
    completes it; a SeglogError it raises becomes the partition's error code (and error_message with
    ``messages``), the other partitions are answered all the same. ``topic`` and ``partitions`` name the
    request's fields (a request partition is a dict holding ``index``, or the bare index)."""
    answered = []
    for t in topics:
        parts = []
        for p in t[partitions]:
            out = {index: p[index] if isinstance(p, dict) else p, "error_code": 0, **defaults}
            try:
                await fill(t[topic], p, out)
            except SeglogError as e:
                out["error_code"] = _err(e)
                if messages:
                    out["error_message"] = str(e)
            parts.append(out)
        answered.append({topic: t[topic], "partitions": parts})
    return answered

"""RemoteNode: what seglog.Producer and seglog.Consumer use of a Node, over the Kafka wire protocol.

The in-process clients are written against a :class:`seglog.node.Node`; this module gives them the same
surface backed by a broker (seglog's or Kafka's), so there is one producer and one consumer, not a second
pair for the network::

    node = RemoteNode("127.0.0.1:9092", client_id="me")
    with seglog.Producer(node) as p: p.send("pet", b"hello", key=b"k")
    with seglog.Consumer(node, group_id="g", auto_offset_reset="earliest") as c: c.subscribe(["pet"]); c.poll(1)

What maps to what:

* ``topic(name)`` / ``ensure_topic(name)`` / ``topics()``: Metadata (``ensure_topic`` lets the broker
  auto-create the topic when it allows that, as Kafka's producer does).
* ``create_topic``, ``create_partitions``, ``delete_topic``: CreateTopics / CreatePartitions / DeleteTopics at
  the controller (NOT_CONTROLLER: find it again and resend); ``alter_topic_config(name, set_, delete)``:
  IncrementalAlterConfigs (SET / DELETE) at any broker; ``topic_config(name)``: DescribeConfigs. Each change
  returns once every broker's metadata (or configs) shows it (at most 10 s), so the next call sees it
  whichever broker it reaches.
* ``partition(t, p)`` -> :class:`RemotePartition`: ``append(batch, acks)`` is a Produce request to the
  partition's leader (acks=0 requests go out on a socket of their own: the broker never answers them);
  ``fetch(offset, max_bytes)`` a Fetch request that does not wait (max_wait 0); ``high_watermark``,
  ``log_start_offset``, ``log_end_offset`` and ``log.offset_for_timestamp(ts)`` are ListOffsets requests
  (a client cannot see a leader's log end offset: ``log_end_offset`` is the high watermark, the end of what a
  consumer can read). NOT_LEADER_OR_FOLLOWER and the other "metadata is stale" errors refresh the metadata
  and retry (Produce resends the same batch bytes, so an idempotent producer's retry is deduplicated).
* ``data_version()`` / ``wait_for_data(version, timeout)``: the consumer calls them around each round of
  fetches. Fetches do not wait; ``wait_for_data`` sends one long-polling Fetch (min_bytes 1, max_wait the
  timeout) for every partition whose fetch came back empty in the last round, to each leader, and keeps
  what arrives for the next ``fetch`` at that offset. So a record produced while a consumer waits reaches
  it as soon as the broker has it, without polling every partition in turn.
* ``init_producer_id()``: InitProducerId.
* ``group_coordinator``: :class:`RemoteGroupCoordinator`, the part of seglog.group.GroupCoordinator the
  Consumer calls (join, sync, heartbeat, leave, commit and fetch offsets) and ``delete_groups``, by
  FindCoordinator and the group APIs; join/sync return already-resolved futures. Coordinator moves
  (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, lost connections) find the
  coordinator again and retry. Heartbeats travel on a connection of their own, so they never queue behind a JoinGroup that waits
  for a rebalance.

Errors are the broker's error codes mapped to seglog exceptions (``errors.for_code``), with the broker's
message when the response carries one. Thread-safety: a RemoteNode may serve a Producer's threads; one
connection per broker serializes requests.
"""

from __future__ import annotations

import contextlib
import itertools
import select
import socket
import struct
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from .client import BrokerConnection, ClusterClient
from .config import KAFKA_NAMES, BrokerConfig, LogConfig
from .errors import (InvalidConfigError, InvalidRequiredAcksError, InvalidTopicError, LeaderNotAvailableError,
                     LogClosedError, MemberIdRequiredError, NetworkError, NotControllerError, OffsetOutOfRangeError,
                     SeglogError, UnknownMemberIdError, UnknownTopicOrPartitionError, for_code)
from .group import JoinedMember, JoinResult, SyncResult
from .log import TimestampOffset
from .node import FetchResult, offsets_topic_config
from .offsets_format import OFFSETS_TOPIC, OffsetAndMetadata, TopicPartition
from .protocol import ApiKey, RequestHeader, encode_request

__all__ = ["RemoteNode", "RemotePartition", "RemoteTopic", "RemoteGroupCoordinator", "RemoteCluster",
           "error_for", "whole_batches", "LATEST", "EARLIEST"]

LATEST, EARLIEST = -1, -2
NO_BATCHES = memoryview(b"")
RESOURCE_TOPIC = 2                      # DescribeConfigs / IncrementalAlterConfigs resource type
CONFIG_SOURCE_TOPIC = 1                 # DescribeConfigs: the value is the topic's own
PROPAGATION_WAIT_S = 10.0               # admin changes: how long to wait for every broker to show them

# Codes after which the request may succeed at the (new) leader once metadata is fresh.
LEADER_MOVED = frozenset({
    3,    # UNKNOWN_TOPIC_OR_PARTITION (a broker that has not heard of a new partition yet)
    5,    # LEADER_NOT_AVAILABLE
    6,    # NOT_LEADER_OR_FOLLOWER
    9,    # REPLICA_NOT_AVAILABLE
    13,   # NETWORK_EXCEPTION
    74,   # FENCED_LEADER_EPOCH
    75,   # UNKNOWN_LEADER_EPOCH
    78,   # OFFSET_NOT_AVAILABLE
})
# Produce also retries these: the batch was not written (or, for 7 and 20, was written and a resend of the
# same bytes is deduplicated by an idempotent producer, as in Kafka).
PRODUCE_RETRIABLE = LEADER_MOVED | {7, 19, 20, 56}
COORDINATOR_MOVED = frozenset({14, 15, 16})   # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR
# OffsetCommit answers that concern the whole group (the broker repeats them for every partition): raised, as
# the in-process coordinator raises them. 22 ILLEGAL_GENERATION, 24 INVALID_GROUP_ID, 25 UNKNOWN_MEMBER_ID,
# 27 REBALANCE_IN_PROGRESS, 30 GROUP_AUTHORIZATION_FAILED, 82 FENCED_INSTANCE_ID.
GROUP_LEVEL = COORDINATOR_MOVED | {22, 24, 25, 27, 30, 82}
MEMBER_ERRORS = frozenset({UnknownMemberIdError.code, 82})  # LeaveGroup: per-member errors (82 FENCED_INSTANCE_ID)

_BATCH_HEAD = struct.Struct(">qi")            # baseOffset, batchLength
_LAST_DELTA = struct.Struct(">i")             # lastOffsetDelta at byte 23 of a v2 batch
_MIN_BATCH = 61


def error_for(code: int, message: str | None = None) -> SeglogError:
    """The seglog exception for a Kafka error code, carrying the broker's message (or the code's name)."""
    cls = for_code(code)
    return cls(message or f"{cls.kafka_name} (error code {code})")


def whole_batches(records) -> tuple[memoryview, int]:
    """The whole record batches at the start of a fetch response's records (a broker may end them with a
    partial batch) and the offset after the last one (-1 when there is none)."""
    view = memoryview(records if records is not None else b"").cast("B")
    pos, next_offset, n = 0, -1, len(view)
    while pos + _MIN_BATCH <= n:
        base, length = _BATCH_HEAD.unpack_from(view, pos)
        end = pos + 12 + length
        if length < _MIN_BATCH - 12 or end > n:
            break
        next_offset = base + _LAST_DELTA.unpack_from(view, pos + 23)[0] + 1
        pos = end
    return view[:pos], next_offset


class RetryDeadline:
    """Retry pacing: exponential backoff from 50 ms to 1 s until `seconds` have passed (since creation or the
    last reset())."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.reset()

    def reset(self) -> None:
        self.end = time.monotonic() + self.seconds
        self.delay = 0.05

    def expired(self) -> bool:
        return time.monotonic() + self.delay > self.end

    def sleep(self) -> None:
        time.sleep(self.delay)
        self.delay = min(self.delay * 2, 1.0)


# -- cluster metadata and routing ------------------------------------------------------------------------------

class RemoteCluster:
    """Metadata, routing and per-broker connections over seglog.client.ClusterClient, thread-safe. Topic
    metadata is cached until :meth:`forget` (or a ``refresh=True`` lookup) asks the brokers again."""

    def __init__(self, bootstrap_servers: str, *, client_id: str, timeout: float = 30.0,
                 retry_timeout: float = 30.0):
        self.client = ClusterClient(bootstrap_servers, client_id=client_id, timeout=timeout)
        self.client_id = client_id
        self.retry_timeout = retry_timeout
        self._lock = threading.RLock()
        self._topics: dict[str, dict] = {}

    # -- metadata -------------------------------------------------------------------------------------------

    def metadata(self, topics: Sequence[str] | None = None, auto_create: bool = False) -> dict:
        """A fresh Metadata response (all topics when None); remembers brokers and the topics it names."""
        with self._lock:
            md = self.client.refresh(None if topics is None else list(topics), allow_auto_create=auto_create)
            for t in md["topics"]:
                if t["error_code"] == 0:
                    self._topics[t["name"]] = t
                else:
                    self._topics.pop(t["name"], None)
            return md

    def topic(self, name: str, *, refresh: bool = False, auto_create: bool = False) -> dict:
        """The Metadata entry of a topic; UnknownTopicOrPartitionError (or the broker's error) if there is
        none. A topic the broker is still creating (LEADER_NOT_AVAILABLE) is waited for briefly."""
        if not refresh:
            t = self._topics.get(name)
            if t is not None:
                return t
        deadline = RetryDeadline(5.0)
        while True:
            md = self.metadata([name], auto_create)
            entry = next((t for t in md["topics"] if t["name"] == name), None)
            code = entry["error_code"] if entry is not None else UnknownTopicOrPartitionError.code
            if code == 0:
                return entry
            if code != LeaderNotAvailableError.code or deadline.expired():
                if code == UnknownTopicOrPartitionError.code:
                    raise UnknownTopicOrPartitionError(f"This server does not host this topic: {name}")
                raise error_for(code, f"topic {name}: {for_code(code).kafka_name}")
            deadline.sleep()

    def forget(self, topic: str | None = None) -> None:
        """Drop cached metadata (of one topic, or all) so the next lookup asks a broker."""
        with self._lock:
            if topic is None:
                self._topics.clear()
            else:
                self._topics.pop(topic, None)

    def partition_metadata(self, topic: str, p: int, *, refresh: bool = False) -> dict:
        t = self.topic(topic, refresh=refresh)
        for pm in t["partitions"]:
            if pm["partition_index"] == p:
                return pm
        if not refresh:
            return self.partition_metadata(topic, p, refresh=True)
        raise UnknownTopicOrPartitionError(f"This server does not host this topic-partition: {topic}-{p}")

    def leader_id(self, topic: str, p: int) -> int:
        """The broker id leading the partition (LeaderNotAvailableError while it has none)."""
        pm = self.partition_metadata(topic, p)
        if pm["leader_id"] < 0 or pm["leader_id"] not in self.client.brokers:
            pm = self.partition_metadata(topic, p, refresh=True)
            if pm["leader_id"] < 0:
                raise LeaderNotAvailableError(f"no leader for {topic}-{p} right now")
        return pm["leader_id"]

    # -- connections ----------------------------------------------------------------------------------------

    def broker(self, broker_id: int) -> BrokerConnection:
        with self._lock:
            return self.client.broker(broker_id)

    def connection(self, host: str, port: int) -> BrokerConnection:
        with self._lock:
            return self.client.connection(host, port)

    def leader(self, topic: str, p: int) -> BrokerConnection:
        return self.broker(self.leader_id(topic, p))

    def any(self) -> BrokerConnection:
        with self._lock:
            return self.client.any()

    def broker_ids(self) -> list[int]:
        """The ids of the brokers in the cluster now (fresh metadata)."""
        self.metadata([])
        return sorted(self.client.brokers)

    def controller_request(self, api: int, body: dict, error_code: Callable[[dict], int]) -> dict:
        """Send an admin request to the controller; NOT_CONTROLLER (`error_code(response)` says 41) or a lost
        controller makes it find the controller again and resend."""
        deadline = RetryDeadline(self.retry_timeout)
        while True:
            try:
                self.metadata([])
                cid = self.client.controller_id
                if cid < 0:
                    raise NotControllerError("the cluster has no controller right now")
                response = self.broker(cid).request(api, body)
                if error_code(response) != NotControllerError.code:
                    return response
                last: SeglogError = NotControllerError(f"broker {cid} is no longer the controller")
            except (NetworkError, NotControllerError) as e:
                last = e
            if deadline.expired():
                raise last
            deadline.sleep()

    # -- offsets --------------------------------------------------------------------------------------------

    def list_offsets(self, tps: Iterable[tuple[str, int]], timestamp: int
                     ) -> dict[TopicPartition, TimestampOffset | None]:
        """ListOffsets at each partition's leader: per partition (offset, timestamp) for `timestamp`
        (LATEST: the high watermark, EARLIEST: the log start offset, else the first record at or after it),
        or None for a partition that does not exist (or, for a timestamp, has no such record)."""
        pending = list(dict.fromkeys(TopicPartition(*tp) for tp in tps))
        out: dict[TopicPartition, TimestampOffset | None] = {}
        deadline = RetryDeadline(self.retry_timeout)
        while pending:
            retry: list[TopicPartition] = []
            last: SeglogError | None = None
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in pending:
                try:
                    by_leader.setdefault(self.leader_id(*tp), []).append(tp)
                except UnknownTopicOrPartitionError:
                    out[tp] = None
                except (LeaderNotAvailableError, NetworkError) as e:
                    retry.append(tp)
                    last = e
            for leader, group in by_leader.items():
                topics: dict[str, list] = {}
                for tp in group:
                    topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "timestamp": timestamp,
                                                            "current_leader_epoch": -1})
                body = {"replica_id": -1, "isolation_level": 0,
                        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                try:
                    response = self.broker(leader).request(ApiKey.LIST_OFFSETS, body)
                except NetworkError as e:
                    retry.extend(group)
                    last = e
                    continue
                answered = set()
                for t in response["topics"]:
                    for p in t["partitions"]:
                        tp = TopicPartition(t["name"], p["partition_index"])
                        answered.add(tp)
                        code = p["error_code"]
                        if code == 0:
                            out[tp] = None if p["offset"] < 0 else TimestampOffset(p["offset"], p["timestamp"])
                        elif code in LEADER_MOVED:
                            retry.append(tp)
                            last = error_for(code, f"{tp.topic}-{tp.partition}: {for_code(code).kafka_name}")
                        else:
                            raise error_for(code, f"ListOffsets of {tp.topic}-{tp.partition}: "
                                                  f"{for_code(code).kafka_name}")
                retry.extend(tp for tp in group if tp not in answered)
            if not retry:
                break
            if deadline.expired():
                raise last or LeaderNotAvailableError(f"no answer for {retry[0].topic}-{retry[0].partition}")
            deadline.sleep()
            for topic in {tp.topic for tp in retry}:
                self.forget(topic)
            pending = retry
        return out

    def close(self) -> None:
        with self._lock:
            self.client.close()


# -- the Node surface -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RemoteTopic:
    """A topic as Metadata describes it (what the clients read of a seglog.node.TopicInfo)."""
    name: str
    partitions: int
    internal: bool = False


class RemoteLog:
    """The part of a partition's Log a consumer reads remotely: time lookups (ListOffsets by timestamp)."""

    def __init__(self, partition: "RemotePartition"):
        self._partition = partition

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The first record with a timestamp >= `timestamp` (ms) below the high watermark, or None."""
        if timestamp < 0:
            raise ValueError(f"timestamp must be >= 0, not {timestamp}")
        p = self._partition
        return p.node.cluster.list_offsets([(p.topic, p.index)], timestamp)[(p.topic, p.index)]


class RemotePartition:
    """A topic partition behind its leader: produce, fetch and offsets (see the module docstring)."""

    def __init__(self, node: "RemoteNode", topic: str, index: int):
        self.node = node
        self.topic = topic
        self.index = index
        self.log = RemoteLog(self)

    def __repr__(self):
        return f"RemotePartition({self.topic!r}, {self.index})"

    def _offset(self, timestamp: int) -> int:
        found = self.node.cluster.list_offsets([(self.topic, self.index)], timestamp)[(self.topic, self.index)]
        if found is None:
            raise UnknownTopicOrPartitionError(f"This server does not host this topic-partition: "
                                               f"{self.topic}-{self.index}")
        return found.offset

    @property
    def high_watermark(self) -> int:
        return self._offset(LATEST)

    @property
    def log_start_offset(self) -> int:
        return self._offset(EARLIEST)

    @property
    def log_end_offset(self) -> int:
        """The high watermark: the leader's log end offset is not visible to clients."""
        return self._offset(LATEST)

    def append(self, batch, acks: int = -1) -> tuple[int, int, int]:
        """Produce one record batch (as seglog.Producer builds it) to the leader: (base offset, last offset,
        log append time or -1). acks=0 returns (-1, -1, -1): the broker does not answer."""
        if acks not in (-1, 0, 1):
            raise InvalidRequiredAcksError(f"acks must be -1 (all), 0 or 1, not {acks}")
        data = bytes(batch)
        if len(data) < _MIN_BATCH:
            raise error_for(87, f"a record batch has at least {_MIN_BATCH} bytes, not {len(data)}")
        last_delta = _LAST_DELTA.unpack_from(data, 23)[0]
        body = {"transactional_id": None, "acks": acks, "timeout_ms": self.node.request_timeout_ms,
                "topic_data": [{"name": self.topic, "partition_data": [{"index": self.index, "records": data}]}]}
        if acks == 0:
            self.node._send_one_way(self.topic, self.index, body)
            return -1, -1, -1
        cluster = self.node.cluster
        deadline = RetryDeadline(self.node.retry_timeout)
        while True:
            try:
                response = cluster.leader(self.topic, self.index).request(
                    ApiKey.PRODUCE, body, extra_timeout=self.node.request_timeout_ms / 1000)
                pr = response["responses"][0]["partition_responses"][0]
                code = pr["error_code"]
                if code == 0:
                    base = pr["base_offset"]
                    return base, base + last_delta, pr["log_append_time_ms"]
                err = error_for(code, pr.get("error_message"))
            except (NetworkError, LeaderNotAvailableError) as e:
                err = e
            if err.code not in PRODUCE_RETRIABLE or deadline.expired():
                raise err
            deadline.sleep()
            try:
                cluster.topic(self.topic, refresh=True)      # UnknownTopicOrPartitionError: it is gone
            except NetworkError:
                cluster.forget(self.topic)                   # no broker answered: try again next round

    def fetch(self, offset: int, max_bytes: int, *, committed_only: bool = True,
              min_one: bool = True) -> FetchResult:
        """Whole batches from `offset` (below the high watermark: a client fetch is a consumer fetch), at
        most about `max_bytes` (at least one batch). Does not wait. OffsetOutOfRangeError outside the log;
        an empty result while the leader is moving (the metadata is refreshed for the next try)."""
        return self.node._fetch(self, offset, max_bytes)


class RemoteNode:
    """The Node surface seglog.Producer and seglog.Consumer use, over a broker (see the module docstring).
    ``retry_timeout``: how long leader and coordinator moves are retried before their error is raised."""

    def __init__(self, bootstrap_servers: str, *, client_id: str = "seglog", timeout: float = 30.0,
                 retry_timeout: float = 30.0, request_timeout_ms: int = 30000,
                 cluster: RemoteCluster | None = None):
        self.cluster = cluster or RemoteCluster(bootstrap_servers, client_id=client_id, timeout=timeout,
                                                retry_timeout=retry_timeout)
        self.client_id = client_id
        self.retry_timeout = retry_timeout
        self.request_timeout_ms = request_timeout_ms
        self._partitions: dict[tuple[str, int], RemotePartition] = {}
        self._coordinator: RemoteGroupCoordinator | None = None
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._version = 0
        self._idle: dict[tuple[str, int], tuple[int, int]] = {}         # empty fetches since the last wait
        self._prefetched: dict[tuple[str, int], tuple[int, FetchResult]] = {}
        self._one_way: dict[int, _OneWaySocket] = {}

    def __repr__(self):
        return f"RemoteNode({self.cluster.client.bootstrap!r})"

    # -- topics ---------------------------------------------------------------------------------------------

    @staticmethod
    def _topic(entry: dict) -> RemoteTopic:
        return RemoteTopic(entry["name"], len(entry["partitions"]), bool(entry.get("is_internal")))

    def topic(self, name: str) -> RemoteTopic:
        """The topic (fresh metadata); UnknownTopicOrPartitionError if it does not exist."""
        return self._topic(self.cluster.topic(name, refresh=True))

    def ensure_topic(self, name: str) -> RemoteTopic:
        """The topic, auto-created by the broker if it allows that (as Kafka clients' metadata requests do)."""
        return self._topic(self.cluster.topic(name, auto_create=True))

    def topics(self, include_internal: bool = False) -> list[str]:
        md = self.cluster.metadata(None)
        return sorted(t["name"] for t in md["topics"]
                      if t["error_code"] == 0 and (include_internal or not t.get("is_internal")))

    # -- topic administration (Kafka's admin requests; each waits until every broker's metadata shows the
    #    change, so the next call sees it whichever broker it asks) ------------------------------------------

    def create_topic(self, name: str, partitions: int | None = None, config: Mapping[str, object] | None = None,
                     replication_factor: int | None = None) -> RemoteTopic:
        """CreateTopics at the controller; None means the broker's default (num.partitions,
        default.replication.factor). Raises what Node.create_topic raises (InvalidTopicError,
        TopicAlreadyExistsError, InvalidPartitionsError, InvalidReplicationFactorError, InvalidConfigError)."""
        self._check_open()
        body = {"topics": [{"name": name, "num_partitions": -1 if partitions is None else partitions,
                            "replication_factor": -1 if replication_factor is None else replication_factor,
                            "assignments": [],
                            "configs": [{"name": k, "value": str(v)} for k, v in (config or {}).items()]}],
                "timeout_ms": self.request_timeout_ms, "validate_only": False}
        r = self.cluster.controller_request(ApiKey.CREATE_TOPICS, body, lambda r: r["topics"][0]["error_code"])
        [res] = r["topics"]
        if res["error_code"]:
            raise error_for(res["error_code"], res["error_message"])
        self._await_everywhere(name, lambda t: t is not None and bool(t["partitions"]) and
                               all(p["leader_id"] >= 0 for p in t["partitions"]))
        return self.topic(name)

    def create_partitions(self, name: str, total: int) -> RemoteTopic:
        """CreatePartitions at the controller: grow to `total` (InvalidPartitionsError if that is not more)."""
        self._check_open()
        body = {"topics": [{"name": name, "count": total, "assignments": None}],
                "timeout_ms": self.request_timeout_ms, "validate_only": False}
        r = self.cluster.controller_request(ApiKey.CREATE_PARTITIONS, body, lambda r: r["results"][0]["error_code"])
        [res] = r["results"]
        if res["error_code"]:
            raise error_for(res["error_code"], res["error_message"])
        self._await_everywhere(name, lambda t: t is not None and len(t["partitions"]) >= total and
                               all(p["leader_id"] >= 0 for p in t["partitions"]))
        return self.topic(name)

    def alter_topic_config(self, name: str, set_: Mapping[str, object] | None = None,
                           delete: Sequence[str] = (), *, validate_only: bool = False) -> RemoteTopic:
        """IncrementalAlterConfigs: set and remove config overrides of a topic in one step (removed ones fall
        back to the broker default). InvalidConfigError for unknown names or bad values: nothing changes."""
        self._check_open()
        set_ = {k: str(v) for k, v in (set_ or {}).items()}
        both = sorted(set(set_) & set(delete))
        if both:
            raise InvalidConfigError(f"config {', '.join(both)} is both set and deleted")
        configs = ([{"name": k, "config_operation": 0, "value": v} for k, v in set_.items()]
                   + [{"name": k, "config_operation": 1, "value": None} for k in dict.fromkeys(delete)])
        body = {"resources": [{"resource_type": RESOURCE_TOPIC, "resource_name": name, "configs": configs}],
                "validate_only": validate_only}
        r = self.cluster.any().request(ApiKey.INCREMENTAL_ALTER_CONFIGS, body)
        [res] = r["responses"]
        if res["error_code"]:
            raise error_for(res["error_code"], res["error_message"])
        if not validate_only:
            wanted = {k: _config_text(k, v) for k, v in set_.items()}
            kept = set(offsets_topic_config(BrokerConfig())) if name == OFFSETS_TOPIC else set()

            def applied(overrides: dict[str, str]) -> bool:     # (the offsets topic keeps its creation configs)
                return (all(overrides.get(k) == v for k, v in wanted.items())
                        and not any(k in overrides for k in delete if k not in kept))
            self._await_brokers(lambda b: applied(self.topic_config(name, broker=b)[0]))
        return self.topic(name)

    def delete_topic(self, name: str) -> None:
        """DeleteTopics at the controller. TopicDeletionDisabledError, UnknownTopicOrPartitionError,
        InvalidTopicError (internal topics, refused before asking as kafka-topics.sh does)."""
        self._check_open()
        entry = self.cluster.topic(name, refresh=True)
        if entry.get("is_internal"):
            raise InvalidTopicError(f"The internal topic {name} cannot be deleted")
        body = {"topic_names": [name], "timeout_ms": self.request_timeout_ms}
        r = self.cluster.controller_request(ApiKey.DELETE_TOPICS, body, lambda r: r["responses"][0]["error_code"])
        [res] = r["responses"]
        if res["error_code"]:
            raise error_for(res["error_code"], f"deleting topic {name} failed: "
                                               f"{for_code(res['error_code']).kafka_name}")
        self._await_everywhere(name, lambda t: t is None)
        for key in [k for k in self._partitions if k[0] == name]:
            self._partitions.pop(key, None)

    def topic_config(self, name: str, *, broker: int | None = None) -> tuple[dict[str, str], dict[str, str]]:
        """DescribeConfigs of a topic (at `broker`, or any): (its overrides, every config in effect)."""
        body = {"resources": [{"resource_type": RESOURCE_TOPIC, "resource_name": name, "configuration_keys": None}],
                "include_synonyms": False, "include_documentation": False}
        conn = self.cluster.any() if broker is None else self.cluster.broker(broker)
        r = conn.request(ApiKey.DESCRIBE_CONFIGS, body)
        [res] = r["results"]
        if res["error_code"]:
            raise error_for(res["error_code"], res["error_message"])
        overrides, effective = {}, {}
        for c in res["configs"]:
            if c["value"] is None:                          # sensitive: never shown
                continue
            effective[c["name"]] = c["value"]
            source = c["config_source"]
            if source == CONFIG_SOURCE_TOPIC or source == -1 and not c["is_default"]:   # v0 has no source
                overrides[c["name"]] = c["value"]
        return overrides, effective

    def _await_everywhere(self, name: str, done) -> bool:
        """Wait until every broker's metadata for topic `name` satisfies done(entry or None) (see
        _await_brokers)."""
        self.cluster.forget(name)
        return self._await_brokers(lambda b: done(self._topic_at(b, name)))

    def _await_brokers(self, ok: Callable[[int], bool]) -> bool:
        """Wait until ok(broker_id) holds for every broker; give up quietly after PROPAGATION_WAIT_S (the change
        is made; brokers catch up on their own). A broker unreachable for a moment is asked again."""
        end = time.monotonic() + PROPAGATION_WAIT_S
        while True:
            with contextlib.suppress(NetworkError):
                if all(ok(b) for b in self.cluster.broker_ids()):
                    return True
            if time.monotonic() >= end:
                return False
            time.sleep(0.05)

    def _topic_at(self, broker_id: int, name: str) -> dict | None:
        r = self.cluster.broker(broker_id).request(ApiKey.METADATA, {"topics": [{"name": name}],
                                                                      "allow_auto_topic_creation": False})
        entry = next((t for t in r["topics"] if t["name"] == name), None)
        return entry if entry is not None and entry["error_code"] == 0 else None

    def partition(self, topic: str, index: int) -> RemotePartition:
        """The partition; UnknownTopicOrPartitionError for an unknown topic or partition number."""
        part = self._partitions.get((topic, index))
        if part is None:
            self._check_open()
            self.cluster.partition_metadata(topic, index)
            part = self._partitions.setdefault((topic, index), RemotePartition(self, topic, index))
        return part

    # -- producers ------------------------------------------------------------------------------------------

    def init_producer_id(self) -> int:
        """A producer id from the cluster (InitProducerId without a transactional id)."""
        self._check_open()
        deadline = RetryDeadline(self.retry_timeout)
        while True:
            try:
                r = self.cluster.any().request(ApiKey.INIT_PRODUCER_ID, {"transactional_id": None,
                                                                         "transaction_timeout_ms": 60000})
                if r["error_code"] == 0:
                    return r["producer_id"]
                err = error_for(r["error_code"], "InitProducerId failed")
            except NetworkError as e:
                err = e
            if not err.retriable or deadline.expired():
                raise err
            deadline.sleep()

    def _send_one_way(self, topic: str, index: int, body: dict) -> None:
        leader = self.cluster.leader_id(topic, index)
        with self._lock:
            sock = self._one_way.get(leader)
            if sock is None:
                conn = self.cluster.broker(leader)
                sock = self._one_way[leader] = _OneWaySocket(conn.host, conn.port, self.client_id,
                                                             conn.version(ApiKey.PRODUCE))
        sock.send(body)

    # -- fetching -------------------------------------------------------------------------------------------

    def _fetch(self, part: RemotePartition, offset: int, max_bytes: int) -> FetchResult:
        key = (part.topic, part.index)
        cached = self._prefetched.pop(key, None)
        if cached is not None and cached[0] == offset:
            self._idle.pop(key, None)
            self._version += 1
            return cached[1]
        self._check_open()
        try:
            conn = self.cluster.leader(*key)
        except (LeaderNotAvailableError, NetworkError):
            self._idle.pop(key, None)
            return FetchResult(NO_BATCHES, -1, -1, -1)
        body = _fetch_body({key: (offset, max_bytes)}, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes)
        try:
            response = conn.request(ApiKey.FETCH, body)
        except NetworkError:
            self.cluster.forget(part.topic)
            self._idle.pop(key, None)
            return FetchResult(NO_BATCHES, -1, -1, -1)
        _check_fetch_response(response)
        for topic, p in _fetch_partitions(response):
            if (topic, p["partition_index"]) != key:
                continue
            result = self._result(key, offset, p)
            if result is None:                                  # the leader moved: fresh metadata next time
                self._idle.pop(key, None)
                return FetchResult(NO_BATCHES, -1, -1, -1)
            if result.next_offset < 0:
                self._idle[key] = (offset, max_bytes)
            else:
                self._idle.pop(key, None)
                self._version += 1
            return result
        raise error_for(UnknownTopicOrPartitionError.code, f"the fetch response has no {part.topic}-{part.index}")

    def _result(self, key: tuple[str, int], offset: int, p: dict) -> FetchResult | None:
        """A partition of a fetch response as a FetchResult; None when the leader moved (metadata dropped)."""
        code = p["error_code"]
        if code == OffsetOutOfRangeError.code:
            raise OffsetOutOfRangeError(offset=offset, start=p["log_start_offset"], end=p["high_watermark"],
                                        what=f"{key[0]}-{key[1]}")
        if code in LEADER_MOVED:
            self.cluster.forget(key[0])
            return None
        if code:
            raise error_for(code, f"fetch of {key[0]}-{key[1]}: {for_code(code).kafka_name}")
        view, next_offset = whole_batches(p["records"])
        hw = p["high_watermark"]
        return FetchResult(view, hw, p["log_start_offset"], hw, next_offset, crc_checked=False)

    def data_version(self) -> int:
        """Grows whenever a fetch brought records (or a long poll found some)."""
        return self._version

    def wait_for_data(self, since_version: int, timeout: float) -> bool:
        """Wait up to `timeout` s for records in the partitions whose last fetch came back empty: one long
        poll per leader (the timeout shared among them). True when something arrived."""
        if self._version != since_version:
            return True
        idle, self._idle = self._idle, {}
        if not idle or self._closed.is_set():
            self._closed.wait(max(0.0, timeout))
            return self._version != since_version
        by_leader: dict[int, dict] = {}
        try:
            for key, want in idle.items():
                by_leader.setdefault(self.cluster.leader_id(*key), {})[key] = want
        except SeglogError:
            return True                           # let the next fetch meet (and handle) the moved leader
        share = max(0.0, timeout) / len(by_leader)
        got = False
        for leader, wanted in by_leader.items():
            wait_ms = int(share * 1000)
            body = _fetch_body(wanted, max_wait_ms=wait_ms, min_bytes=1,
                               max_bytes=max(m for _, m in wanted.values()))
            try:
                response = self.cluster.broker(leader).request(ApiKey.FETCH, body, extra_timeout=share)
                _check_fetch_response(response)
            except SeglogError:
                return True
            for topic, p in _fetch_partitions(response):
                key = (topic, p["partition_index"])
                if key not in wanted:
                    continue
                offset = wanted[key][0]
                if p["error_code"]:
                    got = True                    # the next fetch raises or retries it
                    continue
                view, next_offset = whole_batches(p["records"])
                if next_offset >= 0:
                    hw = p["high_watermark"]
                    self._prefetched[key] = (offset, FetchResult(view, hw, p["log_start_offset"], hw, next_offset,
                                                                      crc_checked=False))
                    got = True
            if got:
                break
        if got:
            self._version += 1
        return got

    # -- groups ---------------------------------------------------------------------------------------------

    @property
    def group_coordinator(self) -> "RemoteGroupCoordinator":
        self._check_open()
        with self._lock:
            if self._coordinator is None:
                self._coordinator = RemoteGroupCoordinator(self.cluster, retry_timeout=self.retry_timeout)
            return self._coordinator

    # -- lifecycle ------------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise LogClosedError("the connection to the cluster is closed")

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        """Close every connection. Idempotent."""
        self._closed.set()
        with self._lock:
            socks, self._one_way = list(self._one_way.values()), {}
            coord = self._coordinator
        for s in socks:
            s.close()
        if coord is not None:
            coord.close()
        self.cluster.close()

    def __enter__(self) -> "RemoteNode":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _config_text(name: str, value: str) -> str:
    """How a broker reports a topic config value it accepted (seglog normalizes lists and numbers)."""
    if name not in KAFKA_NAMES:
        return value
    try:
        return LogConfig.from_kafka({name: value}).to_kafka()[name]
    except SeglogError:
        return value


def _fetch_body(wanted: Mapping[tuple[str, int], tuple[int, int]], *, max_wait_ms: int, min_bytes: int,
                max_bytes: int) -> dict:
    topics: dict[str, list] = {}
    for (topic, p), (offset, part_max) in wanted.items():
        topics.setdefault(topic, []).append({"partition": p, "current_leader_epoch": -1, "fetch_offset": offset,
                                             "log_start_offset": -1, "partition_max_bytes": part_max})
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
            "max_bytes": max(max_bytes, 1), "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()], "forgotten_topics_data": [],
            "rack_id": ""}


def _check_fetch_response(response: dict) -> None:
    if response.get("error_code"):
        raise error_for(response["error_code"], "fetch refused")


def _fetch_partitions(response: dict):
    for t in response["responses"]:
        for p in t["partitions"]:
            yield t["topic"], p


class _OneWaySocket:
    """A connection for acks=0 Produce requests, which get no response: send and forget. A broker closes it
    after a failed acks=0 request (Kafka's way to tell the client); it is reopened before the next send."""

    def __init__(self, host: str, port: int, client_id: str, version: int):
        self.host, self.port, self.client_id, self.version = host, port, client_id, version
        self._sock: socket.socket | None = None
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def send(self, body: dict) -> None:
        with self._lock:
            header = RequestHeader(ApiKey.PRODUCE, self.version, next(self._ids), self.client_id)
            data = b"".join(bytes(part) for part in encode_request(header, body))
            sock = self._sock
            if sock is not None and select.select([sock], [], [], 0)[0]:
                self.close()                     # readable = closed by the broker: nothing else ever arrives
                sock = None
            try:
                if sock is None:
                    sock = self._sock = socket.create_connection((self.host, self.port), timeout=30)
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.sendall(data)
            except OSError as e:
                self.close()
                raise NetworkError(f"{self.host}:{self.port}: {e}") from None
            except BaseException:
                self.close()                     # interrupted mid-frame: the stream is out of step
                raise

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass


# -- groups -----------------------------------------------------------------------------------------------------

def _resolved(value=None, error: BaseException | None = None) -> Future:
    fut: Future = Future()
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(value)
    return fut


class RemoteGroupCoordinator:
    """The GroupCoordinator calls seglog.Consumer makes, as requests to the group's coordinator broker (found
    with FindCoordinator), plus the describe/list calls the CLI needs. Errors are raised as the in-process
    coordinator raises them; join/sync results come as already-resolved futures."""

    def __init__(self, cluster: RemoteCluster, *, retry_timeout: float = 30.0):
        self.cluster = cluster
        self.retry_timeout = retry_timeout
        self._coordinators: dict[str, tuple[int, str, int]] = {}
        self._side_conns: dict[tuple[str, int], BrokerConnection] = {}
        self._rebalance_s: dict[str, float] = {}
        self._lock = threading.Lock()

    # -- finding the coordinator ------------------------------------------------------------------------------

    def coordinator(self, group_id: str) -> tuple[int, str, int]:
        """(broker id, host, port) of the group's coordinator; retries while none is available."""
        found = self._coordinators.get(group_id)
        if found is not None:
            return found
        deadline = RetryDeadline(self.retry_timeout)
        while True:
            try:
                r = self.cluster.any().request(ApiKey.FIND_COORDINATOR, {"key": group_id, "key_type": 0})
                code = r["error_code"]
                if code == 0:
                    found = (r["node_id"], r["host"], r["port"])
                    self._coordinators[group_id] = found
                    return found
                err = error_for(code, r.get("error_message") or f"FindCoordinator for group {group_id!r}: "
                                                                 f"{for_code(code).kafka_name}")
                if code not in COORDINATOR_MOVED:
                    raise err
            except NetworkError as e:
                err = e
            if deadline.expired():
                raise err
            deadline.sleep()

    def _forget(self, group_id: str) -> None:
        self._coordinators.pop(group_id, None)

    def _connection(self, group_id: str, side: bool) -> BrokerConnection:
        _, host, port = self.coordinator(group_id)
        if not side:
            return self.cluster.connection(host, port)
        with self._lock:
            conn = self._side_conns.get((host, port))
            if conn is None:
                conn = self._side_conns[(host, port)] = BrokerConnection(
                    host, port, client_id=self.cluster.client_id, timeout=self.cluster.client.timeout)
            return conn

    def request(self, group_id: str, api: int, body: dict, error_code: Callable[[dict], int], *,
                extra_timeout: float = 0.0, side: bool = False, retry: bool = True) -> dict:
        """Send a group request to the coordinator and return the response; coordinator moves and lost
        connections find it again and resend (unless ``retry`` is False: heartbeats, whose next one comes soon
        anyway). ``side``: on the side connection to the coordinator (heartbeats, LeaveGroup), which a
        JoinGroup or SyncGroup waiting for its answer on the main one does not hold up."""
        deadline = RetryDeadline(self.retry_timeout if retry else 0.0)
        while True:
            try:
                response = self._connection(group_id, side).request(api, body, extra_timeout=extra_timeout)
                code = error_code(response)
                if code not in COORDINATOR_MOVED:
                    return response
                err: SeglogError = error_for(code, f"group {group_id!r}: {for_code(code).kafka_name}")
            except NetworkError as e:
                err = e
            self._forget(group_id)
            if deadline.expired():
                raise err
            deadline.sleep()

    # -- membership -----------------------------------------------------------------------------------------

    def join_group(self, group_id: str, member_id: str, protocol_type: str,
                   protocols: Sequence[tuple[str, bytes]], session_timeout_ms: int,
                   rebalance_timeout_ms: int | None = None, *, group_instance_id: str | None = None,
                   client_id: str = "", client_host: str = "", require_known_member_id: bool = False) -> Future:
        """JoinGroup; the future holds the JoinResult or the error (MemberIdRequiredError with the
        ``member_id`` to rejoin with). The client id travels in the request header (the node's client_id);
        the host is the one the broker sees."""
        rebalance_ms = session_timeout_ms if rebalance_timeout_ms is None else rebalance_timeout_ms
        self._rebalance_s[group_id] = rebalance_ms / 1000
        body = {"group_id": group_id, "session_timeout_ms": session_timeout_ms, "rebalance_timeout_ms": rebalance_ms,
                "member_id": member_id, "group_instance_id": group_instance_id, "protocol_type": protocol_type,
                "protocols": [{"name": name, "metadata": bytes(meta)} for name, meta in protocols]}
        try:
            r = self.request(group_id, ApiKey.JOIN_GROUP, body, lambda r: r["error_code"],
                             extra_timeout=rebalance_ms / 1000)
        except SeglogError as e:
            return _resolved(error=e)
        code = r["error_code"]
        if code:
            err = error_for(code, f"JoinGroup of group {group_id!r}: {for_code(code).kafka_name}")
            if isinstance(err, MemberIdRequiredError):
                err.member_id = r["member_id"]
            return _resolved(error=err)
        members = tuple(JoinedMember(m["member_id"], m["group_instance_id"], bytes(m["metadata"]))
                        for m in r["members"])
        return _resolved(JoinResult(r["member_id"], r["generation_id"], protocol_type, r["protocol_name"],
                                    r["leader"], members))

    def sync_group(self, group_id: str, generation_id: int, member_id: str,
                   assignments: Mapping[str, bytes] | None = None, *, group_instance_id: str | None = None,
                   protocol_type: str | None = None, protocol_name: str | None = None) -> Future:
        """SyncGroup; the future holds the SyncResult (this member's assignment bytes) or the error."""
        body = {"group_id": group_id, "generation_id": generation_id, "member_id": member_id,
                "group_instance_id": group_instance_id,
                "assignments": [{"member_id": m, "assignment": bytes(a)} for m, a in (assignments or {}).items()]}
        try:
            r = self.request(group_id, ApiKey.SYNC_GROUP, body, lambda r: r["error_code"],
                             extra_timeout=self._rebalance_s.get(group_id, 60.0))
        except SeglogError as e:
            return _resolved(error=e)
        if r["error_code"]:
            return _resolved(error=error_for(r["error_code"], f"SyncGroup of group {group_id!r}: "
                                                              f"{for_code(r['error_code']).kafka_name}"))
        return _resolved(SyncResult(protocol_type or "", protocol_name or "", bytes(r["assignment"])))

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, *,
                  group_instance_id: str | None = None) -> None:
        """Heartbeat (on the side connection); raises RebalanceInProgressError, IllegalGenerationError,
        UnknownMemberIdError ... as the in-process coordinator does."""
        r = self.request(group_id, ApiKey.HEARTBEAT, {"group_id": group_id, "generation_id": generation_id,
                                                      "member_id": member_id, "group_instance_id": group_instance_id},
                         lambda r: r["error_code"], side=True, retry=False)
        if r["error_code"]:
            raise error_for(r["error_code"], f"Heartbeat of {member_id} in group {group_id!r}: "
                                             f"{for_code(r['error_code']).kafka_name}")

    def leave_group(self, group_id: str, members: Sequence[tuple[str, str | None]]) -> list[SeglogError | None]:
        """LeaveGroup (one request per member: versions 0-2 carry one); per member None or its error. Sent on
        the side connection: a member leaving while its JoinGroup waits leaves at once (the coordinator then
        answers that JoinGroup with UNKNOWN_MEMBER_ID)."""
        out: list[SeglogError | None] = []
        for member_id, _instance_id in members:
            r = self.request(group_id, ApiKey.LEAVE_GROUP, {"group_id": group_id, "member_id": member_id},
                             lambda r: r["error_code"], side=True)
            code = r["error_code"]
            if code and code not in MEMBER_ERRORS:
                raise error_for(code, f"LeaveGroup of group {group_id!r}: {for_code(code).kafka_name}")
            out.append(error_for(code, f"member {member_id} is not in group {group_id!r}") if code else None)
        return out

    # -- offsets --------------------------------------------------------------------------------------------

    def commit_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], OffsetAndMetadata | int],
                       generation_id: int = -1, member_id: str = "", *,
                       group_instance_id: str | None = None) -> dict[TopicPartition, SeglogError | None]:
        """OffsetCommit: per partition None or its error. A group-level refusal (the broker answers every
        partition with ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS ...) is raised,
        as the in-process coordinator raises it. Generation -1 / member "" is a simple commit."""
        topics: dict[str, list] = {}
        wanted = []
        for tp, om in offsets.items():
            tp = TopicPartition(*tp)
            if not isinstance(om, OffsetAndMetadata):
                om = OffsetAndMetadata(int(om))
            wanted.append(tp)
            topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "committed_offset": om.offset,
                                                    "committed_leader_epoch": om.leader_epoch,
                                                    "committed_metadata": om.metadata})
        if not wanted:
            return {}
        body = {"group_id": group_id, "generation_id_or_member_epoch": generation_id, "member_id": member_id,
                "group_instance_id": group_instance_id, "retention_time_ms": -1,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

        def codes(r: dict) -> list[int]:
            return [p["error_code"] for t in r["topics"] for p in t["partitions"]]

        def common(r: dict) -> int:
            c = codes(r)
            return c[0] if c and all(x == c[0] for x in c) else 0

        r = self.request(group_id, ApiKey.OFFSET_COMMIT, body, common)
        code = common(r)
        if code in GROUP_LEVEL:
            raise error_for(code, f"OffsetCommit of group {group_id!r}: {for_code(code).kafka_name}")
        out: dict[TopicPartition, SeglogError | None] = dict.fromkeys(wanted)
        for t in r["topics"]:
            for p in t["partitions"]:
                c = p["error_code"]
                where = f"{t['name']}-{p['partition_index']}"
                out[TopicPartition(t["name"], p["partition_index"])] = \
                    error_for(c, f"commit of {where}: {for_code(c).kafka_name}") if c else None
        return out

    def fetch_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None
                      ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """OffsetFetch: committed offsets of `partitions` (None where there is none), or of every committed
        partition of the group when `partitions` is None."""
        wanted = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        if wanted is None:
            topics = None
        else:
            by_topic: dict[str, list[int]] = {}
            for tp in wanted:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]

        def code_of(r: dict) -> int:
            if r.get("error_code"):
                return r["error_code"]
            c = [p["error_code"] for t in r["topics"] for p in t["partitions"]]
            return c[0] if c and all(x == c[0] for x in c) else 0

        r = self.request(group_id, ApiKey.OFFSET_FETCH, {"group_id": group_id, "topics": topics}, code_of)
        code = code_of(r)
        if code:
            raise error_for(code, f"OffsetFetch of group {group_id!r}: {for_code(code).kafka_name}")
        out: dict[TopicPartition, OffsetAndMetadata | None] = {} if wanted is None else dict.fromkeys(wanted)
        for t in r["topics"]:
            for p in t["partitions"]:
                tp = TopicPartition(t["name"], p["partition_index"])
                if p["error_code"]:
                    raise error_for(p["error_code"], f"OffsetFetch of {tp.topic}-{tp.partition} in group "
                                                     f"{group_id!r}: {for_code(p['error_code']).kafka_name}")
                if p["committed_offset"] >= 0:
                    out[tp] = OffsetAndMetadata(p["committed_offset"], p["committed_leader_epoch"],
                                                p["metadata"] or "")
                elif wanted is not None:
                    out[tp] = None
        return out

    # -- administration -----------------------------------------------------------------------------------

    def describe_group(self, group_id: str) -> tuple[dict, tuple[int, str, int]]:
        """The DescribeGroups entry of one group and the coordinator (id, host, port) that answered."""
        r = self.request(group_id, ApiKey.DESCRIBE_GROUPS, {"groups": [group_id]},
                         lambda r: r["groups"][0]["error_code"] if r["groups"] else 0)
        [entry] = r["groups"]
        if entry["error_code"]:
            raise error_for(entry["error_code"], f"DescribeGroups of group {group_id!r}: "
                                                 f"{for_code(entry['error_code']).kafka_name}")
        return entry, self.coordinator(group_id)

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, SeglogError | None]:
        """DeleteGroups at each group's coordinator: per group None (deleted, with its offsets) or its error
        (GroupIdNotFoundError, NonEmptyGroupError), as the in-process coordinator answers."""
        out: dict[str, SeglogError | None] = {}
        for gid in dict.fromkeys(group_ids):
            def code_of(r: dict, gid=gid) -> int:
                return next(e["error_code"] for e in r["results"] if e["group_id"] == gid)
            code = code_of(self.request(gid, ApiKey.DELETE_GROUPS, {"groups_names": [gid]}, code_of))
            out[gid] = error_for(code, f"DeleteGroups of group {gid!r}: {for_code(code).kafka_name}") if code else None
        return out

    def close(self) -> None:
        with self._lock:
            conns, self._side_conns = list(self._side_conns.values()), {}
        for c in conns:
            c.close()


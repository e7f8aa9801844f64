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
* ``txn_coordinator``: :class:`RemoteTxnCoordinator`, the transaction coordinator calls of a transactional
  Producer (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn) and of the CLI (DescribeTransactions,
  ListTransactions), at the transactional id's coordinator (FindCoordinator key_type 1).
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
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from . import _engine, wire_fetch
from .client import EARLIEST, LATEST, LEADER_MOVED, BrokerConnection, ClusterClient, RetryDeadline, error_for
from .config import KAFKA_NAMES, BrokerConfig, LogConfig
from .errors import (InvalidConfigError, InvalidRequiredAcksError, InvalidTopicError, LeaderNotAvailableError,
                     LogClosedError, NetworkError, NotControllerError, OffsetOutOfRangeError, SeglogError,
                     UnknownTopicOrPartitionError, for_code)
from .log import TimestampOffset
from .node import FetchResult, internal_topic_config
from .offsets_format import partitions_by_topic
from .protocol import ApiKey
from .security.client import ClientSecurity
from .remote_group import RemoteGroupCoordinator
from .remote_txn import RemoteTxnCoordinator
from .wire_fetch import NO_BATCHES, Fetched, Position

__all__ = ["RemoteNode", "RemotePartition", "RemoteTopic", "RemoteGroupCoordinator"]

RESOURCE_TOPIC = 2                      # DescribeConfigs / IncrementalAlterConfigs resource type
CONFIG_SOURCE_TOPIC = 1                 # DescribeConfigs: the value is the topic's own
PROPAGATION_WAIT_S = 10.0               # admin changes: how long to wait for every broker to show them

# Produce also retries these: the batch was not written (or, for 7 and 20, was written and a resend of the
# same bytes is deduplicated by an idempotent producer, as in Kafka).
PRODUCE_RETRIABLE = LEADER_MOVED | {7, 19, 20, 56}



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

    def append(self, batch, acks: int = -1, transactional_id: str | None = None) -> tuple[int, int, int]:
        """Produce one record batch (as seglog.Producer builds it) to the leader: (base offset, last offset,
        log append time or -1). acks=0 returns (-1, -1, -1): the broker does not answer."""
        if acks not in (-1, 0, 1):
            raise InvalidRequiredAcksError(f"acks must be -1 (all), 0 or 1, not {acks}")
        data = bytes(batch)
        infos = _engine.batches(data, False)
        if len(infos) != 1 or infos[0].size != len(data):
            raise error_for(87, f"a produce request carries one whole record batch, not {len(data)} bytes "
                                f"holding {len(infos)}")
        last_delta = infos[0].last_offset - infos[0].base_offset
        body = {"transactional_id": transactional_id, "acks": acks, "timeout_ms": self.node.request_timeout_ms,
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
              min_one: bool = True, isolation_level: int = 0) -> FetchResult:
        """Whole batches from `offset` (below the high watermark, or the last stable offset with isolation_level
        1: a client fetch is a consumer fetch), at most about `max_bytes` (at least one batch). Does not wait.
        OffsetOutOfRangeError outside the log; an empty result while the leader is moving (the metadata is
        refreshed for the next try)."""
        return self.node._fetch(self, offset, max_bytes, isolation_level)

    @property
    def last_stable_offset(self) -> int:
        """The offset read_committed consumers read up to (ListOffsets LATEST with isolation 1)."""
        found = self.node.cluster.list_offsets([(self.topic, self.index)], LATEST, isolation_level=1)
        if found[(self.topic, self.index)] is None:
            raise UnknownTopicOrPartitionError(f"This server does not host this topic-partition: "
                                               f"{self.topic}-{self.index}")
        return found[(self.topic, self.index)].offset


class RemoteNode:
    """The Node surface seglog.Producer and seglog.Consumer use, over a broker (see the module docstring).
    ``retry_timeout``: how long leader and coordinator moves are retried before their error is raised.
    ``security``: Kafka client settings (``{"security.protocol": "SASL_SSL", "ssl.ca.location": "ca.pem",
    "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": "..."}``, see
    seglog.security.client) or a ClientSecurity; every connection of the node (the one-way ones included)
    uses it."""

    def __init__(self, bootstrap_servers: str, *, client_id: str = "seglog", timeout: float = 30.0,
                 retry_timeout: float = 30.0, request_timeout_ms: int = 30000,
                 security: ClientSecurity | Mapping[str, object] | None = None,
                 cluster: ClusterClient | None = None):
        self.cluster = cluster or ClusterClient(bootstrap_servers, client_id=client_id, timeout=timeout,
                                                retry_timeout=retry_timeout, security=security)
        self.client_id = client_id
        self.retry_timeout = retry_timeout
        self.request_timeout_ms = request_timeout_ms
        self._partitions: dict[tuple[str, int], RemotePartition] = {}
        self._coordinator: RemoteGroupCoordinator | None = None
        self._txn_coordinator: RemoteTxnCoordinator | None = None
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._version = 0
        self._idle: dict[tuple[str, int], tuple[int, int]] = {}         # empty fetches since the last wait
        self._prefetched: dict[tuple[str, int], tuple[int, FetchResult]] = {}
        self._one_way: dict[int, BrokerConnection] = {}     # leader id -> its connection for acks=0 produce

    def __repr__(self):
        return f"RemoteNode({self.cluster.bootstrap!r})"

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

    def elect_leaders(self, partitions: list[tuple[str, int]] | None, unclean: bool = False
                      ) -> dict[tuple[str, int], SeglogError | None]:
        """ElectLeaders at the controller (preferred, or `unclean`; None: every partition): per partition None
        (elected) or its error, as Node.elect_leaders."""
        self._check_open()
        asked = None
        if partitions is not None:
            asked = [{"topic": t, "partitions": ps} for t, ps in partitions_by_topic(partitions).items()]
        body = {"election_type": 1 if unclean else 0, "topic_partitions": asked,
                "timeout_ms": self.request_timeout_ms}

        def code(r: dict) -> int:            # NOT_CONTROLLER comes per partition (or, from Kafka, at the top)
            codes = [r["error_code"]] + [p["error_code"] for t in r["replica_election_results"]
                                         for p in t["partition_result"]]
            return NotControllerError.code if NotControllerError.code in codes else r["error_code"]
        r = self.cluster.controller_request(ApiKey.ELECT_LEADERS, body, code)
        if r["error_code"]:
            raise error_for(r["error_code"], "ElectLeaders failed")
        return {(t["topic"], p["partition_id"]): None if p["error_code"] == 0 else
                error_for(p["error_code"], p["error_message"])
                for t in r["replica_election_results"] for p in t["partition_result"]}

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
            kept = set(internal_topic_config(name, BrokerConfig()) or ())

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
        body = {"topics": [{"name": name}], "topic_names": [name], "timeout_ms": self.request_timeout_ms}  # v6+, v1-5
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
            conn = self._one_way.get(leader)
            if conn is None:
                shared = self.cluster.broker(leader)
                conn = self._one_way[leader] = self.cluster.open(shared.host, shared.port)
        conn.send_one_way(ApiKey.PRODUCE, body)

    # -- fetching -------------------------------------------------------------------------------------------

    def _fetch(self, part: RemotePartition, offset: int, max_bytes: int, isolation: int = 0) -> FetchResult:
        key = (part.topic, part.index)
        cached = self._prefetched.pop(key, None)
        if cached is not None and cached[0] == (offset, isolation):
            self._idle.pop(key, None)
            self._version += 1
            return cached[1]
        self._check_open()
        try:
            conn = self.cluster.leader(*key)
        except (LeaderNotAvailableError, NetworkError):
            self._idle.pop(key, None)
            return FetchResult(NO_BATCHES, -1, -1, -1)
        try:
            answer = wire_fetch.fetch(conn, {key: Position(offset, max_bytes)}, max_bytes=max_bytes,
                                      isolation_level=isolation)
        except NetworkError:
            self.cluster.forget(part.topic)
            self._idle.pop(key, None)
            return FetchResult(NO_BATCHES, -1, -1, -1)
        fetched = answer.get(key)
        if fetched is None:
            raise error_for(UnknownTopicOrPartitionError.code,
                            f"the fetch response has no {part.topic}-{part.index}")
        result = self._result(key, offset, fetched)
        if result is None:                                  # the leader moved: fresh metadata next time
            self._idle.pop(key, None)
            return FetchResult(NO_BATCHES, -1, -1, -1)
        if result.next_offset < 0:
            self._idle[key] = (offset, max_bytes, isolation)
        else:
            self._idle.pop(key, None)
            self._version += 1
        return result

    def _result(self, key: tuple[str, int], offset: int, f: Fetched) -> FetchResult | None:
        """A partition of a fetch answer as a FetchResult; None when the leader moved (metadata dropped)."""
        code = f.error_code
        if code == OffsetOutOfRangeError.code:
            raise OffsetOutOfRangeError(offset=offset, start=f.log_start_offset, end=f.high_watermark,
                                        what=f"{key[0]}-{key[1]}")
        if code in LEADER_MOVED:
            self.cluster.forget(key[0])
            return None
        if code:
            raise error_for(code, f"fetch of {key[0]}-{key[1]}: {for_code(code).kafka_name}")
        return _fetch_result(f)

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
        by_leader: dict[tuple[int, int], dict] = {}       # (leader, isolation level) -> key -> want
        try:
            for key, want in idle.items():
                by_leader.setdefault((self.cluster.leader_id(*key), want[2]), {})[key] = want
        except SeglogError:
            return True                           # let the next fetch meet (and handle) the moved leader
        share = max(0.0, timeout) / len(by_leader)
        got = False
        for (leader, isolation), wanted in by_leader.items():
            try:
                answer = wire_fetch.fetch(self.cluster.broker(leader),
                                          {key: Position(o, m) for key, (o, m, _) in wanted.items()},
                                          max_wait_ms=int(share * 1000), min_bytes=1,
                                          max_bytes=max(m for _, m, _ in wanted.values()), isolation_level=isolation)
            except SeglogError:
                return True
            for key, f in answer.items():
                if key not in wanted:
                    continue
                if f.error_code:
                    got = True                    # the next fetch raises or retries it
                    continue
                if f.next_offset >= 0:
                    self._prefetched[key] = ((wanted[key][0], isolation), _fetch_result(f))
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

    @property
    def txn_coordinator(self) -> "RemoteTxnCoordinator":
        """The transaction coordinator calls (seglog.remote_txn), at each transactional id's coordinator."""
        self._check_open()
        with self._lock:
            if self._txn_coordinator is None:
                self._txn_coordinator = RemoteTxnCoordinator(self.cluster, retry_timeout=self.retry_timeout)
            return self._txn_coordinator

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
            one_way, self._one_way = list(self._one_way.values()), {}
            coords = [c for c in (self._coordinator, self._txn_coordinator) if c is not None]
        for conn in one_way:
            conn.close()
        for coord in coords:
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


def _fetch_result(f: Fetched) -> FetchResult:
    """A partition's fetch answer (no error) as the FetchResult a Node's fetch returns (CRCs not checked)."""
    return FetchResult(f.records, f.high_watermark, f.log_start_offset, f.high_watermark, f.next_offset,
                       crc_checked=False, last_stable_offset=f.last_stable_offset,
                       aborted_transactions=f.aborted_transactions)

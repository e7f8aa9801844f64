"""Node: the data directories (Kafka's ``log.dirs``) holding topics and their partition logs.

This is the one core both doors use: the in-process Producer/Consumer call it directly, the network broker
translates Kafka requests into the same calls. Layout of the first (or only) directory::

    data/
      meta.properties            cluster.id, broker.id (as Kafka writes it; a cluster member's is the cluster's)
      topics.json                topic -> id, partition count, config overrides (atomically rewritten)
      producer-id-block          the next block of producer ids to hand out
      <topic>-<partition>/       one seglog.Log per partition (Kafka's segment files)
      <topic>-<p>.<id>-delete/   a deleted topic's partition, removed in the background
      .lock                      held by the process that owns the directory

With several directories (``log.dirs=a,b``: see seglog.log_dirs) each has its meta.properties, .lock and
partition logs; a new partition goes to the one with the fewest, and AlterReplicaLogDirs moves a replica to
another while it keeps serving (seglog.log_dir_mover).

Topic names are checked as Kafka checks them. Offsets visible to consumers stop at a partition's high
watermark (with one replica, its end offset). Partition directories found without an entry in topics.json
(written by ``seglog.Log`` directly, or copied from a Kafka broker) are adopted as topics with default config.

Locking: one lock guards topic metadata; each partition's Log has its own. Appends wake fetchers waiting
in :meth:`Node.wait_for_data` (in-process consumers) and run registered listeners (the broker's long polls).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .checkpoints import read_checkpoint, read_json, replace_file, write_checkpoint
from .config import KAFKA_NAMES, BrokerConfig, LogConfig
from .dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig, read_stored
from .errors import (ElectionNotNeededError, InconsistentClusterIdError, InvalidConfigError, InvalidPartitionsError,
                     InvalidReplicationFactorError, InvalidRequestError, InvalidTopicError, LogClosedError,
                     LogDirNotFoundError, ReplicaNotAvailableError, SeglogError, StorageError, TopicAlreadyExistsError,
                     TopicDeletionDisabledError, UnknownTopicOrPartitionError)
from .group import GroupConfig, GroupCoordinator
from .log import Log
from .log_dir_mover import ReplicaAlterLogDirs
from .log_dirs import LogDirs, delete_dir_name, future_dir_name, parse_log_dirs, read_meta_properties
from .offsets_format import OFFSETS_TOPIC
from .offsets_store import LogOffsetStore, partition_for_group
from .partition import FetchResult, Partition
from .replication.throttle import ALTER_LOG_DIRS_RATE_KEY, rates_for_broker
from .scheduler import default_scheduler
from .topic_names import validate_topic_name
from .txn.coordinator import TransactionCoordinator
from .txn.log_format import TRANSACTION_STATE_TOPIC
from .txn.markers import LocalMarkerChannel
from .txn.state_store import TransactionStateStore

__all__ = ["Node", "Partition", "TopicInfo", "FetchResult", "offsets_topic_config", "internal_topic_config",
           "read_meta_properties"]

log = logging.getLogger("seglog.node")

TOPICS_FILE = "topics.json"
PRODUCER_ID_FILE = "producer-id-block"
PRODUCER_ID_BLOCK = 1000


def offsets_topic_config(config: BrokerConfig) -> dict[str, str]:
    """The topic configs Kafka gives __consumer_offsets when it creates it (stored as the topic's own
    configs, so DescribeConfigs and `topics --describe` report them): compacted, segments of
    offsets.topic.segment.bytes, batches kept as the producer (the coordinator) compressed them."""
    return {"cleanup.policy": "compact", "compression.type": "producer",
            "segment.bytes": str(config.offsets_topic_segment_bytes)}


def transaction_state_topic_config(config: BrokerConfig) -> dict[str, str]:
    """The topic configs Kafka gives __transaction_state: compacted, uncompressed as written, segments of
    transaction.state.log.segment.bytes, min.insync.replicas = transaction.state.log.min.isr, never an
    unclean leader."""
    return {"cleanup.policy": "compact", "compression.type": "uncompressed",
            "segment.bytes": str(config.transaction_state_log_segment_bytes),
            "min.insync.replicas": str(config.transaction_state_log_min_isr),
            "unclean.leader.election.enable": "false"}


INTERNAL_TOPICS = {OFFSETS_TOPIC: (offsets_topic_config, "offsets_topic_num_partitions"),
                   TRANSACTION_STATE_TOPIC: (transaction_state_topic_config, "transaction_state_log_num_partitions")}


def internal_topic_config(name: str, config: BrokerConfig) -> dict[str, str] | None:
    """The creation configs of an internal topic (__consumer_offsets, __transaction_state); None for others."""
    found = INTERNAL_TOPICS.get(name)
    return None if found is None else found[0](config)


@dataclass
class TopicInfo:
    """A topic as the node knows it: id, partition count, config overrides and the resulting LogConfig."""
    name: str
    topic_id: uuid.UUID
    partitions: int
    overrides: dict[str, str]
    config: LogConfig
    internal: bool = False

    def to_json(self) -> dict:
        return {"id": str(self.topic_id), "partitions": self.partitions, "config": self.overrides}


class Node:
    """Data directories of topics. ``seglog.open(path)`` returns one. Close it (or use ``with``).

    ``path``: one directory, several comma-separated (``"a,b"``, as ``log.dirs``) or a list of them;
    ``self.path`` is the first, ``self.log_dirs`` all of them."""

    def __init__(self, path: str | os.PathLike | list, config: BrokerConfig | Mapping[str, Any] | None = None):
        dirs = parse_log_dirs(path)
        self.path = dirs[0]
        if config is None:
            config = BrokerConfig()
        elif not isinstance(config, BrokerConfig):
            config = BrokerConfig.from_properties(config)
        self.config = config
        self.dynamic = DynamicBrokerConfig(config)       # run-time broker configs; ``config`` follows it
        self.dynamic.add_hook(self._reconfigure)
        self._lock = threading.RLock()
        self._data = threading.Condition(threading.Lock())
        self._data_version = 0
        self._listeners: list[Callable[[Partition], None]] = []
        self._topics: dict[str, TopicInfo] = {}
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._closed = False
        self._coordinator = None
        self._offsets_led: set[int] = set()     # cluster mode: the __consumer_offsets partitions led here
        self._txn_coordinator: TransactionCoordinator | None = None
        self._txn_led: dict[int, int] = {}      # cluster mode: __transaction_state partitions led here -> epoch
        # how transactions reach the rest of the cluster (a cluster member replaces these three): new producer
        # ids, the channel that writes markers, and the KIP-890 check of a transactional batch's partition
        self.new_producer_id: Callable[[], int] = self.init_producer_id
        self.marker_channel_factory: Callable[["Node"], Any] = LocalMarkerChannel
        self.transaction_verifier: Callable[..., dict] | None = None
        self.cluster_managed = False
        self.replication_waiter: Callable[[Partition, int], None] | None = None
        self.log_dir_failure: StorageError | None = None    # set by fail_log_dir: produces are refused
        self._located: dict[tuple[str, int], str] = {}     # partition -> the log directory holding it
        self._dirs = LogDirs(dirs, self.config.broker_id)
        self._mover = ReplicaAlterLogDirs(self, self.config.replication_quota_window_num,
                                          self.config.replication_quota_window_size_seconds)
        try:
            if not self.config.zookeeper_connect:       # a cluster's are in its ZooKeeper (ClusterMember)
                self.apply_stored_configs()
            self._load()
            if TRANSACTION_STATE_TOPIC in self._topics and not self.config.zookeeper_connect:
                self.txn_coordinator                # finishes the transactions a crash left prepared
        except BaseException:
            self._mover.close()
            self._close_partitions()
            self._dirs.release()
            raise

    # -- loading --------------------------------------------------------------------------------------------

    @property
    def log_dirs(self) -> list[str]:
        """The node's log directories (absolute), in the order given."""
        return list(self._dirs.dirs)

    def _load(self) -> None:
        self.cluster_id = self._meta_properties()
        stored = self._read_topics()
        located, futures = self._dirs.scan()
        self._located = located
        found: dict[str, int] = {}
        for name, p in located:
            found[name] = max(found.get(name, 0), p + 1)
        for name, count in found.items():
            if name not in stored:
                log.info("adopting partition directories of topic %s (%d partitions)", name, count)
                stored[name] = {"id": str(uuid.uuid4()), "partitions": count, "config": {}}
        for name, entry in sorted(stored.items()):
            info = self._topic_info(name, uuid.UUID(entry["id"]), entry["partitions"], entry.get("config", {}))
            self._topics[name] = info
            for p in range(info.partitions):
                self._open_partition(info, p)
        self._write_topics()
        for tp, path in sorted(futures.items()):
            part = self._partitions.get(tp)
            if part is None:                        # not a partition of this node any more
                self._delete_dirs([self._dirs.retire(path)], f"delete future log {tp[0]}-{tp[1]}")
            else:
                self._mover.add(part, self._open_future(part, path))

    def _meta_properties(self) -> str | None:
        """The cluster.id of the directories' meta.properties (seglog.log_dirs.LogDirs.meta_properties checks
        them: broker.id as configured, one cluster.id in all). A lone broker makes one up for new directories; a
        broker with zookeeper.connect leaves it to the cluster (``adopt_cluster_id``) and returns None until
        then."""
        cluster_id, self._cluster_id_stored = self._dirs.meta_properties()
        if cluster_id is None and not self.config.zookeeper_connect:
            cluster_id = self._dirs.new_cluster_id()
        return cluster_id

    def adopt_cluster_id(self, cluster_id: str) -> None:
        """Cluster mode: this directory belongs to the cluster `cluster_id` (the id its metadata store holds),
        recorded in meta.properties. A directory that already belonged to another cluster is refused with
        InconsistentClusterIdError, as Kafka refuses to start (InconsistentClusterIdException)."""
        with self._lock:
            if self.cluster_id == cluster_id:
                return
            if self.cluster_id is not None and self._cluster_id_stored:
                raise InconsistentClusterIdError(
                    f"The Cluster ID {cluster_id} doesn't match stored clusterId {self.cluster_id} in meta.properties "
                    f"of {self.path}. The broker is trying to join the wrong cluster. Configured zookeeper.connect "
                    f"may be wrong.")
            self._dirs.write_cluster_id(cluster_id)     # new directories (or an id made up by this process)
            self._cluster_id_stored = True
            self.cluster_id = cluster_id

    def _read_topics(self) -> dict[str, dict]:
        data = read_json(os.path.join(self.path, TOPICS_FILE), "cannot read topic metadata") or {}
        return data.get("topics", {})

    def _write_topics(self) -> None:
        data = {"version": 1, "topics": {n: t.to_json() for n, t in sorted(self._topics.items())}}
        replace_file(os.path.join(self.path, TOPICS_FILE), json.dumps(data, indent=1).encode(),
                     "cannot write topic metadata")

    def _topic_info(self, name: str, topic_id: uuid.UUID, partitions: int, overrides: Mapping[str, Any]) -> TopicInfo:
        created = internal_topic_config(name, self.config)
        internal = created is not None
        if internal:             # its creation configs, unless changed since (also for directories written before)
            overrides = {**created, **overrides}
        cfg = self.config.log_config().with_kafka(overrides)
        return TopicInfo(name, topic_id, partitions, {k: str(v) for k, v in overrides.items()}, cfg, internal)

    def _open_partition(self, info: TopicInfo, p: int) -> Partition:
        """Open (or create, in the directory seglog.log_dirs.LogDirs.next_dir picks) a partition's log."""
        tp = (info.name, p)
        d = self._located.get(tp) or self._dirs.next_dir(tp, self._located, self._mover.dirs())
        lg = Log(os.path.join(d, f"{info.name}-{p}"), info.config, topic=info.name, partition=p,
                 retention_check_interval_ms=self.config.log_retention_check_interval_ms)
        self._located[tp] = d
        part = Partition(self, info.name, p, lg)
        self._partitions[tp] = part
        return part

    def _open_future(self, part: Partition, path: str) -> Log:
        """Open (or create) the future log of a partition at `path`, starting where the current log starts."""
        lg = Log(path, part.log.config, topic=part.topic, partition=part.index,
                 retention_check_interval_ms=self.config.log_retention_check_interval_ms)
        try:
            if lg.end_offset == lg.start_offset < part.log.start_offset:
                lg.truncate_fully_and_start_at(part.log.start_offset)
        except BaseException:
            lg.close()
            raise
        return lg

    # -- topics -----------------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"node {self.path} is closed")

    def _check_standalone(self) -> None:
        if self.cluster_managed:
            raise InvalidRequestError("this broker is part of a cluster: its topics are managed through the "
                                      "cluster (Kafka admin API, or seglog topics --bootstrap-server)")

    def create_topic(self, name: str, partitions: int | None = None, config: Mapping[str, Any] | None = None,
                     replication_factor: int | None = None) -> TopicInfo:
        """Create a topic (partitions default num.partitions). config: Kafka-named overrides. A single node
        holds one replica, so replication_factor must be 1 (or None). Raises InvalidTopicError,
        TopicAlreadyExistsError, InvalidPartitionsError, InvalidReplicationFactorError, InvalidConfigError."""
        self._check_standalone()
        validate_topic_name(name)
        partitions = self.config.num_partitions if partitions is None else partitions
        if not isinstance(partitions, int) or isinstance(partitions, bool) or partitions < 1:
            raise InvalidPartitionsError(f"Number of partitions must be larger than 0, not {partitions!r}.")
        rf = 1 if replication_factor is None else replication_factor
        if not isinstance(rf, int) or rf < 1:
            raise InvalidReplicationFactorError(f"Replication factor must be larger than 0, not {rf!r}.")
        if rf > 1:
            raise InvalidReplicationFactorError(f"Replication factor: {rf} larger than available brokers: 1.")
        with self._lock:
            self._check_open()
            if name in self._topics:
                raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
            clash = [t for t in self._topics if t.replace(".", "_") == name.replace(".", "_")]
            if clash:
                raise InvalidTopicError(f"Topic '{name}' collides with existing topics: {', '.join(clash)}")
            info = self._topic_info(name, uuid.uuid4(), partitions, dict(config or {}))
            self._topics[name] = info
            opened = 0
            try:
                for p in range(partitions):
                    self._open_partition(info, p)
                    opened = p + 1
                self._write_topics()
            except BaseException:
                # only the partitions tried so far can have a log or a directory: dropping them all is
                # bounded by what was done, not by the count asked for (which may be absurd)
                info.partitions = min(opened + 1, partitions)
                self._drop_topic(name)
                raise
            log.info("created topic %s with %d partitions", name, partitions)
            return info

    def ensure_topic(self, name: str) -> TopicInfo:
        """The topic, created with the defaults if auto.create.topics.enable (Kafka's auto-creation on first
        use); UnknownTopicOrPartitionError otherwise."""
        info = self._topics.get(name)
        if info is not None:
            return info
        self._check_standalone()
        if name in INTERNAL_TOPICS:
            return self._internal_topic(name)
        if not self.config.auto_create_topics_enable:
            raise UnknownTopicOrPartitionError(f"This server does not host this topic: {name}")
        try:
            return self.create_topic(name)
        except TopicAlreadyExistsError:
            return self._topics[name]

    def _internal_topic(self, name: str) -> TopicInfo:
        with self._lock:
            info = self._topics.get(name)
            if info is None:
                count = getattr(self.config, INTERNAL_TOPICS[name][1])
                info = self._topic_info(name, uuid.uuid4(), count, {})
                self._topics[name] = info
                for p in range(info.partitions):
                    self._open_partition(info, p)
                self._write_topics()
            return info

    def topic(self, name: str) -> TopicInfo:
        """The topic's description; UnknownTopicOrPartitionError if it does not exist."""
        info = self._topics.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"This server does not host this topic: {name}")
        return info

    def topics(self, include_internal: bool = False) -> list[str]:
        return sorted(n for n, t in self._topics.items() if include_internal or not t.internal)

    def partition(self, topic: str, index: int) -> Partition:
        """The partition; UnknownTopicOrPartitionError for an unknown topic or partition number."""
        part = self._partitions.get((topic, index))
        if part is None:
            self._check_open()
            raise UnknownTopicOrPartitionError(f"This server does not host this topic-partition: {topic}-{index}")
        return part

    def hosted(self, topic: str, index: int) -> Partition | None:
        """The partition if this node holds a replica of it (leader or follower), else None."""
        return self._partitions.get((topic, index))

    def partitions(self, topic: str) -> list[Partition]:
        """The partitions of `topic` this node holds (all of them, unless it is a cluster member)."""
        info = self.topic(topic)
        return [self._partitions[(topic, p)] for p in range(info.partitions) if (topic, p) in self._partitions]

    def recovery_losses(self) -> dict[str, int]:
        """{"topic-partition": offsets lost} of the partitions whose log, when it opened, held less than its
        checkpoint vouched for (Log.recovery.lost_offsets)."""
        return {f"{t}-{p}": part.log.recovery.lost_offsets for (t, p), part in list(self._partitions.items())
                if getattr(part.log, "recovery", None) is not None and part.log.recovery.lost_offsets}

    def elect_leaders(self, partitions: list[tuple[str, int]] | None, unclean: bool = False
                      ) -> dict[tuple[str, int], SeglogError | None]:
        """Kafka's ElectLeaders (preferred, or `unclean`) on a lone node: its one replica leads every partition,
        so each partition asked for (None: all) answers ElectionNotNeededError, or UnknownTopicOrPartitionError.
        A cluster member's elections are the controller's (seglog.cluster.member.ClusterView)."""
        self._check_standalone()
        if partitions is None:
            partitions = [(t, p) for t in self.topics(include_internal=True) for p in range(self.topic(t).partitions)]
        out: dict[tuple[str, int], SeglogError | None] = {}
        for topic, p in partitions:
            try:
                self.partition(topic, p)
                out[(topic, p)] = ElectionNotNeededError("Leader election not needed for topic partition")
            except UnknownTopicOrPartitionError as e:
                out[(topic, p)] = e
        return out

    def create_partitions(self, name: str, total: int) -> TopicInfo:
        """Grow a topic to `total` partitions (Kafka cannot shrink: InvalidPartitionsError). All or nothing:
        if a new partition cannot be created (or the topic list not written), the ones opened are removed
        again and the topic keeps its old count."""
        self._check_standalone()
        with self._lock:
            self._check_open()
            info = self.topic(name)
            old = info.partitions
            if not isinstance(total, int) or total <= old:
                raise InvalidPartitionsError(f"Topic currently has {old} partitions, which is higher "
                                             f"than or equal to the requested {total}.")
            opened = []
            try:
                for p in range(old, total):
                    self._open_partition(info, p)
                    opened.append(p)
                info.partitions = total
                self._write_topics()
            except BaseException:
                info.partitions = old
                for p in opened:
                    self._drop_partition(name, p)
                raise
            return info

    def alter_topic_config(self, name: str, set_: Mapping[str, Any] | None = None,
                           delete: list[str] | tuple = (), *, validate_only: bool = False) -> TopicInfo:
        """Change a topic's config overrides (Kafka-named); deleted ones fall back to the broker default
        (__consumer_offsets: to its creation configs). Open partitions take the new config at once (segment
        size, retention ... apply from now on). Unknown names (set or deleted) and bad values raise
        InvalidConfigError and change nothing; ``validate_only`` checks without changing anything."""
        self._check_standalone()
        unknown = sorted({k for k in list(delete) + list(set_ or {}) if k not in KAFKA_NAMES})
        if unknown:
            raise InvalidConfigError(f"Unknown topic config name: {', '.join(unknown)}")
        with self._lock:
            self._check_open()
            info = self.topic(name)
            overrides = dict(info.overrides)
            for k in delete:
                overrides.pop(k, None)
            overrides.update({k: str(v) for k, v in (set_ or {}).items()})
            new = self._topic_info(name, info.topic_id, info.partitions, overrides)
            if validate_only:
                return new
            info.overrides, info.config = new.overrides, new.config
            for p in range(info.partitions):
                self._partitions[(name, p)].log.config = new.config
            self._write_topics()
            return info

    def _reconfigure(self, old: BrokerConfig, new: BrokerConfig) -> None:
        """Dynamic broker configs changed (``self.dynamic``): ``config`` becomes the new effective one, and every
        topic's LogConfig is derived again from the new defaults under its own overrides; open logs take it at
        once, as with alter_topic_config (Kafka's DynamicLogConfig.reconfigure)."""
        with self._lock:
            self.config = new
            if old.log_config() == new.log_config():
                return
            for name, info in self._topics.items():
                info.config = self._topic_info(name, info.topic_id, info.partitions, info.overrides).config
                for p in range(info.partitions):
                    part = self._partitions.get((name, p))
                    if part is not None:
                        part.log.config = info.config

    def delete_topic(self, name: str) -> None:
        """Delete a topic and its data (delete.topic.enable). Its directories are renamed at once and removed
        in the background, as Kafka does. Raises TopicDeletionDisabledError, UnknownTopicOrPartitionError."""
        self._check_standalone()
        if not self.config.delete_topic_enable:
            raise TopicDeletionDisabledError("Topic deletion is disabled (delete.topic.enable=false).")
        with self._lock:
            self._check_open()
            info = self.topic(name)
            if info.internal:
                raise InvalidTopicError(f"The internal topic {name} cannot be deleted")
            self._drop_topic(name)
            self._write_topics()
            log.info("deleted topic %s", name)

    # -- cluster membership --------------------------------------------------------------------------------------

    def apply_topic(self, name: str, topic_id: uuid.UUID, partitions: int, overrides: Mapping[str, Any],
                    hosted: set[int]) -> TopicInfo:
        """Cluster mode: make the local copy of a topic match the cluster's: its config, and open logs exactly
        for the partitions in `hosted` (replicas assigned to this broker; others are deleted)."""
        with self._lock:
            self._check_open()
            old = self._topics.get(name)
            info = self._topic_info(name, topic_id, partitions, dict(overrides))
            if old is not None and old.topic_id != topic_id:
                self._drop_topic(name)              # a new topic with an old name: its data is not ours
                old = None
            self._topics[name] = info
            for p in range(max(partitions, old.partitions if old else 0)):
                part = self._partitions.get((name, p))
                if p in hosted and p < partitions:
                    if part is None:
                        self._open_partition(info, p)
                    else:
                        part.log.config = info.config
                elif part is not None:
                    self._drop_partition(name, p)
            self._write_topics()
            return info

    def remove_topic(self, name: str) -> None:
        """Cluster mode: the topic was deleted from the cluster; delete its local replicas."""
        with self._lock:
            if name in self._topics:
                self._drop_topic(name)
                self._write_topics()

    def _drop_partition(self, name: str, p: int) -> None:
        self._delete_dirs(self._retire_partition(name, p), f"delete {name}-{p}")

    def _retire_partition(self, name: str, p: int) -> list[str]:
        """Close a partition's logs (its future log first: a future directory without a current one is a
        finished move, see seglog.log_dirs.LogDirs.scan) and rename their directories to
        ``<dir>.<uuid>-delete`` (lock held, renames fsynced); the new names. Raises StorageError."""
        out = []
        future = self._mover.remove((name, p))
        if future is not None:
            out.append(self._dirs.retire(future))
        part = self._partitions.pop((name, p), None)
        if part is not None:
            part.log.close()
        d = self._located.pop((name, p), None)
        src = os.path.join(d, f"{name}-{p}") if d is not None else None
        if src is not None and os.path.isdir(src):
            out.append(self._dirs.retire(src))
        return out

    def _delete_dirs(self, doomed: list[str], what: str) -> None:
        """Delete retired partition directories in the background."""
        if doomed:
            default_scheduler().schedule(lambda: [shutil.rmtree(d, ignore_errors=True) for d in doomed], 0.0,
                                         name=what)

    def _leadership_changed(self, part: Partition, leader: bool) -> None:
        """Replication moved a partition's leadership here or away. Groups live on the leaders of their
        __consumer_offsets partition: as Kafka's GroupMetadataManager, the coordinator loads the groups of an
        offsets partition this broker now leads and forgets those of one it no longer leads (their waiting
        requests fail with NOT_COORDINATOR); the groups of other partitions are not touched. The same for the
        transactional ids of a __transaction_state partition (the transaction coordinator loads them under the
        partition's leader epoch, its coordinator epoch)."""
        if part.topic == TRANSACTION_STATE_TOPIC:
            self._txn_leadership_changed(part, leader)
            return
        if part.topic != OFFSETS_TOPIC:
            return
        with self._lock:
            if leader:
                self._offsets_led.add(part.index)
            else:
                self._offsets_led.discard(part.index)
            coord = self._coordinator
        if coord is None:
            return                                  # made later, it reads the partitions led by then
        try:
            if leader:
                n, index = self.config.offsets_topic_num_partitions, part.index
                moved = (lambda gid: partition_for_group(gid, n) == index) if part.log.leader_epoch > 0 else None
                coord.load_groups(*coord.store.load_partition(part.index), taken_over=moved)
            else:
                coord.unload_groups(coord.store.unload_partition(part.index))
        except (LogClosedError, UnknownTopicOrPartitionError) as e:     # shutting down, or the topic went away
            log.info("groups of %s not %s: %s", part, "loaded" if leader else "unloaded", e)
        except Exception:                           # never let it stop the replica manager applying the change
            log.exception("groups of %s could not be %s", part, "loaded" if leader else "unloaded")

    def _leader_epoch_bumped(self, part: Partition) -> None:
        """This broker goes on leading `part` in a newer leader epoch. As Kafka's coordinators on the election of
        a partition they have loaded: groups stay (they keep no epoch); a __transaction_state partition's ids
        stay, under the new epoch as their coordinator epoch."""
        if part.topic != TRANSACTION_STATE_TOPIC:
            return
        with self._lock:
            if part.index not in self._txn_led:
                return
            self._txn_led[part.index] = part.log.leader_epoch
            coord = self._txn_coordinator
        if coord is not None:
            coord.reelected(part.index, part.log.leader_epoch)

    def _drop_topic(self, name: str) -> None:
        info = self._topics.pop(name, None)
        if info is None:
            return
        self._delete_dirs([d for p in range(info.partitions) for d in self._retire_partition(name, p)],
                          f"delete topic {name}")

    # -- log directories -----------------------------------------------------------------------------------------

    def describe_log_dirs(self, partitions: set[tuple[str, int]] | None = None) -> list[dict]:
        """Kafka's DescribeLogDirs of this node: for each log directory its path, ``total_bytes`` and
        ``usable_bytes`` of its file system, and the logs in it (of `partitions`, None: all) as
        ``(topic, partition, size in bytes, offset lag, is_future)``; a future log's lag is how far it trails the
        current one, a current log's how far its end is below the high watermark (0 unless it is a follower's)."""
        with self._lock:
            self._check_open()
            parts = {tp: (part, self._located.get(tp)) for tp, part in self._partitions.items()
                     if partitions is None or tp in partitions}
            futures = self._mover.logs()
        out = {d: [] for d in self._dirs.dirs}
        for (t, p), (part, d) in sorted(parts.items()):
            lg = part.log
            if d in out:
                out[d].append((t, p, lg.size_bytes, max(lg.high_watermark - lg.end_offset, 0), False))
            fut = futures.get((t, p))
            if fut is not None:
                out[os.path.dirname(fut.path)].append((t, p, fut.size_bytes, max(lg.end_offset - fut.end_offset, 0),
                                                       True))
        result = []
        for d in self._dirs.dirs:
            total, usable = self._dirs.usage(d)
            result.append({"path": d, "total_bytes": total, "usable_bytes": usable, "partitions": out[d]})
        return result

    def apply_stored_configs(self) -> None:
        """A lone broker's dynamic broker configs, kept in the first log directory (seglog.dynamic_config's
        STORE_FILE, written by the broker's AlterConfigs): its own entity over the default, applied to
        ``dynamic``, and the copy rate of replicas moving between log directories. In-process opens of the
        directory get them too."""
        stored = read_stored(self.path)
        broker_id = self.config.broker_id
        self.dynamic.apply(stored.get(f"brokers/{DEFAULT_ENTITY}", {}), stored.get(f"brokers/{broker_id}", {}))
        rate = rates_for_broker(stored, broker_id).get(ALTER_LOG_DIRS_RATE_KEY)
        self.replica_alter_log_dirs_rate = None if rate is None else rate[0]

    @property
    def replica_alter_log_dirs_rate(self) -> int | None:
        """replica.alter.log.dirs.io.max.bytes.per.second: how many bytes/s replicas moving between log
        directories copy (None: no limit)."""
        return self._mover.quota.limit

    @replica_alter_log_dirs_rate.setter
    def replica_alter_log_dirs_rate(self, rate: int | None) -> None:
        self._mover.quota.limit = rate

    def alter_replica_log_dirs(self, moves: Mapping[tuple[str, int], str]) -> dict[tuple[str, int], SeglogError | None]:
        """Kafka's AlterReplicaLogDirs: move each partition's replica to the log directory given, {(topic, p):
        None or the error}. A move starts a future log there that copies the current one while the partition
        keeps serving and replaces it once caught up (seglog.log_dir_mover); the partition's directory already
        is a no-op, another directory for a partition already moving restarts the move there. Errors, as
        Kafka's ReplicaManager: LogDirNotFoundError for a directory not in log.dirs, InvalidTopicError for a name
        too long for a future directory, ReplicaNotAvailableError for a partition of the cluster this node does
        not host (the directory is remembered for when it does), UnknownTopicOrPartitionError for one that does
        not exist, StorageError when the future log cannot be created or a log dir failed."""
        out: dict[tuple[str, int], SeglogError | None] = {}
        for tp, path in moves.items():
            try:
                self._alter_replica_log_dir(tp, path)
                out[tp] = None
            except SeglogError as e:
                log.warning("Unable to alter log dirs for %s-%s: %s", tp[0], tp[1], e)
                out[tp] = e
        return out

    def _alter_replica_log_dir(self, tp: tuple[str, int], path: str) -> None:
        topic, p = tp
        if len(future_dir_name(topic, p)) > 255:
            raise InvalidTopicError("The topic name is too long.")
        dest = self._dirs.find(path) if os.path.isabs(path) else None
        if dest is None:
            raise LogDirNotFoundError(f"Failed to find log dir {path}")
        if self.log_dir_failure is not None:          # the broker halts at its first failed log dir
            raise StorageError(f"Log directory {dest} is offline", dest)
        with self._lock:
            self._check_open()
            moving = self._mover.dir_of(tp)
            if moving is not None and moving != dest:
                self._delete_dirs([self._dirs.retire(self._mover.remove(tp))], f"delete future log {topic}-{p}")
            part = self._partitions.get(tp)
            if part is None:
                if not self._partition_exists(topic, p):
                    raise UnknownTopicOrPartitionError(f"This server does not host this topic-partition: {topic}-{p}")
                self._dirs.preferred[tp] = dest
                raise ReplicaNotAvailableError(f"Replica of {topic}-{p} is not available on broker "
                                               f"{self.config.broker_id}")
            if self._located[tp] == dest or moving == dest:
                return
            path = os.path.join(dest, future_dir_name(topic, p))
            try:
                future = self._open_future(part, path)
            except BaseException:
                shutil.rmtree(path, ignore_errors=True)     # a start would resume a move left here
                raise
            self._mover.add(part, future)
            log.info("moving the replica of %s-%d from %s to %s", topic, p, self._located[tp], dest)

    def _replace_with_future(self, part: Partition, future: Log) -> bool:
        """The mover's last step: swap the caught-up future log in (node lock, then the log's); False while the
        current log has offsets the future lacks."""
        tp = (part.topic, part.index)
        with self._lock:
            if self._closed or self._partitions.get(tp) is not part or self._mover.logs().get(tp) is not future:
                return False
            old_dir, new_dir = self._located[tp], os.path.dirname(future.path)
            retired = os.path.join(old_dir, delete_dir_name(*tp))
            if not part.log.replace_with_future(future, retired, os.path.join(new_dir, f"{tp[0]}-{tp[1]}")):
                return False
            self._mover.forget(tp)
            self._located[tp] = new_dir
            self._delete_dirs([retired], f"delete moved log {tp[0]}-{tp[1]}")
            log.info("the replica of %s-%d moved from %s to %s", tp[0], tp[1], old_dir, new_dir)
            return True

    def fail_log_dir(self, error: StorageError) -> None:
        """A log directory failed and the cluster member stops (Broker.log_dir_failed, on a full disk): as in
        Kafka's offline log directory, every later produce to this node is refused with KAFKA_STORAGE_ERROR before
        a log is read (no sequence check: the retry of a batch the failed write lost must not be answered
        OUT_OF_ORDER_SEQUENCE_NUMBER, which makes an idempotent client bump its epoch and send again under the
        new one batches it cannot tell were stored, on every partition). The first failure is kept."""
        if self.log_dir_failure is None:
            self.log_dir_failure = error

    # -- producers ----------------------------------------------------------------------------------------------

    def init_producer_id(self) -> int:
        """A producer id never handed out before by this data directory (ids are reserved in persisted blocks)."""
        with self._lock:
            self._check_open()
            if getattr(self, "_pid_next", None) is None or self._pid_next >= self._pid_end:
                path = os.path.join(self.path, PRODUCER_ID_FILE)
                rows = read_checkpoint(path, 2) or [["next", "0"]]
                start = int(rows[0][1])
                write_checkpoint(path, [("next", start + PRODUCER_ID_BLOCK)])
                self._pid_next, self._pid_end = start, start + PRODUCER_ID_BLOCK
            pid = self._pid_next
            self._pid_next += 1
            return pid

    def write_txn_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                         coordinator_epoch: int) -> int:
        """Append a transaction's COMMIT / ABORT marker to a partition (this node leads it); returns its offset.
        Waiting for the replicas is the caller's (markers go with acks=all). Raises UnknownTopicOrPartitionError,
        InvalidProducerEpochError, TransactionCoordinatorFencedError, StorageError."""
        part = self.partition(topic, partition)
        offset = part.log.append_control(producer_id, producer_epoch, commit, coordinator_epoch)
        self._data_arrived(part)       # the LSO moved: read_committed fetchers waiting may read on
        return offset

    # -- waiting for data --------------------------------------------------------------------------------------

    def _data_arrived(self, part: Partition) -> None:
        with self._data:
            self._data_version += 1
            self._data.notify_all()
        for fn in self._listeners:
            fn(part)

    def data_version(self) -> int:
        """A counter that grows on every append; pass it to wait_for_data to wait for the next one."""
        return self._data_version

    def wait_for_data(self, since_version: int, timeout: float) -> bool:
        """Block until something was appended after `since_version` (True) or timeout seconds pass (False)."""
        deadline = time.monotonic() + timeout
        with self._data:
            while self._data_version == since_version:
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    return False
                self._data.wait(left)
            return True

    def add_listener(self, fn: Callable[[Partition], None]) -> None:
        """Call fn(partition) after every append (from the appending thread: keep it short)."""
        self._listeners = self._listeners + [fn]

    def remove_listener(self, fn: Callable[[Partition], None]) -> None:
        self._listeners = [f for f in self._listeners if f is not fn]

    # -- groups -----------------------------------------------------------------------------------------------

    @property
    def group_coordinator(self):
        """The group coordinator of this node, with offsets in __consumer_offsets (created on first use)."""
        with self._lock:
            self._check_open()
            if self._coordinator is None:
                c = self.config
                cfg = GroupConfig(min_session_timeout_ms=c.group_min_session_timeout_ms,
                                  max_session_timeout_ms=c.group_max_session_timeout_ms,
                                  initial_rebalance_delay_ms=c.group_initial_rebalance_delay_ms,
                                  max_size=c.group_max_size,
                                  consumer_session_timeout_ms=c.group_consumer_session_timeout_ms,
                                  consumer_min_session_timeout_ms=c.group_consumer_min_session_timeout_ms,
                                  consumer_max_session_timeout_ms=c.group_consumer_max_session_timeout_ms,
                                  consumer_heartbeat_interval_ms=c.group_consumer_heartbeat_interval_ms,
                                  consumer_min_heartbeat_interval_ms=c.group_consumer_min_heartbeat_interval_ms,
                                  consumer_max_heartbeat_interval_ms=c.group_consumer_max_heartbeat_interval_ms,
                                  consumer_max_size=c.group_consumer_max_size,
                                  consumer_assignors=tuple(c.group_consumer_assignors),
                                  consumer_migration_policy=c.group_consumer_migration_policy)
                led = set(self._offsets_led) if self.cluster_managed else None
                self._coordinator = GroupCoordinator(LogOffsetStore(self, led), cfg, topics=self._group_topics,
                                                     topic_ids=self._group_topic_ids)
            return self._coordinator

    # -- transactions -------------------------------------------------------------------------------------------

    @property
    def txn_coordinator(self) -> TransactionCoordinator:
        """The transaction coordinator of this node (created on first use, with __transaction_state). A lone
        node coordinates every transactional id; a cluster member those of the state partitions it leads."""
        with self._lock:
            self._check_open()
            if self._txn_coordinator is None:
                info = (self.topic(TRANSACTION_STATE_TOPIC) if self.cluster_managed
                        else self.ensure_topic(TRANSACTION_STATE_TOPIC))
                store = TransactionStateStore(info.partitions, lambda p: self.partition(TRANSACTION_STATE_TOPIC, p),
                                              self.replication_waiter)
                offsets_partitions = self.config.offsets_topic_num_partitions
                coord = TransactionCoordinator(
                    self.config, store, self.marker_channel_factory(self), new_producer_id=self.new_producer_id,
                    offsets_partition=lambda group: partition_for_group(group, offsets_partitions),
                    partition_exists=self._partition_exists)
                led = dict(self._txn_led) if self.cluster_managed else {
                    p: self.partition(TRANSACTION_STATE_TOPIC, p).log.leader_epoch for p in range(info.partitions)}
                for p, epoch in led.items():
                    coord.elected(p, epoch)
                self._txn_coordinator = coord
            return self._txn_coordinator

    def _group_topics(self) -> dict[str, int]:
        """Partition count of each topic consumer groups may subscribe to (internal topics left out)."""
        return {name: info.partitions for name, info in list(self._topics.items()) if not info.internal}

    def _group_topic_ids(self) -> dict[str, uuid.UUID]:
        """The id of each topic consumer groups may subscribe to (their records name topics by id)."""
        return {name: info.topic_id for name, info in list(self._topics.items()) if not info.internal}

    def _partition_exists(self, topic: str, p: int) -> bool:
        """Whether the topic partition exists (in a cluster member: in the cluster, hosted here or not)."""
        info = self._topics.get(topic)
        return info is not None and 0 <= p < info.partitions

    def _txn_leadership_changed(self, part: Partition, leader: bool) -> None:
        with self._lock:
            if leader:
                self._txn_led[part.index] = part.log.leader_epoch
            else:
                self._txn_led.pop(part.index, None)
            coord = self._txn_coordinator
        if coord is None:
            if leader:                              # prepared transactions there must be finished: start it
                try:
                    self.txn_coordinator
                except (LogClosedError, UnknownTopicOrPartitionError) as e:
                    log.info("transaction coordinator not started for %s: %s", part, e)
            return                                  # made now or later, it loads the partitions led by then
        if leader:
            coord.elected(part.index, part.log.leader_epoch)
        else:
            coord.resigned(part.index)

    def verify_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                           partitions: list[tuple[str, int]]) -> dict:
        """KIP-890: {partition: None or its error} from the transactional id's coordinator (this node's, or the
        cluster's through ``transaction_verifier``)."""
        if self.transaction_verifier is not None:
            return self.transaction_verifier(transactional_id, producer_id, producer_epoch, partitions)
        return self.txn_coordinator.verify(transactional_id, producer_id, producer_epoch, partitions)

    def transaction_offsets_completed(self, partition: int, producer_id: int, commit: bool) -> None:
        """A marker was written to __consumer_offsets-`partition`: the producer's transactional offset commits of
        that partition's groups become visible (commit) or are dropped (abort)."""
        with self._lock:
            coord = self._coordinator
        if coord is not None:
            coord.transaction_completed(partition, producer_id, commit)

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync every partition."""
        for part in list(self._partitions.values()):
            part.log.flush()

    def _close_partitions(self) -> None:
        """Close every log, each whatever the others did. A log whose close fails (a full or failing disk) keeps
        no clean-shutdown marker, so the next start recovers it from its segments; one ERROR line sums them up."""
        parts = list(self._partitions.values())
        failed: list[tuple[Partition, Exception]] = []
        for part in parts:
            try:
                part.log.close()
            except StorageError as e:
                failed.append((part, e))
                log.warning("closing %s-%d failed: %s", part.topic, part.index, e)
            except Exception as e:
                failed.append((part, e))
                log.exception("closing %s failed", part)
        self._partitions.clear()
        if failed:
            (first, error), dirs = failed[0], ", ".join(self.log_dirs)
            log.error("%d of %d logs in %s were not closed cleanly (first: %s-%d: %s); the next start recovers "
                      "them from their segments", len(failed), len(parts), dirs, first.topic, first.index, error)

    def close(self) -> None:
        """Stop the group coordinator, close every log cleanly, release the directories. Idempotent."""
        self._mover.close()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._coordinator is not None:
                self._coordinator.close()
            if self._txn_coordinator is not None:
                self._txn_coordinator.close()
            self._close_partitions()
            self._dirs.release()
        with self._data:
            self._data.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> "Node":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self):
        return f"Node({self.path!r}, {len(self._topics)} topics)"


"""The cluster as a lone broker (no ZooKeeper) sees it: it is every partition's only replica and leader,
the controller and every group's coordinator.

The request handlers ask a view (this one, or the replicated cluster's) for everything that depends on
cluster membership: brokers, leaders, replicas and in-sync replicas, leader checks, acks waiting, topic
administration. Swapping the view is all that turns a single broker into a cluster member.
"""

from __future__ import annotations

import threading
import uuid

from ..cluster.controller import check_reassignment
from ..cluster.metastore import ReplicaAssignment
from ..cluster.placement import validate_assignment, validate_new_partitions
from ..dynamic_config import CLUSTER_WIDE, DEFAULT_ENTITY, PER_BROKER_ONLY, read_stored, write_stored
from ..errors import (FencedLeaderEpochError, InvalidPartitionsError, InvalidReplicationFactorError,
                      NoReassignmentInProgressError, NotEnoughReplicasError,
                      NotLeaderOrFollowerError, SeglogError, TopicAlreadyExistsError, UnknownLeaderEpochError,
                      UnknownTopicOrPartitionError)
from ..replication.throttle import ALTER_LOG_DIRS_RATE_KEY, rates_for_broker
from ..topic_ids import TopicIds
from ..topic_names import validate_topic_name


class LocalView:
    def __init__(self, node, broker_id: int, host: str, port: int, address=None):
        """`address()`, if given, is the (host, port) to tell the client of the request being handled (the
        advertised address of the listener it came in on); else always (host, port)."""
        self.node = node
        self.broker_id = broker_id
        self._address = address or (lambda: (host, port))
        self._ids = TopicIds(self.topic_names, self._id_of)
        self._configs_lock = threading.Lock()
        self._apply_stored(read_stored(node.path))      # the dynamic configs set before a restart

    dynamic_names = CLUSTER_WIDE | PER_BROKER_ONLY | {ALTER_LOG_DIRS_RATE_KEY}
    """The broker configs a lone broker changes at run time (seglog.dynamic_config; the copy rate of replicas
    moving between its log directories, seglog.log_dir_mover). Not the replication throttled rates: nothing to
    replicate."""

    @property
    def host(self) -> str:
        return self._address()[0]

    @property
    def port(self) -> int:
        return self._address()[1]

    def brokers(self) -> list[dict]:
        return [{"node_id": self.broker_id, "host": self.host, "port": self.port, "rack": None}]

    def controller_id(self) -> int:
        return self.broker_id

    def partition_metadata(self, topic: str, p: int) -> dict:
        part = self.node.partition(topic, p)
        return {"error_code": 0, "partition_index": p, "leader_id": self.broker_id,
                "leader_epoch": part.log.leader_epoch, "replica_nodes": [self.broker_id],
                "isr_nodes": [self.broker_id], "offline_replicas": []}

    def topic_names(self) -> list[str]:
        return self.node.topics(include_internal=True)

    def topic_id(self, name: str) -> uuid.UUID:
        """UnknownTopicOrPartitionError if there is no such topic."""
        return self.node.topic(name).topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str:
        """UnknownTopicIdError if no topic has that id."""
        return self._ids.name(topic_id)

    def _id_of(self, name: str) -> uuid.UUID | None:
        try:
            return self.node.topic(name).topic_id
        except UnknownTopicOrPartitionError:
            return None

    def topic_partitions(self, name: str) -> tuple[int, bool]:
        """(partition count, internal); UnknownTopicOrPartitionError if there is no such topic."""
        info = self.node.topic(name)
        return info.partitions, info.internal

    def topic_overrides(self, name: str) -> dict[str, str]:
        return dict(self.node.topic(name).overrides)

    def ensure_topic(self, name: str) -> tuple[int, bool]:
        info = self.node.ensure_topic(name)
        return info.partitions, info.internal

    def check_produce(self, topic: str, p: int, acks: int) -> None:
        """Raise NotLeaderOrFollowerError unless this broker leads the partition (a lone broker leads all),
        NotEnoughReplicasError if acks=all cannot be met: the ISR is this one replica, so as in Kafka a topic
        whose min.insync.replicas is above 1 refuses acks=all writes."""
        part = self.node.partition(topic, p)
        if acks == -1 and part.log.config.min_insync_replicas > 1:
            raise NotEnoughReplicasError(f"{topic}-{p}: ISR [{self.broker_id}] is smaller than "
                                         f"min.insync.replicas={part.log.config.min_insync_replicas}")

    def check_fetch(self, topic: str, p: int, current_leader_epoch: int, replica: bool) -> None:
        """Leader and epoch checks of a fetch (KIP-320): a client's epoch older than the leader's is fenced,
        a newer one is unknown. A lone broker has no followers, so replica fetches are refused."""
        part = self.node.partition(topic, p)
        if replica:
            raise NotLeaderOrFollowerError(f"broker {self.broker_id} has no replicas of {topic}-{p} to serve")
        if current_leader_epoch >= 0:
            epoch = part.log.leader_epoch
            if current_leader_epoch < epoch:
                raise FencedLeaderEpochError(f"{topic}-{p}: leader epoch {current_leader_epoch} < {epoch}")
            if current_leader_epoch > epoch:
                raise UnknownLeaderEpochError(f"{topic}-{p}: leader epoch {current_leader_epoch} > {epoch}")

    async def wait_for_acks(self, part, last_offset: int, acks: int, timeout_ms: int) -> None:
        """acks=all waits for the in-sync replicas; the only replica here already has the batch."""

    def follower_fetched(self, part, replica_id: int, fetch_offset: int, log_start_offset: int) -> None:
        raise NotLeaderOrFollowerError("a lone broker has no followers")

    def replication_throttle(self, topic: str, p: int, replica_id: int) -> tuple[bool, bool]:
        """(throttled, hold back): a lone broker has no followers to throttle."""
        return False, False

    def record_replication(self, nbytes: int) -> None:
        """Nothing to record: see replication_throttle."""

    def alter_broker_config(self, name: str, change, validate_only: bool = False) -> None:
        """Replace the dynamic configs of this broker (`name` its id; "": the default) with ``change(current)``,
        checked as Kafka checks them (InvalidRequestError, nothing stored), then stored in its (first) data
        directory and applied at once."""
        path = f"brokers/{name or DEFAULT_ENTITY}"
        with self._configs_lock:
            stored = read_stored(self.node.path)
            new = change(dict(stored.get(path, {})))
            self.node.dynamic.validate(name, new, self.dynamic_names, PER_BROKER_ONLY)
            if validate_only:
                return
            stored[path] = new
            write_stored(self.node.path, stored)
            self._apply_stored(stored)

    def _apply_stored(self, stored: dict[str, dict[str, str]]) -> None:
        self.node.dynamic.apply(stored.get(f"brokers/{DEFAULT_ENTITY}", {}),
                                stored.get(f"brokers/{self.broker_id}", {}))
        rate = rates_for_broker(stored, self.broker_id).get(ALTER_LOG_DIRS_RATE_KEY)
        self.node.replica_alter_log_dirs_rate = None if rate is None else rate[0]

    def init_producer_id(self) -> int:
        return self.node.init_producer_id()

    def coordinator_for(self, group_id: str) -> tuple[int, str, int]:
        return self.broker_id, self.host, self.port

    def txn_coordinator_for(self, transactional_id: str) -> tuple[int, str, int]:
        """A lone broker coordinates every transactional id (its transaction coordinator, with
        __transaction_state, starts on this first request, as Kafka creates the topic then)."""
        self.node.txn_coordinator
        return self.broker_id, self.host, self.port

    def check_coordinator(self, group_id: str) -> None:
        """Raise NotCoordinatorError unless this broker coordinates the group (a lone broker does all)."""

    def create_topic(self, name: str, partitions: int | None, configs: dict, replication_factor: int | None,
                     validate_only: bool = False, timeout_ms: int = 0,
                     assignment: dict[int, list[int]] | None = None) -> None:
        """Create the topic (at once: ``timeout_ms``, how long a cluster waits for leaders, has nothing to wait
        for here). A manual ``assignment`` can only name this broker, once per partition."""
        if assignment is not None:
            partitions = len(validate_assignment(assignment, [self.broker_id]))
            replication_factor = 1
        if validate_only:
            validate_topic_name(name)
            if name in self.node.topics(include_internal=True):
                raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
            if partitions is not None and partitions < 1:
                raise InvalidPartitionsError(f"Number of partitions must be larger than 0, not {partitions}.")
            if replication_factor is not None and replication_factor > 1:
                raise InvalidReplicationFactorError(
                    f"Replication factor: {replication_factor} larger than available brokers: 1.")
            self.node.config.log_config().with_kafka(configs)
            return
        self.node.create_topic(name, partitions, configs, replication_factor)

    def delete_topic(self, name: str) -> None:
        self.node.delete_topic(name)

    def alter_topic_config(self, name: str, overrides: dict[str, str], validate_only: bool = False) -> None:
        """Make `overrides` the topic's complete set of config overrides (InvalidConfigError: nothing changes)."""
        old = self.node.topic(name).overrides
        self.node.alter_topic_config(name, overrides, [k for k in old if k not in overrides],
                                     validate_only=validate_only)

    def elect_leaders(self, partitions, unclean: bool):
        """ElectLeaders: never needed on a lone broker (Node.elect_leaders)."""
        return self.node.elect_leaders(partitions, unclean)

    def alter_partition_reassignments(self, changes: dict[tuple[str, int], list[int] | None]
                                      ) -> dict[tuple[str, int], SeglogError | None]:
        """What Kafka's controller answers in a one-broker cluster: this broker is every partition's one replica,
        so the only target it accepts is itself (nothing to move); any other broker id is not alive
        (INVALID_REPLICA_ASSIGNMENT), and no reassignment is ever in progress to cancel."""
        out: dict[tuple[str, int], SeglogError | None] = {}
        for (topic, p), target in changes.items():
            try:
                exists = self._has_partition(topic, p)
                if target is None:
                    raise NoReassignmentInProgressError(f"No reassignment is in progress for {topic}-{p}")
                check_reassignment(target, ReplicaAssignment((self.broker_id,)) if exists else None,
                                   {self.broker_id})
                if not exists:
                    raise UnknownTopicOrPartitionError("The partition does not exist.")
                out[(topic, p)] = None
            except SeglogError as e:
                out[(topic, p)] = e
        return out

    def list_partition_reassignments(self, partitions) -> dict:
        """None: a lone broker never has a reassignment under way."""
        return {}

    def _has_partition(self, topic: str, p: int) -> bool:
        try:
            return 0 <= p < self.node.topic(topic).partitions
        except UnknownTopicOrPartitionError:
            return False

    def create_partitions(self, name: str, count: int, validate_only: bool = False, timeout_ms: int = 0,
                          assignments: list[list[int]] | None = None) -> None:
        """Grow the topic to `count` partitions. Manual ``assignments`` (one replica list per new partition) can
        only name this broker, once per partition."""
        info = self.node.topic(name)
        if count <= info.partitions:
            raise InvalidPartitionsError(f"Topic currently has {info.partitions} partitions, which is higher "
                                         f"than or equal to the requested {count}.")
        if assignments is not None:
            validate_new_partitions(assignments, info.partitions, count, 1, [self.broker_id])
        if validate_only:
            return
        self.node.create_partitions(name, count)

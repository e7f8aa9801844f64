"""An in-process MetadataStore with ZooKeeper's semantics, for tests and single-process clusters.

A :class:`MemoryCluster` plays the ensemble: one lock guards all its state, and every change makes every
connected store refresh its watches and candidacy on that store's event thread. Each
:class:`MemoryMetadataStore` is one session; ``expire_session()`` expires it as a ZooKeeper server would
(ephemerals deleted, EXPIRED then NEW_SESSION). The ZooKeeper-only SUSPENDED/RECONNECTED events never occur.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import replace
from typing import Callable, Mapping, Sequence

from ..errors import (InvalidArgumentError, InvalidTopicError, LogClosedError, StaleControllerEpochError,
                      TopicAlreadyExistsError, UnknownTopicOrPartitionError)
from ..topic_names import validate_topic_name
from .events import EventThread, Subscription, Watch
from .metastore import (AclKey, BrokerInfo, ControllerChange, ControllerEpoch, InvalidUpdateVersionError, MetadataStore,
                        PartitionState, ReplicaAssignment, SessionEvent, TopicAssignment, validate_isr_update,
                        validate_new_partitions, topic_config, validate_partition_state)

__all__ = ["MemoryCluster", "MemoryMetadataStore"]


class MemoryCluster:
    """The shared state: cluster id, brokers (with owning session), controller claim, controller epoch record,
    topics, configs, deletion marks and partition states. Guarded by ``lock``; stores change it directly."""

    def __init__(self):
        self.lock = threading.RLock()
        self.stores: list[MemoryMetadataStore] = []
        self.brokers: dict[int, tuple[BrokerInfo, int]] = {}     # id -> (info, owner session)
        self.shutting_down: dict[int, tuple[int, int]] = {}      # id -> (broker epoch, owner session)
        self.controller: tuple[int, int] | None = None            # (broker id, owner session)
        self.controller_epoch = 0
        self.controller_epoch_version = 0
        self.topics: dict[str, TopicAssignment] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.deletions: set[str] = set()
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.next_producer_id = 0
        self.acls: dict[tuple[str, str, str], list[dict]] = {}
        self.entity_configs: dict[str, dict[str, str]] = {}      # client quotas by entity path
        self.cluster_id: str | None = None
        self._zxid = itertools.count(1)
        self._session_ids = itertools.count(1)

    def next_zxid(self) -> int:
        """A number larger than any handed out before (ZooKeeper's transaction id); broker epochs use it."""
        return next(self._zxid)

    def new_session_id(self) -> int:
        return next(self._session_ids)

    def changed(self) -> None:
        """Make every store refresh its watches. Call with ``lock`` held, after a change."""
        for store in self.stores:
            store.on_cluster_change()

    def drop_session(self, session_id: int) -> None:
        """Delete the ephemerals the session owns. Call with ``lock`` held."""
        for broker_id, (_, owner) in list(self.brokers.items()):
            if owner == session_id:
                del self.brokers[broker_id]
        for broker_id, (_, owner) in list(self.shutting_down.items()):
            if owner == session_id:
                del self.shutting_down[broker_id]
        if self.controller is not None and self.controller[1] == session_id:
            self.controller = None

    def check_controller(self, controller: ControllerEpoch) -> None:
        """StaleControllerEpochError unless ``controller`` is the latest winner's token. Call with ``lock`` held."""
        if controller.version != self.controller_epoch_version:
            raise StaleControllerEpochError(
                f"Controller epoch {controller.epoch} of broker {controller.broker_id} is stale: the current "
                f"epoch is {self.controller_epoch}")


class MemoryMetadataStore(MetadataStore):
    """One session on a :class:`MemoryCluster`. Thread-safe; see ``MetadataStore`` for the semantics."""

    def __init__(self, cluster: MemoryCluster):
        self._cluster = cluster
        self._closed = False
        self._watches: list[Watch] = []
        self._session_listeners: list[Subscription] = []
        self._candidacy: Watch | None = None
        with cluster.lock:
            self._session_id = cluster.new_session_id()
            cluster.stores.append(self)
        self._events = EventThread(f"seglog-metastore-memory-{self._session_id}")

    # --- session -----------------------------------------------------------------------------------------

    def expire_session(self) -> None:
        """Expire the session now, as the server would after a long pause: ephemerals deleted, candidacy
        ended; then a new session. Events are delivered afterwards on the event thread."""
        with self._cluster.lock:
            self._check_open()
            self._cluster.drop_session(self._session_id)
            self._session_id = self._cluster.new_session_id()
            candidacy, self._candidacy = self._candidacy, None
            if candidacy is not None:
                self._events.submit(candidacy.finish, ControllerChange(None))
            self._events.submit(self._notify_session, SessionEvent.EXPIRED)
            self._events.submit(self._notify_session, SessionEvent.NEW_SESSION)
            self._cluster.changed()

    def close(self) -> None:
        with self._cluster.lock:
            if self._closed:
                return
            self._closed = True
            self._cluster.stores.remove(self)
            self._cluster.drop_session(self._session_id)
            for subscription in [*self._watches, *self._session_listeners, *filter(None, [self._candidacy])]:
                subscription.cancel()
            self._cluster.changed()
        self._events.stop()

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError("The metadata store is closed")

    def _watch(self, compute: Callable[[], object], callback: Callable) -> Watch:
        """A watch of ``compute()`` (run under the cluster lock), delivered on the event thread."""

        def locked_compute():
            with self._cluster.lock:
                self._check_open()
                return compute()

        with self._cluster.lock:
            self._check_open()
            watch = Watch(locked_compute, callback)
            self._watches.append(watch)
            self._events.submit(watch.refresh)
        return watch

    def on_cluster_change(self) -> None:
        """Queue a refresh of every watch and the candidacy (the cluster calls this, lock held, on any change)."""
        self._watches = [w for w in self._watches if not w.cancelled]
        for watch in self._watches:
            self._events.submit(watch.refresh)
        if self._candidacy is not None:
            self._events.submit(self._candidacy.refresh)

    # --- cluster id ---------------------------------------------------------------------------------------

    def get_or_create_cluster_id(self, proposed: str) -> str:
        if not isinstance(proposed, str) or not proposed:
            raise InvalidArgumentError("A cluster id must be a non-empty string")
        with self._cluster.lock:
            self._check_open()
            if self._cluster.cluster_id is None:
                self._cluster.cluster_id = proposed
                self._cluster.changed()
            return self._cluster.cluster_id

    # --- brokers -------------------------------------------------------------------------------------------

    def register_broker(self, info: BrokerInfo, *, take_over: bool = False) -> BrokerInfo:
        with self._cluster.lock:
            self._check_open()
            existing = self._cluster.brokers.get(info.id)
            if existing is not None and existing[1] != self._session_id:
                previous, owner = existing
                if not take_over or (previous.host, previous.port) != (info.host, info.port):
                    raise InvalidArgumentError(f"Broker id {info.id} is already registered by another live session")
                if self._cluster.controller is not None and self._cluster.controller[1] == owner:
                    self._cluster.controller = None
            registered = replace(info, epoch=self._cluster.next_zxid())
            self._cluster.brokers[info.id] = (registered, self._session_id)
            self._cluster.changed()
            return registered

    def update_broker(self, info: BrokerInfo) -> None:
        with self._cluster.lock:
            self._check_open()
            existing = self._cluster.brokers.get(info.id)
            if existing is None or existing[1] != self._session_id:
                raise InvalidArgumentError(f"Broker id {info.id} is not registered by this session")
            self._cluster.brokers[info.id] = (replace(info, epoch=existing[0].epoch), self._session_id)
            self._cluster.changed()

    def list_brokers(self) -> dict[int, BrokerInfo]:
        with self._cluster.lock:
            self._check_open()
            return {broker_id: info for broker_id, (info, _) in sorted(self._cluster.brokers.items())}

    def watch_brokers(self, callback: Callable[[dict[int, BrokerInfo]], None]) -> Subscription:
        return self._watch(self.list_brokers, callback)

    def request_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> None:
        with self._cluster.lock:
            self._check_open()
            self._cluster.shutting_down[broker_id] = (broker_epoch, self._session_id)
            self._cluster.changed()

    def brokers_shutting_down(self) -> dict[int, int]:
        with self._cluster.lock:
            self._check_open()
            return {b: epoch for b, (epoch, _) in sorted(self._cluster.shutting_down.items())}

    def watch_brokers_shutting_down(self, callback: Callable[[dict[int, int]], None]) -> Subscription:
        return self._watch(self.brokers_shutting_down, callback)

    # --- controller ---------------------------------------------------------------------------------------

    def elect_controller(self, broker_id: int,
                         on_change: Callable[[ControllerChange], None]) -> ControllerEpoch | None:
        with self._cluster.lock:
            self._check_open()
            if self._candidacy is not None:
                raise InvalidArgumentError("This session is already a controller candidate")
            candidacy = Watch(lambda: self._claim_or_observe(broker_id, candidacy), on_change)
            self._candidacy = candidacy
            change = self._claim_or_observe(broker_id, candidacy)
            self._events.submit(candidacy.refresh)
            return change.lease

    def _claim_or_observe(self, broker_id: int, candidacy: Watch) -> ControllerChange:
        """Claim the controller if vacant; then who holds it, with the token if it is this session. An ended
        candidacy claims nothing and sees ``ControllerChange(None)``."""
        cluster = self._cluster
        with cluster.lock:
            self._check_open()
            if candidacy is not self._candidacy:
                return ControllerChange(None)
            if cluster.controller is None:
                cluster.controller = (broker_id, self._session_id)
                cluster.controller_epoch += 1
                cluster.controller_epoch_version += 1
                cluster.next_zxid()
                cluster.changed()
            controller_id, owner = cluster.controller
            if owner != self._session_id:
                return ControllerChange(controller_id)
            return ControllerChange(controller_id, ControllerEpoch(controller_id, cluster.controller_epoch,
                                                                   cluster.controller_epoch_version))

    def resign_controller(self) -> None:
        with self._cluster.lock:
            self._check_open()
            if self._candidacy is not None:
                self._candidacy.cancel()
                self._candidacy = None
            if self._cluster.controller is not None and self._cluster.controller[1] == self._session_id:
                self._cluster.controller = None
                self._cluster.changed()

    def get_controller(self) -> int | None:
        with self._cluster.lock:
            self._check_open()
            return None if self._cluster.controller is None else self._cluster.controller[0]

    # --- topics -------------------------------------------------------------------------------------------

    def create_topic(self, assignment: TopicAssignment, config: Mapping[str, str] | None = None) -> None:
        validate_topic_name(assignment.topic)
        validate_new_partitions(0, assignment.partitions)
        with self._cluster.lock:
            self._check_open()
            if assignment.topic in self._cluster.topics:
                raise TopicAlreadyExistsError(f"Topic '{assignment.topic}' already exists")
            self._cluster.topics[assignment.topic] = assignment
            self._cluster.configs[assignment.topic] = topic_config(config)
            self._cluster.changed()

    def list_topics(self) -> list[str]:
        with self._cluster.lock:
            self._check_open()
            return sorted(self._cluster.topics)

    def get_topic(self, topic: str) -> TopicAssignment:
        with self._cluster.lock:
            self._check_open()
            return self._topic(topic)

    def _topic(self, topic: str) -> TopicAssignment:
        try:
            return self._cluster.topics[topic]
        except KeyError:
            raise UnknownTopicOrPartitionError(f"Unknown topic '{topic}'") from None

    def add_partitions(self, topic: str, partitions: Mapping[int, Sequence[int]]) -> TopicAssignment:
        with self._cluster.lock:
            self._check_open()
            current = self._topic(topic)
            if topic in self._cluster.deletions:
                raise InvalidTopicError(f"Topic '{topic}' is marked for deletion")
            validate_new_partitions(len(current.partitions), partitions)
            extended = replace(current, partitions={**current.partitions, **partitions})
            self._cluster.topics[topic] = extended
            self._cluster.changed()
            return extended

    def update_replica_assignments(self, topic: str, changes: Mapping[int, ReplicaAssignment],
                                   controller: ControllerEpoch) -> TopicAssignment:
        cluster = self._cluster
        with cluster.lock:
            self._check_open()
            cluster.check_controller(controller)
            updated = self._topic(topic).with_replicas(changes)
            cluster.topics[topic] = updated
            cluster.changed()
            return updated

    def get_topic_config(self, topic: str) -> dict[str, str]:
        with self._cluster.lock:
            self._check_open()
            self._topic(topic)
            return dict(self._cluster.configs[topic])

    def set_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        with self._cluster.lock:
            self._check_open()
            self._topic(topic)
            self._cluster.configs[topic] = topic_config(config)
            self._cluster.changed()

    def get_acls(self) -> dict[AclKey, list[dict]]:
        with self._cluster.lock:
            self._check_open()
            return {k: [dict(e) for e in v] for k, v in self._cluster.acls.items()}

    def update_acls(self, key: AclKey, change: Callable[[list[dict]], list[dict]]) -> None:
        with self._cluster.lock:
            self._check_open()
            entries = list(change([dict(e) for e in self._cluster.acls.get(key, [])]))
            if entries:
                self._cluster.acls[key] = entries
            else:
                self._cluster.acls.pop(key, None)
            self._cluster.changed()

    def watch_acls(self, callback: Callable[[dict[AclKey, list[dict]]], None]) -> Subscription:
        return self._watch(lambda: {k: [dict(e) for e in v] for k, v in self._cluster.acls.items()}, callback)

    def get_entity_configs(self) -> dict[str, dict[str, str]]:
        with self._cluster.lock:
            self._check_open()
            return {p: dict(c) for p, c in self._cluster.entity_configs.items() if c}

    def update_entity_configs(self, entity_path: str, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        with self._cluster.lock:
            self._check_open()
            self._cluster.entity_configs[entity_path] = dict(change(dict(self._cluster.entity_configs.get(
                entity_path, {}))))
            self._cluster.changed()

    def watch_entity_configs(self, callback: Callable[[dict[str, dict[str, str]]], None]) -> Subscription:
        return self._watch(lambda: {p: dict(c) for p, c in self._cluster.entity_configs.items() if c}, callback)

    def allocate_producer_ids(self, broker_id: int, count: int) -> int:
        if count < 1:
            raise InvalidArgumentError("count must be at least 1")
        with self._cluster.lock:
            self._check_open()
            start = self._cluster.next_producer_id
            self._cluster.next_producer_id += count
            return start

    def mark_topic_for_deletion(self, topic: str) -> None:
        with self._cluster.lock:
            self._check_open()
            self._topic(topic)
            self._cluster.deletions.add(topic)
            self._cluster.changed()

    def topics_marked_for_deletion(self) -> list[str]:
        with self._cluster.lock:
            self._check_open()
            return sorted(self._cluster.deletions)

    def delete_topic(self, topic: str, controller: ControllerEpoch) -> None:
        cluster = self._cluster
        with cluster.lock:
            self._check_open()
            cluster.check_controller(controller)
            self._topic(topic)
            del cluster.topics[topic]
            del cluster.configs[topic]
            cluster.deletions.discard(topic)
            for key in [key for key in cluster.states if key[0] == topic]:
                del cluster.states[key]
            cluster.changed()

    def watch_topics(self, callback: Callable[[list[str]], None]) -> Subscription:
        return self._watch(self.list_topics, callback)

    def watch_topic(self, topic: str, callback: Callable[[TopicAssignment | None], None]) -> Subscription:
        return self._watch(lambda: self._cluster.topics.get(topic), callback)

    def watch_topic_config(self, topic: str,
                           callback: Callable[[dict[str, str] | None], None]) -> Subscription:
        return self._watch(lambda: dict(self._cluster.configs[topic]) if topic in self._cluster.configs else None,
                           callback)

    def watch_topic_deletions(self, callback: Callable[[list[str]], None]) -> Subscription:
        return self._watch(self.topics_marked_for_deletion, callback)

    # --- partition state -------------------------------------------------------------------------------

    def create_partition_states(self, topic: str, states: Mapping[int, PartitionState],
                                controller: ControllerEpoch) -> dict[int, PartitionState]:
        for state in states.values():
            validate_partition_state(state)
        cluster = self._cluster
        with cluster.lock:
            self._check_open()
            cluster.check_controller(controller)
            assignment = self._topic(topic)
            for partition in states:
                if partition not in assignment.partitions:
                    raise UnknownTopicOrPartitionError(f"Topic '{topic}' has no partition {partition}")
                if (topic, partition) in cluster.states:
                    raise InvalidUpdateVersionError(f"Partition {topic}-{partition} already has a state")
            written = cluster.next_zxid()
            created = {p: replace(s, controller_epoch=controller.epoch, version=0, written=written)
                       for p, s in sorted(states.items())}
            for partition, state in created.items():
                cluster.states[topic, partition] = state
            cluster.changed()
            return created

    def get_partition_state(self, topic: str, partition: int) -> PartitionState:
        with self._cluster.lock:
            self._check_open()
            return self._state(topic, partition)

    def _state(self, topic: str, partition: int) -> PartitionState:
        try:
            return self._cluster.states[topic, partition]
        except KeyError:
            raise UnknownTopicOrPartitionError(f"Partition {topic}-{partition} has no state") from None

    def get_partition_states(self, topic: str) -> dict[int, PartitionState]:
        with self._cluster.lock:
            self._check_open()
            return {p: s for (t, p), s in sorted(self._cluster.states.items()) if t == topic}

    def update_partition_state(self, topic: str, partition: int, state: PartitionState,
                               controller: ControllerEpoch) -> PartitionState:
        validate_partition_state(state, conditional=True)
        with self._cluster.lock:
            self._check_open()
            self._cluster.check_controller(controller)
            return self._compare_and_set(topic, partition, replace(state, controller_epoch=controller.epoch))

    def update_isr(self, topic: str, partition: int, base: PartitionState, isr: Sequence[int]) -> PartitionState:
        new = validate_isr_update(base, isr)
        with self._cluster.lock:
            self._check_open()
            return self._compare_and_set(topic, partition, new)

    def _compare_and_set(self, topic: str, partition: int, state: PartitionState) -> PartitionState:
        current = self._state(topic, partition)
        if current.version != state.version:
            raise InvalidUpdateVersionError(f"Partition {topic}-{partition} state is at version {current.version}, "
                                            f"not {state.version}")
        stored = replace(state, version=state.version + 1, written=self._cluster.next_zxid())
        self._cluster.states[topic, partition] = stored
        self._cluster.changed()
        return stored

    def watch_partition_state(self, topic: str, partition: int,
                              callback: Callable[[PartitionState | None], None]) -> Subscription:
        return self._watch(lambda: self._cluster.states.get((topic, partition)), callback)

"""A broker's membership in a cluster coordinated through a metadata store (ZooKeeper), and the cluster view
its request handlers use.

``ClusterMember.start()`` registers the broker (ephemeral), enters the controller election (running a
Controller while it wins), and watches brokers, topics, their configs and every partition state. Local
replicas follow the watched state through the ReplicaManager; topics are created locally exactly for the
partitions assigned to this broker. On session expiry the broker is fenced (leads and follows nothing) until
a new session is established and states are read again.

``ClusterView`` answers the handlers' questions from the watched metadata: brokers, leaders, ISR, who
coordinates a group, leader and epoch checks, and waits for acks=all through the leader's state.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
import uuid
from typing import Callable, Sequence

from ..dynamic_config import CLUSTER_WIDE, DEFAULT_ENTITY, PER_BROKER_ONLY
from ..errors import (CoordinatorNotAvailableError, FencedLeaderEpochError, InconsistentClusterIdError,
                      InvalidPartitionsError, InvalidTopicError, LeaderNotAvailableError,
                      ListenerNotFoundError, LogClosedError, NotControllerError, NotCoordinatorError,
                      RequestTimedOutError, SeglogError, TopicAlreadyExistsError, TopicDeletionDisabledError,
                      UnknownLeaderEpochError, UnknownTopicOrPartitionError)
from ..node import internal_topic_config
from ..offsets_format import OFFSETS_TOPIC
from ..topic_ids import TopicIds
from ..topic_names import validate_topic_name
from ..offsets_store import partition_for_group
from ..txn.log_format import TRANSACTION_STATE_TOPIC, partition_for_transactional_id
from ..replication.manager import ReplicaManager
from ..replication.throttle import (ALTER_LOG_DIRS_RATE_KEY, DYNAMIC_BROKER_KEYS, LEADER, ReplicationThrottles,
                                   rates_for_broker)
from ..security.client import inter_broker_security
from .controller import Controller, list_reassignments
from .metastore import (NO_LEADER, BrokerInfo, MalformedTopicError, PartitionState, ReplicaAssignment,
                        SessionEvent, TopicAssignment, new_cluster_id)
from .placement import assign_replicas, validate_assignment, validate_new_partitions
from .txn_routing import ClusterMarkerChannel, ClusterTxnVerifier

log = logging.getLogger("seglog.cluster")

PRODUCER_ID_BLOCK = 1000
CREATE_TIMEOUT_MS = 10_000
"""How long an auto-created topic (or an in-process caller) waits for its partitions' leaders."""
REJOIN_BACKOFF_S = 0.5
"""After a new metadata session, a failed step of rejoining the cluster is retried this often."""
OFFSETS_WARNING_INTERVAL_S = 60.0
"""While __consumer_offsets cannot be created (too few live brokers), the warning is logged once per this."""


class ClusterMember:
    """``host``/``port``: the inter-broker listener's advertised address; ``endpoints``: (listener, protocol,
    host, port) of every listener, registered so that each broker answers a client with the other brokers'
    addresses on the client's own listener; ``current_listener()``: the name of the listener the request being
    answered came in on (None outside a request: the inter-broker addresses)."""

    def __init__(self, node, config, store, host: str, port: int, *,
                 endpoints: Sequence[tuple[str, str, str, int]] = (),
                 current_listener: Callable[[], str | None] = lambda: None):
        self.node = node
        self.config = config
        self.store = store
        self.broker_id = config.broker_id
        self.host, self.port = host, port
        self.endpoints = tuple(endpoints)
        self.current_listener = current_listener
        self.security = inter_broker_security(config)   # every connection to another broker (and to itself) uses it
        self.brokers: dict[int, BrokerInfo] = {}
        self.assignments: dict[str, TopicAssignment] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.broker_configs: dict[str, dict[str, str]] = {}    # dynamic broker configs by entity path
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.controller_id: int | None = None
        self.controller: Controller | None = None
        self.shutting_down: dict[int, int] = {}       # brokers in controlled shutdown -> their broker epochs
        self._watches: dict[str, list] = {}
        self._topics_known = False                     # the topics watch delivered once
        self.unreadable: set[str] = set()              # listed topics whose assignment cannot be read (or is gone)
        self._closed = False
        self._abandoned = False                        # the broker was told to stop while starting
        self._state_watches: dict[tuple[str, int], object] = {}
        self._lock = threading.RLock()
        self._pid_next = self._pid_end = 0
        node.cluster_managed = True
        node.replication_waiter = self.wait_replicated
        self.txn_verifier = ClusterTxnVerifier(self)
        node.new_producer_id = self.init_producer_id
        node.marker_channel_factory = lambda _: ClusterMarkerChannel(self)
        node.transaction_verifier = self.txn_verifier
        self.throttles = ReplicationThrottles(self.broker_id, self.configs.get,
                                              samples=config.replication_quota_window_num,
                                              window_seconds=config.replication_quota_window_size_seconds)
        self.replicas = ReplicaManager(node, self.broker_id, config, store, self.broker_address, self.security,
                                       self.throttles)
        self.view = ClusterView(self)
        node.dynamic.add_hook(self._reconfigured)

    # -- lifecycle --------------------------------------------------------------------------------------------

    def start(self) -> None:
        self._adopt_cluster_id()
        self.store.add_session_listener(self._on_session)
        self._on_entity_configs(self.store.get_entity_configs())   # dynamic configs (addresses) before registering
        self._register()
        self._subs = [self.store.watch_brokers(self._on_brokers), self.store.watch_topics(self._on_topics),
                      self.store.watch_topic_deletions(lambda _: self._poke_controller("deletions")),
                      self.store.watch_brokers_shutting_down(self._on_shutting_down),
                      self.store.watch_entity_configs(self._on_entity_configs)]
        self._wait_for_metadata()

    def _wait_for_metadata(self) -> None:
        """Until the watches delivered what requests need: this broker among the live ones, a live controller,
        and every topic's assignment (a topic whose node cannot be read is left out; the broker serves only after this, as Kafka's loads its logs before its
        socket server takes requests and answers from a cache the controller fills whole). Assignments come one
        after the other on the store's event thread, each opening its partitions' logs (a recovery after
        kill -9 can take long). Not bounded: served earlier, a topic whose assignment is still loading would be
        answered UNKNOWN_TOPIC_OR_PARTITION, and librdkafka takes that for a deleted topic (its partition count
        drops to 0, its idempotent producer resets the sequences and bumps its epoch, re-sending stored
        batches). Logged every session timeout while it lasts; LogClosedError if the broker is closed or told to stop
        (abandon_start) meanwhile."""
        every = self.config.zookeeper_session_timeout_ms / 1000
        t0 = time.monotonic()
        next_log = t0 + every

        def ready() -> bool:
            with self._lock:
                return (self.broker_id in self.brokers and self.controller_id in self.brokers
                        and self._topics_known
                        and all(t in self.assignments or t in self.unreadable for t in self._watches))
        while not ready():
            if self._closed or self._abandoned:
                raise LogClosedError(f"broker {self.broker_id} {'closed' if self._closed else 'told to stop'} "
                                     f"while joining the cluster")
            if time.monotonic() > next_log:
                with self._lock:
                    loaded = sum(t in self.assignments or t in self.unreadable for t in self._watches)
                    known = len(self._watches)
                log.warning("broker %d: not serving yet after %.0f s, still loading the cluster's metadata "
                            "(registered %s, controller %s, %d of %s topics)", self.broker_id,
                            time.monotonic() - t0, self.broker_id in self.brokers, self.controller_id, loaded,
                            known if self._topics_known else "?")
                next_log += every
            time.sleep(0.01)

    def _adopt_cluster_id(self) -> None:
        """Every broker of a cluster reports the cluster's one id: the store's (made by the first broker to ask),
        recorded in this data directory. A directory of another cluster stops the start-up here."""
        cluster_id = self.store.get_or_create_cluster_id(new_cluster_id())
        try:
            self.node.adopt_cluster_id(cluster_id)
        except InconsistentClusterIdError as e:
            log.error("broker %d cannot join the cluster: %s", self.broker_id, e)
            self.close()
            raise

    def _register(self) -> None:
        """Register and enter the controller election."""
        self._register_broker()
        self.store.elect_controller(self.broker_id, self._on_controller_change)

    def readvertise(self, host: str, port: int, endpoints: Sequence[tuple[str, str, str, int]]) -> None:
        """New advertised addresses (a dynamic advertised.listeners): the registration is updated in place, its
        broker epoch kept (no bounce), and every broker's watch of the registrations answers clients with them.
        Before the first registration they are simply the ones it will register."""
        with self._lock:
            self.host, self.port, self.endpoints = host, port, tuple(endpoints)
            registered = self.replicas.registered_epoch >= 0
        if registered:
            self.store.update_broker(BrokerInfo(self.broker_id, host, port, endpoints=self.endpoints))

    def _register_broker(self) -> None:
        """Register (taking over the registration of this broker's previous process: this one holds its data
        directory's lock and its listener, so that process is dead)."""
        info = BrokerInfo(self.broker_id, self.host, self.port, endpoints=self.endpoints)
        deadline = time.monotonic() + self.config.zookeeper_session_timeout_ms / 1000 + 5
        while True:
            try:
                registered = self.store.register_broker(info, take_over=True)
                break
            except Exception as e:             # another live session holds the id elsewhere (a misconfiguration)
                if time.monotonic() > deadline:
                    raise
                log.info("broker %d: registration pending (%s)", self.broker_id, e)
                time.sleep(0.5)
        self.replicas.registered_epoch = registered.epoch
        log.info("broker %d registered (broker epoch %d)", self.broker_id, registered.epoch)

    def abandon_start(self) -> None:
        """The broker was told to stop while start() runs: its wait for the cluster's metadata ends with
        LogClosedError (the steps before it are bounded by the store's request timeout). Any thread."""
        self._abandoned = True

    def controlled_shutdown(self) -> None:
        """Kafka's controlled shutdown (controlled.shutdown.enable): stop following, ask the controller to move
        this broker's leaderships and ISR places to the other in-sync replicas, and wait until it did (up to
        controlled.shutdown.max.retries x controlled.shutdown.retry.backoff.ms), so stopping interrupts no
        acks=all write. Partitions nobody else can take stay here."""
        cfg = self.config
        if not cfg.controlled_shutdown_enable:
            return
        t0 = time.monotonic()
        self.replicas.stop_following()
        try:
            self.store.request_controlled_shutdown(self.broker_id, self.replicas.registered_epoch)
        except SeglogError as e:
            log.warning("broker %d: controlled shutdown not possible (%s); stopping", self.broker_id, e)
            return
        deadline = t0 + max(cfg.controlled_shutdown_max_retries, 1) * cfg.controlled_shutdown_retry_backoff_ms / 1000
        while (remaining := self._remaining_for_shutdown()) and time.monotonic() < deadline:
            time.sleep(0.02)
        if remaining:
            log.warning("broker %d: controlled shutdown incomplete after %.1f s, stopping anyway; still leading or "
                        "in the ISR of %s", self.broker_id, time.monotonic() - t0,
                        ", ".join(f"{t}-{p}" for t, p in remaining[:10]))
        else:
            log.info("broker %d: controlled shutdown succeeded in %.2f s", self.broker_id, time.monotonic() - t0)

    def _remaining_for_shutdown(self) -> list[tuple[str, int]]:
        """Partitions this broker leads while another live in-sync replica could take over, or whose live
        leader still counts this broker in its ISR."""
        me = self.broker_id
        with self._lock:
            others = {b for b in self.brokers if b != me and b not in self.shutting_down}
            return [key for key, st in self.states.items()
                    if (st.leader == me and others & set(st.isr)) or (st.leader in others and me in st.isr)]

    def _on_shutting_down(self, requests: dict[int, int]) -> None:
        with self._lock:
            self.shutting_down = dict(requests)
        self._poke_controller("controlled shutdown")

    def close(self) -> None:
        self._closed = True
        with self._lock:
            controller, self.controller = self.controller, None
        if controller is not None:
            controller.stop()
        self.replicas.close()
        self.txn_verifier.close()
        self.store.close()

    # -- store callbacks (the store's event thread) ----------------------------------------------------------

    def _on_session(self, event: SessionEvent) -> None:
        if event is SessionEvent.EXPIRED:
            self.replicas.fence()
            self._on_controller_change_to(None, None)
        elif event is SessionEvent.NEW_SESSION:
            self._rejoin()

    def _rejoin(self) -> None:
        """On a new session: register again, enter the controller election, unfence the replicas and read every
        partition's state again. A store call that fails (a ZooKeeper request timing out on a loaded machine)
        is retried every REJOIN_BACKOFF_S from the step that failed until it succeeds or the store closes:
        given up, the broker would stay fenced (following and leading nothing) and out of the election."""
        registered = elected = False
        while True:
            try:
                if not registered:
                    self._register_broker()
                    registered = True
                if not elected:
                    self.store.elect_controller(self.broker_id, self._on_controller_change)
                    elected = True
                self.replicas.unfence()
                with self._lock:
                    keys = list(self.states)
                for topic, p in keys:
                    try:
                        self._on_state(topic, p, self.store.get_partition_state(topic, p))
                    except UnknownTopicOrPartitionError:
                        self._on_state(topic, p, None)
                return
            except LogClosedError:
                return
            except Exception as e:          # noqa: BLE001 - whatever failed is retried, the broker stays fenced
                log.warning("broker %d: rejoining the cluster on a new metadata session failed (%s); retrying",
                            self.broker_id, e)
                time.sleep(REJOIN_BACKOFF_S)

    def _on_controller_change(self, change) -> None:
        self._on_controller_change_to(change.controller_id, change.lease)

    def _on_controller_change_to(self, controller_id, lease) -> None:
        with self._lock:
            self.controller_id = controller_id
            old = self.controller
            if lease is not None and controller_id == self.broker_id:
                if old is not None and old.lease == lease and old.active:
                    return
                self.controller = Controller(self.store, lease, self.config)
            else:
                self.controller = None
        if old is not None:
            old.stop()
        if self.controller is not None and lease is not None:
            self.controller.start()

    def _poke_controller(self, why: str) -> None:
        controller = self.controller
        if controller is not None:
            controller.poke(why)

    def _on_entity_configs(self, configs: dict[str, dict[str, str]]) -> None:
        """Dynamic broker configs (this broker's entity over the default's): applied at once (seglog.dynamic_config,
        the node's ``dynamic``), this broker's replication throttled rates and the copy rate of its replicas
        moving between log directories."""
        with self._lock:
            self.broker_configs = {p: dict(c) for p, c in configs.items() if p.startswith("brokers/")}
        self.node.dynamic.apply(configs.get(f"brokers/{DEFAULT_ENTITY}", {}),
                                configs.get(f"brokers/{self.broker_id}", {}))
        rates = rates_for_broker(configs, self.broker_id)
        self.throttles.set_rates(rates)
        self.node.replica_alter_log_dirs_rate = rates.get(ALTER_LOG_DIRS_RATE_KEY, (None,))[0]

    def _reconfigured(self, old, new) -> None:
        """The effective broker config changed: read from now on (the controller too: a default
        unclean.leader.election.enable turned on elects at once, as Kafka's DynamicLogConfig asks its
        controller)."""
        with self._lock:
            self.config = new
            controller = self.controller
        if controller is not None:
            controller.config = new
            if old.unclean_leader_election_enable != new.unclean_leader_election_enable:
                controller.poke("unclean.leader.election.enable changed")

    def _on_brokers(self, brokers: dict[int, BrokerInfo]) -> None:
        with self._lock:
            self.brokers = dict(brokers)
        self._poke_controller("brokers changed")

    def _on_topics(self, names: list[str]) -> None:
        with self._lock:
            gone = [t for t in self._watches if t not in names]
            new = [t for t in names if t not in self._watches]
            for t in gone:
                for sub in self._watches.pop(t):
                    sub.cancel()
        for t in gone:
            self._forget_topic(t)
        for t in new:
            subs = [self.store.watch_topic(t, lambda a, t=t: self._on_assignment(t, a)),
                    self.store.watch_topic_config(t, lambda c, t=t: self._on_config(t, c))]
            with self._lock:
                self._watches[t] = subs
        self._topics_known = True
        self._poke_controller("topics changed")

    def _forget_topic(self, topic: str) -> None:
        with self._lock:
            self.unreadable.discard(topic)
            self.assignments.pop(topic, None)
            self.configs.pop(topic, None)
            keys = [k for k in self._state_watches if k[0] == topic]
            for k in keys:
                self._state_watches.pop(k).cancel()
                self.states.pop(k, None)
        for k in keys:
            self.replicas.apply(k[0], k[1], None, ())
        self.node.remove_topic(topic)

    def _on_config(self, topic: str, config: dict[str, str] | None) -> None:
        if config is None:
            return
        with self._lock:
            changed = self.configs.get(topic) != config
            self.configs[topic] = dict(config)
            assignment = self.assignments.get(topic)
        if assignment is not None:
            self._apply_local(topic, assignment)
        if changed:
            self._poke_controller("topic config changed")   # e.g. unclean.leader.election.enable turned on

    def _on_assignment(self, topic: str, assignment: TopicAssignment | None) -> None:
        """A topic's assignment, new or changed (partitions added, replicas reassigned): replicas that are no
        longer this broker's stop leading and following before their logs are deleted; replicas it gains are
        opened, then lead or follow as their state says; the others learn their new replica set. None (the
        topic's node is gone or cannot be read): nothing changes here, a start-up stops waiting for it, and
        Metadata leaves out a topic this broker never read."""
        with self._lock:
            if assignment is None:
                self.unreadable.add(topic)
                return
            self.unreadable.discard(topic)
            old = self.assignments.get(topic)
            self.assignments[topic] = assignment
            new = [p for p in assignment.partitions if (topic, p) not in self._state_watches]
            changed = [] if old is None else [
                p for p in assignment.partitions
                if p in old.partitions and (old.partitions[p], old.removing.get(p)) != (assignment.partitions[p],
                                                                                       assignment.removing.get(p))]
            states = {p: self.states.get((topic, p)) for p in changed}
        for p in changed:
            if self.broker_id in old.partitions[p] and self.broker_id not in assignment.partitions[p]:
                self.replicas.apply(topic, p, None, ())
        self._apply_local(topic, assignment)
        for p in changed:
            if self.broker_id in assignment.partitions[p]:
                self.replicas.apply(topic, p, states[p], assignment.partitions[p], assignment.removing.get(p, ()))
        for p in new:
            sub = self.store.watch_partition_state(topic, p, lambda st, p=p: self._on_state(topic, p, st))
            with self._lock:
                self._state_watches[(topic, p)] = sub
        self._poke_controller("assignment changed")

    def _apply_local(self, topic: str, assignment: TopicAssignment) -> None:
        hosted = {p for p, rs in assignment.partitions.items() if self.broker_id in rs}
        config = self.configs.get(topic)
        if config is None:
            config = self.store.get_topic_config(topic)
            with self._lock:
                self.configs[topic] = config
        self.node.apply_topic(topic, assignment.topic_id, len(assignment.partitions), config, hosted)

    def _on_state(self, topic: str, p: int, state: PartitionState | None) -> None:
        with self._lock:
            if state is None:
                self.states.pop((topic, p), None)
            else:
                self.states[(topic, p)] = state
            assignment = self.assignments.get(topic)
        replicas = assignment.partitions.get(p, ()) if assignment else ()
        if self.broker_id in replicas:
            self.replicas.apply(topic, p, state, replicas, assignment.removing.get(p, ()))
        if assignment is not None and (p in assignment.adding or p in assignment.removing):
            self._poke_controller("reassignment progress")       # its target replicas may all be in sync now

    # -- helpers for the view and replication -------------------------------------------------------------------

    def broker_address(self, broker_id: int) -> tuple[str, int] | None:
        info = self.brokers.get(broker_id)
        return None if info is None else (info.host, info.port)

    def wait_replicated(self, part, last_offset: int, timeout: float = 30.0) -> None:
        """Block until `part`'s high watermark passes last_offset (an offset commit's acks=all)."""
        ls = self.replicas.leader_state(part.topic, part.index)
        fut: concurrent.futures.Future = concurrent.futures.Future()
        ls.add_waiter(last_offset + 1, fut)
        try:
            fut.result(timeout)
        except concurrent.futures.TimeoutError:
            ls.remove_waiter(fut)
            raise RequestTimedOutError(f"{part}: not replicated to the ISR within {timeout:.0f} s") from None

    def init_producer_id(self) -> int:
        with self._lock:
            if self._pid_next >= self._pid_end:
                start = self.store.allocate_producer_ids(self.broker_id, PRODUCER_ID_BLOCK)
                self._pid_next, self._pid_end = start, start + PRODUCER_ID_BLOCK
            pid = self._pid_next
            self._pid_next += 1
            return pid


class ClusterView:
    """The handlers' window on the cluster (same interface as the lone broker's LocalView)."""

    def __init__(self, member: ClusterMember):
        self.m = member
        self._ids = TopicIds(self.topic_names, self._id_of)
        self._internal_warned_until: dict[str, float] = {}

    @property
    def broker_id(self) -> int:
        return self.m.broker_id

    def brokers(self) -> list[dict]:
        """The live brokers at their addresses on the request's listener (those without it left out)."""
        listener = self.m.current_listener()
        out = []
        for b in sorted(self.m.brokers.values(), key=lambda b: b.id):
            address = b.address(listener)
            if address is not None:
                out.append({"node_id": b.id, "host": address[0], "port": address[1], "rack": b.rack})
        return out

    def controller_id(self) -> int:
        cid = self.m.controller_id
        return -1 if cid is None else cid

    def topic_names(self) -> list[str]:
        return sorted(self.m.assignments)

    def topic_id(self, name: str) -> uuid.UUID:
        """The cluster's id of the topic (the same on every broker); UnknownTopicOrPartitionError if none."""
        a = self.m.assignments.get(name)
        if a is None:
            raise UnknownTopicOrPartitionError(f"Unknown topic: {name}")
        return a.topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str:
        """UnknownTopicIdError if no topic has that id."""
        return self._ids.name(topic_id)

    def _id_of(self, name: str) -> uuid.UUID | None:
        a = self.m.assignments.get(name)
        return None if a is None else a.topic_id

    def topic_partitions(self, name: str) -> tuple[int, bool]:
        """(partition count, internal) of a cluster topic; UnknownTopicOrPartitionError if there is none."""
        a = self.m.assignments.get(name)
        if a is None:
            raise UnknownTopicOrPartitionError(f"Unknown topic: {name}")
        return len(a.partitions), name in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)

    def topic_overrides(self, name: str) -> dict[str, str]:
        self.topic_partitions(name)
        return dict(self.m.configs.get(name, {}))

    def partition_metadata(self, topic: str, p: int) -> dict:
        a = self.m.assignments.get(topic)
        st = self.m.states.get((topic, p))
        replicas = list(a.partitions.get(p, ())) if a else []
        if st is None:
            return {"error_code": LeaderNotAvailableError.code, "partition_index": p, "leader_id": -1,
                    "leader_epoch": -1, "replica_nodes": replicas, "isr_nodes": [], "offline_replicas": []}
        live = self.m.brokers
        offline = [r for r in replicas if r not in live]
        leader = st.leader if st.leader in live else NO_LEADER     # as Kafka: a dead leader is no leader
        code = LeaderNotAvailableError.code if leader == NO_LEADER else 0
        if leader != NO_LEADER and live[leader].address(self.m.current_listener()) is None:
            code, leader = ListenerNotFoundError.code, NO_LEADER   # Kafka's MetadataCache: alive, not on it
        return {"error_code": code, "partition_index": p, "leader_id": leader, "leader_epoch": st.leader_epoch,
                "replica_nodes": replicas, "isr_nodes": list(st.isr), "offline_replicas": offline}

    def ensure_topic(self, name: str):
        if name not in self.m.assignments:
            validate_topic_name(name)
            if name in self.m.unreadable:
                raise MalformedTopicError(f"Topic {name} exists but its assignment cannot be read (see the "
                                          "broker's log); it is left out until its node is repaired")
            try:
                self.create_topic(name, None, {}, None)
            except (TopicAlreadyExistsError, RequestTimedOutError):
                pass                            # created; partitions without a leader yet say so themselves
        try:
            return self.topic_partitions(name)
        except UnknownTopicOrPartitionError:
            # created (here or by another broker) but not yet in this broker's view of the store: as Kafka,
            # whose metadata cache has not heard of it from the controller; never "unknown", which librdkafka
            # takes for a deleted topic
            raise LeaderNotAvailableError(f"Topic {name} is being created") from None

    # -- checks on the request path ----------------------------------------------------------------------------

    def check_produce(self, topic: str, p: int, acks: int) -> None:
        self.m.replicas.check_produce(topic, p, acks)

    def check_fetch(self, topic: str, p: int, current_leader_epoch: int, replica: bool) -> None:
        ls = self.m.replicas.leader_state(topic, p)
        if current_leader_epoch >= 0:
            if current_leader_epoch < ls.leader_epoch:
                raise FencedLeaderEpochError(f"{topic}-{p}: epoch {current_leader_epoch} < {ls.leader_epoch}")
            if current_leader_epoch > ls.leader_epoch:
                raise UnknownLeaderEpochError(f"{topic}-{p}: epoch {current_leader_epoch} > {ls.leader_epoch}")

    async def wait_for_acks(self, part, last_offset: int, acks: int, timeout_ms: int) -> None:
        if acks != -1:
            return
        ls = self.m.replicas.leader_state(part.topic, part.index)
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        ls.add_waiter(last_offset + 1, fut, loop)
        try:
            await asyncio.wait_for(fut, max(timeout_ms, 1) / 1000)
        except asyncio.TimeoutError:
            ls.remove_waiter(fut)
            raise RequestTimedOutError(f"{part}: not replicated to min.insync.replicas within {timeout_ms} ms")
        ls.check_after_append()

    def follower_fetched(self, part, replica_id: int, fetch_offset: int, log_start_offset: int) -> None:
        self.m.replicas.follower_fetched(part.topic, part.index, replica_id, fetch_offset)

    def replication_throttle(self, topic: str, p: int, replica_id: int) -> tuple[bool, bool]:
        """(whether the partition is leader-throttled here, whether `replica_id`'s fetch gets no records now)."""
        if not self.m.throttles.throttled(LEADER, topic, p):
            return False, False
        return True, self.m.replicas.hold_back(LEADER, topic, p, replica_id)

    def record_replication(self, nbytes: int) -> None:
        """Bytes of leader-throttled partitions served to followers."""
        self.m.throttles.record(LEADER, nbytes)

    dynamic_names = CLUSTER_WIDE | PER_BROKER_ONLY | frozenset(DYNAMIC_BROKER_KEYS)
    """The broker configs a cluster member changes at run time (seglog.dynamic_config; the replication
    throttled rates and the log-dir copy rate, seglog.replication.throttle)."""

    def alter_broker_config(self, name: str, change, validate_only: bool = False) -> None:
        """Replace the dynamic configs of broker `name` ("": every broker's default) with ``change(current)``,
        in the cluster's metadata (ZooKeeper's /config/brokers/<id> or <default>, with a change notification:
        every broker watching applies them). Checked as Kafka checks them before anything is stored:
        InvalidRequestError with Kafka's message."""
        path = f"brokers/{name or DEFAULT_ENTITY}"

        def checked(current: dict[str, str]) -> dict[str, str]:
            new = change(dict(current))
            self.m.node.dynamic.validate(name, new, self.dynamic_names, PER_BROKER_ONLY)
            return new
        if validate_only:
            with self.m._lock:
                checked(self.m.broker_configs.get(path, {}))
            return
        self.m.store.update_entity_configs(path, checked)

    def init_producer_id(self) -> int:
        return self.m.init_producer_id()

    # -- groups -------------------------------------------------------------------------------------------------

    def _offsets_partition(self, group_id: str) -> int:
        a = self.m.assignments.get(OFFSETS_TOPIC)
        if a is None:
            # the reason travels to the client (FindCoordinator v1+ error_message), which retries meanwhile
            raise CoordinatorNotAvailableError(self._create_internal_topic(OFFSETS_TOPIC))
        return partition_for_group(group_id, len(a.partitions))

    def _create_internal_topic(self, name: str) -> str:
        """Ask for __consumer_offsets or __transaction_state (as Kafka creates them on the first FindCoordinator
        of their kind); returns why there is no coordinator yet."""
        cfg = self.m.config
        if name == OFFSETS_TOPIC:
            what, rf, rf_name, count = ("offsets topic", cfg.offsets_topic_replication_factor,
                                        "offsets.topic.replication.factor", cfg.offsets_topic_num_partitions)
        else:
            what, rf, rf_name, count = ("transaction state topic", cfg.transaction_state_log_replication_factor,
                                        "transaction.state.log.replication.factor",
                                        cfg.transaction_state_log_num_partitions)
        live = len(self.m.brokers)
        if live < rf:
            now = time.monotonic()
            if now >= self._internal_warned_until.get(name, 0.0):
                self._internal_warned_until[name] = now + OFFSETS_WARNING_INTERVAL_S
                log.warning("cannot create %s yet: %d live brokers, %s=%d (clients get COORDINATOR_NOT_AVAILABLE "
                            "until then)", name, live, rf_name, rf)
            return (f"the {what} {name} cannot be created yet: {live} live broker{'' if live == 1 else 's'}, "
                    f"{rf_name}={rf} (start more brokers, or lower {rf_name})")
        try:
            self.create_topic(name, count, internal_topic_config(name, cfg), rf, timeout_ms=0)
        except TopicAlreadyExistsError:
            pass
        except SeglogError as e:
            return f"the {what} {name} cannot be created: {e}"
        return f"the {what} {name} is being created; retry"

    def coordinator_for(self, group_id: str) -> tuple[int, str, int]:
        return self._leader_of(OFFSETS_TOPIC, self._offsets_partition(group_id), f"group {group_id}")

    def txn_coordinator_for(self, transactional_id: str) -> tuple[int, str, int]:
        """The leader of the transactional id's __transaction_state partition (created on first use)."""
        a = self.m.assignments.get(TRANSACTION_STATE_TOPIC)
        if a is None:
            raise CoordinatorNotAvailableError(self._create_internal_topic(TRANSACTION_STATE_TOPIC))
        p = partition_for_transactional_id(transactional_id, len(a.partitions))
        return self._leader_of(TRANSACTION_STATE_TOPIC, p, f"transactional id {transactional_id}")

    def _leader_of(self, topic: str, p: int, what: str) -> tuple[int, str, int]:
        st = self.m.states.get((topic, p))
        if st is None or st.leader == NO_LEADER or st.leader not in self.m.brokers:
            raise CoordinatorNotAvailableError(f"no leader for the {topic} partition of {what}")
        b = self.m.brokers[st.leader]
        address = b.address(self.m.current_listener())
        if address is None:
            raise CoordinatorNotAvailableError(f"the coordinator of {what}, broker {b.id}, has no listener "
                                               f"{self.m.current_listener()}")
        return b.id, *address

    def check_coordinator(self, group_id: str) -> None:
        p = self._offsets_partition(group_id)
        if not self.m.replicas.is_leader(OFFSETS_TOPIC, p):
            raise NotCoordinatorError(f"broker {self.m.broker_id} does not coordinate group {group_id}")

    # -- admin ----------------------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int | None, configs: dict, replication_factor: int | None,
                     validate_only: bool = False, timeout_ms: int = CREATE_TIMEOUT_MS,
                     assignment: dict[int, list[int]] | None = None) -> None:
        """Store the topic, placed by ``assignment`` ({partition: replica ids}, checked against the registered
        brokers) or else by Kafka's rack-unaware placement; then wait up to ``timeout_ms`` (CreateTopics'
        timeout; 0: not at all) until the controller gave every partition a state, else RequestTimedOutError
        (the topic exists: as in Kafka, the request timed out, not the creation)."""
        validate_topic_name(name)
        cfg = self.m.config
        partitions = cfg.num_partitions if partitions is None else partitions
        rf = cfg.default_replication_factor if replication_factor is None else replication_factor
        if name in self.m.assignments:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        cfg.log_config().with_kafka(configs)                       # InvalidConfigError before anything is stored
        if partitions < 1:
            raise InvalidPartitionsError(f"Number of partitions must be larger than 0, not {partitions}.")
        brokers = list(self.m.store.list_brokers())
        if assignment is not None:
            placement = validate_assignment(assignment, brokers)
            partitions = len(placement)
        else:
            placement = assign_replicas(brokers, partitions, rf)
        if validate_only:
            return
        self.m.store.create_topic(TopicAssignment(name, placement), {k: str(v) for k, v in configs.items()})
        self._wait_for_states(name, partitions, timeout_ms)

    def _wait_for_states(self, name: str, partitions: int, timeout_ms: int) -> None:
        """Until every partition has a state here, or RequestTimedOutError after timeout_ms (0: return now)."""
        if timeout_ms <= 0:
            return
        deadline = time.monotonic() + timeout_ms / 1000
        while not all((name, p) in self.m.states for p in range(partitions)):
            if time.monotonic() >= deadline:
                raise RequestTimedOutError(f"Topic '{name}' was created, but not all its {partitions} partitions "
                                           f"have a leader yet after {timeout_ms} ms (is a controller running?)")
            time.sleep(0.02)

    def delete_topic(self, name: str) -> None:
        if not self.m.config.delete_topic_enable:
            raise TopicDeletionDisabledError("Topic deletion is disabled (delete.topic.enable=false).")
        _, internal = self.topic_partitions(name)
        if internal:
            raise InvalidTopicError(f"The internal topic {name} cannot be deleted")
        self.m.store.mark_topic_for_deletion(name)

    def alter_topic_config(self, name: str, overrides: dict[str, str], validate_only: bool = False) -> None:
        """Make `overrides` the topic's config overrides in the cluster's metadata (every broker watching it
        applies them); InvalidConfigError before anything is stored."""
        self.topic_partitions(name)
        overrides = {**(internal_topic_config(name, self.m.config) or {}), **overrides}
        self.m.config.log_config().with_kafka(overrides)
        if validate_only:
            return
        self.m.store.set_topic_config(name, {k: str(v) for k, v in overrides.items()})

    def elect_leaders(self, partitions: list[tuple[str, int]] | None, unclean: bool
                      ) -> dict[tuple[str, int], SeglogError | None]:
        """ElectLeaders, done by the controller (Controller.elect_leaders); on another broker every partition
        answers NotControllerError (Kafka's clients send it to the controller and look again on that error)."""
        controller = self.m.controller
        if controller is None or not controller.active:
            if partitions is None:
                partitions = [(t, p) for t, a in list(self.m.assignments.items()) for p in a.partitions]
            return {tp: NotControllerError("This is not the correct controller for this cluster.")
                    for tp in partitions}
        return controller.elect_leaders(partitions, unclean)

    def _controller(self) -> Controller:
        """The running controller if this broker is it, else NotControllerError (Kafka's clients send the request
        to the controller and look again on that error)."""
        controller = self.m.controller
        if controller is None or not controller.active:
            raise NotControllerError("This is not the correct controller for this cluster.")
        return controller

    def alter_partition_reassignments(self, changes: dict[tuple[str, int], list[int] | None]
                                      ) -> dict[tuple[str, int], SeglogError | None]:
        """AlterPartitionReassignments, done by the controller (Controller.alter_partition_reassignments)."""
        return self._controller().alter_partition_reassignments(changes)

    def list_partition_reassignments(self, partitions: list[tuple[str, int]] | None
                                     ) -> dict[tuple[str, int], ReplicaAssignment]:
        """ListPartitionReassignments, answered by any broker from the metadata store (Kafka's ZooKeeper-era
        brokers leave it to the controller; a listing here works while the controller is paused)."""
        return list_reassignments(self.m.store, partitions)

    def create_partitions(self, name: str, count: int, validate_only: bool = False,
                          timeout_ms: int = CREATE_TIMEOUT_MS, assignments: list[list[int]] | None = None) -> None:
        """Grow the topic to `count` partitions, placed by ``assignments`` (one replica list per new partition,
        checked as Kafka checks them) or else as Kafka places them; then wait as create_topic does."""
        current, _ = self.topic_partitions(name)
        if count <= current:
            raise InvalidPartitionsError(f"Topic currently has {current} partitions, which is higher than or "
                                         f"equal to the requested {count}.")
        a = self.m.assignments[name]
        rf = len(next(iter(a.partitions.values())))
        brokers = list(self.m.store.list_brokers())
        if assignments is not None:
            placement = validate_new_partitions(assignments, current, count, rf, brokers)
        else:
            placement = assign_replicas(brokers, count - current, rf, first_partition=current)
        if validate_only:
            return
        self.m.store.add_partitions(name, placement)
        self._wait_for_states(name, count, timeout_ms)

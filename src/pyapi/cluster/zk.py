"""MetadataStore on ZooKeeper through kazoo, in Kafka's ZooKeeper layout (see ``zklayout``).

Connection strings are kazoo's: ``host:port[,host:port...][/chroot]``; a missing chroot is created. Fencing
is Kafka's: a controller's writes are multi-op transactions whose first op checks that ``/controller_epoch``
still has the version the controller's win gave it. Leader ISR updates are ``setData`` with the version read.

Threads: kazoo's connection thread reports session states to a listener that only queues work; kazoo's
watch recipes (DataWatch/ChildrenWatch, which re-arm across reconnects and new sessions) only queue a
refresh; everything user-visible runs on this store's EventThread. Each request waits at most
``request_timeout`` seconds (NetworkError after that: a write may or may not have happened); only the
``watch_*`` and ``elect_controller`` calls, which arm a kazoo recipe, wait for a lost connection to return.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from dataclasses import replace
from typing import Callable, Iterator, Mapping, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import (BadVersionError, ConnectionClosedError, ConnectionLoss, NodeExistsError,
                              NoNodeError, NotEmptyError, OperationTimeoutError, RolledBackError,
                              RuntimeInconsistency, SessionExpiredError)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from ..errors import (InvalidArgumentError, InvalidTopicError, LogClosedError, NetworkError, SeglogError,
                      StaleControllerEpochError, TopicAlreadyExistsError, UnknownServerError,
                      UnknownTopicOrPartitionError)
from ..topic_names import validate_topic_name
from . import zklayout as layout
from .events import EventThread, Subscription, Watch
from .metastore import (AclKey, BrokerInfo, ControllerChange, ControllerEpoch, InvalidUpdateVersionError,
                        MalformedTopicError, MetadataStore, PartitionState, ReplicaAssignment, SessionEvent, TopicAssignment,
                        validate_isr_update, validate_new_partitions, validate_partition_state)

__all__ = ["ZooKeeperMetadataStore"]

log = logging.getLogger("seglog.cluster")

_RECONNECT = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 2.0}
"""Reconnect quickly (kazoo's default backs off to a minute) so a restarted ZooKeeper is found at once."""

_UNREACHABLE = (ConnectionLoss, SessionExpiredError, OperationTimeoutError, KazooTimeoutError)


def _failure(results: list) -> tuple[int, Exception] | None:
    """The failed op of a committed transaction (index, error), None if it succeeded."""
    for index, result in enumerate(results):
        if isinstance(result, Exception) and not isinstance(result, (RolledBackError, RuntimeInconsistency)):
            return index, result
    return None


def _conflict(error: Exception, what: str) -> SeglogError:
    """A failed write as seglog's error: missing -> unknown topic/partition; changed meanwhile -> version."""
    if isinstance(error, NoNodeError):
        return UnknownTopicOrPartitionError(f"{what}: not found")
    if isinstance(error, (BadVersionError, NodeExistsError, NotEmptyError)):
        return InvalidUpdateVersionError(f"{what}: changed concurrently ({type(error).__name__})")
    return UnknownServerError(f"{what}: {error!r}")


def _stale(controller: ControllerEpoch) -> StaleControllerEpochError:
    return StaleControllerEpochError(f"Controller epoch {controller.epoch} of broker {controller.broker_id} "
                                     "is stale: another controller was elected since")


class ZooKeeperMetadataStore(MetadataStore):
    """One ZooKeeper session. Connects in the constructor (NetworkError if that takes over
    ``connect_timeout`` s). ``session_timeout`` is Kafka's zookeeper.session.timeout.ms, in seconds."""

    def __init__(self, connect: str, *, session_timeout: float = 18.0, connect_timeout: float = 15.0,
                 request_timeout: float = 15.0):
        hosts, _, chroot = connect.partition("/")
        self._connect = connect
        self._session_timeout = session_timeout
        self._request_timeout = request_timeout
        self._closed = False
        self._session_id: int | None = None
        self._state_lock = threading.Lock()      # guards _closed/_candidacy/_watches swaps; never held over I/O
        self._election_lock = threading.Lock()   # one claim at a time
        self._candidacy: Watch | None = None
        self._watches: list[Watch] = []
        self._session_listeners: list[Subscription] = []
        self._malformed: dict[str, int] = {}     # topic -> mzxid of its unreadable node, reported once
        if chroot:
            self._ensure_chroot(hosts, "/" + chroot, connect_timeout)
        self._events = EventThread("seglog-metastore-zk")
        self._client = KazooClient(hosts=connect, timeout=session_timeout, connection_retry=_RECONNECT)
        self._client.add_listener(self._on_state)
        try:
            # not kazoo's start(): its first request (a chroot check) fails the start-up on a connection cut
            # right after connecting; as Kafka's ZooKeeperClient, only not being connected within the
            # connection timeout does, and requests cut meanwhile are repeated once connected again (_do)
            self._client.start_async()
            if not self._await_connected(time.monotonic() + connect_timeout):
                raise NetworkError(f"Could not connect to ZooKeeper at {connect} within {connect_timeout} s")
            for path in layout.PERSISTENT_PATHS:
                self._do(self._client.ensure_path_async, path)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _ensure_chroot(hosts: str, chroot: str, timeout: float) -> None:
        """Create the chroot, repeating it across connection cuts until ``timeout`` s have passed."""
        client = KazooClient(hosts=hosts, connection_retry=_RECONNECT)
        deadline = time.monotonic() + timeout
        try:
            client.start(timeout=timeout)
            while True:
                try:
                    client.ensure_path(chroot)
                    return
                except _UNREACHABLE as exc:
                    while not client.connected and time.monotonic() < deadline:
                        time.sleep(0.05)
                    if time.monotonic() >= deadline:
                        raise NetworkError(f"ZooKeeper at {hosts} is unreachable: {exc!r}") from exc
        except KazooTimeoutError as exc:
            raise NetworkError(f"Could not connect to ZooKeeper at {hosts} within {timeout} s") from exc
        finally:
            client.stop()
            client.close()

    # --- plumbing -----------------------------------------------------------------------------------------

    @contextmanager
    def _kazoo_errors(self) -> Iterator[None]:
        if self._closed:
            raise LogClosedError("The metadata store is closed")
        try:
            yield
        except ConnectionClosedError:
            raise LogClosedError("The metadata store is closed") from None
        except _UNREACHABLE as exc:
            raise NetworkError(f"ZooKeeper at {self._connect} is unreachable: {exc!r}") from exc

    def _do(self, async_call: Callable, *args, session_bound: bool = False, **kwargs):
        """Run a kazoo ``*_async`` call and wait for it (request_timeout); kazoo errors other than
        connectivity ones (NoNodeError ...) propagate for the caller to map.

        A call cut by a lost connection or refused because the session expired (a pause past the session
        timeout, a ZooKeeper restart) is repeated once kazoo is connected again, within the same
        request_timeout, as Kafka's ZooKeeper client does; unless it is ``session_bound`` (an ephemeral
        create: what it claims belonged to the lost session, and the session listeners redo such claims on
        the new one). A cut write may have been applied: a repeated conditional write then fails as a
        concurrent change (InvalidUpdateVersionError) and its caller re-reads, as it does for any race."""
        deadline = time.monotonic() + self._request_timeout
        session_bound = session_bound or bool(kwargs.get("ephemeral"))
        while True:
            try:
                with self._kazoo_errors():
                    return async_call(*args, **kwargs).get(timeout=max(0.0, deadline - time.monotonic()))
            except NetworkError as exc:
                if session_bound or not isinstance(exc.__cause__, (ConnectionLoss, SessionExpiredError)) \
                        or not self._await_connected(deadline):
                    raise

    def _await_connected(self, deadline: float) -> bool:
        """Whether kazoo is connected (on whichever session) before ``deadline``; False once closed."""
        while not self._closed and time.monotonic() < deadline:
            if self._client.connected:
                return True
            time.sleep(0.05)
        return False

    def _get_or_none(self, path: str):
        try:
            return self._do(self._client.get_async, path)
        except NoNodeError:
            return None

    def _get_many(self, paths: Sequence[str]) -> list:
        """``(data, stat)`` or None (missing) per path; the reads are pipelined."""
        with self._kazoo_errors():
            pending = [self._client.get_async(path) for path in paths]
        results = []
        for result in pending:
            try:
                with self._kazoo_errors():
                    results.append(result.get(timeout=self._request_timeout))
            except NoNodeError:
                results.append(None)
        return results

    def _decode_topic(self, topic: str, node) -> TopicAssignment:
        """The assignment in a topic node read as ``(data, stat)``; an unreadable one raises MalformedTopicError,
        logged as an ERROR once per version of the node (it is read again whenever it changes)."""
        try:
            assignment = layout.decode_topic(topic, node[0])
        except MalformedTopicError as e:
            with self._state_lock:
                first = self._malformed.get(topic) != node[1].mzxid
                self._malformed[topic] = node[1].mzxid
            if first:
                log.error("%s", e)
            raise
        with self._state_lock:
            repaired = self._malformed.pop(topic, None) is not None
        if repaired:
            log.info("Topic node %s is readable again", layout.topic_path(topic))
        return assignment

    def _commit(self, transaction, *, session_bound: bool = False) -> tuple[int, Exception] | None:
        return _failure(self._do(transaction.commit_async, session_bound=session_bound))

    def _watch(self, recipe: type, path: str | tuple[str, ...], compute: Callable[[], object],
               callback: Callable) -> Watch:
        """A Watch refreshed whenever the kazoo ``recipe`` on ``path`` (or on any of several) fires (it stops
        once cancelled)."""
        watch = Watch(compute, callback)

        def on_event(*_):
            if watch.cancelled:
                return False
            self._events.submit(watch.refresh)

        with self._state_lock:
            if self._closed:
                raise LogClosedError("The metadata store is closed")
            self._watches = [w for w in self._watches if not w.cancelled] + [watch]
        with self._kazoo_errors():
            for one in (path,) if isinstance(path, str) else path:
                recipe(self._client, one, on_event)
        return watch

    # --- session -----------------------------------------------------------------------------------------

    def _on_state(self, state: str) -> None:
        """kazoo's listener, on its connection thread: must not block, so it only swaps state and queues."""
        if self._closed:
            return
        if state == KazooState.SUSPENDED:
            self._events.submit(self._notify_session, SessionEvent.SUSPENDED)
        elif state == KazooState.LOST:
            with self._state_lock:
                candidacy, self._candidacy = self._candidacy, None
            if candidacy is not None:
                self._events.submit(candidacy.finish, ControllerChange(None))
            self._events.submit(self._notify_session, SessionEvent.EXPIRED)
        else:
            previous, self._session_id = self._session_id, self._client.client_id[0]
            if previous is not None:
                same = previous == self._session_id
                self._events.submit(self._notify_session,
                                    SessionEvent.RECONNECTED if same else SessionEvent.NEW_SESSION)
                self._refresh_all()

    def _refresh_all(self) -> None:
        """Queue a refresh of every watch and the candidacy: the recipes re-read after a reconnect but stay
        silent when nothing changed, so a refresh that failed while disconnected would never be retried."""
        with self._state_lock:
            watches = [w for w in [*self._watches, self._candidacy] if w is not None and not w.cancelled]
        for watch in watches:
            self._events.submit(watch.refresh)

    def expire_session(self, timeout: float = 10.0) -> None:
        """Expire this session on the server, as a pause longer than the session timeout would (the classic
        trick: a second client attaches to the same session id and password, then closes it). Returns once
        this store is on a new session; TimeoutError if that does not happen within ``timeout`` s."""
        client_id = self._client.client_id
        if client_id is None:
            raise NetworkError("Not connected to ZooKeeper: no session to expire")
        intruder = KazooClient(hosts=self._connect, client_id=client_id, timeout=self._session_timeout)
        try:
            intruder.start(timeout=timeout)
            intruder.stop()
        finally:
            intruder.close()
        deadline = time.monotonic() + timeout
        while self._session_id == client_id[0]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"Session {client_id[0]:#x} did not expire within {timeout} s")
            time.sleep(0.02)

    def close(self) -> None:
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            subscriptions = [*self._watches, *self._session_listeners, *filter(None, [self._candidacy])]
            self._candidacy = None
        for subscription in subscriptions:
            subscription.cancel()
        self._client.stop()
        self._client.close()
        self._events.stop()

    # --- cluster id ---------------------------------------------------------------------------------------

    def get_or_create_cluster_id(self, proposed: str) -> str:
        if not isinstance(proposed, str) or not proposed:
            raise InvalidArgumentError("A cluster id must be a non-empty string")
        while True:
            node = self._get_or_none(layout.CLUSTER_ID)
            if node is not None:
                return layout.decode_cluster_id(node[0])
            try:
                self._do(self._client.create_async, layout.CLUSTER_ID, layout.encode_cluster_id(proposed),
                         makepath=True)
                return proposed
            except NodeExistsError:
                continue                              # another broker created it first: read theirs

    # --- brokers -------------------------------------------------------------------------------------------

    def register_broker(self, info: BrokerInfo, *, take_over: bool = False) -> BrokerInfo:
        path, data = layout.broker_path(info.id), layout.encode_broker(info)
        while True:
            try:
                _, stat = self._do(self._client.create_async, path, data, ephemeral=True, include_data=True)
                return replace(info, epoch=stat.czxid)
            except NodeExistsError:
                existing = self._get_or_none(path)
            if existing is None:                       # the previous owner's session just ended
                continue
            owner = existing[1].ephemeralOwner
            if owner != self._session_id:
                previous = layout.decode_broker(info.id, existing[0], existing[1].czxid)
                if not take_over or (previous.host, previous.port) != (info.host, info.port):
                    raise InvalidArgumentError(f"Broker id {info.id} is already registered by another live session")
            transaction = self._client.transaction()
            transaction.delete(path, version=existing[1].version)
            transaction.create(path, data, ephemeral=True)
            if owner != self._session_id:
                self._drop_controller_claim(owner, transaction)
            if self._commit(transaction, session_bound=True) is None:
                _, stat = self._do(self._client.get_async, path)
                return replace(info, epoch=stat.czxid)

    def _drop_controller_claim(self, owner: int, transaction) -> None:
        """Add to ``transaction`` the deletion of ``/controller`` if session ``owner`` (a dead process's) holds it."""
        controller = self._get_or_none(layout.CONTROLLER)
        if controller is not None and controller[1].ephemeralOwner == owner:
            transaction.delete(layout.CONTROLLER, version=controller[1].version)

    def list_brokers(self) -> dict[int, BrokerInfo]:
        ids = sorted(int(child) for child in self._do(self._client.get_children_async, layout.BROKER_IDS))
        found = self._get_many([layout.broker_path(broker_id) for broker_id in ids])
        return {broker_id: layout.decode_broker(broker_id, node[0], node[1].czxid)
                for broker_id, node in zip(ids, found) if node is not None}

    def update_broker(self, info: BrokerInfo) -> None:
        path = layout.broker_path(info.id)
        node = self._get_or_none(path)
        if node is None or node[1].ephemeralOwner != self._session_id:
            raise InvalidArgumentError(f"Broker id {info.id} is not registered by this session")
        self._do(self._client.set_async, path, layout.encode_broker(info), node[1].version)

    def watch_brokers(self, callback: Callable[[dict[int, BrokerInfo]], None]) -> Subscription:
        """The children of /brokers/ids, and each registration's data (a broker's addresses change with
        update_broker): every broker seen gets a data watch of its own (kept while the store lives)."""
        watched: set[int] = set()
        watch = None

        def on_data(*_):
            if watch is None or watch.cancelled:
                return False
            self._events.submit(watch.refresh)

        def compute() -> dict[int, BrokerInfo]:
            brokers = self.list_brokers()
            for broker_id in sorted(brokers.keys() - watched):
                watched.add(broker_id)
                with self._kazoo_errors():
                    DataWatch(self._client, layout.broker_path(broker_id), on_data)
            return brokers
        watch = self._watch(ChildrenWatch, layout.BROKER_IDS, compute, callback)
        return watch

    def request_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> None:
        path, data = layout.controlled_shutdown_path(broker_id), layout.encode_shutdown_request(broker_epoch)
        try:
            self._do(self._client.create_async, path, data, ephemeral=True)
        except NodeExistsError:                        # asked again (or a dead session's leftover): ours now
            self._do(self._client.delete_async, path)
            self._do(self._client.create_async, path, data, ephemeral=True)

    def brokers_shutting_down(self) -> dict[int, int]:
        ids = sorted(int(c) for c in self._do(self._client.get_children_async, layout.CONTROLLED_SHUTDOWN))
        found = self._get_many([layout.controlled_shutdown_path(i) for i in ids])
        return {i: layout.decode_shutdown_request(node[0]) for i, node in zip(ids, found) if node is not None}

    def watch_brokers_shutting_down(self, callback: Callable[[dict[int, int]], None]) -> Subscription:
        return self._watch(ChildrenWatch, layout.CONTROLLED_SHUTDOWN, self.brokers_shutting_down, callback)

    # --- controller ---------------------------------------------------------------------------------------

    def elect_controller(self, broker_id: int,
                         on_change: Callable[[ControllerChange], None]) -> ControllerEpoch | None:
        with self._state_lock:
            if self._closed:
                raise LogClosedError("The metadata store is closed")
            if self._candidacy is not None:
                raise InvalidArgumentError("This session is already a controller candidate")
            candidacy = Watch(lambda: self._claim_or_observe(broker_id, candidacy), on_change)
            self._candidacy = candidacy
        try:
            change = self._claim_or_observe(broker_id, candidacy)

            def on_event(*_):
                if candidacy.cancelled:
                    return False
                self._events.submit(candidacy.refresh)

            with self._kazoo_errors():
                DataWatch(self._client, layout.CONTROLLER, on_event)
        except BaseException:
            with self._state_lock:
                if self._candidacy is candidacy:
                    self._candidacy = None
            candidacy.cancel()
            raise
        return change.lease

    def _claim_or_observe(self, broker_id: int, candidacy: Watch) -> ControllerChange:
        """Claim ``/controller`` if vacant; then who holds it, with the token if this session does.

        The epoch record is read before ``/controller``: if this session owns the latter, nobody could have
        bumped the former in between (a bump needs ``/controller`` vacant, and this store's own claims are
        serialized here), so the token is exact.
        """
        with self._election_lock:
            while True:
                if candidacy is not self._candidacy:
                    return ControllerChange(None)
                epoch, epoch_version = self._read_controller_epoch()
                controller = self._get_or_none(layout.CONTROLLER)
                if controller is None:
                    self._claim(broker_id, epoch, epoch_version, candidacy)
                    continue
                controller_id = layout.decode_controller(controller[0])
                if controller[1].ephemeralOwner != self._session_id:
                    return ControllerChange(controller_id)
                return ControllerChange(controller_id, ControllerEpoch(controller_id, epoch, epoch_version))

    def _read_controller_epoch(self) -> tuple[int, int]:
        node = self._get_or_none(layout.CONTROLLER_EPOCH)
        if node is None:
            try:
                self._do(self._client.create_async, layout.CONTROLLER_EPOCH, layout.encode_epoch(0))
            except NodeExistsError:
                pass
            node = self._do(self._client.get_async, layout.CONTROLLER_EPOCH)
        return layout.decode_epoch(node[0]), node[1].version

    def _claim(self, broker_id: int, epoch: int, epoch_version: int, candidacy: Watch) -> None:
        """Create ``/controller`` and bump the epoch in one transaction (losing a race is fine: the caller
        re-reads). A claim that lands after the candidacy ended (session expired meanwhile) is released."""
        transaction = self._client.transaction()
        transaction.create(layout.CONTROLLER, layout.encode_controller(broker_id), ephemeral=True)
        transaction.set_data(layout.CONTROLLER_EPOCH, layout.encode_epoch(epoch + 1), version=epoch_version)
        if self._commit(transaction, session_bound=True) is None and candidacy is not self._candidacy:
            self._release_controller()

    def _release_controller(self) -> None:
        controller = self._get_or_none(layout.CONTROLLER)
        if controller is not None and controller[1].ephemeralOwner == self._session_id:
            try:
                self._do(self._client.delete_async, layout.CONTROLLER, version=controller[1].version)
            except (NoNodeError, BadVersionError):
                pass

    def resign_controller(self) -> None:
        with self._state_lock:
            if self._closed:
                raise LogClosedError("The metadata store is closed")
            candidacy, self._candidacy = self._candidacy, None
        if candidacy is not None:
            candidacy.cancel()
        with self._election_lock:
            self._release_controller()

    def get_controller(self) -> int | None:
        controller = self._get_or_none(layout.CONTROLLER)
        return None if controller is None else layout.decode_controller(controller[0])

    # --- topics -------------------------------------------------------------------------------------------

    def create_topic(self, assignment: TopicAssignment, config: Mapping[str, str] | None = None) -> None:
        validate_topic_name(assignment.topic)
        validate_new_partitions(0, assignment.partitions)
        transaction = self._client.transaction()
        transaction.create(layout.topic_path(assignment.topic), layout.encode_topic(assignment))
        transaction.create(layout.topic_config_path(assignment.topic), layout.encode_config(config or {}))
        failed = self._commit(transaction)
        if failed is not None:
            if isinstance(failed[1], NodeExistsError):
                raise TopicAlreadyExistsError(f"Topic '{assignment.topic}' already exists")
            raise _conflict(failed[1], f"Creating topic '{assignment.topic}'")

    def list_topics(self) -> list[str]:
        return sorted(self._do(self._client.get_children_async, layout.TOPICS))

    def get_topic(self, topic: str) -> TopicAssignment:
        node = self._get_or_none(layout.topic_path(topic))
        if node is None:
            raise UnknownTopicOrPartitionError(f"Unknown topic '{topic}'")
        return self._decode_topic(topic, node)

    def add_partitions(self, topic: str, partitions: Mapping[int, Sequence[int]]) -> TopicAssignment:
        path = layout.topic_path(topic)
        while True:
            node = self._get_or_none(path)
            if node is None:
                raise UnknownTopicOrPartitionError(f"Unknown topic '{topic}'")
            if self._do(self._client.exists_async, layout.delete_topic_path(topic)) is not None:
                raise InvalidTopicError(f"Topic '{topic}' is marked for deletion")
            current = self._decode_topic(topic, node)
            validate_new_partitions(len(current.partitions), partitions)
            extended = replace(current, partitions={**current.partitions, **partitions})
            try:
                self._do(self._client.set_async, path, layout.encode_topic(extended), version=node[1].version)
                return extended
            except BadVersionError:
                continue                              # another writer got in first: re-read and re-check
            except NoNodeError:
                raise UnknownTopicOrPartitionError(f"Unknown topic '{topic}'") from None

    def update_replica_assignments(self, topic: str, changes: Mapping[int, ReplicaAssignment],
                                   controller: ControllerEpoch) -> TopicAssignment:
        path = layout.topic_path(topic)
        while True:
            node = self._get_or_none(path)
            if node is None:
                raise UnknownTopicOrPartitionError(f"Unknown topic '{topic}'")
            updated = self._decode_topic(topic, node).with_replicas(changes)
            transaction = self._client.transaction()
            transaction.check(layout.CONTROLLER_EPOCH, controller.version)
            transaction.set_data(path, layout.encode_topic(updated), version=node[1].version)
            failed = self._commit(transaction)
            if failed is None:
                return updated
            if failed[0] == 0:
                raise _stale(controller)
            if not isinstance(failed[1], BadVersionError):      # changed meanwhile (partitions added): again
                raise _conflict(failed[1], f"Topic '{topic}'")

    def get_topic_config(self, topic: str) -> dict[str, str]:
        node = self._get_or_none(layout.topic_config_path(topic))
        if node is None:
            raise UnknownTopicOrPartitionError(f"Unknown topic '{topic}'")
        return layout.decode_config(node[0])

    def set_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        try:
            self._do(self._client.set_async, layout.topic_config_path(topic), layout.encode_config(config))
        except NoNodeError:
            raise UnknownTopicOrPartitionError(f"Unknown topic '{topic}'") from None

    # --- ACLs ------------------------------------------------------------------------------------------------

    def get_acls(self) -> dict[AclKey, list[dict]]:
        out: dict[AclKey, list[dict]] = {}
        for pattern_type, root in layout.ACL_ROOTS.items():
            try:
                types = self._do(self._client.get_children_async, root)
            except NoNodeError:
                continue
            for resource_type in sorted(types):
                try:
                    names = self._do(self._client.get_children_async, f"{root}/{resource_type}")
                except NoNodeError:
                    continue
                keys = [(resource_type, pattern_type, name) for name in sorted(names)]
                for key, node in zip(keys, self._get_many([layout.acl_path(k) for k in keys])):
                    entries = [] if node is None else layout.decode_acls(node[0])
                    if entries:
                        out[key] = entries
        return out

    def update_acls(self, key: AclKey, change: Callable[[list[dict]], list[dict]]) -> None:
        """As Kafka's AclAuthorizer: a conditional write of the pattern's node (created, set or deleted) and, in
        the same transaction, a sequential change notification every broker's watch sees; notifications older
        than 15 minutes are purged afterwards."""
        notice_dir, notice = layout.acl_change(key)

        def new_data(data: bytes | None) -> bytes | None:
            entries = list(change([] if data is None else layout.decode_acls(data)))
            return layout.encode_acls(entries) if entries else None       # no entries left: no node
        self._update_announced(layout.acl_path(key), new_data, f"{notice_dir}/{layout.ACL_CHANGE_PREFIX}", notice,
                               f"ACLs of {key}")

    def _update_announced(self, path: str, new_data: Callable[[bytes | None], bytes | None], notice_path: str,
                          notice: bytes, what: str) -> None:
        """Kafka's way of changing a node that brokers watch through notifications: read the node, compute its
        new data (``new_data(data or None)``, None for no node), and write it conditionally on the version read
        (create, set or delete) together with a sequential notification ``notice_path``NNN in one transaction;
        retried from the read when another writer got there first. Notifications older than 15 minutes in the
        notification directory are purged afterwards."""
        while True:
            node = self._get_or_none(path)
            data = new_data(None if node is None else node[0])
            transaction = self._client.transaction()
            if node is None:
                if data is None:
                    return
                self._do(self._client.ensure_path_async, path.rsplit("/", 1)[0])
                transaction.create(path, data)
            elif data is not None:
                transaction.set_data(path, data, node[1].version)
            else:
                transaction.delete(path, node[1].version)
            transaction.create(notice_path, notice, sequence=True)
            failed = self._commit(transaction)
            if failed is None:
                break
            if not isinstance(failed[1], (BadVersionError, NodeExistsError, NoNodeError)):
                raise _conflict(failed[1], what)
        self._purge_notifications(notice_path.rsplit("/", 1)[0])

    def _purge_notifications(self, notice_dir: str) -> None:
        oldest = time.time() * 1000 - layout.NOTIFICATION_RETENTION_MS
        names = self._do(self._client.get_children_async, notice_dir)
        with self._kazoo_errors():
            pending = [(n, self._client.exists_async(f"{notice_dir}/{n}")) for n in names]
        for name, result in pending:
            with self._kazoo_errors():
                stat = result.get(timeout=self._request_timeout)
            if stat is not None and stat.ctime < oldest:
                try:
                    self._do(self._client.delete_async, f"{notice_dir}/{name}")
                except NoNodeError:
                    pass                                  # another broker purged it first

    def watch_acls(self, callback: Callable[[dict[AclKey, list[dict]]], None]) -> Subscription:
        return self._watch(ChildrenWatch, layout.ACL_CHANGE_DIRS, self.get_acls, callback)

    # --- entity configs (client quotas, SCRAM credentials, dynamic broker configs) --------------------------

    def get_entity_configs(self) -> dict[str, dict[str, str]]:
        paths = []
        for kind in ("users", "clients", "brokers"):
            try:
                names = sorted(self._do(self._client.get_children_async, f"{layout.CONFIG}/{kind}"))
            except NoNodeError:
                continue
            with self._kazoo_errors():
                pending = [self._client.get_children_async(f"{layout.CONFIG}/{kind}/{n}/clients")
                           for n in (names if kind == "users" else ())]
            for i, name in enumerate(names):
                paths.append(f"{kind}/{name}")
                if kind == "users":
                    try:
                        with self._kazoo_errors():
                            clients = pending[i].get(timeout=self._request_timeout)
                    except NoNodeError:
                        clients = []
                    paths += [f"users/{name}/clients/{c}" for c in sorted(clients)]
        nodes = self._get_many([f"{layout.CONFIG}/{p}" for p in paths])
        configs = {p: layout.decode_entity_config(node[0]) for p, node in zip(paths, nodes) if node is not None}
        return {p: c for p, c in configs.items() if c}

    def update_entity_configs(self, entity_path: str, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        """As Kafka's AdminZkClient.changeConfigs: a conditional write of the entity's node and, in the same
        transaction, a sequential /config/changes notification every broker's watch sees (purged after 15
        minutes). A node left without configs stays (it may hold a user's clients)."""
        def new_data(data: bytes | None) -> bytes | None:
            config = dict(change(layout.decode_entity_config(data) if data is not None else {}))
            return layout.encode_entity_config(config) if config or data is not None else None
        self._update_announced(f"{layout.CONFIG}/{entity_path}", new_data,
                               f"{layout.CONFIG_CHANGES}/{layout.CONFIG_CHANGE_PREFIX}",
                               layout.config_change(entity_path), f"configs of {entity_path}")

    def watch_entity_configs(self, callback: Callable[[dict[str, dict[str, str]]], None]) -> Subscription:
        return self._watch(ChildrenWatch, layout.CONFIG_CHANGES, self.get_entity_configs, callback)

    def allocate_producer_ids(self, broker_id: int, count: int) -> int:
        if count < 1:
            raise InvalidArgumentError("count must be at least 1")
        while True:
            try:
                data, stat = self._do(self._client.get_async, layout.PRODUCER_ID_BLOCK)
            except NoNodeError:
                try:
                    self._do(self._client.create_async, layout.PRODUCER_ID_BLOCK,
                             layout.encode_producer_id_block(broker_id, 0, count - 1))
                    return 0
                except NodeExistsError:
                    continue
            start = layout.decode_producer_id_block_end(data) + 1
            try:
                self._do(self._client.set_async, layout.PRODUCER_ID_BLOCK,
                         layout.encode_producer_id_block(broker_id, start, start + count - 1), stat.version)
                return start
            except BadVersionError:
                continue

    def mark_topic_for_deletion(self, topic: str) -> None:
        transaction = self._client.transaction()
        transaction.check(layout.topic_path(topic), -1)
        transaction.create(layout.delete_topic_path(topic))
        failed = self._commit(transaction)
        if failed is not None and not isinstance(failed[1], NodeExistsError):
            raise _conflict(failed[1], f"Topic '{topic}'")

    def topics_marked_for_deletion(self) -> list[str]:
        return sorted(self._do(self._client.get_children_async, layout.DELETE_TOPICS))

    def delete_topic(self, topic: str, controller: ControllerEpoch) -> None:
        try:
            partitions = self._do(self._client.get_children_async, layout.partitions_path(topic))
        except NoNodeError:
            partitions = None
        marked = self._do(self._client.exists_async, layout.delete_topic_path(topic)) is not None
        transaction = self._client.transaction()
        transaction.check(layout.CONTROLLER_EPOCH, controller.version)
        for partition in partitions or ():
            transaction.delete(layout.partition_state_path(topic, int(partition)))
            transaction.delete(layout.partition_path(topic, int(partition)))
        if partitions is not None:
            transaction.delete(layout.partitions_path(topic))
        transaction.delete(layout.topic_path(topic))
        transaction.delete(layout.topic_config_path(topic))
        if marked:
            transaction.delete(layout.delete_topic_path(topic))
        failed = self._commit(transaction)
        if failed is not None:
            raise _stale(controller) if failed[0] == 0 else _conflict(failed[1], f"Deleting topic '{topic}'")

    def watch_topics(self, callback: Callable[[list[str]], None]) -> Subscription:
        return self._watch(ChildrenWatch, layout.TOPICS, self.list_topics, callback)

    def watch_topic(self, topic: str, callback: Callable[[TopicAssignment | None], None]) -> Subscription:
        def compute():
            node = self._get_or_none(layout.topic_path(topic))
            try:
                return None if node is None else self._decode_topic(topic, node)
            except MalformedTopicError:
                return None                             # left out (logged); read again when the node changes
        return self._watch(DataWatch, layout.topic_path(topic), compute, callback)

    def watch_topic_config(self, topic: str,
                           callback: Callable[[dict[str, str] | None], None]) -> Subscription:
        def compute():
            node = self._get_or_none(layout.topic_config_path(topic))
            return None if node is None else layout.decode_config(node[0])
        return self._watch(DataWatch, layout.topic_config_path(topic), compute, callback)

    def watch_topic_deletions(self, callback: Callable[[list[str]], None]) -> Subscription:
        return self._watch(ChildrenWatch, layout.DELETE_TOPICS, self.topics_marked_for_deletion, callback)

    # --- partition state -------------------------------------------------------------------------------

    def create_partition_states(self, topic: str, states: Mapping[int, PartitionState],
                                controller: ControllerEpoch) -> dict[int, PartitionState]:
        for state in states.values():
            validate_partition_state(state)
        assignment = self.get_topic(topic)
        for partition in states:
            if partition not in assignment.partitions:
                raise UnknownTopicOrPartitionError(f"Topic '{topic}' has no partition {partition}")
        try:
            existing = set(self._do(self._client.get_children_async, layout.partitions_path(topic)))
        except NoNodeError:
            existing = None
        created = {p: replace(s, controller_epoch=controller.epoch, version=0) for p, s in sorted(states.items())}
        transaction = self._client.transaction()
        transaction.check(layout.CONTROLLER_EPOCH, controller.version)
        if existing is None:
            transaction.create(layout.partitions_path(topic))
        for partition, state in created.items():
            if str(partition) not in (existing or ()):
                transaction.create(layout.partition_path(topic, partition))
            transaction.create(layout.partition_state_path(topic, partition), layout.encode_partition_state(state))
        failed = self._commit(transaction)
        if failed is not None:
            raise _stale(controller) if failed[0] == 0 else _conflict(failed[1], f"Partition states of '{topic}'")
        return created

    def get_partition_state(self, topic: str, partition: int) -> PartitionState:
        node = self._get_or_none(layout.partition_state_path(topic, partition))
        if node is None:
            raise UnknownTopicOrPartitionError(f"Partition {topic}-{partition} has no state")
        return layout.decode_partition_state(node[0], node[1].version, node[1].mzxid)

    def get_partition_states(self, topic: str) -> dict[int, PartitionState]:
        try:
            children = self._do(self._client.get_children_async, layout.partitions_path(topic))
        except NoNodeError:
            return {}
        partitions = sorted(int(child) for child in children)
        found = self._get_many([layout.partition_state_path(topic, p) for p in partitions])
        return {p: layout.decode_partition_state(node[0], node[1].version, node[1].mzxid)
                for p, node in zip(partitions, found) if node is not None}

    def update_partition_state(self, topic: str, partition: int, state: PartitionState,
                               controller: ControllerEpoch) -> PartitionState:
        validate_partition_state(state, conditional=True)
        new = replace(state, controller_epoch=controller.epoch)
        transaction = self._client.transaction()
        transaction.check(layout.CONTROLLER_EPOCH, controller.version)
        transaction.set_data(layout.partition_state_path(topic, partition), layout.encode_partition_state(new),
                             version=state.version)
        results = self._do(transaction.commit_async)
        failed = _failure(results)
        if failed is not None:
            raise _stale(controller) if failed[0] == 0 else _conflict(failed[1], f"Partition {topic}-{partition}")
        return replace(new, version=results[1].version, written=results[1].mzxid)

    def update_partition_states(self, updates: Sequence[tuple[str, int, PartitionState]],
                                controller: ControllerEpoch) -> list[PartitionState | SeglogError]:
        """Pipelined: every conditional write is sent before the first answer is awaited. A write whose answer
        is lost with the connection is redone on its own (``update_partition_state`` waits for kazoo to
        reconnect; a cut write that was applied then fails as a concurrent change)."""
        for _, _, state in updates:
            validate_partition_state(state, conditional=True)
        sent = []
        for topic, partition, state in updates:
            new = replace(state, controller_epoch=controller.epoch)
            transaction = self._client.transaction()
            transaction.check(layout.CONTROLLER_EPOCH, controller.version)
            transaction.set_data(layout.partition_state_path(topic, partition), layout.encode_partition_state(new),
                                 version=state.version)
            with self._kazoo_errors():
                sent.append((topic, partition, state, new, transaction.commit_async()))
        deadline = time.monotonic() + self._request_timeout
        out: list[PartitionState | SeglogError] = []
        for topic, partition, state, new, pending in sent:
            try:
                with self._kazoo_errors():
                    results = pending.get(timeout=max(0.0, deadline - time.monotonic()))
            except NetworkError:
                out.append(self._update_or_error(topic, partition, state, controller))
                continue
            failed = _failure(results)
            if failed is None:
                out.append(replace(new, version=results[1].version, written=results[1].mzxid))
            elif failed[0] == 0:
                raise _stale(controller)
            else:
                out.append(_conflict(failed[1], f"Partition {topic}-{partition}"))
        return out

    def update_isr(self, topic: str, partition: int, base: PartitionState, isr: Sequence[int]) -> PartitionState:
        new = validate_isr_update(base, isr)
        try:
            stat = self._do(self._client.set_async, layout.partition_state_path(topic, partition),
                            layout.encode_partition_state(new), version=base.version)
        except (NoNodeError, BadVersionError) as exc:
            raise _conflict(exc, f"Partition {topic}-{partition}") from None
        return replace(new, version=stat.version, written=stat.mzxid)

    def watch_partition_state(self, topic: str, partition: int,
                              callback: Callable[[PartitionState | None], None]) -> Subscription:
        path = layout.partition_state_path(topic, partition)

        def compute():
            node = self._get_or_none(path)
            return None if node is None else layout.decode_partition_state(node[0], node[1].version, node[1].mzxid)
        return self._watch(DataWatch, path, compute, callback)

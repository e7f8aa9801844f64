"""The replica manager of one broker: the role of every local replica and what each role runs.

``apply(topic, p, state, replicas)`` is called with every partition state the metadata store reports for a
replica hosted here. Leader of the state's epoch: the log stamps that epoch from now on (the epoch cache
records where it starts), a LeaderState tracks the followers. A newer epoch with this broker still leader
(a replica set change) keeps that LeaderState, its waiting produces and the coordinators' loaded state. Follower: leadership (if any) is resigned,
and the partition is handed to the fetcher of its leader, which first truncates a diverged tail. Not a
replica any more, or no leader: neither. Replicated logs keep an explicit high watermark (never "the log
end") so a new leader never exposes what was not committed.

ISR changes decided by leaders (a follower lagging longer than replica.lag.time.max.ms, or one caught up
again) are written by one worker thread with compare-and-set on the state's version; a write that loses
the race re-reads the state and is dropped if this broker no longer leads that epoch.

A state naming this broker leader but written before its current registration is its previous life's (a
restart or a new session): it leads nothing there until the controller, which sees the bounce, elects again.

While the metadata session is lost (``fence()``), this broker acts as leader of nothing: produce and fetch
requests get NOT_LEADER_OR_FOLLOWER until fresh states arrive.
"""

from __future__ import annotations

import logging
import queue
import threading
import time

from ..cluster.metastore import NO_LEADER, InvalidUpdateVersionError, PartitionState
from ..errors import NotEnoughReplicasError, NotLeaderOrFollowerError, SeglogError, StorageError
from ..security.client import ClientSecurity
from .fetcher import LeaderFetcher
from .leader import LeaderState
from .throttle import ReplicationThrottles

log = logging.getLogger("seglog.replication")


class ReplicaManager:
    def __init__(self, node, broker_id: int, config, store, broker_address, security: ClientSecurity,
                 throttles: ReplicationThrottles | None = None):
        self.node = node
        self.throttles = throttles                      # replication throttles (None: never throttled)
        self.broker_id = broker_id
        self.config = config
        self.store = store
        self.broker_address = broker_address            # broker id -> (host, port) or None
        self.security = security                        # of the fetchers' connections (the inter-broker listener's)
        self._lock = threading.RLock()
        self._leaders: dict[tuple[str, int], LeaderState] = {}
        self._states: dict[tuple[str, int], PartitionState] = {}
        self._fetchers: dict[int, LeaderFetcher] = {}
        self._following: dict[tuple[str, int], int] = {}
        self._isr_queue: queue.Queue = queue.Queue()
        self._isr_pending: set[tuple[str, int, int]] = set()    # queued ISR checks (one per partition and epoch)
        self._isr_pending_lock = threading.Lock()     # not self._lock: follower fetches on the event loop take it
        self._fenced = False
        self.registered_epoch = -1                      # this broker's current registration (BrokerInfo.epoch)
        self._stopped_following = False
        self._stopped = threading.Event()
        self.on_log_dir_failure = None        # called with a StorageError a replica's write raised (the broker's)
        node.add_listener(self._on_append)
        self._worker = threading.Thread(target=self._isr_worker, name=f"seglog-isr-{broker_id}", daemon=True)
        self._worker.start()
        self._checker = threading.Thread(target=self._isr_checker, name=f"seglog-isr-check-{broker_id}",
                                         daemon=True)
        self._checker.start()

    # -- roles ------------------------------------------------------------------------------------------------

    def apply(self, topic: str, index: int, state: PartitionState | None, replicas: tuple[int, ...],
              removing: tuple[int, ...] = ()) -> None:
        """React to the current state of a local replica (None: the partition is gone or not ours). ``replicas``:
        the partition's replica set; ``removing``: those a reassignment is removing (a leader never adds them
        to the ISR again, so the ISR can shrink to the target). A StorageError taking the role (the leader
        epoch checkpoint written on a full disk) goes to ``on_log_dir_failure`` as a follower's write's does,
        so the broker stops and the controller moves the leadership it could not take, then propagates."""
        try:
            self._apply(topic, index, state, replicas, removing)
        except StorageError as e:
            if self.on_log_dir_failure is not None:
                self.on_log_dir_failure(e)
            raise

    def _apply(self, topic: str, index: int, state: PartitionState | None, replicas: tuple[int, ...],
               removing: tuple[int, ...]) -> None:
        key = (topic, index)
        with self._lock:
            if state is None or self.broker_id not in replicas:
                self._states.pop(key, None)
                self._resign(key)
                self._unfollow(key)
                return
            self._states[key] = state
            part = self.node.partition(topic, index)
            if part.log.explicit_high_watermark is None:
                part.log.high_watermark = part.log.start_offset
            if self._fenced:
                return
            if state.leader == self.broker_id and 0 <= state.written < self.registered_epoch:
                self._resign(key)                           # my previous life's leadership: the controller
                self._unfollow(key)                         # moves it (a bounce) before I lead again
                return
            if state.leader == self.broker_id:
                self._unfollow(key)
                current = self._leaders.get(key)
                if current is not None and current.active and current.leader_epoch <= state.leader_epoch:
                    if current.leader_epoch < state.leader_epoch:
                        self._reelected(part, current, state)
                    current.set_replicas(replicas, removing)
                    current.set_isr(state.isr)
                    if not set(state.isr) <= set(replicas):
                        self._queue_isr_check(topic, index, state.leader_epoch)    # drop the unassigned
                    return
                self._resign(key)
                self._become_leader(key, part, state, replicas, removing)
            else:
                self._resign(key)
                if state.leader == NO_LEADER or self._stopped_following:
                    self._unfollow(key)
                else:
                    self._follow(key, part, state)

    def _become_leader(self, key, part, state: PartitionState, replicas, removing) -> None:
        part.log.leader_epoch = state.leader_epoch          # the epoch cache records where this epoch starts
        ls = LeaderState(part, self.broker_id, state.leader_epoch, replicas, state.isr, removing)
        self.node._leadership_changed(part, True)           # before requests see the leadership (group loads)
        self._leaders[key] = ls
        ls.update_high_watermark()
        log.info("%s: leader for epoch %d, ISR %s", part, state.leader_epoch, list(state.isr))

    def _reelected(self, part, ls: LeaderState, state: PartitionState) -> None:
        """This broker, leader already, leads a newer epoch (the controller bumped it for a replica set change):
        as Kafka's Partition.makeLeader for a leader that is not new, the leadership goes on. The epoch cache
        records where the new epoch starts, waiting acks=all produces keep waiting, followers keep their
        offsets, and the coordinators keep their groups and transactional ids (only the epoch moves)."""
        part.log.leader_epoch = state.leader_epoch
        ls.new_epoch(state.leader_epoch)
        self.node._leader_epoch_bumped(part)
        log.info("%s: still leader, epoch %d, ISR %s", part, state.leader_epoch, list(state.isr))

    def _resign(self, key) -> None:
        ls = self._leaders.pop(key, None)
        if ls is not None:
            ls.resign()
            self.node._leadership_changed(ls.partition, False)

    def _follow(self, key, part, state: PartitionState) -> None:
        if self._following.get(key) == state.leader:
            fetcher = self._fetchers.get(state.leader)
            if fetcher is not None:
                followed = fetcher.followed.get(key)
                if followed is not None and followed.leader_epoch == state.leader_epoch:
                    return
        self._unfollow(key)
        fetcher = self._fetchers.get(state.leader)
        if fetcher is None or not fetcher.is_alive():
            fetcher = self._fetchers[state.leader] = LeaderFetcher(self, state.leader)
            fetcher.start()
        fetcher.add(part, state.leader_epoch)
        self._following[key] = state.leader
        log.info("%s: follower of broker %d for epoch %d", part, state.leader, state.leader_epoch)

    def _unfollow(self, key) -> None:
        leader = self._following.pop(key, None)
        if leader is not None:
            fetcher = self._fetchers.get(leader)
            if fetcher is not None:
                fetcher.remove(*key)
                if fetcher.empty():
                    fetcher.stop()
                    del self._fetchers[leader]

    def fence(self) -> None:
        """The metadata session is gone: stop leading and following until states arrive again (unfence)."""
        with self._lock:
            self._fenced = True
            for key in list(self._leaders):
                self._resign(key)
            for key in list(self._following):
                self._unfollow(key)
        log.warning("broker %d fenced: metadata session lost", self.broker_id)

    def stop_following(self) -> None:
        """Controlled shutdown: fetch from no leader any more (so no leader puts this broker back in its ISR);
        leaderships go on until the controller moves them."""
        with self._lock:
            self._stopped_following = True
            for key in list(self._following):
                self._unfollow(key)

    def unfence(self) -> None:
        with self._lock:
            self._fenced = False

    # -- queries from the request path ----------------------------------------------------------------------

    def leader_state(self, topic: str, index: int) -> LeaderState:
        """The LeaderState, or NotLeaderOrFollowerError when this broker does not lead the partition now."""
        ls = self._leaders.get((topic, index))
        if ls is None or not ls.active:
            raise NotLeaderOrFollowerError(f"broker {self.broker_id} is not the leader of {topic}-{index}")
        return ls

    def is_leader(self, topic: str, index: int) -> bool:
        ls = self._leaders.get((topic, index))
        return ls is not None and ls.active

    def check_produce(self, topic: str, index: int, acks: int) -> LeaderState:
        """Before appending: this broker leads, and for acks=all the ISR has min.insync.replicas members."""
        ls = self.leader_state(topic, index)
        if acks == -1 and len(ls.isr) < ls.min_isr:
            raise NotEnoughReplicasError(f"{topic}-{index}: ISR {sorted(ls.isr)} is smaller than "
                                         f"min.insync.replicas={ls.min_isr}")
        return ls

    def _on_append(self, part) -> None:
        """Node listener: a leader whose ISR is itself alone commits an append at once."""
        ls = self._leaders.get((part.topic, part.index))
        if ls is not None and len(ls.isr) == 1:
            ls.update_high_watermark()

    def hold_back(self, kind: str, topic: str, index: int, replica_id: int) -> bool:
        """Whether a replication throttle keeps the records of this partition from `replica_id` now (``kind``
        LEADER: a follower's fetch served here; FOLLOWER: this broker's own fetch, `replica_id` its id): only a
        replica out of the ISR, as Kafka. The ISR is the leader's own (LEADER) or the last state read."""
        if self.throttles is None:
            return False
        key = (topic, index)
        with self._lock:
            ls = self._leaders.get(key)
            state = self._states.get(key)
            if ls is not None:
                in_sync = replica_id in ls.isr
            else:
                in_sync = state is not None and replica_id in state.isr
        return self.throttles.hold_back(kind, topic, index, in_sync)

    def follower_fetched(self, topic: str, index: int, replica_id: int, fetch_offset: int) -> None:
        ls = self.leader_state(topic, index)
        if ls.follower_fetched(replica_id, fetch_offset):
            self._queue_isr_check(topic, index, ls.leader_epoch)

    # -- ISR maintenance ----------------------------------------------------------------------------------------

    def _isr_checker(self) -> None:
        interval = max(self.config.replica_lag_time_max_ms / 2000, 0.05)
        while not self._stopped.wait(interval):
            now = time.monotonic()
            with self._lock:
                leaders = list(self._leaders.items())
            for (topic, index), ls in leaders:
                if ls.lagging(now, self.config.replica_lag_time_max_ms):
                    self._queue_isr_check(topic, index, ls.leader_epoch)
                else:
                    ls.update_high_watermark()

    def _queue_isr_check(self, topic: str, index: int, epoch: int) -> None:
        """Have the worker decide the partition's ISR again, unless that is queued already (while the store is
        unreachable each check waits for a timeout: the checker must not pile up duplicates meanwhile)."""
        key = (topic, index, epoch)
        with self._isr_pending_lock:
            if key in self._isr_pending:
                return
            self._isr_pending.add(key)
        self._isr_queue.put(key)

    def _isr_worker(self) -> None:
        while not self._stopped.is_set():
            try:
                topic, index, epoch = self._isr_queue.get(timeout=0.5)
            except queue.Empty:
                continue
            with self._isr_pending_lock:
                self._isr_pending.discard((topic, index, epoch))
            try:
                self._update_isr(topic, index, epoch)
            except SeglogError as e:
                log.info("%s-%d: ISR update failed: %s", topic, index, e)
            except Exception:
                log.exception("%s-%d: ISR update failed", topic, index)

    def _update_isr(self, topic: str, index: int, epoch: int) -> None:
        key = (topic, index)
        for _ in range(5):
            with self._lock:
                ls = self._leaders.get(key)
                base = self._states.get(key)
            if ls is None or not ls.active or ls.leader_epoch != epoch or base is None:
                return
            now = time.monotonic()
            lagging = set(ls.lagging(now, self.config.replica_lag_time_max_ms))
            hw = ls.log.high_watermark
            grow = {r for r, f in ls.followers.items() if r not in ls.isr and ls.may_join(r)
                    and f.leo >= hw and f.leo >= ls.epoch_start}
            new_isr = (tuple(r for r in base.isr if r not in lagging and r in ls.replicas)
                       + tuple(sorted(grow - set(base.isr))))
            if self.broker_id not in new_isr:
                new_isr = (self.broker_id,) + new_isr
            if set(new_isr) == set(base.isr):
                ls.set_isr(base.isr)
                return
            try:
                stored = self.store.update_isr(topic, index, base, new_isr)
            except InvalidUpdateVersionError:
                fresh = self.store.get_partition_state(topic, index)
                with self._lock:
                    if fresh.version > self._states.get(key, base).version:
                        self._states[key] = fresh
                if fresh.leader != self.broker_id or fresh.leader_epoch != epoch:
                    return
                continue
            with self._lock:
                if stored.version > self._states.get(key, base).version:
                    self._states[key] = stored
            log.info("%s-%d: ISR %s -> %s", topic, index, list(base.isr), list(stored.isr))
            ls.set_isr(stored.isr)
            return

    # -- lifecycle --------------------------------------------------------------------------------------------

    def close(self) -> None:
        self._stopped.set()
        self.node.remove_listener(self._on_append)
        with self._lock:
            for key in list(self._leaders):
                self._resign(key)
            for fetcher in self._fetchers.values():
                fetcher.stop()
            fetchers, self._fetchers = list(self._fetchers.values()), {}
            self._following.clear()
        for f in fetchers:
            f.join(timeout=5)
        self._worker.join(timeout=5)
        self._checker.join(timeout=5)

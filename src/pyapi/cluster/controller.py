"""The controller: the one broker (elected through the metadata store) that decides partition leadership.

It reconciles, on one thread, every partition's state with the live brokers, the replica assignments and
the topic deletion queue, whenever any of them changes (events arriving close together are handled in one
pass), and every ``leader_imbalance_check_interval`` for preferred leaders:

- a new partition gets its first live replica as leader and its live replicas as ISR;
- a dead broker leaves every ISR; a partition whose leader died gets the first live ISR member (in
  assignment order, so the preferred replica first) as leader, with a new leader epoch; with no live ISR
  member it stays leaderless (ISR kept, so the last in-sync replica can come back as leader) unless
  unclean.leader.election.enable lets any live replica take over;
- a restarted broker (a bounce: registered again, with a new broker epoch, after the state was written; see
  ``restarted_members``) is handled as a death followed by a return: it leaves the ISR and its leadership
  moves to another in-sync replica with a new leader epoch; if it was the only in-sync replica it leads
  again, in a new epoch. It rejoins the ISR by catching up, and the preferred-leader check gives leadership
  back;
- a broker in controlled shutdown (it asked, for its current broker epoch, before stopping) leaves every ISR
  and hands its leaderships to other in-sync replicas with new leader epochs, so its stop interrupts
  nothing; a partition with no other in-sync replica stays with it (Kafka's controlled shutdown too);
- with auto.leader.rebalance.enable, leadership returns to the preferred replica once it is in the ISR;
- topics queued for deletion are removed;
- a partition reassignment (KIP-455, see ``alter_partition_reassignments``) starts with a new leader epoch
  for the grown replica set and completes once every target replica is live and in the ISR: a new leader
  epoch (leadership moves to a target replica if the leader is being removed), each removed replica leaves
  the ISR in a new epoch, then the assignment becomes the target (removed brokers stop and delete their
  replica when they see it): the leader epochs of Kafka's ZooKeeper controller (onPartitionReassignment's
  phases A and B, OfflineReplica). Preferred-leader rebalancing skips partitions being reassigned.

Passes and reassignment requests hold one lock, so they never decide on the same partition at once.

Every write carries the controller's lease: if another controller won meanwhile, the write fails with
StaleControllerEpochError and this controller stops (Kafka's controller epoch fencing). State writes are
compare-and-set on the version read, so a concurrent ISR change by a leader is never overwritten blindly.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import replace

from ..config import LogConfig
from ..errors import (ElectionNotNeededError, EligibleLeadersNotAvailableError, InvalidReplicaAssignmentError,
                      LogClosedError, NoReassignmentInProgressError, PreferredLeaderNotAvailableError,
                      RequestTimedOutError, SeglogError, StaleControllerEpochError, UnknownTopicOrPartitionError)
from .metastore import (NO_LEADER, ControllerEpoch, InvalidUpdateVersionError, MetadataStore, PartitionState,
                        ReplicaAssignment, restarted_members)

log = logging.getLogger("seglog.controller")

COALESCE_S = 0.05
STATE_WRITE_ATTEMPTS = 5
"""A decision is re-read and retried this often when leaders keep changing the ISR under it."""


def check_reassignment(target, current: ReplicaAssignment | None, live) -> None:
    """Kafka's checks of a reassignment's target replicas (KafkaController.validateReplicas): not empty, no
    duplicates, no negative ids, and the replicas it adds to ``current`` (None: no such partition, so all of
    them) are live brokers. Raises InvalidReplicaAssignmentError."""
    target = list(target)
    if not target:
        raise InvalidReplicaAssignmentError("Empty replica list specified in partition reassignment.")
    if len(set(target)) != len(target):
        raise InvalidReplicaAssignmentError(f"Duplicate replica ids in partition reassignment replica list: {target}")
    if min(target) < 0:
        raise InvalidReplicaAssignmentError(f"Invalid broker id in replica list: {target}")
    adding = (current or ReplicaAssignment(())).reassign_to(target).adding
    if not set(adding) <= set(live):
        raise InvalidReplicaAssignmentError(f"Replica assignment has brokers that are not alive. Replica list: "
                                            f"{list(adding)}, live broker list: {sorted(live)}")


class Controller:
    def __init__(self, store: MetadataStore, lease: ControllerEpoch, config):
        self.store = store
        self.lease = lease
        self.config = config
        self._events: queue.Queue = queue.Queue()
        self._stopped = threading.Event()
        self._last_rebalance = time.monotonic()
        self._lock = threading.RLock()
        self._thread = threading.Thread(target=self._run, name=f"seglog-controller-{lease.broker_id}",
                                        daemon=True)

    def start(self) -> None:
        log.info("broker %d is the controller (epoch %d)", self.lease.broker_id, self.lease.epoch)
        self._thread.start()
        self.poke("startup")

    def poke(self, why: str) -> None:
        """Something changed (brokers, topics, deletions): reconcile soon."""
        self._events.put(why)

    def stop(self) -> None:
        self._stopped.set()
        self._events.put("stop")
        if threading.current_thread() is not self._thread and self._thread.is_alive():
            self._thread.join(timeout=10)

    @property
    def active(self) -> bool:
        return self._thread.is_alive() and not self._stopped.is_set()

    def _run(self) -> None:
        interval = self.config.leader_imbalance_check_interval_seconds
        while not self._stopped.is_set():
            try:
                self._events.get(timeout=interval)
                time.sleep(COALESCE_S)
                while not self._events.empty():
                    self._events.get_nowait()
            except queue.Empty:
                pass
            if self._stopped.is_set():
                return
            rebalance = (self.config.auto_leader_rebalance_enable
                         and time.monotonic() - self._last_rebalance >= interval)
            try:
                self.reconcile(rebalance)
                if rebalance:
                    self._last_rebalance = time.monotonic()
            except LogClosedError:
                self._stopped.set()                     # the broker is shutting down
            except StaleControllerEpochError:
                log.warning("broker %d is no longer the controller (epoch %d was superseded)",
                            self.lease.broker_id, self.lease.epoch)
                self._stopped.set()
            except SeglogError as e:
                log.warning("controller pass failed (%s); retrying", e)
                self._events.put("retry")
                self._stopped.wait(0.5)
            except Exception:
                log.exception("controller pass failed; retrying")
                self._events.put("retry")
                self._stopped.wait(0.5)

    # -- decisions ---------------------------------------------------------------------------------------------

    def reconcile(self, rebalance: bool = False) -> None:
        """One pass over every topic (see the module docstring)."""
        with self._lock:
            self._reconcile(rebalance)

    def _reconcile(self, rebalance: bool) -> None:
        store, lease = self.store, self.lease
        brokers = store.list_brokers()
        live = set(brokers)
        shutting = {b for b, epoch in store.brokers_shutting_down().items()
                    if b in brokers and brokers[b].epoch == epoch}
        marked = set(store.topics_marked_for_deletion())
        writes: list[tuple[str, int, PartitionState, PartitionState]] = []
        moving: list[tuple[str, int, ReplicaAssignment]] = []
        for topic in store.list_topics():
            if topic in marked:
                store.delete_topic(topic, lease)
                log.info("controller: deleted topic %s", topic)
                continue
            try:
                assignment = store.get_topic(topic)
                states = store.get_partition_states(topic)
                unclean = LogConfig.from_kafka(store.get_topic_config(topic),
                                               self.config.log_config()).unclean_leader_election_enable
            except UnknownTopicOrPartitionError:
                continue
            new = {p: self._initial(replicas, live) for p, replicas in assignment.partitions.items()
                   if p not in states}
            if new:
                store.create_partition_states(topic, new, lease)
                for p, st in new.items():
                    log.info("controller: %s-%d created: leader %d, ISR %s", topic, p, st.leader, list(st.isr))
            reassigning = assignment.reassigning()
            moving += [(topic, p, assignment.replica_assignment(p)) for p in reassigning]
            for p, st in states.items():
                replicas = assignment.partitions.get(p)
                if replicas is None:
                    continue
                desired = self.desired(st, replicas, live, unclean, rebalance and p not in reassigning,
                                       restarted_members(st, brokers), shutting)
                if desired is not None:
                    writes.append((topic, p, st, desired))
        self._write(writes, live)
        for topic, p, ra in moving:
            try:
                self._complete_if_ready(topic, p, ra, live)
            except (InvalidUpdateVersionError, RequestTimedOutError, UnknownTopicOrPartitionError) as e:
                log.info("controller: reassignment of %s-%d not completed yet (%s)", topic, p, e)
                self.poke("reassignment")

    @staticmethod
    def _initial(replicas, live) -> PartitionState:
        alive = [r for r in replicas if r in live]
        if not alive:
            return PartitionState(NO_LEADER, 0, ())
        return PartitionState(alive[0], 0, tuple(alive))

    @staticmethod
    def desired(st: PartitionState, replicas, live, unclean: bool, rebalance: bool,
                restarted=frozenset(), shutting=frozenset()) -> PartitionState | None:
        """The state a partition should have now, or None if it should stay as it is. ``restarted``: ISR
        members that bounced since `st` was written (they leave the ISR; one leads only if no other can);
        ``shutting``: brokers in controlled shutdown (they leave the ISR and lead only if no other can). A replica
        no longer assigned (a reassignment's removed replica) neither leads nor stays in the ISR."""
        isr = tuple(r for r in st.isr if r in live and r not in restarted and r not in shutting and r in replicas)
        leader, epoch = st.leader, st.leader_epoch
        if leader in shutting and leader in live and leader not in restarted and leader in replicas and not isr:
            isr = tuple(r for r in st.isr if r in live and r not in restarted and r in replicas)  # it stays
        elif (leader == NO_LEADER or leader not in live or leader in restarted or leader in shutting
              or leader not in replicas):
            candidates = ([r for r in replicas if r in isr]
                          or [r for r in replicas if r in st.isr and r in restarted])   # the last in-sync ones
            if not candidates and (not st.isr or unclean):
                candidates = [r for r in replicas if r in live and r not in shutting]   # new, or unclean
                isr = tuple(candidates[:1])
            if candidates:
                leader, epoch = candidates[0], epoch + 1
                if leader not in isr:
                    isr = (leader,)
            else:
                if leader == NO_LEADER:
                    return None                                       # still no live in-sync replica
                leader, epoch, isr = NO_LEADER, epoch + 1, st.isr     # keep the last ISR for a clean return
        elif rebalance and replicas and replicas[0] != leader and replicas[0] in isr and replicas[0] in live:
            leader, epoch = replicas[0], epoch + 1
        if (leader, epoch, set(isr)) == (st.leader, st.leader_epoch, set(st.isr)):
            return None
        return replace(st, leader=leader, leader_epoch=epoch, isr=isr)

    # -- ElectLeaders ---------------------------------------------------------------------------------------

    def elect_leaders(self, partitions: list[tuple[str, int]] | None, unclean: bool
                      ) -> dict[tuple[str, int], SeglogError | None]:
        """Kafka's ElectLeaders, on the calling thread (state writes are compare-and-set under the lease, so
        they never undo a concurrent pass). Preferred (`unclean` False): the first assigned replica leads, in a
        new leader epoch, if it is live and in the ISR (ElectionNotNeededError if it leads already,
        PreferredLeaderNotAvailableError otherwise). Unclean: a partition without a live leader gets the first
        live in-sync replica, or else the first live replica, whatever unclean.leader.election.enable says
        (ElectionNotNeededError while it has a leader, EligibleLeadersNotAvailableError with no live replica).
        Per partition None (elected) or the error; None asks for every partition."""
        store = self.store
        brokers = store.list_brokers()
        live = set(brokers)
        assignments = {}
        if partitions is None:
            partitions = []
            for topic in store.list_topics():
                try:
                    assignments[topic] = store.get_topic(topic)
                except UnknownTopicOrPartitionError:
                    continue
                partitions += [(topic, p) for p in sorted(assignments[topic].partitions)]
        marked = set(store.topics_marked_for_deletion())
        out: dict[tuple[str, int], SeglogError | None] = {}
        for topic, p in partitions:
            try:
                if topic in marked:
                    raise UnknownTopicOrPartitionError(f"topic {topic} is being deleted")
                if topic not in assignments:
                    assignments[topic] = store.get_topic(topic)
                replicas = assignments[topic].partitions.get(p)
                if replicas is None:
                    raise UnknownTopicOrPartitionError(f"This server does not host this topic-partition: {topic}-{p}")
                out[(topic, p)] = self._elect(topic, p, replicas, live, unclean)
            except SeglogError as e:
                out[(topic, p)] = e
        return out

    def _elect(self, topic: str, p: int, replicas, live, unclean: bool) -> SeglogError | None:
        for _ in range(5):                               # a leader's concurrent ISR change: read and decide again
            st = self.store.get_partition_state(topic, p)
            if not unclean:
                preferred = replicas[0]
                if st.leader == preferred and preferred in live:
                    return ElectionNotNeededError("Leader election not needed for topic partition")
                if preferred not in live or preferred not in st.isr:
                    return PreferredLeaderNotAvailableError(
                        f"Failed to elect leader for partition {topic}-{p} under strategy "
                        f"PreferredReplicaPartitionLeaderElectionStrategy")
                desired = replace(st, leader=preferred, leader_epoch=st.leader_epoch + 1)
            else:
                if st.leader != NO_LEADER and st.leader in live:
                    return ElectionNotNeededError("Leader election not needed for topic partition")
                candidates = ([r for r in replicas if r in live and r in st.isr]
                              or [r for r in replicas if r in live])
                if not candidates:
                    return EligibleLeadersNotAvailableError(
                        f"Failed to elect leader for partition {topic}-{p} under strategy "
                        f"OfflinePartitionLeaderElectionStrategy(true)")
                leader = candidates[0]
                isr = tuple(r for r in st.isr if r in live) if leader in st.isr else (leader,)
                desired = replace(st, leader=leader, leader_epoch=st.leader_epoch + 1, isr=isr)
            try:
                stored = self.store.update_partition_state(topic, p, desired, self.lease)
            except InvalidUpdateVersionError:
                continue
            log.info("controller: %s-%d %s election: leader %d -> %d (epoch %d)", topic, p,
                     "unclean" if unclean else "preferred", st.leader, stored.leader, stored.leader_epoch)
            return None
        return RequestTimedOutError(f"{topic}-{p}: its state kept changing during the election; try again")

    # -- partition reassignment (KIP-455) -------------------------------------------------------------------

    def alter_partition_reassignments(self, changes: dict[tuple[str, int], list[int] | None]
                                      ) -> dict[tuple[str, int], SeglogError | None]:
        """Kafka's AlterPartitionReassignments: per partition, start moving it to the target replicas (the new
        ones start fetching at once; the move completes in a later pass, once they are all in the ISR), or with
        None cancel its reassignment (back to the original replicas; added replicas stop and delete theirs).
        A new target replaces an ongoing reassignment's. Per partition None (accepted) or the error, checked in
        Kafka's order: InvalidReplicaAssignmentError (see check_reassignment), NoReassignmentInProgressError
        (cancelling none), UnknownTopicOrPartitionError (no such partition, or its topic is being deleted)."""
        with self._lock:
            live = set(self.store.list_brokers())
            marked = set(self.store.topics_marked_for_deletion())
            topics: dict[str, object] = {}
            out: dict[tuple[str, int], SeglogError | None] = {}
            for (topic, p), target in changes.items():
                try:
                    if topic not in topics:
                        try:
                            topics[topic] = self.store.get_topic(topic)
                        except UnknownTopicOrPartitionError:
                            topics[topic] = None
                    a = topics[topic]
                    current = a.replica_assignment(p) if a is not None and p in a.partitions else None
                    self._reassign(topic, p, current, target, live, marked)
                    out[(topic, p)] = None
                except SeglogError as e:
                    out[(topic, p)] = e
            return out

    def _reassign(self, topic: str, p: int, current: ReplicaAssignment | None, target, live, marked) -> None:
        if target is not None:
            check_reassignment(target, current, live)
        elif current is None or not current.reassigning:
            raise NoReassignmentInProgressError(f"No reassignment is in progress for {topic}-{p}")
        if current is None or topic in marked:
            raise UnknownTopicOrPartitionError("The partition does not exist.")
        new = current.reassign_to(current.origin if target is None else target)
        if new == current:
            return                                      # already so: nothing to move
        self._move(topic, p, current, new, live)        # replicas no longer wanted (a cancelled move's) leave
        log.info("controller: %s-%d reassignment %s: replicas %s -> %s (adding %s, removing %s)", topic, p,
                 "cancelled" if target is None else "started", list(current.replicas), list(new.replicas),
                 list(new.adding), list(new.removing))
        if not self._complete_if_ready(topic, p, new, live):
            # Kafka's phase A: a new leader epoch (leader and ISR unchanged) for the new replica set
            self._update_state(topic, p, lambda st: replace(st, leader_epoch=st.leader_epoch + 1),
                               "the replica set grew")

    def list_partition_reassignments(self, partitions: list[tuple[str, int]] | None
                                     ) -> dict[tuple[str, int], ReplicaAssignment]:
        """Kafka's ListPartitionReassignments, from the metadata store (list_reassignments)."""
        return list_reassignments(self.store, partitions)

    def _complete_if_ready(self, topic: str, p: int, ra: ReplicaAssignment, live) -> bool:
        """Complete the reassignment ``ra`` once every target replica is live and in the ISR, as Kafka's
        controller (onPartitionReassignment, phase B): a new leader epoch, the leader kept if it is a live
        target replica (else the first live in-sync target replica leads); then each removed replica leaves
        the ISR, each in a new leader epoch; then the replica set becomes the target. Whether it completed."""
        st = self.store.get_partition_state(topic, p)
        if not all(r in live and r in st.isr for r in ra.target):
            return False
        done = ReplicaAssignment(ra.target)

        def lead(st: PartitionState) -> PartitionState:
            leader = st.leader
            if leader not in done.replicas or leader not in live:
                leader = next((r for r in done.target if r in st.isr and r in live), NO_LEADER)
            return replace(st, leader=leader, leader_epoch=st.leader_epoch + 1)

        self._update_state(topic, p, lead, "the reassignment completes")
        self._move(topic, p, ra, done, live)
        log.info("controller: %s-%d reassignment completed: replicas %s, leader %d", topic, p, list(ra.target),
                 self.store.get_partition_state(topic, p).leader)
        return True

    def _update_state(self, topic: str, p: int, change, why: str) -> None:
        """Write ``change(current state)`` (None: nothing to write), compare-and-set, re-reading and retrying
        while leaders change the ISR under it; RequestTimedOutError if it never settles."""
        for _ in range(STATE_WRITE_ATTEMPTS):
            st = self.store.get_partition_state(topic, p)
            desired = change(st)
            if desired is None:
                return
            try:
                stored = self.store.update_partition_state(topic, p, desired, self.lease)
            except InvalidUpdateVersionError:
                continue
            log.info("controller: %s-%d leader %d -> %d (epoch %d), ISR %s -> %s (%s)", topic, p, st.leader,
                     stored.leader, stored.leader_epoch, list(st.isr), list(stored.isr), why)
            return
        raise RequestTimedOutError(f"{topic}-{p}: its state kept changing during the reassignment; try again")

    def _move(self, topic: str, p: int, old: ReplicaAssignment, new: ReplicaAssignment, live) -> None:
        """Store ``new`` as the partition's replicas. Each replica it drops first leaves the ISR in a new leader
        epoch (Kafka's OfflineReplica transition); if it leads, leadership goes to the first live in-sync
        replica of the new target (else of the new replicas; none: no leader). So no state ever names a replica
        that is not assigned."""
        for r in old.replicas:
            if r in new.replicas:
                continue

            def leave(st: PartitionState, r=r) -> PartitionState | None:
                if r not in st.isr and r != st.leader:
                    return None
                isr = tuple(i for i in st.isr if i != r)
                leader = st.leader
                if leader == r:
                    leader = next((c for c in (*new.target, *new.replicas) if c in isr and c in live), NO_LEADER)
                return replace(st, leader=leader, leader_epoch=st.leader_epoch + 1, isr=isr)
            try:
                self._update_state(topic, p, leave, f"replica {r} leaves")
            except UnknownTopicOrPartitionError:
                break                                   # no state yet: the first one reads the new replicas
        if new != old:
            self.store.update_replica_assignments(topic, {p: new}, self.lease)

    def _write(self, writes: list[tuple[str, int, PartitionState, PartitionState]], live: set[int]) -> None:
        """Store a pass's decisions in one pipelined batch (a broker's failure moves hundreds of partitions
        at once), partitions without a live leader first. A write refused because the state changed (a leader
        changed the ISR) makes the controller decide again; any other refusal is raised after the batch."""
        writes = sorted(writes, key=lambda w: w[2].leader in live)
        results = self.store.update_partition_states([(t, p, desired) for t, p, _, desired in writes], self.lease)
        error = None
        for (topic, p, st, _), stored in zip(writes, results):
            if isinstance(stored, InvalidUpdateVersionError):
                self.poke("state changed under the controller")
            elif isinstance(stored, SeglogError):
                error = error or stored
            else:
                log.info("controller: %s-%d leader %d -> %d (epoch %d), ISR %s -> %s", topic, p, st.leader,
                         stored.leader, stored.leader_epoch, list(st.isr), list(stored.isr))
        if error is not None:
            raise error


def list_reassignments(store, partitions: list[tuple[str, int]] | None) -> dict[tuple[str, int], ReplicaAssignment]:
    """The partitions asked (None: all) that are being reassigned, with their full replica set and adding /
    removing replicas, as the metadata store holds them; others (and unknown ones) are left out. Any broker can
    answer it: the store is the truth, so a listing does not wait on a controller that is paused or moving."""
    wanted = None if partitions is None else set(partitions)
    topics = sorted({t for t, _ in wanted}) if wanted is not None else store.list_topics()
    out: dict[tuple[str, int], ReplicaAssignment] = {}
    for topic in topics:
        try:
            a = store.get_topic(topic)
        except UnknownTopicOrPartitionError:
            continue
        for p in a.reassigning():
            if wanted is None or (topic, p) in wanted:
                out[(topic, p)] = a.replica_assignment(p)
    return out

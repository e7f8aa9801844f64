"""The in-process Consumer: Kafka's consumer semantics against a local Node.

Two modes, as in Kafka: ``subscribe(topics or pattern)`` joins the consumer group ``group_id`` through the
node's group coordinator (the same one the network broker uses, so in-process and networked members can share
a group): the leader member runs the assignor (range by default, roundrobin, cooperative-sticky) and each
partition goes to exactly one member. ``assign(partitions)`` takes partitions by hand (no group membership;
commits are "simple" commits). ``poll()`` returns records below each partition's high watermark, at most
``max_records``, and advances the positions past them. ``isolation_level="read_committed"`` (Kafka's
isolation.level) reads only up to the last stable offset and drops the records of aborted transactions;
transaction markers never reach the application at either level.

Offsets: ``commit()`` stores the positions (or the given offsets) in ``__consumer_offsets``; with
``enable_auto_commit`` the positions are committed every ``auto_commit_interval_ms`` from poll(), before a
rebalance gives partitions away, and on close. Committing after processing gives at-least-once delivery;
auto-commit commits positions of records already returned, so a crash may skip records still being processed
(at-most-once for those). Without a committed offset a partition starts at ``auto_offset_reset``: "earliest",
"latest" or "none" (NoOffsetForPartitionError).

Heartbeats run on a background thread; a rebalance it learns about is carried out by the next poll(), as
Kafka's consumer does. Membership follows Kafka's member states: UNJOINED -> PREPARING_REBALANCE (JoinGroup
sent) -> COMPLETING_REBALANCE (SyncGroup sent) -> STABLE. poll(timeout) returns within its timeout even while
the group rebalances (the first join waits group.initial.rebalance.delay.ms): it returns no records then, and
the JoinGroup / SyncGroup it sent stays outstanding, so the next poll() goes on from its answer (never sending
a second one meanwhile). Heartbeats are sent from the JoinGroup answer on, and an answer only counts for the
generation it was sent in: REBALANCE_IN_PROGRESS requests a rejoin only if the member is still Stable in that
generation; UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION (or max_poll_interval_ms passing) reset the generation: the
member fell out of the group. Its partitions are then *lost*, not revoked: the next poll() drops them without
committing (``on_lost``) and reads the committed offsets again once they come back.

Leaving as Kafka's consumer leaves: unsubscribe() and close() give up the partitions through on_revoke (which
may still commit), or on_lost if the member is not Stable in a generation; then a dynamic member sends
LeaveGroup. A static member (``group_instance_id``) sends none (not on close, unsubscribe, or a poll timeout
either): the coordinator keeps its partitions until its session times out, and hands them back if the same
instance id joins again before that. Subscribing to topics, to a pattern, and assigning partitions by hand are
exclusive (IllegalStateError) until unsubscribe().
A Consumer is not thread-safe: use it from one thread (``close()`` may come from any).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from typing import Callable, Iterable, NamedTuple

from . import _engine
from .isolation import AbortedFilter, isolation_level as isolation_level_code
from .assignors import Assignment, Subscription, assignor_for
from .errors import (IllegalGenerationError, IllegalStateError, InvalidArgumentError, InvalidGroupIdError,
                     LogClosedError, MemberIdRequiredError, NoOffsetForPartitionError, OffsetOutOfRangeError,
                     RebalanceInProgressError, SeglogError, UnknownMemberIdError, UnknownTopicOrPartitionError)
from .offsets_format import OffsetAndMetadata, TopicPartition

__all__ = ["Consumer", "ConsumerGroupMetadata", "TopicPartition"]

log = logging.getLogger("seglog.consumer")
_RESETS = ("earliest", "latest", "none")
_UNJOINED, _PREPARING, _COMPLETING, _STABLE = "unjoined", "preparing_rebalance", "completing_rebalance", "stable"
_TOPICS, _PATTERN, _ASSIGNED = "topics", "pattern", "assigned"     # Kafka's SubscriptionType (None: none yet)
_SUBSCRIPTION_EXCLUSIVE = "Subscription to topics, partitions and pattern are mutually exclusive"


class ConsumerGroupMetadata(NamedTuple):
    """What a transactional producer passes to ``send_offsets_to_transaction`` (Kafka's ConsumerGroupMetadata):
    the group and, for a member of it, its generation, member id and static instance id, which the group
    coordinator checks so that a consumer fenced out of the group cannot commit."""
    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass
class _Assigned:
    """Consumer-side state of one assigned partition."""
    partition: object                        # seglog.node.Partition
    position: int | None = None
    paused: bool = False
    buffer: list = field(default_factory=list)   # decoded records at and after `position`, not yet returned


class Consumer:
    """Read records from a Node's topics (see the module docstring). Use as a context manager or close()."""

    def __init__(self, node, *, group_id: str | None = None, client_id: str = "seglog-consumer",
                 auto_offset_reset: str = "latest", enable_auto_commit: bool = True,
                 auto_commit_interval_ms: int = 5000, max_poll_records: int = 500,
                 max_partition_fetch_bytes: int = 1048576, session_timeout_ms: int = 45000,
                 heartbeat_interval_ms: int = 3000, max_poll_interval_ms: int = 300000,
                 partition_assignment_strategy: Iterable[str] = ("range", "cooperative-sticky"),
                 group_instance_id: str | None = None, key_deserializer: Callable | None = None,
                 value_deserializer: Callable | None = None, isolation_level: str = "read_uncommitted"):
        if auto_offset_reset not in _RESETS:
            raise InvalidArgumentError(f"auto_offset_reset must be one of {', '.join(_RESETS)}")
        try:
            self._isolation = isolation_level_code(isolation_level)
        except ValueError as e:
            raise InvalidArgumentError(str(e)) from None
        self.isolation_level = isolation_level
        if max_poll_records < 1 or max_partition_fetch_bytes < 1 or heartbeat_interval_ms < 1:
            raise InvalidArgumentError("max_poll_records, max_partition_fetch_bytes and heartbeat_interval_ms "
                                       "must be positive")
        self.node = node
        self.group_id = group_id
        self.client_id = client_id
        self.auto_offset_reset = auto_offset_reset
        self.enable_auto_commit = enable_auto_commit and group_id is not None
        self.auto_commit_interval = auto_commit_interval_ms / 1000
        self.max_poll_records = max_poll_records
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval = heartbeat_interval_ms / 1000
        self.max_poll_interval = max_poll_interval_ms / 1000
        self.group_instance_id = group_instance_id
        self.assignors = [assignor_for(name) for name in partition_assignment_strategy]
        if not self.assignors:
            raise InvalidArgumentError("partition_assignment_strategy needs at least one assignor")
        self._key_de = key_deserializer
        self._value_de = value_deserializer
        self._assigned: dict[TopicPartition, _Assigned] = {}
        self._topics: set[str] = set()
        self._pattern: re.Pattern | None = None
        self._mode: str | None = None           # _TOPICS, _PATTERN, _ASSIGNED, or None (neither yet)
        self._on_assign = self._on_revoke = self._on_lost = None
        self._lock = threading.Lock()          # guards the next three: the heartbeat thread resets them
        self._member_state = _UNJOINED
        self._member_id = ""
        self._generation = -1                  # -1: never joined, or fell out (what it holds is lost)
        self._protocol: str | None = None
        self._join_future: Future | None = None     # the JoinGroup sent and not yet answered (or not yet read)
        self._sync_future: Future | None = None     # the same for SyncGroup
        self._rejoin = threading.Event()
        self._hb_stop = threading.Event()
        self._hb_thread: threading.Thread | None = None
        self._last_poll = time.monotonic()
        self._last_commit = time.monotonic()
        self._next = 0
        self._pattern_checked = 0.0
        self._joined_topics: set[str] = set()
        self._closed = False

    # -- subscription ----------------------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | None = None, *, pattern: str | None = None,
                  on_assign: Callable | None = None, on_revoke: Callable | None = None,
                  on_lost: Callable | None = None) -> None:
        """Join group_id for these topics (or every topic matching `pattern`). on_assign/on_revoke get the list
        of TopicPartitions given to / taken from this consumer at each rebalance, and on_revoke everything it
        holds when it leaves (unsubscribe, close; it may still commit them). on_lost (default: on_revoke) gets
        those it lost by falling out of the group: they may belong to another member already, so they cannot
        be committed. Subscribing again replaces the topics (or the pattern) and callbacks; switching between
        topics, a pattern and assign() raises IllegalStateError (unsubscribe() first). An empty topic list
        unsubscribes."""
        self._check_open()
        if self.group_id is None:
            raise InvalidGroupIdError("subscribe() needs a group_id (use assign() without one)")
        if (topics is None) == (pattern is None):
            raise InvalidArgumentError("give either topics or pattern")
        if isinstance(topics, str):
            topics = [topics]
        topics = set(topics or ())
        if pattern is None and not topics:
            self.unsubscribe()                                   # as Kafka: subscribe([]) is unsubscribe()
            return
        compiled = re.compile(pattern) if pattern is not None else None
        self._set_mode(_PATTERN if pattern is not None else _TOPICS)
        self._pattern, self._topics = compiled, topics
        self._on_assign, self._on_revoke, self._on_lost = on_assign, on_revoke, on_lost
        self._rejoin.set()

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Take these partitions by hand (no group membership). Positions start at the committed offset if
        there is a group_id and one, else at auto_offset_reset. Assigning again replaces the partitions;
        IllegalStateError while subscribed (unsubscribe() first). An empty list unsubscribes."""
        self._check_open()
        wanted = [TopicPartition(t, p) for t, p in partitions]
        if not wanted:
            self.unsubscribe()                                   # as Kafka: assign([]) is unsubscribe()
            return
        self._set_mode(_ASSIGNED)
        self._assigned = {tp: self._assigned.get(tp) or _Assigned(self.node.partition(*tp)) for tp in wanted}

    def _set_mode(self, mode: str) -> None:
        """Kafka's SubscriptionState.setSubscriptionType: one kind of subscription until unsubscribe()."""
        if self._mode is not None and self._mode != mode:
            raise IllegalStateError(_SUBSCRIPTION_EXCLUSIVE)
        self._mode = mode

    def unsubscribe(self) -> None:
        """Leave the group (or drop the manual assignment). A member gives its partitions up first through
        on_revoke (on_lost if it is not Stable in a generation), as Kafka's onLeavePrepare; a dynamic member
        then sends LeaveGroup, a static one does not (its session times out, unless it joins again)."""
        try:
            self._leave_prepare()
        finally:
            self._leave()
            self._rejoin.clear()
            self._assigned = {}
            self._topics, self._pattern, self._mode = set(), None, None

    def assignment(self) -> set[TopicPartition]:
        return set(self._assigned)

    def subscription(self) -> set[str]:
        return set(self._wanted_topics()) if self._subscribed() else set()

    # -- polling ----------------------------------------------------------------------------------------------

    def poll(self, timeout: float = 0.0, max_records: int | None = None) -> list:
        """Records from the assigned partitions (at most max_records, default max_poll_records), waiting up to
        `timeout` seconds for some to arrive. Carries out pending rebalances and auto-commits first; returns
        within `timeout` (empty) if a rebalance is still under way then: the next poll() carries on with it."""
        self._check_open()
        self._last_poll = time.monotonic()
        deadline = self._last_poll + timeout
        limit = self.max_poll_records if max_records is None else max_records
        while True:
            if self._pattern is not None and time.monotonic() - self._pattern_checked >= 1.0:
                self._pattern_checked = time.monotonic()
                if self._member_state == _STABLE and set(self._wanted_topics()) != self._joined_topics:
                    self._rejoin.set()                      # a new topic matches the pattern (or one went)
            if self._subscribed() and (self._rejoin.is_set() or self._joining()) and not self._join(deadline):
                return []                                   # the rebalance goes on in the next poll
            for tp, st in self._assigned.items():       # as Kafka: every assigned partition gets a position
                if st.position is None:
                    self._reset_position(tp, st)
            self._maybe_auto_commit()
            version = self.node.data_version()
            records = self._fetch(limit)
            if records:
                return records
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            self.node.wait_for_data(version, min(left, 0.1))

    def _fetch(self, limit: int) -> list:
        out: list = []
        tps = list(self._assigned)
        n = len(tps)
        for i in range(n):
            if len(out) >= limit:
                break
            tp = tps[(self._next + i) % n]
            st = self._assigned[tp]
            if st.paused:
                continue
            if st.position is None:
                self._reset_position(tp, st)
            if not st.buffer:
                self._fill(tp, st)
            if st.buffer:
                take = st.buffer[:limit - len(out)]
                del st.buffer[:len(take)]
                out.extend(take)
                st.position = take[-1].offset + 1
        self._next = (self._next + 1) % n if n else 0
        if self._key_de is not None or self._value_de is not None:
            out = [self._deserialize(r) for r in out]
        return out

    def _fill(self, tp: TopicPartition, st: _Assigned) -> None:
        try:
            res = st.partition.fetch(st.position, self.max_partition_fetch_bytes, isolation_level=self._isolation)
        except OffsetOutOfRangeError:
            if self.auto_offset_reset == "none":
                raise
            log.info("%s: position %d out of range; resetting to %s", tp, st.position, self.auto_offset_reset)
            st.position = None
            self._reset_position(tp, st)
            return
        if res.next_offset < 0:
            return
        if res.aborted_transactions is None:
            st.buffer = _engine.decode_records(res.records, st.position, res.high_watermark, tp.topic,
                                               tp.partition, not res.crc_checked)
        else:               # read_committed: the records of aborted transactions are dropped (markers always are)
            st.buffer = [r for run in AbortedFilter(res.aborted_transactions).runs(res.records)
                         for r in _engine.decode_records(run, st.position, res.last_stable_offset, tp.topic,
                                                         tp.partition, not res.crc_checked)]
        if not st.buffer:
            st.position = max(st.position, res.next_offset)      # only control records or gaps (compaction)

    def _deserialize(self, r):
        key = r.key if self._key_de is None or r.key is None else self._key_de(r.key)
        value = r.value if self._value_de is None or r.value is None else self._value_de(r.value)
        return _engine._make_record(r.topic, r.partition, r.offset, r.timestamp, r.timestamp_type, key, value,
                                    r.headers)

    def _reset_position(self, tp: TopicPartition, st: _Assigned) -> None:
        committed = self._committed_offset(tp)
        part = st.partition
        if committed is not None and part.log_start_offset <= committed <= part.log_end_offset:
            st.position = committed
        elif self.auto_offset_reset == "earliest":
            st.position = part.log_start_offset
        elif self.auto_offset_reset == "latest":
            st.position = self._end(part)
        else:
            raise NoOffsetForPartitionError(f"no committed offset for {tp.topic}-{tp.partition} and "
                                            f"auto_offset_reset is 'none'")
        st.buffer = []

    # -- positions --------------------------------------------------------------------------------------------

    def _state(self, tp) -> _Assigned:
        st = self._assigned.get(TopicPartition(*tp))
        if st is None:
            raise InvalidArgumentError(f"partition {tp[0]}-{tp[1]} is not assigned to this consumer")
        return st

    def position(self, tp: tuple[str, int]) -> int:
        """The offset of the next record poll() returns for tp (resolving the reset policy if needed)."""
        st = self._state(tp)
        if st.position is None:
            self._reset_position(TopicPartition(*tp), st)
        return st.position

    def seek(self, tp: tuple[str, int], offset: int) -> None:
        """Read tp from `offset` next (an offset outside the log is reset by auto_offset_reset at fetch)."""
        if offset < 0:
            raise InvalidArgumentError(f"seek offset must be >= 0, not {offset}")
        st = self._state(tp)
        st.position = offset
        st.buffer = []

    def seek_to_beginning(self, *tps) -> None:
        for tp in tps or list(self._assigned):
            st = self._state(tp)
            st.position, st.buffer = st.partition.log_start_offset, []

    def seek_to_end(self, *tps) -> None:
        """The end as end_offsets() gives it (the last stable offset with read_committed)."""
        for tp in tps or list(self._assigned):
            st = self._state(tp)
            st.position, st.buffer = self._end(st.partition), []

    def _end(self, part) -> int:
        return part.last_stable_offset if self._isolation else part.high_watermark

    def pause(self, *tps) -> None:
        for tp in tps:
            self._state(tp).paused = True

    def resume(self, *tps) -> None:
        for tp in tps:
            self._state(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self._assigned.items() if st.paused}

    def beginning_offsets(self, tps: Iterable[tuple[str, int]]) -> dict[TopicPartition, int]:
        return {TopicPartition(*tp): self.node.partition(*tp).log_start_offset for tp in tps}

    def end_offsets(self, tps: Iterable[tuple[str, int]]) -> dict[TopicPartition, int]:
        """The offset after the last record this consumer can read in each partition: the high watermark, or
        with read_committed the last stable offset (as Kafka's endOffsets)."""
        return {TopicPartition(*tp): self._end(self.node.partition(*tp)) for tp in tps}

    def offsets_for_times(self, timestamps: dict) -> dict:
        """{tp: (offset, timestamp) of the first record with timestamp >= the given ms, or None}."""
        return {TopicPartition(*tp): self.node.partition(*tp).log.offset_for_timestamp(ts)
                for tp, ts in timestamps.items()}

    # -- offsets ----------------------------------------------------------------------------------------------

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The consumer's group, generation, member id and instance id, for a transactional producer's
        ``send_offsets_to_transaction``. InvalidGroupIdError without a group_id, as Kafka's consumer."""
        if self.group_id is None:
            raise InvalidGroupIdError("group_metadata() needs a consumer with a group_id")
        with self._lock:
            return ConsumerGroupMetadata(self.group_id, self._generation, self._member_id, self.group_instance_id)

    def commit(self, offsets: dict | None = None) -> None:
        """Commit `offsets` ({tp: next offset to read}) or every assigned partition's position. A subscribed
        consumer commits as a member of its current generation, so only while Stable: IllegalGenerationError /
        UnknownMemberIdError (it is not a member: it fell out, or has not joined yet; its partitions are lost)
        and RebalanceInProgressError mean the partitions may belong to another member now (the next poll
        rejoins). Without a subscription (assign(), or neither) it is a simple commit."""
        self._check_open()
        if self.group_id is None:
            raise InvalidGroupIdError("commit() needs a group_id")
        if offsets is None:
            offsets = {tp: st.position for tp, st in self._assigned.items() if st.position is not None}
        now = int(time.time() * 1000)
        request = {TopicPartition(*tp): OffsetAndMetadata(int(o), -1, "", now) for tp, o in offsets.items()}
        bad = sorted(tp for tp, om in request.items() if om.offset < 0)
        if bad:                                 # Java's OffsetAndMetadata refuses them (the broker would not)
            raise InvalidArgumentError(f"invalid negative offset {request[bad[0]].offset} for "
                                       f"{bad[0].topic}-{bad[0].partition}")
        if not request:
            return
        coord = self.node.group_coordinator
        if not self._subscribed():
            errors = coord.commit_offsets(self.group_id, request)
        else:
            with self._lock:
                state, generation, member_id = self._member_state, self._generation, self._member_id
            if state in (_PREPARING, _COMPLETING):
                raise RebalanceInProgressError(f"consumer {self.client_id} is rebalancing group {self.group_id}: "
                                               f"commit after poll() completed it")
            if state != _STABLE:       # a simple commit would overwrite the offsets of the partitions' new owners
                raise UnknownMemberIdError(f"consumer {self.client_id} is not a member of group {self.group_id} "
                                           f"(it fell out or has not joined yet); the next poll() rejoins")
            try:
                errors = coord.commit_offsets(self.group_id, request, generation, member_id,
                                              group_instance_id=self.group_instance_id)
            except (IllegalGenerationError, UnknownMemberIdError):
                self._fall_out(generation, member_id, "a commit")
                raise
            except RebalanceInProgressError:
                self._rejoin.set()
                raise
        failed = {tp: e for tp, e in errors.items() if e is not None}
        if failed:
            raise next(iter(failed.values()))
        self._last_commit = time.monotonic()

    def _maybe_auto_commit(self) -> None:
        if self.enable_auto_commit and self._assigned and \
                time.monotonic() - self._last_commit >= self.auto_commit_interval:
            self._auto_commit()

    def _auto_commit(self) -> None:
        try:
            self.commit()
        except (IllegalGenerationError, UnknownMemberIdError, RebalanceInProgressError) as e:
            log.info("auto-commit of group %s skipped: %s", self.group_id, e)

    def _committed_offset(self, tp: TopicPartition) -> int | None:
        if self.group_id is None:
            return None
        om = self.node.group_coordinator.fetch_offsets(self.group_id, [tp]).get(tp)
        return None if om is None or om.offset < 0 else om.offset

    def committed(self, tp: tuple[str, int]) -> int | None:
        """The group's committed offset of tp, or None."""
        return self._committed_offset(TopicPartition(*tp))

    def lag(self, tp: tuple[str, int]) -> int | None:
        """End offset minus the committed offset (None without a commit)."""
        committed = self.committed(tp)
        return None if committed is None else self.node.partition(*tp).high_watermark - committed

    # -- group membership -------------------------------------------------------------------------------------

    def _subscribed(self) -> bool:
        return self._mode in (_TOPICS, _PATTERN)

    def _wanted_topics(self) -> list[str]:
        if self._pattern is not None:
            return [t for t in self.node.topics() if self._pattern.search(t)]
        return sorted(self._topics)

    def _joining(self) -> bool:
        return self._join_future is not None or self._sync_future is not None

    def _join(self, deadline: float) -> bool:
        """Join (or rejoin) the group and apply the assignment SyncGroup brings, as far as the poll deadline
        allows: True once Stable, False if the deadline came first. The JoinGroup or SyncGroup then under way
        stays in _join_future / _sync_future, and the next call goes on from its answer: one request at a
        time, none answered unread. Retries while the group moves on under us; _rejoin stays set unless a
        SyncGroup succeeded. What the member holds is only its own within its generation: eager protocols
        revoke everything before joining (committing while still a member); with no generation (it fell out,
        or a JoinGroup said so) everything held is lost, so no stale partition is sent as owned and none keeps
        a position from before."""
        try:
            while True:
                if not self._joining():
                    self._send_join()
                if self._join_future is not None:
                    if not self._wait(self._join_future, deadline):
                        return False
                    fut, self._join_future = self._join_future, None
                    if not self._joined(fut):
                        if time.monotonic() >= deadline:
                            self._rejoin.set()
                            return False
                        continue
                if not self._wait(self._sync_future, deadline):
                    return False
                fut, self._sync_future = self._sync_future, None
                if self._synced(fut):
                    return True
                if time.monotonic() >= deadline:
                    self._rejoin.set()
                    return False
        except BaseException:
            self._rejoin.set()
            raise

    @staticmethod
    def _wait(fut: Future, deadline: float) -> bool:
        if not fut.done():
            wait_futures([fut], timeout=max(0.0, deadline - time.monotonic()))
        return fut.done()

    def _call(self, request: Callable[[], Future]) -> Future:
        """Send a JoinGroup / SyncGroup: the coordinator's Future. A coordinator whose calls block until
        answered (a remote one) is called from a thread of its own, so poll() can return meanwhile."""
        if self._delayed_operations():
            return request()
        out: Future = Future()

        def run():
            try:
                inner = request()
            except BaseException as e:
                out.set_exception(e)
                return
            inner.add_done_callback(lambda f: out.set_exception(f.exception()) if f.exception() is not None
                                    else out.set_result(f.result()))
        threading.Thread(target=run, name=f"{self.client_id}-join", daemon=True).start()
        return out

    def _delayed_operations(self) -> bool:
        """Whether the coordinator's join_group / sync_group return at once (their Futures complete later)."""
        return getattr(self.node.group_coordinator, "delayed_operations", False)

    def _send_join(self) -> None:
        coord = self.node.group_coordinator
        cooperative = all(a.rebalance_protocol == "cooperative" for a in self.assignors)
        if not cooperative and self._assigned and self._generation >= 0:
            self._revoke(list(self._assigned))              # eager: give up everything before rejoining
        self._rejoin.clear()
        with self._lock:
            self._member_state = _PREPARING                 # heartbeats stop until the JoinGroup is answered
            lost = self._generation < 0
            member_id = self._member_id
        if lost and self._assigned:
            self._lose(list(self._assigned))
        topics = self._wanted_topics()
        for t in topics:
            self.node.ensure_topic(t)
        self._joined_topics = set(topics)
        owned = sorted(self._assigned)
        sub = Subscription(topics, owned_partitions=owned, generation_id=self._generation)
        protocols = [(a.name, sub.encode()) for a in self.assignors]
        self._join_future = self._call(lambda: coord.join_group(
            self.group_id, member_id, "consumer", protocols, self.session_timeout_ms,
            int(self.max_poll_interval * 1000), group_instance_id=self.group_instance_id,
            client_id=self.client_id, client_host="in-process"))

    def _joined(self, fut: Future) -> bool:
        """Take a JoinGroup answer: True if it sent the SyncGroup, False to join again."""
        try:
            joined = fut.result()
        except MemberIdRequiredError as e:
            with self._lock:
                self._member_id = e.member_id
            return False
        except (UnknownMemberIdError, IllegalGenerationError, RebalanceInProgressError) as e:
            self._rejoin_after(e)
            return False
        with self._lock:
            self._member_id, self._generation = joined.member_id, joined.generation_id
            self._member_state = _COMPLETING                # heartbeats from here on, as Kafka's
        self._protocol = joined.protocol_name
        assignments = self._assign_as_leader(joined) if joined.is_leader else {}
        coord = self.node.group_coordinator
        self._sync_future = self._call(lambda: coord.sync_group(
            self.group_id, joined.generation_id, joined.member_id, assignments,
            group_instance_id=self.group_instance_id))
        self._start_heartbeat()
        return True

    def _rejoin_after(self, error: SeglogError) -> None:
        """A JoinGroup or SyncGroup refused: the next join is as a new member after a lost membership (unknown
        member, old generation), with the same member id during a rebalance."""
        if not isinstance(error, RebalanceInProgressError):
            with self._lock:
                self._member_id, self._generation = "", -1

    def _synced(self, fut: Future) -> bool:
        """Take a SyncGroup answer: True once Stable with its assignment applied, False to join again."""
        try:
            synced = fut.result()
        except (UnknownMemberIdError, IllegalGenerationError, RebalanceInProgressError) as e:
            self._rejoin_after(e)
            return False
        with self._lock:
            if self._member_state != _COMPLETING:           # the heartbeat thread saw it fall out meanwhile
                return False
            self._member_state = _STABLE
        self._last_poll = time.monotonic()                  # as Kafka: the poll timer restarts with the heartbeats
        self._apply(Assignment.decode(synced.assignment).partitions)
        return True

    def _assign_as_leader(self, joined) -> dict[str, bytes]:
        subs = {m.member_id: Subscription.decode(m.metadata, m.group_instance_id) for m in joined.members}
        counts = {}
        for sub in subs.values():
            for t in sub.topics:
                if t not in counts:
                    try:
                        counts[t] = self.node.topic(t).partitions
                    except UnknownTopicOrPartitionError:
                        counts[t] = 0
        assignor = next(a for a in self.assignors if a.name == joined.protocol_name)
        return {m: a.encode() for m, a in assignor.assign(counts, subs).items()}

    def _apply(self, partitions: list[TopicPartition]) -> None:
        new = {TopicPartition(*tp) for tp in partitions}
        revoked = [tp for tp in self._assigned if tp not in new]
        if revoked:                                          # cooperative: give up what moved, then rejoin
            self._revoke(revoked)
            self._rejoin.set()
        added = sorted(tp for tp in new if tp not in self._assigned)
        for tp in added:
            self._assigned[tp] = _Assigned(self.node.partition(*tp))
        if added and self._on_assign is not None:
            self._on_assign(added)

    def _revoke(self, tps: list[TopicPartition]) -> None:
        """Give partitions up as a member: auto-commit first, on_revoke (may commit), then drop them."""
        if self.enable_auto_commit:
            self._auto_commit()
        if self._on_revoke is not None:
            self._on_revoke(sorted(tps))
        for tp in tps:
            self._assigned.pop(tp, None)

    def _lose(self, tps: list[TopicPartition]) -> None:
        """Drop partitions held without a generation (Kafka's onPartitionsLost): nothing is committed and
        their positions are forgotten, so they restart at the committed offsets if they come back."""
        try:
            callback = self._on_lost or self._on_revoke
            if callback is not None:
                callback(sorted(tps))
        finally:
            for tp in tps:
                self._assigned.pop(tp, None)

    def _fall_out(self, generation: int, member_id: str, why: str) -> None:
        """Reset the generation after the coordinator disowned the member in `generation` (Kafka:
        resetGenerationOnResponseError); an answer about an older generation changes nothing. The next poll
        rejoins, losing what the member held."""
        with self._lock:
            if (self._generation, self._member_id) != (generation, member_id) or generation < 0:
                return
            self._member_state, self._member_id, self._generation = _UNJOINED, "", -1
        log.info("consumer %s fell out of group %s (generation %d) after %s", member_id, self.group_id,
                 generation, why)
        self._rejoin.set()

    def _start_heartbeat(self) -> None:
        if self._hb_thread is None or not self._hb_thread.is_alive():
            self._hb_stop.clear()
            self._hb_thread = threading.Thread(target=self._heartbeat_loop, name=f"{self.client_id}-heartbeat",
                                               daemon=True)
            self._hb_thread.start()

    def _heartbeat_loop(self) -> None:
        """Heartbeats while Stable or CompletingRebalance (from the JoinGroup answer on, as Kafka's: the session
        then lasts however late the next poll sends the SyncGroup). Each answer is judged against the
        generation it was sent in."""
        coord = self.node.group_coordinator
        while not self._hb_stop.wait(self.heartbeat_interval):
            with self._lock:
                if self._member_state not in (_STABLE, _COMPLETING):
                    continue
                generation, member_id = self._generation, self._member_id
                stalled = time.monotonic() - self._last_poll > self.max_poll_interval
                if stalled:                                 # Kafka: maybeLeaveGroup from the heartbeat thread
                    self._member_state, self._member_id, self._generation = _UNJOINED, "", -1
            if stalled:
                log.warning("consumer %s did not poll for %.0f s (max_poll_interval_ms): leaving group %s",
                            member_id, self.max_poll_interval, self.group_id)
                self._send_leave(member_id)
                self._rejoin.set()
                continue
            try:
                coord.heartbeat(self.group_id, generation, member_id, group_instance_id=self.group_instance_id)
            except RebalanceInProgressError:
                with self._lock:                            # not for a rebalance this member is already in
                    current = (self._member_state, self._generation, self._member_id) == (_STABLE, generation,
                                                                                          member_id)
                if current:
                    self._rejoin.set()
            except (UnknownMemberIdError, IllegalGenerationError):
                self._fall_out(generation, member_id, "a heartbeat")
            except LogClosedError:
                return
            except Exception:
                log.exception("heartbeat of %s failed", member_id)

    def _leave_prepare(self) -> None:
        """Before leaving (Kafka's onLeavePrepare): a subscribed member gives up what it holds through
        on_revoke while Stable in a generation (it may still commit), else through on_lost (default
        on_revoke): with no generation, or in the middle of a rebalance, they may belong to another member
        already. Hand-assigned partitions are just dropped by the caller."""
        if not self._subscribed() or not self._assigned:
            return
        tps = sorted(self._assigned)
        with self._lock:
            current = self._member_state == _STABLE and self._generation >= 0
        try:
            callback = self._on_revoke if current else (self._on_lost or self._on_revoke)
            if callback is not None:
                callback(tps)
        finally:
            for tp in tps:
                self._assigned.pop(tp, None)

    def _leave(self) -> None:
        """Leave the group: the member is UNJOINED afterwards. A dynamic member with a member id sends
        LeaveGroup at once, even while its JoinGroup / SyncGroup waits (a remote coordinator takes it on a
        connection of its own): the rebalance then goes on without it instead of counting it in and waiting
        for its session to end. A JoinGroup still unanswered that brings a member id it did not know yet
        (a first join) leaves once answered."""
        with self._lock:
            member_id = self._member_id
            self._member_state, self._member_id, self._generation = _UNJOINED, "", -1
        join, sync = self._join_future, self._sync_future
        self._join_future = self._sync_future = None
        pending = join or sync
        if self.group_instance_id is not None:
            return

        def answered_id(fut: Future) -> str:
            return fut.result().member_id if fut is join and fut.exception() is None else member_id

        self._send_leave(member_id)
        if pending is not None:
            pending.add_done_callback(lambda fut: answered_id(fut) != member_id and self._send_leave(answered_id(fut)))

    def _send_leave(self, member_id: str) -> None:
        """LeaveGroup, for a dynamic member only: since Kafka 2.3 a static member (group_instance_id) does not
        leave, so that a restart within session_timeout_ms gets its partitions back without a rebalance. Nothing
        to do without a member id."""
        if self.group_instance_id is not None or not member_id:
            return
        try:
            self.node.group_coordinator.leave_group(self.group_id, [(member_id, None)])
        except Exception as e:
            log.info("leaving group %s: %s", self.group_id, e)

    # -- lifecycle --------------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError("consumer is closed")

    def close(self, autocommit: bool = True) -> None:
        """Commit (with auto-commit on and autocommit True), give the partitions up (on_revoke, or on_lost if
        not Stable in a generation), leave the group (a dynamic member: a static one lets its session time
        out), stop heartbeats. Idempotent."""
        if self._closed:
            return
        try:
            if not self.node.closed:
                try:
                    if autocommit and self.enable_auto_commit and self._assigned:
                        self._auto_commit()
                finally:
                    self._leave_prepare()
        finally:
            self._hb_stop.set()
            if not self.node.closed:
                self._leave()
            self._closed = True
            if self._hb_thread is not None and self._hb_thread is not threading.current_thread():
                self._hb_thread.join()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __iter__(self):
        """Iterate records forever (poll with a 1 s timeout), like Kafka clients' consumer iterators."""
        while not self._closed:
            yield from self.poll(1.0)

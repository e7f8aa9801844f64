"""The group coordinator's offsets (part of group.GroupCoordinator): OffsetCommit, TxnOffsetCommit and the
transactions' outcome for pending offsets, OffsetFetch, OffsetDelete.

``GroupOffsets`` is a base class of ``group.GroupCoordinator`` and works on its state: ``_lock``, ``_groups``
(group_state.Group records), ``store`` (the OffsetStore), ``_writes`` (the queued store writes), ``config``,
``_clock``. As everywhere in the coordinator, the lock guards the groups, and store writes are queued under
it and run after it is released (``_finish``); a commit blocks until its write is done.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Callable, Iterable, Mapping

from .assignors import Subscription
from .errors import (CoordinatorNotAvailableError, FencedInstanceIdError, GroupIdNotFoundError,
                     GroupSubscribedToTopicError, IllegalGenerationError, NonEmptyGroupError,
                     OffsetMetadataTooLargeError, RebalanceInProgressError, SeglogError, UnknownMemberIdError,
                     UnknownTopicOrPartitionError)
from .group_state import Group as _Group, check_group_id, wall_ms
from .group_types import GroupState
from .offsets_format import OffsetAndMetadata, TopicPartition

__all__ = ["GroupOffsets"]

_EMPTY, _COMPLETING, _DEAD = GroupState.EMPTY, GroupState.COMPLETING_REBALANCE, GroupState.DEAD


class GroupOffsets:
    """Committed and pending offsets of a group.GroupCoordinator's groups (see the module docstring)."""

    def commit_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], OffsetAndMetadata | int],
                       generation_id: int = -1, member_id: str = "", *, group_instance_id: str | None = None,
                       epoch_version: bool = True) -> dict[TopicPartition, SeglogError | None]:
        """Commit offsets; returns each partition's error or None: UnknownTopicOrPartitionError for a partition
        that does not exist (the store's :meth:`OffsetStore.partition_exists`), OffsetMetadataTooLargeError.
        The other partitions are committed. Offsets are stored as given (Kafka's coordinator takes any
        offset, -1 included; clients refuse negative ones).

        Generation -1 with member id "" is a simple (standalone) commit, accepted while the group has no
        members (and creating the group if needed). Otherwise the member must be current: raises
        UnknownMemberIdError, IllegalGenerationError, RebalanceInProgressError (CompletingRebalance),
        FencedInstanceIdError, CoordinatorNotAvailableError, or what the OffsetStore raised; as Kafka, the
        unknown partitions are refused before the group is checked, so such an error carries their errors
        in ``partition_errors`` ({tp: error}; they did not get the group's error), and a commit whose
        partitions are all unknown is answered without looking at the group. A group-managed commit counts
        as a heartbeat. Blocks until the store wrote the offsets.

        For a KIP-848 consumer group ``generation_id`` is the member epoch (group_consumer's checks:
        UnknownMemberIdError, StaleMemberEpochError, and UnsupportedVersionError when ``epoch_version`` is
        False, an OffsetCommit older than v9).
        """
        results, known = self._hosted_partitions(offsets)
        with self._lock:
            self._check_open()
            check_group_id(group_id, allow_empty=True)
            if not known:
                return results
            try:
                consumer = self._consumer_groups.get(group_id)
                if consumer is not None:
                    self._check_consumer_commit(consumer, generation_id, member_id, epoch_version)
                else:
                    self._check_commit(group_id, generation_id, member_id, group_instance_id)
            except SeglogError as e:
                e.partition_errors = dict(results)
                raise
            accepted = self._accept_offsets(known, results)
            written = self._queue_write((lambda: self.store.start_commit(group_id, accepted)) if accepted else None)
        self._finish([])
        written.result()
        return results

    def _hosted_partitions(self, offsets: Mapping[tuple[str, int], OffsetAndMetadata | int]
                           ) -> tuple[dict[TopicPartition, SeglogError | None], dict[TopicPartition, OffsetAndMetadata]]:
        """OffsetCommit's and TxnOffsetCommit's first check (no lock needed: the store answers): (results
        holding UnknownTopicOrPartitionError for each partition the store does not host, the others' offsets
        as OffsetAndMetadata)."""
        results: dict[TopicPartition, SeglogError | None] = {}
        known: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            tp = TopicPartition(*tp)
            if not self.store.partition_exists(tp.topic, tp.partition):
                results[tp] = UnknownTopicOrPartitionError(
                    f"This server does not host this topic-partition: {tp.topic}-{tp.partition}")
            else:
                known[tp] = om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(om)
        return results, known

    def _accept_offsets(self, known: Mapping[TopicPartition, OffsetAndMetadata],
                        results: dict[TopicPartition, SeglogError | None]) -> dict[TopicPartition, OffsetAndMetadata]:
        """The offsets of ``known`` to write: metadata over offset.metadata.max.bytes is refused
        (OffsetMetadataTooLargeError into ``results``), the others get None there and, without a commit
        timestamp, now as theirs."""
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        stamp = wall_ms()
        for tp, om in known.items():
            if len(om.metadata.encode()) > self.config.offset_metadata_max_bytes:
                results[tp] = OffsetMetadataTooLargeError(
                    f"metadata of {len(om.metadata.encode())} bytes is over offset.metadata.max.bytes "
                    f"{self.config.offset_metadata_max_bytes}")
                continue
            if om.commit_timestamp < 0:
                om = OffsetAndMetadata(om.offset, om.leader_epoch, om.metadata, stamp, om.expire_timestamp)
            accepted[tp] = om
            results[tp] = None
        return accepted

    def _queue_write(self, start: Callable[[], Callable[[], None]] | None) -> Future:
        """Queue a store write (lock held): a Future done once it is stored, failed with the store's error;
        done at once when there is nothing to write (``start`` None). Wait for it after releasing the lock."""
        written: Future = Future()
        if start is None:
            written.set_result(None)
        else:
            self._writes.queue(start, lambda exc: [(written, exc, exc is not None)])
        return written

    def _check_commit(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> None:
        """OffsetCommit's group checks (lock held); a group-managed commit refreshes the member's session."""
        now = self._clock()
        group = self._groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                raise IllegalGenerationError(f"group {group_id!r} does not exist: generation {generation_id} "
                                             f"is stale")
            group = self._groups[group_id] = _Group(group_id)
        if generation_id < 0 and group.state is _EMPTY:
            return
        # Kafka's order: member, then generation, and only then the state. A commit of the previous
        # generation that arrives after the join completed is ILLEGAL_GENERATION, not
        # REBALANCE_IN_PROGRESS, which is only for a member that already has the new generation.
        member = group.current_member(member_id, instance_id)
        if generation_id != group.generation:
            raise IllegalGenerationError(f"generation {generation_id} is not group {group_id!r}'s "
                                         f"current generation {group.generation}")
        if group.state is _COMPLETING:
            raise RebalanceInProgressError(f"group {group_id!r} is completing a rebalance; commit after "
                                           f"SyncGroup")
        member.session_deadline = now + member.session_timeout_ms

    def txn_commit_offsets(self, group_id: str, transactional_id: str, producer_id: int, producer_epoch: int,
                           offsets: Mapping[tuple[str, int], OffsetAndMetadata | int], generation_id: int = -1,
                           member_id: str = "", *, group_instance_id: str | None = None
                           ) -> dict[TopicPartition, SeglogError | None]:
        """TxnOffsetCommit: commit offsets in the producer's transaction. They are written at once (a
        transactional batch of the producer in the group's offsets partition) but stay pending, invisible to
        fetch_offsets, until the transaction's COMMIT marker reaches that partition (``transaction_completed``);
        an ABORT drops them. The partitions and the group are checked as commit_offsets checks them, with one
        difference, as in Kafka: the member and generation (when given: TxnOffsetCommit v3+) are checked, the
        group's state is not (an unknown group is created empty). The transaction's producer is
        checked by the transaction coordinator (AddOffsetsToTxn), not here. Blocks until written."""
        results, known = self._hosted_partitions(offsets)
        accepted = self._accept_offsets(known, results)
        with self._lock:
            self._check_open()
            check_group_id(group_id, allow_empty=False)
            consumer = self._consumer_groups.get(group_id)
            group = self._groups.get(group_id)
            if group is None and consumer is None:
                group = self._groups[group_id] = _Group(group_id)
            try:
                if consumer is not None:
                    self._check_consumer_txn_commit(consumer, generation_id, member_id)
                else:
                    self._check_txn_commit(group, generation_id, member_id, group_instance_id)
            except SeglogError as e:
                e.partition_errors = {tp: err for tp, err in results.items() if err is not None}
                raise
            written = self._queue_write((lambda: self.store.start_txn_commit(group_id, producer_id, producer_epoch,
                                                                             accepted)) if accepted else None)
        self._finish([])
        written.result()
        return results

    @staticmethod
    def _check_txn_commit(group: _Group, generation_id: int, member_id: str, instance_id: str | None) -> None:
        """Kafka's doTxnCommitOffsets checks (lock held): a deleted group, a fenced static member, an unknown
        member, a stale generation; the group's state is not looked at."""
        if group.state is _DEAD:
            raise CoordinatorNotAvailableError(f"group {group.group_id!r} was deleted")
        if instance_id is not None and instance_id in group.static_members \
                and group.static_members[instance_id] != member_id:
            raise FencedInstanceIdError(f"static member {instance_id!r} of group {group.group_id!r} was replaced")
        if member_id and member_id not in group.members:
            raise UnknownMemberIdError(f"member {member_id!r} is not in group {group.group_id!r}")
        if generation_id >= 0 and generation_id != group.generation:
            raise IllegalGenerationError(f"generation {generation_id} is not group {group.group_id!r}'s "
                                         f"current generation {group.generation}")

    def transaction_completed(self, partition: int | None, producer_id: int, commit: bool) -> None:
        """A transaction marker of the producer reached offsets partition ``partition``: its pending offsets of
        that partition's groups become committed (commit) or are dropped (abort)."""
        self.store.complete_txn(partition, producer_id, commit)

    def unstable_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None
                         ) -> set[TopicPartition]:
        """The partitions (of ``partitions``, or all) whose offsets a transaction still has pending: an
        OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for them, as Kafka does."""
        pending = self.store.pending_txn_partitions(group_id)
        return pending if partitions is None else pending & {TopicPartition(*tp) for tp in partitions}

    def fetch_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None
                      ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets of ``partitions`` (None for a partition without a commit; Kafka answers offset
        -1), or of every committed partition when ``partitions`` is None. Raises CoordinatorNotAvailableError
        when closed, or what the OffsetStore raised. Committed offsets of any group, members or not."""
        with self._lock:
            self._check_open()
            check_group_id(group_id, allow_empty=True)
        if partitions is None:
            return dict(self.store.fetch(group_id, None))
        wanted = [TopicPartition(*tp) for tp in partitions]
        stored = self.store.fetch(group_id, wanted)
        return {tp: stored.get(tp) for tp in wanted}

    def delete_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]]
                       ) -> dict[TopicPartition, SeglogError | None]:
        """OffsetDelete, as Kafka's coordinator: a group without members loses the committed offsets of
        ``partitions`` (a partition without one is answered None too); a consumer group with members keeps
        those of the topics a member subscribes to (GroupSubscribedToTopicError per such partition) and loses
        the others (a KIP-848 consumer group likewise). Raises GroupIdNotFoundError for a group with neither
        members nor offsets, NonEmptyGroupError
        for a group with members of another protocol type, CoordinatorNotAvailableError when closed. Blocks
        until the store wrote the deletion."""
        wanted = [TopicPartition(*tp) for tp in dict.fromkeys(partitions)]
        with self._lock:
            self._check_open()
            check_group_id(group_id, allow_empty=False)
            group = self._groups.get(group_id)
            results: dict[TopicPartition, SeglogError | None] = dict.fromkeys(wanted)
            consumer = self._consumer_groups.get(group_id)
            if consumer is not None and consumer.members:           # KIP-848: as a classic consumer group
                topics = self._topics()
                subscribed = set().union(*(self._subscribed(m, topics) for m in consumer.members.values()))
                for tp in wanted:
                    if tp.topic in subscribed:
                        results[tp] = GroupSubscribedToTopicError(
                            f"group {group_id!r} has members subscribed to topic {tp.topic!r}")
            elif group is None or group.state is _EMPTY:
                if group is None and group_id not in self.store.groups():
                    raise GroupIdNotFoundError(f"group {group_id!r} does not exist")
            elif group.protocol_type == "consumer":
                subscribed = self._subscribed_topics(group)
                for tp in wanted:
                    if tp.topic in subscribed:
                        results[tp] = GroupSubscribedToTopicError(
                            f"group {group_id!r} has members subscribed to topic {tp.topic!r}")
            else:
                raise NonEmptyGroupError(f"group {group_id!r} has members ({group.state.value})")
            deleted = [tp for tp, e in results.items() if e is None]
            written = self._queue_write((lambda: self.store.start_delete_offsets(group_id, deleted)) if deleted
                                        else None)
        self._finish([])
        written.result()
        return results

    @staticmethod
    def _subscribed_topics(group: _Group) -> set[str]:
        """The topics the members of a consumer group subscribe to (their JoinGroup metadata in the group's
        protocol; a member whose metadata does not decode subscribes to nothing known)."""
        topics: set[str] = set()
        for m in group.members.values():
            try:
                topics.update(Subscription.decode(m.metadata_for(group.protocol_name)).topics)
            except SeglogError:
                continue
        return topics

"""DataDirAdmin: the commands' Admin over a data directory opened in this process (``--data-dir``).

The command holds the directory's lock while it runs, so a running broker on the same directory makes it
fail at once (StorageError: use --bootstrap-server). The node is opened with ``auto.create.topics.enable``
off (a typo in --topic is an error, not a new topic) and ``group.initial.rebalance.delay.ms`` 0 (no other
member can join while the command holds the lock, so waiting for one would only slow `consume --group`),
as the broker.id its meta.properties holds. Group queries do not create ``__consumer_offsets`` when it does not
exist yet, transaction queries not ``__transaction_state``.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Iterable, Mapping, Sequence

from ..errors import (CoordinatorLoadInProgressError, ReplicaNotAvailableError, SeglogError, StorageError,
                      TransactionalIdNotFoundError, UnknownTopicOrPartitionError)
from ..log_dirs import parse_log_dirs, read_meta_properties
from ..node import Node
from ..offsets_format import OFFSETS_TOPIC, TopicPartition
from ..txn.coordinator import TransactionDescription, TransactionListing
from ..txn.log_format import TRANSACTION_STATE_TOPIC
from .admin import Admin, GroupInfo, GroupListing, PartitionInfo, TopicDescription, member_info

NODE_CONFIG = {"auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "0"}


class DataDirAdmin(Admin):
    """Admin over ``seglog.open(path)`` in this process (see the module docstring)."""

    live = False

    def __init__(self, path: str, *, create: bool = False):
        dirs = parse_log_dirs(path)
        missing = [d for d in dirs if not os.path.isdir(d)]
        if not create and missing:
            raise StorageError("no such data directory", missing[0])
        # a cluster member's directory is inspected as that broker (a node refuses another broker.id)
        stored_id = read_meta_properties(dirs[0]).get("broker.id", "") if os.path.isdir(dirs[0]) else ""
        self.node = Node(path, {**NODE_CONFIG, "broker.id": stored_id} if stored_id.isdecimal() else NODE_CONFIG)

    def close(self) -> None:
        self.node.close()

    # -- topics ---------------------------------------------------------------------------------------------

    def describe_topic(self, name: str) -> TopicDescription:
        info = self.node.topic(name)
        me = self.node.config.broker_id
        parts = tuple(PartitionInfo(p, me, (me,), (me,)) for p in range(info.partitions))
        return TopicDescription(info.name, info.topic_id, parts, dict(info.overrides), info.config.to_kafka(),
                                info.internal)

    # -- offsets --------------------------------------------------------------------------------------------

    def _partitions(self, partitions: Iterable[tuple[str, int]]):
        """(TopicPartition, its Partition or None when unknown) for each of `partitions`."""
        for tp in partitions:
            tp = TopicPartition(*tp)
            try:
                part = self.node.partition(*tp)
            except UnknownTopicOrPartitionError:
                part = None
            yield tp, part

    def offset_ranges(self, partitions: Iterable[tuple[str, int]]) -> dict[TopicPartition, tuple[int, int] | None]:
        return {tp: None if part is None else (part.log_start_offset, part.high_watermark)
                for tp, part in self._partitions(partitions)}

    def offsets_for_times(self, partitions: Iterable[tuple[str, int]], timestamp: int
                          ) -> dict[TopicPartition, int | None]:
        out: dict[TopicPartition, int | None] = {}
        for tp, part in self._partitions(partitions):
            found = None if part is None else part.log.offset_for_timestamp(timestamp)
            out[tp] = found.offset if found is not None and found.offset < part.high_watermark else None
        return out

    def delete_records(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | SeglogError]:
        out: dict[TopicPartition, int | SeglogError] = {}
        for tp, offset in offsets.items():
            try:
                out[tp] = self.node.partition(*tp).log.delete_records_before(offset)
            except SeglogError as e:
                out[tp] = e
        return out

    def log_dirs(self, brokers: Sequence[int] | None) -> dict[int, list[dict]]:
        me = self.node.config.broker_id
        if brokers is not None and me not in brokers:
            return {}
        return {me: [{"logDir": d["path"], "error": None, "partitions": [
            {"topic": t, "partition": p, "size": size, "offsetLag": lag, "isFuture": future}
            for t, p, size, lag, future in d["partitions"]]} for d in self.node.describe_log_dirs()]}

    def alter_replica_log_dirs(self, moves: dict[tuple[str, int, int], str]) -> dict[tuple[str, int, int], object]:
        """AlterReplicaLogDirs of this node's replicas ((topic, partition, broker) -> directory): None or the
        error of each; a replica of another broker gets ReplicaNotAvailableError."""
        me = self.node.config.broker_id
        mine = {(t, p): d for (t, p, b), d in moves.items() if b == me}
        done = self.node.alter_replica_log_dirs(mine)
        return {(t, p, b): done[(t, p)] if b == me else ReplicaNotAvailableError(f"no broker {b} here")
                for (t, p, b) in moves}

    # -- transactions -----------------------------------------------------------------------------------------

    def _txn_coordinator(self):
        """The node's transaction coordinator, or None while no transaction ever ran here (no
        __transaction_state: a query does not create it)."""
        if TRANSACTION_STATE_TOPIC not in self.node.topics(include_internal=True):
            return None
        return self.node.txn_coordinator

    def list_transactions(self) -> list[tuple[int, TransactionListing]]:
        coord = self._txn_coordinator()
        if coord is None:
            return []
        _await_loaded(coord)
        return [(self.node.config.broker_id, t) for t in coord.list()[1]]

    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        coord = self._txn_coordinator()
        if coord is None:
            raise TransactionalIdNotFoundError(f"transactional id {transactional_id!r} is not known")
        _await_loaded(coord)
        [d] = coord.describe([transactional_id])
        if isinstance(d, SeglogError):
            raise d
        return dataclasses.replace(d, coordinator_id=self.node.config.broker_id)

    # -- groups ---------------------------------------------------------------------------------------------

    def _coordinator(self):
        """The node's group coordinator, or None while no group ever existed here (no __consumer_offsets: a
        query does not create it)."""
        if OFFSETS_TOPIC not in self.node.topics(include_internal=True):
            return None
        return self.node.group_coordinator

    def list_groups(self) -> list[GroupListing]:
        coord = self._coordinator()
        if coord is None:
            return []
        return [GroupListing(g.group_id, str(g.state), g.protocol_type) for g in coord.list_groups()]

    def describe_group(self, group_id: str) -> GroupInfo:
        coord = self._coordinator()
        where = f"{self.node.path} ({self.node.config.broker_id})"
        if coord is None:
            return GroupInfo(group_id, "Dead", coordinator=where)
        [d] = coord.describe_groups([group_id])
        members = tuple(member_info(m.member_id, m.client_id, m.client_host, d.protocol_type, m.assignment)
                        for m in d.members)
        return GroupInfo(d.group_id, str(d.state), d.protocol_type, d.protocol, members, where)


def _await_loaded(coord, timeout: float = 30.0) -> None:
    """Wait until the coordinator read its state partitions (it loads them on its own thread)."""
    deadline = time.monotonic() + timeout
    while coord.store.loading_partitions():
        if time.monotonic() > deadline:
            raise CoordinatorLoadInProgressError("the transaction state is still loading")
        time.sleep(0.01)

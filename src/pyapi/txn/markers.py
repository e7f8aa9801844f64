"""Transaction markers: the COMMIT / ABORT control batches a transaction ends with in each of its partitions.

The coordinator hands a :class:`MarkerChannel` the markers of its completing transactions; the channel writes
each at its partition's leader and answers one Kafka error code per marker (0: written). ``write_here`` is what
a partition leader does with a marker, from either door: the node appends the control batch
(``Node.write_txn_marker``: producer state, last stable offset, aborted-transaction index), waits for the
in-sync replicas (markers are written with acks=all), and, for a ``__consumer_offsets`` partition, tells the
group coordinator so the transaction's offset commits become visible (commit) or are dropped (abort).

:class:`LocalMarkerChannel` serves a lone node (every partition is here); a cluster member's channel sends
WriteTxnMarkers requests to the other leaders (seglog.cluster.txn_markers).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import Callable, NamedTuple, Sequence

from ..errors import SeglogError, UnknownTopicOrPartitionError, code_of
from ..offsets_format import OFFSETS_TOPIC

__all__ = ["Marker", "MarkerChannel", "LocalMarkerChannel", "write_here", "DONE", "STALE", "GIVE_UP"]

log = logging.getLogger("seglog.txn")

# How the coordinator treats a marker's answer (Kafka's TransactionMarkerRequestCompletionHandler):
DONE = frozenset({0, 35, 43})          # written (or UNSUPPORTED_VERSION / _FOR_MESSAGE_FORMAT: no marker needed)
STALE = frozenset({47, 52})            # INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: a newer coordinator
GIVE_UP = frozenset({2, 10, 18, 21})   # CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_REQUIRED_ACKS
# everything else (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, a lost connection ...) is retried


class Marker(NamedTuple):
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int


class MarkerChannel(ABC):
    """Writes markers at their partitions' leaders. ``write`` may block (network, replication); it answers
    one error code per marker, in order, and never raises for one marker's failure."""

    @abstractmethod
    def write(self, markers: Sequence[Marker]) -> list[int]:
        """Error codes of the markers (0: written, or the partition no longer exists: nothing to mark)."""

    def close(self) -> None:
        """Release connections (nothing for a lone node)."""


def write_here(node, markers: Sequence[Marker], check_leader: Callable[[str, int], None] | None = None) -> list[int]:
    """Write markers whose partitions this node leads (``check_leader(topic, p)`` raises NotLeaderOrFollowerError
    otherwise); one error code per marker. Blocking: replication waits up to its timeout."""
    codes = []
    for m in markers:
        try:
            if check_leader is not None:
                check_leader(m.topic, m.partition)
            part = node.partition(m.topic, m.partition)
            offset = node.write_txn_marker(m.topic, m.partition, m.producer_id, m.producer_epoch, m.commit,
                                           m.coordinator_epoch)
            part.transaction_ended(m.producer_id)
            wait = node.replication_waiter
            if wait is not None:
                wait(part, offset)
            if m.topic == OFFSETS_TOPIC:
                node.transaction_offsets_completed(m.partition, m.producer_id, m.commit)
            codes.append(0)
        except SeglogError as e:
            if not isinstance(e, (UnknownTopicOrPartitionError,)):
                log.info("marker %s of producer %d at %s-%d not written: %s", "COMMIT" if m.commit else "ABORT",
                         m.producer_id, m.topic, m.partition, e)
            codes.append(code_of(e))
    return codes


class LocalMarkerChannel(MarkerChannel):
    """A lone node leads every partition: markers are written here; a partition whose topic was deleted
    needs none."""

    def __init__(self, node):
        self.node = node

    def write(self, markers):
        codes = write_here(self.node, markers)
        return [0 if c == UnknownTopicOrPartitionError.code else c for c in codes]

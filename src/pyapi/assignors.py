"""Consumer-side partition assignment: Kafka's ConsumerProtocol and the assignors ``range``,
``roundrobin`` and ``cooperative-sticky``.

The group coordinator only relays bytes; the group leader (a Java, librdkafka, kafka-python or seglog
consumer) decodes every member's :class:`Subscription`, runs the assignor all members agreed on and sends
back one encoded :class:`Assignment` per member. The byte formats here are Kafka's (``ConsumerProtocol``
subscription and assignment, versions 0-3, non-flexible), so seglog's consumers interoperate with other
clients in one group.

Assignor contract: ``assign(partitions_per_topic, subscriptions) -> {member_id: Assignment}``. The result
has an entry for every member (idle members get an empty assignment); a member only gets partitions of
topics it subscribed to; topics missing from ``partitions_per_topic`` (unknown) are skipped. ``range`` and
``roundrobin`` give every partition of a subscribed topic to exactly one member. ``cooperative-sticky``
gives every partition to at most one member: a partition moving away from its current owner is left
unassigned for one generation (the owner revokes it first), and goes to its new owner in the follow-up
rebalance. Assignors are stateless and thread-safe.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from .errors import InvalidArgumentError, InvalidRequestError
from .offsets_format import Reader, TopicPartition, Writer, partitions_by_topic

__all__ = ["Subscription", "Assignment", "Assignor", "RangeAssignor", "RoundRobinAssignor",
           "CooperativeStickyAssignor", "ASSIGNORS", "assignor_for", "CONSUMER_PROTOCOL_TYPE"]

CONSUMER_PROTOCOL_TYPE = "consumer"
"""The JoinGroup protocol type of consumer groups."""

_MAX_VERSION = 3


def _write_topic_partitions(w: Writer, partitions: Iterable[tuple[str, int]]) -> None:
    by_topic = partitions_by_topic(partitions)
    w.int32(len(by_topic))
    for topic, parts in by_topic.items():
        w.string(topic).int32(len(parts))
        for p in parts:
            w.int32(p)


def _read_topic_partitions(r: Reader) -> list[TopicPartition]:
    out = []
    for _ in range(r.array_length()):
        topic = r.string()
        out.extend(TopicPartition(topic, r.int32()) for _ in range(r.array_length()))
    return out


def _read_version(r: Reader) -> int:
    """The int16 version; versions newer than 3 are read as 3 (Kafka only appends fields)."""
    version = r.int16()
    if version < 0:
        raise InvalidRequestError(f"malformed {r.what}: version {version}")
    return min(version, _MAX_VERSION)


@dataclass
class Subscription:
    """A member's JoinGroup metadata for a consumer protocol.

    ``owned_partitions`` (v1+) are the partitions the member holds now, ``generation_id`` (v2+) the
    generation it got them in (-1 unknown), ``rack_id`` (v3+). ``group_instance_id`` is not on the wire:
    the coordinator reports it with each member, and assignors order static members by it.
    """

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None
    group_instance_id: str | None = None

    def encode(self, version: int = _MAX_VERSION) -> bytes:
        """Kafka's ConsumerProtocolSubscription at ``version`` (0-3); fields newer than it are left out."""
        if not 0 <= version <= _MAX_VERSION:
            raise InvalidArgumentError(f"subscription version must be 0-{_MAX_VERSION}, got {version}")
        w = Writer().int16(version).int32(len(self.topics))
        for topic in self.topics:
            w.string(topic)
        w.bytes_(self.user_data)
        if version >= 1:
            _write_topic_partitions(w, self.owned_partitions)
        if version >= 2:
            w.int32(self.generation_id)
        if version >= 3:
            w.string(self.rack_id)
        return bytes(w)

    @classmethod
    def decode(cls, data, group_instance_id: str | None = None) -> "Subscription":
        """Parse any version (newer ones as v3, trailing bytes ignored). InvalidRequestError if malformed."""
        r = Reader(data, "consumer protocol subscription")
        version = _read_version(r)
        topics = [r.string() for _ in range(r.array_length())]
        sub = cls(topics, r.nullable_bytes(), group_instance_id=group_instance_id)
        if version >= 1:
            sub.owned_partitions = _read_topic_partitions(r)
        if version >= 2:
            sub.generation_id = r.int32()
        if version >= 3:
            sub.rack_id = r.nullable_string()
        return sub


@dataclass
class Assignment:
    """The partitions the leader gives one member (same layout in versions 0-3)."""

    partitions: list[TopicPartition] = field(default_factory=list)
    user_data: bytes | None = None

    def encode(self, version: int = _MAX_VERSION) -> bytes:
        """Kafka's ConsumerProtocolAssignment; partitions are grouped by topic in first-appearance order."""
        if not 0 <= version <= _MAX_VERSION:
            raise InvalidArgumentError(f"assignment version must be 0-{_MAX_VERSION}, got {version}")
        w = Writer().int16(version)
        _write_topic_partitions(w, self.partitions)
        return bytes(w.bytes_(self.user_data))

    @classmethod
    def decode(cls, data) -> "Assignment":
        """Parse any version; empty bytes (what a coordinator sends a member the leader left out) decode to
        an empty assignment. InvalidRequestError if malformed."""
        if len(data) == 0:
            return cls()
        r = Reader(data, "consumer protocol assignment")
        _read_version(r)
        return cls(_read_topic_partitions(r), r.nullable_bytes())


def _member_order(subscriptions: Mapping[str, Subscription]) -> list[str]:
    """Members in Kafka's order: static members by group.instance.id first, then dynamic ones by member id."""
    return sorted(subscriptions, key=lambda m: (0, subscriptions[m].group_instance_id, m)
                  if subscriptions[m].group_instance_id is not None else (1, "", m))


def _topics_of(sub: Subscription, partitions_per_topic: Mapping[str, int]) -> set[str]:
    return {t for t in sub.topics if partitions_per_topic.get(t, 0) > 0}


class Assignor(ABC):
    """A named assignment strategy. ``rebalance_protocol`` is "eager" (members give up everything before
    rejoining) or "cooperative" (members keep what they own and give up only what the assignment moves)."""

    name: str
    rebalance_protocol: str = "eager"

    @abstractmethod
    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, Assignment]:
        """{member_id: Assignment} for every member of ``subscriptions`` (see the module docstring)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class RangeAssignor(Assignor):
    """Per topic: members sorted, each gets a contiguous range; the first ``P mod C`` members get one more.

    6 partitions, 4 members -> 2, 2, 1, 1. With many topics the first members are favoured on every topic.
    """

    name = "range"

    def assign(self, partitions_per_topic, subscriptions):
        order = _member_order(subscriptions)
        result = {m: Assignment() for m in order}
        topics = {m: _topics_of(subscriptions[m], partitions_per_topic) for m in order}
        for topic in sorted(set().union(*topics.values())):
            members = [m for m in order if topic in topics[m]]
            count = partitions_per_topic[topic]
            each, extra = divmod(count, len(members))
            start = 0
            for i, member in enumerate(members):
                length = each + (1 if i < extra else 0)
                result[member].partitions.extend(TopicPartition(topic, p) for p in range(start, start + length))
                start += length
        return result


class RoundRobinAssignor(Assignor):
    """All subscribed partitions sorted by (topic, partition), dealt to the sorted members in turn, skipping
    members not subscribed to the partition's topic. Balanced within one when subscriptions are identical."""

    name = "roundrobin"

    def assign(self, partitions_per_topic, subscriptions):
        order = _member_order(subscriptions)
        result = {m: Assignment() for m in order}
        topics = {m: _topics_of(subscriptions[m], partitions_per_topic) for m in order}
        turn = 0
        for topic in sorted(set().union(*topics.values())):
            for partition in range(partitions_per_topic[topic]):
                while topic not in topics[order[turn % len(order)]]:
                    turn += 1
                result[order[turn % len(order)]].partitions.append(TopicPartition(topic, partition))
                turn += 1
        return result


def _generation_of(sub: Subscription) -> int:
    """The generation of a member's owned partitions: the v2+ field, else the 4-byte user data that Kafka's
    cooperative-sticky assignor sends with v0/v1 subscriptions, else -1."""
    if sub.generation_id >= 0:
        return sub.generation_id
    if sub.user_data is not None and len(sub.user_data) == 4:
        return int.from_bytes(sub.user_data, "big", signed=True)
    return -1


class CooperativeStickyAssignor(Assignor):
    """Kafka's ``cooperative-sticky``: as balanced as the subscriptions allow, moving as few owned partitions
    as possible, and never handing a partition to a member while another member may still own it.

    1. Previous owners: only members of the highest generation among the subscriptions count (Kafka's rule:
       a member of an older generation lost its partitions when it fell out). A partition claimed twice in
       that generation has no previous owner and is contested. Claims on topics a member no longer
       subscribes to, or on partitions that no longer exist, are dropped.
    2. Identical subscriptions: quotas ``P // C`` and, for ``P % C`` members, one more; members keep owned
       partitions up to their quota (the extra slots go to the members owning the most), the rest are
       dealt to members below quota. Counts differ by at most one.
    3. Mixed subscriptions: members keep what they owned; other partitions go, hardest to place first
       (fewest eligible members), to the eligible member holding the fewest; then, while a member holds
       two more than an eligible member for one of its partitions, one moves (newly placed ones first).
       No single move can improve balance at the end.
    4. Cooperative step: a partition whose previous owner is not its target, or that is contested, is left
       out of this generation; its owners revoke it and rejoin, and the follow-up rebalance places it.
    """

    name = "cooperative-sticky"
    rebalance_protocol = "cooperative"

    def assign(self, partitions_per_topic, subscriptions):
        order = _member_order(subscriptions)
        if not order:
            return {}
        topics = {m: _topics_of(subscriptions[m], partitions_per_topic) for m in order}
        owner, contested = self._previous_owners(subscriptions, topics, partitions_per_topic)
        owned: dict[str, list[TopicPartition]] = {m: [] for m in order}
        for tp, member in sorted(owner.items()):
            owned[member].append(tp)
        if all(topics[m] == topics[order[0]] for m in order):
            held = self._assign_identical(order, owned, topics[order[0]], partitions_per_topic)
        else:
            held = self._assign_mixed(order, owned, topics, partitions_per_topic)
        result = {m: Assignment() for m in order}
        for m in order:
            result[m].partitions = [tp for tp in sorted(held[m]) if owner.get(tp, m) == m and tp not in contested]
        return result

    @staticmethod
    def _previous_owners(subscriptions, topics, partitions_per_topic):
        """({partition: owner} of the newest generation's valid claims, {partitions claimed twice in it})."""
        newest = max(_generation_of(sub) for sub in subscriptions.values())
        owner: dict[TopicPartition, str] = {}
        contested: set[TopicPartition] = set()
        for m, sub in subscriptions.items():
            if _generation_of(sub) != newest:
                continue
            for topic, partition in sub.owned_partitions:
                tp = TopicPartition(topic, partition)
                if topic not in topics[m] or not 0 <= partition < partitions_per_topic[topic]:
                    continue
                if owner.setdefault(tp, m) != m:
                    contested.add(tp)
        for tp in contested:
            del owner[tp]
        return owner, contested

    @staticmethod
    def _assign_identical(order, owned, topic_set, partitions_per_topic) -> dict[str, set[TopicPartition]]:
        total = sum(partitions_per_topic[t] for t in topic_set)
        base, extra = divmod(total, len(order))
        held: dict[str, set[TopicPartition]] = {}
        for m in sorted(order, key=lambda m: -len(owned[m])):         # stable: ties keep member order
            quota = base
            if len(owned[m]) > base and extra > 0:
                quota, extra = base + 1, extra - 1
            held[m] = set(owned[m][:quota])
        taken = set().union(*held.values())
        free = [TopicPartition(t, p) for t in sorted(topic_set) for p in range(partitions_per_topic[t])
                if TopicPartition(t, p) not in taken]
        free.reverse()
        for m in order:                                    # everyone up to the base quota
            while len(held[m]) < base:
                held[m].add(free.pop())
        for m in order:                                    # the remaining extra slots, one each
            if not free:
                break
            if len(held[m]) == base:
                held[m].add(free.pop())
        return held

    @staticmethod
    def _assign_mixed(order, owned, topics, partitions_per_topic) -> dict[str, set[TopicPartition]]:
        eligible: dict[str, list[str]] = {}
        for m in order:
            for t in topics[m]:
                eligible.setdefault(t, []).append(m)
        held = {m: set(owned[m]) for m in order}
        sticky = set().union(*held.values())
        free = [TopicPartition(t, p) for t in sorted(eligible) for p in range(partitions_per_topic[t])
                if TopicPartition(t, p) not in sticky]
        free.sort(key=lambda tp: len(eligible[tp.topic]))
        for tp in free:
            held[min(eligible[tp.topic], key=lambda m: (len(held[m]), m))].add(tp)
        moved = True
        while moved:
            moved = False
            lowest = min(len(held[m]) for m in order)
            for member in sorted(order, key=lambda m: -len(held[m])):
                if len(held[member]) - lowest < 2:
                    break
                for tp in sorted(held[member], key=lambda tp: (tp in sticky, tp)):
                    target = min(eligible[tp.topic], key=lambda m: (len(held[m]), m))
                    if len(held[member]) - len(held[target]) < 2:
                        continue
                    held[member].discard(tp)
                    held[target].add(tp)
                    moved = True
                    lowest = min(len(held[m]) for m in order)
                    if len(held[member]) - lowest < 2:
                        break
        return held


ASSIGNORS: dict[str, type[Assignor]] = {cls.name: cls for cls in
                                        (RangeAssignor, RoundRobinAssignor, CooperativeStickyAssignor)}
"""Assignor classes by their Kafka protocol name."""


def assignor_for(name: str) -> Assignor:
    """A new assignor for a protocol name. InvalidArgumentError for names not in :data:`ASSIGNORS`."""
    try:
        return ASSIGNORS[name]()
    except KeyError:
        raise InvalidArgumentError(f"unknown partition assignor {name!r}; known: {', '.join(ASSIGNORS)}") from None

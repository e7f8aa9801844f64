"""Server-side partition assignors of consumer groups (KIP-848, ``group.protocol=consumer``): ``uniform``
(the default) and ``range``, chosen by a member's ServerAssignor among ``group.consumer.assignors``.

Unlike the classic protocol's assignors (seglog.assignors, run by the group leader), these run in the group
coordinator whenever the group epoch moves, and compute the group's *target* assignment; reconciliation
(group_consumer) then moves members towards it.

Contract: ``assign(members, topics, current) -> {member_id: {topic: frozenset(partitions)}}`` where
``members`` maps each member id to its :class:`MemberSubscription`, ``topics`` maps each existing topic to its
partition count and ``current`` is the previous target (for stickiness). Invariants of the result: an entry
for every member (possibly empty); a member only gets partitions of topics it subscribes to that exist; every
partition of a topic at least one member subscribes to is assigned to exactly one member. Assignors are
stateless and deterministic (same input, same output).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Mapping

from .errors import InvalidConfigError, UnsupportedAssignorError

__all__ = ["MemberSubscription", "ServerAssignor", "UniformAssignor", "RangeAssignor", "SERVER_ASSIGNORS",
           "server_assignor", "configured_assignors"]

Target = dict[str, dict[str, frozenset[int]]]


@dataclass(frozen=True)
class MemberSubscription:
    """What an assignor knows of a member: the existing topics it subscribes to (names and regex resolved)
    and its static instance id (range orders members by it, so a restarted static member keeps its range)."""

    topics: frozenset[str]
    instance_id: str | None = None


class ServerAssignor(ABC):
    name: str

    @abstractmethod
    def assign(self, members: Mapping[str, MemberSubscription], topics: Mapping[str, int],
               current: Mapping[str, Mapping[str, frozenset[int]]]) -> Target:
        """The target assignment (see the module docstring for its invariants)."""


def _freeze(owned: Mapping[str, set[int]]) -> dict[str, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in sorted(owned.items()) if ps}


class UniformAssignor(ServerAssignor):
    """Spreads partitions so that members' partition counts differ by as little as their subscriptions allow
    (by at most one when every member subscribes to the same topics), moving as few partitions as possible:
    a member keeps the partitions of its previous target up to its fair share, the rest go one by one to the
    least-loaded eligible member, and then partitions move from the most to a less loaded eligible member
    while that narrows the gap by two or more."""

    name = "uniform"

    def assign(self, members, topics, current):
        wanted = {m: {t for t in s.topics if t in topics} for m, s in members.items()}
        universe = sorted((t, p) for t in set().union(*wanted.values()) for p in range(topics[t]))
        load: dict[str, dict[str, set[int]]] = {m: {} for m in members}
        count = dict.fromkeys(members, 0)
        eligible_members = [m for m in sorted(members) if wanted[m]]
        quota = -(-len(universe) // len(eligible_members)) if eligible_members else 0
        taken: set[tuple[str, int]] = set()
        for m in sorted(members):                      # stickiness: keep the previous target up to the quota
            for t, ps in sorted(current.get(m, {}).items()):
                if t not in wanted[m]:
                    continue
                for p in sorted(ps):
                    if p < topics[t] and (t, p) not in taken and count[m] < quota:
                        taken.add((t, p))
                        load[m].setdefault(t, set()).add(p)
                        count[m] += 1
        holders = {t: [m for m in eligible_members if t in wanted[m]] for t in {t for t, _ in universe}}
        for t, p in universe:
            if (t, p) in taken:
                continue
            m = min(holders[t], key=lambda m: (count[m], m))
            load[m].setdefault(t, set()).add(p)
            count[m] += 1
        self._balance(load, count, wanted)
        return {m: _freeze(load[m]) for m in members}

    @staticmethod
    def _balance(load, count, wanted) -> None:
        """Move partitions from a member to an eligible one with at least two fewer, until none can move
        (each move lowers the sum of squared counts, so this ends)."""
        moved = True
        while moved:
            moved = False
            for src in sorted(count, key=lambda m: (-count[m], m)):
                for t in sorted(load[src]):
                    dst = min((m for m in count if t in wanted[m] and count[m] <= count[src] - 2),
                              key=lambda m: (count[m], m), default=None)
                    if dst is None or not load[src][t]:
                        continue
                    p = max(load[src][t])
                    load[src][t].discard(p)
                    load[dst].setdefault(t, set()).add(p)
                    count[src] -= 1
                    count[dst] += 1
                    moved = True
                    break
                if moved:
                    break


class RangeAssignor(ServerAssignor):
    """Per topic, the subscribing members (ordered by instance id, else member id) get consecutive ranges:
    with P partitions and N members, the first P % N members get P // N + 1 partitions, the others P // N.
    Members subscribed to the same co-partitioned topics thus get the same partition numbers of each."""

    name = "range"

    def assign(self, members, topics, current):
        out: dict[str, dict[str, set[int]]] = {m: {} for m in members}
        order = sorted(members, key=lambda m: (members[m].instance_id is None, members[m].instance_id or m, m))
        for t in sorted(set().union(*(s.topics for s in members.values())) if members else ()):
            if t not in topics:
                continue
            subs = [m for m in order if t in members[m].topics]
            base, extra = divmod(topics[t], len(subs))
            start = 0
            for i, m in enumerate(subs):
                n = base + (1 if i < extra else 0)
                if n:
                    out[m][t] = set(range(start, start + n))
                start += n
        return {m: _freeze(out[m]) for m in members}


SERVER_ASSIGNORS: dict[str, type[ServerAssignor]] = {a.name: a for a in (UniformAssignor, RangeAssignor)}

_KAFKA_CLASSES = {f"org.apache.kafka.coordinator.group.assignor.{cls}": name
                  for cls, name in (("UniformAssignor", "uniform"), ("RangeAssignor", "range"))}


def configured_assignors(values) -> tuple[str, ...]:
    """group.consumer.assignors as Kafka takes it: built-in names or Kafka's class names of the built-in
    assignors (Kafka 3.7's default), any case; the names, in order. InvalidConfigError for an empty list, another
    assignor (seglog loads no custom classes) or a repeated one."""
    by_lower = {k.lower(): v for k, v in _KAFKA_CLASSES.items()} | {n: n for n in SERVER_ASSIGNORS}
    names = []
    for value in values:
        name = by_lower.get(str(value).strip().lower())
        if name is None:
            raise InvalidConfigError(f"Invalid value {value!r} for group.consumer.assignors: one of "
                                     f"{sorted(SERVER_ASSIGNORS)} or Kafka's class names of them")
        if name in names:
            raise InvalidConfigError("Configuration 'group.consumer.assignors' values must not be duplicated.")
        names.append(name)
    if not names:
        raise InvalidConfigError("Invalid value [] for group.consumer.assignors: a non-empty list of "
                                 f"{sorted(SERVER_ASSIGNORS)}")
    return tuple(names)


def server_assignor(name: str) -> ServerAssignor:
    """The assignor called ``name`` (UnsupportedAssignorError for any other name)."""
    cls = SERVER_ASSIGNORS.get(name)
    if cls is None:
        raise UnsupportedAssignorError(f"assignor {name!r} is not one of {sorted(SERVER_ASSIGNORS)}")
    return cls()

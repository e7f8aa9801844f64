"""Replica placement: which brokers hold a new partition's replicas, as Kafka's rack-unaware assignment.

Leaders go round-robin over the sorted live brokers from a start index; each partition's followers come at
a distance (1 + shift) from its leader, and the shift grows by one after every pass over the brokers, so
followers spread evenly too. No broker holds two replicas of one partition. The first replica of a
partition is its preferred leader.
"""

from __future__ import annotations

import random
from typing import Sequence

from ..errors import InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidReplicationFactorError


def assign_replicas(brokers: Sequence[int], partitions: int, replication_factor: int, *,
                    first_partition: int = 0, start_index: int | None = None,
                    rng: random.Random | None = None) -> dict[int, tuple[int, ...]]:
    """{partition: replica ids} for partitions first_partition .. first_partition + partitions - 1.

    Raises InvalidReplicationFactorError ("Replication factor: 4 larger than available brokers: 3.") and
    InvalidPartitionsError, with Kafka's messages."""
    if partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    ids = sorted(set(brokers))
    n = len(ids)
    if replication_factor > n:
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {n}.")
    rng = rng or random.Random()
    start = rng.randrange(n) if start_index is None else start_index % n
    shift = rng.randrange(n) if start_index is None else start_index % n
    out: dict[int, tuple[int, ...]] = {}
    for i in range(partitions):
        p = first_partition + i
        if p > 0 and p % n == 0:
            shift += 1
        leader = (p + start) % n
        replicas = [ids[leader]]
        for j in range(replication_factor - 1):
            replicas.append(ids[_follower_index(leader, shift, j, n)])
        out[p] = tuple(replicas)
    return out


def validate_assignment(assignment: dict[int, Sequence[int]], brokers: Sequence[int]) -> dict[int, tuple[int, ...]]:
    """A manual replica assignment ({partition: replica ids}, CreateTopics' ``assignments``) checked as Kafka's
    controller checks it, with its messages: partitions 0 .. n-1, no empty replica list, no broker twice in one
    partition, only registered brokers, the same number of replicas in every partition. Returns it with
    tuples, in partition order; InvalidReplicaAssignmentError otherwise."""
    if sorted(assignment) != list(range(len(assignment))):
        raise InvalidReplicaAssignmentError("Partitions should be a consecutive 0-based integer sequence")
    known = set(brokers)
    out: dict[int, tuple[int, ...]] = {}
    for p in range(len(assignment)):
        replicas = tuple(assignment[p])
        if not replicas:
            raise InvalidReplicaAssignmentError("The manual partition assignment includes an empty replica list.")
        for r in replicas:
            if replicas.count(r) > 1:
                raise InvalidReplicaAssignmentError(
                    f"The manual partition assignment includes the broker {r} more than once.")
            if r not in known:
                raise InvalidReplicaAssignmentError(
                    f"The manual partition assignment includes broker {r}, but no such broker is registered.")
        if out and len(replicas) != len(out[0]):
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this "
                f"is not consistent with previous partitions, which have {len(out[0])} replica(s).")
        out[p] = replicas
    return out


def validate_new_partitions(assignments: Sequence[Sequence[int]], current: int, count: int, replication_factor: int,
                            brokers: Sequence[int]) -> dict[int, tuple[int, ...]]:
    """CreatePartitions' manual ``assignments`` (one replica list per new partition, in order) checked as Kafka
    checks them, with its messages: only registered brokers, one list per partition added, no empty list, no
    broker twice in one list, the topic's replication factor in every list. Returns {partition: replicas} for
    partitions current .. count - 1; InvalidReplicaAssignmentError otherwise."""
    unknown = sorted({r for replicas in assignments for r in replicas} - set(brokers))
    if unknown:
        raise InvalidReplicaAssignmentError(f"Unknown broker(s) in replica assignment: "
                                            f"{', '.join(map(str, unknown))}.")
    if len(assignments) != count - current:
        raise InvalidReplicaAssignmentError(f"Increasing the number of partitions by {count - current} but "
                                            f"{len(assignments)} assignments provided.")
    out = {current + i: tuple(replicas) for i, replicas in enumerate(assignments)}
    for p, replicas in out.items():
        if not replicas:
            raise InvalidReplicaAssignmentError(f"Cannot have replication factor of 0 for partition id {p}.")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(f"Duplicate brokers not allowed in replica assignment: "
                                                f"{', '.join(map(str, replicas))} for partition id {p}.")
    bad = [(p, len(r)) for p, r in out.items() if len(r) != replication_factor]
    if bad:
        raise InvalidReplicaAssignmentError(
            f"Inconsistent replication factor between partitions, partition 0 has {replication_factor} while "
            f"partitions [{', '.join(str(p) for p, _ in bad)}] have replication factors "
            f"[{', '.join(str(n) for _, n in bad)}], respectively.")
    return out


def _follower_index(leader: int, shift: int, j: int, n: int) -> int:
    """Kafka's replicaIndex: followers at distance 1 + (shift + j) mod (n - 1) from the leader."""
    distance = 1 + (shift + j) % (n - 1)
    return (leader + distance) % n

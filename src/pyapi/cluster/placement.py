"""Replica placement: which brokers hold a new partition's replicas, as Kafka's rack-unaware assignment.

Leaders go round-robin over the sorted live brokers from a start index; each partition's followers come at
a distance (1 + shift) from its leader, and the shift grows by one after every pass over the brokers, so
followers spread evenly too. No broker holds two replicas of one partition. The first replica of a
partition is its preferred leader.
"""

from __future__ import annotations

import random
from typing import Sequence

from ..errors import InvalidPartitionsError, InvalidReplicationFactorError


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


def _follower_index(leader: int, shift: int, j: int, n: int) -> int:
    """Kafka's replicaIndex: followers at distance 1 + (shift + j) mod (n - 1) from the leader."""
    distance = 1 + (shift + j) % (n - 1)
    return (leader + distance) % n

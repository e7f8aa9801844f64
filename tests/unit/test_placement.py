"""Replica placement: no broker twice in a partition, leaders and followers spread, Kafka's errors."""

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.cluster.placement import assign_replicas, validate_assignment, validate_new_partitions
from seglog.errors import InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidReplicationFactorError


def test_known_layout():
    assert assign_replicas([0, 1, 2], 4, 2, start_index=0) == {0: (0, 1), 1: (1, 2), 2: (2, 0), 3: (0, 2)}


@given(st.integers(1, 9), st.integers(1, 60), st.data())
def test_distinct_replicas_and_balance(n, partitions, data):
    rf = data.draw(st.integers(1, n))
    brokers = random.Random(n).sample(range(100), n)
    a = assign_replicas(brokers, partitions, rf, rng=random.Random(partitions))
    assert sorted(a) == list(range(partitions))
    assert all(len(r) == rf and len(set(r)) == rf and set(r) <= set(brokers) for r in a.values())
    leaders = Counter(r[0] for r in a.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in brokers) <= 1      # leaders round-robin
    if partitions % n == 0:
        load = Counter(x for r in a.values() for x in r)
        assert len(set(load.values())) == 1                                          # every broker equally loaded


def test_added_partitions_continue_numbering():
    a = assign_replicas([1, 2, 3], 2, 2, first_partition=4, start_index=1)
    assert sorted(a) == [4, 5]


def test_kafka_errors():
    with pytest.raises(InvalidReplicationFactorError, match=r"^Replication factor: 4 larger than available brokers: 3\.$"):
        assign_replicas([0, 1, 2], 4, 4)
    with pytest.raises(InvalidPartitionsError):
        assign_replicas([0, 1, 2], 0, 1)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas([0, 1, 2], 1, 0)


def test_a_manual_assignment_is_taken_as_given():
    assert validate_assignment({1: [2, 0], 0: [0, 1]}, [0, 1, 2]) == {0: (0, 1), 1: (2, 0)}


@pytest.mark.parametrize("assignment, message", [
    ({1: [0]}, "Partitions should be a consecutive 0-based integer sequence"),
    ({0: [0], 2: [1]}, "Partitions should be a consecutive 0-based integer sequence"),
    ({0: []}, "includes an empty replica list"),
    ({0: [1, 1]}, "includes the broker 1 more than once"),
    ({0: [0, 7]}, "includes broker 7, but no such broker is registered"),
    ({0: [0, 1], 1: [2]}, "a partition with 1 replica(s), but this is not consistent with previous partitions, "
                          "which have 2 replica(s)"),
])
def test_a_manual_assignment_is_checked_as_kafka_checks_it(assignment, message):
    with pytest.raises(InvalidReplicaAssignmentError) as e:
        validate_assignment(assignment, [0, 1, 2])
    assert message in str(e.value)


def test_new_partitions_take_their_manual_assignment_after_the_existing_ones():
    assert validate_new_partitions([[2, 0], [0, 1]], 3, 5, 2, [0, 1, 2]) == {3: (2, 0), 4: (0, 1)}


@pytest.mark.parametrize("assignments, count, message", [
    ([[0, 9]], 4, "Unknown broker(s) in replica assignment: 9."),
    ([[0, 1]], 5, "Increasing the number of partitions by 2 but 1 assignments provided."),
    ([[]], 4, "Cannot have replication factor of 0 for partition id 3."),
    ([[1, 1]], 4, "Duplicate brokers not allowed in replica assignment: 1, 1 for partition id 3."),
    ([[0, 1], [2]], 5, "Inconsistent replication factor between partitions, partition 0 has 2 while partitions [4] "
                       "have replication factors [1], respectively."),
])
def test_new_partitions_assignments_are_checked_as_kafka_checks_them(assignments, count, message):
    with pytest.raises(InvalidReplicaAssignmentError) as e:
        validate_new_partitions(assignments, 3, count, 2, [0, 1, 2])
    assert str(e.value) == message

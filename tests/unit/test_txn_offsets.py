"""Transactional offset commits (TxnOffsetCommit): pending until the transaction's marker reaches the group's
offsets partition, visible on COMMIT, dropped on ABORT; written as a transactional batch of the producer."""

import pytest

import seglog
from seglog import _engine
from seglog.errors import IllegalGenerationError, UnknownMemberIdError, UnknownTopicOrPartitionError
from seglog.group import GroupCoordinator
from seglog.offsets_format import OFFSETS_TOPIC, OffsetAndMetadata, TopicPartition
from seglog.offsets_store import partition_for_group

TP0, TP1 = TopicPartition("in", 0), TopicPartition("in", 1)


@pytest.fixture
def node(tmp_path):
    n = seglog.open(tmp_path)
    n.create_topic("in", 2)
    yield n
    n.close()


def offsets(coord, group):
    return {tp: om.offset for tp, om in coord.fetch_offsets(group).items()}


@pytest.mark.parametrize("stored", [False, True], ids=["in-memory", "offsets-topic"])
def test_txn_offsets_show_only_after_commit(node, stored):
    coord = node.group_coordinator if stored else GroupCoordinator(timer=False)
    coord.commit_offsets("g", {TP0: 3})
    assert coord.txn_commit_offsets("g", "tx", 7, 0, {TP0: 10, TP1: 11}) == {TP0: None, TP1: None}
    assert offsets(coord, "g") == {TP0: 3}
    assert coord.unstable_offsets("g") == {TP0, TP1} and coord.unstable_offsets("g", [TP1]) == {TP1}
    if stored:
        p = partition_for_group("g", node.config.offsets_topic_num_partitions)
        coord.transaction_completed((p + 1) % 50, 7, True)              # another partition's marker
        assert coord.unstable_offsets("g") == {TP0, TP1}
    coord.transaction_completed(p if stored else None, 7, True)
    assert offsets(coord, "g") == {TP0: 10, TP1: 11}
    assert coord.unstable_offsets("g") == set()


def test_an_abort_drops_them(node):
    coord = node.group_coordinator
    coord.txn_commit_offsets("g", "tx", 7, 0, {TP0: 10})
    coord.transaction_completed(partition_for_group("g", node.config.offsets_topic_num_partitions), 7, False)
    assert coord.fetch_offsets("g", [TP0]) == {TP0: None} and coord.unstable_offsets("g") == set()


def test_they_are_a_transactional_batch_of_the_producer(node):
    coord = node.group_coordinator
    coord.txn_commit_offsets("g", "tx", 7, 2, {TP0: 10})
    coord.txn_commit_offsets("g", "tx", 7, 2, {TP1: 12})
    log = node.partition(OFFSETS_TOPIC, partition_for_group("g", node.config.offsets_topic_num_partitions)).log
    found = [(b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional)
             for b in _engine.batches(log.read(0), False)]
    assert found == [(7, 2, 0, True), (7, 2, 1, True)]


def test_member_and_generation_are_checked_when_given(node):
    coord = node.group_coordinator
    with pytest.raises(UnknownMemberIdError):
        coord.txn_commit_offsets("g", "tx", 7, 0, {TP0: 1}, 0, "nobody")
    with pytest.raises(IllegalGenerationError):
        coord.txn_commit_offsets("g", "tx", 7, 0, {TP0: 1}, 3, "")
    errs = coord.txn_commit_offsets("g", "tx", 7, 0, {TopicPartition("nope", 0): 1, TP0: 1})
    assert isinstance(errs[TopicPartition("nope", 0)], UnknownTopicOrPartitionError) and errs[TP0] is None

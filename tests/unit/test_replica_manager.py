"""The replica manager taking a role on a broker whose disk fails: the StorageError goes to the broker's
log-dir failure handler (which stops the broker so the controller moves the leadership elsewhere), as a
follower's failed write does, instead of leaving a leader in the metadata that leads nothing."""

from __future__ import annotations

import errno

import pytest

from seglog.cluster.memory import MemoryCluster, MemoryMetadataStore
from seglog.cluster.metastore import BrokerInfo, PartitionState, TopicAssignment
from seglog.config import BrokerConfig
from seglog.errors import NotLeaderOrFollowerError, StorageError
from seglog.faults import FaultPlan
from seglog.node import Node
from seglog.replication.manager import ReplicaManager


def test_a_leadership_taken_on_a_full_disk_reports_the_log_dir_failure(tmp_path):
    mc = MemoryCluster()
    store = MemoryMetadataStore(mc)
    store.register_broker(BrokerInfo(1, "127.0.0.1", 9001))
    store.create_topic(TopicAssignment("t", {0: (1,)}), {})
    config = BrokerConfig.from_properties({"broker.id": 1})
    node = Node(tmp_path / "d1", config)
    node.create_topic("t", 1)
    rm = ReplicaManager(node, 1, config, store, lambda broker_id: None, None)
    failures = []
    rm.on_log_dir_failure = failures.append
    try:
        plan = FaultPlan()
        plan.fail("open", errno.ENOSPC, path="*leader-epoch-checkpoint.tmp")
        with plan, pytest.raises(StorageError):
            rm.apply("t", 0, PartitionState(1, 1, (1,)), (1,))
        assert len(failures) == 1 and failures[0].disk_failure
        with pytest.raises(NotLeaderOrFollowerError):
            rm.leader_state("t", 0)
        rm.apply("t", 0, PartitionState(1, 2, (1,)), (1,))       # the disk takes writes again
        assert rm.leader_state("t", 0).leader_epoch == 2 and len(failures) == 1
    finally:
        rm.close()
        node.close()
        store.close()

"""Cluster metadata: the MetadataStore interface and its in-memory implementation.

The ZooKeeper implementation is ``seglog.cluster.zk.ZooKeeperMetadataStore`` and the ZooKeeper launcher
``seglog.cluster.zookeeper_server``; import them explicitly (``zk`` needs kazoo, which a single broker
without ZooKeeper does not).
"""

from .memory import MemoryCluster, MemoryMetadataStore
from .metastore import (BrokerInfo, ControllerChange, ControllerEpoch, InvalidUpdateVersionError, MetadataStore,
                        PartitionState, ReplicaAssignment, SessionEvent, Subscription, TopicAssignment)

__all__ = ["MetadataStore", "MemoryCluster", "MemoryMetadataStore", "BrokerInfo", "TopicAssignment",
           "ReplicaAssignment", "PartitionState", "ControllerEpoch", "ControllerChange", "SessionEvent", "Subscription",
           "InvalidUpdateVersionError"]

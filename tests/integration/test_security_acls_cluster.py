"""ACLs in a 3-broker ZooKeeper cluster: stored in Kafka's /kafka-acl layout, and a change made through one broker
is enforced by every broker (each watches the change notifications)."""

from __future__ import annotations

import json
import time

import pytest

from cluster_harness import Cluster, wait_until
from seglog.client import BrokerConnection
from seglog.protocol import ApiKey
from seglog.security.acls import AclBinding

pytestmark = [pytest.mark.slow, pytest.mark.zookeeper, pytest.mark.timeout(300)]

TOPIC_AUTHORIZATION_FAILED = 29
ANONYMOUS = "User:ANONYMOUS"


def topic_error(port: int, topic: str) -> int:
    """The error code broker at `port` answers for `topic` in a Metadata request of its own."""
    conn = BrokerConnection("127.0.0.1", port, timeout=10)
    try:
        r = conn.request(ApiKey.METADATA, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    finally:
        conn.close()
    [t] = r["topics"]
    return t["error_code"]


def test_acl_changes_through_one_broker_are_enforced_by_every_broker(zookeeper_server, tmp_path):
    from confluent_kafka.admin import (AclBinding as CkBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                       AdminClient, NewTopic, ResourcePatternType, ResourceType)
    from kazoo.client import KazooClient

    from seglog.cluster.zk import ZooKeeperMetadataStore
    from seglog.security.authorizer import Authorizer, MetadataAclStore

    chroot = f"/acl-{int(time.time() * 1000) % 10**8}"
    # as kafka-acls.sh --authorizer-properties zookeeper.connect=...: the brokers' own principal (PLAINTEXT:
    # User:ANONYMOUS) gets the cluster (replication, topic creation, ACL changes) and topic `a`, not `b`
    store = ZooKeeperMetadataStore(zookeeper_server.connect_string + chroot)
    try:
        assert Authorizer(MetadataAclStore(store)).create_acls([
            AclBinding.allow(ANONYMOUS, "All", "Cluster"), AclBinding.allow(ANONYMOUS, "All", "Topic", "a")]) == \
            [None, None]
    finally:
        store.close()
    c = Cluster(zookeeper_server.connect_string, tmp_path / "c", 3,
                {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}, chroot=chroot)
    try:
        c.start()
        ports = [b.port for b in c.brokers.values()]
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        for name in ("a", "b"):
            admin.create_topics([NewTopic(name, 1, 3)], operation_timeout=20)[name].result(30)
        wait_until(lambda: all(topic_error(p, "a") == 0 for p in ports), 30, "every broker to show topic a")
        assert [topic_error(p, "b") for p in ports] == [TOPIC_AUTHORIZATION_FAILED] * 3

        via_first = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports[0]}"})
        read_b = CkBinding(ResourceType.TOPIC, "b", ResourcePatternType.LITERAL, ANONYMOUS, "*",
                           AclOperation.READ, AclPermissionType.ALLOW)
        via_first.create_acls([read_b])[read_b].result(20)
        wait_until(lambda: all(topic_error(p, "b") == 0 for p in ports), 20, "every broker to allow topic b")

        zk = KazooClient(hosts=zookeeper_server.connect_string + chroot)
        zk.start()
        try:
            data, _ = zk.get("/kafka-acl/Topic/b")
            assert json.loads(data) == {"version": 1, "acls": [
                {"principal": ANONYMOUS, "permissionType": "Allow", "operation": "Read", "host": "*"}]}
            assert any(zk.get(f"/kafka-acl-changes/{n}")[0] == b"Topic:b"
                       for n in zk.get_children("/kafka-acl-changes"))
        finally:
            zk.stop()

        via_last = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports[-1]}"})
        everything_on_b = AclBindingFilter(ResourceType.TOPIC, "b", ResourcePatternType.ANY, None, None,
                                           AclOperation.ANY, AclPermissionType.ANY)
        assert via_last.delete_acls([everything_on_b])[everything_on_b].result(20) == [read_b]
        wait_until(lambda: all(topic_error(p, "b") == TOPIC_AUTHORIZATION_FAILED for p in ports), 20,
                   "every broker to refuse topic b again")
    finally:
        c.close()

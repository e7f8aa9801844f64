"""A 3-broker ZooKeeper cluster whose inter-broker listener INTERNAL is SASL_SSL (SCRAM-SHA-512) and whose clients
use another, EXTERNAL (SSL): the brokers replicate, send transaction markers and verify transactions over
INTERNAL with their own credentials; seglog's clients, told every broker's EXTERNAL address, produce (acks=all),
commit a transaction and consume; the replicas stay identical and the data survives the leader's death."""

from __future__ import annotations

import time

import pytest

from cluster_harness import Cluster, wait_until

import seglog
from seglog.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.zookeeper, pytest.mark.timeout(300)]

MECHANISM = "SCRAM-SHA-512"
USERS = {"broker": "broker-secret"}


@pytest.fixture
def cluster(zookeeper_server, tmp_path, certs):
    overrides = {
        # the harness puts each broker's own port on the first listener; INTERNAL's is picked when it binds
        "listeners": "EXTERNAL://127.0.0.1:9093,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "EXTERNAL:SSL,INTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.location": str(certs.server.keystore),
        "listener.name.internal.ssl.truststore.location": str(certs.ca),   # the brokers trust each other's CA
        "sasl.enabled.mechanisms": MECHANISM,
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        "listener.name.internal.scram-sha-512.sasl.jaas.config":
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
            f'password="{USERS["broker"]}";',
        "transaction.state.log.num.partitions": 2, "transaction.state.log.replication.factor": 3,
        "transaction.state.log.min.isr": 2,
    }
    client = {"security.protocol": "SSL", "ssl.truststore.location": str(certs.ca)}
    c = Cluster(zookeeper_server.connect_string, tmp_path / "cluster", 3, overrides,
                chroot=f"/sasl-ssl-{int(time.time() * 1000) % 10**8}", security=client)
    for user, password in USERS.items():         # the cluster's SCRAM users are in ZooKeeper before it starts
        assert main(["configs", "--zookeeper", c.zk_base + c.chroot, "--alter", "--add-config",
                     f"{MECHANISM}=[password={password}]", "--entity-type", "users", "--entity-name", user]) == 0
    c.start()
    c.client = client
    yield c
    c.close()


def test_replication_and_transactions_over_a_sasl_ssl_inter_broker_listener(cluster):
    node = seglog.connect(cluster.bootstrap, security=cluster.client)
    try:
        assert sorted(node.cluster.broker_ids()) == [0, 1, 2]
        assert sorted(node.cluster.brokers.values()) == sorted(cluster.client_addr.values())    # EXTERNAL's
        node.create_topic("secured", 3, replication_factor=3)
        cluster.wait_full_isr("secured", range(3))
        values = [f"v{i}".encode() for i in range(300)]
        with seglog.Producer(node, acks="all") as p:
            futures = [p.send("secured", v, partition=i % 3) for i, v in enumerate(values)]
            p.flush()
        assert all(f.get().offset >= 0 for f in futures)
        for part in range(3):                    # every follower fetched the leader's batches, byte for byte
            cluster.wait_converged("secured", part, min_end=100)

        # a transaction over all three partitions: markers go from the coordinator to the other leaders
        with seglog.Producer(node, transactional_id="secured-txn") as p:
            p.init_transactions()
            p.begin_transaction()
            for part in range(3):
                p.send("secured", b"in a transaction", partition=part)
            p.commit_transaction()

        leader = cluster.leader("secured", 0)
        cluster.brokers[leader].kill()
        cluster.wait_leader("secured", 0, not_in=[leader])
        got: list[bytes] = []
        with seglog.Consumer(node, auto_offset_reset="earliest", isolation_level="read_committed") as c:
            c.assign([("secured", part) for part in range(3)])
            wait_until(lambda: got.extend(r.value for r in c.poll(0.5)) or len(got) >= len(values) + 3, 60,
                       "every record read back after the leader's death", details=cluster.describe)
        assert sorted(got) == sorted(values + [b"in a transaction"] * 3)
    finally:
        node.close()
    for b in cluster.brokers.values():
        assert "Failed authentication" not in b.log_text()

"""SCRAM credentials managed with `seglog configs` (kafka-configs.sh): in a lone broker's data dir, and in a
3-broker ZooKeeper cluster where they live in /config/users/<user> beside the user's quotas, so a credential
altered through one broker lets a client log in through another at once and a deleted one is refused
everywhere. The cluster's inter-broker user is created with `configs --zookeeper` before any broker runs, as
Kafka's bootstrap does; the brokers then replicate over a SCRAM-authenticated listener with it."""

from __future__ import annotations

import json
import time

import pytest

from cluster_harness import Cluster, wait_until

import seglog
from seglog.cli import main
from seglog.security.scram import ScramCredential
from tests.helpers.kafka_wire import RawConnection
from tests.integration.test_security_listeners import authenticate

SASL_AUTHENTICATION_FAILED = 58
SCRAM_LISTENER = {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
                  "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"}


def configs(capfd, *args) -> tuple[int, str, str]:
    """`seglog configs ARGS` in this process: (status, stdout, stderr)."""
    capfd.readouterr()
    status = main(["configs", *map(str, args)])
    out, err = capfd.readouterr()
    return status, out, err


def logs_in(address: tuple[str, int], user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> bool:
    with RawConnection(address) as c:
        code = authenticate(c, mechanism, user, password)["error_code"]
    assert code in (0, SASL_AUTHENTICATION_FAILED)
    return code == 0


def confluent_round_trip(bootstrap: str, user: str, password: str, topic: str) -> list[bytes]:
    """confluent-kafka produces one record with SCRAM-SHA-512 and reads it back."""
    import confluent_kafka
    conf = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": password}
    p = confluent_kafka.Producer({**conf, "acks": "all"})
    p.produce(topic, b"logged in as " + user.encode())
    assert p.flush(30) == 0
    c = confluent_kafka.Consumer({**conf, "group.id": f"g-{user}", "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        return got
    finally:
        c.close()


# -- a lone broker: the data-dir file ------------------------------------------------------------------------

def test_configs_round_trip_on_a_lone_broker(tmp_path, capfd):
    props = {"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0", **SCRAM_LISTENER}
    with seglog.serve(tmp_path / "d", props) as b:
        scram = b.broker.bound["INTERNAL"]
        server = ["--bootstrap-server", b.bootstrap_servers]
        alice = ["--entity-type", "users", "--entity-name", "alice"]
        assert configs(capfd, *server, "--alter", "--add-config",
                       "SCRAM-SHA-512=[password=secret],SCRAM-SHA-256=[iterations=8192,password=pw],"
                       "producer_byte_rate=1024", *alice) == (0, "Completed updating config for user alice.\n", "")
        assert configs(capfd, *server, "--describe", *alice) == (0, (
            "Quota configs for user-principal 'alice' are producer_byte_rate=1024.0\n"
            "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, "
            "SCRAM-SHA-512=iterations=4096\n"), "")
        stored = json.loads((tmp_path / "d" / "scram-credentials.json").read_text())
        assert ScramCredential.from_kafka(stored["alice"]["config"]["SCRAM-SHA-256"]).iterations == 8192
        assert "secret" not in json.dumps(stored)
        assert logs_in(scram, "alice", "secret") and logs_in(scram, "alice", "pw", "SCRAM-SHA-256")
        assert not logs_in(scram, "alice", "pw")

        assert configs(capfd, *server, "--alter", "--delete-config", "SCRAM-SHA-512", *alice)[0] == 0
        assert not logs_in(scram, "alice", "secret") and logs_in(scram, "alice", "pw", "SCRAM-SHA-256")
        assert configs(capfd, *server, "--alter", "--add-config", "SCRAM-SHA-512=[password=b]", "--entity-type",
                       "users", "--entity-name", "bob")[0] == 0
        assert configs(capfd, *server, "--describe", "--entity-type", "users") == (0, (
            "Quota configs for user-principal 'alice' are producer_byte_rate=1024.0\n"
            "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192\n"
            "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=4096\n"), "")
        status, _, err = configs(capfd, *server, "--alter", "--delete-config", "SCRAM-SHA-512", *alice)
        assert status != 0 and "Attempt to delete a user credential that does not exist" in err
    with seglog.serve(tmp_path / "d", props) as b:                  # the file outlives the broker
        assert logs_in(b.broker.bound["INTERNAL"], "bob", "b")


# -- a ZooKeeper cluster: /config/users --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster(zookeeper_server, tmp_path_factory):
    """Three brokers replicating over INTERNAL (SASL_PLAINTEXT, SCRAM-SHA-512 as user "broker", whose
    credential is written to ZooKeeper before they start); PLAINTEXT (the harness's and the CLI's) first."""
    overrides = {"listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:0", **SCRAM_LISTENER,
                 "inter.broker.listener.name": "INTERNAL", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                 "listener.name.internal.scram-sha-512.sasl.jaas.config":
                     'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
                     'password="broker-secret";'}
    c = Cluster(zookeeper_server.connect_string, tmp_path_factory.mktemp("scram-cluster"), 3, overrides,
                chroot=f"/scram-{int(time.time() * 1000) % 10**8}")
    c.bootstrapped = main(["configs", "--zookeeper", c.zk_base + c.chroot, "--alter", "--add-config",
                           "SCRAM-SHA-512=[password=broker-secret]", "--entity-type", "users", "--entity-name",
                           "broker"])
    try:
        c.start()
        yield c
    finally:
        c.close()


def internal(cluster, broker_id: int) -> tuple[str, int]:
    """The INTERNAL listener's address, as the broker registered it."""
    endpoints = json.loads(cluster.zk.get(f"/brokers/ids/{broker_id}")[0])["endpoints"]
    host, port = next(e for e in endpoints if e.startswith("INTERNAL://"))[len("INTERNAL://"):].rsplit(":", 1)
    return host, int(port)


def test_inter_broker_user_created_in_zookeeper_before_the_brokers(cluster, capfd):
    assert cluster.bootstrapped == 0
    node = json.loads(cluster.zk.get("/config/users/broker")[0])
    assert node["version"] == 1 and list(node["config"]) == ["SCRAM-SHA-512"]
    assert list(dict(f.split("=", 1) for f in node["config"]["SCRAM-SHA-512"].split(","))) == [
        "salt", "stored_key", "server_key", "iterations"]
    admin = seglog.connect(cluster.bootstrap)
    try:
        admin.create_topic("scram-replicated", 1, replication_factor=3)
    finally:
        admin.close()
    cluster.wait_full_isr("scram-replicated", [0])         # the followers fetched over INTERNAL as "broker"
    assert configs(capfd, "--zookeeper", cluster.zk_base + cluster.chroot, "--describe", "--entity-type", "users") \
        == (0, "SCRAM credential configs for user-principal 'broker' are SCRAM-SHA-512=iterations=4096\n", "")


def test_a_credential_altered_through_one_broker_serves_every_broker(cluster, capfd):
    a, b, c = (cluster.bootstrap_of([i]) for i in range(3))
    alice = ["--entity-type", "users", "--entity-name", "alice"]
    assert configs(capfd, "--bootstrap-server", a, "--alter", "--add-config", "producer_byte_rate=1048576",
                   *alice)[0] == 0
    assert configs(capfd, "--bootstrap-server", a, "--alter", "--add-config",
                   "SCRAM-SHA-512=[password=alice-secret]", *alice) == (
        0, "Completed updating config for user alice.\n", "")
    node = json.loads(cluster.zk.get("/config/users/alice")[0])
    assert set(node["config"]) == {"producer_byte_rate", "SCRAM-SHA-512"}        # the quota is kept
    assert configs(capfd, "--bootstrap-server", c, "--describe", *alice)[1] == (
        "Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0\n"
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=4096\n")
    wait_until(lambda: all(logs_in(internal(cluster, i), "alice", "alice-secret") for i in range(3)), 10,
               "alice's credential on every broker")
    admin = seglog.connect(cluster.bootstrap)
    try:
        admin.create_topic("scram-logins", 1, replication_factor=3)
    finally:
        admin.close()
    cluster.wait_full_isr("scram-logins", [0])
    host, port = internal(cluster, 1)
    assert confluent_round_trip(f"{host}:{port}", "alice", "alice-secret", "scram-logins") == [b"logged in as alice"]

    assert configs(capfd, "--bootstrap-server", b, "--alter", "--delete-config", "SCRAM-SHA-512", *alice)[0] == 0
    assert json.loads(cluster.zk.get("/config/users/alice")[0])["config"] == {"producer_byte_rate": "1048576"}
    wait_until(lambda: not any(logs_in(internal(cluster, i), "alice", "alice-secret") for i in range(3)), 10,
               "alice refused by every broker")
    import confluent_kafka.admin
    refused = confluent_kafka.admin.AdminClient({
        "bootstrap.servers": f"{host}:{port}", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": "alice-secret"})
    with pytest.raises(confluent_kafka.KafkaException):
        refused.list_topics(timeout=5)
    assert configs(capfd, "--bootstrap-server", c, "--describe", *alice)[1] == (
        "Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0\n")

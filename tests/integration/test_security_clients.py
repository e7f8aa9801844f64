"""Real clients (kafka-python, confluent-kafka, aiokafka, kcat) and seglog's own (seglog.connect's Producer
and Consumer, the CLI with --command-config) over SSL, SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and
SASL_SSL against one broker: each produces records and reads them back; a wrong password fails the client's
authentication, an untrusted certificate the TLS handshake."""

from __future__ import annotations

import asyncio
import subprocess
import uuid

import pytest
from test_cli import fails, ok

import seglog
from seglog.errors import IllegalSaslStateError, NetworkError, SaslAuthenticationError, SslAuthenticationError
from seglog.security.acls import AclBinding
from seglog.security.sasl import FailedLogins

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
USERS = {"alice": "alice-secret", "bob": "b0b-secret"}


def _kafka_python(bootstrap, protocol, mechanism, password, ca, topic, values):
    from kafka import KafkaConsumer, KafkaProducer
    opts = {"bootstrap_servers": bootstrap, "security_protocol": protocol}
    if "SSL" in protocol:
        opts.update(ssl_cafile=str(ca), ssl_check_hostname=True)
    if "SASL" in protocol:
        opts.update(sasl_mechanism=mechanism, sasl_plain_username="alice", sasl_plain_password=password)
    p = KafkaProducer(**opts)
    try:
        for v in values:
            p.send(topic, v)
        p.flush(20)
    finally:
        p.close()
    c = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000, **opts)
    try:
        got = []
        for r in c:
            got.append(r.value)
            if len(got) == len(values):
                break
        return got
    finally:
        c.close()


def _confluent(bootstrap, protocol, mechanism, password, ca, topic, values):
    import confluent_kafka
    opts = {"bootstrap.servers": bootstrap, "security.protocol": protocol}
    if "SSL" in protocol:
        opts["ssl.ca.location"] = str(ca)
    if "SASL" in protocol:
        opts.update({"sasl.mechanisms": mechanism, "sasl.username": "alice", "sasl.password": password})
    errors = []
    p = confluent_kafka.Producer({**opts, "error_cb": errors.append})
    for v in values:
        p.produce(topic, v)
    left = p.flush(20)
    if left or not values:
        raise RuntimeError(f"confluent-kafka: {left} records not delivered: {errors}")
    c = confluent_kafka.Consumer({**opts, "group.id": "g-" + uuid.uuid4().hex, "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        got = []
        for _ in range(40):
            for m in c.consume(len(values), 0.5):
                if m.error() is None:
                    got.append(m.value())
            if len(got) >= len(values):
                break
        return got
    finally:
        c.close()


def _aiokafka(bootstrap, protocol, mechanism, password, ca, topic, values):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    async def run():
        opts = {"bootstrap_servers": bootstrap, "security_protocol": protocol}
        if "SSL" in protocol:
            opts["ssl_context"] = create_ssl_context(cafile=str(ca))
        if "SASL" in protocol:
            opts.update(sasl_mechanism=mechanism, sasl_plain_username="alice", sasl_plain_password=password)
        p = AIOKafkaProducer(**opts)
        await p.start()
        try:
            for v in values:
                await p.send_and_wait(topic, v)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **opts)
        await c.start()
        try:
            got = []
            while len(got) < len(values):
                batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), 20)
                got += [r.value for rs in batch.values() for r in rs]
            return got
        finally:
            await c.stop()
    return asyncio.run(run())


def _kcat(bootstrap, protocol, mechanism, password, ca, topic, values):
    opts = ["-b", bootstrap, "-X", f"security.protocol={protocol}"]
    if "SSL" in protocol:
        opts += ["-X", f"ssl.ca.location={ca}"]
    if "SASL" in protocol:
        opts += ["-X", f"sasl.mechanisms={mechanism}", "-X", "sasl.username=alice", "-X", f"sasl.password={password}"]
    subprocess.run(["kcat", *opts, "-P", "-t", topic], input=b"\n".join(values) + b"\n", check=True, timeout=60,
                   capture_output=True)
    out = subprocess.run(["kcat", *opts, "-C", "-t", topic, "-o", "beginning", "-e", "-c", str(len(values))],
                         check=True, timeout=60, capture_output=True).stdout
    return out.splitlines()


CLIENTS = {"kafka-python": _kafka_python, "confluent-kafka": _confluent, "aiokafka": _aiokafka, "kcat": _kcat}


@pytest.fixture(scope="module")
def brokers(tmp_path_factory, certs):
    """One broker per protocol, for the whole module: SSL, SASL_PLAINTEXT and SASL_SSL."""
    ssl_settings = {"ssl.keystore.location": str(certs.server.keystore)}
    running = {}
    try:
        running["SSL"] = seglog.serve(tmp_path_factory.mktemp("ssl"), ssl=ssl_settings)
        running["SASL_PLAINTEXT"] = seglog.serve(tmp_path_factory.mktemp("sasl"), sasl_users=USERS)
        running["SASL_SSL"] = seglog.serve(tmp_path_factory.mktemp("sasl-ssl"), ssl=ssl_settings, sasl_users=USERS)
        yield running
    finally:
        for b in running.values():
            b.stop()


CASES = ([("SSL", None)] + [("SASL_PLAINTEXT", m) for m in MECHANISMS] + [("SASL_SSL", m) for m in MECHANISMS])


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("protocol, mechanism", CASES, ids=[f"{p}-{m}" if m else p for p, m in CASES])
def test_client_produces_and_consumes(brokers, certs, client, protocol, mechanism):
    broker = brokers[protocol]
    bootstrap = f"localhost:{broker.port}"          # the certificate names localhost: host names are checked
    topic = f"t-{client}-{protocol}-{mechanism or 'x'}".replace("_", "-")
    values = [f"{client} {protocol} {i}".encode() for i in range(20)]
    got = CLIENTS[client](bootstrap, protocol, mechanism, USERS["alice"], certs.ca, topic, values)
    assert got == values


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka", "kcat"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password_is_refused(brokers, certs, client, mechanism, caplog):
    broker = brokers["SASL_PLAINTEXT"]
    broker.broker.failed_logins = FailedLogins()       # a fresh allowance of logged failures (10 a minute)
    with pytest.raises(Exception) as failure:
        if client == "kcat":
            subprocess.run(["kcat", "-b", broker.bootstrap_servers, "-X", "security.protocol=SASL_PLAINTEXT",
                            "-X", f"sasl.mechanisms={mechanism}", "-X", "sasl.username=alice",
                            "-X", "sasl.password=wrong", "-L", "-m", "2"], check=True, timeout=60,
                           capture_output=True)
        elif client == "confluent-kafka":
            import confluent_kafka.admin
            a = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap_servers,
                                                   "security.protocol": "SASL_PLAINTEXT",
                                                   "sasl.mechanisms": mechanism, "sasl.username": "alice",
                                                   "sasl.password": "wrong"})
            a.list_topics(timeout=2)
        else:
            from kafka import KafkaProducer
            KafkaProducer(bootstrap_servers=broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                          sasl_mechanism=mechanism, sasl_plain_username="alice", sasl_plain_password="wrong",
                          max_block_ms=2000, bootstrap_timeout_ms=2000).close()
    # Kafka's words to the client; the broker's log says why (for SCRAM the client is told only this)
    told, logged = (("Authentication failed: Invalid username or password",) * 2 if mechanism == "PLAIN" else
                    (f"Authentication failed during authentication due to invalid credentials with SASL mechanism "
                     f"{mechanism}", "Invalid client credentials"))
    if client == "kcat":
        assert told in failure.value.stderr.decode()
    assert f"({mechanism}, user 'alice'): {logged}" in caplog.text
    assert "Failed authentication with 127.0.0.1:" in caplog.text
    assert "wrong" not in caplog.text            # nothing secret in the broker's log


# -- seglog's own clients ---------------------------------------------------------------------------------------

def settings(protocol, mechanism=None, ca=None, user="alice", password=None) -> dict[str, str]:
    """librdkafka's names for the client settings of `protocol` (ssl.ca.location, sasl.username ...)."""
    out = {"security.protocol": protocol}
    if "SSL" in protocol:
        out["ssl.ca.location"] = str(ca)
    if "SASL" in protocol:
        out.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password or USERS[user]})
    return out


OWN_CASES = [("SSL", None), ("SASL_PLAINTEXT", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-512")]


@pytest.mark.parametrize("protocol, mechanism", OWN_CASES, ids=[p for p, _ in OWN_CASES])
def test_seglog_connect_produces_and_consumes(brokers, certs, protocol, mechanism):
    """seglog.connect(..., security=...): topic creation, acks=all and acks=0 produce (the one-way connection
    is secured too), a consumer group (its coordinator's connections too)."""
    node = seglog.connect(f"localhost:{brokers[protocol].port}", security=settings(protocol, mechanism, certs.ca))
    topic = f"own-{protocol}".replace("_", "-")
    try:
        node.create_topic(topic, 2)
        values = [f"{protocol} {i}".encode() for i in range(20)]
        with seglog.Producer(node) as p:
            for v in values[:15]:
                p.send(topic, v)
        with seglog.Producer(node, acks=0) as p:
            for v in values[15:]:
                p.send(topic, v)
        got = []
        with seglog.Consumer(node, group_id=f"g-{topic}", auto_offset_reset="earliest") as c:
            c.subscribe([topic])
            for _ in range(40):
                got += [r.value for r in c.poll(0.5)]
                if len(got) >= len(values):
                    break
        assert sorted(got) == sorted(values)
    finally:
        node.close()


def test_seglog_connect_refusals(brokers, certs):
    """A wrong password, a certificate no trusted CA signed, a host name the certificate does not name and a
    plaintext client at a TLS listener fail at once with an error saying so (never the password)."""
    sasl_ssl = f"localhost:{brokers['SASL_SSL'].port}"
    with pytest.raises(SaslAuthenticationError, match="due to invalid credentials with SASL mechanism "
                                                      "SCRAM-SHA-512") as refused:
        seglog.connect(sasl_ssl, security=settings("SASL_SSL", "SCRAM-SHA-512", certs.ca, password="wr0ng")).topics()
    assert "wr0ng" not in str(refused.value) and "user 'alice'" in str(refused.value)
    with pytest.raises(SslAuthenticationError, match="certificate verify failed|self-signed certificate"):
        seglog.connect(sasl_ssl, security=settings("SASL_SSL", "SCRAM-SHA-512", certs.self_signed.cert)).topics()
    with pytest.raises(NetworkError):
        seglog.connect(sasl_ssl).topics()
    with pytest.raises(IllegalSaslStateError, match="is not a SASL listener"):
        seglog.connect(f"localhost:{brokers['SSL'].port}", security=settings("SASL_SSL", "PLAIN", certs.ca)).topics()


def test_host_name_check_and_opting_out(tmp_path, certs):
    """ssl.endpoint.identification.algorithm=https (the default) refuses a certificate for another host; empty
    accepts it (the CA still has to have signed it)."""
    elsewhere = certs.authority.issue("elsewhere", hosts=("elsewhere.invalid",))
    with seglog.serve(tmp_path, ssl={"ssl.keystore.location": str(elsewhere.keystore)}) as b:
        checked = settings("SSL", ca=certs.ca)
        with pytest.raises(SslAuthenticationError, match="Hostname mismatch"):
            seglog.connect(f"localhost:{b.port}", security=checked).topics()
        node = seglog.connect(f"localhost:{b.port}", security={**checked, "ssl.endpoint.identification.algorithm": ""})
        assert node.topics() == []
        node.close()


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory, certs):
    """A SASL_SSL broker with ACLs: alice is a super user, bob may read topic orders."""
    ssl = {"ssl.keystore.location": str(certs.server.keystore)}
    with seglog.serve(tmp_path_factory.mktemp("acl-sasl-ssl"), ssl=ssl,
                      sasl_users=USERS, super_users="User:alice",
                      acls=[AclBinding.allow("User:bob", "Read", "Topic", "orders")]) as b:
        b.node.create_topic("orders", 1)
        b.node.create_topic("payroll", 1)
        yield b


def command_config(tmp_path, certs, user, password=None):
    """A --command-config file with Java's names (ssl.truststore.location, sasl.jaas.config)."""
    path = tmp_path / f"{user}.properties"
    path.write_text(f"security.protocol=SASL_SSL\nssl.truststore.location={certs.ca}\n"
                    f"sasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config=org.apache.kafka.common.security.scram."
                    f"ScramLoginModule required username=\"{user}\" password=\"{password or USERS[user]}\";\n")
    return path


def test_cli_commands_with_command_config(acl_broker, certs, tmp_path):
    server = f"localhost:{acl_broker.port}"
    alice, bob = command_config(tmp_path, certs, "alice"), command_config(tmp_path, certs, "bob")
    assert ok("topics", "--bootstrap-server", server, "--list", "--command-config", alice).split() == [
        "orders", "payroll"]
    assert ok("topics", "--bootstrap-server", server, "--list", "--command-config", bob).split() == ["orders"]
    listed = ok("acls", "--bootstrap-server", server, "--list", "--command-config", alice)
    assert "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)" in listed
    assert "(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)" in listed
    fails(1, "invalid credentials with SASL mechanism SCRAM-SHA-512", "acls", "--bootstrap-server", server, "--list",
          "--command-config", command_config(tmp_path, certs, "alice", "wr0ng"))
    fails(1, "no broker reachable", "topics", "--bootstrap-server", server, "--list")


def test_console_producer_and_consumer_configs(brokers, certs, tmp_path):
    """--producer.config / --consumer.config (kafka-console-*.sh's) carry the client settings, next to producer
    and consumer settings of their own."""
    server = f"localhost:{brokers['SASL_SSL'].port}"
    conf = tmp_path / "client.properties"
    conf.write_text("".join(f"{k}={v}\n" for k, v in settings("SASL_SSL", "SCRAM-SHA-256", certs.ca).items()))
    producer = tmp_path / "producer.properties"
    producer.write_text(conf.read_text() + "acks=all\nlinger.ms=5\n")
    ok("produce", "--bootstrap-server", server, "--topic", "console-secured", "--producer.config", producer,
       input="one\ntwo\nthree\n")
    out = ok("consume", "--bootstrap-server", server, "--topic", "console-secured", "--from-beginning",
             "--max-messages", "3", "--timeout-ms", "20000", "--consumer.config", conf)
    assert out.split() == ["one", "two", "three"]

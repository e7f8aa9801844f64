"""Listeners at the wire: TLS and SASL refusals (wrong protocol, bad certificates, requests before
authentication, oversized or cut-short exchanges), client certificates, re-authentication, several listeners
on one broker, SCRAM credentials managed over the wire."""

from __future__ import annotations

import socket
import ssl
import time

import pytest

import seglog
from seglog.client import BrokerConnection
from seglog.protocol import ApiKey
from seglog.security.client import ClientSecurity
from seglog.security.scram import ScramClient
from tests.helpers.kafka_wire import RawConnection

USERS = {"alice": "alice-secret"}


def client_context(ca, cert=None):
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        ctx.load_cert_chain(str(cert.cert), str(cert.key))
    return ctx


def authenticate(c: RawConnection, mechanism="PLAIN", user="alice", password="alice-secret", version=2) -> dict:
    assert c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})["error_code"] == 0
    if mechanism == "PLAIN":
        return c.request(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": f"\0{user}\0{password}".encode()})
    client = ScramClient(mechanism, user, password)
    first = c.request(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": client.first()})
    assert first["error_code"] == 0, first
    final = c.request(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": client.final(first["auth_bytes"])})
    if final["error_code"] == 0:
        client.verify(final["auth_bytes"])
    return final


def metadata_ok(c: RawConnection) -> dict:
    return c.request(ApiKey.METADATA, 9, {"topics": [], "allow_auto_topic_creation": False,
                                         "include_cluster_authorized_operations": False,
                                         "include_topic_authorized_operations": False})


@pytest.fixture
def tls_broker(tmp_path, certs):
    with seglog.serve(tmp_path, ssl={"ssl.keystore.location": str(certs.server.keystore)}) as b:
        yield b


@pytest.fixture
def sasl_broker(tmp_path):
    with seglog.serve(tmp_path, sasl_users=USERS, connections_max_reauth_ms=1500) as b:
        yield b


def test_plaintext_client_on_a_tls_port_gets_no_kafka_answer(tls_broker, certs):
    with RawConnection(("127.0.0.1", tls_broker.port)) as c:
        c.send(ApiKey.API_VERSIONS, 0, {})
        data = b""
        try:
            while len(data) < 4096:
                chunk = c.sock.recv(4096)
                if not chunk:
                    break
                data += chunk
        except ConnectionResetError:
            pass
        assert data[:1] != b"\x00"          # nothing but a TLS alert (0x15) or nothing at all: never a response
    with RawConnection(("127.0.0.1", tls_broker.port), ssl_context=client_context(certs.ca)) as c:
        assert c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})[
            "error_code"] == 0                      # the broker kept serving


def test_large_fetch_over_tls_sends_the_mapped_view_not_the_file(tls_broker, certs):
    """sendfile cannot encrypt: a fetch of record batches of 64 KiB and more over TLS is the view of the mapped
    segment written to the TLS transport (in slices), never loop.sendfile (whose TLS fallback reads the file
    into buffers on the executor), whatever thread read the partition; the bytes are the log's."""
    from seglog.producer import Producer
    from tests.helpers.kafka_wire import fetch_body
    tls_broker.node.create_topic("big", 1)
    p = Producer(tls_broker.node)
    for i in range(400):
        p.send("big", bytes([i % 251]) * 2000, partition=0)
    p.close()
    stored = bytes(tls_broker.node.partition("big", 0).log.read(0, 8 << 20))
    assert len(stored) > 600_000
    sent_from_files = []
    original = tls_broker.broker._sendfile
    tls_broker.broker._sendfile = lambda writer, chunk: sent_from_files.append(chunk) or original(writer, chunk)
    with RawConnection(("127.0.0.1", tls_broker.port), ssl_context=client_context(certs.ca)) as c:
        r = c.request(ApiKey.FETCH, 11, fetch_body("big", 0, 0))
    assert r["responses"][0]["partitions"][0]["records"] == stored
    assert sent_from_files == []


def test_tls_client_on_a_plaintext_port_fails_the_handshake(tmp_path, certs):
    with seglog.serve(tmp_path) as b:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            RawConnection(("127.0.0.1", b.port), ssl_context=client_context(certs.ca))
        with RawConnection(("127.0.0.1", b.port)) as c:
            assert metadata_ok(c)["brokers"][0]["port"] == b.port


@pytest.mark.parametrize("which, why", [("expired", "certificate has expired"),
                                        ("self_signed", "self-signed certificate")])
def test_clients_refuse_expired_and_self_signed_broker_certificates(tmp_path, certs, which, why):
    with seglog.serve(tmp_path, ssl={"ssl.keystore.location": str(getattr(certs, which).keystore)}) as b:
        with pytest.raises(ssl.SSLCertVerificationError, match=why):
            RawConnection(("127.0.0.1", b.port), ssl_context=client_context(certs.ca))
        from kafka import KafkaProducer
        from kafka.errors import KafkaTimeoutError
        with pytest.raises(KafkaTimeoutError):
            KafkaProducer(bootstrap_servers=f"localhost:{b.port}", security_protocol="SSL",
                          ssl_cafile=str(certs.ca), max_block_ms=3000, bootstrap_timeout_ms=3000)


def test_client_certificates_required(tmp_path, certs):
    settings = {"ssl.keystore.location": str(certs.server.keystore), "ssl.truststore.location": str(certs.ca),
                "ssl.client.auth": "required"}
    with seglog.serve(tmp_path, ssl=settings) as b:
        with RawConnection(("127.0.0.1", b.port), ssl_context=client_context(certs.ca, certs.client)) as c:
            assert metadata_ok(c)["brokers"]
            conn = next(iter(b.broker._connections))
        for rogue in (None, certs.self_signed, certs.expired):
            with pytest.raises((ssl.SSLError, ConnectionError)):
                with RawConnection(("127.0.0.1", b.port), ssl_context=client_context(certs.ca, rogue)) as c:
                    metadata_ok(c)          # TLS 1.3: the refusal arrives with the first read
        assert conn is not None


def test_principal_of_a_client_certificate(tmp_path, certs):
    settings = {"ssl.keystore.location": str(certs.server.keystore), "ssl.truststore.location": str(certs.ca),
                "ssl.client.auth": "requested",
                "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=(.*?),.*$/$1/L,DEFAULT"}
    principals = []
    with seglog.serve(tmp_path, ssl=settings) as b:
        original = b.broker._new_connection

        def spy(*args):
            conn = original(*args)
            principals.append(conn.principal)
            return conn
        b.broker._new_connection = spy
        for cert in (certs.client, None):
            with RawConnection(("127.0.0.1", b.port), ssl_context=client_context(certs.ca, cert)) as c:
                metadata_ok(c)
    assert principals == ["User:alice", "User:ANONYMOUS"]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_exchange_and_session_lifetime(sasl_broker, mechanism):
    with RawConnection(("127.0.0.1", sasl_broker.port)) as c:
        done = authenticate(c, mechanism)
        assert (done["error_code"], done["session_lifetime_ms"]) == (0, 1500)
        assert metadata_ok(c)["brokers"]
        # KIP-368: re-authenticate on the same connection before the session ends, then keep going past it
        time.sleep(1.0)
        assert authenticate(c, mechanism)["error_code"] == 0
        time.sleep(1.0)
        assert metadata_ok(c)["brokers"]
        time.sleep(1.0)                        # now past the re-authenticated session's end
        c.send(ApiKey.METADATA, 9, {"topics": [], "allow_auto_topic_creation": False,
                                    "include_cluster_authorized_operations": False,
                                    "include_topic_authorized_operations": False})
        assert c.closed_by_peer()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_own_client_reauthenticates_on_the_same_connection(sasl_broker, mechanism):
    """seglog's BrokerConnection re-authenticates before the 1.5 s session the broker granted runs out, so
    requests keep going on the one connection (without it the broker closes the connection at the first
    request past the session's end)."""
    conn = BrokerConnection("127.0.0.1", sasl_broker.port, security=ClientSecurity.from_properties(
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism, "sasl.username": "alice",
         "sasl.password": USERS["alice"]}))
    body = {"topics": [], "allow_auto_topic_creation": False}
    try:
        conn.request(ApiKey.METADATA, body)
        first = conn._sock
        for _ in range(5):                     # 2.5 s: past the first session's end, into the second's
            time.sleep(0.5)
            assert conn.request(ApiKey.METADATA, body)["brokers"]
        assert conn._sock is first
    finally:
        conn.close()


def test_reauthentication_must_keep_the_user(tmp_path):
    with seglog.serve(tmp_path, sasl_users={"alice": "a", "bob": "b"}, connections_max_reauth_ms=60000) as b:
        with RawConnection(("127.0.0.1", b.port)) as c:
            assert authenticate(c, "PLAIN", "alice", "a")["error_code"] == 0
            c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
            r = c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0bob\0b"})
            assert r["error_code"] == 58 and "same user" in r["error_message"]
            assert c.closed_by_peer()


def test_sasl_refusals(sasl_broker):
    address = ("127.0.0.1", sasl_broker.port)
    with RawConnection(address) as c:                 # a request before authenticating closes the connection
        c.send(ApiKey.METADATA, 9, {"topics": [], "allow_auto_topic_creation": False,
                                    "include_cluster_authorized_operations": False,
                                    "include_topic_authorized_operations": False})
        assert c.closed_by_peer()
    with RawConnection(address) as c:                 # an unknown mechanism lists the enabled ones, then closes
        r = c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
        assert (r["error_code"], r["mechanisms"]) == (33, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
        assert c.closed_by_peer()
    with RawConnection(address) as c:                 # a second handshake during the exchange: refused, closed
        c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})
        assert c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": ScramClient("SCRAM-SHA-256", "alice", "x")
                                                       .first()})["error_code"] == 0
        assert c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 34
        assert c.closed_by_peer()
    with RawConnection(address) as c:                 # authenticate before a handshake
        r = c.request(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0alice\0alice-secret"})
        assert r["error_code"] == 34
        assert c.closed_by_peer()
    with RawConnection(address) as c:                 # an oversized frame before authentication: refused unread
        c.send_bytes((600_000).to_bytes(4, "big") + b"x" * 1000)
        assert c.closed_by_peer()
    with RawConnection(address) as c:                 # an exchange cut short
        c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})
        _, data = c.frame(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": ScramClient("SCRAM-SHA-256", "alice", "x")
                                                        .first()})
        c.send_bytes(data[:len(data) // 2])
    with RawConnection(address) as c:                 # and the broker still serves
        assert authenticate(c, "SCRAM-SHA-256")["error_code"] == 0


def test_sasl_handshake_v0_raw_tokens(sasl_broker):
    """SaslHandshake v0: the tokens follow as bare size-prefixed bytes (the pre-KIP-152 exchange)."""
    with RawConnection(("127.0.0.1", sasl_broker.port)) as c:
        assert c.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})["error_code"] == 0
        token = b"\0alice\0alice-secret"
        c.send_bytes(len(token).to_bytes(4, "big") + token)
        assert c.recv_frame() == b""
        assert metadata_ok(c)["brokers"]
    with RawConnection(("127.0.0.1", sasl_broker.port)) as c:
        c.request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
        c.send_bytes((17).to_bytes(4, "big") + b"\0alice\0wrong-pass")
        assert c.closed_by_peer()


def test_several_listeners_from_server_properties(tmp_path, certs):
    """PLAINTEXT, SASL_SSL and a custom-named SSL listener on one broker, PLAIN users from the listener's JAAS
    setting; each listener's Metadata advertises its own address."""
    ports = []
    for _ in range(3):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        ports.append(s.getsockname()[1])
        s.close()
    props = {
        "listeners": f"PLAINTEXT://127.0.0.1:{ports[0]},SASL_SSL://127.0.0.1:{ports[1]},TLSONLY://127.0.0.1:{ports[2]}",
        "advertised.listeners": f"SASL_SSL://localhost:{ports[1]},TLSONLY://localhost:{ports[2]}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,TLSONLY:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server.keystore),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_carol="carol-secret";',
    }
    with seglog.serve(tmp_path / "d", props) as b:           # serve() binds the first listener to a free port
        ports[0] = b.port
        assert [li.name for li in b.broker.listeners] == ["PLAINTEXT", "SASL_SSL", "TLSONLY"]
        with RawConnection(("127.0.0.1", ports[0])) as c:
            assert metadata_ok(c)["brokers"][0]["port"] == ports[0]
        with RawConnection(("127.0.0.1", ports[1]), ssl_context=client_context(certs.ca)) as c:
            assert authenticate(c, "PLAIN", "carol", "carol-secret")["error_code"] == 0
            broker = metadata_ok(c)["brokers"][0]
            assert (broker["host"], broker["port"]) == ("localhost", ports[1])
        with RawConnection(("127.0.0.1", ports[2]), ssl_context=client_context(certs.ca)) as c:
            assert metadata_ok(c)["brokers"][0]["port"] == ports[2]
        from kafka import KafkaConsumer, KafkaProducer
        p = KafkaProducer(bootstrap_servers=f"localhost:{ports[1]}", security_protocol="SASL_SSL",
                          ssl_cafile=str(certs.ca), sasl_mechanism="PLAIN", sasl_plain_username="carol",
                          sasl_plain_password="carol-secret")
        p.send("multi", b"over sasl_ssl").get(20)
        p.close()
        c = KafkaConsumer("multi", bootstrap_servers=f"127.0.0.1:{ports[0]}", auto_offset_reset="earliest",
                          consumer_timeout_ms=10000)
        assert [r.value for r in c] == [b"over sasl_ssl"]
        c.close()


def test_scram_credentials_over_the_wire(tmp_path):
    """confluent-kafka's admin client adds, lists and deletes SCRAM credentials; a new user logs in at once."""
    import confluent_kafka.admin as admin
    with seglog.serve(tmp_path, sasl_users=USERS) as b:
        conf = {"bootstrap.servers": b.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": "alice-secret"}
        a = admin.AdminClient(conf)
        info = admin.ScramCredentialInfo(admin.ScramMechanism.SCRAM_SHA_512, 8192)
        futures = a.alter_user_scram_credentials([admin.UserScramCredentialUpsertion("dave", info, b"dave-pw")])
        futures["dave"].result(20)
        described = a.describe_user_scram_credentials(["dave", "nobody"])
        assert [(i.mechanism, i.iterations) for i in described["dave"].result(20).scram_credential_infos] == [
            (admin.ScramMechanism.SCRAM_SHA_512, 8192)]
        with pytest.raises(Exception, match="RESOURCE_NOT_FOUND|does not exist"):
            described["nobody"].result(20)
        with RawConnection(("127.0.0.1", b.port)) as c:
            assert authenticate(c, "SCRAM-SHA-512", "dave", "dave-pw")["error_code"] == 0
        a.alter_user_scram_credentials([admin.UserScramCredentialDeletion(
            "dave", admin.ScramMechanism.SCRAM_SHA_512)])["dave"].result(20)
        with RawConnection(("127.0.0.1", b.port)) as c:
            assert authenticate(c, "SCRAM-SHA-512", "dave", "dave-pw")["error_code"] == 58

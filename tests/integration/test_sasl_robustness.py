"""The SASL exchange under bad input, against a live SASL broker: SaslHandshake / SaslAuthenticate frames with
wrong versions, garbage or oversized tokens (at and over sasl.server.max.receive.size), requests other than
ApiVersions/SaslHandshake before authentication, handshakes cut short mid-frame, a second handshake,
authenticate without a handshake, v0 (unframed) tokens; each as written and mutated (tests/fuzz covers the
SASL servers themselves, coverage-guided).

After every bad connection the broker still serves a SCRAM login on a fresh connection, logged at most one
line (INFO and above) for it, nothing at ERROR (an internal error), and the password is in no log record of
any level."""

from __future__ import annotations

import base64
import logging
import socket
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seglog
from seglog.protocol import ApiKey, RequestHeader, encode_request
from seglog.security.sasl import FailedLogins
from tests.integration.test_broker_robustness import mutate_frame
from tests.integration.test_security_listeners import authenticate, metadata_ok
from tests.helpers.kafka_wire import RawConnection

SECRET = "Qx7-sasl-fuzz-password"
MAX_RECEIVE = 8192                                   # sasl.server.max.receive.size of the broker under test
METADATA_V9 = {"topics": [], "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
               "include_topic_authorized_operations": False}


def frame(api_key: int, version: int, body: dict, *, as_version: int | None = None) -> bytes:
    """A request frame (size prefix included); `as_version` rewrites the header's version after encoding."""
    data = bytearray(b"".join(encode_request(RequestHeader(int(api_key), version, 7, "sasl-fuzz"), body)))
    if as_version is not None:
        data[6:8] = as_version.to_bytes(2, "big")
    return bytes(data)


def handshake(mechanism: str, version: int = 1) -> bytes:
    return frame(ApiKey.SASL_HANDSHAKE, version, {"mechanism": mechanism})


def auth(token: bytes, version: int = 2) -> bytes:
    return frame(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token})


def raw(token: bytes) -> bytes:
    return len(token).to_bytes(4, "big") + token


def token_frame(total: int) -> bytes:
    """A SaslAuthenticate v1 frame of exactly `total` bytes after its size prefix."""
    return auth(b"x" * (total - (len(auth(b"", 1)) - 4)), 1)


SCRAM_FIRST = b"n,,n=alice,r=fuzz-client-nonce"
SCRAM_FINAL = b"c=biws,r=fuzz-client-nonce-not-the-servers,p=" + base64.b64encode(bytes(64))

#: name -> the frames a bad client sends, in order (all at once: the broker reads them as they come)
CONVERSATIONS = {
    "plain wrong password": [handshake("PLAIN"), auth(b"\0alice\0not-it")],
    "plain password in the user field": [handshake("PLAIN"), auth(f"alice\0{SECRET}\0x".encode())],
    "plain then metadata": [handshake("PLAIN"), auth(f"\0alice\0{SECRET}".encode()), frame(ApiKey.METADATA, 9,
                                                                                            METADATA_V9)],
    "scram wrong proof": [handshake("SCRAM-SHA-512"), auth(SCRAM_FIRST), auth(SCRAM_FINAL)],
    "scram garbage tokens": [handshake("SCRAM-SHA-256"), auth(b"\xff\xfe,,=\0" * 9), auth(b"n,,n=,r=")],
    "authenticate without handshake": [auth(f"\0alice\0{SECRET}".encode(), 1)],
    "second handshake mid-exchange": [handshake("SCRAM-SHA-512"), auth(SCRAM_FIRST), handshake("PLAIN"),
                                      auth(f"\0alice\0{SECRET}".encode())],
    "unknown mechanism then authenticate": [frame(ApiKey.API_VERSIONS, 3, {"client_software_name": "fuzz",
                                                                           "client_software_version": "1"}),
                                            handshake("GSSAPI"), auth(b"\0alice\0x")],
    "a mechanism name of several lines": [handshake("PLAIN\nFailed authentication with 10.0.0.1")],
    "metadata before authentication": [frame(ApiKey.METADATA, 9, METADATA_V9)],
    "produce before handshake": [frame(ApiKey.PRODUCE, 8, {"transactional_id": None, "acks": -1,
                                                           "timeout_ms": 1000, "topic_data": []})],
    "handshake of a version that does not exist": [frame(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"},
                                                         as_version=9)],
    "authenticate of a version that does not exist": [handshake("PLAIN"), frame(
        ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0x"}, as_version=7)],
    "v0 raw tokens": [handshake("PLAIN", 0), raw(b"\0alice\0not-it")],
    "v0 raw scram then a kafka frame": [handshake("SCRAM-SHA-256", 0), raw(SCRAM_FIRST),
                                        frame(ApiKey.METADATA, 9, METADATA_V9)],
    "token at the receive limit": [handshake("PLAIN"), token_frame(MAX_RECEIVE)],
    "token over the receive limit": [handshake("PLAIN"), token_frame(MAX_RECEIVE + 1)],
    "raw token over the receive limit": [handshake("PLAIN", 0), raw(b"y" * (MAX_RECEIVE + 1))],
    "handshake cut short": [handshake("SCRAM-SHA-512")[:9]],
    "api versions twice": [frame(ApiKey.API_VERSIONS, 3, {"client_software_name": "fuzz",
                                                          "client_software_version": "1"})] * 2 + [
        handshake("PLAIN"), auth(f"\0alice\0{SECRET}".encode())],
    "api versions mid-exchange": [handshake("SCRAM-SHA-256"), auth(SCRAM_FIRST), frame(ApiKey.API_VERSIONS, 0, {})],
    "scram first of an escaped name and a nonce with a space": [handshake("SCRAM-SHA-256"),
                                                                auth(b"n,,n=ali=2Cce,r=a nonce")],
}


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture(scope="module")
def sasl_fuzz_broker(tmp_path_factory):
    """A SASL broker (alice: SECRET) with every failed login logged (no rate limit), its log records kept."""
    logger, records = logging.getLogger("seglog"), Records()
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(records)
    try:
        with seglog.serve(tmp_path_factory.mktemp("sasl-fuzz"), sasl_users={"alice": SECRET},
                          sasl_server_max_receive_size=MAX_RECEIVE) as b:
            b.broker.failed_logins = FailedLogins(burst=1 << 30)
            yield b, records
    finally:
        logger.removeHandler(records)
        logger.setLevel(level)


def send_until_closed(address, data: bytes) -> int:
    """Send `data` on a fresh connection, end it (shutdown), read until the broker closes; its local port."""
    with RawConnection(address, timeout=5) as c:
        port = c.sock.getsockname()[1]
        try:
            c.send_bytes(data)
            c.sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):    # the broker closed first (an oversized frame)
            return port
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                if not c.sock.recv(65536):
                    return port
            except (ConnectionResetError, socket.timeout):
                return port
        raise AssertionError("the broker kept a connection open after its client's EOF")


def check_bad_connection(broker_and_records, data: bytes) -> None:
    broker, records = broker_and_records
    address = ("127.0.0.1", broker.port)
    start = len(records.records)
    port = send_until_closed(address, data)
    with RawConnection(address, timeout=10) as c:
        assert authenticate(c, "SCRAM-SHA-512", "alice", SECRET)["error_code"] == 0
        assert metadata_ok(c)["brokers"]
    new = records.records[start:]
    messages = [r.getMessage() for r in new]
    assert not [m for m in messages if SECRET in m], messages
    assert not [r for r in new if r.levelno >= logging.ERROR or r.exc_info], messages
    lines = [m for r, m in zip(new, messages) if r.levelno >= logging.INFO and f":{port}" in m]
    assert len(lines) <= 1 and not [m for m in lines if "\n" in m], lines


API_VERSIONS_V3 = {"client_software_name": "sasl-test", "client_software_version": "1"}


def test_api_versions_only_before_the_handshake_as_kafka(sasl_fuzz_broker):
    """Kafka's SaslServerAuthenticator: one ApiVersions before SaslHandshake is answered, a second closes the
    connection unanswered; one during the exchange is answered ILLEGAL_SASL_STATE (no versions) and the
    connection closed; once authenticated ApiVersions is an ordinary request."""
    address = ("127.0.0.1", sasl_fuzz_broker[0].port)
    with RawConnection(address, timeout=10) as c:
        assert c.request(ApiKey.API_VERSIONS, 3, API_VERSIONS_V3)["error_code"] == 0
        c.send(ApiKey.API_VERSIONS, 3, API_VERSIONS_V3)
        assert c.closed_by_peer()
    with RawConnection(address, timeout=10) as c:
        assert c.request(ApiKey.API_VERSIONS, 3, API_VERSIONS_V3)["error_code"] == 0
        assert c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"})["error_code"] == 0
        assert c.request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": SCRAM_FIRST})["error_code"] == 0
        refused = c.request(ApiKey.API_VERSIONS, 3, API_VERSIONS_V3)
        assert (refused["error_code"], refused["api_keys"]) == (34, [])
        assert c.closed_by_peer()
    with RawConnection(address, timeout=10) as c:
        assert authenticate(c, "SCRAM-SHA-512", "alice", SECRET)["error_code"] == 0
        for _ in range(2):
            assert c.request(ApiKey.API_VERSIONS, 3, API_VERSIONS_V3)["api_keys"]


@pytest.mark.parametrize("name", CONVERSATIONS)
def test_bad_sasl_conversation(sasl_fuzz_broker, name):
    check_bad_connection(sasl_fuzz_broker, b"".join(CONVERSATIONS[name]))


@st.composite
def mutated_conversations(draw):
    frames = list(draw(st.sampled_from(list(CONVERSATIONS.values()))))
    if draw(st.booleans()):
        i = draw(st.integers(0, len(frames) - 1))
        frames[i] = mutate_frame(draw, frames[i])
    data = b"".join(frames)
    if draw(st.booleans()):                                 # cut short anywhere, mid-frame most likely
        data = data[:draw(st.integers(0, len(data)))]
    return data


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(data=mutated_conversations())
def test_fuzz_mutated_sasl_conversations(sasl_fuzz_broker, data):
    check_bad_connection(sasl_fuzz_broker, data)


def test_sasl_fuzz_broker_logged_failures(sasl_fuzz_broker):
    """The runs above were refused as they should be: failed logins and closed connections were logged."""
    broker, records = sasl_fuzz_broker
    messages = [r.getMessage() for r in records.records]
    assert any("Failed authentication with" in m and "user 'alice'" in m for m in messages), messages[-20:]
    assert any("during SASL handshake" in m for m in messages), messages[-20:]
    assert any(f"frame size {MAX_RECEIVE + 1} is outside 0..{MAX_RECEIVE} (sasl.server.max.receive.size)" in m
               for m in messages), messages[-20:]
    assert broker.metrics()["connection_errors"] >= 5

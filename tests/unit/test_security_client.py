"""Client security settings (seglog.security.client): Kafka's and librdkafka's names parsed once into a
ClientSecurity, every bad name or value refused before a connection is made; a broker's inter-broker security
from its listeners; the CLI's --command-config."""

from __future__ import annotations

import ssl

import pytest

import seglog
from seglog.cli import main
from seglog.cli.connect import split_security
from seglog.errors import InvalidConfigError
from seglog.security.client import PLAINTEXT, ClientSecurity, inter_broker_security

SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3cret";'


def test_plaintext_by_default():
    assert ClientSecurity.of(None) is PLAINTEXT
    assert ClientSecurity.of({}) == PLAINTEXT
    assert ClientSecurity.of({"security.protocol": "plaintext"}) == PLAINTEXT
    assert not PLAINTEXT.tls and not PLAINTEXT.sasl and PLAINTEXT.ssl_context is None
    same = ClientSecurity.from_properties({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                           "sasl.username": "u", "sasl.password": "p"})
    assert ClientSecurity.of(same) is same
    with pytest.raises(InvalidConfigError, match="security must be a mapping"):
        ClientSecurity.of("SASL_SSL")


@pytest.mark.parametrize("props", [
    {"security.protocol": "sasl_plaintext", "sasl.mechanisms": "scram-sha-512", "sasl.username": "alice",
     "sasl.password": "s3cret"},                                                   # librdkafka's names
    {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": SCRAM_JAAS},
])
def test_sasl_credentials_by_either_name(props):
    sec = ClientSecurity.from_properties(props)
    assert (sec.protocol, sec.mechanism, sec.username, sec.password) == ("SASL_PLAINTEXT", "SCRAM-SHA-512", "alice",
                                                                         "s3cret")
    assert sec.sasl and not sec.tls
    assert "s3cret" not in repr(sec)


def test_tls_context(certs):
    sec = ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.ca.location": str(certs.ca)})
    ctx = sec.ssl_context
    assert sec.tls and ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    no_host_check = ClientSecurity.from_properties({"security.protocol": "SASL_SSL",
                                                    "ssl.truststore.location": str(certs.ca),
                                                    "ssl.endpoint.identification.algorithm": "",
                                                    "sasl.mechanism": "PLAIN", "sasl.jaas.config":
                                                    'a.b.PlainLoginModule required username="u" password="p";'})
    assert not no_host_check.ssl_context.check_hostname
    assert no_host_check.ssl_context.verify_mode == ssl.CERT_REQUIRED
    anything = ClientSecurity.from_properties({"security.protocol": "SSL",
                                               "enable.ssl.certificate.verification": "false"})
    assert anything.ssl_context.verify_mode == ssl.CERT_NONE
    # a client certificate, key and certificate apart (librdkafka) or in one PEM file (Java)
    for props in ({"ssl.certificate.location": str(certs.client.cert), "ssl.key.location": str(certs.client.key)},
                  {"ssl.keystore.location": str(certs.client.keystore), "ssl.keystore.type": "PEM"}):
        ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.ca.location": str(certs.ca), **props})


@pytest.mark.parametrize("props, needle", [
    ({"bootstrap.servers": "x:1"}, "Unknown client security setting 'bootstrap.servers'"),
    ({"security.protocol": "TLS"}, "Invalid value 'TLS' for configuration security.protocol"),
    ({"ssl.ca.location": "ca.pem"}, "ssl.ca.location given, but security.protocol is PLAINTEXT"),
    ({"security.protocol": "SSL", "sasl.mechanism": "PLAIN"}, "sasl.mechanism given, but security.protocol is SSL"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.username": "u", "sasl.password": "p"}, "needs sasl.mechanism"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}, "Invalid value 'GSSAPI' for "
     "configuration sasl.mechanism"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u"},
     "needs a user and a password"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p",
      "sasl.jaas.config": SCRAM_JAAS}, "either sasl.username"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": SCRAM_JAAS},
     "PLAIN logs in with PlainLoginModule"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": "password=s3cret"},
     "sasl.jaas.config is not"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.mechanisms": "PLAIN"},
     "sasl.mechanism and sasl.mechanisms name the same setting"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "JKS"}, "seglog reads PEM only"),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "http"}, "expected https or an empty"),
    ({"security.protocol": "SSL", "enable.ssl.certificate.verification": "no"}, "expected true or false"),
    ({"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"}, "cannot load the TLS trust store"),
    ({"security.protocol": "SSL", "ssl.key.location": "k.pem"}, "ssl.key.location and ssl.certificate.location go "
     "together"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": 5},
     "sasl.password: expected a string$"),
])
def test_bad_settings_are_refused(props, needle):
    with pytest.raises(InvalidConfigError, match=needle) as refused:
        ClientSecurity.from_properties(props)
    assert "s3cret" not in str(refused.value)


def test_split_security_keeps_other_client_settings():
    sec, others = split_security({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                  "sasl.username": "u", "sasl.password": "p", "acks": "all", "linger.ms": "5"})
    assert sec.mechanism == "PLAIN" and others == {"acks": "all", "linger.ms": "5"}


def _broker_config(certs, **extra):
    return seglog.BrokerConfig.from_properties({
        "listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL", "zookeeper.connect": "127.0.0.1:2181",
        "ssl.keystore.location": str(certs.server.keystore), "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config":
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="b-pw";',
        **extra})


def test_inter_broker_security_is_the_inter_broker_listeners(certs):
    sec = inter_broker_security(_broker_config(certs, **{"listener.name.internal.ssl.truststore.location":
                                                         str(certs.ca)}))
    assert (sec.protocol, sec.mechanism, sec.username, sec.password) == ("SASL_SSL", "SCRAM-SHA-512", "broker", "b-pw")
    assert sec.ssl_context.check_hostname and sec.ssl_context.verify_mode == ssl.CERT_REQUIRED
    plain = seglog.BrokerConfig.from_properties({"zookeeper.connect": "127.0.0.1:2181"})
    assert inter_broker_security(plain) == PLAINTEXT


def test_inter_broker_sasl_needs_the_brokers_credentials(certs):
    with pytest.raises(InvalidConfigError, match="listener.name.internal.plain.sasl.jaas.config needs username"):
        _broker_config(certs, **{"sasl.mechanism.inter.broker.protocol": "PLAIN"})


def test_command_config(tmp_path, capsys):
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n")
    assert main(["topics", "--data-dir", str(tmp_path / "d"), "--list", "--command-config", str(props)]) == 2
    assert "--command-config goes with --bootstrap-server" in capsys.readouterr().err
    assert main(["topics", "--bootstrap-server", "127.0.0.1:1", "--list", "--command-config", str(props)]) == 1
    assert "SASL (PLAIN) needs a user and a password" in capsys.readouterr().err
    assert main(["acls", "--bootstrap-server", "127.0.0.1:1", "--list",
                 "--command-config", str(tmp_path / "missing.properties")]) == 1
    assert "cannot read properties file" in capsys.readouterr().err
    props.write_text("security.protocol=PLAINTEXT\nrequest.timeout.ms=1000\n")      # an admin setting seglog lacks
    assert main(["topics", "--bootstrap-server", "127.0.0.1:1", "--list", "--command-config", str(props)]) == 1
    warning, error = capsys.readouterr().err.splitlines()
    assert warning == "WARN The configuration 'request.timeout.ms' was supplied but isn't a known config."
    assert error.startswith("seglog topics: error: no broker reachable (cannot connect to 127.0.0.1:1")

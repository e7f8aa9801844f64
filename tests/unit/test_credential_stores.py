"""SCRAM credential stores (the data-dir file, the metadata store's /config/users maps shared with quotas) and
the parsing of `seglog configs`' SCRAM configs."""

from __future__ import annotations

import json
import time

import pytest

from seglog.cli import main
from seglog.errors import SaslAuthenticationError
from seglog.cluster.memory import MemoryCluster, MemoryMetadataStore
from seglog.quotas.entities import PRODUCE, QuotaEntity
from seglog.quotas.manager import ClientQuotas
from seglog.quotas.store import MetadataQuotaStore
from seglog.security.credentials import (FileCredentialStore, MetadataCredentialStore, scram_configs,
                                         user_entity_path)
from seglog.security.scram import ScramClient, ScramCredential, ScramServer, new_credential

SHA256, SHA512 = "SCRAM-SHA-256", "SCRAM-SHA-512"


def _wait(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the watch never delivered the change"
        time.sleep(0.01)


def _logs_in(store, user, password, mechanism=SHA512) -> bool:
    server = ScramServer(mechanism, lambda u: store.get(u, mechanism))
    client = ScramClient(mechanism, user, password)
    try:
        client.verify(server.step(client.final(server.step(client.first()))))
        return True
    except SaslAuthenticationError:
        return False


@pytest.fixture
def cluster():
    c = MemoryCluster()
    stores = [MemoryMetadataStore(c), MemoryMetadataStore(c)]
    yield c, stores
    for s in stores:
        s.close()


def test_file_store_round_trip_keeps_kafkas_json(tmp_path):
    store = FileCredentialStore(tmp_path)
    store.alter([("alice", SHA512, new_credential(SHA512, "pw")), ("bob", SHA256, new_credential(SHA256, "b", 8192))],
                [])
    raw = json.loads((tmp_path / "scram-credentials.json").read_text())
    assert set(raw) == {"alice", "bob"} and raw["alice"]["version"] == 1
    assert ScramCredential.from_kafka(raw["bob"]["config"][SHA256]).iterations == 8192
    again = FileCredentialStore(tmp_path)
    assert again.describe() == {"alice": {SHA512: 4096}, "bob": {SHA256: 8192}}
    assert _logs_in(again, "alice", "pw") and not _logs_in(again, "alice", "wrong")
    again.alter([], [("alice", SHA512)])
    assert FileCredentialStore(tmp_path).describe() == {"bob": {SHA256: 8192}}


def test_metadata_store_writes_kafkas_config_map_and_every_broker_sees_it(cluster):
    memory, (a, b) = cluster
    on_a, on_b = MetadataCredentialStore(a), MetadataCredentialStore(b)
    try:
        on_a.alter([("alice", SHA512, new_credential(SHA512, "secret")),
                    ("alice", SHA256, new_credential(SHA256, "pw", 8192))], [])
        config = memory.entity_configs["users/alice"]
        assert set(config) == {SHA256, SHA512}
        fields = dict(item.split("=", 1) for item in config[SHA512].split(","))
        assert list(fields) == ["salt", "stored_key", "server_key", "iterations"] and fields["iterations"] == "4096"
        assert on_a.describe() == {"alice": {SHA256: 8192, SHA512: 4096}}          # at once where altered
        _wait(lambda: on_b.describe() == {"alice": {SHA256: 8192, SHA512: 4096}})  # through the watch elsewhere
        assert _logs_in(on_b, "alice", "secret") and _logs_in(on_b, "alice", "pw", SHA256)

        on_b.alter([], [("alice", SHA512)])
        _wait(lambda: on_a.get("alice", SHA512) is None)
        assert not _logs_in(on_a, "alice", "secret") and _logs_in(on_a, "alice", "pw", SHA256)
    finally:
        on_a.close()
        on_b.close()


def test_credentials_and_quotas_share_a_users_map_without_clobbering(cluster):
    memory, (a, b) = cluster
    credentials = MetadataCredentialStore(a)
    quotas = ClientQuotas(MetadataQuotaStore(b))
    try:
        quotas.alter(QuotaEntity("alice", None), [(PRODUCE, 1024.0, False)], False)
        credentials.alter([("alice", SHA512, new_credential(SHA512, "pw"))], [])
        assert memory.entity_configs["users/alice"][PRODUCE] == "1024"
        quotas.alter(QuotaEntity("alice", None), [(PRODUCE, 2048.0, False)], False)
        assert credentials.get("alice", SHA512) is not None
        assert set(memory.entity_configs["users/alice"]) == {PRODUCE, SHA512}
        credentials.alter([], [("alice", SHA512)])
        assert memory.entity_configs["users/alice"] == {PRODUCE: "2048"}
        _wait(lambda: quotas.quota(PRODUCE, "alice", "c")[1] == 2048.0)
    finally:
        credentials.close()
        quotas.close()


def test_user_names_are_sanitized_as_kafkas_and_only_users_maps_count():
    assert user_entity_path("alice") == "users/alice"
    assert user_entity_path("CN=a b,O=x*") == "users/CN%3Da%20b%2CO%3Dx%2A"
    assert user_entity_path("<default>") == "users/%3Cdefault%3E"        # never the default entity
    assert scram_configs({"users/CN%3Da%20b": {SHA512: "salt=x", PRODUCE: "1"},
                          "users/bob": {PRODUCE: "1"},
                          "users/carol/clients/c1": {SHA512: "salt=y"},
                          "clients/c1": {SHA256: "salt=z"}}) == {"CN=a b": {SHA512: "salt=x"}}


def test_a_store_without_a_watch_reads_on_demand(cluster):
    _, (a, b) = cluster
    reader = MetadataCredentialStore(a, watch=False)
    MetadataCredentialStore(b, watch=False).alter([("ops", SHA256, new_credential(SHA256, "pw"))], [])
    assert reader.describe() == {"ops": {SHA256: 4096}}


@pytest.mark.parametrize("args, message", [
    (["--add-config", "SCRAM-SHA-512=[iterations=4096]", "--entity-type", "users", "--entity-name", "a"],
     "SCRAM-SHA-512 needs a password"),
    (["--add-config", "SCRAM-SHA-512=[password=x,iterations=100]", "--entity-type", "users", "--entity-name", "a"],
     "Iterations 100 must be in 4096..16384"),
    (["--add-config", "SCRAM-SHA-512=[password=x,salt=y]", "--entity-type", "users", "--entity-name", "a"],
     "expected [iterations=N,password=P]"),
    (["--add-config", "SCRAM-SHA-512=[password=x]", "--entity-type", "users", "--entity-default"],
     "SCRAM credentials belong to a named user alone"),
    (["--add-config", "SCRAM-SHA-256=[password=x]", "--entity-type", "clients", "--entity-name", "c"],
     "SCRAM credentials belong to a named user alone"),
    (["--add-config", "SCRAM-SHA-256=[password=x]", "--delete-config", "SCRAM-SHA-256", "--entity-type", "users",
      "--entity-name", "a"], "cannot be both added and deleted"),
])
def test_configs_refuses_bad_scram_configs_before_connecting(args, message, capfd):
    assert main(["configs", "--bootstrap-server", "127.0.0.1:1", "--alter", *args]) != 0
    assert message in capfd.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--alter", "--add-config", "producer_byte_rate=10,SCRAM-SHA-512=[password=x]", "--entity-type", "users",
      "--entity-name", "a"], "--zookeeper writes SCRAM credentials only, not producer_byte_rate"),
    (["--describe", "--entity-type", "clients"], "--zookeeper reads and writes the SCRAM credentials of users only"),
])
def test_configs_zookeeper_is_for_scram_credentials(args, message, capfd):
    assert main(["configs", "--zookeeper", "127.0.0.1:1", *args]) != 0
    assert message in capfd.readouterr().err

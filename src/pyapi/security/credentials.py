"""Where a broker keeps SCRAM credentials, as Kafka stores them.

A credential is Kafka's text ``salt=...,stored_key=...,server_key=...,iterations=4096`` under its mechanism's
name in a user's config map, the JSON of ZooKeeper's ``/config/users/<user>``: ``{"version":1,"config":
{"SCRAM-SHA-512":"salt=...","producer_byte_rate":"1024"}}`` (the user's quotas share the map; each side keeps
the other's keys). Two stores, chosen where the broker chooses its quota store:

- :class:`MetadataCredentialStore` (a cluster): the nodes themselves, user names URL-encoded as Kafka's
  Sanitizer does. A write is a read-modify-write of the node conditional on its version, announced under
  ``/config/changes`` (the metadata store's ``update_entity_configs``); every broker keeps the credentials in a
  cache that the store's watch replaces whole, so a credential altered through any broker (or written straight
  to ZooKeeper by ``seglog configs --zookeeper``) is seen by every broker's authenticator.
- :class:`FileCredentialStore` (a lone broker): ``scram-credentials.json`` in the data dir mapping user names to
  those objects, replaced atomically (write, fsync, rename) and readable by its owner only.

Writes come from AlterUserScramCredentials (``seglog configs --bootstrap-server``) and, for a cluster, from
``seglog configs --zookeeper``; reads from the SASL exchanges of any connection, so every read and the swap of
the cached map happen under the store's lock.
"""

from __future__ import annotations

import json
import os
import threading
from abc import ABC, abstractmethod
from typing import Mapping
from ..checkpoints import replace_file
from ..sanitizer import desanitize, sanitize
from .scram import HASHES, ScramCredential

__all__ = ["CredentialStore", "FileCredentialStore", "MetadataCredentialStore", "user_entity_path",
           "scram_configs"]

FILE_NAME = "scram-credentials.json"
Upserts = list[tuple[str, str, ScramCredential]]
Deletions = list[tuple[str, str]]


def user_entity_path(user: str) -> str:
    """The entity path of a user's configs, its name sanitized as Kafka's (every name, even ``<default>``)."""
    return "users/" + sanitize(user)


def scram_configs(entity_configs: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, str]]:
    """{user: {mechanism: credential text}} from every entity's configs (the metadata store's
    ``get_entity_configs``): the SCRAM keys of the ``users/<user>`` entities only."""
    out = {}
    for path, config in entity_configs.items():
        kind, _, name = path.partition("/")
        if kind != "users" or "/" in name:
            continue
        mechs = {k: v for k, v in config.items() if k in HASHES}
        if mechs:
            out[desanitize(name)] = mechs
    return out


def _apply(current: dict[str, str], user: str, upserts: Upserts, deletions: Deletions) -> dict[str, str]:
    """A user's config map after the deletions then the upserts of that user (other keys untouched)."""
    config = dict(current)
    for u, mechanism in deletions:
        if u == user:
            config.pop(mechanism, None)
    for u, mechanism, credential in upserts:
        if u == user:
            config[mechanism] = credential.to_kafka()
    return config


class CredentialStore(ABC):
    """SCRAM credentials by user and mechanism (see the module docstring)."""

    @abstractmethod
    def _snapshot(self) -> dict[str, dict[str, str]]:
        """{user: {mechanism: credential text}} as the store holds it now (never mutated afterwards)."""

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        text = self._snapshot().get(user, {}).get(mechanism)
        return ScramCredential.from_kafka(text) if text else None

    def describe(self) -> dict[str, dict[str, int]]:
        """{user: {mechanism: iterations}}: what DescribeUserScramCredentials may show (no keys, no salts)."""
        return {user: {m: ScramCredential.from_kafka(t).iterations for m, t in mechs.items()}
                for user, mechs in self._snapshot().items() if mechs}

    @abstractmethod
    def alter(self, upserts: Upserts, deletions: Deletions) -> None:
        """Apply the deletions then the upserts ((user, mechanism[, credential])); seen by ``get`` on return."""

    def close(self) -> None:
        """Stop following the store (a watch); nothing to do for a file."""


class FileCredentialStore(CredentialStore):
    """A lone broker's credentials in its data dir (see the module docstring)."""

    def __init__(self, data_dir):
        self.path = os.path.join(os.fspath(data_dir), FILE_NAME)
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, str]] = {}
        if os.path.exists(self.path):
            with open(self.path) as f:
                self._users = {name: dict(entry["config"]) for name, entry in json.load(f).items()}

    def _snapshot(self) -> dict[str, dict[str, str]]:
        with self._lock:
            return self._users

    def alter(self, upserts: Upserts, deletions: Deletions) -> None:
        with self._lock:
            users = dict(self._users)
            for user in {u for u, *_ in (*upserts, *deletions)}:
                users[user] = _apply(users.get(user, {}), user, upserts, deletions)
            users = {u: m for u, m in users.items() if m}
            replace_file(self.path, json.dumps({u: {"version": 1, "config": m} for u, m in sorted(users.items())}
                                               ).encode(), "cannot write SCRAM credentials", mode=0o600)
            self._users = users


class MetadataCredentialStore(CredentialStore):
    """A cluster's credentials in its metadata store, cached and kept current by a watch (see the module
    docstring). ``watch=False`` (``seglog configs --zookeeper``) reads on demand and follows nothing."""

    def __init__(self, metadata_store, *, watch: bool = True):
        self.store = metadata_store
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, str]] = {}
        self._watching = watch
        self._reload(metadata_store.get_entity_configs())
        self._watch = metadata_store.watch_entity_configs(self._reload) if watch else None

    def _reload(self, entity_configs: Mapping[str, Mapping[str, str]]) -> None:
        users = scram_configs(entity_configs)
        with self._lock:
            self._users = users

    def _snapshot(self) -> dict[str, dict[str, str]]:
        if not self._watching:
            self._reload(self.store.get_entity_configs())
        with self._lock:
            return self._users

    def alter(self, upserts: Upserts, deletions: Deletions) -> None:
        """One conditional write per user (Kafka's AdminZkClient: a user's map at a time, quotas kept)."""
        for user in dict.fromkeys(u for u, *_ in (*deletions, *upserts)):
            self.store.update_entity_configs(user_entity_path(user),
                                             lambda config, user=user: _apply(config, user, upserts, deletions))
        self._reload(self.store.get_entity_configs())

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

"""Where a broker keeps SCRAM credentials, as Kafka stores them.

A lone broker keeps them in ``scram-credentials.json`` in its data dir, the same JSON Kafka writes to ZooKeeper's
``/config/users/<name>`` for each user: ``{"version":1,"config":{"SCRAM-SHA-512":"salt=...,stored_key=...,
server_key=...,iterations=4096"}}``; the file maps user names to those objects. It is replaced atomically (write,
fsync, rename) and readable by its owner only. Every call takes the store's lock: reads come from the SASL
exchanges of any connection, writes from AlterUserScramCredentials and ``seglog configs``.
"""

from __future__ import annotations

import json
import os
import threading

from .scram import ScramCredential

FILE_NAME = "scram-credentials.json"


class FileCredentialStore:
    """SCRAM credentials in a data dir (see the module docstring)."""

    def __init__(self, data_dir):
        self.path = os.path.join(os.fspath(data_dir), FILE_NAME)
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, str]] = {}
        if os.path.exists(self.path):
            with open(self.path) as f:
                self._users = {name: dict(entry["config"]) for name, entry in json.load(f).items()}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        with self._lock:
            text = self._users.get(user, {}).get(mechanism)
        return ScramCredential.from_kafka(text) if text else None

    def describe(self) -> dict[str, dict[str, int]]:
        """{user: {mechanism: iterations}}: what DescribeUserScramCredentials may show (no keys, no salts)."""
        with self._lock:
            return {user: {m: ScramCredential.from_kafka(t).iterations for m, t in mechs.items()}
                    for user, mechs in self._users.items() if mechs}

    def alter(self, upserts: list[tuple[str, str, ScramCredential]], deletions: list[tuple[str, str]]) -> None:
        """Apply upserts and deletions together, then persist."""
        with self._lock:
            users = {u: dict(m) for u, m in self._users.items()}
            for user, mechanism in deletions:
                users.get(user, {}).pop(mechanism, None)
            for user, mechanism, credential in upserts:
                users.setdefault(user, {})[mechanism] = credential.to_kafka()
            users = {u: m for u, m in users.items() if m}
            tmp = self.path + ".tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump({u: {"version": 1, "config": m} for u, m in users.items()}, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            self._users = users

"""Where quota configs live, as Kafka keeps them.

A cluster keeps them in its metadata store: ZooKeeper's ``/config/users/<user>``,
``/config/users/<user>/clients/<client-id>`` and ``/config/clients/<client-id>`` (``{"version":1,"config":
{"producer_byte_rate":"1024"}}``), each change announced by a ``/config/changes/config_change_<n>`` node
(``{"version":2,"entity_path":"users/alice"}``) that every broker watches, so a change applies on every
running broker. A lone broker keeps them in ``client-quotas.json`` in its data dir, beside the SCRAM
credentials: the same objects keyed by entity path, replaced atomically (write, fsync, rename).

Both stores hold configs as strings (Kafka's JSON); ``load`` gives the quota keys as floats and skips any
other key a node holds (Kafka's /config/users nodes may also hold SCRAM credentials), which ``update`` keeps.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Callable, Mapping

from ..checkpoints import replace_file
from .entities import QUOTA_KEYS, QuotaEntity, entity_path, parse_entity_path

__all__ = ["FileQuotaStore", "MetadataQuotaStore"]

log = logging.getLogger("seglog.quotas")
FILE_NAME = "client-quotas.json"
Change = Callable[[dict[str, str]], dict[str, str]]


def _quotas(raw: Mapping[str, Mapping[str, str]]) -> dict[QuotaEntity, dict[str, float]]:
    out = {}
    for path, config in raw.items():
        values = {}
        for key, text in config.items():
            if key in QUOTA_KEYS:
                try:
                    values[key] = float(text)
                except ValueError:
                    log.warning("ignoring quota %s=%r of %s: not a number", key, text, path)
        if values:
            out[parse_entity_path(path)] = values
    return out


class FileQuotaStore:
    """A lone broker's quota configs (see the module docstring). Only the process holding the data dir writes
    the file; ``update`` takes the store's lock."""

    def __init__(self, data_dir):
        self.path = os.path.join(os.fspath(data_dir), FILE_NAME)
        self._lock = threading.Lock()

    def _raw(self) -> dict[str, dict[str, str]]:
        if not os.path.exists(self.path):
            return {}
        with open(self.path) as f:
            return {path: dict(entry["config"]) for path, entry in json.load(f).items()}

    def load(self) -> dict[QuotaEntity, dict[str, float]]:
        return _quotas(self._raw())

    def update(self, entity: QuotaEntity, change: Change) -> None:
        """Replace the entity's configs with ``change(current configs)`` (an empty result removes it)."""
        with self._lock:
            raw = self._raw()
            path = entity_path(entity)
            config = change(dict(raw.get(path, {})))
            if config:
                raw[path] = config
            else:
                raw.pop(path, None)
            replace_file(self.path, json.dumps({p: {"version": 1, "config": c} for p, c in sorted(raw.items())}).encode(), "cannot write client quotas")

    def watch(self, callback: Callable[[], None]):
        """Nothing else writes a lone broker's file: the broker reloads after its own updates."""
        return None


class MetadataQuotaStore:
    """A cluster's quota configs in its metadata store (see the module docstring)."""

    def __init__(self, metadata_store):
        self.store = metadata_store

    def load(self) -> dict[QuotaEntity, dict[str, float]]:
        return _quotas(self.store.get_entity_configs())

    def update(self, entity: QuotaEntity, change: Change) -> None:
        self.store.update_entity_configs(entity_path(entity), change)

    def watch(self, callback: Callable[[], None]):
        return self.store.watch_entity_configs(lambda _configs: callback())

"""Dynamic broker configs as Kafka has them (its DynamicBrokerConfig): broker configs changed at run time through
AlterConfigs / IncrementalAlterConfigs on a BROKER resource, for one broker (its id) or for every broker
(the empty name, stored as ``<default>``).

Precedence, highest first: a topic's own override (topic configs only), the dynamic per-broker value, the
dynamic cluster default, the static value (server.properties / ``--override``), Kafka's default.
:class:`DynamicBrokerConfig` holds the two dynamic levels over the static BrokerConfig and the effective
BrokerConfig they make; every change runs the registered hooks with (old, new) at once.

Only configs seglog really changes at run time are dynamic (:data:`CLUSTER_WIDE`, and a view's per-broker ones);
every other name, including configs Kafka can change that seglog cannot (``listeners``, thread counts, TLS and
SASL settings), is refused with Kafka's INVALID_REQUEST message and described read-only.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
from typing import Callable, Mapping

from .checkpoints import read_json, replace_file
from .config import BrokerConfig, _BROKER_KAFKA_TO_ATTR
from .errors import InvalidConfigError, InvalidRequestError
from .replication.throttle import DYNAMIC_BROKER_KEYS, check_broker_rate

log = logging.getLogger("seglog.config")

DEFAULT_ENTITY = "<default>"
"""The entity name of the cluster-wide default (the empty resource name of a request)."""

LOG_SYNONYMS: dict[str, str] = {
    "segment.bytes": "log.segment.bytes", "segment.ms": "log.roll.ms", "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.index.bytes": "log.index.size.max.bytes", "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms", "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms", "max.message.bytes": "message.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes", "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio", "cleanup.policy": "log.cleanup.policy",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "min.insync.replicas": "min.insync.replicas", "compression.type": "compression.type",
    "preallocate": "log.preallocate", "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
}
"""Topic config -> the broker config that is its default (Kafka's TopicConfigSynonyms, for the configs seglog
has; message.format.version, ignored since Kafka 3.0, is left out as Kafka's DynamicLogConfig leaves it out)."""

THREAD_POOLS = ("num.io.threads",)
"""Thread counts seglog resizes at run time (of Kafka's DynamicThreadPool): the broker's disk-call executor."""

CLUSTER_WIDE = frozenset(LOG_SYNONYMS.values()) | frozenset(THREAD_POOLS) | {
    "max.connections.per.ip", "max.connections.per.ip.overrides",         # Kafka's SocketServer reconfigurables
    "transaction.partition.verification.enable",                            # Kafka's DynamicProducerStateManagerConfig
}
"""Dynamic broker configs seglog applies at run time, settable per broker and as the cluster default."""

PER_BROKER_ONLY = frozenset({"advertised.listeners"})
"""Dynamic broker configs Kafka takes for one broker only (its PerBrokerConfigs that seglog applies)."""

SYNONYMS: dict[str, tuple[str, ...]] = {
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
}
for _names in list(SYNONYMS.values()):
    for _name in _names:
        SYNONYMS[_name] = _names
"""A broker config and the other names of the same setting, highest precedence first (Kafka's
brokerConfigSynonyms)."""

SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT, SOURCE_STATIC, SOURCE_DEFAULT = 2, 3, 4, 5
"""Kafka's DescribeConfigs config_source ids of broker-level values."""

STORE_FILE = "broker-configs.json"
"""A lone broker's dynamic configs, in its (first) data directory: {"brokers/<default>": {...}, "brokers/<id>":
{...}}."""


def config_text(value) -> str | None:
    """A BrokerConfig value as Kafka's string form (lists comma-joined, booleans lower case; None: null)."""
    if value is None:
        return None
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def resource_text(name: str) -> str:
    """How Kafka's error messages name a broker resource (ConfigResource.toString)."""
    return f"ConfigResource(type=BROKER, name='{name}')"


def invalid(name: str, why: str) -> InvalidRequestError:
    """Kafka's answer to a refused broker config change (ZkAdminManager: a ConfigException becomes
    INVALID_REQUEST naming the resource)."""
    return InvalidRequestError(f"Invalid config value for resource {resource_text(name)}: {why}")


def _set_text(names) -> str:
    return f"Set({', '.join(sorted(names))})"


class DynamicBrokerConfig:
    """The dynamic levels of one broker over its static config. ``current`` is the effective BrokerConfig.
    Thread-safe; hooks run outside the lock, in the order registered, on the thread that applied the change."""

    def __init__(self, static: BrokerConfig):
        self.static = static
        self.current = static
        self.default: dict[str, str] = {}
        self.broker: dict[str, str] = {}
        self._lock = threading.Lock()
        self._hooks: list[Callable[[BrokerConfig, BrokerConfig], None]] = []
        self._stored: tuple[dict[str, str], dict[str, str]] = ({}, {})     # the levels last given to apply

    def add_hook(self, hook: Callable[[BrokerConfig, BrokerConfig], None]) -> None:
        self._hooks.append(hook)

    def effective(self, default: Mapping[str, str], broker: Mapping[str, str]) -> BrokerConfig:
        """The static config under ``default``, then ``broker`` (BrokerConfig names only; InvalidConfigError
        for a bad value)."""
        merged = {k: v for level in (default, broker) for k, v in level.items() if k in _BROKER_KAFKA_TO_ATTR}
        return self.static.with_kafka(merged) if merged else self.static

    def apply(self, default: Mapping[str, str], broker: Mapping[str, str]) -> None:
        """Make these the dynamic levels (as stored: values that are not valid are dropped with an error
        logged, as Kafka ignores them) and run the hooks if the effective config changed. The same levels again
        (another entity's change: a user's quota) cost nothing."""
        stored = ({k: str(v) for k, v in default.items()}, {k: str(v) for k, v in broker.items()})
        with self._lock:
            if stored == self._stored:
                return
            self._stored = stored
        default, broker = self._usable(default, DEFAULT_ENTITY), self._usable(broker, "broker")
        new = self.effective(default, broker)
        with self._lock:
            old, self.current, self.default, self.broker = self.current, new, default, broker
        if new != old:
            changed = sorted(f.metadata["key"].kafka for f in dataclasses.fields(BrokerConfig)
                             if "key" in f.metadata and getattr(old, f.name) != getattr(new, f.name))
            log.info("dynamic broker configs changed: %s", ", ".join(changed))
            for hook in self._hooks:
                hook(old, new)

    def _usable(self, configs: Mapping[str, str], level: str) -> dict[str, str]:
        out = {}
        for k, v in configs.items():
            try:
                if k in _BROKER_KAFKA_TO_ATTR:
                    self.static.with_kafka({k: v})
                out[k] = str(v)
            except InvalidConfigError as e:
                log.error("dynamic %s config %s=%r ignored: %s", level, k, v, e)
        return out

    def validate(self, name: str, new: Mapping[str, str], dynamic: frozenset, per_broker_only: frozenset) -> None:
        """Kafka's checks of a whole new level (``name``: the broker id, "" for the default), against the other
        level as it stands: only ``dynamic`` names; ``per_broker_only`` ones not at the default; every value
        valid in the effective config it makes. InvalidRequestError with Kafka's message otherwise."""
        static = [k for k in new if k not in dynamic]
        if static:
            raise invalid(name, f"Cannot update these configs dynamically: {_set_text(static)}")
        if not name:
            at_default = [k for k in new if k in per_broker_only]
            if at_default:
                raise invalid(name, "Cannot update these configs at default cluster level, broker id must be "
                                    f"specified: {_set_text(at_default)}")
        with self._lock:
            default, broker = (new, self.broker) if not name else (self.default, new)
        try:
            for k, v in new.items():
                if k in DYNAMIC_BROKER_KEYS:          # the rates: Kafka's DynamicConfig.Broker, not BrokerConfig's
                    check_broker_rate(k, v)
            effective = self.effective(default, broker)
        except InvalidConfigError as e:
            raise invalid(name, str(e)) from None
        for k in THREAD_POOLS:
            attr = _BROKER_KAFKA_TO_ATTR[k]
            old, value = getattr(self.current, attr), getattr(effective, attr)
            if value != old:                     # Kafka's DynamicThreadPool: at most halved or doubled at a time
                why = f"Dynamic thread count update validation failed for {k}={value}"
                if value < old / 2:
                    raise invalid(name, f"{why}, value should be at least half the current value {old}")
                if value > old * 2:
                    raise invalid(name, f"{why}, value should not be greater than double the current value {old}")

    def source_of(self, name: str, per_broker: bool = True) -> list[tuple[str, str | None, int]]:
        """Kafka's synonyms of broker config ``name``, highest precedence first, starting at ``name`` itself:
        (name, value, config_source) from the per-broker level (unless ``per_broker`` is False: describing the
        default), the default level, the static config (set apart from the default) and Kafka's default
        (when it has one). The first one's source is the config's."""
        with self._lock:
            broker, default = dict(self.broker), dict(self.default)
        names = SYNONYMS.get(name, (name,))
        found: list[tuple[str, str | None, int]] = []
        if per_broker:
            found += [(n, broker[n], SOURCE_DYNAMIC_BROKER) for n in names if n in broker]
        found += [(n, default[n], SOURCE_DYNAMIC_DEFAULT) for n in names if n in default]
        fields = {f.metadata["key"].kafka: f for f in dataclasses.fields(BrokerConfig) if "key" in f.metadata}
        for n in names:
            f = fields.get(n)
            if f is not None and getattr(self.static, f.name) != f.default:
                found.append((n, config_text(getattr(self.static, f.name)), SOURCE_STATIC))
        for n in names:
            f = fields.get(n)
            if f is not None and f.default is not None:
                found.append((n, config_text(f.default), SOURCE_DEFAULT))
        while found and found[0][0] != name:
            found.pop(0)
        return found


def read_stored(data_dir: str) -> dict[str, dict[str, str]]:
    """A lone broker's stored dynamic configs by entity path ("brokers/<default>", "brokers/<id>", as a
    cluster's ZooKeeper names them); {} when none were set."""
    data = read_json(os.path.join(data_dir, STORE_FILE), "cannot read dynamic broker configs") or {}
    return {str(p): {str(n): str(v) for n, v in c.items()} for p, c in data.items()}


def write_stored(data_dir: str, entities: Mapping[str, Mapping[str, str]]) -> None:
    """Replace a lone broker's stored dynamic configs (atomically, durably; entities without configs left out)."""
    replace_file(os.path.join(data_dir, STORE_FILE),
                 json.dumps({p: dict(c) for p, c in sorted(entities.items()) if c}, sort_keys=True).encode(),
                 "cannot write dynamic broker configs")


__all__ = ["CLUSTER_WIDE", "DEFAULT_ENTITY", "DynamicBrokerConfig", "LOG_SYNONYMS", "PER_BROKER_ONLY", "STORE_FILE",
           "SOURCE_DEFAULT", "SOURCE_DYNAMIC_BROKER", "SOURCE_DYNAMIC_DEFAULT", "SOURCE_STATIC", "THREAD_POOLS",
           "config_text", "invalid", "read_stored", "write_stored"]

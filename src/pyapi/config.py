"""Configuration with Kafka's names, defaults and validation.

:class:`LogConfig` holds the per-log (per-topic) settings. Python code uses attribute names
(``segment_bytes``); Kafka-style maps use the dotted names (``segment.bytes``) through
:meth:`LogConfig.from_kafka` / :meth:`LogConfig.to_kafka`. Every value is validated when the object is built;
a bad value raises :class:`seglog.errors.InvalidConfigError` naming the key and the rule, an unknown name
(``LogConfig(segmnt_bytes=5)``, ``from_kafka({"segmnt.bytes": 5})``) :class:`seglog.errors.UnknownConfigError`,
which is an InvalidConfigError and also the TypeError Python raises for an unexpected keyword argument.
Defaults are Kafka's; ``None`` for ``flush_messages``/``flush_ms`` means "never" (Kafka's Long.MAX_VALUE).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import ipaddress
import logging
import socket
from dataclasses import dataclass, field
from typing import Any, Mapping

from .errors import InvalidConfigError, UnknownConfigError
from .group_assignors import configured_assignors
from .group_types import check_consumer_group_bounds, migration_policy
from .replication.throttle import parse_throttled_replicas
from .security.authorizer import check_authorizer_class, parse_super_users
from .security.listeners import broker_listeners
from .security.protocols import SECURITY_PROTOCOLS

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1
log = logging.getLogger("seglog.config")

COMPRESSION_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
"""Codec names in batch attribute order: the index is the codec id stored in bits 0-2 of the attributes."""


@dataclass(frozen=True)
class _Key:
    kafka: str
    kind: str                     # long | int | bool | double | string | list
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] | None = None
    none_is: int | None = None    # Kafka's spelling of "never" for an optional value
    secret: bool = False          # a password or key: never in repr() or logs
    ordered: bool = False         # a list whose order matters (kept as given, repeats dropped), else sorted
    empty_ok: bool = False        # an empty list is a value (cleanup.policy: neither deleted nor compacted)


def _parse(key: _Key, raw: Any) -> Any:
    """Coerce ``raw`` (a Python value or Kafka's string form) to ``key.kind`` and check its range."""
    name = key.kafka
    if raw is None:
        if key.none_is is not None:
            return None
        raise InvalidConfigError(f"Invalid value None for configuration {name}: a value is required")
    try:
        if key.kind in ("long", "int"):
            if isinstance(raw, bool) or isinstance(raw, float) and not raw.is_integer():
                raise ValueError
            value = int(raw.strip()) if isinstance(raw, str) else int(raw)
            if key.none_is is not None and value == key.none_is:
                return None
        elif key.kind == "double":
            value = float(raw)
        elif key.kind == "bool":
            if isinstance(raw, bool):
                value = raw
            elif isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
                value = raw.strip().lower() == "true"
            else:
                raise ValueError
        elif key.kind == "list":
            items = raw.split(",") if isinstance(raw, str) else list(raw)
            value = tuple(dict.fromkeys(str(i).strip().lower() for i in items if str(i).strip()))
            value = value if key.ordered else tuple(sorted(value))
        else:
            value = str(raw).strip()
    except (TypeError, ValueError):
        raise InvalidConfigError(f"Invalid value {raw!r} for configuration {name}: "
                                 f"not a value of type {key.kind.upper()}") from None
    if key.kind == "int" and not -(1 << 31) <= value <= INT_MAX:
        raise InvalidConfigError(f"Invalid value {raw!r} for configuration {name}: does not fit in an int32")
    if key.low is not None and value < key.low:
        raise InvalidConfigError(f"Invalid value {raw!r} for configuration {name}: value must be at least {key.low:g}")
    if key.high is not None and value > key.high:
        raise InvalidConfigError(f"Invalid value {raw!r} for configuration {name}: value must be no more than {key.high:g}")
    if key.choices is not None:
        bad = [v for v in (value if key.kind == "list" else (value,)) if v not in key.choices]
        if bad or (key.kind == "list" and not value and not key.empty_ok):
            raise InvalidConfigError(f"Invalid value {raw!r} for configuration {name}: "
                                     f"String must be one of: {', '.join(key.choices)}")
    return value


def _k(kafka: str, kind: str, default: Any, **kw) -> Any:
    return field(default=default, repr=not kw.get("secret", False), metadata={"key": _Key(kafka, kind, **kw)})


def _unknown(what: str, name: str, known) -> UnknownConfigError:
    """The error for a name that is not a setting, suggesting the closest real one."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return UnknownConfigError(f"Unknown {what} config name: {name}" + (f" (did you mean {close[0]}?)" if close else ""))


def _reject_unknown_names(cls, what: str):
    """Class decorator: keyword arguments that are not fields raise UnknownConfigError (a dataclass raises a
    bare TypeError)."""
    init = cls.__init__
    names = frozenset(f.name for f in dataclasses.fields(cls))

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        for name in kwargs:
            if name not in names:
                raise _unknown(what, name, names)
        init(self, *args, **kwargs)
    cls.__init__ = __init__
    return cls


@functools.partial(_reject_unknown_names, what="topic")
@dataclass(frozen=True)
class LogConfig:
    """Settings of one log (a topic's partitions share them). Attribute names are Kafka's with ``_``.

    Immutable: derive a changed copy with :meth:`replace` or :meth:`with_kafka`.
    """

    segment_bytes: int = _k("segment.bytes", "int", 1 << 30, low=14)
    segment_ms: int = _k("segment.ms", "long", 7 * 24 * 3600 * 1000, low=1)
    segment_jitter_ms: int = _k("segment.jitter.ms", "long", 0, low=0)
    segment_index_bytes: int = _k("segment.index.bytes", "int", 10 * 1024 * 1024, low=4 * 12)
    index_interval_bytes: int = _k("index.interval.bytes", "int", 4096, low=0)
    retention_ms: int = _k("retention.ms", "long", 7 * 24 * 3600 * 1000, low=-1)
    retention_bytes: int = _k("retention.bytes", "long", -1, low=-1)
    flush_messages: int | None = _k("flush.messages", "long", None, low=1, none_is=LONG_MAX)
    flush_ms: int | None = _k("flush.ms", "long", None, low=0, none_is=LONG_MAX)
    max_message_bytes: int = _k("max.message.bytes", "int", 1024 * 1024 + 12, low=0)
    message_timestamp_type: str = _k("message.timestamp.type", "string", "CreateTime",
                                     choices=("CreateTime", "LogAppendTime"))
    message_timestamp_before_max_ms: int = _k("message.timestamp.before.max.ms", "long", LONG_MAX, low=0)
    message_timestamp_after_max_ms: int = _k("message.timestamp.after.max.ms", "long", LONG_MAX, low=0)
    compression_type: str = _k("compression.type", "string", "producer",
                               choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"))
    cleanup_policy: tuple[str, ...] = _k("cleanup.policy", "list", ("delete",), choices=("compact", "delete"),
                                         ordered=True, empty_ok=True)         # Kafka's order: "delete,compact"
    delete_retention_ms: int = _k("delete.retention.ms", "long", 24 * 3600 * 1000, low=0)
    min_compaction_lag_ms: int = _k("min.compaction.lag.ms", "long", 0, low=0)
    max_compaction_lag_ms: int = _k("max.compaction.lag.ms", "long", LONG_MAX, low=1)
    min_cleanable_dirty_ratio: float = _k("min.cleanable.dirty.ratio", "double", 0.5, low=0, high=1)
    file_delete_delay_ms: int = _k("file.delete.delay.ms", "long", 60_000, low=0)
    min_insync_replicas: int = _k("min.insync.replicas", "int", 1, low=1)
    unclean_leader_election_enable: bool = _k("unclean.leader.election.enable", "bool", False)
    preallocate: bool = _k("preallocate", "bool", False)
    # deprecated since Kafka 3.0, where every batch is message format v2: accepted and ignored, as Kafka 3.x does
    message_format_version: str = _k("message.format.version", "string", "3.0-IV1")
    # the replicas replication throttles apply to ("*" or "partition:broker,..."; seglog.replication.throttle)
    leader_replication_throttled_replicas: str = _k("leader.replication.throttled.replicas", "string", "")
    follower_replication_throttled_replicas: str = _k("follower.replication.throttled.replicas", "string", "")

    def __post_init__(self):
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, _parse(f.metadata["key"], getattr(self, f.name)))
        for kind in ("leader", "follower"):
            parse_throttled_replicas(f"{kind}.replication.throttled.replicas",
                                     getattr(self, f"{kind}_replication_throttled_replicas"))

    # -- conversions ----------------------------------------------------------------------------------------
    @classmethod
    def from_kafka(cls, props: Mapping[str, Any], base: "LogConfig | None" = None) -> "LogConfig":
        """Build from Kafka-named properties (strings or Python values) over ``base`` (defaults if None).

        Unknown names raise UnknownConfigError: a typo must not silently fall back to a default.
        """
        by_kafka = _KAFKA_TO_ATTR
        changes = {}
        for name, raw in props.items():
            attr = by_kafka.get(name)
            if attr is None:
                raise _unknown("topic", name, by_kafka)
            changes[attr] = raw
        return dataclasses.replace(base or cls(), **changes)

    def to_kafka(self) -> dict[str, str]:
        """All settings as Kafka-named strings (booleans as true/false, never as Long.MAX_VALUE)."""
        out = {}
        for f in dataclasses.fields(self):
            key: _Key = f.metadata["key"]
            value = getattr(self, f.name)
            if value is None:
                value = key.none_is
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, tuple):
                value = ",".join(value)
            out[key.kafka] = str(value)
        return out

    def replace(self, **changes) -> "LogConfig":
        """A copy with attribute-named changes, validated."""
        return dataclasses.replace(self, **changes)

    def with_kafka(self, props: Mapping[str, Any]) -> "LogConfig":
        """A copy with Kafka-named changes, validated."""
        return LogConfig.from_kafka(props, base=self)

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"


_KAFKA_TO_ATTR: dict[str, str] = {f.metadata["key"].kafka: f.name for f in dataclasses.fields(LogConfig)}
KAFKA_NAMES: tuple[str, ...] = tuple(_KAFKA_TO_ATTR)
"""Every topic-level config name LogConfig understands."""



@dataclass(frozen=True)
class BrokerConfig:
    """Broker / node settings with Kafka's server.properties names and defaults (``log.dirs`` ...).

    ``log_config()`` turns the ``log.*`` defaults into the LogConfig every topic starts from. Options that only
    matter to a networked broker (listeners, ZooKeeper) are ignored by the embedded node.
    """

    broker_id: int = _k("broker.id", "int", 0, low=0)
    listeners: str = _k("listeners", "string", "PLAINTEXT://127.0.0.1:9092")
    advertised_listeners: str = _k("advertised.listeners", "string", "")
    log_dirs: str = _k("log.dirs", "string", "data")
    num_partitions: int = _k("num.partitions", "int", 1, low=1)
    default_replication_factor: int = _k("default.replication.factor", "int", 1, low=1)
    min_insync_replicas: int = _k("min.insync.replicas", "int", 1, low=1)
    auto_create_topics_enable: bool = _k("auto.create.topics.enable", "bool", True)
    delete_topic_enable: bool = _k("delete.topic.enable", "bool", True)
    message_max_bytes: int = _k("message.max.bytes", "int", 1024 * 1024 + 12, low=0)
    log_segment_bytes: int = _k("log.segment.bytes", "int", 1 << 30, low=14)
    log_roll_hours: int = _k("log.roll.hours", "int", 168, low=1)
    log_roll_ms: int | None = _k("log.roll.ms", "long", None, low=1, none_is=-2)
    log_roll_jitter_ms: int | None = _k("log.roll.jitter.ms", "long", None, low=0, none_is=-2)
    log_retention_hours: int = _k("log.retention.hours", "int", 168, low=-1)
    log_retention_minutes: int | None = _k("log.retention.minutes", "int", None, low=-1, none_is=-2)
    log_retention_ms: int | None = _k("log.retention.ms", "long", None, low=-1, none_is=-2)
    log_retention_bytes: int = _k("log.retention.bytes", "long", -1, low=-1)
    log_retention_check_interval_ms: int = _k("log.retention.check.interval.ms", "long", 300_000, low=1)
    log_index_interval_bytes: int = _k("log.index.interval.bytes", "int", 4096, low=0)
    log_index_size_max_bytes: int = _k("log.index.size.max.bytes", "int", 10 * 1024 * 1024, low=4 * 12)
    log_flush_interval_messages: int | None = _k("log.flush.interval.messages", "long", None, low=1, none_is=LONG_MAX)
    log_flush_interval_ms: int | None = _k("log.flush.interval.ms", "long", None, low=0, none_is=LONG_MAX)
    log_cleanup_policy: tuple[str, ...] = _k("log.cleanup.policy", "list", ("delete",), choices=("compact", "delete"),
                                             ordered=True, empty_ok=True)
    log_cleaner_enable: bool = _k("log.cleaner.enable", "bool", True)
    log_cleaner_backoff_ms: int = _k("log.cleaner.backoff.ms", "long", 15_000, low=0)
    log_cleaner_delete_retention_ms: int = _k("log.cleaner.delete.retention.ms", "long", 24 * 3600 * 1000, low=0)
    log_cleaner_min_cleanable_ratio: float = _k("log.cleaner.min.cleanable.ratio", "double", 0.5, low=0, high=1)
    log_cleaner_min_compaction_lag_ms: int = _k("log.cleaner.min.compaction.lag.ms", "long", 0, low=0)
    log_cleaner_max_compaction_lag_ms: int = _k("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, low=1)
    log_segment_delete_delay_ms: int = _k("log.segment.delete.delay.ms", "long", 60_000, low=0)
    log_preallocate: bool = _k("log.preallocate", "bool", False)
    log_message_timestamp_type: str = _k("log.message.timestamp.type", "string", "CreateTime",
                                         choices=("CreateTime", "LogAppendTime"))
    log_message_timestamp_before_max_ms: int = _k("log.message.timestamp.before.max.ms", "long", LONG_MAX, low=0)
    log_message_timestamp_after_max_ms: int = _k("log.message.timestamp.after.max.ms", "long", LONG_MAX, low=0)
    compression_type: str = _k("compression.type", "string", "producer",
                               choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"))
    offsets_topic_num_partitions: int = _k("offsets.topic.num.partitions", "int", 50, low=1)
    offsets_topic_replication_factor: int = _k("offsets.topic.replication.factor", "int", 3, low=1)
    offsets_topic_segment_bytes: int = _k("offsets.topic.segment.bytes", "int", 100 * 1024 * 1024, low=1)
    offsets_retention_minutes: int = _k("offsets.retention.minutes", "int", 7 * 24 * 60, low=1)
    group_initial_rebalance_delay_ms: int = _k("group.initial.rebalance.delay.ms", "int", 3000, low=0)
    group_min_session_timeout_ms: int = _k("group.min.session.timeout.ms", "int", 6000, low=0)
    group_max_session_timeout_ms: int = _k("group.max.session.timeout.ms", "int", 1_800_000, low=0)
    group_max_size: int = _k("group.max.size", "int", INT_MAX, low=1)
    group_consumer_session_timeout_ms: int = _k("group.consumer.session.timeout.ms", "int", 45000, low=1)
    group_consumer_min_session_timeout_ms: int = _k("group.consumer.min.session.timeout.ms", "int", 45000, low=1)
    group_consumer_max_session_timeout_ms: int = _k("group.consumer.max.session.timeout.ms", "int", 60000, low=1)
    group_consumer_heartbeat_interval_ms: int = _k("group.consumer.heartbeat.interval.ms", "int", 5000, low=1)
    group_consumer_min_heartbeat_interval_ms: int = _k("group.consumer.min.heartbeat.interval.ms", "int", 5000, low=1)
    group_consumer_max_heartbeat_interval_ms: int = _k("group.consumer.max.heartbeat.interval.ms", "int", 15000, low=1)
    group_consumer_max_size: int = _k("group.consumer.max.size", "int", INT_MAX, low=1)
    group_consumer_migration_policy: str = _k("group.consumer.migration.policy", "string", "bidirectional")
    group_consumer_assignors: tuple[str, ...] = _k("group.consumer.assignors", "list", ("uniform", "range"),
                                                   ordered=True)
    socket_request_max_bytes: int = _k("socket.request.max.bytes", "int", 100 * 1024 * 1024, low=1)
    num_io_threads: int = _k("num.io.threads", "int", 8, low=1)
    max_connections_per_ip: int = _k("max.connections.per.ip", "int", INT_MAX, low=0)
    max_connections_per_ip_overrides: str = _k("max.connections.per.ip.overrides", "string", "")
    zookeeper_connect: str = _k("zookeeper.connect", "string", "")
    zookeeper_session_timeout_ms: int = _k("zookeeper.session.timeout.ms", "int", 18_000, low=1)
    replica_lag_time_max_ms: int = _k("replica.lag.time.max.ms", "long", 30_000, low=1)
    replica_fetch_max_bytes: int = _k("replica.fetch.max.bytes", "int", 1024 * 1024, low=0)
    replica_fetch_wait_max_ms: int = _k("replica.fetch.wait.max.ms", "int", 500, low=0)
    replica_fetch_backoff_ms: int = _k("replica.fetch.backoff.ms", "int", 1000, low=0)
    unclean_leader_election_enable: bool = _k("unclean.leader.election.enable", "bool", False)
    auto_leader_rebalance_enable: bool = _k("auto.leader.rebalance.enable", "bool", True)
    leader_imbalance_check_interval_seconds: int = _k("leader.imbalance.check.interval.seconds", "long", 300, low=1)
    producer_id_expiration_ms: int = _k("producer.id.expiration.ms", "int", 86_400_000, low=1)
    # -- transactions (seglog.txn) ----------------------------------------------------------------------------------
    transaction_state_log_num_partitions: int = _k("transaction.state.log.num.partitions", "int", 50, low=1)
    transaction_state_log_replication_factor: int = _k("transaction.state.log.replication.factor", "int", 3, low=1)
    transaction_state_log_min_isr: int = _k("transaction.state.log.min.isr", "int", 2, low=1)
    transaction_state_log_segment_bytes: int = _k("transaction.state.log.segment.bytes", "int", 100 * 1024 * 1024,
                                                  low=1)
    transaction_max_timeout_ms: int = _k("transaction.max.timeout.ms", "int", 900_000, low=1)
    transactional_id_expiration_ms: int = _k("transactional.id.expiration.ms", "int", 604_800_000, low=1)
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = _k(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10_000, low=1)
    transaction_remove_expired_transaction_cleanup_interval_ms: int = _k(
        "transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3_600_000, low=1)
    transaction_partition_verification_enable: bool = _k("transaction.partition.verification.enable", "bool", True)
    controlled_shutdown_enable: bool = _k("controlled.shutdown.enable", "bool", True)
    controlled_shutdown_max_retries: int = _k("controlled.shutdown.max.retries", "int", 3, low=0)
    controlled_shutdown_retry_backoff_ms: int = _k("controlled.shutdown.retry.backoff.ms", "long", 5000, low=0)
    # -- security (seglog.security): listeners, TLS, SASL ---------------------------------------------------------
    listener_security_protocol_map: str = _k("listener.security.protocol.map", "string",
                                             "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL")
    inter_broker_listener_name: str = _k("inter.broker.listener.name", "string", "")
    security_inter_broker_protocol: str = _k("security.inter.broker.protocol", "string", "PLAINTEXT",
                                             choices=SECURITY_PROTOCOLS)
    ssl_keystore_type: str = _k("ssl.keystore.type", "string", "PEM", choices=("PEM",))
    ssl_keystore_location: str = _k("ssl.keystore.location", "string", "")
    ssl_keystore_password: str = _k("ssl.keystore.password", "string", "", secret=True)
    ssl_key_password: str = _k("ssl.key.password", "string", "", secret=True)
    ssl_keystore_key: str = _k("ssl.keystore.key", "string", "", secret=True)
    ssl_keystore_certificate_chain: str = _k("ssl.keystore.certificate.chain", "string", "")
    ssl_key_location: str = _k("ssl.key.location", "string", "")
    ssl_certificate_location: str = _k("ssl.certificate.location", "string", "")
    ssl_truststore_type: str = _k("ssl.truststore.type", "string", "PEM", choices=("PEM",))
    ssl_truststore_location: str = _k("ssl.truststore.location", "string", "")
    ssl_truststore_certificates: str = _k("ssl.truststore.certificates", "string", "")
    ssl_client_auth: str = _k("ssl.client.auth", "string", "none", choices=("none", "requested", "required"))
    ssl_endpoint_identification_algorithm: str = _k("ssl.endpoint.identification.algorithm", "string", "https")
    ssl_principal_mapping_rules: str = _k("ssl.principal.mapping.rules", "string", "DEFAULT")
    sasl_enabled_mechanisms: str = _k("sasl.enabled.mechanisms", "string", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512")
    sasl_mechanism_inter_broker_protocol: str = _k("sasl.mechanism.inter.broker.protocol", "string", "PLAIN")
    sasl_jaas_config: str = _k("sasl.jaas.config", "string", "", secret=True)
    sasl_server_max_receive_size: int = _k("sasl.server.max.receive.size", "int", 524288, low=1)
    connections_max_reauth_ms: int = _k("connections.max.reauth.ms", "long", 0, low=0)
    # -- client quotas (seglog.quotas) ------------------------------------------------------------------------------
    quota_window_num: int = _k("quota.window.num", "int", 11, low=1)
    quota_window_size_seconds: int = _k("quota.window.size.seconds", "int", 1, low=1)
    replication_quota_window_num: int = _k("replication.quota.window.num", "int", 11, low=1)
    replication_quota_window_size_seconds: int = _k("replication.quota.window.size.seconds", "int", 1, low=1)
    # -- authorization (seglog.security.authorizer) -------------------------------------------------------------
    authorizer_class_name: str = _k("authorizer.class.name", "string", "")
    super_users: str = _k("super.users", "string", "")
    allow_everyone_if_no_acl_found: bool = _k("allow.everyone.if.no.acl.found", "bool", False)
    #: ``listener.name.<listener>.<config>`` settings (Kafka's per-listener overrides), as sorted (name, value)
    #: pairs; see seglog.security.protocols.listener_setting.
    listener_overrides: tuple = field(default=(), repr=False)

    def connection_limit_overrides(self) -> dict[str, int]:
        """max.connections.per.ip.overrides as {IP address: limit}: Kafka's comma-separated ``host:limit``
        entries, a host name standing for every address it resolves to (resolved now, as Kafka does when the
        setting is read). InvalidConfigError for a malformed entry, a limit that is not a whole number >= 0 or a
        name that does not resolve."""
        limits: dict[str, int] = {}
        name = "max.connections.per.ip.overrides"
        for entry in filter(None, (e.strip() for e in self.max_connections_per_ip_overrides.split(","))):
            host, sep, limit = entry.rpartition(":")
            host = host.strip().strip("[]")
            value = int(limit) if sep and host and limit.strip().isdigit() else -1
            if not 0 <= value <= INT_MAX:
                raise InvalidConfigError(f"Invalid value {entry!r} in configuration {name}: an entry is "
                                         f"host:limit with a limit that is a whole number >= 0")
            try:
                addresses = [str(ipaddress.ip_address(host))]
            except ValueError:
                try:
                    addresses = sorted({info[4][0] for info in socket.getaddrinfo(host, None)})
                except OSError as e:
                    raise InvalidConfigError(f"Invalid value {entry!r} in configuration {name}: host {host!r} "
                                             f"does not resolve ({e})") from None
            for address in addresses:
                limits[address] = value
        return limits

    def __post_init__(self):
        for f in dataclasses.fields(self):
            if "key" in f.metadata:
                object.__setattr__(self, f.name, _parse(f.metadata["key"], getattr(self, f.name)))
        object.__setattr__(self, "listener_overrides", tuple(sorted(
            (str(k).lower() if not str(k).endswith(".sasl.jaas.config") else str(k), str(v))
            for k, v in dict(self.listener_overrides).items())))
        self.connection_limit_overrides()             # every override parsed and resolved
        if self.max_connections_per_ip == 0 and not self.max_connections_per_ip_overrides:
            raise InvalidConfigError("max.connections.per.ip can be set to zero only if "
                                     "max.connections.per.ip.overrides property is set.")
        object.__setattr__(self, "group_consumer_migration_policy",
                           migration_policy(self.group_consumer_migration_policy))
        object.__setattr__(self, "group_consumer_assignors", configured_assignors(self.group_consumer_assignors))
        check_consumer_group_bounds(self.group_consumer_session_timeout_ms, self.group_consumer_min_session_timeout_ms,
                                    self.group_consumer_max_session_timeout_ms, self.group_consumer_heartbeat_interval_ms,
                                    self.group_consumer_min_heartbeat_interval_ms,
                                    self.group_consumer_max_heartbeat_interval_ms)
        broker_listeners(self)                     # every listener, protocol map and inter-broker name checked
        check_authorizer_class(self.authorizer_class_name)
        parse_super_users(self.super_users)
        if self.zookeeper_connect:
            parse_zookeeper_connect(self.zookeeper_connect)

    @classmethod
    def from_properties(cls, props: Mapping[str, Any], ignore_unknown: bool = True) -> "BrokerConfig":
        """Build from server.properties-style names. Kafka has hundreds of broker settings: unknown names are
        ignored with a WARNING, as Kafka logs them ("The configuration 'x' was supplied but isn't a known
        config."); with ignore_unknown False they raise InvalidConfigError (as :meth:`with_kafka` and
        ``seglog.serve``'s keyword arguments always do)."""
        changes = {}
        per_listener = {}
        for name, raw in props.items():
            attr = _BROKER_KAFKA_TO_ATTR.get(name)
            if name.startswith("listener.name."):
                per_listener[name] = raw
                continue
            if attr is None:
                if not ignore_unknown:
                    raise InvalidConfigError(f"Unknown broker config name: {name}")
                log.warning("The configuration '%s' was supplied but isn't a known config.", name)
                continue
            changes[attr] = raw
        if per_listener:
            changes["listener_overrides"] = tuple(per_listener.items())
        return cls(**changes)

    def replace(self, **changes) -> "BrokerConfig":
        return dataclasses.replace(self, **changes)

    def with_kafka(self, props: Mapping[str, Any]) -> "BrokerConfig":
        """A copy with Kafka-named changes, validated (unknown names raise InvalidConfigError)."""
        changes = {}
        per_listener = dict(self.listener_overrides)
        for name, raw in props.items():
            if name.startswith("listener.name."):
                per_listener[name] = raw
                continue
            attr = _BROKER_KAFKA_TO_ATTR.get(name)
            if attr is None:
                raise InvalidConfigError(f"Unknown broker config name: {name}")
            changes[attr] = raw
        return dataclasses.replace(self, **changes, listener_overrides=tuple(per_listener.items()))

    def retention_ms(self) -> int:
        """log.retention.ms, else .minutes, else .hours, as Kafka resolves them (-1: keep forever)."""
        if self.log_retention_ms is not None:
            return self.log_retention_ms
        if self.log_retention_minutes is not None:
            return self.log_retention_minutes * 60_000 if self.log_retention_minutes >= 0 else -1
        return self.log_retention_hours * 3_600_000 if self.log_retention_hours >= 0 else -1

    def log_config(self) -> LogConfig:
        """The defaults every topic's LogConfig starts from (topic overrides go on top)."""
        return LogConfig(segment_bytes=self.log_segment_bytes,
                         segment_ms=self.log_roll_hours * 3_600_000 if self.log_roll_ms is None else self.log_roll_ms,
                         segment_jitter_ms=self.log_roll_jitter_ms or 0,
                         segment_index_bytes=self.log_index_size_max_bytes,
                         index_interval_bytes=self.log_index_interval_bytes, retention_ms=self.retention_ms(),
                         retention_bytes=self.log_retention_bytes, flush_messages=self.log_flush_interval_messages,
                         flush_ms=self.log_flush_interval_ms, max_message_bytes=self.message_max_bytes,
                         message_timestamp_type=self.log_message_timestamp_type,
                         compression_type=self.compression_type, cleanup_policy=self.log_cleanup_policy,
                         delete_retention_ms=self.log_cleaner_delete_retention_ms,
                         min_cleanable_dirty_ratio=self.log_cleaner_min_cleanable_ratio,
                         min_compaction_lag_ms=self.log_cleaner_min_compaction_lag_ms,
                         max_compaction_lag_ms=self.log_cleaner_max_compaction_lag_ms,
                         file_delete_delay_ms=self.log_segment_delete_delay_ms, preallocate=self.log_preallocate,
                         message_timestamp_before_max_ms=self.log_message_timestamp_before_max_ms,
                         message_timestamp_after_max_ms=self.log_message_timestamp_after_max_ms,
                         min_insync_replicas=self.min_insync_replicas,
                         unclean_leader_election_enable=self.unclean_leader_election_enable)


_BROKER_KAFKA_TO_ATTR: dict[str, str] = {f.metadata["key"].kafka: f.name for f in dataclasses.fields(BrokerConfig)
                                         if "key" in f.metadata}


def parse_zookeeper_connect(text: str) -> tuple[list[tuple[str, int]], str]:
    """([(host, port), ...], chroot) of zookeeper.connect ``host:port[,host:port...][/chroot]`` (a host
    without a port is ZooKeeper's 2181). InvalidConfigError for anything else, before a client sees it."""
    hosts_part, slash, chroot = text.strip().partition("/")
    chroot = slash + chroot

    def bad(why: str) -> InvalidConfigError:
        return InvalidConfigError(f"Invalid value {text!r} for configuration zookeeper.connect: {why} "
                                  f"(expected host:port[,host:port...][/chroot])")

    hosts = []
    for item in hosts_part.split(","):
        item = item.strip()
        if not item:
            raise bad("an empty host")
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else ("" if not rest else None)
        else:
            host, colon, port = item.partition(":")
            if not colon:
                port = ""
        if not host or port is None or ":" in (port or "") or port and not port.isdigit():
            raise bad(f"{item!r} is not host:port")
        number = int(port) if port else 2181
        if not 1 <= number <= 65535:
            raise bad(f"port {number} is not in 1..65535")
        hosts.append((host, number))
    if chroot and chroot != "/":
        parts = chroot[1:].split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise bad(f"bad chroot path {chroot!r}")
    return hosts, chroot


def read_properties(path: str) -> dict[str, str]:
    """Parse a Java .properties file: ``key=value``, ``key: value`` or ``key value``; ``#``/``!`` comments,
    backslash line continuations. Raises InvalidConfigError if it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InvalidConfigError(f"cannot read properties file {path}: {e.strerror}") from None
    props: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        for i, ch in enumerate(logical):
            if ch in "=:" or ch.isspace():
                key, rest = logical[:i], logical[i + 1:].lstrip()
                if ch.isspace() and rest[:1] in ("=", ":"):
                    rest = rest[1:].lstrip()
                break
        else:
            key, rest = logical, ""
        props[key] = rest
        logical = ""
    return props

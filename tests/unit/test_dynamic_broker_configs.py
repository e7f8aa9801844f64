"""Dynamic broker configs on a lone broker, through the wire codec and the handlers (seglog.dynamic_config):
what is dynamic, Kafka's checks and messages, precedence (topic override > per-broker > default > static >
Kafka's default) with sources and synonyms, changes reaching every log at once and kept across a restart."""

from __future__ import annotations

import pytest

from seglog.broker.handlers import Handlers
from seglog.broker.local_view import LocalView
from seglog.broker.metrics import Metrics
from seglog.config import BrokerConfig
from seglog.dynamic_config import DynamicBrokerConfig
from seglog.errors import InvalidRequestError
from seglog.node import Node
from seglog.protocol import ApiKey
from test_broker_versions import Broker, call

INVALID_CONFIG, INVALID_REQUEST = 40, 42
TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def open_broker(path, **static) -> Broker:
    node = Node(path, BrokerConfig(**static))
    b = Broker(node=node, config=node.config, view=LocalView(node, 0, "127.0.0.1", 9092), metrics=Metrics(),
               authorize_cluster=lambda op: None)
    b.handlers = Handlers(b)
    return b


@pytest.fixture
def broker(tmp_path):
    b = open_broker(tmp_path / "d", log_retention_hours=2, log_segment_bytes=1 << 20)
    b.node.create_topic("t", 2)
    b.node.create_topic("own", 1, {"retention.ms": "1000"})
    yield b
    b.node.close()


def alter(broker, name, *ops, validate_only=False):
    """IncrementalAlterConfigs of broker resource `name` ("" the default): (error code, message)."""
    r = call(broker, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
        "resource_type": 4, "resource_name": name, "configs": [
            {"name": k, "config_operation": op, "value": v} for k, op, v in ops]}], "validate_only": validate_only})
    [res] = r["responses"]
    return res["error_code"], res["error_message"]


def describe(broker, rtype, name, keys=None, synonyms=True):
    r = call(broker, ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [{
        "resource_type": rtype, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": synonyms, "include_documentation": False})
    [res] = r["results"]
    assert res["error_code"] == 0, res
    return {c["name"]: c for c in res["configs"]}


def test_read_only_false_exactly_for_what_a_lone_broker_changes_at_run_time(broker):
    configs = describe(broker, 4, "0", synonyms=False)
    writable = {k for k, c in configs.items() if not c["read_only"]}
    assert writable == set(broker.view.dynamic_names)
    assert {"advertised.listeners", "log.retention.ms", "min.insync.replicas", "message.max.bytes",
            "log.cleanup.policy", "max.connections.per.ip"} <= writable
    for static in ("listeners", "log.retention.hours", "broker.id", "log.dirs",
                   "leader.replication.throttled.rate"):          # no replication to throttle here
        assert static not in writable
    assert configs["advertised.listeners"]["config_source"] == DEFAULT


def test_refusals_are_kafkas(broker):
    assert alter(broker, "0", ("num.partitions", SET, "3")) == (INVALID_REQUEST, (
        "Invalid config value for resource ConfigResource(type=BROKER, name='0'): Cannot update these configs "
        "dynamically: Set(num.partitions)"))
    assert alter(broker, "0", ("listeners", SET, "PLAINTEXT://:1"), ("num.partitions", SET, "2"))[1].endswith(
        "Cannot update these configs dynamically: Set(listeners, num.partitions)")
    assert alter(broker, "", ("advertised.listeners", SET, "PLAINTEXT://h:1")) == (INVALID_REQUEST, (
        "Invalid config value for resource ConfigResource(type=BROKER, name=''): Cannot update these configs at "
        "default cluster level, broker id must be specified: Set(advertised.listeners)"))
    code, message = alter(broker, "0", ("log.retention.ms", SET, "soon"))
    assert code == INVALID_REQUEST and "log.retention.ms" in message and "LONG" in message
    code, message = alter(broker, "0", ("min.insync.replicas", SET, "0"))
    assert code == INVALID_REQUEST and "min.insync.replicas" in message
    assert alter(broker, "0", ("message.max.bytes", APPEND, "1")) == (
        INVALID_CONFIG, "Config value append is not allowed for config key: message.max.bytes")
    assert alter(broker, "7", ("log.retention.ms", SET, "1")) == (
        INVALID_REQUEST, "Unexpected broker id, expected 0 or empty string, but received 7")
    code, message = alter(broker, "0", ("advertised.listeners", SET, "OTHER://h:1"))
    assert code == INVALID_REQUEST and "advertised.listeners" in message
    code, message = alter(broker, "0", ("replica.alter.log.dirs.io.max.bytes.per.second", SET, "-1"))
    assert code == INVALID_REQUEST and "Value must be at least 0" in message
    assert broker.node.dynamic.broker == broker.node.dynamic.default == {}        # nothing stored


def test_num_io_threads_moves_at_most_by_half_or_double_as_kafka(broker):
    prefix = "Invalid config value for resource ConfigResource(type=BROKER, name=''): Dynamic thread count update " \
             "validation failed for num.io.threads="
    assert alter(broker, "", ("num.io.threads", SET, "3")) == (
        INVALID_REQUEST, prefix + "3, value should be at least half the current value 8")
    assert alter(broker, "", ("num.io.threads", SET, "17")) == (
        INVALID_REQUEST, prefix + "17, value should not be greater than double the current value 8")
    assert alter(broker, "", ("num.io.threads", SET, "16")) == (0, None)
    assert broker.node.config.num_io_threads == 16


def test_the_log_dir_copy_rate_is_a_lone_brokers_dynamic_rate(broker):
    key = "replica.alter.log.dirs.io.max.bytes.per.second"
    assert alter(broker, "", (key, SET, "1000")) == (0, None)
    assert broker.node.replica_alter_log_dirs_rate == 1000
    entry = describe(broker, 4, "0", [key])[key]
    assert (entry["value"], entry["config_source"], entry["read_only"]) == ("1000", DYNAMIC_DEFAULT, False)
    assert alter(broker, "", (key, DELETE, None)) == (0, None)
    assert broker.node.replica_alter_log_dirs_rate is None


def test_precedence_and_sources_with_synonyms(broker):
    node = broker.node
    assert node.partition("t", 0).log.config.retention_ms == 2 * 3_600_000          # static log.retention.hours
    assert alter(broker, "", ("log.retention.ms", SET, "60000"), ("log.segment.bytes", SET, "2000000")) == (0, None)
    assert node.partition("t", 1).log.config.retention_ms == 60000                  # at once, every log
    assert node.partition("t", 0).log.config.segment_bytes == 2000000
    assert node.partition("own", 0).log.config.retention_ms == 1000                 # its override wins
    assert alter(broker, "0", ("log.retention.ms", SET, "30000")) == (0, None)
    assert node.partition("t", 0).log.config.retention_ms == 30000                  # per-broker over default

    b = describe(broker, 4, "0", ["log.retention.ms", "log.retention.hours", "log.segment.bytes", "num.partitions"])
    assert (b["log.retention.ms"]["value"], b["log.retention.ms"]["config_source"]) == ("30000", DYNAMIC_BROKER)
    assert [(s["name"], s["value"], s["source"]) for s in b["log.retention.ms"]["synonyms"]] == [
        ("log.retention.ms", "30000", DYNAMIC_BROKER), ("log.retention.ms", "60000", DYNAMIC_DEFAULT),
        ("log.retention.hours", "2", STATIC), ("log.retention.hours", "168", DEFAULT)]
    assert b["log.retention.hours"]["config_source"] == STATIC and b["log.retention.hours"]["read_only"]
    assert (b["log.segment.bytes"]["config_source"], b["log.segment.bytes"]["read_only"]) == (DYNAMIC_DEFAULT, False)
    assert b["num.partitions"]["config_source"] == DEFAULT

    default = describe(broker, 4, "")
    assert {k: (c["value"], c["config_source"], c["read_only"]) for k, c in default.items()} == {
        "log.retention.ms": ("60000", DYNAMIC_DEFAULT, False), "log.segment.bytes": ("2000000", DYNAMIC_DEFAULT, False)}
    assert [s["source"] for s in default["log.retention.ms"]["synonyms"]] == [DYNAMIC_DEFAULT, STATIC, DEFAULT]

    t = describe(broker, 2, "t", ["retention.ms", "segment.bytes", "max.message.bytes"])
    assert (t["retention.ms"]["value"], t["retention.ms"]["config_source"]) == ("30000", DYNAMIC_BROKER)
    assert [s["source"] for s in t["retention.ms"]["synonyms"]] == [DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT]
    assert t["max.message.bytes"]["config_source"] == DEFAULT
    own = describe(broker, 2, "own", ["retention.ms"])["retention.ms"]
    assert (own["value"], own["config_source"]) == ("1000", TOPIC)
    assert [s["source"] for s in own["synonyms"]] == [TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT]

    assert alter(broker, "0", ("log.retention.ms", DELETE, None)) == (0, None)      # back to the default
    assert node.partition("t", 0).log.config.retention_ms == 60000
    assert alter(broker, "", ("log.retention.ms", DELETE, None), ("log.segment.bytes", DELETE, None)) == (0, None)
    assert node.partition("t", 0).log.config.retention_ms == 2 * 3_600_000          # static again
    assert node.partition("t", 0).log.config.segment_bytes == 1 << 20


def test_validate_only_and_list_operations(broker):
    assert alter(broker, "", ("log.cleanup.policy", APPEND, "compact"), validate_only=True) == (0, None)
    assert broker.node.dynamic.default == {}
    assert alter(broker, "", ("log.cleanup.policy", APPEND, "compact")) == (0, None)   # from Kafka's default
    assert broker.node.dynamic.default == {"log.cleanup.policy": "delete,compact"}
    assert broker.node.partition("t", 0).log.config.compact
    assert alter(broker, "", ("log.cleanup.policy", SUBTRACT, "delete")) == (0, None)
    assert broker.node.partition("t", 0).log.config.cleanup_policy == ("compact",)


def test_alter_configs_replaces_the_entity_and_restart_keeps_it(tmp_path):
    b = open_broker(tmp_path / "d")
    b.node.create_topic("t", 1)
    r = call(b, ApiKey.ALTER_CONFIGS, 2, {"resources": [{"resource_type": 4, "resource_name": "0", "configs": [
        {"name": "min.insync.replicas", "value": "2"}, {"name": "message.max.bytes", "value": "5000"}]}],
        "validate_only": False})
    assert r["responses"][0]["error_code"] == 0, r
    r = call(b, ApiKey.ALTER_CONFIGS, 2, {"resources": [{"resource_type": 4, "resource_name": "0", "configs": [
        {"name": "min.insync.replicas", "value": "2"}]}], "validate_only": False})
    assert b.node.dynamic.broker == {"min.insync.replicas": "2"}                  # AlterConfigs: the whole set
    assert b.node.partition("t", 0).log.config.max_message_bytes == 1024 * 1024 + 12
    b.node.close()
    b = open_broker(tmp_path / "d")
    assert b.node.dynamic.broker == {"min.insync.replicas": "2"}
    assert b.node.partition("t", 0).log.config.min_insync_replicas == 2
    assert describe(b, 4, "0", ["min.insync.replicas"])["min.insync.replicas"]["config_source"] == DYNAMIC_BROKER
    b.node.close()


def test_dynamic_config_object_drops_bad_stored_values_and_runs_hooks_on_change():
    dynamic = DynamicBrokerConfig(BrokerConfig())
    seen = []
    dynamic.add_hook(lambda old, new: seen.append((old.min_insync_replicas, new.min_insync_replicas)))
    dynamic.apply({"min.insync.replicas": "2", "log.retention.ms": "x"}, {})
    assert dynamic.default == {"min.insync.replicas": "2"} and seen == [(1, 2)]
    dynamic.apply({"min.insync.replicas": "2"}, {})
    assert seen == [(1, 2)]                                                        # nothing changed: no hook
    dynamic.apply({"min.insync.replicas": "2"}, {"min.insync.replicas": "3"})
    assert dynamic.current.min_insync_replicas == 3 and seen[-1] == (2, 3)
    with pytest.raises(InvalidRequestError, match="Cannot update these configs dynamically: Set\\(broker.id\\)"):
        dynamic.validate("0", {"broker.id": "1"}, frozenset({"min.insync.replicas"}), frozenset())

"""Kafka's ZooKeeper layout (pre-KRaft), as seglog uses it under its chroot, and the JSON in each znode.

```
/brokers/ids/<id>                          ephemeral  {"version":4,"host","port","endpoints","rack",...}; epoch = czxid
/brokers/topics/<topic>                    persistent {"version":3,"topic_id","partitions":{"0":[1,2]},
                                                      "adding_replicas":{"0":[3]},"removing_replicas":{"0":[1]}}
                                           (partitions being reassigned, KIP-455: "partitions" holds the
                                           target replicas then the original ones, as Kafka writes it)
/brokers/topics/<topic>/partitions/<p>/state  {"version":1,"leader","leader_epoch","isr","controller_epoch"}
/controller                                ephemeral  {"version":1,"brokerid","timestamp"}
/controller_epoch                          persistent "<epoch>" (a decimal string, as Kafka writes it)
/config/topics/<topic>                     persistent {"version":1,"config":{...}}
/admin/delete_topics/<topic>               persistent, empty: the topic is queued for deletion
/admin/controlled_shutdown/<id>            ephemeral  {"version":1,"broker_epoch"}: seglog's ControlledShutdown request
/latest_producer_id_block                  persistent {"version":1,"broker","block_start","block_end"}
/cluster/id                                persistent {"version":"1","id":"<cluster id>"}, created by the first broker
/config/users/<user>[/clients/<client-id>] persistent {"version":1,"config":{"producer_byte_rate":"1024",...}}
                                           (a user's node also holds its SCRAM credentials: "SCRAM-SHA-512":
                                           "salt=...,stored_key=...,server_key=...,iterations=4096")
/config/clients/<client-id>                persistent the same: client quotas (names sanitized, <default>)
/config/brokers/<id> | <default>           persistent the same: dynamic broker configs (replication throttled rates)
/config/changes/config_change_<n>          persistent sequential {"version":2,"entity_path":"users/alice"}
```
Topic ids are written as Kafka prints them: URL-safe base64 of the 16 bytes, without padding.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from typing import Mapping

from ..errors import InvalidReplicaAssignmentError
from .metastore import (BrokerInfo, MalformedTopicError, PartitionState, TopicAssignment, topic_config,
                        validate_replica_assignment)

BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG_TOPICS = "/config/topics"
DELETE_TOPICS = "/admin/delete_topics"
CONTROLLED_SHUTDOWN = "/admin/controlled_shutdown"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CLUSTER_ID = "/cluster/id"
ACL_ROOTS = {"Literal": "/kafka-acl", "Prefixed": "/kafka-acl-extended/prefixed"}
ACL_CHANGE_DIRS = ("/kafka-acl-changes", "/kafka-acl-extended-changes")
ACL_CHANGE_PREFIX = "acl_changes_"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
NOTIFICATION_RETENTION_MS = 15 * 60 * 1000       # Kafka's ZkNodeChangeNotificationListener purges older ones
PERSISTENT_PATHS = (BROKER_IDS, TOPICS, CONFIG_TOPICS, DELETE_TOPICS, CONTROLLED_SHUTDOWN, *ACL_CHANGE_DIRS,
                    CONFIG_CHANGES)
"""Created at connect (Kafka's top-level paths); ``/controller_epoch`` is created by the first election."""


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def controlled_shutdown_path(broker_id: int) -> str:
    return f"{CONTROLLED_SHUTDOWN}/{broker_id}"


def encode_shutdown_request(broker_epoch: int) -> bytes:
    return _json({"version": 1, "broker_epoch": broker_epoch})


def decode_shutdown_request(data: bytes) -> int:
    return int(json.loads(data)["broker_epoch"])


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _now_ms() -> str:
    return str(int(time.time() * 1000))


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def encode_broker(info: BrokerInfo) -> bytes:
    endpoints = info.endpoints or (("PLAINTEXT", "PLAINTEXT", info.host, info.port),)
    value = {"version": 4, "host": info.host, "port": info.port, "jmx_port": -1, "timestamp": _now_ms(),
             "endpoints": [f"{name}://{_host(host)}:{port}" for name, _, host, port in endpoints],
             "listener_security_protocol_map": {name: protocol for name, protocol, _, _ in endpoints}}
    if info.rack is not None:
        value["rack"] = info.rack
    return _json(value)


def decode_broker(broker_id: int, data: bytes, epoch: int) -> BrokerInfo:
    value = json.loads(data)
    protocols = value.get("listener_security_protocol_map") or {}
    endpoints = []
    for endpoint in value.get("endpoints") or ():
        name, _, address = endpoint.partition("://")
        host, _, port = address.rpartition(":")
        endpoints.append((name, protocols.get(name, name), host.strip("[]"), int(port)))
    if endpoints == [("PLAINTEXT", "PLAINTEXT", value["host"], value["port"])]:
        endpoints = []                                 # one PLAINTEXT listener at host:port: BrokerInfo's default
    return BrokerInfo(broker_id, value["host"], value["port"], value.get("rack"), epoch, tuple(endpoints))


def encode_topic_id(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def decode_topic_id(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def encode_topic(assignment: TopicAssignment) -> bytes:
    return _json({"version": 3, "topic_id": encode_topic_id(assignment.topic_id),
                  "partitions": {str(p): list(rs) for p, rs in assignment.partitions.items()},
                  "adding_replicas": {str(p): list(rs) for p, rs in assignment.adding.items()},
                  "removing_replicas": {str(p): list(rs) for p, rs in assignment.removing.items()}})


MAX_BROKER_ID = 2**31 - 1
"""Broker ids are Kafka's int32s."""
_PARTITION_KEY = re.compile(r"0|[1-9][0-9]{0,9}")


def decode_topic(topic: str, data: bytes) -> TopicAssignment:
    """The assignment a topic node holds; MalformedTopicError (naming the node and what is wrong) for anything
    that is not the JSON Kafka writes: partitions "0".."n-1", each a non-empty list of distinct broker ids (ints
    0..2^31-1), a topic id of 16 bytes, adding/removing replicas that are parts of their partition's."""
    def bad(why: str) -> MalformedTopicError:
        return MalformedTopicError(f"Topic node {topic_path(topic)} cannot be read ({why}): topic '{topic}' is "
                                   "left out until the node is repaired")
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as e:          # not JSON, not UTF-8, nested too deeply
        raise bad(f"not JSON: {str(e)[:80]}") from None
    if not isinstance(value, dict):
        raise bad(f"a JSON {type(value).__name__}, not an object")

    def replica_map(name: str, required: bool) -> dict[int, list[int]]:
        entries = value.get(name)
        if entries is None and not required:
            return {}
        if not isinstance(entries, dict) or (required and not entries):
            raise bad(f'"{name}" is {str(entries)[:40]!r}, not an object of partitions')
        out = {}
        for key, replicas in entries.items():
            if not _PARTITION_KEY.fullmatch(key):
                raise bad(f'"{name}" has partition {key[:40]!r}, not a partition number')
            if not isinstance(replicas, list) or not all(
                    type(r) is int and 0 <= r <= MAX_BROKER_ID for r in replicas) \
                    or len(set(replicas)) != len(replicas):
                raise bad(f'"{name}" of partition {key} is {str(replicas)[:40]!r}, not a list of distinct '
                          "broker ids")
            out[int(key)] = replicas
        return out
    partitions = replica_map("partitions", True)
    if sorted(partitions) != list(range(len(partitions))):
        raise bad(f"partitions {sorted(partitions)[:10]} are not numbered 0..{len(partitions) - 1}")
    topic_id = value.get("topic_id")
    try:
        if not isinstance(topic_id, str):
            raise ValueError("not a string")
        topic_id = decode_topic_id(topic_id)
    except ValueError as e:
        raise bad(f"topic_id {str(topic_id)[:40]!r} is not a topic id: {e}") from None
    adding, removing = replica_map("adding_replicas", False), replica_map("removing_replicas", False)
    if not set(adding) | set(removing) <= set(partitions):
        raise bad(f"replicas are added to or removed from partitions {sorted(set(adding) | set(removing))[:10]} "
                  f"of a topic with {len(partitions)}")
    assignment = TopicAssignment(topic, partitions, topic_id, adding, removing)
    try:
        for p in assignment.partitions:
            validate_replica_assignment(p, assignment.replica_assignment(p))
    except InvalidReplicaAssignmentError as e:
        raise bad(str(e)) from None
    return assignment


def encode_config(config: Mapping[str, str]) -> bytes:
    return _json({"version": 1, "config": topic_config(config)})


def decode_config(data: bytes) -> dict[str, str]:
    return dict(json.loads(data)["config"])


def encode_entity_config(config: Mapping[str, str]) -> bytes:
    """A user's or client id's configs (client quotas, a user's SCRAM credentials), as Kafka's /config/users and
    /config/clients nodes."""
    return _json({"version": 1, "config": dict(config)})


def decode_entity_config(data: bytes) -> dict[str, str]:
    """The configs of an entity node (an empty node, a parent created for a user's clients: none)."""
    return dict(json.loads(data)["config"]) if data else {}


def config_change(entity_path: str) -> bytes:
    """The notification of an entity's config change under /config/changes, as Kafka writes it."""
    return _json({"version": 2, "entity_path": entity_path})


def encode_partition_state(state: PartitionState) -> bytes:
    return _json({"version": 1, "leader": state.leader, "leader_epoch": state.leader_epoch,
                  "isr": list(state.isr), "controller_epoch": state.controller_epoch})


def decode_partition_state(data: bytes, version: int, written: int = -1) -> PartitionState:
    """The state in a znode read at ``version``, whose last write was transaction ``written`` (its mzxid)."""
    value = json.loads(data)
    return PartitionState(value["leader"], value["leader_epoch"], value["isr"], value["controller_epoch"], version,
                          written)


def encode_controller(broker_id: int) -> bytes:
    return _json({"version": 1, "brokerid": broker_id, "timestamp": _now_ms()})


def decode_controller(data: bytes) -> int:
    return int(json.loads(data)["brokerid"])


def encode_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_epoch(data: bytes) -> int:
    return int(data)


def encode_producer_id_block(broker_id: int, start: int, end: int) -> bytes:
    return json.dumps({"version": 1, "broker": broker_id, "block_start": str(start),
                       "block_end": str(end)}).encode()


def decode_producer_id_block_end(data: bytes) -> int:
    """The last id of the stored block (-1 when the node is empty)."""
    if not data:
        return -1
    return int(json.loads(data)["block_end"])


def acl_path(key: tuple[str, str, str]) -> str:
    """/kafka-acl/<Type>/<name> for a literal pattern, /kafka-acl-extended/prefixed/<Type>/<name> for a prefix."""
    resource_type, pattern_type, name = key
    return f"{ACL_ROOTS[pattern_type]}/{resource_type}/{name}"


def encode_acls(entries: list[dict]) -> bytes:
    return _json({"version": 1, "acls": entries})


def decode_acls(data: bytes) -> list[dict]:
    return list(json.loads(data)["acls"]) if data else []


def acl_change(key: tuple[str, str, str]) -> tuple[str, bytes]:
    """(directory, data) of the change notification for a pattern, as Kafka writes them: "Topic:orders" under
    /kafka-acl-changes for a literal one, JSON under /kafka-acl-extended-changes for a prefix."""
    resource_type, pattern_type, name = key
    if pattern_type == "Literal":
        return ACL_CHANGE_DIRS[0], f"{resource_type}:{name}".encode()
    return ACL_CHANGE_DIRS[1], _json({"version": 1, "resourceType": resource_type, "name": name,
                                      "patternType": pattern_type})


def encode_cluster_id(cluster_id: str) -> bytes:
    return _json({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(json.loads(data)["id"])

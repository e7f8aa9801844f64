"""The CLI's Admin over a broker (``--bootstrap-server``): ``connect(bootstrap_servers, client_id=...)``.

Every method is Kafka admin requests, so it works against any seglog broker or cluster (and, for what
Kafka and seglog share, a Kafka broker):

=================================  ==============================================================================
topics: list, describe             Metadata (partitions with leader, replicas, ISR) + DescribeConfigs (overrides
                                   are the entries whose source is the topic, the effective config all of them)
create, add partitions, delete     CreateTopics / CreatePartitions / DeleteTopics at the controller
                                   (NOT_CONTROLLER: find the controller again and resend); then wait (up to
                                   10 s) until every broker's metadata shows the change, so the next command sees
                                   it whichever broker it asks
offsets                            ListOffsets (earliest, latest) at each partition's leader
groups                             ListGroups at every broker, DescribeGroups / OffsetFetch / OffsetCommit
                                   (generation -1: a simple commit) at the group's coordinator
producer(), consumer()             seglog.Producer / seglog.Consumer over a seglog.remote.RemoteNode of their
                                   own (own connections, so a consumer's long poll never holds up the admin)
=================================  ==============================================================================

Not over the wire yet, because the broker does not implement the API: changing topic configs (Kafka's
AlterConfigs / IncrementalAlterConfigs) and deleting groups (DeleteGroups). Both raise
:class:`UnsupportedOverWireError` with a one-line explanation; nothing is changed.
"""

from __future__ import annotations

import time
from typing import Iterable, Mapping, Sequence

from ..assignors import Assignment
from ..cli.admin import Admin, GroupInfo, GroupListing, MemberInfo, PartitionInfo, TopicDescription
from ..cli.datadir import CONSUMER_PROPERTIES, PRODUCER_PROPERTIES, client_kwargs
from ..consumer import Consumer
from ..errors import InvalidTopicError, NetworkError, SeglogError, UnsupportedVersionError, for_code
from ..offsets_format import OffsetAndMetadata, TopicPartition
from ..producer import Producer
from ..protocol import ApiKey
from ..remote import EARLIEST, LATEST, RemoteNode, error_for

__all__ = ["BrokerAdmin", "UnsupportedOverWireError", "connect"]

RESOURCE_TOPIC = 2
CONFIG_SOURCE_TOPIC = 1
ADMIN_TIMEOUT_MS = 30000
PROPAGATION_WAIT_S = 10.0
# ListGroups answers meaning "this broker coordinates no group (yet)": the offsets topic is not there or
# not loaded here.
NO_GROUPS_HERE = frozenset({3, 14, 15, 16})


class UnsupportedOverWireError(UnsupportedVersionError):
    """An operation the broker has no API for (yet): possible on a data dir, not over --bootstrap-server."""


def connect(bootstrap_servers: str, *, client_id: str = "seglog-cli") -> "BrokerAdmin":
    """The Admin over the cluster behind ``bootstrap_servers`` ("host:port[,host:port...]"). Fails at once
    (NetworkError) when no bootstrap server answers."""
    return BrokerAdmin(bootstrap_servers, client_id=client_id)


class BrokerAdmin(Admin):
    """Admin over Kafka admin requests (see the module docstring). ``live``: other clients write while a
    command runs, so `consume` waits for records."""

    live = True

    def __init__(self, bootstrap_servers: str, *, client_id: str = "seglog-cli", retry_timeout: float = 30.0):
        self.bootstrap_servers = bootstrap_servers
        self.client_id = client_id
        self.retry_timeout = retry_timeout
        self.node = RemoteNode(bootstrap_servers, client_id=client_id, retry_timeout=retry_timeout)
        self.cluster = self.node.cluster
        self._clients: list[RemoteNode] = []
        try:
            self.cluster.metadata([])                  # reach a broker now: a wrong address fails here
        except BaseException:
            self.node.close()
            raise

    def close(self) -> None:
        for node in self._clients:
            node.close()
        self._clients.clear()
        self.node.close()

    # -- topics ---------------------------------------------------------------------------------------------

    def list_topics(self, include_internal: bool = True) -> list[str]:
        return self.node.topics(include_internal=include_internal)

    def describe_topic(self, name: str) -> TopicDescription:
        entry = self.cluster.topic(name, refresh=True)
        parts = tuple(PartitionInfo(p["partition_index"], p["leader_id"], tuple(p["replica_nodes"]),
                                    tuple(p["isr_nodes"]))
                      for p in sorted(entry["partitions"], key=lambda p: p["partition_index"]))
        overrides, effective = self._topic_configs(name)
        # Metadata v10+ carries topic ids; seglog's broker speaks up to v8, so the id is not known here.
        return TopicDescription(name, None, parts, overrides, effective, bool(entry.get("is_internal")))

    def _topic_configs(self, name: str) -> tuple[dict[str, str], dict[str, str]]:
        body = {"resources": [{"resource_type": RESOURCE_TOPIC, "resource_name": name, "configuration_keys": None}],
                "include_synonyms": False, "include_documentation": False}
        r = self.cluster.any().request(ApiKey.DESCRIBE_CONFIGS, body)
        [res] = r["results"]
        if res["error_code"]:
            raise error_for(res["error_code"], res["error_message"])
        overrides, effective = {}, {}
        for c in res["configs"]:
            if c["value"] is None:                          # sensitive: never shown
                continue
            effective[c["name"]] = c["value"]
            source = c["config_source"]
            if source == CONFIG_SOURCE_TOPIC or source == -1 and not c["is_default"]:   # v0 has no source
                overrides[c["name"]] = c["value"]
        return overrides, effective

    def create_topic(self, name: str, partitions: int | None, replication_factor: int | None,
                     config: Mapping[str, str]) -> None:
        body = {"topics": [{"name": name, "num_partitions": -1 if partitions is None else partitions,
                            "replication_factor": -1 if replication_factor is None else replication_factor,
                            "assignments": [],
                            "configs": [{"name": k, "value": str(v)} for k, v in config.items()]}],
                "timeout_ms": ADMIN_TIMEOUT_MS, "validate_only": False}
        r = self.cluster.controller_request(ApiKey.CREATE_TOPICS, body, lambda r: r["topics"][0]["error_code"])
        [res] = r["topics"]
        if res["error_code"]:
            raise error_for(res["error_code"], res["error_message"])
        self._await_everywhere(name, lambda t: t is not None and bool(t["partitions"]) and
                               all(p["leader_id"] >= 0 for p in t["partitions"]))

    def create_partitions(self, name: str, total: int) -> None:
        body = {"topics": [{"name": name, "count": total, "assignments": None}], "timeout_ms": ADMIN_TIMEOUT_MS,
                "validate_only": False}
        r = self.cluster.controller_request(ApiKey.CREATE_PARTITIONS, body, lambda r: r["results"][0]["error_code"])
        [res] = r["results"]
        if res["error_code"]:
            raise error_for(res["error_code"], res["error_message"])
        self._await_everywhere(name, lambda t: t is not None and len(t["partitions"]) >= total and
                               all(p["leader_id"] >= 0 for p in t["partitions"]))

    def alter_topic_config(self, name: str, set_: Mapping[str, str], delete: Sequence[str]) -> None:
        raise UnsupportedOverWireError(
            f"changing topic configs is not supported over --bootstrap-server yet: the broker has no "
            f"AlterConfigs/IncrementalAlterConfigs API; topic {name} was not changed (stop the broker and use "
            f"--data-dir, or recreate the topic with --config)")

    def delete_topic(self, name: str) -> None:
        entry = self.cluster.topic(name, refresh=True)
        if entry.get("is_internal"):                       # kafka-topics.sh refuses this before asking
            raise InvalidTopicError(f"The internal topic {name} cannot be deleted")
        body = {"topic_names": [name], "timeout_ms": ADMIN_TIMEOUT_MS}
        r = self.cluster.controller_request(ApiKey.DELETE_TOPICS, body, lambda r: r["responses"][0]["error_code"])
        [res] = r["responses"]
        if res["error_code"]:
            raise error_for(res["error_code"], f"deleting topic {name} failed: "
                                               f"{for_code(res['error_code']).kafka_name}")
        self._await_everywhere(name, lambda t: t is None)

    def _await_everywhere(self, name: str, done) -> bool:
        """Wait until every broker's metadata for topic `name` satisfies done(entry or None); give up quietly
        after PROPAGATION_WAIT_S (the change is made; brokers catch up on their own)."""
        end = time.monotonic() + PROPAGATION_WAIT_S
        self.cluster.forget(name)
        while True:
            try:
                if all(done(self._topic_at(b, name)) for b in self.cluster.broker_ids()):
                    return True
            except NetworkError:
                pass
            if time.monotonic() >= end:
                return False
            time.sleep(0.05)

    def _topic_at(self, broker_id: int, name: str) -> dict | None:
        r = self.cluster.broker(broker_id).request(ApiKey.METADATA, {"topics": [{"name": name}],
                                                                      "allow_auto_topic_creation": False})
        entry = next((t for t in r["topics"] if t["name"] == name), None)
        return entry if entry is not None and entry["error_code"] == 0 else None

    # -- offsets --------------------------------------------------------------------------------------------

    def offset_ranges(self, partitions: Iterable[tuple[str, int]]) -> dict[TopicPartition, tuple[int, int] | None]:
        tps = list(dict.fromkeys(TopicPartition(*tp) for tp in partitions))
        for topic in {tp.topic for tp in tps}:
            self.cluster.forget(topic)
        starts = self.cluster.list_offsets(tps, EARLIEST)
        ends = self.cluster.list_offsets([tp for tp in tps if starts.get(tp) is not None], LATEST)
        out: dict[TopicPartition, tuple[int, int] | None] = {}
        for tp in tps:
            start, end = starts.get(tp), ends.get(tp)
            out[tp] = None if start is None or end is None else (start.offset, end.offset)
        return out

    # -- groups ---------------------------------------------------------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        found: dict[str, str] = {}
        for b in self.cluster.broker_ids():
            r = self.cluster.broker(b).request(ApiKey.LIST_GROUPS, {})
            if r["error_code"] in NO_GROUPS_HERE:
                continue
            if r["error_code"]:
                raise error_for(r["error_code"], f"ListGroups at broker {b} failed")
            for g in r["groups"]:
                found.setdefault(g["group_id"], g["protocol_type"])
        out = []
        for gid in sorted(found):
            info = self.describe_group(gid)
            if info.state != "Dead":
                out.append(GroupListing(gid, info.state, info.protocol_type or found[gid]))
        return out

    def describe_group(self, group_id: str) -> GroupInfo:
        entry, (node_id, host, port) = self.node.group_coordinator.describe_group(group_id)
        members = []
        for m in entry["members"]:
            tps: tuple[TopicPartition, ...] = ()
            if entry["protocol_type"] == "consumer" and m["member_assignment"]:
                tps = tuple(TopicPartition(*tp) for tp in Assignment.decode(m["member_assignment"]).partitions)
            members.append(MemberInfo(m["member_id"], m["client_id"], m["client_host"], tps))
        return GroupInfo(group_id, entry["group_state"] or "Dead", entry["protocol_type"], entry["protocol_data"],
                         tuple(members), f"{host}:{port} ({node_id})")

    def committed_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        stored = self.node.group_coordinator.fetch_offsets(group_id, None)
        return {tp: om.offset for tp, om in stored.items() if om is not None and om.offset >= 0}

    def alter_committed_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        request = {TopicPartition(*tp): OffsetAndMetadata(int(o)) for tp, o in offsets.items()}
        errors = self.node.group_coordinator.commit_offsets(group_id, request)
        failed = [e for e in errors.values() if e is not None]
        if failed:
            raise failed[0]

    def delete_groups(self, group_ids: Sequence[str]) -> dict[str, SeglogError | None]:
        raise UnsupportedOverWireError(
            f"deleting consumer groups is not supported over --bootstrap-server yet: the broker has no "
            f"DeleteGroups API; nothing was deleted ({', '.join(repr(g) for g in group_ids)})")

    # -- clients --------------------------------------------------------------------------------------------

    def _client_node(self, client_id: str) -> RemoteNode:
        node = RemoteNode(self.bootstrap_servers, client_id=client_id, retry_timeout=self.retry_timeout)
        self._clients.append(node)
        return node

    def producer(self, properties: Mapping[str, str]) -> Producer:
        kw = client_kwargs(properties, PRODUCER_PROPERTIES, "producer")
        return Producer(self._client_node(kw.get("client_id", self.client_id)), **kw)

    def consumer(self, properties: Mapping[str, str]) -> Consumer:
        kw = client_kwargs(properties, CONSUMER_PROPERTIES, "consumer")
        return Consumer(self._client_node(kw.get("client_id", self.client_id)), **kw)


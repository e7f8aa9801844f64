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
change configs                     IncrementalAlterConfigs (SET / DELETE), then the same wait on DescribeConfigs
offsets                            ListOffsets (earliest, latest, by timestamp) at each partition's leader
groups                             ListGroups at every broker, DescribeGroups / OffsetFetch / OffsetCommit
                                   (generation -1: a simple commit) / DeleteGroups at the group's coordinator
ACLs                               CreateAcls / DescribeAcls / DeleteAcls at any broker (a cluster's ACLs are in
                                   ZooKeeper, every broker answers for all of them)
partition reassignment             AlterPartitionReassignments / ListPartitionReassignments at the controller
client quotas                      DescribeClientQuotas / AlterClientQuotas at any broker (ZooKeeper's, likewise)
producer(), consumer()             seglog.Producer / seglog.Consumer over a seglog.remote.RemoteNode of their
                                   own (own connections, so a consumer's long poll never holds up the admin)
=================================  ==============================================================================

Topic administration is seglog.remote.RemoteNode's (the same calls ``seglog.connect(...)`` offers).
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from .admin import Admin, GroupInfo, GroupListing, MemberInfo, PartitionInfo, TopicDescription, member_info
from ..broker.handler_support import RESOURCE_BROKER
from ..client import EARLIEST, LATEST, error_for
from ..cluster.metastore import ReplicaAssignment
from ..errors import SeglogError
from ..offsets_format import TopicPartition, partitions_by_topic
from ..protocol import ApiKey
from ..quotas.entities import QuotaEntity, entity_from_wire, entity_to_wire
from ..remote import RemoteNode
from ..security.acls import AclBinding, AclBindingFilter
from ..security.acls_wire import binding_from_wire, binding_to_wire, filter_to_wire
from ..security.client import ClientSecurity
from ..security.scram import MECHANISM_IDS
from ..txn.coordinator import TransactionDescription, TransactionListing

__all__ = ["BrokerAdmin"]

# ListGroups answers meaning "this broker coordinates no group (yet)": the offsets topic is not there or
# not loaded here.
NO_GROUPS_HERE = frozenset({3, 14, 15, 16})


class BrokerAdmin(Admin):
    """Admin over Kafka admin requests (see the module docstring). ``live``: other clients write while a
    command runs, so `consume` waits for records."""

    live = True

    def __init__(self, bootstrap_servers: str, *, client_id: str = "seglog-cli", retry_timeout: float = 30.0,
                 security: ClientSecurity | None = None):
        self.bootstrap_servers = bootstrap_servers
        self.client_id = client_id
        self.retry_timeout = retry_timeout
        self.node = RemoteNode(bootstrap_servers, client_id=client_id, retry_timeout=retry_timeout, security=security)
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

    def describe_topic(self, name: str) -> TopicDescription:
        return self._describe(self.cluster.topic(name, refresh=True))

    def ensure_topic(self, name: str) -> TopicDescription:
        """As Kafka's clients: Metadata with allow_auto_topic_creation, so a broker with
        auto.create.topics.enable creates a missing topic (UnknownTopicOrPartitionError otherwise)."""
        return self._describe(self.cluster.topic(name, refresh=True, auto_create=True))

    def _describe(self, entry: dict) -> TopicDescription:
        name = entry["name"]
        parts = tuple(PartitionInfo(p["partition_index"], p["leader_id"], tuple(p["replica_nodes"]),
                                    tuple(p["isr_nodes"]))
                      for p in sorted(entry["partitions"], key=lambda p: p["partition_index"]))
        overrides, effective = self.node.topic_config(name)
        topic_id = entry.get("topic_id")          # Metadata v10+; a broker without topic ids answers zeros
        return TopicDescription(name, topic_id if topic_id and topic_id.int else None, parts, overrides, effective,
                                bool(entry.get("is_internal")))

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

    def offsets_for_times(self, partitions: Iterable[tuple[str, int]], timestamp: int
                          ) -> dict[TopicPartition, int | None]:
        tps = list(dict.fromkeys(TopicPartition(*tp) for tp in partitions))
        found = self.cluster.list_offsets(tps, timestamp)
        return {tp: None if found.get(tp) is None else found[tp].offset for tp in tps}

    def delete_records(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | SeglogError]:
        """DeleteRecords at each partition's leader (leaders from fresh metadata)."""
        out: dict[TopicPartition, int | SeglogError] = {}
        by_leader: dict[int, list[TopicPartition]] = {}
        for topic in {tp.topic for tp in offsets}:
            self.cluster.forget(topic)
        for tp in offsets:
            try:
                by_leader.setdefault(self.cluster.leader_id(*tp), []).append(tp)
            except SeglogError as e:
                out[tp] = e
        for leader, tps in by_leader.items():
            topics: dict[str, list] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "offset": offsets[tp]})
            r = self.cluster.broker(leader).request(ApiKey.DELETE_RECORDS, {
                "timeout_ms": int(self.retry_timeout * 1000),
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
            for t in r["topics"]:
                for p in t["partitions"]:
                    tp = TopicPartition(t["name"], p["partition_index"])
                    code = p["error_code"]
                    out[tp] = p["low_watermark"] if code == 0 else error_for(
                        code, f"DeleteRecords of {tp.topic}-{tp.partition} at broker {leader} failed")
        return out

    def log_dirs(self, brokers: Sequence[int] | None) -> dict[int, list[dict]]:
        out: dict[int, list[dict]] = {}
        for b in self.cluster.broker_ids() if brokers is None else brokers:
            r = self.cluster.broker(b).request(ApiKey.DESCRIBE_LOG_DIRS, {"topics": None})
            out[b] = [{"logDir": d["log_dir"], "error": None if d["error_code"] == 0 else error_for(
                          d["error_code"]).kafka_name,
                       "partitions": [{"topic": t["name"], "partition": p["partition_index"],
                                       "size": p["partition_size"], "offsetLag": p["offset_lag"],
                                       "isFuture": p["is_future_key"]} for t in d["topics"] for p in t["partitions"]]}
                      for d in r["results"]]
        return out

    def alter_replica_log_dirs(self, moves: Mapping[tuple[str, int, int], str]
                               ) -> dict[tuple[str, int, int], SeglogError | None]:
        out: dict[tuple[str, int, int], SeglogError | None] = {}
        by_broker: dict[int, dict[str, dict[str, list[int]]]] = {}
        for (t, p, b), d in moves.items():
            by_broker.setdefault(b, {}).setdefault(d, {}).setdefault(t, []).append(p)
        for b, dirs in sorted(by_broker.items()):
            r = self.cluster.broker(b).request(ApiKey.ALTER_REPLICA_LOG_DIRS, {"dirs": [
                {"path": d, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                for d, topics in dirs.items()]})
            out.update({(t["topic_name"], p["partition_index"], b): None if p["error_code"] == 0 else error_for(
                p["error_code"], f"AlterReplicaLogDirs of {t['topic_name']}-{p['partition_index']} at broker {b}")
                for t in r["results"] for p in t["partitions"]})
        return out

    def alter_broker_config(self, broker_id: int | None, set_: Mapping[str, str], delete: Sequence[str]) -> None:
        """IncrementalAlterConfigs of one broker's dynamic configs (None: every broker's default), sent to that
        broker (the default to any), as Kafka's clients send a broker resource; the error of a refused change."""
        configs = ([{"name": k, "config_operation": 0, "value": str(v)} for k, v in set_.items()]
                   + [{"name": k, "config_operation": 1, "value": None} for k in delete])
        conn = self.cluster.any() if broker_id is None else self.cluster.broker(broker_id)
        r = conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, {
            "resources": [{"resource_type": RESOURCE_BROKER, "resource_name": "" if broker_id is None else
                           str(broker_id), "configs": configs}], "validate_only": False})
        [res] = r["responses"]
        if res["error_code"]:
            raise error_for(res["error_code"], res["error_message"])

    def describe_broker_configs(self, broker_id: int | None) -> list[dict]:
        """DescribeConfigs with synonyms of one broker (None: the cluster's dynamic defaults), asked of that broker
        (the default of any): its config entries (name, value, read_only, config_source, is_sensitive,
        synonyms)."""
        conn = self.cluster.any() if broker_id is None else self.cluster.broker(broker_id)
        r = conn.request(ApiKey.DESCRIBE_CONFIGS, {"resources": [{
            "resource_type": RESOURCE_BROKER, "resource_name": "" if broker_id is None else str(broker_id),
            "configuration_keys": None}], "include_synonyms": True, "include_documentation": False})
        [res] = r["results"]
        if res["error_code"]:
            raise error_for(res["error_code"], res["error_message"])
        return res["configs"]

    # -- partition reassignment ---------------------------------------------------------------------------

    def alter_partition_reassignments(self, changes: Mapping[tuple[str, int], Sequence[int] | None]
                                      ) -> dict[tuple[str, int], SeglogError | None]:
        """AlterPartitionReassignments at the controller: per partition its target replicas, or None to cancel
        its reassignment. Per partition None (accepted) or its error (InvalidReplicaAssignmentError,
        NoReassignmentInProgressError, UnknownTopicOrPartitionError)."""
        by_topic: dict[str, list] = {}
        for (topic, p), replicas in changes.items():
            by_topic.setdefault(topic, []).append({"partition_index": p,
                                                   "replicas": None if replicas is None else list(replicas)})
        r = self.cluster.controller_request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, {
            "timeout_ms": int(self.retry_timeout * 1000),
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}, lambda r: r["error_code"])
        if r["error_code"]:
            raise error_for(r["error_code"], r["error_message"])
        return {(t["name"], p["partition_index"]): None if p["error_code"] == 0 else
                error_for(p["error_code"], p["error_message"]) for t in r["responses"] for p in t["partitions"]}

    def list_partition_reassignments(self, partitions: Iterable[tuple[str, int]] | None = None
                                     ) -> dict[tuple[str, int], ReplicaAssignment]:
        """ListPartitionReassignments at any reachable broker (each answers from the metadata store, so a paused
        controller does not hold up `seglog topics --describe`): the partitions (of those given; None: all)
        being reassigned, with their full replica set and the replicas being added and removed."""
        topics = None
        if partitions is not None:
            topics = [{"name": t, "partition_indexes": ps} for t, ps in partitions_by_topic(partitions).items()]
        r = self.cluster.any().request(ApiKey.LIST_PARTITION_REASSIGNMENTS, {
            "timeout_ms": int(self.retry_timeout * 1000), "topics": topics})
        if r["error_code"]:
            raise error_for(r["error_code"], r["error_message"])
        return {(t["name"], p["partition_index"]): ReplicaAssignment(p["replicas"], p["adding_replicas"],
                                                                     p["removing_replicas"])
                for t in r["topics"] for p in t["partitions"]}

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
        """As Kafka 4's tool: ConsumerGroupDescribe first (a KIP-848 consumer group: its assignor in
        ``protocol``, each member's current assignment), DescribeGroups for any other group."""
        consumer, (node_id, host, port) = self.node.group_coordinator.describe_consumer_group(group_id)
        if consumer is not None:
            members = tuple(MemberInfo(m["member_id"], m["client_id"], m["client_host"], tuple(sorted(
                TopicPartition(t["topic_name"], p) for t in m["assignment"]["topic_partitions"]
                for p in t["partitions"]))) for m in consumer["members"])
            return GroupInfo(group_id, consumer["group_state"], "consumer", consumer["assignor_name"], members,
                             f"{host}:{port} ({node_id})")
        entry, (node_id, host, port) = self.node.group_coordinator.describe_group(group_id)
        members = tuple(member_info(m["member_id"], m["client_id"], m["client_host"], entry["protocol_type"],
                                    m["member_assignment"]) for m in entry["members"])
        return GroupInfo(group_id, entry["group_state"] or "Dead", entry["protocol_type"], entry["protocol_data"],
                         members, f"{host}:{port} ({node_id})")

    # -- ACLs -----------------------------------------------------------------------------------------------

    def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        """CreateAcls; the first refused binding's error (the others are stored)."""
        conn = self.cluster.any()
        r = conn.request(ApiKey.CREATE_ACLS, {"creations": [binding_to_wire(b, "resource_pattern_type")
                                                            for b in bindings]})
        for result in r["results"]:
            if result["error_code"]:
                raise error_for(result["error_code"], result["error_message"])

    def describe_acls(self, selection: AclBindingFilter) -> list[AclBinding]:
        """DescribeAcls: every binding the filter matches."""
        conn = self.cluster.any()
        r = conn.request(ApiKey.DESCRIBE_ACLS, filter_to_wire(selection))
        if r["error_code"]:
            raise error_for(r["error_code"], r["error_message"])
        v = conn.version(ApiKey.DESCRIBE_ACLS)
        return [binding_from_wire({**res, **a}, v) for res in r["resources"] for a in res["acls"]]

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclBinding]:
        """DeleteAcls: the bindings deleted; the first refused filter's error."""
        conn = self.cluster.any()
        r = conn.request(ApiKey.DELETE_ACLS, {"filters": [filter_to_wire(f) for f in filters]})
        v = conn.version(ApiKey.DELETE_ACLS)
        deleted = []
        for result in r["filter_results"]:
            if result["error_code"]:
                raise error_for(result["error_code"], result["error_message"])
            deleted += [binding_from_wire(m, v) for m in result["matching_acls"]]
        return deleted

    # -- client quotas --------------------------------------------------------------------------------------

    def describe_client_quotas(self, components: Sequence[tuple[str, int, str | None]], strict: bool
                               ) -> list[tuple[QuotaEntity, dict[str, float]]]:
        """DescribeClientQuotas: the entities the filter matches ((entity type, match type, match) components,
        seglog.quotas.manager's MATCH_*) and their quotas."""
        r = self.cluster.any().request(ApiKey.DESCRIBE_CLIENT_QUOTAS, {
            "components": [{"entity_type": t, "match_type": m, "match": n} for t, m, n in components],
            "strict": strict})
        if r["error_code"]:
            raise error_for(r["error_code"], r["error_message"])
        return [(entity_from_wire(e["entity"]), {v["key"]: v["value"] for v in e["values"]})
                for e in r["entries"] or ()]

    def alter_client_quotas(self, entity: QuotaEntity, changes: Mapping[str, float | None]) -> None:
        """AlterClientQuotas of one entity: each key set to its value, or removed for None."""
        r = self.cluster.any().request(ApiKey.ALTER_CLIENT_QUOTAS, {"validate_only": False, "entries": [
            {"entity": entity_to_wire(entity), "ops": [{"key": k, "value": 0.0 if v is None else v,
                                                        "remove": v is None} for k, v in changes.items()]}]})
        for result in r["entries"]:
            if result["error_code"]:
                raise error_for(result["error_code"], result["error_message"])

    # -- SCRAM credentials ----------------------------------------------------------------------------------

    def describe_user_scram_credentials(self, users: Sequence[str] | None = None
                                        ) -> dict[str, dict[str, int] | SeglogError]:
        """DescribeUserScramCredentials of ``users`` (None: every user with credentials): per user its
        {mechanism: iterations}, or the error the broker gave for it (ResourceNotFoundError: none)."""
        r = self.cluster.any().request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
                                       {"users": None if users is None else [{"name": u} for u in users]})
        if r["error_code"]:
            raise error_for(r["error_code"], r["error_message"])
        names = {v: k for k, v in MECHANISM_IDS.items()}
        return {u["user"]: error_for(u["error_code"], u["error_message"]) if u["error_code"] else
                {names.get(c["mechanism"], str(c["mechanism"])): c["iterations"] for c in u["credential_infos"]}
                for u in r["results"]}

    def alter_user_scram_credentials(self, upserts: Sequence[tuple[str, str, int, bytes, bytes]],
                                     deletions: Sequence[tuple[str, str]]) -> None:
        """AlterUserScramCredentials: upserts (user, mechanism, iterations, salt, salted password) and deletions
        (user, mechanism); the first user's error is raised."""
        r = self.cluster.any().request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, {
            "deletions": [{"name": u, "mechanism": MECHANISM_IDS[m]} for u, m in deletions],
            "upsertions": [{"name": u, "mechanism": MECHANISM_IDS[m], "iterations": i, "salt": salt,
                            "salted_password": salted} for u, m, i, salt, salted in upserts]})
        for result in r["results"]:
            if result["error_code"]:
                raise error_for(result["error_code"], result["error_message"])

    # -- clients --------------------------------------------------------------------------------------------

    def list_transactions(self) -> list[tuple[int, TransactionListing]]:
        return self.node.txn_coordinator.list()[1]

    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        [d] = self.node.txn_coordinator.describe([transactional_id])
        if isinstance(d, SeglogError):
            raise d
        return d

    def _client_node(self, client_id: str | None) -> RemoteNode:
        """A RemoteNode of the client's own (own connections: a consumer's long poll never holds up the admin),
        closed with the admin."""
        node = RemoteNode(self.bootstrap_servers, client_id=client_id or self.client_id,
                          retry_timeout=self.retry_timeout, security=self.cluster.security)
        self._clients.append(node)
        return node


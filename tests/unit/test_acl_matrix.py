"""Every API the broker serves, authorized as Kafka's KafkaApis authorizes it (ZooKeeper-era AclAuthorizer
semantics): one row per request, naming the grants Kafka requires and the error a principal without them gets.

Each row is driven through the codec on a lone broker whose decisions are a real Authorizer's: (1) a principal
with no ACL is refused with the row's code (a listing API leaves the resource out instead), (2) the same
principal holding exactly the row's grants meets no authorization error, (3) a super user meets none either.
The table must name every API in HANDLERS: a new API without a row fails here."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Callable, NamedTuple

import pytest

from helpers.kafka_wire import record_batch
from seglog.broker.handlers import HANDLERS, Handlers
from seglog.broker.local_view import LocalView
from seglog.broker.metrics import Metrics
from seglog.broker.server import Broker as ServerBroker
from seglog.broker.server import Connection
from seglog.node import Node
from seglog.protocol import ApiKey, RequestHeader, decode_request, encode_request
from seglog.quotas.manager import ClientQuotas
from seglog.quotas.store import FileQuotaStore
from seglog.security.acls import (CLUSTER_NAME, AccessControlEntry, AclBinding, AclOperation, AclPermissionType,
                                  ResourcePattern, ResourceType)
from seglog.security.authorizer import Authorizer, FileAclStore
from seglog.security.credentials import FileCredentialStore
from seglog.security.sasl import SaslState
from test_broker_versions import Broker, _fetch_body, call

TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED, TOKEN_DENIED = 29, 30, 31, 53, 65
AUTHORIZATION_FAILED = frozenset({TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED, TOKEN_DENIED})
SASL_LISTENER = SimpleNamespace(name="SASL_PLAINTEXT", protocol="SASL_PLAINTEXT", tls=False)
Op, Res = AclOperation, ResourceType
USER, SUPER_USER, HOST = "User:alice", "User:admin", "127.0.0.1"


class AclBroker(Broker):
    """The handlers' broker whose decisions are ``authorizer``'s for ``principal`` (connecting from HOST), with
    the stores the security and quota APIs use, and a SASL (PLAIN) connection."""

    authorize_transactional_id = ServerBroker.authorize_transactional_id
    authorize_cluster = ServerBroker.authorize_cluster

    def allowed(self, operation, resource_type, name=CLUSTER_NAME):
        return self.authorizer.authorize(self.principal, HOST, operation, resource_type, name)

    def allowed_any(self, operation, resource_type):
        return self.authorizer.authorize_any(self.principal, HOST, operation, resource_type)

    def connection(self):
        return self.conn

    def new_connection(self):
        sasl = SaslState(("PLAIN",), self.credentials, {"alice": "alice-secret"}, 0)
        self.conn = Connection(SASL_LISTENER, HOST, self.principal, sasl)

    def grant(self, operation, resource_type, name=CLUSTER_NAME):
        [refused] = self.authorizer.create_acls([AclBinding(
            ResourcePattern(resource_type, name), AccessControlEntry(USER, "*", operation, AclPermissionType.ALLOW))])
        assert refused is None


@pytest.fixture
def broker(tmp_path):
    node = Node(tmp_path / "d", {"transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1})
    node.create_topic("t", 1)
    node.create_topic("u", 1)
    b = AclBroker(node=node, config=node.config, view=LocalView(node, 0, "127.0.0.1", 9092), metrics=Metrics(),
                  authorizer=Authorizer(FileAclStore(node.path), super_users=[SUPER_USER]),
                  credentials=FileCredentialStore(node.path), quotas=ClientQuotas(FileQuotaStore(node.path)),
                  principal=USER)
    b.handlers = Handlers(b)
    yield b
    b.authorizer.close()
    node.close()


class Row(NamedTuple):
    """One request and Kafka's rule for it. ``needs``: the grants (operation, resource type, name) that let it
    through; ``denied``: the code a principal without them gets (None: it is never refused); ``shown``: for a
    listing API, whether the response lists the resource (a principal without the grants sees nothing);
    ``prepare``: run once, as the super user, before the first request."""

    api: ApiKey
    version: int
    body: Callable[[AclBroker], dict]
    needs: tuple = ()
    denied: int | None = None
    shown: Callable[[dict], bool] | None = None
    prepare: Callable[[AclBroker], None] | None = None


def _produce(b, transactional=False):
    records = record_batch([(1, None, b"v", [])], transactional=transactional,
                           **({"producer_id": 5, "producer_epoch": 0, "base_sequence": 0} if transactional else {}))
    return {"transactional_id": None, "acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": records}]}]}


def _commit(b):
    return {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                     "committed_leader_epoch": -1, "committed_metadata": ""}]}]}


def _txn(b):
    return {"transactional_id": "tx", "producer_id": 5, "producer_epoch": 0}


def _sasl_authenticate(b):
    b.conn.sasl.handshake("PLAIN", 1)
    return {"auth_bytes": b"\0alice\0alice-secret"}


def _begin_transaction(b):
    """A transaction of "tx" holding a partition of t, begun by the super user."""
    r = call(b, ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": "tx", "transaction_timeout_ms": 60000})
    for _ in range(400):
        if r["error_code"] != 14:                   # COORDINATOR_LOAD_IN_PROGRESS: the state log loading
            break
        r = call(b, ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": "tx", "transaction_timeout_ms": 60000})
    assert r["error_code"] == 0
    r = call(b, ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": r["producer_id"],
        "v3_and_below_producer_epoch": r["producer_epoch"], "v3_and_below_topics": [{"name": "t", "partitions": [0]}]})
    assert r["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"] == 0


def _commit_group(b):
    """Group g with a committed offset, by the super user."""
    r = call(b, ApiKey.OFFSET_COMMIT, 8, _commit(b))
    assert r["topics"][0]["partitions"][0]["error_code"] == 0


def _acl_filter(name):
    return {"resource_type_filter": int(Res.TOPIC), "resource_name_filter": name, "pattern_type_filter": 3,
            "principal_filter": None, "host_filter": None, "operation": int(Op.ANY), "permission_type": 1}


ROWS = {
    "ApiVersions": Row(ApiKey.API_VERSIONS, 3, lambda b: {"client_software_name": "m",
                                                          "client_software_version": "1"}),
    "SaslHandshake": Row(ApiKey.SASL_HANDSHAKE, 1, lambda b: {"mechanism": "PLAIN"}),
    "SaslAuthenticate": Row(ApiKey.SASL_AUTHENTICATE, 2, _sasl_authenticate),
    "Metadata of every topic": Row(
        ApiKey.METADATA, 12, lambda b: {"topics": None, "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False},
        needs=((Op.DESCRIBE, Res.TOPIC, "t"),), shown=lambda r: "t" in {t["name"] for t in r["topics"]}),
    "Metadata of a topic": Row(
        ApiKey.METADATA, 12, lambda b: {"topics": [{"name": "t", "topic_id": uuid.UUID(int=0)}],
                                        "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False},
        needs=((Op.DESCRIBE, Res.TOPIC, "t"),), denied=TOPIC_DENIED),
    "Produce": Row(ApiKey.PRODUCE, 9, _produce, needs=((Op.WRITE, Res.TOPIC, "t"),), denied=TOPIC_DENIED),
    "Produce of transactional records": Row(
        ApiKey.PRODUCE, 9, lambda b: {**_produce(b, transactional=True), "transactional_id": "tx"},
        needs=((Op.WRITE, Res.TRANSACTIONAL_ID, "tx"), (Op.WRITE, Res.TOPIC, "t")), denied=TXN_DENIED),
    # the transactional id is Kafka's business only when the records are transactional
    "Produce of plain records with a transactional id": Row(
        ApiKey.PRODUCE, 9, lambda b: {**_produce(b), "transactional_id": "tx"}, needs=((Op.WRITE, Res.TOPIC, "t"),),
        denied=TOPIC_DENIED),
    "Fetch": Row(ApiKey.FETCH, 12, lambda b: _fetch_body({"topic": "t"}), needs=((Op.READ, Res.TOPIC, "t"),),
                 denied=TOPIC_DENIED),
    "Fetch of a follower": Row(ApiKey.FETCH, 12, lambda b: _fetch_body({"topic": "t"}, replica_id=1),
                               needs=((Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME),), denied=TOPIC_DENIED),
    "ListOffsets": Row(ApiKey.LIST_OFFSETS, 7, lambda b: {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]},
        needs=((Op.DESCRIBE, Res.TOPIC, "t"),), denied=TOPIC_DENIED),
    "OffsetForLeaderEpoch": Row(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, lambda b: {"replica_id": -1, "topics": [
        {"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
        needs=((Op.DESCRIBE, Res.TOPIC, "t"),), denied=TOPIC_DENIED),
    "OffsetForLeaderEpoch of a follower": Row(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, lambda b: {"replica_id": 1, "topics": [
        {"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
        needs=((Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME),), denied=CLUSTER_DENIED),
    "DeleteRecords": Row(ApiKey.DELETE_RECORDS, 2, lambda b: {"timeout_ms": 1000, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "offset": 0}]}]},
        needs=((Op.DELETE, Res.TOPIC, "t"),), denied=TOPIC_DENIED),
    "DescribeProducers": Row(ApiKey.DESCRIBE_PRODUCERS, 0, lambda b: {"topics": [
        {"name": "t", "partition_indexes": [0]}]}, needs=((Op.READ, Res.TOPIC, "t"),), denied=TOPIC_DENIED),
    "FindCoordinator of a group": Row(ApiKey.FIND_COORDINATOR, 4, lambda b: {"key_type": 0, "coordinator_keys": ["g"]},
                                      needs=((Op.DESCRIBE, Res.GROUP, "g"),), denied=GROUP_DENIED),
    "FindCoordinator of a transactional id": Row(
        ApiKey.FIND_COORDINATOR, 4, lambda b: {"key_type": 1, "coordinator_keys": ["tx"]},
        needs=((Op.DESCRIBE, Res.TRANSACTIONAL_ID, "tx"),), denied=TXN_DENIED),
    "JoinGroup": Row(ApiKey.JOIN_GROUP, 9, lambda b: {
        "group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
        "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}],
        "reason": None}, needs=((Op.READ, Res.GROUP, "g"),), denied=GROUP_DENIED),
    "SyncGroup": Row(ApiKey.SYNC_GROUP, 5, lambda b: {
        "group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None,
        "protocol_type": "consumer", "protocol_name": "range", "assignments": []},
        needs=((Op.READ, Res.GROUP, "g"),), denied=GROUP_DENIED),
    "Heartbeat": Row(ApiKey.HEARTBEAT, 4, lambda b: {"group_id": "g", "generation_id": 1, "member_id": "m",
                                                     "group_instance_id": None},
                     needs=((Op.READ, Res.GROUP, "g"),), denied=GROUP_DENIED),
    "LeaveGroup": Row(ApiKey.LEAVE_GROUP, 5, lambda b: {"group_id": "g", "members": [
        {"member_id": "m", "group_instance_id": None, "reason": None}]},
        needs=((Op.READ, Res.GROUP, "g"),), denied=GROUP_DENIED),
    "OffsetCommit": Row(ApiKey.OFFSET_COMMIT, 8, _commit,
                        needs=((Op.READ, Res.GROUP, "g"), (Op.READ, Res.TOPIC, "t")), denied=GROUP_DENIED),
    "OffsetFetch": Row(ApiKey.OFFSET_FETCH, 8, lambda b: {"require_stable": False, "groups": [
        {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]}]},
        needs=((Op.DESCRIBE, Res.GROUP, "g"), (Op.DESCRIBE, Res.TOPIC, "t")), denied=GROUP_DENIED),
    "DescribeGroups": Row(ApiKey.DESCRIBE_GROUPS, 5, lambda b: {"groups": ["g"],
                                                                "include_authorized_operations": False},
                          needs=((Op.DESCRIBE, Res.GROUP, "g"),), denied=GROUP_DENIED),
    "ListGroups": Row(ApiKey.LIST_GROUPS, 4, lambda b: {"states_filter": []}, needs=((Op.DESCRIBE, Res.GROUP, "g"),),
                      shown=lambda r: "g" in {g["group_id"] for g in r["groups"]}, prepare=_commit_group),
    "ListGroups with Describe on the cluster": Row(
        ApiKey.LIST_GROUPS, 4, lambda b: {"states_filter": []}, needs=((Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME),),
        shown=lambda r: "g" in {g["group_id"] for g in r["groups"]}, prepare=_commit_group),
    "DeleteGroups": Row(ApiKey.DELETE_GROUPS, 2, lambda b: {"groups_names": ["g"]},
                        needs=((Op.DELETE, Res.GROUP, "g"),), denied=GROUP_DENIED),
    "OffsetDelete": Row(ApiKey.OFFSET_DELETE, 0, lambda b: {"group_id": "g", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}]}]},
        needs=((Op.DELETE, Res.GROUP, "g"), (Op.READ, Res.TOPIC, "t")), denied=GROUP_DENIED),
    "ConsumerGroupHeartbeat": Row(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, lambda b: {
        "group_id": "g", "member_id": "m", "member_epoch": 0, "instance_id": None, "rack_id": None,
        "rebalance_timeout_ms": 10000, "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
        "server_assignor": None, "topic_partitions": []}, needs=((Op.READ, Res.GROUP, "g"),), denied=GROUP_DENIED),
    "ConsumerGroupDescribe": Row(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, lambda b: {
        "group_ids": ["g"], "include_authorized_operations": False},
        needs=((Op.DESCRIBE, Res.GROUP, "g"),), denied=GROUP_DENIED),
    "InitProducerId transactional": Row(
        ApiKey.INIT_PRODUCER_ID, 4, lambda b: {"transactional_id": "tx", "transaction_timeout_ms": 60000,
                                               "producer_id": -1, "producer_epoch": -1},
        needs=((Op.WRITE, Res.TRANSACTIONAL_ID, "tx"),), denied=TXN_DENIED),
    "InitProducerId idempotent": Row(
        ApiKey.INIT_PRODUCER_ID, 4, lambda b: {"transactional_id": None, "transaction_timeout_ms": 60000,
                                               "producer_id": -1, "producer_epoch": -1},
        needs=((Op.IDEMPOTENT_WRITE, Res.CLUSTER, CLUSTER_NAME),), denied=CLUSTER_DENIED),
    "AddPartitionsToTxn": Row(ApiKey.ADD_PARTITIONS_TO_TXN, 3, lambda b: {
        "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 5, "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": "t", "partitions": [0]}]},
        needs=((Op.WRITE, Res.TRANSACTIONAL_ID, "tx"), (Op.WRITE, Res.TOPIC, "t")), denied=TXN_DENIED),
    "AddPartitionsToTxn of a broker": Row(ApiKey.ADD_PARTITIONS_TO_TXN, 4, lambda b: {"transactions": [
        {"transactional_id": "tx", "producer_id": 5, "producer_epoch": 0, "verify_only": True,
         "topics": [{"name": "t", "partitions": [0]}]}]},
        needs=((Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME),), denied=CLUSTER_DENIED),
    "AddOffsetsToTxn": Row(ApiKey.ADD_OFFSETS_TO_TXN, 3, lambda b: {**_txn(b), "group_id": "g"},
                           needs=((Op.WRITE, Res.TRANSACTIONAL_ID, "tx"), (Op.READ, Res.GROUP, "g")),
                           denied=TXN_DENIED),
    "EndTxn": Row(ApiKey.END_TXN, 3, lambda b: {**_txn(b), "committed": False},
                  needs=((Op.WRITE, Res.TRANSACTIONAL_ID, "tx"),), denied=TXN_DENIED),
    "WriteTxnMarkers": Row(ApiKey.WRITE_TXN_MARKERS, 1, lambda b: {"markers": [
        {"producer_id": 5, "producer_epoch": 0, "transaction_result": False, "coordinator_epoch": 0,
         "topics": [{"name": "t", "partition_indexes": [0]}]}]},
        needs=((Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME),), denied=CLUSTER_DENIED),
    "TxnOffsetCommit": Row(ApiKey.TXN_OFFSET_COMMIT, 3, lambda b: {
        **_txn(b), "group_id": "g", "generation_id": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                 "committed_leader_epoch": -1, "committed_metadata": ""}]}]},
        needs=((Op.WRITE, Res.TRANSACTIONAL_ID, "tx"), (Op.READ, Res.GROUP, "g"), (Op.READ, Res.TOPIC, "t")),
        denied=TXN_DENIED),
    "DescribeTransactions": Row(ApiKey.DESCRIBE_TRANSACTIONS, 0, lambda b: {"transactional_ids": ["tx"]},
                                needs=((Op.DESCRIBE, Res.TRANSACTIONAL_ID, "tx"),), denied=TXN_DENIED),
    "ListTransactions": Row(ApiKey.LIST_TRANSACTIONS, 0, lambda b: {"state_filters": [], "producer_id_filters": []},
                            needs=((Op.DESCRIBE, Res.TRANSACTIONAL_ID, "tx"),),
                            shown=lambda r: "tx" in {t["transactional_id"] for t in r["transaction_states"]},
                            prepare=_begin_transaction),
    "CreateTopics": Row(ApiKey.CREATE_TOPICS, 7, lambda b: {"timeout_ms": 1000, "validate_only": False, "topics": [
        {"name": "v", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}]},
        needs=((Op.CREATE, Res.TOPIC, "v"),), denied=TOPIC_DENIED),
    "CreateTopics with Create on the cluster": Row(ApiKey.CREATE_TOPICS, 7, lambda b: {
        "timeout_ms": 1000, "validate_only": True, "topics": [
            {"name": "v", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}]},
        needs=((Op.CREATE, Res.CLUSTER, CLUSTER_NAME),), denied=TOPIC_DENIED),
    "DeleteTopics": Row(ApiKey.DELETE_TOPICS, 5, lambda b: {"topic_names": ["u"], "timeout_ms": 1000},
                        needs=((Op.DELETE, Res.TOPIC, "u"),), denied=TOPIC_DENIED),
    "CreatePartitions": Row(ApiKey.CREATE_PARTITIONS, 3, lambda b: {"timeout_ms": 1000, "validate_only": True,
                                                                    "topics": [{"name": "t", "count": 2,
                                                                                "assignments": None}]},
                            needs=((Op.ALTER, Res.TOPIC, "t"),), denied=TOPIC_DENIED),
    "DescribeConfigs of a topic": Row(ApiKey.DESCRIBE_CONFIGS, 4, lambda b: {
        "resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False},
        needs=((Op.DESCRIBE_CONFIGS, Res.TOPIC, "t"),), denied=TOPIC_DENIED),
    "DescribeConfigs of a broker": Row(ApiKey.DESCRIBE_CONFIGS, 4, lambda b: {
        "resources": [{"resource_type": 4, "resource_name": "0", "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False},
        needs=((Op.DESCRIBE_CONFIGS, Res.CLUSTER, CLUSTER_NAME),), denied=CLUSTER_DENIED),
    "AlterConfigs": Row(ApiKey.ALTER_CONFIGS, 2, lambda b: {"validate_only": True, "resources": [
        {"resource_type": 2, "resource_name": "t", "configs": [{"name": "retention.ms", "value": "1000"}]}]},
        needs=((Op.ALTER_CONFIGS, Res.TOPIC, "t"),), denied=TOPIC_DENIED),
    "AlterConfigs of a broker": Row(ApiKey.ALTER_CONFIGS, 2, lambda b: {"validate_only": True, "resources": [
        {"resource_type": 4, "resource_name": "0", "configs": [{"name": "log.retention.ms", "value": "1000"}]}]},
        needs=((Op.ALTER_CONFIGS, Res.CLUSTER, CLUSTER_NAME),), denied=CLUSTER_DENIED),
    "IncrementalAlterConfigs": Row(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, lambda b: {"validate_only": True, "resources": [
        {"resource_type": 2, "resource_name": "t",
         "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1000"}]}]},
        needs=((Op.ALTER_CONFIGS, Res.TOPIC, "t"),), denied=TOPIC_DENIED),
    "AlterReplicaLogDirs": Row(ApiKey.ALTER_REPLICA_LOG_DIRS, 2, lambda b: {"dirs": [
        {"path": b.node.path, "topics": [{"name": "t", "partitions": [0]}]}]},
        needs=((Op.ALTER, Res.CLUSTER, CLUSTER_NAME),), denied=CLUSTER_DENIED),
    "DescribeLogDirs": Row(ApiKey.DESCRIBE_LOG_DIRS, 4, lambda b: {"topics": None},
                           needs=((Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME),), denied=CLUSTER_DENIED),
    "DescribeCluster": Row(ApiKey.DESCRIBE_CLUSTER, 1, lambda b: {"include_cluster_authorized_operations": False,
                                                                  "endpoint_type": 1}),
    "ElectLeaders": Row(ApiKey.ELECT_LEADERS, 2, lambda b: {"election_type": 0, "timeout_ms": 1000,
                                                            "topic_partitions": [{"topic": "t", "partitions": [0]}]},
                        needs=((Op.ALTER, Res.CLUSTER, CLUSTER_NAME),), denied=CLUSTER_DENIED),
    "AlterPartitionReassignments": Row(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, lambda b: {"timeout_ms": 1000, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "replicas": None}]}]},
        needs=((Op.ALTER, Res.CLUSTER, CLUSTER_NAME),), denied=CLUSTER_DENIED),
    "ListPartitionReassignments": Row(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0,
                                      lambda b: {"timeout_ms": 1000, "topics": None},
                                      needs=((Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME),), denied=CLUSTER_DENIED),
    "DescribeClientQuotas": Row(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, lambda b: {"components": [], "strict": False},
                                needs=((Op.DESCRIBE_CONFIGS, Res.CLUSTER, CLUSTER_NAME),), denied=CLUSTER_DENIED),
    "AlterClientQuotas": Row(ApiKey.ALTER_CLIENT_QUOTAS, 1, lambda b: {"validate_only": True, "entries": [
        {"entity": [{"entity_type": "user", "entity_name": "bob"}],
         "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}]}]},
        needs=((Op.ALTER_CONFIGS, Res.CLUSTER, CLUSTER_NAME),), denied=CLUSTER_DENIED),
    # delegation tokens are disabled (seglog has none), but creating one for another owner is authorized first
    "CreateDelegationToken for another owner": Row(
        ApiKey.CREATE_DELEGATION_TOKEN, 3, lambda b: {"owner_principal_type": "User", "owner_principal_name": "bob",
                                                      "renewers": [], "max_lifetime_ms": -1},
        needs=((Op.CREATE_TOKENS, Res.USER, "User:bob"),), denied=TOKEN_DENIED),
    "CreateDelegationToken": Row(ApiKey.CREATE_DELEGATION_TOKEN, 3, lambda b: {
        "owner_principal_type": None, "owner_principal_name": None, "renewers": [], "max_lifetime_ms": -1}),
    "RenewDelegationToken": Row(ApiKey.RENEW_DELEGATION_TOKEN, 2, lambda b: {"hmac": b"x", "renew_period_ms": -1}),
    "ExpireDelegationToken": Row(ApiKey.EXPIRE_DELEGATION_TOKEN, 2, lambda b: {"hmac": b"x",
                                                                               "expiry_time_period_ms": -1}),
    "DescribeDelegationToken": Row(ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, lambda b: {"owners": None}),
    "DescribeUserScramCredentials": Row(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, lambda b: {"users": None},
                                        needs=((Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME),), denied=CLUSTER_DENIED),
    "AlterUserScramCredentials": Row(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, lambda b: {
        "deletions": [{"name": "bob", "mechanism": 1}], "upsertions": []},
        needs=((Op.ALTER, Res.CLUSTER, CLUSTER_NAME),), denied=CLUSTER_DENIED),
    "DescribeAcls": Row(ApiKey.DESCRIBE_ACLS, 3, lambda b: _acl_filter("t"),
                        needs=((Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME),), denied=CLUSTER_DENIED),
    "CreateAcls": Row(ApiKey.CREATE_ACLS, 3, lambda b: {"creations": [
        {"resource_type": int(Res.TOPIC), "resource_name": "w", "resource_pattern_type": 3, "principal": "User:bob",
         "host": "*", "operation": int(Op.READ), "permission_type": 3}]},
        needs=((Op.ALTER, Res.CLUSTER, CLUSTER_NAME),), denied=CLUSTER_DENIED),
    "DeleteAcls": Row(ApiKey.DELETE_ACLS, 3, lambda b: {"filters": [_acl_filter("w")]},
                      needs=((Op.ALTER, Res.CLUSTER, CLUSTER_NAME),), denied=CLUSTER_DENIED),
}


def test_every_api_the_broker_serves_has_a_row():
    assert {row.api for row in ROWS.values()} == set(HANDLERS)


def error_codes(answer) -> set[int]:
    """Every error code in a response, at any depth (CreateTopics' topic_config_error_code only says whether the
    created topic's configs may be shown, and is left out)."""
    if isinstance(answer, dict):
        return {v for k, v in answer.items() if k.endswith("error_code") and k != "topic_config_error_code"} \
            | {c for v in answer.values() for c in error_codes(v)}
    if isinstance(answer, list):
        return {c for v in answer for c in error_codes(v)}
    return set()


def request(broker, row):
    broker.new_connection()
    answer = call(broker, row.api, row.version, row.body(broker))
    return answer, error_codes(answer)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_api_is_authorized_as_kafka_authorizes_it(broker, name):
    row = ROWS[name]
    if row.prepare is not None:
        broker.principal = SUPER_USER
        row.prepare(broker)
        broker.principal = USER
    answer, codes = request(broker, row)
    if row.denied is not None:
        assert row.denied in codes and codes <= {0, row.denied}, (name, answer)
    else:
        assert not codes & AUTHORIZATION_FAILED, (name, answer)
        assert row.shown is None or not row.shown(answer), (name, answer)
    for grant in row.needs:
        broker.grant(*grant)
    answer, codes = request(broker, row)
    assert not codes & AUTHORIZATION_FAILED, (name, answer)
    assert row.shown is None or row.shown(answer), (name, answer)
    broker.principal = SUPER_USER
    answer, codes = request(broker, row)
    assert not codes & AUTHORIZATION_FAILED, (name, answer)
    assert row.shown is None or row.shown(answer), (name, answer)


def _bits(*operations) -> int:
    return sum(1 << op for op in operations)


def test_authorized_operations_are_reported_when_asked(broker):
    """KIP-430: Metadata, DescribeGroups and DescribeCluster report, when asked, the operations the principal may
    do on each resource it may describe (implied ones included: Write grants Describe); the cluster's only with
    Describe on it (else 0); when not asked, Kafka's "not requested" (INT32 min)."""
    not_asked = -2147483648
    metadata = {"topics": [{"name": "t", "topic_id": uuid.UUID(int=0)}, {"name": "u", "topic_id": uuid.UUID(int=0)}],
                "allow_auto_topic_creation": False, "include_cluster_authorized_operations": True,
                "include_topic_authorized_operations": True}
    broker.grant(Op.WRITE, Res.TOPIC, "t")
    broker.grant(Op.DESCRIBE_CONFIGS, Res.TOPIC, "t")
    broker.grant(Op.READ, Res.GROUP, "g")
    r = call(broker, ApiKey.METADATA, 10, metadata)
    ops = {t["name"]: (t["error_code"], t["topic_authorized_operations"]) for t in r["topics"]}
    assert ops == {"t": (0, _bits(Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS)), "u": (TOPIC_DENIED, not_asked)}
    assert r["cluster_authorized_operations"] == 0                      # no Describe on the cluster
    [g] = call(broker, ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g"], "include_authorized_operations": True})["groups"]
    assert (g["error_code"], g["authorized_operations"]) == (0, _bits(Op.READ, Op.DESCRIBE))
    cluster = {"include_cluster_authorized_operations": True, "endpoint_type": 1}
    assert call(broker, ApiKey.DESCRIBE_CLUSTER, 1, cluster)["cluster_authorized_operations"] == 0
    broker.grant(Op.ALTER, Res.CLUSTER)
    assert call(broker, ApiKey.DESCRIBE_CLUSTER, 1, cluster)["cluster_authorized_operations"] == \
        _bits(Op.ALTER, Op.DESCRIBE)
    assert call(broker, ApiKey.METADATA, 10, metadata)["cluster_authorized_operations"] == _bits(Op.ALTER, Op.DESCRIBE)
    assert call(broker, ApiKey.DESCRIBE_CLUSTER, 1, {**cluster, "include_cluster_authorized_operations": False}
                )["cluster_authorized_operations"] == not_asked
    [t, _] = call(broker, ApiKey.METADATA, 12, {**metadata, "include_topic_authorized_operations": False})["topics"]
    assert t["topic_authorized_operations"] == not_asked
    broker.principal = SUPER_USER
    [t, u] = call(broker, ApiKey.METADATA, 12, metadata)["topics"]
    every_topic_operation = _bits(Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
                                  Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)
    assert t["topic_authorized_operations"] == u["topic_authorized_operations"] == every_topic_operation


def _produce_to(topic: str, transactional: bool = False) -> dict:
    """A keyed record (internal topics are compacted) for partition 0 of `topic`."""
    records = record_batch([(1, b"k", b"v", [])], transactional=transactional,
                           **({"producer_id": 5, "producer_epoch": 0, "base_sequence": 0} if transactional else {}))
    return {"transactional_id": "tx" if transactional else None, "acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]}


@pytest.mark.parametrize("topic", ["__consumer_offsets", "__transaction_state"])
@pytest.mark.parametrize("transactional", [False, True])
def test_internal_topics_take_no_records_from_clients(broker, topic, transactional):
    """Kafka's ReplicaManager: INVALID_TOPIC_EXCEPTION, even for a super user; a principal without Write on the
    topic (or the transactional id) is refused that first."""
    broker.node.ensure_topic(topic)
    [part] = call(broker, ApiKey.PRODUCE, 9, _produce_to(topic, transactional))["responses"][0]["partition_responses"]
    assert part["error_code"] == (TXN_DENIED if transactional else TOPIC_DENIED)
    broker.principal = SUPER_USER
    [part] = call(broker, ApiKey.PRODUCE, 9, _produce_to(topic, transactional))["responses"][0]["partition_responses"]
    assert (part["error_code"], part["error_message"]) == (17, f"Cannot append to internal topic {topic}")
    assert broker.node.partition(topic, 0).high_watermark == 0


def test_the_admin_client_id_may_append_to_an_internal_topic(broker):
    """Kafka lets Produce of client id __admin_client append to internal topics (internalTopicsAllowed)."""
    broker.node.ensure_topic("__consumer_offsets")
    broker.principal = SUPER_USER
    header = RequestHeader(ApiKey.PRODUCE, 9, 1, "__admin_client")
    header, body = decode_request(encode_request(header, _produce_to("__consumer_offsets"))[0][4:])
    answer = asyncio.run(HANDLERS[ApiKey.PRODUCE](broker.handlers, header, body))
    assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0


def test_no_transaction_may_hold_an_internal_topic(broker):
    """Kafka's AddPartitionsToTxn: an internal topic is TOPIC_AUTHORIZATION_FAILED whatever the grants (a super
    user too), the transaction's other partitions OPERATION_NOT_ATTEMPTED."""
    broker.principal = SUPER_USER
    answer = call(broker, ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 5, "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": "t", "partitions": [0]}, {"name": "__consumer_offsets", "partitions": [0]},
                                {"name": "__transaction_state", "partitions": [0]}]})
    codes = {(t["name"], p["partition_index"]): p["partition_error_code"]
             for t in answer["results_by_topic_v3_and_below"] for p in t["results_by_partition"]}
    assert codes == {("t", 0): 55, ("__consumer_offsets", 0): TOPIC_DENIED, ("__transaction_state", 0): TOPIC_DENIED}

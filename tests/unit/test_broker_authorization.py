"""The handlers' authorization of the transaction APIs, ElectLeaders, partition reassignments, Fetch by topic id and Metadata by topic id,
driven through the codec on a lone broker's view whose principal holds exactly the grants a test gives it (as
Kafka's KafkaApis checks them); a refused request changes nothing."""

from __future__ import annotations

import time
import uuid

import pytest

from helpers.kafka_wire import record_batch
from seglog.broker.handlers import Handlers
from seglog.broker.local_view import LocalView
from seglog.broker.metrics import Metrics
from seglog.broker.server import Broker as ServerBroker
from seglog.node import Node
from seglog.protocol import ApiKey
from seglog.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from test_broker_versions import Broker, _fetch_body, call

TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED = 29, 30, 31, 53
OPERATION_NOT_ATTEMPTED, UNKNOWN_TOPIC_ID, LOADING = 55, 100, 14
Op, Res = AclOperation, ResourceType


class GrantedBroker(Broker):
    """The principal may do exactly what ``granted`` holds: (operation, resource type, name)."""

    authorize_transactional_id = ServerBroker.authorize_transactional_id
    authorize_cluster = ServerBroker.authorize_cluster

    def allowed(self, operation, resource_type, name=CLUSTER_NAME):
        return (operation, resource_type, name) in self.granted

    def allowed_any(self, operation, resource_type):
        return any(g[:2] == (operation, resource_type) for g in self.granted)

    def grant(self, operation, resource_type, name=CLUSTER_NAME):
        self.granted.add((operation, resource_type, name))


@pytest.fixture
def broker(tmp_path):
    node = Node(tmp_path / "d", {"transaction.state.log.num.partitions": 2})
    node.create_topic("t", 2)
    node.create_topic("u", 1)
    b = GrantedBroker(node=node, config=node.config, view=LocalView(node, 0, "127.0.0.1", 9092), metrics=Metrics(),
                      granted=set())
    b.handlers = Handlers(b)
    yield b
    node.close()


def init_producer_id(broker, tid):
    """InitProducerId, retried while the transaction state log loads (COORDINATOR_LOAD_IN_PROGRESS)."""
    deadline = time.monotonic() + 20
    while True:
        r = call(broker, ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000})
        if r["error_code"] != LOADING or time.monotonic() > deadline:
            return r
        time.sleep(0.05)


def add_partitions_v3(broker, tid, pid, epoch, topics):
    r = call(broker, ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid, "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
    return {(t["name"], p["partition_index"]): p["partition_error_code"]
            for t in r["results_by_topic_v3_and_below"] for p in t["results_by_partition"]}


def test_init_producer_id_needs_write_on_the_transactional_id(broker):
    assert init_producer_id(broker, "tx")["error_code"] == TXN_DENIED
    broker.grant(Op.WRITE, Res.TRANSACTIONAL_ID, "other")
    assert init_producer_id(broker, "tx")["error_code"] == TXN_DENIED
    broker.grant(Op.WRITE, Res.TRANSACTIONAL_ID, "tx")
    r = init_producer_id(broker, "tx")
    assert r["error_code"] == 0 and r["producer_id"] >= 0


def test_an_idempotent_producer_needs_idempotent_write_or_write_on_some_topic(broker):
    assert init_producer_id(broker, None)["error_code"] == CLUSTER_DENIED
    broker.grant(Op.WRITE, Res.TOPIC, "u")
    assert init_producer_id(broker, None)["error_code"] == 0
    broker.granted.clear()
    broker.grant(Op.IDEMPOTENT_WRITE, Res.CLUSTER)
    assert init_producer_id(broker, None)["error_code"] == 0


def test_add_partitions_needs_write_on_the_transactional_id_and_each_topic(broker):
    broker.grant(Op.WRITE, Res.TRANSACTIONAL_ID, "tx")
    r = init_producer_id(broker, "tx")
    pid, epoch = r["producer_id"], r["producer_epoch"]
    broker.granted.clear()
    assert add_partitions_v3(broker, "tx", pid, epoch, {"t": [0]}) == {("t", 0): TXN_DENIED}
    broker.grant(Op.WRITE, Res.TRANSACTIONAL_ID, "tx")
    broker.grant(Op.WRITE, Res.TOPIC, "t")
    # a topic refused: nothing is added, the allowed partitions are answered OPERATION_NOT_ATTEMPTED
    assert add_partitions_v3(broker, "tx", pid, epoch, {"t": [0, 1], "u": [0]}) == \
        {("t", 0): OPERATION_NOT_ATTEMPTED, ("t", 1): OPERATION_NOT_ATTEMPTED, ("u", 0): TOPIC_DENIED}
    [d] = broker.node.txn_coordinator.describe(["tx"])
    assert not d.partitions
    assert add_partitions_v3(broker, "tx", pid, epoch, {"t": [0, 1]}) == {("t", 0): 0, ("t", 1): 0}


def test_the_brokers_add_partitions_v4_needs_cluster_action(broker):
    body = {"transactions": [{"transactional_id": "tx", "producer_id": 1, "producer_epoch": 0, "verify_only": True,
                              "topics": [{"name": "t", "partitions": [0]}]}]}
    r = call(broker, ApiKey.ADD_PARTITIONS_TO_TXN, 4, body)
    assert (r["error_code"], r["results_by_transaction"]) == (CLUSTER_DENIED, [])
    broker.grant(Op.CLUSTER_ACTION, Res.CLUSTER)
    r = call(broker, ApiKey.ADD_PARTITIONS_TO_TXN, 4, body)
    assert r["error_code"] == 0 and r["results_by_transaction"][0]["transactional_id"] == "tx"


def test_add_offsets_end_txn_and_txn_offset_commit(broker):
    broker.grant(Op.WRITE, Res.TRANSACTIONAL_ID, "tx")
    r = init_producer_id(broker, "tx")
    pid, epoch = r["producer_id"], r["producer_epoch"]
    broker.granted.clear()
    add_offsets = {"transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch, "group_id": "g"}
    assert call(broker, ApiKey.ADD_OFFSETS_TO_TXN, 3, add_offsets)["error_code"] == TXN_DENIED
    assert call(broker, ApiKey.END_TXN, 3, {"transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch,
                                            "committed": True})["error_code"] == TXN_DENIED
    commit = {"transactional_id": "tx", "group_id": "g", "producer_id": pid, "producer_epoch": epoch,
              "generation_id": -1, "member_id": "", "group_instance_id": None,
              "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                       "committed_leader_epoch": -1, "committed_metadata": ""}]},
                         {"name": "u", "partitions": [{"partition_index": 0, "committed_offset": 7,
                                                       "committed_leader_epoch": -1, "committed_metadata": ""}]}]}

    def commit_codes():
        r = call(broker, ApiKey.TXN_OFFSET_COMMIT, 3, commit)
        return {(t["name"], p["partition_index"]): p["error_code"] for t in r["topics"] for p in t["partitions"]}
    assert commit_codes() == {("t", 0): TXN_DENIED, ("u", 0): TXN_DENIED}
    broker.grant(Op.WRITE, Res.TRANSACTIONAL_ID, "tx")
    assert call(broker, ApiKey.ADD_OFFSETS_TO_TXN, 3, add_offsets)["error_code"] == GROUP_DENIED
    assert commit_codes() == {("t", 0): GROUP_DENIED, ("u", 0): GROUP_DENIED}
    broker.grant(Op.READ, Res.GROUP, "g")
    assert call(broker, ApiKey.ADD_OFFSETS_TO_TXN, 3, add_offsets)["error_code"] == 0
    broker.grant(Op.READ, Res.TOPIC, "t")
    assert commit_codes() == {("t", 0): 0, ("u", 0): TOPIC_DENIED}          # the allowed topic is committed
    assert call(broker, ApiKey.END_TXN, 3, {"transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch,
                                            "committed": True})["error_code"] == 0


def test_write_txn_markers_needs_cluster_action(broker):
    body = {"markers": [{"producer_id": 9, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
                         "topics": [{"name": "t", "partition_indexes": [0, 1]}]}]}
    [m] = call(broker, ApiKey.WRITE_TXN_MARKERS, 1, body)["markers"]
    assert [p["error_code"] for p in m["topics"][0]["partitions"]] == [CLUSTER_DENIED, CLUSTER_DENIED]
    assert broker.node.partition("t", 0).log_end_offset == 0


def test_find_coordinator_of_a_transactional_id_needs_describe_on_it(broker):
    body = {"key_type": 1, "coordinator_keys": ["tx"]}
    [c] = call(broker, ApiKey.FIND_COORDINATOR, 4, body)["coordinators"]
    assert c["error_code"] == TXN_DENIED
    broker.grant(Op.DESCRIBE, Res.TRANSACTIONAL_ID, "tx")
    [c] = call(broker, ApiKey.FIND_COORDINATOR, 4, body)["coordinators"]
    assert (c["error_code"], c["node_id"]) == (0, 0)


def _produce(broker, tid, transactional):
    records = record_batch([(1, None, b"v", [])], producer_id=5, producer_epoch=0, base_sequence=0,
                           transactional=transactional)
    body = {"transactional_id": tid, "acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": records}]}]}
    [p] = call(broker, ApiKey.PRODUCE, 9, body)["responses"][0]["partition_responses"]
    return p["error_code"]


def test_transactional_produce_needs_write_on_the_transactional_id(broker):
    broker.grant(Op.WRITE, Res.TOPIC, "t")
    assert _produce(broker, "tx", True) == TXN_DENIED
    assert _produce(broker, None, True) == TXN_DENIED                  # transactional records without an id
    assert broker.node.partition("t", 0).log_end_offset == 0
    # as Kafka: the transactional id is checked only for transactional records (before the topics)
    assert _produce(broker, "tx", False) == 0
    broker.granted.clear()
    assert _produce(broker, "tx", True) == TXN_DENIED


def test_describe_and_list_transactions_show_only_what_may_be_described(broker):
    broker.grant(Op.WRITE, Res.TRANSACTIONAL_ID, "tx")
    broker.grant(Op.WRITE, Res.TOPIC, "t")
    broker.grant(Op.WRITE, Res.TOPIC, "u")
    r = init_producer_id(broker, "tx")
    assert add_partitions_v3(broker, "tx", r["producer_id"], r["producer_epoch"], {"t": [0], "u": [0]}) == \
        {("t", 0): 0, ("u", 0): 0}
    broker.granted.clear()
    assert call(broker, ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": [], "producer_id_filters": []}
                )["transaction_states"] == []
    [d] = call(broker, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx"]})["transaction_states"]
    assert d["error_code"] == TXN_DENIED
    broker.grant(Op.DESCRIBE, Res.TRANSACTIONAL_ID, "tx")
    broker.grant(Op.DESCRIBE, Res.TOPIC, "u")
    [listed] = call(broker, ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": [], "producer_id_filters": []}
                    )["transaction_states"]
    assert listed["transactional_id"] == "tx"
    [d] = call(broker, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx"]})["transaction_states"]
    assert (d["error_code"], d["transaction_state"], d["topics"]) == (0, "Ongoing", [{"topic": "u", "partitions": [0]}])


def test_elect_leaders_needs_alter_on_the_cluster(broker):
    body = {"election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0, 1]}], "timeout_ms": 1000}
    r = call(broker, ApiKey.ELECT_LEADERS, 2, body)
    assert r["error_code"] == CLUSTER_DENIED
    assert [(p["partition_id"], p["error_code"]) for p in r["replica_election_results"][0]["partition_result"]] == \
        [(0, CLUSTER_DENIED), (1, CLUSTER_DENIED)]
    broker.grant(Op.ALTER, Res.CLUSTER)
    r = call(broker, ApiKey.ELECT_LEADERS, 2, body)
    assert r["error_code"] == 0
    assert CLUSTER_DENIED not in {p["error_code"] for p in r["replica_election_results"][0]["partition_result"]}


def test_partition_reassignments_need_alter_and_describe_on_the_cluster(broker):
    body = {"timeout_ms": 1000, "topics": [{"name": "t", "partitions": [{"partition_index": 0, "replicas": [0]},
                                                                         {"partition_index": 1, "replicas": None}]}]}
    r = call(broker, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, body)
    assert r["error_code"] == CLUSTER_DENIED
    assert [(p["partition_index"], p["error_code"]) for p in r["responses"][0]["partitions"]] == \
        [(0, CLUSTER_DENIED), (1, CLUSTER_DENIED)]
    listing = {"timeout_ms": 1000, "topics": None}
    assert call(broker, ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, listing)["error_code"] == CLUSTER_DENIED
    broker.grant(Op.ALTER, Res.CLUSTER)
    r = call(broker, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, body)
    assert r["error_code"] == 0 and [p["error_code"] for p in r["responses"][0]["partitions"]] == [0, 85]
    assert call(broker, ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, listing)["error_code"] == CLUSTER_DENIED
    broker.grant(Op.DESCRIBE, Res.CLUSTER)
    assert call(broker, ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, listing)["error_code"] == 0


@pytest.mark.parametrize("version", [13, 16])
def test_fetch_by_topic_id_needs_read_on_the_topic_it_names(broker, version):
    broker.node.partition("t", 0).append(record_batch([(1, None, b"v", [])]), 1)
    topic_id = broker.node.topic("t").topic_id
    [t] = call(broker, ApiKey.FETCH, version, _fetch_body({"topic_id": topic_id}))["responses"]
    assert t["topic_id"] == topic_id and t["partitions"][0]["error_code"] == TOPIC_DENIED
    assert not t["partitions"][0]["records"]
    [t] = call(broker, ApiKey.FETCH, version, _fetch_body({"topic_id": uuid.uuid4()}))["responses"]
    assert t["partitions"][0]["error_code"] == UNKNOWN_TOPIC_ID                # resolved before authorizing
    broker.grant(Op.READ, Res.TOPIC, "t")
    [t] = call(broker, ApiKey.FETCH, version, _fetch_body({"topic_id": topic_id}))["responses"]
    assert t["partitions"][0]["error_code"] == 0 and len(t["partitions"][0]["records"])


def test_metadata_by_topic_id_withholds_the_name_of_a_topic_not_describable(broker):
    topic_id = broker.node.topic("t").topic_id
    body = {"topics": [{"name": None, "topic_id": topic_id}], "allow_auto_topic_creation": False}
    [t] = call(broker, ApiKey.METADATA, 12, body)["topics"]
    assert (t["error_code"], t["name"], t["topic_id"], t["partitions"]) == (TOPIC_DENIED, None, topic_id, [])
    broker.grant(Op.DESCRIBE, Res.TOPIC, "t")
    [t] = call(broker, ApiKey.METADATA, 12, body)["topics"]
    assert (t["error_code"], t["name"], len(t["partitions"])) == (0, "t", 2)

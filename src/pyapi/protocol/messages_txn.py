"""Schemas of the transaction APIs (KIP-98): AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, WriteTxnMarkers,
TxnOffsetCommit, DescribeTransactions, ListTransactions (InitProducerId and FindCoordinator live with the admin and
group APIs).

Written from Kafka's message JSON specs at the versions Kafka 3.7 serves. AddPartitionsToTxn v4 is the
broker-to-coordinator form (KIP-890): a batch of transactions, each with ``verify_only``, and a top-level error.
"""

from .schema import Api, array, field

ADD_PARTITIONS_TO_TXN = Api(24, "AddPartitionsToTxn", (0, 4), flexible=3, request=(
    array("transactions",
          field("transactional_id", "string"),
          field("producer_id", "int64"),
          field("producer_epoch", "int16"),
          field("verify_only", "bool"),
          array("topics",
                field("name", "string"),
                field("partitions", "[]int32")),
          versions="4+"),
    field("v3_and_below_transactional_id", "string", "0-3"),
    field("v3_and_below_producer_id", "int64", "0-3"),
    field("v3_and_below_producer_epoch", "int16", "0-3"),
    array("v3_and_below_topics",
          field("name", "string"),
          field("partitions", "[]int32"),
          versions="0-3"),
), response=(
    field("throttle_time_ms", "int32"),
    field("error_code", "int16", "4+"),
    array("results_by_transaction",
          field("transactional_id", "string"),
          array("topic_results",
                field("name", "string"),
                array("results_by_partition",
                      field("partition_index", "int32"),
                      field("partition_error_code", "int16"))),
          versions="4+"),
    array("results_by_topic_v3_and_below",
          field("name", "string"),
          array("results_by_partition",
                field("partition_index", "int32"),
                field("partition_error_code", "int16")),
          versions="0-3"),
))

ADD_OFFSETS_TO_TXN = Api(25, "AddOffsetsToTxn", (0, 3), flexible=3, request=(
    field("transactional_id", "string"),
    field("producer_id", "int64"),
    field("producer_epoch", "int16"),
    field("group_id", "string"),
), response=(
    field("throttle_time_ms", "int32"),
    field("error_code", "int16"),
))

END_TXN = Api(26, "EndTxn", (0, 3), flexible=3, request=(
    field("transactional_id", "string"),
    field("producer_id", "int64"),
    field("producer_epoch", "int16"),
    field("committed", "bool"),
), response=(
    field("throttle_time_ms", "int32"),
    field("error_code", "int16"),
))

# between brokers: the coordinator asks each partition leader to append COMMIT / ABORT control batches
WRITE_TXN_MARKERS = Api(27, "WriteTxnMarkers", (0, 1), flexible=1, request=(
    array("markers",
          field("producer_id", "int64"),
          field("producer_epoch", "int16"),
          field("transaction_result", "bool"),
          array("topics",
                field("name", "string"),
                field("partition_indexes", "[]int32")),
          field("coordinator_epoch", "int32")),
), response=(
    array("markers",
          field("producer_id", "int64"),
          array("topics",
                field("name", "string"),
                array("partitions",
                      field("partition_index", "int32"),
                      field("error_code", "int16")))),
))

TXN_OFFSET_COMMIT = Api(28, "TxnOffsetCommit", (0, 3), flexible=3, request=(
    field("transactional_id", "string"),
    field("group_id", "string"),
    field("producer_id", "int64"),
    field("producer_epoch", "int16"),
    field("generation_id", "int32", "3+", default=-1),
    field("member_id", "string", "3+"),
    field("group_instance_id", "string", "3+", nullable="3+"),
    array("topics",
          field("name", "string"),
          array("partitions",
                field("partition_index", "int32"),
                field("committed_offset", "int64"),
                field("committed_leader_epoch", "int32", "2+", default=-1),
                field("committed_metadata", "string", nullable="0+"))),
), response=(
    field("throttle_time_ms", "int32"),
    array("topics",
          field("name", "string"),
          array("partitions",
                field("partition_index", "int32"),
                field("error_code", "int16"))),
))

DESCRIBE_TRANSACTIONS = Api(65, "DescribeTransactions", (0, 0), flexible=0, request=(
    field("transactional_ids", "[]string"),
), response=(
    field("throttle_time_ms", "int32"),
    array("transaction_states",
          field("error_code", "int16"),
          field("transactional_id", "string"),
          field("transaction_state", "string"),
          field("transaction_timeout_ms", "int32"),
          field("transaction_start_time_ms", "int64", default=-1),
          field("producer_id", "int64", default=-1),
          field("producer_epoch", "int16", default=-1),
          array("topics",
                field("topic", "string"),
                field("partitions", "[]int32"))),
))

LIST_TRANSACTIONS = Api(66, "ListTransactions", (0, 0), flexible=0, request=(
    field("state_filters", "[]string"),
    field("producer_id_filters", "[]int64"),
), response=(
    field("throttle_time_ms", "int32"),
    field("error_code", "int16"),
    field("unknown_state_filters", "[]string"),
    array("transaction_states",
          field("transactional_id", "string"),
          field("producer_id", "int64"),
          field("transaction_state", "string")),
))

APIS = (ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, WRITE_TXN_MARKERS, TXN_OFFSET_COMMIT,
        DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS)

"""Schemas of the data-path APIs: Produce, Fetch, ListOffsets, Metadata, DeleteRecords, OffsetForLeaderEpoch.

Written from Kafka's message JSON specs, restricted to the versions seglog supports. Records fields are
raw record-batch bytes: decoded as memoryview slices of the frame, encoded from buffers or external chunks.
"""

from .schema import Api, array, field, struct

# v0-2 (message-format v0/v1 batches) are decoded only to be answered with UNSUPPORTED_VERSION, as Kafka 4
# does: old clients read the error instead of a dropped connection; v10 (request as v9) answers, for a partition
# refused with NOT_LEADER_OR_FOLLOWER, its current leader and that leader's endpoint (KIP-951)
PRODUCE = Api(0, "Produce", (0, 10), flexible=9, request=(
    field("transactional_id", "string", "3+", nullable="3+"),
    field("acks", "int16"),
    field("timeout_ms", "int32"),
    array("topic_data",
          field("name", "string"),
          array("partition_data",
                field("index", "int32"),
                field("records", "records", nullable="0+"))),
), response=(
    array("responses",
          field("name", "string"),
          array("partition_responses",
                field("index", "int32"),
                field("error_code", "int16"),
                field("base_offset", "int64"),
                field("log_append_time_ms", "int64", "2+", default=-1),
                field("log_start_offset", "int64", "5+", default=-1),
                array("record_errors",
                      field("batch_index", "int32"),
                      field("batch_index_error_message", "string", nullable="8+"),
                      versions="8+"),
                field("error_message", "string", "8+", nullable="8+"),
                struct("current_leader",
                       field("leader_id", "int32", default=-1),
                       field("leader_epoch", "int32", default=-1),
                       versions="10+", tag=0))),
    field("throttle_time_ms", "int32", "1+"),
    array("node_endpoints",
          field("node_id", "int32"),
          field("host", "string"),
          field("port", "int32"),
          field("rack", "string", nullable="0+"),
          versions="10+", tag=0),
))

# v13+ names topics by id; v15 moves the replica id into the tagged replica_state (KIP-903); v16 answers the
# endpoints of the leaders it names (KIP-951)
FETCH = Api(1, "Fetch", (4, 16), flexible=12, request=(
    field("cluster_id", "string", "12+", nullable="12+", tag=0),
    struct("replica_state",
           field("replica_id", "int32", default=-1),
           field("replica_epoch", "int64", default=-1),
           versions="15+", tag=1),
    field("replica_id", "int32", "0-14", default=-1),
    field("max_wait_ms", "int32"),
    field("min_bytes", "int32"),
    field("max_bytes", "int32", "3+", default=0x7FFFFFFF),
    field("isolation_level", "int8", "4+"),
    field("session_id", "int32", "7+"),
    field("session_epoch", "int32", "7+", default=-1),
    array("topics",
          field("topic", "string", "0-12"),
          field("topic_id", "uuid", "13+"),
          array("partitions",
                field("partition", "int32"),
                field("current_leader_epoch", "int32", "9+", default=-1),
                field("fetch_offset", "int64"),
                field("last_fetched_epoch", "int32", "12+", default=-1),
                field("log_start_offset", "int64", "5+", default=-1),
                field("partition_max_bytes", "int32"))),
    array("forgotten_topics_data",
          field("topic", "string", "7-12"),
          field("topic_id", "uuid", "13+"),
          field("partitions", "[]int32"),
          versions="7+"),
    field("rack_id", "string", "11+"),
), response=(
    field("throttle_time_ms", "int32", "1+"),
    field("error_code", "int16", "7+"),
    field("session_id", "int32", "7+"),
    array("responses",
          field("topic", "string", "0-12"),
          field("topic_id", "uuid", "13+"),
          array("partitions",
                field("partition_index", "int32"),
                field("error_code", "int16"),
                field("high_watermark", "int64"),
                field("last_stable_offset", "int64", "4+", default=-1),
                field("log_start_offset", "int64", "5+", default=-1),
                struct("diverging_epoch",
                       field("epoch", "int32", default=-1),
                       field("end_offset", "int64", default=-1),
                       versions="12+", tag=0),
                struct("current_leader",
                       field("leader_id", "int32", default=-1),
                       field("leader_epoch", "int32", default=-1),
                       versions="12+", tag=1),
                struct("snapshot_id",
                       field("end_offset", "int64", default=-1),
                       field("epoch", "int32", default=-1),
                       versions="12+", tag=2),
                array("aborted_transactions",
                      field("producer_id", "int64"),
                      field("first_offset", "int64"),
                      versions="4+", nullable="4+"),
                field("preferred_read_replica", "int32", "11+", default=-1),
                field("records", "records", nullable="0+"))),
    array("node_endpoints",
          field("node_id", "int32"),
          field("host", "string"),
          field("port", "int32"),
          field("rack", "string", nullable="0+"),
          versions="16+", tag=0),
))

# timestamp -1 latest, -2 earliest, -3 (v7+) the offset of the largest timestamp, -4 (v8+) the earliest offset
# in local storage (KIP-405; without tiered storage the log start offset, as Kafka without remote storage)
LIST_OFFSETS = Api(2, "ListOffsets", (1, 8), flexible=6, request=(
    field("replica_id", "int32"),
    field("isolation_level", "int8", "2+"),
    array("topics",
          field("name", "string"),
          array("partitions",
                field("partition_index", "int32"),
                field("current_leader_epoch", "int32", "4+", default=-1),
                field("timestamp", "int64"))),
), response=(
    field("throttle_time_ms", "int32", "2+"),
    array("topics",
          field("name", "string"),
          array("partitions",
                field("partition_index", "int32"),
                field("error_code", "int16"),
                field("timestamp", "int64", default=-1),
                field("offset", "int64", default=-1),
                field("leader_epoch", "int32", "4+", default=-1))),
))

METADATA = Api(3, "Metadata", (0, 12), flexible=9, request=(
    array("topics",
          field("topic_id", "uuid", "10+"),
          field("name", "string", nullable="10+"),
          nullable="1+"),
    field("allow_auto_topic_creation", "bool", "4+", default=True),
    field("include_cluster_authorized_operations", "bool", "8-10"),
    field("include_topic_authorized_operations", "bool", "8+"),
), response=(
    field("throttle_time_ms", "int32", "3+"),
    array("brokers",
          field("node_id", "int32"),
          field("host", "string"),
          field("port", "int32"),
          field("rack", "string", "1+", nullable="1+")),
    field("cluster_id", "string", "2+", nullable="2+"),
    field("controller_id", "int32", "1+", default=-1),
    array("topics",
          field("error_code", "int16"),
          field("name", "string", nullable="12+"),
          field("topic_id", "uuid", "10+"),
          field("is_internal", "bool", "1+"),
          array("partitions",
                field("error_code", "int16"),
                field("partition_index", "int32"),
                field("leader_id", "int32"),
                field("leader_epoch", "int32", "7+", default=-1),
                field("replica_nodes", "[]int32"),
                field("isr_nodes", "[]int32"),
                field("offline_replicas", "[]int32", "5+")),
          field("topic_authorized_operations", "int32", "8+", default=-2147483648)),
    field("cluster_authorized_operations", "int32", "8-10", default=-2147483648),
))

OFFSET_FOR_LEADER_EPOCH = Api(23, "OffsetForLeaderEpoch", (2, 4), flexible=4, request=(
    field("replica_id", "int32", "3+", default=-2),
    array("topics",
          field("topic", "string"),
          array("partitions",
                field("partition", "int32"),
                field("current_leader_epoch", "int32", "2+", default=-1),
                field("leader_epoch", "int32"))),
), response=(
    field("throttle_time_ms", "int32", "2+"),
    array("topics",
          field("topic", "string"),
          array("partitions",
                field("error_code", "int16"),
                field("partition", "int32"),
                field("leader_epoch", "int32", "1+", default=-1),
                field("end_offset", "int64", default=-1))),
))

# offset -1: the high watermark (delete every committed record); low_watermark: the log start offset after it
DELETE_RECORDS = Api(21, "DeleteRecords", (0, 2), flexible=2, request=(
    array("topics",
          field("name", "string"),
          array("partitions",
                field("partition_index", "int32"),
                field("offset", "int64"))),
    field("timeout_ms", "int32"),
), response=(
    field("throttle_time_ms", "int32"),
    array("topics",
          field("name", "string"),
          array("partitions",
                field("partition_index", "int32"),
                field("low_watermark", "int64", default=-1),
                field("error_code", "int16"))),
))

# Kafka's ProducerState per partition: the idempotent (and, later, transactional) producers its leader knows
DESCRIBE_PRODUCERS = Api(61, "DescribeProducers", (0, 0), flexible=0, request=(
    array("topics",
          field("name", "string"),
          field("partition_indexes", "[]int32")),
), response=(
    field("throttle_time_ms", "int32"),
    array("topics",
          field("name", "string"),
          array("partitions",
                field("partition_index", "int32"),
                field("error_code", "int16"),
                field("error_message", "string", nullable="0+"),
                array("active_producers",
                      field("producer_id", "int64"),
                      field("producer_epoch", "int32"),
                      field("last_sequence", "int32", default=-1),
                      field("last_timestamp", "int64", default=-1),
                      field("coordinator_epoch", "int32"),
                      field("current_txn_start_offset", "int64", default=-1)))),
))

APIS = (PRODUCE, FETCH, LIST_OFFSETS, METADATA, DELETE_RECORDS, OFFSET_FOR_LEADER_EPOCH, DESCRIBE_PRODUCERS)

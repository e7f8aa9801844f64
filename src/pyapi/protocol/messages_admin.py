"""Schemas of the admin and session APIs: ApiVersions, CreateTopics, DeleteTopics, InitProducerId,
DescribeConfigs, AlterConfigs, CreatePartitions, IncrementalAlterConfigs, AlterReplicaLogDirs, DescribeLogDirs,
DescribeCluster,
ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments, DescribeClientQuotas, AlterClientQuotas.

Written from Kafka's message JSON specs, restricted to the versions seglog supports. ApiVersions v3 is the
first flexible version of ApiVersions (its response still travels with response header v0).
"""

from .schema import Api, array, field

API_VERSIONS = Api(18, "ApiVersions", (0, 3), flexible=3, request=(
    field("client_software_name", "string", "3+"),
    field("client_software_version", "string", "3+"),
), response=(
    field("error_code", "int16"),
    array("api_keys",
          field("api_key", "int16"),
          field("min_version", "int16"),
          field("max_version", "int16")),
    field("throttle_time_ms", "int32", "1+"),
    array("supported_features",
          field("name", "string"),
          field("min_version", "int16"),
          field("max_version", "int16"),
          versions="3+", tag=0),
    field("finalized_features_epoch", "int64", "3+", tag=1, default=-1),
    array("finalized_features",
          field("name", "string"),
          field("max_version_level", "int16"),
          field("min_version_level", "int16"),
          versions="3+", tag=2),
    field("zk_migration_ready", "bool", "3+", tag=3),
))

CREATE_TOPICS = Api(19, "CreateTopics", (2, 7), flexible=5, request=(
    array("topics",
          field("name", "string"),
          field("num_partitions", "int32"),
          field("replication_factor", "int16"),
          array("assignments",
                field("partition_index", "int32"),
                field("broker_ids", "[]int32")),
          array("configs",
                field("name", "string"),
                field("value", "string", nullable="0+"))),
    field("timeout_ms", "int32", default=60000),
    field("validate_only", "bool", "1+"),
), response=(
    field("throttle_time_ms", "int32", "2+"),
    array("topics",
          field("name", "string"),
          field("topic_id", "uuid", "7+"),
          field("error_code", "int16"),
          field("error_message", "string", "1+", nullable="0+"),
          field("topic_config_error_code", "int16", "5+", tag=0),
          field("num_partitions", "int32", "5+", default=-1),
          field("replication_factor", "int16", "5+", default=-1),
          array("configs",
                field("name", "string"),
                field("value", "string", nullable="5+"),
                field("read_only", "bool"),
                field("config_source", "int8", default=-1),
                field("is_sensitive", "bool"),
                versions="5+", nullable="5+")),
))

DELETE_TOPICS = Api(20, "DeleteTopics", (1, 6), flexible=4, request=(
    array("topics",
          field("name", "string", nullable="6+"),
          field("topic_id", "uuid"),
          versions="6+"),
    field("topic_names", "[]string", "0-5"),
    field("timeout_ms", "int32"),
), response=(
    field("throttle_time_ms", "int32", "1+"),
    array("responses",
          field("name", "string", nullable="6+"),
          field("topic_id", "uuid", "6+"),
          field("error_code", "int16"),
          field("error_message", "string", "5+", nullable="5+")),
))

INIT_PRODUCER_ID = Api(22, "InitProducerId", (0, 4), flexible=2, request=(
    field("transactional_id", "string", nullable="0+"),
    field("transaction_timeout_ms", "int32"),
    field("producer_id", "int64", "3+", default=-1),
    field("producer_epoch", "int16", "3+", default=-1),
), response=(
    field("throttle_time_ms", "int32"),
    field("error_code", "int16"),
    field("producer_id", "int64", default=-1),
    field("producer_epoch", "int16"),
))

DESCRIBE_CONFIGS = Api(32, "DescribeConfigs", (0, 4), flexible=4, request=(
    array("resources",
          field("resource_type", "int8"),
          field("resource_name", "string"),
          field("configuration_keys", "[]string", nullable="0+")),
    field("include_synonyms", "bool", "1+"),
    field("include_documentation", "bool", "3+"),
), response=(
    field("throttle_time_ms", "int32"),
    array("results",
          field("error_code", "int16"),
          field("error_message", "string", nullable="0+"),
          field("resource_type", "int8"),
          field("resource_name", "string"),
          array("configs",
                field("name", "string"),
                field("value", "string", nullable="0+"),
                field("read_only", "bool"),
                field("config_source", "int8", "1+", default=-1),
                field("is_default", "bool", "0"),
                field("is_sensitive", "bool"),
                array("synonyms",
                      field("name", "string"),
                      field("value", "string", nullable="0+"),
                      field("source", "int8"),
                      versions="1+"),
                field("config_type", "int8", "3+"),
                field("documentation", "string", "3+", nullable="0+"))),
))

ALTER_CONFIGS = Api(33, "AlterConfigs", (0, 2), flexible=2, request=(
    array("resources",
          field("resource_type", "int8"),
          field("resource_name", "string"),
          array("configs",
                field("name", "string"),
                field("value", "string", nullable="0+"))),
    field("validate_only", "bool"),
), response=(
    field("throttle_time_ms", "int32"),
    array("responses",
          field("error_code", "int16"),
          field("error_message", "string", nullable="0+"),
          field("resource_type", "int8"),
          field("resource_name", "string")),
))

CREATE_PARTITIONS = Api(37, "CreatePartitions", (0, 3), flexible=2, request=(
    array("topics",
          field("name", "string"),
          field("count", "int32"),
          array("assignments",
                field("broker_ids", "[]int32"),
                nullable="0+")),
    field("timeout_ms", "int32"),
    field("validate_only", "bool"),
), response=(
    field("throttle_time_ms", "int32"),
    array("results",
          field("name", "string"),
          field("error_code", "int16"),
          field("error_message", "string", nullable="0+")),
))

# config_operation: 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT (the last two for list-valued configs)
INCREMENTAL_ALTER_CONFIGS = Api(44, "IncrementalAlterConfigs", (0, 1), flexible=1, request=(
    array("resources",
          field("resource_type", "int8"),
          field("resource_name", "string"),
          array("configs",
                field("name", "string"),
                field("config_operation", "int8"),
                field("value", "string", nullable="0+"))),
    field("validate_only", "bool"),
), response=(
    field("throttle_time_ms", "int32"),
    array("responses",
          field("error_code", "int16"),
          field("error_message", "string", nullable="0+"),
          field("resource_type", "int8"),
          field("resource_name", "string")),
))

ALTER_REPLICA_LOG_DIRS = Api(34, "AlterReplicaLogDirs", (0, 2), flexible=2, request=(
    array("dirs",
          field("path", "string"),
          array("topics",
                field("name", "string"),
                field("partitions", "[]int32"))),
), response=(
    field("throttle_time_ms", "int32"),
    array("results",
          field("topic_name", "string"),
          array("partitions",
                field("partition_index", "int32"),
                field("error_code", "int16"))),
))

DESCRIBE_LOG_DIRS = Api(35, "DescribeLogDirs", (0, 4), flexible=2, request=(
    array("topics",
          field("topic", "string"),
          field("partitions", "[]int32"),
          nullable="0+"),
), response=(
    field("throttle_time_ms", "int32"),
    field("error_code", "int16", "3+"),
    array("results",
          field("error_code", "int16"),
          field("log_dir", "string"),
          array("topics",
                field("name", "string"),
                array("partitions",
                      field("partition_index", "int32"),
                      field("partition_size", "int64"),
                      field("offset_lag", "int64"),
                      field("is_future_key", "bool"))),
          field("total_bytes", "int64", "4+", default=-1),
          field("usable_bytes", "int64", "4+", default=-1)),
))

# endpoint_type (v1+): 1 brokers, 2 controllers (KRaft controllers; a broker answers UNSUPPORTED_ENDPOINT_TYPE)
DESCRIBE_CLUSTER = Api(60, "DescribeCluster", (0, 1), flexible=0, request=(
    field("include_cluster_authorized_operations", "bool"),
    field("endpoint_type", "int8", "1+", default=1),
), response=(
    field("throttle_time_ms", "int32"),
    field("error_code", "int16"),
    field("error_message", "string", nullable="0+"),
    field("endpoint_type", "int8", "1+", default=1),
    field("cluster_id", "string"),
    field("controller_id", "int32", default=-1),
    array("brokers",
          field("broker_id", "int32"),
          field("host", "string"),
          field("port", "int32"),
          field("rack", "string", nullable="0+")),
    field("cluster_authorized_operations", "int32", default=-2147483648),
))

# election_type (v1+): 0 preferred, 1 unclean; topic_partitions null: every partition
ELECT_LEADERS = Api(43, "ElectLeaders", (0, 2), flexible=2, request=(
    field("election_type", "int8", "1+"),
    array("topic_partitions",
          field("topic", "string"),
          field("partitions", "[]int32"),
          nullable="0+"),
    field("timeout_ms", "int32", default=60000),
), response=(
    field("throttle_time_ms", "int32"),
    field("error_code", "int16", "1+"),
    array("replica_election_results",
          field("topic", "string"),
          array("partition_result",
                field("partition_id", "int32"),
                field("error_code", "int16"),
                field("error_message", "string", nullable="0+"))),
))

# replicas null: cancel the partition's pending reassignment (back to its original replicas)
ALTER_PARTITION_REASSIGNMENTS = Api(45, "AlterPartitionReassignments", (0, 0), flexible=0, request=(
    field("timeout_ms", "int32", default=60000),
    array("topics",
          field("name", "string"),
          array("partitions",
                field("partition_index", "int32"),
                field("replicas", "[]int32", nullable="0+"))),
), response=(
    field("throttle_time_ms", "int32"),
    field("error_code", "int16"),
    field("error_message", "string", nullable="0+"),
    array("responses",
          field("name", "string"),
          array("partitions",
                field("partition_index", "int32"),
                field("error_code", "int16"),
                field("error_message", "string", nullable="0+"))),
))

# topics null: every partition being reassigned
LIST_PARTITION_REASSIGNMENTS = Api(46, "ListPartitionReassignments", (0, 0), flexible=0, request=(
    field("timeout_ms", "int32", default=60000),
    array("topics",
          field("name", "string"),
          field("partition_indexes", "[]int32"),
          nullable="0+"),
), response=(
    field("throttle_time_ms", "int32"),
    field("error_code", "int16"),
    field("error_message", "string", nullable="0+"),
    array("topics",
          field("name", "string"),
          array("partitions",
                field("partition_index", "int32"),
                field("replicas", "[]int32"),
                field("adding_replicas", "[]int32"),
                field("removing_replicas", "[]int32"))),
))

DESCRIBE_CLIENT_QUOTAS = Api(48, "DescribeClientQuotas", (0, 1), flexible=1, request=(
    array("components",
          field("entity_type", "string"),
          field("match_type", "int8"),
          field("match", "string", nullable="0+")),
    field("strict", "bool"),
), response=(
    field("throttle_time_ms", "int32"),
    field("error_code", "int16"),
    field("error_message", "string", nullable="0+"),
    array("entries",
          array("entity",
                field("entity_type", "string"),
                field("entity_name", "string", nullable="0+")),
          array("values",
                field("key", "string"),
                field("value", "float64")),
          nullable="0+"),
))

ALTER_CLIENT_QUOTAS = Api(49, "AlterClientQuotas", (0, 1), flexible=1, request=(
    array("entries",
          array("entity",
                field("entity_type", "string"),
                field("entity_name", "string", nullable="0+")),
          array("ops",
                field("key", "string"),
                field("value", "float64"),
                field("remove", "bool"))),
    field("validate_only", "bool"),
), response=(
    field("throttle_time_ms", "int32"),
    array("entries",
          field("error_code", "int16"),
          field("error_message", "string", nullable="0+"),
          array("entity",
                field("entity_type", "string"),
                field("entity_name", "string", nullable="0+"))),
))

APIS = (API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS, INIT_PRODUCER_ID, DESCRIBE_CONFIGS, ALTER_CONFIGS,
        CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS, ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS, DESCRIBE_CLUSTER,
        ELECT_LEADERS, ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS, DESCRIBE_CLIENT_QUOTAS,
        ALTER_CLIENT_QUOTAS)

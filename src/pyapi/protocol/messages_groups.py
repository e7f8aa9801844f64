"""Schemas of the consumer-group APIs: OffsetCommit, OffsetFetch, FindCoordinator, JoinGroup, Heartbeat,
LeaveGroup, SyncGroup, DescribeGroups, ListGroups, DeleteGroups.

Written from Kafka's message JSON specs, restricted to the versions seglog supports. Member metadata and
assignments are opaque ``bytes`` (the consumer protocol inside them is the group coordinator's business).
"""

from .schema import Api, array, field

OFFSET_COMMIT = Api(8, "OffsetCommit", (2, 7), flexible=8, request=(
    field("group_id", "string"),
    field("generation_id_or_member_epoch", "int32", "1+", default=-1),
    field("member_id", "string", "1+"),
    field("group_instance_id", "string", "7+", nullable="7+"),
    field("retention_time_ms", "int64", "2-4", default=-1),
    array("topics",
          field("name", "string"),
          array("partitions",
                field("partition_index", "int32"),
                field("committed_offset", "int64"),
                field("committed_leader_epoch", "int32", "6+", default=-1),
                field("committed_metadata", "string", nullable="0+"))),
), response=(
    field("throttle_time_ms", "int32", "3+"),
    array("topics",
          field("name", "string"),
          array("partitions",
                field("partition_index", "int32"),
                field("error_code", "int16"))),
))

OFFSET_FETCH = Api(9, "OffsetFetch", (1, 5), flexible=6, request=(
    field("group_id", "string"),
    array("topics",
          field("name", "string"),
          field("partition_indexes", "[]int32"),
          nullable="2+"),
), response=(
    field("throttle_time_ms", "int32", "3+"),
    array("topics",
          field("name", "string"),
          array("partitions",
                field("partition_index", "int32"),
                field("committed_offset", "int64"),
                field("committed_leader_epoch", "int32", "5+", default=-1),
                field("metadata", "string", nullable="0+"),
                field("error_code", "int16"))),
    field("error_code", "int16", "2+"),
))

FIND_COORDINATOR = Api(10, "FindCoordinator", (0, 2), flexible=3, request=(
    field("key", "string"),
    field("key_type", "int8", "1+"),
), response=(
    field("throttle_time_ms", "int32", "1+"),
    field("error_code", "int16"),
    field("error_message", "string", "1+", nullable="1+"),
    field("node_id", "int32"),
    field("host", "string"),
    field("port", "int32"),
))

JOIN_GROUP = Api(11, "JoinGroup", (0, 5), flexible=6, request=(
    field("group_id", "string"),
    field("session_timeout_ms", "int32"),
    field("rebalance_timeout_ms", "int32", "1+", default=-1),
    field("member_id", "string"),
    field("group_instance_id", "string", "5+", nullable="5+"),
    field("protocol_type", "string"),
    array("protocols",
          field("name", "string"),
          field("metadata", "bytes")),
), response=(
    field("throttle_time_ms", "int32", "2+"),
    field("error_code", "int16"),
    field("generation_id", "int32", default=-1),
    field("protocol_name", "string"),
    field("leader", "string"),
    field("member_id", "string"),
    array("members",
          field("member_id", "string"),
          field("group_instance_id", "string", "5+", nullable="5+"),
          field("metadata", "bytes")),
))

HEARTBEAT = Api(12, "Heartbeat", (0, 3), flexible=4, request=(
    field("group_id", "string"),
    field("generation_id", "int32"),
    field("member_id", "string"),
    field("group_instance_id", "string", "3+", nullable="3+"),
), response=(
    field("throttle_time_ms", "int32", "1+"),
    field("error_code", "int16"),
))

LEAVE_GROUP = Api(13, "LeaveGroup", (0, 1), flexible=4, request=(
    field("group_id", "string"),
    field("member_id", "string"),
), response=(
    field("throttle_time_ms", "int32", "1+"),
    field("error_code", "int16"),
))

SYNC_GROUP = Api(14, "SyncGroup", (0, 3), flexible=4, request=(
    field("group_id", "string"),
    field("generation_id", "int32"),
    field("member_id", "string"),
    field("group_instance_id", "string", "3+", nullable="3+"),
    array("assignments",
          field("member_id", "string"),
          field("assignment", "bytes")),
), response=(
    field("throttle_time_ms", "int32", "1+"),
    field("error_code", "int16"),
    field("assignment", "bytes"),
))

DESCRIBE_GROUPS = Api(15, "DescribeGroups", (0, 4), flexible=5, request=(
    field("groups", "[]string"),
    field("include_authorized_operations", "bool", "3+"),
), response=(
    field("throttle_time_ms", "int32", "1+"),
    array("groups",
          field("error_code", "int16"),
          field("group_id", "string"),
          field("group_state", "string"),
          field("protocol_type", "string"),
          field("protocol_data", "string"),
          array("members",
                field("member_id", "string"),
                field("group_instance_id", "string", "4+", nullable="4+"),
                field("client_id", "string"),
                field("client_host", "string"),
                field("member_metadata", "bytes"),
                field("member_assignment", "bytes")),
          field("authorized_operations", "int32", "3+", default=-2147483648)),
))

LIST_GROUPS = Api(16, "ListGroups", (0, 2), flexible=3, request=(
), response=(
    field("throttle_time_ms", "int32", "1+"),
    field("error_code", "int16"),
    array("groups",
          field("group_id", "string"),
          field("protocol_type", "string")),
))

# v0-1 are what librdkafka and kafka-python send (v1 only lets the broker throttle after the response)
DELETE_GROUPS = Api(42, "DeleteGroups", (0, 1), flexible=2, request=(
    field("groups_names", "[]string"),
), response=(
    field("throttle_time_ms", "int32"),
    array("results",
          field("group_id", "string"),
          field("error_code", "int16")),
))

APIS = (OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP,
        DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS)

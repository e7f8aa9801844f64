"""Schemas of the consumer-group APIs: OffsetCommit, OffsetFetch, FindCoordinator, JoinGroup, Heartbeat,
LeaveGroup, SyncGroup, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete, ConsumerGroupHeartbeat,
ConsumerGroupDescribe.

Written from Kafka's message JSON specs, restricted to the versions seglog supports. Member metadata and
assignments are opaque ``bytes`` (the consumer protocol inside them is the group coordinator's business).
"""

from .schema import NEVER_FLEXIBLE, Api, array, field, struct

# v9 is v8 for members of KIP-848 consumer groups (their member epoch in generation_id_or_member_epoch)
OFFSET_COMMIT = Api(8, "OffsetCommit", (2, 9), flexible=8, request=(
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

# v8 asks for several groups at once: ``groups`` replaces the top-level group_id/topics in both directions
# v9 names the member (KIP-848 consumer groups check its id and epoch)
OFFSET_FETCH = Api(9, "OffsetFetch", (1, 9), flexible=6, request=(
    field("group_id", "string", "0-7"),
    array("topics",
          field("name", "string"),
          field("partition_indexes", "[]int32"),
          versions="0-7", nullable="2-7"),
    array("groups",
          field("group_id", "string"),
          field("member_id", "string", "9+", nullable="9+"),
          field("member_epoch", "int32", "9+", default=-1),
          array("topics",
                field("name", "string"),
                field("partition_indexes", "[]int32"),
                nullable="8+"),
          versions="8+"),
    field("require_stable", "bool", "7+"),
), response=(
    field("throttle_time_ms", "int32", "3+"),
    array("topics",
          field("name", "string"),
          array("partitions",
                field("partition_index", "int32"),
                field("committed_offset", "int64"),
                field("committed_leader_epoch", "int32", "5+", default=-1),
                field("metadata", "string", nullable="0+"),
                field("error_code", "int16")),
          versions="0-7"),
    field("error_code", "int16", "2-7"),
    array("groups",
          field("group_id", "string"),
          array("topics",
                field("name", "string"),
                array("partitions",
                      field("partition_index", "int32"),
                      field("committed_offset", "int64"),
                      field("committed_leader_epoch", "int32", default=-1),
                      field("metadata", "string", nullable="8+"),
                      field("error_code", "int16"))),
          field("error_code", "int16"),
          versions="8+"),
))

# v4 looks up several keys at once: ``coordinator_keys`` / ``coordinators`` replace key and the single answer
FIND_COORDINATOR = Api(10, "FindCoordinator", (0, 4), flexible=3, request=(
    field("key", "string", "0-3"),
    field("key_type", "int8", "1+"),
    field("coordinator_keys", "[]string", "4+"),
), response=(
    field("throttle_time_ms", "int32", "1+"),
    field("error_code", "int16", "0-3"),
    field("error_message", "string", "1-3", nullable="1-3"),
    field("node_id", "int32", "0-3"),
    field("host", "string", "0-3"),
    field("port", "int32", "0-3"),
    array("coordinators",
          field("key", "string"),
          field("node_id", "int32"),
          field("host", "string"),
          field("port", "int32"),
          field("error_code", "int16"),
          field("error_message", "string", nullable="4+"),
          versions="4+"),
))

JOIN_GROUP = Api(11, "JoinGroup", (0, 9), flexible=6, request=(
    field("group_id", "string"),
    field("session_timeout_ms", "int32"),
    field("rebalance_timeout_ms", "int32", "1+", default=-1),
    field("member_id", "string"),
    field("group_instance_id", "string", "5+", nullable="5+"),
    field("protocol_type", "string"),
    array("protocols",
          field("name", "string"),
          field("metadata", "bytes")),
    field("reason", "string", "8+", nullable="8+"),
), response=(
    field("throttle_time_ms", "int32", "2+"),
    field("error_code", "int16"),
    field("generation_id", "int32", default=-1),
    field("protocol_type", "string", "7+", nullable="7+"),
    field("protocol_name", "string", nullable="7+", default=""),
    field("leader", "string"),
    field("skip_assignment", "bool", "9+"),
    field("member_id", "string"),
    array("members",
          field("member_id", "string"),
          field("group_instance_id", "string", "5+", nullable="5+"),
          field("metadata", "bytes")),
))

HEARTBEAT = Api(12, "Heartbeat", (0, 4), flexible=4, request=(
    field("group_id", "string"),
    field("generation_id", "int32"),
    field("member_id", "string"),
    field("group_instance_id", "string", "3+", nullable="3+"),
), response=(
    field("throttle_time_ms", "int32", "1+"),
    field("error_code", "int16"),
))

# v3 leaves several members at once (static members by group_instance_id): ``members`` replaces member_id
LEAVE_GROUP = Api(13, "LeaveGroup", (0, 5), flexible=4, request=(
    field("group_id", "string"),
    field("member_id", "string", "0-2"),
    array("members",
          field("member_id", "string"),
          field("group_instance_id", "string", nullable="3+"),
          field("reason", "string", "5+", nullable="5+"),
          versions="3+"),
), response=(
    field("throttle_time_ms", "int32", "1+"),
    field("error_code", "int16"),
    array("members",
          field("member_id", "string"),
          field("group_instance_id", "string", nullable="3+"),
          field("error_code", "int16"),
          versions="3+"),
))

SYNC_GROUP = Api(14, "SyncGroup", (0, 5), flexible=4, request=(
    field("group_id", "string"),
    field("generation_id", "int32"),
    field("member_id", "string"),
    field("group_instance_id", "string", "3+", nullable="3+"),
    field("protocol_type", "string", "5+", nullable="5+"),
    field("protocol_name", "string", "5+", nullable="5+"),
    array("assignments",
          field("member_id", "string"),
          field("assignment", "bytes")),
), response=(
    field("throttle_time_ms", "int32", "1+"),
    field("error_code", "int16"),
    field("protocol_type", "string", "5+", nullable="5+"),
    field("protocol_name", "string", "5+", nullable="5+"),
    field("assignment", "bytes"),
))

DESCRIBE_GROUPS = Api(15, "DescribeGroups", (0, 6), flexible=5, request=(
    field("groups", "[]string"),
    field("include_authorized_operations", "bool", "3+"),
), response=(
    field("throttle_time_ms", "int32", "1+"),
    array("groups",
          field("error_code", "int16"),
          field("error_message", "string", "6+", nullable="6+"),
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

# v5 filters by group type (KIP-848): "classic" or "consumer"
LIST_GROUPS = Api(16, "ListGroups", (0, 5), flexible=3, request=(
    field("states_filter", "[]string", "4+"),
    field("types_filter", "[]string", "5+"),
), response=(
    field("throttle_time_ms", "int32", "1+"),
    field("error_code", "int16"),
    array("groups",
          field("group_id", "string"),
          field("protocol_type", "string"),
          field("group_state", "string", "4+"),
          field("group_type", "string", "5+")),
))

DELETE_GROUPS = Api(42, "DeleteGroups", (0, 2), flexible=2, request=(
    field("groups_names", "[]string"),
), response=(
    field("throttle_time_ms", "int32"),
    array("results",
          field("group_id", "string"),
          field("error_code", "int16")),
))

OFFSET_DELETE = Api(47, "OffsetDelete", (0, 0), flexible=NEVER_FLEXIBLE, request=(
    field("group_id", "string"),
    array("topics",
          field("name", "string"),
          array("partitions",
                field("partition_index", "int32"))),
), response=(
    field("error_code", "int16"),
    field("throttle_time_ms", "int32"),
    array("topics",
          field("name", "string"),
          array("partitions",
                field("partition_index", "int32"),
                field("error_code", "int16"))),
))

# KIP-848's consumer group protocol (group.protocol=consumer)
_TOPIC_PARTITIONS = (field("topic_id", "uuid"), field("partitions", "[]int32"))

CONSUMER_GROUP_HEARTBEAT = Api(68, "ConsumerGroupHeartbeat", (0, 1), flexible=0, request=(
    field("group_id", "string"),
    field("member_id", "string"),
    field("member_epoch", "int32"),
    field("instance_id", "string", nullable="0+"),
    field("rack_id", "string", nullable="0+"),
    field("rebalance_timeout_ms", "int32", default=-1),
    field("subscribed_topic_names", "[]string", nullable="0+"),
    field("subscribed_topic_regex", "string", "1+", nullable="1+"),
    field("server_assignor", "string", nullable="0+"),
    array("topic_partitions", *_TOPIC_PARTITIONS, nullable="0+"),
), response=(
    field("throttle_time_ms", "int32"),
    field("error_code", "int16"),
    field("error_message", "string", nullable="0+"),
    field("member_id", "string", nullable="0+"),
    field("member_epoch", "int32"),
    field("heartbeat_interval_ms", "int32"),
    struct("assignment", array("topic_partitions", *_TOPIC_PARTITIONS), nullable="0+"),
))

_DESCRIBED_ASSIGNMENT = (array("topic_partitions", field("topic_id", "uuid"), field("topic_name", "string"),
                               field("partitions", "[]int32")),)

# v1 adds the member type (KIP-1099): -1 unknown, 0 classic, 1 consumer
CONSUMER_GROUP_DESCRIBE = Api(69, "ConsumerGroupDescribe", (0, 1), flexible=0, request=(
    field("group_ids", "[]string"),
    field("include_authorized_operations", "bool"),
), response=(
    field("throttle_time_ms", "int32"),
    array("groups",
          field("error_code", "int16"),
          field("error_message", "string", nullable="0+"),
          field("group_id", "string"),
          field("group_state", "string"),
          field("group_epoch", "int32"),
          field("assignment_epoch", "int32"),
          field("assignor_name", "string"),
          array("members",
                field("member_id", "string"),
                field("instance_id", "string", nullable="0+"),
                field("rack_id", "string", nullable="0+"),
                field("member_epoch", "int32"),
                field("client_id", "string"),
                field("client_host", "string"),
                field("subscribed_topic_names", "[]string"),
                field("subscribed_topic_regex", "string", nullable="0+"),
                struct("assignment", *_DESCRIBED_ASSIGNMENT),
                struct("target_assignment", *_DESCRIBED_ASSIGNMENT),
                field("member_type", "int8", "1+", default=-1)),
          field("authorized_operations", "int32", default=-2147483648)),
))

APIS = (OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP,
        DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE, CONSUMER_GROUP_HEARTBEAT,
        CONSUMER_GROUP_DESCRIBE)

"""Request handlers: each turns one decoded Kafka request into calls on the Node (and its group coordinator)
and builds the response body. No behaviour lives here that the in-process door does not share: validation,
idempotence, offsets and groups are the core's; handlers only translate shapes and exceptions to error codes.

Every handler is ``async def handle_<api>(self, header, body) -> dict | None`` (None: no response, as for
acks=0 produce requests). Errors of one partition become that partition's error code; a handler never
lets a SeglogError escape for something the client did wrong.

Handlers (here: ApiVersions, Metadata, the call table) is made of one class per API family: handlers_data
(produce, fetch, offsets), handlers_groups (the group coordinator's APIs), handlers_txn (the transaction
coordinator's) and handlers_admin (topics, configs,
log dirs, cluster), with what they share in handler_support.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from .. import errors
from ..errors import SeglogError
from ..protocol import SUPPORTED_VERSIONS, ApiKey, api_versions_body
from ..security.acls import AclOperation as Op
from ..security.acls import ResourceType as Res
from .handler_support import GROUP_THREADS, CloseConnection, _err, _off_loop, authorized_operations
from .handlers_admin import AdminHandlers
from .handlers_data import DataHandlers
from .handlers_groups import GroupHandlers
from .handlers_txn import TxnHandlers
from .handlers_quotas import QUOTA_HANDLERS
from .security_handlers import SECURITY_HANDLERS, sasl_api_versions
from .token_handlers import TOKEN_HANDLERS


__all__ = ["Handlers", "HANDLERS", "CloseConnection"]


class Handlers(DataHandlers, GroupHandlers, TxnHandlers, AdminHandlers):
    """The API implementations of one broker. `broker` gives node, view (cluster metadata), config, and the
    fetch waiting and metrics machinery of the server."""

    def __init__(self, broker):
        self.broker = broker
        self.node = broker.node
        self.config = broker.config
        self._group_pool = ThreadPoolExecutor(GROUP_THREADS, thread_name_prefix="seglog-group-call")

    def close(self) -> None:
        """Stop the group call threads (calls still queued are dropped; their connections are closing)."""
        self._group_pool.shutdown(wait=False, cancel_futures=True)

    # -- ApiVersions, Metadata ---------------------------------------------------------------------------------

    async def handle_api_versions(self, header, body):
        conn = self.broker.connection()
        if conn is not None and conn.sasl is not None:
            return await sasl_api_versions(self.broker, conn)
        return api_versions_body()

    async def handle_metadata(self, header, body):
        view = self.broker.view
        requested = body["topics"]
        if header.api_version == 0 and not requested:
            requested = None                                      # v0 has no null: an empty array means all
        allow_create = body["allow_auto_topic_creation"]          # True for versions before the field existed
        topics = []
        by_id: dict[str, object] = {}                             # names of the topics asked for by id: their ids
        if requested is not None and any(t["name"] is None for t in requested):
            named = []                                            # v10+ may name a topic by its id only
            for t in requested:
                if t["name"] is None:
                    try:
                        t = {**t, "name": view.topic_name(t["topic_id"])}
                    except SeglogError as e:
                        topics.append({"error_code": _err(e), "name": None, "topic_id": t["topic_id"],
                                       "partitions": []})
                        continue
                    by_id[t["name"]] = t["topic_id"]
                named.append(t)
            requested = named
        allowed = self.broker.allowed
        if requested is None:                      # every topic: those the principal may not describe are left out
            names = [n for n in view.topic_names() if allowed(Op.DESCRIBE, Res.TOPIC, n)]
        else:
            names = [t["name"] for t in requested]
        for name in names:
            if requested is not None and not allowed(Op.DESCRIBE, Res.TOPIC, name):
                # a topic asked for by id is answered by its id, its name withheld (as Kafka)
                topics.append({"error_code": errors.TopicAuthorizationFailedError.code, "partitions": [],
                               **({"name": None, "topic_id": by_id[name]} if name in by_id else {"name": name})})
                continue
            try:
                create = requested is not None and allow_create and self.config.auto_create_topics_enable
                if create and not self.may_create_topic(name):
                    create = False                    # auto-creation needs Create: a missing topic is refused
                    try:
                        view.topic_partitions(name)
                    except errors.UnknownTopicOrPartitionError:
                        raise errors.TopicAuthorizationFailedError(f"Not authorized to create topic {name}") from None
                if create:
                    count, internal = await _off_loop(view.ensure_topic, name)
                else:
                    count, internal = view.topic_partitions(name)
                partitions = [view.partition_metadata(name, p) for p in range(count)]
                if header.api_version < 6:                 # Kafka: LEADER_NOT_AVAILABLE before v6
                    for pm in partitions:
                        if pm["error_code"] == errors.ListenerNotFoundError.code:
                            pm["error_code"] = errors.LeaderNotAvailableError.code
                topic_id = view.topic_id(name)
            except SeglogError as e:
                topics.append({"error_code": _err(e), "name": name, "partitions": []})
                continue
            topics.append({"error_code": 0, "name": name, "topic_id": topic_id, "is_internal": internal,
                           "partitions": partitions})
        answer = {"brokers": view.brokers(), "cluster_id": self.node.cluster_id,
                  "controller_id": view.controller_id(), "topics": topics}
        if header.api_version >= 8:                    # authorized operations (KIP-430), when asked
            if body.get("include_topic_authorized_operations"):
                for t in topics:                       # of the topics the principal may describe
                    if t["error_code"] != errors.TopicAuthorizationFailedError.code:
                        t["topic_authorized_operations"] = authorized_operations(self.broker, Res.TOPIC, t["name"])
            if header.api_version <= 10 and body.get("include_cluster_authorized_operations"):
                answer["cluster_authorized_operations"] = (authorized_operations(self.broker, Res.CLUSTER)
                                                           if allowed(Op.DESCRIBE, Res.CLUSTER) else 0)
        return answer


HANDLERS = {
    ApiKey.API_VERSIONS: Handlers.handle_api_versions,
    ApiKey.METADATA: Handlers.handle_metadata,
    ApiKey.PRODUCE: Handlers.handle_produce,
    ApiKey.FETCH: Handlers.handle_fetch,
    ApiKey.LIST_OFFSETS: Handlers.handle_list_offsets,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Handlers.handle_offset_for_leader_epoch,
    ApiKey.DELETE_RECORDS: Handlers.handle_delete_records,
    ApiKey.DESCRIBE_PRODUCERS: Handlers.handle_describe_producers,
    ApiKey.INIT_PRODUCER_ID: Handlers.handle_init_producer_id,
    ApiKey.FIND_COORDINATOR: Handlers.handle_find_coordinator,
    ApiKey.JOIN_GROUP: Handlers.handle_join_group,
    ApiKey.SYNC_GROUP: Handlers.handle_sync_group,
    ApiKey.HEARTBEAT: Handlers.handle_heartbeat,
    ApiKey.LEAVE_GROUP: Handlers.handle_leave_group,
    ApiKey.OFFSET_COMMIT: Handlers.handle_offset_commit,
    ApiKey.OFFSET_FETCH: Handlers.handle_offset_fetch,
    ApiKey.DESCRIBE_GROUPS: Handlers.handle_describe_groups,
    ApiKey.LIST_GROUPS: Handlers.handle_list_groups,
    ApiKey.DELETE_GROUPS: Handlers.handle_delete_groups,
    ApiKey.OFFSET_DELETE: Handlers.handle_offset_delete,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: Handlers.handle_consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: Handlers.handle_consumer_group_describe,
    ApiKey.ADD_PARTITIONS_TO_TXN: Handlers.handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: Handlers.handle_add_offsets_to_txn,
    ApiKey.END_TXN: Handlers.handle_end_txn,
    ApiKey.WRITE_TXN_MARKERS: Handlers.handle_write_txn_markers,
    ApiKey.TXN_OFFSET_COMMIT: Handlers.handle_txn_offset_commit,
    ApiKey.DESCRIBE_TRANSACTIONS: Handlers.handle_describe_transactions,
    ApiKey.LIST_TRANSACTIONS: Handlers.handle_list_transactions,
    ApiKey.CREATE_TOPICS: Handlers.handle_create_topics,
    ApiKey.DELETE_TOPICS: Handlers.handle_delete_topics,
    ApiKey.CREATE_PARTITIONS: Handlers.handle_create_partitions,
    ApiKey.DESCRIBE_CONFIGS: Handlers.handle_describe_configs,
    ApiKey.ALTER_CONFIGS: Handlers.handle_alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: Handlers.handle_incremental_alter_configs,
    ApiKey.ALTER_REPLICA_LOG_DIRS: Handlers.handle_alter_replica_log_dirs,
    ApiKey.DESCRIBE_LOG_DIRS: Handlers.handle_describe_log_dirs,
    ApiKey.DESCRIBE_CLUSTER: Handlers.handle_describe_cluster,
    ApiKey.ELECT_LEADERS: Handlers.handle_elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: Handlers.handle_alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: Handlers.handle_list_partition_reassignments,
}
HANDLERS.update(SECURITY_HANDLERS)
HANDLERS.update(QUOTA_HANDLERS)
HANDLERS.update(TOKEN_HANDLERS)
assert set(HANDLERS) == set(SUPPORTED_VERSIONS), "every advertised API has a handler"

"""RemoteGroupCoordinator: the group coordinator calls of seglog.Consumer (and the CLI's describe/delete), as
requests to the group's coordinator broker, found with FindCoordinator. Coordinator moves (NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, lost connections) find the coordinator again and
retry; heartbeats travel on a connection of their own, so they never queue behind a JoinGroup that waits for
a rebalance. Part of the RemoteNode surface (seglog.remote)."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Callable, Iterable, Mapping, Sequence

from .client import BrokerConnection, ClusterClient, RetryDeadline, error_for
from .errors import (GroupIdNotFoundError, MemberIdRequiredError, NetworkError, SeglogError, UnknownMemberIdError,
                     for_code)
from .group_types import JoinedMember, JoinResult, SyncResult
from .offsets_format import OffsetAndMetadata, TopicPartition
from .protocol import ApiKey

__all__ = ["RemoteCoordinator", "RemoteGroupCoordinator"]

COORDINATOR_MOVED = frozenset({14, 15, 16})   # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR
# OffsetCommit answers that concern the whole group (the broker repeats them for every partition): raised, as
# the in-process coordinator raises them. 22 ILLEGAL_GENERATION, 24 INVALID_GROUP_ID, 25 UNKNOWN_MEMBER_ID,
# 27 REBALANCE_IN_PROGRESS, 30 GROUP_AUTHORIZATION_FAILED, 82 FENCED_INSTANCE_ID.
GROUP_LEVEL = COORDINATOR_MOVED | {22, 24, 25, 27, 30, 82}
MEMBER_ERRORS = frozenset({UnknownMemberIdError.code, 82})  # LeaveGroup: per-member errors (82 FENCED_INSTANCE_ID)


def _resolved(value=None, error: BaseException | None = None) -> Future:
    fut: Future = Future()
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(value)
    return fut


class RemoteCoordinator:
    """Requests to the coordinator of a key (FindCoordinator with ``KEY_TYPE``: 0 a group, 1 a transactional
    id), found again and resent when it moves (see :meth:`request`)."""

    KEY_TYPE = 0
    KIND = "group"

    def __init__(self, cluster: ClusterClient, *, retry_timeout: float = 30.0):
        self.cluster = cluster
        self.retry_timeout = retry_timeout
        self._coordinators: dict[str, tuple[int, str, int]] = {}
        self._side_conns: dict[tuple[str, int], BrokerConnection] = {}
        self._rebalance_s: dict[str, float] = {}
        self._lock = threading.Lock()

    # -- finding the coordinator ------------------------------------------------------------------------------

    def coordinator(self, group_id: str) -> tuple[int, str, int]:
        """(broker id, host, port) of the key's coordinator; retries while none is available."""
        found = self._coordinators.get(group_id)
        if found is not None:
            return found
        deadline = RetryDeadline(self.retry_timeout)
        while True:
            try:
                r = self.cluster.any().request(ApiKey.FIND_COORDINATOR, {"key": group_id,
                                                                         "key_type": self.KEY_TYPE})
                code = r["error_code"]
                if code == 0:
                    found = (r["node_id"], r["host"], r["port"])
                    self._coordinators[group_id] = found
                    return found
                err = error_for(code, r.get("error_message") or f"FindCoordinator for {self.KIND} {group_id!r}: "
                                                                 f"{for_code(code).kafka_name}")
                if code not in COORDINATOR_MOVED:
                    raise err
            except NetworkError as e:
                err = e
            if deadline.expired():
                raise err
            deadline.sleep()

    def _forget(self, group_id: str) -> None:
        self._coordinators.pop(group_id, None)

    def _connection(self, group_id: str, side: bool) -> BrokerConnection:
        _, host, port = self.coordinator(group_id)
        if not side:
            return self.cluster.connection(host, port)
        with self._lock:
            conn = self._side_conns.get((host, port))
            if conn is None:
                conn = self._side_conns[(host, port)] = self.cluster.open(host, port)
            return conn

    def request(self, group_id: str, api: int, body: dict, error_code: Callable[[dict], int], *,
                extra_timeout: float = 0.0, side: bool = False, retry: bool = True,
                max_version: int | None = None) -> dict:
        """Send a group request to the coordinator and return the response; coordinator moves and lost
        connections find it again and resend (unless ``retry`` is False: heartbeats, whose next one comes soon
        anyway). ``side``: on the side connection to the coordinator (heartbeats, LeaveGroup), which a
        JoinGroup or SyncGroup waiting for its answer on the main one does not hold up. ``max_version`` caps
        the version the connection would choose."""
        deadline = RetryDeadline(self.retry_timeout if retry else 0.0)
        while True:
            try:
                conn = self._connection(group_id, side)
                version = None if max_version is None else min(max_version, conn.version(api))
                response = conn.request(api, body, version=version, extra_timeout=extra_timeout)
                code = error_code(response)
                if code not in COORDINATOR_MOVED:
                    return response
                err: SeglogError = error_for(code, f"{self.KIND} {group_id!r}: {for_code(code).kafka_name}")
            except NetworkError as e:
                err = e
            self._forget(group_id)
            if deadline.expired():
                raise err
            deadline.sleep()

    def close(self) -> None:
        with self._lock:
            conns, self._side_conns = list(self._side_conns.values()), {}
        for c in conns:
            c.close()


class RemoteGroupCoordinator(RemoteCoordinator):
    """The GroupCoordinator calls seglog.Consumer makes, as requests to the group's coordinator broker (found
    with FindCoordinator), plus the describe/list calls the CLI needs. Errors are raised as the in-process
    coordinator raises them; join/sync results come as already-resolved futures."""

    # -- membership -----------------------------------------------------------------------------------------

    def join_group(self, group_id: str, member_id: str, protocol_type: str,
                   protocols: Sequence[tuple[str, bytes]], session_timeout_ms: int,
                   rebalance_timeout_ms: int | None = None, *, group_instance_id: str | None = None,
                   client_id: str = "", client_host: str = "", require_known_member_id: bool = False) -> Future:
        """JoinGroup; the future holds the JoinResult or the error (MemberIdRequiredError with the
        ``member_id`` to rejoin with). The client id travels in the request header (the node's client_id);
        the host is the one the broker sees."""
        rebalance_ms = session_timeout_ms if rebalance_timeout_ms is None else rebalance_timeout_ms
        self._rebalance_s[group_id] = rebalance_ms / 1000
        body = {"group_id": group_id, "session_timeout_ms": session_timeout_ms, "rebalance_timeout_ms": rebalance_ms,
                "member_id": member_id, "group_instance_id": group_instance_id, "protocol_type": protocol_type,
                "protocols": [{"name": name, "metadata": bytes(meta)} for name, meta in protocols]}
        try:
            r = self.request(group_id, ApiKey.JOIN_GROUP, body, lambda r: r["error_code"],
                             extra_timeout=rebalance_ms / 1000)
        except SeglogError as e:
            return _resolved(error=e)
        code = r["error_code"]
        if code:
            err = error_for(code, f"JoinGroup of group {group_id!r}: {for_code(code).kafka_name}")
            if isinstance(err, MemberIdRequiredError):
                err.member_id = r["member_id"]
            return _resolved(error=err)
        members = tuple(JoinedMember(m["member_id"], m["group_instance_id"], bytes(m["metadata"]))
                        for m in r["members"])
        return _resolved(JoinResult(r["member_id"], r["generation_id"], protocol_type, r["protocol_name"],
                                    r["leader"], members))

    def sync_group(self, group_id: str, generation_id: int, member_id: str,
                   assignments: Mapping[str, bytes] | None = None, *, group_instance_id: str | None = None,
                   protocol_type: str | None = None, protocol_name: str | None = None) -> Future:
        """SyncGroup; the future holds the SyncResult (this member's assignment bytes) or the error."""
        body = {"group_id": group_id, "generation_id": generation_id, "member_id": member_id,
                "group_instance_id": group_instance_id,
                "assignments": [{"member_id": m, "assignment": bytes(a)} for m, a in (assignments or {}).items()]}
        try:
            r = self.request(group_id, ApiKey.SYNC_GROUP, body, lambda r: r["error_code"],
                             extra_timeout=self._rebalance_s.get(group_id, 60.0))
        except SeglogError as e:
            return _resolved(error=e)
        if r["error_code"]:
            return _resolved(error=error_for(r["error_code"], f"SyncGroup of group {group_id!r}: "
                                                              f"{for_code(r['error_code']).kafka_name}"))
        return _resolved(SyncResult(protocol_type or "", protocol_name or "", bytes(r["assignment"])))

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, *,
                  group_instance_id: str | None = None) -> None:
        """Heartbeat (on the side connection); raises RebalanceInProgressError, IllegalGenerationError,
        UnknownMemberIdError ... as the in-process coordinator does."""
        r = self.request(group_id, ApiKey.HEARTBEAT, {"group_id": group_id, "generation_id": generation_id,
                                                      "member_id": member_id, "group_instance_id": group_instance_id},
                         lambda r: r["error_code"], side=True, retry=False)
        if r["error_code"]:
            raise error_for(r["error_code"], f"Heartbeat of {member_id} in group {group_id!r}: "
                                             f"{for_code(r['error_code']).kafka_name}")

    def leave_group(self, group_id: str, members: Sequence[tuple[str, str | None]]) -> list[SeglogError | None]:
        """LeaveGroup (one request per member: versions 0-2 carry one); per member None or its error. Sent on
        the side connection: a member leaving while its JoinGroup waits leaves at once (the coordinator then
        answers that JoinGroup with UNKNOWN_MEMBER_ID)."""
        out: list[SeglogError | None] = []
        for member_id, _instance_id in members:
            r = self.request(group_id, ApiKey.LEAVE_GROUP, {"group_id": group_id, "member_id": member_id},
                             lambda r: r["error_code"], side=True)
            code = r["error_code"]
            if code and code not in MEMBER_ERRORS:
                raise error_for(code, f"LeaveGroup of group {group_id!r}: {for_code(code).kafka_name}")
            out.append(error_for(code, f"member {member_id} is not in group {group_id!r}") if code else None)
        return out

    # -- offsets --------------------------------------------------------------------------------------------

    def commit_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], OffsetAndMetadata | int],
                       generation_id: int = -1, member_id: str = "", *,
                       group_instance_id: str | None = None) -> dict[TopicPartition, SeglogError | None]:
        """OffsetCommit: per partition None or its error. A group-level refusal (the broker answers every
        partition with ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS ...) is raised,
        as the in-process coordinator raises it. Generation -1 / member "" is a simple commit."""
        return self._commit(group_id, ApiKey.OFFSET_COMMIT, offsets, {
            "group_id": group_id, "generation_id_or_member_epoch": generation_id, "member_id": member_id,
            "group_instance_id": group_instance_id, "retention_time_ms": -1})

    def _commit(self, group_id: str, api: int, offsets, body: dict) -> dict[TopicPartition, SeglogError | None]:
        """OffsetCommit or TxnOffsetCommit of `offsets` with the rest of the request in `body`."""
        topics: dict[str, list] = {}
        wanted = []
        for tp, om in offsets.items():
            tp = TopicPartition(*tp)
            if not isinstance(om, OffsetAndMetadata):
                om = OffsetAndMetadata(int(om))
            wanted.append(tp)
            topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "committed_offset": om.offset,
                                                    "committed_leader_epoch": om.leader_epoch,
                                                    "committed_metadata": om.metadata})
        if not wanted:
            return {}
        body = {**body, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

        def codes(r: dict) -> list[int]:
            return [p["error_code"] for t in r["topics"] for p in t["partitions"]]

        def common(r: dict) -> int:
            c = codes(r)
            return c[0] if c and all(x == c[0] for x in c) else 0

        r = self.request(group_id, api, body, common)
        code = common(r)
        if code in GROUP_LEVEL:
            what = "TxnOffsetCommit" if api == ApiKey.TXN_OFFSET_COMMIT else "OffsetCommit"
            raise error_for(code, f"{what} of group {group_id!r}: {for_code(code).kafka_name}")
        out: dict[TopicPartition, SeglogError | None] = dict.fromkeys(wanted)
        for t in r["topics"]:
            for p in t["partitions"]:
                c = p["error_code"]
                where = f"{t['name']}-{p['partition_index']}"
                out[TopicPartition(t["name"], p["partition_index"])] = \
                    error_for(c, f"commit of {where}: {for_code(c).kafka_name}") if c else None
        return out

    def txn_commit_offsets(self, group_id: str, transactional_id: str, producer_id: int, producer_epoch: int,
                           offsets: Mapping[tuple[str, int], OffsetAndMetadata | int], generation_id: int = -1,
                           member_id: str = "", *, group_instance_id: str | None = None
                           ) -> dict[TopicPartition, SeglogError | None]:
        """TxnOffsetCommit (v3: with the consumer's generation and member); answered as commit_offsets."""
        return self._commit(group_id, ApiKey.TXN_OFFSET_COMMIT, offsets, {
            "transactional_id": transactional_id, "group_id": group_id, "producer_id": producer_id,
            "producer_epoch": producer_epoch, "generation_id": generation_id, "member_id": member_id,
            "group_instance_id": group_instance_id})

    def fetch_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None
                      ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """OffsetFetch: committed offsets of `partitions` (None where there is none), or of every committed
        partition of the group when `partitions` is None."""
        wanted = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        if wanted is None:
            topics = None
        else:
            by_topic: dict[str, list[int]] = {}
            for tp in wanted:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]

        def code_of(r: dict) -> int:
            if r.get("error_code"):
                return r["error_code"]
            c = [p["error_code"] for t in r["topics"] for p in t["partitions"]]
            return c[0] if c and all(x == c[0] for x in c) else 0

        r = self.request(group_id, ApiKey.OFFSET_FETCH, {"group_id": group_id, "topics": topics}, code_of)
        code = code_of(r)
        if code:
            raise error_for(code, f"OffsetFetch of group {group_id!r}: {for_code(code).kafka_name}")
        out: dict[TopicPartition, OffsetAndMetadata | None] = {} if wanted is None else dict.fromkeys(wanted)
        for t in r["topics"]:
            for p in t["partitions"]:
                tp = TopicPartition(t["name"], p["partition_index"])
                if p["error_code"]:
                    raise error_for(p["error_code"], f"OffsetFetch of {tp.topic}-{tp.partition} in group "
                                                     f"{group_id!r}: {for_code(p['error_code']).kafka_name}")
                if p["committed_offset"] >= 0:
                    out[tp] = OffsetAndMetadata(p["committed_offset"], p["committed_leader_epoch"],
                                                p["metadata"] or "")
                elif wanted is not None:
                    out[tp] = None
        return out

    # -- administration -----------------------------------------------------------------------------------

    def describe_group(self, group_id: str) -> tuple[dict, tuple[int, str, int]]:
        """The DescribeGroups entry of one group and the coordinator (id, host, port) that answered. No classic
        group of that id (v6+ answers GROUP_ID_NOT_FOUND) is the Dead entry with no members older versions give."""
        r = self.request(group_id, ApiKey.DESCRIBE_GROUPS, {"groups": [group_id]},
                         lambda r: r["groups"][0]["error_code"] if r["groups"] else 0)
        [entry] = r["groups"]
        if entry["error_code"] == GroupIdNotFoundError.code:
            return {**entry, "error_code": 0, "group_state": "Dead", "members": []}, self.coordinator(group_id)
        if entry["error_code"]:
            raise error_for(entry["error_code"], f"DescribeGroups of group {group_id!r}: "
                                                 f"{for_code(entry['error_code']).kafka_name}")
        return entry, self.coordinator(group_id)

    def describe_consumer_group(self, group_id: str) -> tuple[dict | None, tuple[int, str, int]]:
        """The ConsumerGroupDescribe entry of a KIP-848 consumer group (None: no such consumer group, e.g. a
        classic one) and the coordinator (id, host, port) that answered."""
        r = self.request(group_id, ApiKey.CONSUMER_GROUP_DESCRIBE,
                         {"group_ids": [group_id], "include_authorized_operations": False},
                         lambda r: r["groups"][0]["error_code"] if r["groups"] else 0)
        [entry] = r["groups"]
        if entry["error_code"] == GroupIdNotFoundError.code:
            return None, self.coordinator(group_id)
        if entry["error_code"]:
            raise error_for(entry["error_code"], entry["error_message"] or f"ConsumerGroupDescribe of group "
                                                                          f"{group_id!r}")
        return entry, self.coordinator(group_id)

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, SeglogError | None]:
        """DeleteGroups at each group's coordinator: per group None (deleted, with its offsets) or its error
        (GroupIdNotFoundError, NonEmptyGroupError), as the in-process coordinator answers."""
        out: dict[str, SeglogError | None] = {}
        for gid in dict.fromkeys(group_ids):
            def code_of(r: dict, gid=gid) -> int:
                return next(e["error_code"] for e in r["results"] if e["group_id"] == gid)
            code = code_of(self.request(gid, ApiKey.DELETE_GROUPS, {"groups_names": [gid]}, code_of))
            out[gid] = error_for(code, f"DeleteGroups of group {gid!r}: {for_code(code).kafka_name}") if code else None
        return out

    def delete_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]]
                       ) -> dict[TopicPartition, SeglogError | None]:
        """OffsetDelete at the group's coordinator, answered as the in-process coordinator's ``delete_offsets``:
        per partition None (deleted) or GroupSubscribedToTopicError; a group-level error is raised."""
        wanted = [TopicPartition(*tp) for tp in dict.fromkeys(partitions)]
        by_topic: dict[str, list[int]] = {}
        for tp in wanted:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        body = {"group_id": group_id, "topics": [{"name": t, "partitions": [{"partition_index": p} for p in ps]}
                                                 for t, ps in by_topic.items()]}
        r = self.request(group_id, ApiKey.OFFSET_DELETE, body, lambda r: r["error_code"])
        if r["error_code"]:
            raise error_for(r["error_code"], f"OffsetDelete of group {group_id!r}: "
                                             f"{for_code(r['error_code']).kafka_name}")
        codes = {TopicPartition(t["name"], p["partition_index"]): p["error_code"]
                 for t in r["topics"] for p in t["partitions"]}
        return {tp: error_for(codes[tp], f"OffsetDelete of {tp.topic}-{tp.partition} for group {group_id!r}: "
                                         f"{for_code(codes[tp]).kafka_name}") if codes.get(tp) else None
                for tp in wanted}


"""Handlers of the group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, DescribeGroups, ListGroups, DeleteGroups, and KIP-848's ConsumerGroupHeartbeat and
ConsumerGroupDescribe."""

from __future__ import annotations

import asyncio
import functools
import time

from .. import errors
from ..errors import SeglogError
from ..group import GroupState
from ..offsets_format import OffsetAndMetadata, TopicPartition
from ..security.acls import AclOperation as Op
from ..security.acls import ResourceType as Res
from .handler_support import _err, _off_loop, authorized_operations, by_topic
from .throttling import parked

TOPIC_DENIED = errors.TopicAuthorizationFailedError.code


class GroupHandlers:
    """FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups,
    ListGroups, DeleteGroups, OffsetDelete, ConsumerGroupHeartbeat, ConsumerGroupDescribe: a part of handlers.Handlers (``self.broker``,
    ``self.node``, ``self.config``, ``self._group_pool``)."""

    # -- groups -----------------------------------------------------------------------------------------------

    async def handle_find_coordinator(self, header, body):
        """v0-3 look up one key, v4 a batch (``coordinator_keys``) answered key by key."""
        if header.api_version >= 4:
            return {"coordinators": [{"key": key, **self._find_coordinator(key, body["key_type"])}
                                     for key in body["coordinator_keys"]]}
        return self._find_coordinator(body["key"], body["key_type"])

    def _find_coordinator(self, key: str, key_type: int) -> dict:
        """key_type 0: a group's coordinator (Describe on the group), 1: a transactional id's (Describe on the
        transactional id)."""
        if key_type == 0 and not self.broker.allowed(Op.DESCRIBE, Res.GROUP, key):
            return {"error_code": errors.GroupAuthorizationFailedError.code, "error_message": None,
                    "node_id": -1, "host": "", "port": -1}
        if key_type == 1 and not self.broker.allowed(Op.DESCRIBE, Res.TRANSACTIONAL_ID, key):
            return {"error_code": errors.TransactionalIdAuthorizationFailedError.code, "error_message": None,
                    "node_id": -1, "host": "", "port": -1}
        try:
            if key_type == 0:
                node_id, host, port = self.broker.view.coordinator_for(key)
            elif key_type == 1:
                node_id, host, port = self.broker.view.txn_coordinator_for(key)
            else:
                raise errors.InvalidRequestError(f"Unknown coordinator type {key_type} in FindCoordinator request")
        except SeglogError as e:
            return {"error_code": _err(e), "error_message": str(e), "node_id": -1, "host": "", "port": -1}
        return {"error_code": 0, "error_message": None, "node_id": node_id, "host": host, "port": port}

    async def _coordinator(self, group_id: str, operation: Op = Op.READ):
        """The coordinator of a group this broker coordinates, once the principal may do `operation` on the
        group (GroupAuthorizationFailedError; checked here, on the event loop, where the request's connection
        is known)."""
        self.check_group(group_id, operation)
        await _off_loop(self.broker.view.check_coordinator, group_id)
        return self.node.group_coordinator

    def check_group(self, group_id: str, operation: Op) -> None:
        if not self.broker.allowed(operation, Res.GROUP, group_id):
            raise errors.GroupAuthorizationFailedError(f"Not authorized to access group: {group_id}")

    async def _group_call(self, fn, *args, **kwargs):
        """A group coordinator call that may wait for an offsets write, on the group threads (GROUP_THREADS)."""
        return await asyncio.get_running_loop().run_in_executor(self._group_pool,
                                                                functools.partial(fn, *args, **kwargs))

    async def handle_join_group(self, header, body):
        """JoinGroup: answered when the rebalance completes. If the client closes its connection meanwhile
        (killed, interrupted), the coordinator is told (abandon_join): the answer could never reach it, and
        the rebalance must not wait for it."""
        v = header.api_version
        gid = body["group_id"]
        try:
            coord = await self._coordinator(gid)
            fut = await self._group_call(
                coord.join_group, gid, body["member_id"], body["protocol_type"],
                [(p["name"], bytes(p["metadata"])) for p in body["protocols"]], body["session_timeout_ms"],
                body["rebalance_timeout_ms"] if v >= 1 else None, group_instance_id=body["group_instance_id"],
                client_id=header.client_id or "", client_host=self.broker.current_peer_host(),
                require_known_member_id=v >= 4)
            answer = asyncio.wrap_future(fut)
            if not fut.done():
                gone = asyncio.ensure_future(self.broker.client_gone().wait())
                try:
                    with parked():                       # the rebalance: no work of this request's
                        await asyncio.wait((answer, gone), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    gone.cancel()
                if not answer.done():
                    answer.cancel()
                    await self._group_call(coord.abandon_join, gid, fut)
                    return None                       # nobody to answer: the connection is closing
            r = await answer
        except errors.MemberIdRequiredError as e:
            return {"error_code": e.code, "member_id": e.member_id, "protocol_name": "", "leader": ""}
        except SeglogError as e:
            return {"error_code": _err(e), "member_id": body["member_id"], "protocol_name": "", "leader": ""}
        return {"error_code": 0, "generation_id": r.generation_id, "protocol_type": r.protocol_type,
                "protocol_name": r.protocol_name,
                "leader": r.leader_id, "member_id": r.member_id,
                "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                             "metadata": m.metadata} for m in r.members]}

    async def handle_sync_group(self, header, body):
        try:
            coord = await self._coordinator(body["group_id"])
            fut = await self._group_call(
                coord.sync_group, body["group_id"], body["generation_id"], body["member_id"],
                {a["member_id"]: bytes(a["assignment"]) for a in body["assignments"]} or None,
                group_instance_id=body["group_instance_id"], protocol_type=body["protocol_type"],
                protocol_name=body["protocol_name"])
            with parked():                               # the leader's assignment
                r = await asyncio.wrap_future(fut)
        except SeglogError as e:
            return {"error_code": _err(e), "assignment": b""}
        return {"error_code": 0, "protocol_type": r.protocol_type, "protocol_name": r.protocol_name,
                "assignment": r.assignment}

    async def handle_heartbeat(self, header, body):
        try:
            coord = await self._coordinator(body["group_id"])
            coord.heartbeat(body["group_id"], body["generation_id"], body["member_id"],
                            group_instance_id=body["group_instance_id"])
        except SeglogError as e:
            return {"error_code": _err(e)}
        return {"error_code": 0}

    async def handle_leave_group(self, header, body):
        """v0-2 one member (its error is the response's), v3+ a batch with one error per member."""
        batch = header.api_version >= 3
        members = ([(m["member_id"], m["group_instance_id"]) for m in body["members"]] if batch
                   else [(body["member_id"], None)])
        try:
            coord = await self._coordinator(body["group_id"])
            errs = await self._group_call(coord.leave_group, body["group_id"], members)
        except SeglogError as e:
            return {"error_code": _err(e)}
        if not batch:
            return {"error_code": 0 if errs[0] is None else _err(errs[0])}
        return {"error_code": 0, "members": [{"member_id": m, "group_instance_id": i,
                                              "error_code": 0 if e is None else _err(e)}
                                             for (m, i), e in zip(members, errs)]}

    async def handle_offset_commit(self, header, body):
        offsets, placed = {}, []
        now = int(time.time() * 1000)
        for t in body["topics"]:
            for p in t["partitions"]:
                tp = TopicPartition(t["name"], p["partition_index"])
                placed.append(tp)
                offsets[tp] = OffsetAndMetadata(p["committed_offset"], p["committed_leader_epoch"],
                                                p["committed_metadata"] or "", now)
        denied = {tp for tp in placed if not self.broker.allowed(Op.READ, Res.TOPIC, tp.topic)}
        try:
            coord = await self._coordinator(body["group_id"])
            offsets = {tp: om for tp, om in offsets.items() if tp not in denied}      # topics need Read
            errs = {}
            if offsets:
                errs = await self._group_call(coord.commit_offsets, body["group_id"], offsets,
                                              body["generation_id_or_member_epoch"], body["member_id"],
                                              group_instance_id=body["group_instance_id"],
                                              epoch_version=header.api_version >= 9)
            codes = {tp: (0 if e is None else _err(e)) for tp, e in errs.items()}
            codes.update(dict.fromkeys(denied, TOPIC_DENIED))
        except SeglogError as e:
            codes = dict.fromkeys(placed, _err(e))
            # partitions refused before the group check (unknown ones) keep their own error, as in Kafka
            codes.update({tp: _err(x) for tp, x in getattr(e, "partition_errors", {}).items()})
        answers = by_topic(((tp, codes.get(tp, 0)) for tp in placed), lambda p, c: {"partition_index": p,
                                                                                  "error_code": c})
        return {"topics": [{"name": t, "partitions": ps} for t, ps in answers.items()]}

    async def handle_offset_fetch(self, header, body):
        """v0-7 one group; v8 several (``groups``), each answered with its own error code."""
        stable = body["require_stable"]
        if header.api_version >= 8:
            return {"groups": [{"group_id": g["group_id"],
                                **await self._offset_fetch(g["group_id"], g["topics"], 8, stable,
                                                           (g["member_id"], g["member_epoch"]))}
                               for g in body["groups"]]}
        return await self._offset_fetch(body["group_id"], body["topics"], header.api_version, stable)

    async def _offset_fetch(self, group: str, topics, version: int, require_stable: bool,
                            member: tuple[str | None, int] = (None, -1)) -> dict:
        """Describe on the group; of the topics, those the principal may not describe are left out of an
        every-topic answer and answered TOPIC_AUTHORIZATION_FAILED when named (as Kafka). require_stable (v7+,
        read_committed consumers): partitions whose offsets a transaction still has pending answer
        UNSTABLE_OFFSET_COMMIT (retriable), as Kafka's coordinator does. ``member`` (v9+: id, epoch) is checked
        against a consumer group's members (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH)."""
        denied: set[TopicPartition] = set()
        try:
            coord = await self._coordinator(group, Op.DESCRIBE)
            coord.check_offset_fetch_member(group, *member)
            if topics is None:
                stored = coord.fetch_offsets(group, None)
                wanted = sorted(tp for tp in stored if self.broker.allowed(Op.DESCRIBE, Res.TOPIC, tp.topic))
            else:
                wanted = [TopicPartition(t["name"], p) for t in topics for p in t["partition_indexes"]]
                denied = {tp for tp in wanted if not self.broker.allowed(Op.DESCRIBE, Res.TOPIC, tp.topic)}
                stored = coord.fetch_offsets(group, [tp for tp in wanted if tp not in denied])
            unstable = coord.unstable_offsets(group, wanted) if require_stable else set()
        except SeglogError as e:
            if version >= 2:
                return {"error_code": _err(e), "topics": []}
            wanted = [TopicPartition(t["name"], p) for t in topics or () for p in t["partition_indexes"]]
            return {"topics": self._offset_topics(wanted, {}, _err(e))}
        return {"error_code": 0, "topics": self._offset_topics(wanted, stored, 0, denied, unstable)}

    @staticmethod
    def _offset_topics(wanted, stored, code, denied=frozenset(), unstable=frozenset()):
        by_topic: dict[str, list] = {}
        for tp in wanted:
            om = None if tp in unstable else stored.get(tp)
            by_topic.setdefault(tp.topic, []).append({
                "partition_index": tp.partition, "committed_offset": -1 if om is None else om.offset,
                "committed_leader_epoch": -1 if om is None else om.leader_epoch,
                "metadata": "" if om is None else om.metadata,
                "error_code": TOPIC_DENIED if tp in denied else
                errors.UnstableOffsetCommitError.code if tp in unstable else code})
        return [{"name": t, "partitions": ps} for t, ps in by_topic.items()]

    async def handle_describe_groups(self, header, body):
        out = []
        for group in body["groups"]:
            try:
                coord = await self._coordinator(group, Op.DESCRIBE)
                [d] = coord.describe_groups([group])
            except SeglogError as e:
                out.append({"error_code": _err(e), "group_id": group, "group_state": "", "protocol_type": "",
                            "protocol_data": "", "members": []})
                continue
            if d.not_found is not None and header.api_version >= 6:          # KIP-1043
                out.append({"error_code": errors.GroupIdNotFoundError.code, "error_message": d.not_found,
                            "group_id": group, "group_state": d.state.value, "protocol_type": "",
                            "protocol_data": "", "members": []})
                continue
            out.append({"error_code": 0, "group_id": d.group_id, "group_state": d.state.value,
                        "protocol_type": d.protocol_type, "protocol_data": d.protocol,
                        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                                     "client_id": m.client_id, "client_host": m.client_host,
                                     "member_metadata": m.metadata, "member_assignment": m.assignment}
                                    for m in d.members]})
            if header.api_version >= 3 and body.get("include_authorized_operations"):      # KIP-430
                out[-1]["authorized_operations"] = authorized_operations(self.broker, Res.GROUP, d.group_id)
        return {"groups": out}

    async def handle_list_groups(self, header, body):
        try:
            states = body["states_filter"] or None                       # v4+: empty means every state
            listing = (await _off_loop(lambda: self.node.group_coordinator)).list_groups(states)
        except errors.UnknownTopicOrPartitionError:
            listing = []                                  # no offsets topic yet: no groups
        except SeglogError as e:
            return {"error_code": _err(e), "groups": []}
        # Describe on the cluster lists every group, else the groups the principal may describe (as Kafka)
        everyone = self.broker.allowed(Op.DESCRIBE, Res.CLUSTER)
        types = {t.lower() for t in body["types_filter"]}                # v5+: empty means every type
        return {"error_code": 0, "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type,
                                             "group_state": g.state.value, "group_type": g.group_type}
                                            for g in listing if g.state is not GroupState.DEAD
                                            and (not types or g.group_type in types)
                                            and (everyone or self.broker.allowed(Op.DESCRIBE, Res.GROUP, g.group_id))]}

    async def handle_delete_groups(self, header, body):
        """DeleteGroups, as Kafka: per group (a repeated name answered once) NOT_COORDINATOR when another broker
        coordinates it, else the coordinator's answer: deleted with its offsets, GROUP_ID_NOT_FOUND, or
        NON_EMPTY_GROUP while it has members. (Kafka's INVALID_GROUP_ID is for a null id, which v0-1 cannot
        carry: such a request fails to decode.)"""
        wanted = list(dict.fromkeys(body["groups_names"]))
        denied = {g: errors.GroupAuthorizationFailedError(f"Not authorized to access group: {g}") for g in wanted
                  if not self.broker.allowed(Op.DELETE, Res.GROUP, g)}
        results = await self._group_call(self._delete_groups, [g for g in wanted if g not in denied])
        results = {g: denied[g] if g in denied else results[g] for g in wanted}
        return {"results": [{"group_id": g, "error_code": 0 if e is None else _err(e)} for g, e in results.items()]}

    def _delete_groups(self, group_ids: list[str]) -> dict[str, SeglogError | None]:
        out: dict[str, SeglogError | None] = dict.fromkeys(group_ids)
        mine = []
        for gid in group_ids:
            try:
                self.broker.view.check_coordinator(gid)
                mine.append(gid)
            except SeglogError as e:
                out[gid] = e
        if mine:
            try:
                out.update(self.node.group_coordinator.delete_groups(mine))
            except SeglogError as e:
                out.update(dict.fromkeys(mine, e))
        return out

    async def handle_offset_delete(self, header, body):
        """OffsetDelete at the group's coordinator: a top-level error (NOT_COORDINATOR, GROUP_ID_NOT_FOUND,
        NON_EMPTY_GROUP, INVALID_GROUP_ID) or one per partition (GROUP_SUBSCRIBED_TO_TOPIC; 0: deleted)."""
        wanted = [TopicPartition(t["name"], p["partition_index"]) for t in body["topics"] for p in t["partitions"]]
        denied = {tp for tp in wanted if not self.broker.allowed(Op.READ, Res.TOPIC, tp.topic)}
        try:
            coord = await self._coordinator(body["group_id"], Op.DELETE)
            errs = await self._group_call(coord.delete_offsets, body["group_id"],
                                          [tp for tp in wanted if tp not in denied])
            errs.update(dict.fromkeys(denied, errors.TopicAuthorizationFailedError()))
        except SeglogError as e:
            return {"error_code": _err(e), "topics": []}
        return {"error_code": 0, "topics": [
            {"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"],
                 "error_code": _err(e) if (e := errs[TopicPartition(t["name"], p["partition_index"])]) else 0}
                for p in t["partitions"]]} for t in body["topics"]]}

    async def handle_consumer_group_heartbeat(self, header, body):
        """ConsumerGroupHeartbeat (KIP-848): the coordinator's answer, with topics by id on the wire and by
        name in the coordinator (owned partitions of topics no longer known are left out)."""
        gid, member_id = body["group_id"], body["member_id"]
        try:
            coord = await self._coordinator(gid)
            owned = None
            if body["topic_partitions"] is not None:
                owned = {}
                for tp in body["topic_partitions"]:
                    name = self._topic_name(tp["topic_id"])
                    if name is not None:
                        owned[name] = frozenset(tp["partitions"])
            r = await self._group_call(
                coord.consumer_group_heartbeat, gid, member_id, body["member_epoch"], instance_id=body["instance_id"], rack_id=body["rack_id"],
                rebalance_timeout_ms=body["rebalance_timeout_ms"],
                subscribed_topic_names=body["subscribed_topic_names"],
                subscribed_topic_regex=body["subscribed_topic_regex"], server_assignor=body["server_assignor"],
                owned=owned, client_id=header.client_id or "", client_host=self.broker.current_peer_host())
        except SeglogError as e:
            return {"error_code": _err(e), "error_message": str(e), "member_id": member_id or None,
                    "member_epoch": -1, "heartbeat_interval_ms": 0, "assignment": None}
        assignment = None
        if r.assignment is not None:
            assignment = {"topic_partitions": [{"topic_id": self._topic_id(t), "partitions": sorted(ps)}
                                               for t, ps in r.assignment.items() if self._topic_id(t) is not None]}
        return {"error_code": 0, "error_message": None, "member_id": r.member_id, "member_epoch": r.member_epoch,
                "heartbeat_interval_ms": r.heartbeat_interval_ms, "assignment": assignment}

    def _topic_name(self, topic_id):
        try:
            return self.broker.view.topic_name(topic_id)
        except SeglogError:
            return None

    def _topic_id(self, name):
        try:
            return self.broker.view.topic_id(name)
        except SeglogError:
            return None

    async def handle_consumer_group_describe(self, header, body):
        """ConsumerGroupDescribe (KIP-848): per group GROUP_ID_NOT_FOUND for an unknown or classic group,
        else its epochs, assignor and members with their current and target assignments."""
        out = []
        for gid in body["group_ids"]:
            try:
                coord = await self._coordinator(gid, Op.DESCRIBE)
                [d] = coord.describe_consumer_groups([gid])
                if isinstance(d, SeglogError):
                    raise d
            except SeglogError as e:
                out.append({"error_code": _err(e), "error_message": str(e), "group_id": gid, "group_state": "",
                            "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": []})
                continue
            out.append({"error_code": 0, "error_message": None, "group_id": gid, "group_state": d.state.value,
                        "group_epoch": d.group_epoch, "assignment_epoch": d.assignment_epoch,
                        "assignor_name": d.assignor, "members": [
                            {"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                             "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
                             "subscribed_topic_names": list(m.subscribed_topic_names),
                             "subscribed_topic_regex": m.subscribed_topic_regex,
                             "assignment": self._described(m.assignment),
                             "target_assignment": self._described(m.target_assignment),
                             "member_type": 0 if m.classic else 1}
                            for m in d.members]})
            if body["include_authorized_operations"]:
                out[-1]["authorized_operations"] = authorized_operations(self.broker, Res.GROUP, gid)
        return {"groups": out}

    def _described(self, assignment) -> dict:
        return {"topic_partitions": [{"topic_id": tid, "topic_name": t, "partitions": sorted(ps)}
                                     for t, ps in assignment.items() if (tid := self._topic_id(t)) is not None]}

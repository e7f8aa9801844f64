"""Request handlers: each turns one decoded Kafka request into calls on the Node (and its group coordinator)
and builds the response body. No behaviour lives here that the in-process door does not share: validation,
idempotence, offsets and groups are the core's; handlers only translate shapes and exceptions to error codes.

Every handler is ``async def handle_<api>(self, header, body) -> dict | None`` (None: no response, as for
acks=0 produce requests). Errors of one partition become that partition's error code; a handler never
lets a SeglogError escape for something the client did wrong.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .. import errors
from ..config import KAFKA_NAMES, LogConfig
from ..errors import SeglogError, code_of
from ..group import GroupState
from ..topic_names import validate_topic_name
from ..offsets_format import OffsetAndMetadata, TopicPartition
from ..protocol import SUPPORTED_VERSIONS, ApiKey, api_versions_body
from .record_errors import record_errors
from .security_handlers import SECURITY_HANDLERS

log = logging.getLogger("seglog.broker")

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3          # ListOffsets' special timestamps
TRANSACTIONS_UNSUPPORTED = 53         # TRANSACTIONAL_ID_AUTHORIZATION_FAILED: fatal for the client, clear message
RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4
# Kafka's controller refuses an admin request that would write more metadata records than this (a record per
# topic and per partition; QuorumController.MAX_RECORDS_PER_USER_OP) with POLICY_VIOLATION for every topic of
# the request. Here it also keeps one request (a typo, a flipped bit) from opening logs without bound.
MAX_RECORDS_PER_USER_OP = 10_000
EXCESSIVE_BATCH = "Unable to perform excessively large batch operation."
CONFIG_SOURCE_TOPIC, CONFIG_SOURCE_STATIC_BROKER, CONFIG_SOURCE_DEFAULT = 1, 4, 5
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3          # IncrementalAlterConfigs operations
# Threads for group coordinator calls that may wait for an offsets write's replication (up to its 30 s timeout
# with a follower gone): JoinGroup, SyncGroup, LeaveGroup, OffsetCommit, DeleteGroups. They never run on the
# event loop (the followers' fetches that acknowledge the write are served there) and have threads of their
# own, so waiting commits hold up neither the loop nor the other requests' off-loop calls.
GROUP_THREADS = 16
LIST_CONFIGS = frozenset(f.metadata["key"].kafka for f in dataclasses.fields(LogConfig)
                         if f.metadata["key"].kind == "list")


class CloseConnection(Exception):
    """Raised by a handler that answers by closing the connection (a failed acks=0 produce request): the
    server logs the message with the client's address and closes it, sending nothing."""


def _err(exc: BaseException) -> int:
    return code_of(exc)


async def _off_loop(fn, *args, **kwargs):
    """Run a call that may block (metadata store round trips, waiting for replication) off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(None, lambda: fn(*args, **kwargs))


class Handlers:
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
        return api_versions_body()

    async def handle_metadata(self, header, body):
        view = self.broker.view
        requested = body["topics"]
        if header.api_version == 0 and not requested:
            requested = None                                      # v0 has no null: an empty array means all
        allow_create = body["allow_auto_topic_creation"]          # True for versions before the field existed
        topics = []
        if requested is not None and any(t["name"] is None for t in requested):
            # v10+ may name a topic by id only; topics have no ids here (all zero), so no id is known
            topics += [{"error_code": errors.UnknownTopicIdError.code, "name": None, "topic_id": t["topic_id"],
                        "partitions": []} for t in requested if t["name"] is None]
            requested = [t for t in requested if t["name"] is not None]
        names = view.topic_names() if requested is None else [t["name"] for t in requested]
        for name in names:
            try:
                if requested is not None and allow_create and self.config.auto_create_topics_enable:
                    count, internal = await _off_loop(view.ensure_topic, name)
                else:
                    count, internal = view.topic_partitions(name)
                partitions = [view.partition_metadata(name, p) for p in range(count)]
            except SeglogError as e:
                topics.append({"error_code": _err(e), "name": name, "partitions": []})
                continue
            topics.append({"error_code": 0, "name": name, "is_internal": internal, "partitions": partitions})
        return {"brokers": view.brokers(), "cluster_id": self.node.cluster_id, "controller_id": view.controller_id(),
                "topics": topics}

    # -- Produce ----------------------------------------------------------------------------------------------

    async def handle_produce(self, header, body):
        """Append every partition's batch first, then wait for the acks=all replication of all of them at once,
        under one deadline (timeout_ms from now), as Kafka's produce purgatory does: a request for many
        partitions takes about timeout_ms at worst, not that much per partition. An acks=0 request gets no
        answer; if any of its partitions failed, the connection is closed (CloseConnection), which is how
        Kafka tells such a client to refresh its metadata."""
        acks = body["acks"]
        if header.api_version < 3:              # message format v0/v1: advertised (as Kafka does), never served
            err = errors.UnsupportedVersionError.code
        elif body["transactional_id"] is not None:
            err = TRANSACTIONS_UNSUPPORTED
        elif acks not in (-1, 0, 1):
            err = errors.InvalidRequiredAcksError.code
        else:
            err = 0
        deadline = time.monotonic() + max(body["timeout_ms"], 0) / 1000
        responses, appends = [], []
        for topic in body["topic_data"]:
            parts = []
            for pd in topic["partition_data"]:
                appends.append(self._append_one(topic["name"], pd["index"], pd["records"], acks, err))
            responses.append({"name": topic["name"], "partition_responses": parts})
        # one partition after the other, on the disk threads: a request inflates one batch at a time
        done = [await append for append in appends]
        waits = []
        i = 0
        for topic, response in zip(body["topic_data"], responses):
            for _ in topic["partition_data"]:
                out, wait = done[i]
                i += 1
                response["partition_responses"].append(out)
                if wait is None:
                    continue
                if acks == -1:
                    waits.append(self._await_acks(out, *wait, acks, deadline))
                else:                                    # acks 0/1: the leader's append is all there is
                    self._acked(out, *wait)
        if len(waits) == 1:
            await waits[0]
        elif waits:
            await asyncio.gather(*waits)
        if acks == 0:
            failed = [f"{t['name']}-{p['index']}: {p.get('error_message') or p['error_code']}"
                      for t in responses for p in t["partition_responses"] if p["error_code"]]
            if failed:
                raise CloseConnection(f"acks=0 produce request failed ({'; '.join(failed[:5])})")
            return None
        return {"responses": responses}

    async def _append_one(self, topic: str, index: int, records, acks: int, err: int):
        """(the partition's response entry, (partition, last offset, start time) to wait for, or None)."""
        out: dict[str, Any] = {"index": index, "error_code": err, "base_offset": -1}
        if err:
            out["error_message"] = {TRANSACTIONS_UNSUPPORTED: "transactions are not supported",
                                    errors.UnsupportedVersionError.code: "Produce v0-2 (message format v0 and "
                                                                         "v1) is not supported",
                                    errors.InvalidRequiredAcksError.code: f"acks must be -1, 0 or 1, not {acks}"
                                    }.get(err)
            return out, None
        part = None
        try:
            if records is None or len(records) == 0:
                raise errors.InvalidRecordError("produce request without a record batch")
            self.broker.view.check_produce(topic, index, acks)
            part = self.node.partition(topic, index)
            t0 = time.perf_counter()
            base, last, append_time = await self.broker.append_on_disk(topic, index, part.append, records, acks)
            out.update(base_offset=base, log_append_time_ms=append_time)
            return out, (part, last, t0)
        except SeglogError as e:
            out.update(error_code=_err(e), error_message=str(e))
            if isinstance(e, (errors.InvalidRecordError, errors.InvalidTimestampError)) and part is not None:
                found = record_errors(records, part.log.config, int(time.time() * 1000), topic, index, e)
                if found is not None:
                    out.update(zip(("error_code", "record_errors", "error_message"), found))
            return out, None

    async def _await_acks(self, out: dict, part, last: int, t0: float, acks: int, deadline: float) -> None:
        try:
            left_ms = max(0, int((deadline - time.monotonic()) * 1000))
            await self.broker.view.wait_for_acks(part, last, acks, left_ms)
        except SeglogError as e:
            out.update(error_code=_err(e), error_message=str(e), base_offset=-1)
            out.pop("log_append_time_ms", None)
            return
        self._acked(out, part, last, t0)

    def _acked(self, out: dict, part, last: int, t0: float) -> None:
        self.broker.metrics.observe("produce_append", time.perf_counter() - t0)
        out["log_start_offset"] = part.log_start_offset

    # -- Fetch ------------------------------------------------------------------------------------------------

    async def handle_fetch(self, header, body):
        if body["session_id"] != 0 or body["session_epoch"] > 0:
            return {"error_code": errors.FetchSessionIdNotFoundError.code, "session_id": 0, "responses": []}
        replica = body["replica_id"] >= 0
        max_wait = max(0, body["max_wait_ms"]) / 1000
        min_bytes = body["min_bytes"]
        deadline = time.monotonic() + max_wait
        wanted = [(t["topic"], p) for t in body["topics"] for p in t["partitions"]]
        while True:
            version = self.broker.data_version()
            responses, total, failed, corrupt = await self.broker.on_disk(
                self._read_partitions, wanted, body["max_bytes"], replica, body["replica_id"])
            for topic, index in corrupt:                    # the Log logged each (file, offset, position)
                self.broker.metrics.corrupt_batch(topic, index)
            left = deadline - time.monotonic()
            if total >= min_bytes or failed or left <= 0:
                return {"error_code": 0, "session_id": 0, "responses": responses}
            started = time.monotonic()
            await self.broker.wait_for_data({(t, p["partition"]) for t, p in wanted}, version, left)
            self.broker.note_wait(time.monotonic() - started)

    def _read_partitions(self, wanted, max_bytes: int, replica: bool, replica_id: int):
        """(responses, bytes read, whether a partition failed, [(topic, partition) that met a corrupt batch]);
        runs on a disk thread."""
        by_topic: dict[str, list] = {}
        order: list[str] = []
        total = 0
        failed = False
        corrupt = []
        for topic, p in wanted:
            if topic not in by_topic:
                by_topic[topic] = []
                order.append(topic)
            entry = {"partition_index": p["partition"], "error_code": 0, "high_watermark": -1,
                     "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
                     "records": b""}
            by_topic[topic].append(entry)
            try:
                self.broker.view.check_fetch(topic, p["partition"], p["current_leader_epoch"], replica)
                part = self.node.partition(topic, p["partition"])
                if p["last_fetched_epoch"] >= 0 and self._diverged(entry, part, p):
                    failed = True                          # answered at once, as any partition error is
                    continue
                budget = min(p["partition_max_bytes"], max_bytes - total)
                # as Kafka: the first non-empty partition may exceed the limits by one batch, later ones may not
                res = part.fetch(p["fetch_offset"], max(budget, 0), committed_only=not replica, min_one=total == 0)
                if replica:
                    self.broker.view.follower_fetched(part, replica_id, p["fetch_offset"], p["log_start_offset"])
                    res.high_watermark = part.high_watermark
                entry.update(high_watermark=res.high_watermark, last_stable_offset=res.high_watermark,
                             log_start_offset=res.log_start_offset,
                             records=self.broker.records_chunk(res.records))
                total += len(res.records)
            except errors.OffsetOutOfRangeError as e:
                entry.update(error_code=e.code, high_watermark=e.end, log_start_offset=e.start)
                failed = True
            except SeglogError as e:
                if isinstance(e, errors.CorruptRecordError):
                    corrupt.append((topic, p["partition"]))
                entry["error_code"] = _err(e)
                failed = True
        return [{"topic": t, "partitions": by_topic[t]} for t in order], total, failed, corrupt

    @staticmethod
    def _diverged(entry: dict, part, p) -> bool:
        """Fetch v12+: as Kafka, when the fetcher's last fetched epoch ends (in this log) before its fetch
        offset, or is not an epoch of this log, answer the epoch and end offset it diverges at instead of
        records (the fetcher truncates there)."""
        epoch, end = part.log.end_offset_for_epoch(p["last_fetched_epoch"])
        if epoch == p["last_fetched_epoch"] and end >= p["fetch_offset"]:
            return False
        entry.update(high_watermark=part.high_watermark, last_stable_offset=part.high_watermark,
                     log_start_offset=part.log_start_offset, diverging_epoch={"epoch": epoch, "end_offset": end})
        return True

    # -- ListOffsets, OffsetForLeaderEpoch ------------------------------------------------------------------------

    async def handle_list_offsets(self, header, body):
        topics = []
        for t in body["topics"]:
            parts = []
            for p in t["partitions"]:
                out = {"partition_index": p["partition_index"], "error_code": 0, "timestamp": -1, "offset": -1}
                try:
                    self.broker.view.check_fetch(t["name"], p["partition_index"], p["current_leader_epoch"], False)
                    part = self.node.partition(t["name"], p["partition_index"])
                    ts = p["timestamp"]
                    if ts == LATEST:
                        out["offset"] = part.high_watermark
                    elif ts == EARLIEST:
                        out["offset"] = part.log_start_offset
                    elif ts == MAX_TIMESTAMP and header.api_version >= 7:
                        found = part.log.offset_of_max_timestamp()
                        if found is not None and found.offset < part.high_watermark:
                            out.update(offset=found.offset, timestamp=found.timestamp)
                    elif ts < 0:
                        raise errors.InvalidRequestError(f"unsupported ListOffsets timestamp {ts}")
                    else:
                        found = await self.broker.on_disk(part.log.offset_for_timestamp, ts)   # index reads
                        if found is not None and found.offset < part.high_watermark:
                            out.update(offset=found.offset, timestamp=found.timestamp)
                    out["leader_epoch"] = part.log.leader_epoch
                except SeglogError as e:
                    out["error_code"] = _err(e)
                parts.append(out)
            topics.append({"name": t["name"], "partitions": parts})
        return {"topics": topics}

    async def handle_offset_for_leader_epoch(self, header, body):
        topics = []
        for t in body["topics"]:
            parts = []
            for p in t["partitions"]:
                out = {"partition": p["partition"], "error_code": 0, "leader_epoch": -1, "end_offset": -1}
                try:
                    self.broker.view.check_fetch(t["topic"], p["partition"], p["current_leader_epoch"],
                                                 body["replica_id"] >= 0)
                    epoch, end = self.node.partition(t["topic"], p["partition"]).log.end_offset_for_epoch(
                        p["leader_epoch"])
                    out.update(leader_epoch=epoch, end_offset=end)
                except SeglogError as e:
                    out["error_code"] = _err(e)
                parts.append(out)
            topics.append({"topic": t["topic"], "partitions": parts})
        return {"topics": topics}

    async def handle_delete_records(self, header, body):
        """DeleteRecords: raise each partition's log start offset (offset -1: to the high watermark), on its
        leader; the answer is the new low watermark, or NOT_LEADER_OR_FOLLOWER / OFFSET_OUT_OF_RANGE / ..."""
        topics = []
        for t in body["topics"]:
            parts = []
            for p in t["partitions"]:
                out = {"partition_index": p["partition_index"], "low_watermark": -1, "error_code": 0}
                try:
                    if self.broker.view.topic_partitions(t["name"])[1]:
                        raise errors.InvalidTopicError(f"Cannot delete records of internal topic {t['name']}")
                    self.broker.view.check_produce(t["name"], p["partition_index"], 1)       # the leader's job
                    log_ = self.node.partition(t["name"], p["partition_index"]).log
                    out["low_watermark"] = await self.broker.on_disk(log_.delete_records_before, p["offset"])
                except SeglogError as e:
                    out["error_code"] = _err(e)
                parts.append(out)
            topics.append({"name": t["name"], "partitions": parts})
        return {"topics": topics}

    # -- producers --------------------------------------------------------------------------------------------

    async def handle_init_producer_id(self, header, body):
        if body["transactional_id"] is not None:
            return {"error_code": TRANSACTIONS_UNSUPPORTED, "producer_id": -1, "producer_epoch": -1}
        try:
            return {"error_code": 0, "producer_id": await _off_loop(self.broker.view.init_producer_id),
                    "producer_epoch": 0}
        except SeglogError as e:
            return {"error_code": _err(e), "producer_id": -1, "producer_epoch": -1}

    # -- groups -----------------------------------------------------------------------------------------------

    async def handle_find_coordinator(self, header, body):
        """v0-3 look up one key, v4 a batch (``coordinator_keys``) answered key by key."""
        if header.api_version >= 4:
            return {"coordinators": [{"key": key, **self._find_coordinator(key, body["key_type"])}
                                     for key in body["coordinator_keys"]]}
        return self._find_coordinator(body["key"], body["key_type"])

    def _find_coordinator(self, key: str, key_type: int) -> dict:
        if key_type != 0:
            return {"error_code": TRANSACTIONS_UNSUPPORTED, "error_message": "transactions are not supported",
                    "node_id": -1, "host": "", "port": -1}
        try:
            node_id, host, port = self.broker.view.coordinator_for(key)
        except SeglogError as e:
            return {"error_code": _err(e), "error_message": str(e), "node_id": -1, "host": "", "port": -1}
        return {"error_code": 0, "error_message": None, "node_id": node_id, "host": host, "port": port}

    def _coordinator(self, group_id: str):
        self.broker.view.check_coordinator(group_id)
        return self.node.group_coordinator

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
            coord = await _off_loop(self._coordinator, gid)
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
            coord = await _off_loop(self._coordinator, body["group_id"])
            fut = await self._group_call(
                coord.sync_group, body["group_id"], body["generation_id"], body["member_id"],
                {a["member_id"]: bytes(a["assignment"]) for a in body["assignments"]} or None,
                group_instance_id=body["group_instance_id"], protocol_type=body["protocol_type"],
                protocol_name=body["protocol_name"])
            r = await asyncio.wrap_future(fut)
        except SeglogError as e:
            return {"error_code": _err(e), "assignment": b""}
        return {"error_code": 0, "protocol_type": r.protocol_type, "protocol_name": r.protocol_name,
                "assignment": r.assignment}

    async def handle_heartbeat(self, header, body):
        try:
            coord = await _off_loop(self._coordinator, body["group_id"])
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
            coord = await _off_loop(self._coordinator, body["group_id"])
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
        try:
            coord = await _off_loop(self._coordinator, body["group_id"])
            errs = await self._group_call(coord.commit_offsets, body["group_id"], offsets,
                                   body["generation_id_or_member_epoch"], body["member_id"],
                                   group_instance_id=body["group_instance_id"])
            codes = {tp: (0 if e is None else _err(e)) for tp, e in errs.items()}
        except SeglogError as e:
            codes = dict.fromkeys(placed, _err(e))
            # partitions refused before the group check (unknown ones) keep their own error, as in Kafka
            codes.update({tp: _err(x) for tp, x in getattr(e, "partition_errors", {}).items()})
        by_topic: dict[str, list] = {}
        for tp in placed:
            by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition, "error_code": codes.get(tp, 0)})
        return {"topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

    async def handle_offset_fetch(self, header, body):
        """v0-7 one group; v8 several (``groups``), each answered with its own error code."""
        if header.api_version >= 8:
            return {"groups": [{"group_id": g["group_id"], **await self._offset_fetch(g["group_id"], g["topics"], 8)}
                               for g in body["groups"]]}
        return await self._offset_fetch(body["group_id"], body["topics"], header.api_version)

    async def _offset_fetch(self, group: str, topics, version: int) -> dict:
        try:
            coord = await _off_loop(self._coordinator, group)
            if topics is None:
                stored = coord.fetch_offsets(group, None)
                wanted = sorted(stored)
            else:
                wanted = [TopicPartition(t["name"], p) for t in topics for p in t["partition_indexes"]]
                stored = coord.fetch_offsets(group, wanted)
        except SeglogError as e:
            if version >= 2:
                return {"error_code": _err(e), "topics": []}
            wanted = [TopicPartition(t["name"], p) for t in topics or () for p in t["partition_indexes"]]
            return {"topics": self._offset_topics(wanted, {}, _err(e))}
        return {"error_code": 0, "topics": self._offset_topics(wanted, stored, 0)}

    @staticmethod
    def _offset_topics(wanted, stored, code):
        by_topic: dict[str, list] = {}
        for tp in wanted:
            om = stored.get(tp)
            by_topic.setdefault(tp.topic, []).append({
                "partition_index": tp.partition, "committed_offset": -1 if om is None else om.offset,
                "committed_leader_epoch": -1 if om is None else om.leader_epoch,
                "metadata": "" if om is None else om.metadata, "error_code": code})
        return [{"name": t, "partitions": ps} for t, ps in by_topic.items()]

    async def handle_describe_groups(self, header, body):
        out = []
        for group in body["groups"]:
            try:
                coord = await _off_loop(self._coordinator, group)
                [d] = coord.describe_groups([group])
            except SeglogError as e:
                out.append({"error_code": _err(e), "group_id": group, "group_state": "", "protocol_type": "",
                            "protocol_data": "", "members": []})
                continue
            out.append({"error_code": 0, "group_id": d.group_id, "group_state": d.state.value,
                        "protocol_type": d.protocol_type, "protocol_data": d.protocol,
                        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                                     "client_id": m.client_id, "client_host": m.client_host,
                                     "member_metadata": m.metadata, "member_assignment": m.assignment}
                                    for m in d.members]})
        return {"groups": out}

    async def handle_list_groups(self, header, body):
        try:
            states = body["states_filter"] or None                       # v4+: empty means every state
            listing = (await _off_loop(lambda: self.node.group_coordinator)).list_groups(states)
        except errors.UnknownTopicOrPartitionError:
            listing = []                                  # no offsets topic yet: no groups
        except SeglogError as e:
            return {"error_code": _err(e), "groups": []}
        return {"error_code": 0, "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type,
                                             "group_state": g.state.value}
                                            for g in listing if g.state is not GroupState.DEAD]}

    async def handle_delete_groups(self, header, body):
        """DeleteGroups, as Kafka: per group (a repeated name answered once) NOT_COORDINATOR when another broker
        coordinates it, else the coordinator's answer: deleted with its offsets, GROUP_ID_NOT_FOUND, or
        NON_EMPTY_GROUP while it has members. (Kafka's INVALID_GROUP_ID is for a null id, which v0-1 cannot
        carry: such a request fails to decode.)"""
        results = await self._group_call(self._delete_groups, list(dict.fromkeys(body["groups_names"])))
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

    # -- admin ------------------------------------------------------------------------------------------------

    async def handle_create_topics(self, header, body):
        records = 0
        for t in body["topics"]:
            n = self.config.num_partitions if t["num_partitions"] == -1 else t["num_partitions"]
            records += 1 + max(n, 0)
        if records > MAX_RECORDS_PER_USER_OP:
            return {"topics": [{"name": t["name"], "error_code": errors.PolicyViolationError.code,
                                "error_message": EXCESSIVE_BATCH} for t in body["topics"]]}
        results = []
        for t in body["topics"]:
            name = t["name"]
            try:
                if t["assignments"]:
                    raise errors.InvalidReplicaAssignmentError("explicit replica assignments are not supported")
                configs = {c["name"]: c["value"] for c in t["configs"] if c["value"] is not None}
                partitions = None if t["num_partitions"] == -1 else t["num_partitions"]
                rf = None if t["replication_factor"] == -1 else t["replication_factor"]
                await _off_loop(self.broker.view.create_topic, name, partitions, configs, rf,
                                validate_only=body["validate_only"], timeout_ms=body["timeout_ms"])
                results.append({"name": name, "error_code": 0, "error_message": None,
                                **self._created_topic(partitions, rf, configs)})
            except SeglogError as e:
                results.append({"name": name, "error_code": _err(e), "error_message": str(e)})
        return {"topics": results}

    def _created_topic(self, partitions: int | None, rf: int | None, configs: dict) -> dict:
        """CreateTopics v5+ describes each created topic: its partition count, replication factor and configs."""
        values = self.config.log_config().with_kafka(configs).to_kafka()
        return {"num_partitions": self.config.num_partitions if partitions is None else partitions,
                "replication_factor": self.config.default_replication_factor if rf is None else rf,
                "configs": [{"name": k, "value": values[k], "read_only": False, "is_sensitive": False,
                             "config_source": CONFIG_SOURCE_TOPIC if k in configs else CONFIG_SOURCE_DEFAULT}
                            for k in KAFKA_NAMES]}

    async def handle_delete_topics(self, header, body):
        out = []
        for name in body["topic_names"]:
            try:
                await _off_loop(self.broker.view.delete_topic, name)
                out.append({"name": name, "error_code": 0})
            except SeglogError as e:
                out.append({"name": name, "error_code": _err(e), "error_message": str(e)})
        return {"responses": out}

    async def handle_create_partitions(self, header, body):
        records = 0
        for t in body["topics"]:
            try:
                records += max(t["count"] - self.broker.view.topic_partitions(t["name"])[0], 0)
            except SeglogError:
                pass                                     # answered per topic below
        if records > MAX_RECORDS_PER_USER_OP:
            return {"results": [{"name": t["name"], "error_code": errors.PolicyViolationError.code,
                                 "error_message": EXCESSIVE_BATCH} for t in body["topics"]]}
        out = []
        for t in body["topics"]:
            try:
                if t["assignments"]:
                    raise errors.InvalidReplicaAssignmentError("explicit replica assignments are not supported")
                await _off_loop(self.broker.view.create_partitions, t["name"], t["count"],
                                validate_only=body["validate_only"], timeout_ms=body["timeout_ms"])
                out.append({"name": t["name"], "error_code": 0, "error_message": None})
            except SeglogError as e:
                out.append({"name": t["name"], "error_code": _err(e), "error_message": str(e)})
        return {"results": out}

    async def handle_describe_cluster(self, header, body):
        view = self.broker.view
        if body["endpoint_type"] != 1:                # 2: KRaft controllers, which a broker is not
            return {"error_code": errors.MismatchedEndpointTypeError.code, "cluster_id": self.node.cluster_id or "",
                    "endpoint_type": body["endpoint_type"],
                    "error_message": "The request was sent to an endpoint of type BROKER, but we wanted an "
                                     "endpoint of type CONTROLLER"}
        return {"error_code": 0, "error_message": None, "cluster_id": self.node.cluster_id or "",
                "controller_id": view.controller_id(),
                "brokers": [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
                            for b in view.brokers()]}

    async def handle_describe_log_dirs(self, header, body):
        """The one log dir of this broker: the partitions it holds (of the topics asked for, or all), their
        sizes, and the disk's total and usable bytes (v4+)."""
        return {"results": [await self.broker.on_disk(self._describe_log_dir, body["topics"])]}

    def _describe_log_dir(self, wanted) -> dict:
        node = self.node
        asked = None if wanted is None else {(t["topic"], p) for t in wanted for p in t["partitions"]}
        topics = []
        for name in node.topics(include_internal=True):
            parts = [{"partition_index": part.index, "partition_size": part.log.size_bytes,
                      "offset_lag": max(part.high_watermark - part.log_end_offset, 0), "is_future_key": False}
                     for part in node.partitions(name) if asked is None or (name, part.index) in asked]
            if parts:
                topics.append({"name": name, "partitions": parts})
        disk = shutil.disk_usage(node.path)
        return {"error_code": 0, "log_dir": node.path, "topics": topics, "total_bytes": disk.total,
                "usable_bytes": disk.free}

    async def handle_describe_configs(self, header, body):
        results = []
        for r in body["resources"]:
            keys = r["configuration_keys"] or None              # as Kafka: null or empty asks for every config
            try:
                if r["resource_type"] == RESOURCE_TOPIC:
                    configs = self._topic_configs(r["resource_name"], keys)
                elif r["resource_type"] == RESOURCE_BROKER:
                    configs = self._broker_configs(r["resource_name"], keys)
                else:
                    raise errors.InvalidRequestError(f"unsupported resource type {r['resource_type']}")
                results.append({"error_code": 0, "error_message": None, "resource_type": r["resource_type"],
                                "resource_name": r["resource_name"], "configs": configs})
            except SeglogError as e:
                results.append({"error_code": _err(e), "error_message": str(e), "resource_type": r["resource_type"],
                                "resource_name": r["resource_name"], "configs": []})
        return {"results": results}

    async def handle_alter_configs(self, header, body):
        """AlterConfigs: each topic's overrides become exactly the configs given (Kafka's replace semantics)."""
        def new_overrides(name: str, configs) -> dict[str, str]:
            out = {}
            for c in configs:
                if c["value"] is None:
                    raise errors.InvalidRequestError(f"Null value not supported for : {c['name']}")
                out[c["name"]] = c["value"]
            return out
        return {"responses": await self._alter_configs(body, new_overrides)}

    async def handle_incremental_alter_configs(self, header, body):
        """IncrementalAlterConfigs: SET / DELETE each named config, APPEND / SUBTRACT items of a list config
        (cleanup.policy), over the topic's current overrides."""
        def new_overrides(name: str, configs) -> dict[str, str]:
            overrides = self.broker.view.topic_overrides(name)
            effective = None
            for c in configs:
                key, op, value = c["name"], c["config_operation"], c["value"]
                if key not in KAFKA_NAMES:
                    raise errors.InvalidConfigError(f"Unknown topic config name: {key}")
                if op == OP_SET:
                    if value is None:
                        raise errors.InvalidRequestError(f"Null value not supported for : {key}")
                    overrides[key] = value
                elif op == OP_DELETE:
                    overrides.pop(key, None)
                elif op in (OP_APPEND, OP_SUBTRACT):
                    verb = "append" if op == OP_APPEND else "subtract"
                    if key not in LIST_CONFIGS:
                        raise errors.InvalidConfigError(f"Config value {verb} is not allowed for config key: {key}")
                    if effective is None:
                        effective = self.config.log_config().with_kafka(overrides).to_kafka()
                    current = [v for v in overrides.get(key, effective[key]).split(",") if v.strip()]
                    items = [v.strip() for v in (value or "").split(",") if v.strip()]
                    if op == OP_APPEND:
                        current += [v for v in items if v not in current]
                    else:
                        current = [v for v in current if v not in items]
                    overrides[key] = ",".join(current)
                else:
                    raise errors.InvalidRequestError(f"Unknown config operation {op} for config key: {key}")
            return overrides
        return {"responses": await self._alter_configs(body, new_overrides)}

    async def _alter_configs(self, body, new_overrides) -> list[dict]:
        """The per-resource answers of an (Incremental)AlterConfigs request. Topic resources: the new overrides
        (``new_overrides(topic, configs)``) are validated as a whole, then stored (not with validate_only).
        Broker configs are static here (read_only in DescribeConfigs): changing one is INVALID_REQUEST."""
        seen: dict[tuple[int, str], int] = {}
        for r in body["resources"]:
            key = (r["resource_type"], r["resource_name"])
            seen[key] = seen.get(key, 0) + 1
        out = []
        for r in body["resources"]:
            rtype, name = r["resource_type"], r["resource_name"]
            answer = {"error_code": 0, "error_message": None, "resource_type": rtype, "resource_name": name}
            try:
                if seen[(rtype, name)] > 1:
                    raise errors.InvalidRequestError(f"Error due to duplicate resource {name!r} of type {rtype}")
                names = [c["name"] for c in r["configs"]]
                if len(set(names)) != len(names):
                    raise errors.InvalidRequestError("Error due to duplicate config keys")
                if rtype == RESOURCE_TOPIC:
                    validate_topic_name(name)
                    self.broker.view.topic_partitions(name)              # UNKNOWN_TOPIC_OR_PARTITION
                    overrides = new_overrides(name, r["configs"])
                    await _off_loop(self.broker.view.alter_topic_config, name, overrides,
                                    validate_only=body["validate_only"])
                elif rtype == RESOURCE_BROKER:
                    if name not in ("", str(self.config.broker_id)):
                        raise errors.InvalidRequestError(f"Unexpected broker id, expected {self.config.broker_id} "
                                                         f"or empty string, but received {name}")
                    if names:
                        raise errors.InvalidRequestError(
                            f"Cannot update these configs dynamically: {', '.join(sorted(names))} (seglog broker "
                            f"configs are static: set them in server.properties or with --override, and restart)")
                else:
                    raise errors.InvalidRequestError(f"Unsupported resource type {rtype}: seglog alters the configs "
                                                     f"of topics ({RESOURCE_TOPIC}) only")
            except SeglogError as e:
                answer.update(error_code=_err(e), error_message=str(e))
            out.append(answer)
        return out

    def _topic_configs(self, name: str, keys):
        overrides = self.broker.view.topic_overrides(name)
        default = self.config.log_config().to_kafka()
        values = self.config.log_config().with_kafka(overrides).to_kafka()
        out = []
        for k in KAFKA_NAMES:
            if keys is not None and k not in keys:
                continue
            overridden = k in overrides
            out.append({"name": k, "value": values[k], "read_only": False,
                        "config_source": CONFIG_SOURCE_TOPIC if overridden else CONFIG_SOURCE_DEFAULT,
                        "is_default": not overridden and values[k] == default[k], "is_sensitive": False,
                        "synonyms": [], "config_type": 0, "documentation": None})
        return out

    def _broker_configs(self, name: str, keys):
        if name not in ("", str(self.config.broker_id)):
            raise errors.InvalidRequestError(f"this is broker {self.config.broker_id}, not {name}")
        out = []
        for f in dataclasses.fields(self.config):
            if "key" not in f.metadata:
                continue
            key = f.metadata["key"]
            k = key.kafka
            if keys is not None and k not in keys:
                continue
            v = getattr(self.config, f.name)
            text = ",".join(v) if isinstance(v, tuple) else ("" if v is None else str(v).lower()
                                                              if isinstance(v, bool) else str(v))
            out.append({"name": k, "value": None if key.secret else text, "read_only": True,   # passwords: null
                        "config_source": CONFIG_SOURCE_STATIC_BROKER, "is_default": v == f.default,
                        "is_sensitive": key.secret, "synonyms": [], "config_type": 0, "documentation": None})
        return out


HANDLERS = {
    ApiKey.API_VERSIONS: Handlers.handle_api_versions,
    ApiKey.METADATA: Handlers.handle_metadata,
    ApiKey.PRODUCE: Handlers.handle_produce,
    ApiKey.FETCH: Handlers.handle_fetch,
    ApiKey.LIST_OFFSETS: Handlers.handle_list_offsets,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Handlers.handle_offset_for_leader_epoch,
    ApiKey.DELETE_RECORDS: Handlers.handle_delete_records,
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
    ApiKey.CREATE_TOPICS: Handlers.handle_create_topics,
    ApiKey.DELETE_TOPICS: Handlers.handle_delete_topics,
    ApiKey.CREATE_PARTITIONS: Handlers.handle_create_partitions,
    ApiKey.DESCRIBE_CONFIGS: Handlers.handle_describe_configs,
    ApiKey.ALTER_CONFIGS: Handlers.handle_alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: Handlers.handle_incremental_alter_configs,
    ApiKey.DESCRIBE_LOG_DIRS: Handlers.handle_describe_log_dirs,
    ApiKey.DESCRIBE_CLUSTER: Handlers.handle_describe_cluster,
}
HANDLERS.update(SECURITY_HANDLERS)
assert set(HANDLERS) == set(SUPPORTED_VERSIONS), "every advertised API has a handler"

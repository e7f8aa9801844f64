"""Handlers of the data APIs: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords, DescribeProducers."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from .. import _engine, errors
from ..errors import SeglogError
from ..node import INTERNAL_TOPICS
from ..quotas.entities import FETCH, PRODUCE
from ..security.acls import AclOperation as Op
from ..security.acls import ResourceType as Res
from .handler_support import (EARLIEST, EARLIEST_LOCAL, LATEST, MAX_TIMESTAMP, CloseConnection, _err,
                              answer_partitions, point_to_leaders)
from .record_errors import record_errors
from .throttling import parked
from .throttling import replica_id as fetch_replica_id

TOPIC_DENIED = errors.TopicAuthorizationFailedError.code
NOT_LEADER = errors.NotLeaderOrFollowerError.code
# the partition errors whose answers name the current leader (KIP-951): Produce v10+ and Fetch v16+, as Kafka's
PRODUCE_LEADER_HINTS = frozenset({NOT_LEADER})
FETCH_LEADER_HINTS = frozenset({NOT_LEADER, errors.FencedLeaderEpochError.code})
ADMIN_CLIENT_ID = "__admin_client"     # Kafka lets Produce requests of this client id append to internal topics


class DataHandlers:
    """Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords, DescribeProducers: a part of
    handlers.Handlers (``self.broker``, ``self.node``, ``self.config``)."""

    # -- Produce ----------------------------------------------------------------------------------------------

    async def handle_produce(self, header, body):
        """Append every partition's batch first, then wait for the acks=all replication of all of them at once,
        under one deadline (timeout_ms from now), as Kafka's produce purgatory does: a request for many
        partitions takes about timeout_ms at worst, not that much per partition. An acks=0 request gets no
        answer; if any of its partitions failed, the connection is closed (CloseConnection), which is how
        Kafka tells such a client to refresh its metadata. Internal topics take no records from clients
        (INVALID_TOPIC_EXCEPTION), but from the client id ``__admin_client``, as Kafka's ReplicaManager."""
        acks, tid = body["acks"], body["transactional_id"]
        if header.api_version < 3:              # message format v0/v1: advertised (as Kafka does), never served
            err = errors.UnsupportedVersionError.code
        elif acks not in (-1, 0, 1):
            err = errors.InvalidRequiredAcksError.code
        elif _has_transactional_records(body) and (tid is None
                                                   or not self.broker.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, tid)):
            # as Kafka: transactional records need Write on the request's transactional id, checked before topics
            err = errors.TransactionalIdAuthorizationFailedError.code
        else:
            err = 0
        deadline = time.monotonic() + max(body["timeout_ms"], 0) / 1000
        responses, appends = [], []
        internal_allowed = header.client_id == ADMIN_CLIENT_ID
        for topic in body["topic_data"]:
            parts = []
            topic_err = err or (0 if self.broker.allowed(Op.WRITE, Res.TOPIC, topic["name"]) else TOPIC_DENIED)
            if not topic_err and topic["name"] in INTERNAL_TOPICS and not internal_allowed:
                topic_err = errors.InvalidTopicError.code          # as Kafka's ReplicaManager, after the ACLs
            for pd in topic["partition_data"]:
                appends.append(self._append_one(topic["name"], pd["index"], pd["records"], acks, topic_err, tid))
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
        with parked():                                   # replication: no work of this request's
            if len(waits) == 1:
                await waits[0]
            elif waits:
                await asyncio.gather(*waits)
        self.broker.quota_throttle(PRODUCE, self.broker.request_size())    # producer_byte_rate: the whole request
        if acks == 0:
            failed = [f"{t['name']}-{p['index']}: {p.get('error_message') or p['error_code']}"
                      for t in responses for p in t["partition_responses"] if p["error_code"]]
            if failed:
                raise CloseConnection(f"acks=0 produce request failed ({'; '.join(failed[:5])})")
            return None
        answer = {"responses": responses}
        if header.api_version >= 10:
            answer["node_endpoints"] = point_to_leaders(self.broker.view, (
                (t["name"], p["index"], p) for t in responses for p in t["partition_responses"]
                if p["error_code"] in PRODUCE_LEADER_HINTS))
        return answer

    async def _append_one(self, topic: str, index: int, records, acks: int, err: int, transactional_id):
        """(the partition's response entry, (partition, last offset, start time) to wait for, or None)."""
        out: dict[str, Any] = {"index": index, "error_code": err, "base_offset": -1}
        if err:
            out["error_message"] = {errors.UnsupportedVersionError.code: "Produce v0-2 (message format v0 and "
                                                                         "v1) is not supported",
                                    errors.InvalidRequiredAcksError.code: f"acks must be -1, 0 or 1, not {acks}",
                                    errors.TransactionalIdAuthorizationFailedError.code:
                                        f"Transactional Id authorization failed for {transactional_id}"
                                        if transactional_id is not None else "Transactional records need a "
                                                                             "transactional id",
                                    errors.InvalidTopicError.code: f"Cannot append to internal topic {topic}",
                                    }.get(err)
            return out, None
        part = None
        try:
            if records is None or len(records) == 0:
                raise errors.InvalidRecordError("produce request without a record batch")
            try:
                self.broker.view.check_produce(topic, index, acks)
            except (errors.NotEnoughReplicasError, errors.NotLeaderOrFollowerError) as e:
                # a follower remembers too: it may lead by the producer's next pipelined batch (Log.refused)
                held = self.node.hosted(topic, index)
                if held is not None:
                    held.log.refused(records, e)
                raise
            part = self.node.partition(topic, index)
            t0 = time.perf_counter()
            base, last, append_time = await self.broker.append_on_disk(topic, index, part.append, records, acks,
                                                                       transactional_id)
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
        replica_id = fetch_replica_id(header, body)
        replica = replica_id >= 0
        max_bytes = body["max_bytes"]
        quotas = self.broker.quotas if self.broker.quotas.enabled and not replica else None
        if quotas is not None:                # no more at once than the consumer_byte_rate quota's window allows
            cap = quotas.max_value_in_window(FETCH, *self.broker.quota_client())
            if cap is not None:
                max_bytes = min(max_bytes, int(cap))
        max_wait = max(0, body["max_wait_ms"]) / 1000
        min_bytes = body["min_bytes"]
        deadline = time.monotonic() + max_wait
        by_id = header.api_version >= 13                 # topics named by id (KIP-516), answered by id
        ids: dict[str, object] = {}
        unknown = []                                     # topic ids this broker does not know: answered at once
        wanted = []
        for t in body["topics"]:
            name = t.get("topic")
            if by_id:
                try:
                    name = self.broker.view.topic_name(t["topic_id"])
                except SeglogError as e:
                    unknown.append({"topic_id": t["topic_id"], "partitions": [
                        {"partition_index": p["partition"], "error_code": _err(e), "high_watermark": -1,
                         "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
                         "records": b""} for p in t["partitions"]]})     # empty, as Kafka: never null
                    continue
                ids[name] = t["topic_id"]
            wanted += [(name, p) for p in t["partitions"]]
        # a follower needs ClusterAction on the cluster, a consumer Read on each topic (by its name once an id
        # is resolved, as Kafka)
        if replica:
            denied = set() if self.broker.allowed(Op.CLUSTER_ACTION, Res.CLUSTER) else {t for t, _ in wanted}
        else:
            denied = {t for t in {t for t, _ in wanted} if not self.broker.allowed(Op.READ, Res.TOPIC, t)}
        while True:
            version = self.broker.data_version()
            responses, total, failed, corrupt = await self.broker.on_disk(
                self._read_partitions, wanted, max_bytes, replica, replica_id,
                body.get("isolation_level", 0), denied)
            for topic, index in corrupt:                    # the Log logged each (file, offset, position)
                self.broker.metrics.corrupt_batch(topic, index)
            left = deadline - time.monotonic()
            if total >= min_bytes or failed or unknown or left <= 0:
                if quotas is not None and max(self.broker.quota_throttle(FETCH, total),
                                              self.broker.request_time_throttle()):
                    # throttled (bytes or request time): answered empty, its bytes taken back (the client fetches
                    # them after the throttle), as Kafka's
                    quotas.unrecord(FETCH, *self.broker.quota_client(), total)
                    return {"error_code": 0, "session_id": 0, "responses": []}
                if by_id:
                    for r in responses:
                        r["topic_id"] = ids[r["topic"]]
                answer = {"error_code": 0, "session_id": 0, "responses": responses + unknown}
                if header.api_version >= 16:
                    answer["node_endpoints"] = point_to_leaders(self.broker.view, (
                        (r["topic"], p["partition_index"], p) for r in responses for p in r["partitions"]
                        if p["error_code"] in FETCH_LEADER_HINTS))
                return answer
            started = time.monotonic()
            await self.broker.wait_for_data({(t, p["partition"]) for t, p in wanted}, version, left)
            self.broker.note_wait(time.monotonic() - started)

    def _read_partitions(self, wanted, max_bytes: int, replica: bool, replica_id: int, isolation: int,
                         denied: set):
        """(responses, bytes read, whether a partition failed, [(topic, partition) that met a corrupt batch]);
        the partitions of `denied` topics are answered TOPIC_AUTHORIZATION_FAILED; runs on a disk thread."""
        by_topic: dict[str, list] = {}
        order: list[str] = []
        total = throttled_bytes = 0
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
            if topic in denied:
                entry["error_code"] = TOPIC_DENIED
                failed = True
                continue
            try:
                self.broker.view.check_fetch(topic, p["partition"], p["current_leader_epoch"], replica)
                part = self.node.partition(topic, p["partition"])
                if p["last_fetched_epoch"] >= 0 and self._diverged(entry, part, p):
                    failed = True                          # answered at once, as any partition error is
                    continue
                # a follower out of the ISR of a leader-throttled partition gets no records while the leader's
                # replication quota is exceeded (seglog.replication.throttle)
                throttled, hold = (self.broker.view.replication_throttle(topic, p["partition"], replica_id)
                                   if replica else (False, False))
                budget = 0 if hold else min(p["partition_max_bytes"], max_bytes - total)
                # as Kafka: the first non-empty partition may exceed the limits by one batch, later ones may not
                res = part.fetch(p["fetch_offset"], max(budget, 0), committed_only=not replica,
                                 min_one=total == 0 and not hold, isolation_level=0 if replica else isolation)
                if replica:
                    self.broker.view.follower_fetched(part, replica_id, p["fetch_offset"], p["log_start_offset"])
                    res.high_watermark = part.high_watermark
                aborted = res.aborted_transactions
                entry.update(high_watermark=res.high_watermark, last_stable_offset=res.last_stable_offset,
                             log_start_offset=res.log_start_offset,
                             aborted_transactions=None if aborted is None else
                             [{"producer_id": t.producer_id, "first_offset": t.first_offset} for t in aborted],
                             records=self.broker.records_chunk(res.records))
                total += len(res.records)
                if throttled:
                    throttled_bytes += len(res.records)
            except errors.OffsetOutOfRangeError as e:
                entry.update(error_code=e.code, high_watermark=e.end, log_start_offset=e.start)
                failed = True
            except SeglogError as e:
                if isinstance(e, errors.CorruptRecordError):
                    corrupt.append((topic, p["partition"]))
                entry["error_code"] = _err(e)
                failed = True
        if throttled_bytes:
            self.broker.view.record_replication(throttled_bytes)
        return [{"topic": t, "partitions": by_topic[t]} for t in order], total, failed, corrupt

    @staticmethod
    def _diverged(entry: dict, part, p) -> bool:
        """Fetch v12+: as Kafka, when the fetcher's last fetched epoch ends (in this log) before its fetch
        offset, or is not an epoch of this log, answer the epoch and end offset it diverges at instead of
        records (the fetcher truncates there)."""
        epoch, end = part.log.end_offset_for_epoch(p["last_fetched_epoch"])
        if epoch == p["last_fetched_epoch"] and end >= p["fetch_offset"]:
            return False
        entry.update(high_watermark=part.high_watermark, last_stable_offset=part.last_stable_offset,
                     log_start_offset=part.log_start_offset, diverging_epoch={"epoch": epoch, "end_offset": end})
        return True

    # -- ListOffsets, OffsetForLeaderEpoch ------------------------------------------------------------------------

    async def handle_list_offsets(self, header, body):
        async def fill(topic: str, p, out: dict) -> None:
            if not self.broker.allowed(Op.DESCRIBE, Res.TOPIC, topic):
                raise errors.TopicAuthorizationFailedError()
            self.broker.view.check_fetch(topic, p["partition_index"], p["current_leader_epoch"], False)
            part = self.node.partition(topic, p["partition_index"])
            ts = p["timestamp"]
            # as Kafka: read_committed (isolation 1) clients may not see past the last stable offset
            fetchable = part.last_stable_offset if body.get("isolation_level", 0) == 1 else part.high_watermark
            if ts == LATEST:
                out["offset"] = fetchable
            elif ts == EARLIEST or (ts == EARLIEST_LOCAL and header.api_version >= 8):
                out["offset"] = part.log_start_offset       # all of a log is local: no tiered storage
            elif ts == MAX_TIMESTAMP and header.api_version >= 7:
                found = part.log.offset_of_max_timestamp()
                if found is not None and found.offset < fetchable:
                    out.update(offset=found.offset, timestamp=found.timestamp)
            elif ts < 0:
                raise errors.InvalidRequestError(f"unsupported ListOffsets timestamp {ts}")
            else:
                found = await self.broker.on_disk(part.log.offset_for_timestamp, ts)   # index reads
                if found is not None and found.offset < fetchable:
                    out.update(offset=found.offset, timestamp=found.timestamp)
            out["leader_epoch"] = part.log.leader_epoch

        return {"topics": await answer_partitions(body["topics"], {"timestamp": -1, "offset": -1}, fill)}

    async def handle_offset_for_leader_epoch(self, header, body):
        """A follower's request needs ClusterAction on the cluster (else every partition is answered
        CLUSTER_AUTHORIZATION_FAILED), a consumer's Describe on each topic."""
        follower = body["replica_id"] >= 0
        cluster_denied = follower and not self.broker.allowed(Op.CLUSTER_ACTION, Res.CLUSTER)

        async def fill(topic: str, p, out: dict) -> None:
            if cluster_denied:
                raise errors.ClusterAuthorizationFailedError()
            if not follower and not self.broker.allowed(Op.DESCRIBE, Res.TOPIC, topic):
                raise errors.TopicAuthorizationFailedError()
            self.broker.view.check_fetch(topic, p["partition"], p["current_leader_epoch"],
                                         body["replica_id"] >= 0)
            epoch, end = self.node.partition(topic, p["partition"]).log.end_offset_for_epoch(
                p["leader_epoch"])
            out.update(leader_epoch=epoch, end_offset=end)

        return {"topics": await answer_partitions(body["topics"], {"leader_epoch": -1, "end_offset": -1}, fill,
                                                  topic="topic", index="partition")}

    async def handle_delete_records(self, header, body):
        """DeleteRecords: raise each partition's log start offset (offset -1: to the high watermark), on its
        leader; the answer is the new low watermark, or NOT_LEADER_OR_FOLLOWER / OFFSET_OUT_OF_RANGE / ..."""

        async def fill(topic: str, p, out: dict) -> None:
            if not self.broker.allowed(Op.DELETE, Res.TOPIC, topic):
                raise errors.TopicAuthorizationFailedError()
            if self.broker.view.topic_partitions(topic)[1]:
                raise errors.InvalidTopicError(f"Cannot delete records of internal topic {topic}")
            self.broker.view.check_produce(topic, p["partition_index"], 1)       # the leader's job
            log_ = self.node.partition(topic, p["partition_index"]).log
            out["low_watermark"] = await self.broker.on_disk(log_.delete_records_before, p["offset"])

        return {"topics": await answer_partitions(body["topics"], {"low_watermark": -1}, fill)}

    # -- producers --------------------------------------------------------------------------------------------

    async def handle_describe_producers(self, header, body):
        """DescribeProducers: each partition's producer state, from its leader (NOT_LEADER_OR_FOLLOWER on
        another broker, UNKNOWN_TOPIC_OR_PARTITION for none)."""

        async def fill(topic: str, p, out: dict) -> None:
            if not self.broker.allowed(Op.READ, Res.TOPIC, topic):
                raise errors.TopicAuthorizationFailedError()
            self.broker.view.check_produce(topic, p, 1)                  # the leader's answer
            producers = self.node.partition(topic, p).log.active_producers()
            out["active_producers"] = [
                {"producer_id": a.producer_id, "producer_epoch": a.producer_epoch,
                 "last_sequence": a.last_sequence, "last_timestamp": a.last_timestamp,
                 "coordinator_epoch": a.coordinator_epoch,
                 "current_txn_start_offset": a.current_txn_start_offset} for a in producers]

        return {"topics": await answer_partitions(body["topics"], {"error_message": None, "active_producers": []},
                                                  fill, partitions="partition_indexes", messages=True)}


def _has_transactional_records(body) -> bool:
    """Whether any partition of a produce request carries a transactional batch (Kafka's
    RequestUtils.hasTransactionalRecords). Records that do not parse are left for the append to refuse."""
    for topic in body["topic_data"]:
        for pd in topic["partition_data"]:
            try:
                if pd["records"] and any(b.is_transactional for b in _engine.batches(memoryview(pd["records"]), False)):
                    return True
            except SeglogError:
                continue
    return False

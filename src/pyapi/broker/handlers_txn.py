"""Handlers of the transaction APIs: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
TxnOffsetCommit, WriteTxnMarkers, DescribeTransactions, ListTransactions. They translate to the node's
transaction coordinator (seglog.txn.coordinator), its group coordinator (TxnOffsetCommit) and, for
WriteTxnMarkers, seglog.txn.markers.write_here at this partition leader.

Authorization is Kafka's (checked on the event loop, where the request's principal is known): a client's
transaction APIs need Write on the TransactionalId (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), AddPartitionsToTxn
also Write on each topic (an internal topic is TOPIC_AUTHORIZATION_FAILED even for a super user), AddOffsetsToTxn and TxnOffsetCommit Read on the group (and TxnOffsetCommit Read on each
topic); an idempotent producer's InitProducerId needs IdempotentWrite on the cluster or Write on some topic; the
brokers' APIs (AddPartitionsToTxn v4, WriteTxnMarkers) ClusterAction on the cluster; DescribeTransactions and
ListTransactions show only the transactional ids (and topics) the principal may describe."""

from __future__ import annotations

from .. import errors
from ..errors import SeglogError
from ..node import INTERNAL_TOPICS
from ..offsets_format import OffsetAndMetadata, TopicPartition, partitions_by_topic
from ..security.acls import AclOperation as Op
from ..security.acls import ResourceType as Res
from ..txn.log_format import TRANSACTION_STATE_TOPIC
from ..txn.markers import Marker, write_here
from ..txn.metadata import TxnState
from .handler_support import _err, _off_loop, by_topic

# Versions before these cannot carry PRODUCER_FENCED: Kafka answers INVALID_PRODUCER_EPOCH to them instead
_FENCED_SINCE = {"init_producer_id": 4, "add_partitions": 2, "add_offsets": 2, "end_txn": 2}
OPERATION_NOT_ATTEMPTED = 55
TXN_DENIED = errors.TransactionalIdAuthorizationFailedError.code
TOPIC_DENIED = errors.TopicAuthorizationFailedError.code


def _code(exc: BaseException, api: str, version: int) -> int:
    code = _err(exc)
    if code == errors.ProducerFencedError.code and version < _FENCED_SINCE[api]:
        return errors.InvalidProducerEpochError.code
    return code


class TxnHandlers:
    """The transaction APIs: a part of handlers.Handlers (``self.broker``, ``self.node``, ``self._group_call``
    for coordinator calls that wait for a state write's replication)."""

    async def _txn_call(self, fn_name: str, *args):
        coord = await _off_loop(lambda: self.node.txn_coordinator)
        return await self._group_call(getattr(coord, fn_name), *args)

    async def handle_init_producer_id(self, header, body):
        try:
            if body["transactional_id"] is not None:
                self.broker.authorize_transactional_id(body["transactional_id"])
            elif not (self.broker.allowed(Op.IDEMPOTENT_WRITE, Res.CLUSTER)
                      or self.broker.allowed_any(Op.WRITE, Res.TOPIC)):        # Kafka's rules since KIP-679
                raise errors.ClusterAuthorizationFailedError("Cluster authorization failed (IdempotentWrite)")
            if body["transactional_id"] is None:
                pid, epoch = await _off_loop(self.broker.view.init_producer_id), 0
            else:
                pid, epoch = await self._txn_call("init_producer_id", body["transactional_id"],
                                                  body["transaction_timeout_ms"], body["producer_id"],
                                                  body["producer_epoch"])
        except SeglogError as e:
            return {"error_code": _code(e, "init_producer_id", header.api_version), "producer_id": -1,
                    "producer_epoch": -1}
        return {"error_code": 0, "producer_id": pid, "producer_epoch": epoch}

    async def handle_add_partitions_to_txn(self, header, body):
        """v0-3: one transaction (a client's); v4: a batch, each may be verify_only (a partition leader's
        KIP-890 check), answered per transaction."""
        v = header.api_version
        if v >= 4:
            if not self.broker.allowed(Op.CLUSTER_ACTION, Res.CLUSTER):    # the brokers' batched form
                return {"error_code": errors.ClusterAuthorizationFailedError.code, "results_by_transaction": []}
            results = []
            for t in body["transactions"]:
                wanted = [(topic["name"], p) for topic in t["topics"] for p in topic["partitions"]]
                codes = await self._add_partitions(t["transactional_id"], t["producer_id"], t["producer_epoch"],
                                                   wanted, t["verify_only"], v)
                results.append({"transactional_id": t["transactional_id"], "topic_results": _by_topic(codes)})
            return {"error_code": 0, "results_by_transaction": results}
        wanted = [(topic["name"], p) for topic in body["v3_and_below_topics"] for p in topic["partitions"]]
        codes = await self._add_partitions(body["v3_and_below_transactional_id"], body["v3_and_below_producer_id"],
                                           body["v3_and_below_producer_epoch"], wanted, False, v)
        return {"results_by_topic_v3_and_below": _by_topic(codes)}

    async def _add_partitions(self, tid, pid, epoch, wanted, verify_only: bool, version: int) -> dict:
        if version < 4:                              # a client's: Write on the transactional id and on each topic
            if not self.broker.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, tid):
                return dict.fromkeys(wanted, TXN_DENIED)
            denied = {t for t in {t for t, _ in wanted}      # no client's transaction may hold an internal topic
                      if t in INTERNAL_TOPICS or not self.broker.allowed(Op.WRITE, Res.TOPIC, t)}
            if denied:                               # nothing added: the others are answered OPERATION_NOT_ATTEMPTED
                return {tp: TOPIC_DENIED if tp[0] in denied else OPERATION_NOT_ATTEMPTED for tp in wanted}
        try:
            if verify_only:
                found = await self._txn_call("verify", tid, pid, epoch, wanted)
                return {tp: 0 if e is None else _err(e) for tp, e in found.items()}
            await self._txn_call("add_partitions", tid, pid, epoch, wanted)
            return dict.fromkeys(wanted, 0)
        except errors.UnknownTopicOrPartitionError as e:
            unknown = set(getattr(e, "partitions", wanted))
            return {tp: e.code if tp in unknown else OPERATION_NOT_ATTEMPTED for tp in wanted}
        except SeglogError as e:
            return dict.fromkeys(wanted, _code(e, "add_partitions", version))

    async def handle_add_offsets_to_txn(self, header, body):
        if not self.broker.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, body["transactional_id"]):
            return {"error_code": TXN_DENIED}
        if not self.broker.allowed(Op.READ, Res.GROUP, body["group_id"]):
            return {"error_code": errors.GroupAuthorizationFailedError.code}
        try:
            await self._txn_call("add_offsets", body["transactional_id"], body["producer_id"],
                                 body["producer_epoch"], body["group_id"])
        except SeglogError as e:
            return {"error_code": _code(e, "add_offsets", header.api_version)}
        return {"error_code": 0}

    async def handle_end_txn(self, header, body):
        if not self.broker.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, body["transactional_id"]):
            return {"error_code": TXN_DENIED}
        try:
            await self._txn_call("end_txn", body["transactional_id"], body["producer_id"], body["producer_epoch"],
                                 body["committed"])
        except SeglogError as e:
            return {"error_code": _code(e, "end_txn", header.api_version)}
        return {"error_code": 0}

    async def handle_txn_offset_commit(self, header, body):
        offsets, placed = {}, []
        for t in body["topics"]:
            for p in t["partitions"]:
                tp = TopicPartition(t["name"], p["partition_index"])
                placed.append(tp)
                offsets[tp] = OffsetAndMetadata(p["committed_offset"], p["committed_leader_epoch"],
                                                p["committed_metadata"] or "")
        denied = {tp: TOPIC_DENIED for tp in offsets if not self.broker.allowed(Op.READ, Res.TOPIC, tp.topic)}
        try:
            self.broker.authorize_transactional_id(body["transactional_id"])
            coord = await self._coordinator(body["group_id"], Op.READ)
            allowed = {tp: om for tp, om in offsets.items() if tp not in denied}
            errs = {} if not allowed else await self._group_call(
                coord.txn_commit_offsets, body["group_id"], body["transactional_id"], body["producer_id"],
                body["producer_epoch"], allowed, body["generation_id"], body["member_id"],
                group_instance_id=body["group_instance_id"])
            codes = {tp: (0 if e is None else _err(e)) for tp, e in errs.items()} | denied
        except SeglogError as e:
            codes = dict.fromkeys(placed, _err(e))
            if not isinstance(e, (errors.TransactionalIdAuthorizationFailedError,
                                  errors.GroupAuthorizationFailedError)):
                codes.update(denied)
            codes.update({tp: _err(x) for tp, x in getattr(e, "partition_errors", {}).items()})
        answers = by_topic(((tp, codes.get(tp, 0)) for tp in placed), lambda p, c: {"partition_index": p,
                                                                                  "error_code": c})
        return {"topics": [{"name": t, "partitions": ps} for t, ps in answers.items()]}

    async def handle_write_txn_markers(self, header, body):
        """Between brokers: append each marker to the partitions this broker leads (NOT_LEADER_OR_FOLLOWER for
        the others), acknowledged once the in-sync replicas have it."""
        if not self.broker.allowed(Op.CLUSTER_ACTION, Res.CLUSTER):
            return {"markers": [{"producer_id": m["producer_id"], "topics": [
                {"name": t["name"], "partitions": [
                    {"partition_index": p, "error_code": errors.ClusterAuthorizationFailedError.code}
                    for p in t["partition_indexes"]]} for t in m["topics"]]} for m in body["markers"]]}
        markers = [Marker(t["name"], p, m["producer_id"], m["producer_epoch"], m["transaction_result"],
                          m["coordinator_epoch"])
                   for m in body["markers"] for t in m["topics"] for p in t["partition_indexes"]]
        view = self.broker.view
        codes = await self._group_call(write_here, self.node, markers, lambda t, p: view.check_produce(t, p, 1))
        out, i = [], 0
        for m in body["markers"]:
            topics = []
            for t in m["topics"]:
                parts = []
                for p in t["partition_indexes"]:
                    parts.append({"partition_index": p, "error_code": codes[i]})
                    i += 1
                topics.append({"name": t["name"], "partitions": parts})
            out.append({"producer_id": m["producer_id"], "topics": topics})
        return {"markers": out}

    async def handle_describe_transactions(self, header, body):
        """Describe on each transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); only the topics the
        principal may describe are listed."""
        asked = body["transactional_ids"]
        ids = [t for t in asked if self.broker.allowed(Op.DESCRIBE, Res.TRANSACTIONAL_ID, t)]
        if not ids:
            found = []
        elif TRANSACTION_STATE_TOPIC not in self.node.topics(include_internal=True):
            found = [errors.NotCoordinatorError("no transactional id is coordinated here")] * len(ids)
        else:
            found = await self._txn_call("describe", ids)
        denied = errors.TransactionalIdAuthorizationFailedError("Transactional Id authorization failed")
        by_id = dict(zip(ids, found))
        out = []
        for tid in asked:
            d = by_id.get(tid, denied)
            if isinstance(d, SeglogError):
                out.append({"error_code": _err(d), "transactional_id": tid, "transaction_state": "",
                            "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                            "producer_epoch": -1, "topics": []})
                continue
            by_topic = partitions_by_topic((t, p) for t, p in d.partitions
                                           if self.broker.allowed(Op.DESCRIBE, Res.TOPIC, t))
            out.append({"error_code": 0, "transactional_id": tid, "transaction_state": d.state,
                        "transaction_timeout_ms": d.timeout_ms, "transaction_start_time_ms": d.start_ms,
                        "producer_id": d.producer_id, "producer_epoch": d.producer_epoch,
                        "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]})
        return {"transaction_states": out}

    async def handle_list_transactions(self, header, body):
        """This broker's transactional ids (an admin client asks every broker); COORDINATOR_LOAD_IN_PROGRESS
        while one of its state partitions loads."""
        if TRANSACTION_STATE_TOPIC not in self.node.topics(include_internal=True):
            return {"error_code": 0, "transaction_states": [],
                    "unknown_state_filters": [s for s in body["state_filters"] if TxnState.from_name(s) is None]}
        coord = await _off_loop(lambda: self.node.txn_coordinator)
        if coord.store.loading_partitions():
            return {"error_code": errors.CoordinatorLoadInProgressError.code, "unknown_state_filters": [],
                    "transaction_states": []}
        unknown, found = coord.list(body["state_filters"], body["producer_id_filters"])
        return {"error_code": 0, "unknown_state_filters": unknown,
                "transaction_states": [{"transactional_id": t.transactional_id, "producer_id": t.producer_id,
                                        "transaction_state": t.state} for t in found
                                       if self.broker.allowed(Op.DESCRIBE, Res.TRANSACTIONAL_ID, t.transactional_id)]}


def _by_topic(codes: dict) -> list:
    """AddPartitionsToTxn's per-topic answers from {(topic, partition): error code}."""
    return [{"name": t, "results_by_partition": ps} for t, ps in by_topic(
        codes.items(), lambda p, c: {"partition_index": p, "partition_error_code": c}).items()]

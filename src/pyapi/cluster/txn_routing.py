"""Transactions across a cluster: where a cluster member's transaction coordinator sends markers and where its
partition leaders verify transactional batches (KIP-890).

:class:`ClusterMarkerChannel` writes each marker at its partition's current leader, as Kafka's
TransactionMarkerChannelManager does: here when this broker leads the partition, else in one WriteTxnMarkers
request per leader (the leaders are asked at the same time). A partition without a live leader answers
NOT_LEADER_OR_FOLLOWER and is retried by the coordinator; one of a deleted topic needs no marker.

:class:`ClusterTxnVerifier` asks a transactional id's coordinator (this broker's, or another's with
AddPartitionsToTxn v4 verify_only) whether a partition is in the producer's transaction.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from ..client import BrokerConnection, ClusterClient
from ..errors import NetworkError, NotLeaderOrFollowerError, SeglogError, code_of
from ..protocol import ApiKey
from ..remote_txn import RemoteTxnCoordinator
from ..txn.markers import Marker, MarkerChannel, write_here
from .metastore import NO_LEADER

__all__ = ["ClusterMarkerChannel", "ClusterTxnVerifier"]

log = logging.getLogger("seglog.txn")

MARKER_REQUEST_TIMEOUT_S = 10.0
"""How long a WriteTxnMarkers request may take (it waits for the leader's in-sync replicas)."""
VERIFY_RETRY_S = 5.0
"""How long a leader retries finding a transactional id's coordinator before answering the producer's batch
with a retriable error."""


class ClusterMarkerChannel(MarkerChannel):
    """See the module docstring. Thread-safe (the coordinator's worker is its only caller)."""

    def __init__(self, member):
        self.m = member
        self._conns: dict[int, BrokerConnection] = {}
        self._pool = ThreadPoolExecutor(4, thread_name_prefix="seglog-txn-markers")
        self._lock = threading.Lock()

    def write(self, markers: Sequence[Marker]) -> list[int]:
        codes = [NotLeaderOrFollowerError.code] * len(markers)
        local: list[int] = []
        remote: dict[int, list[int]] = {}
        for i, mk in enumerate(markers):
            if mk.topic not in self.m.assignments:
                codes[i] = 0                                  # the topic was deleted: nothing to mark
                continue
            st = self.m.states.get((mk.topic, mk.partition))
            if st is None or st.leader == NO_LEADER or st.leader not in self.m.brokers:
                continue
            (local if st.leader == self.m.broker_id else remote.setdefault(st.leader, [])).append(i)
        futures = {broker: self._pool.submit(self._send, broker, [markers[i] for i in idx])
                   for broker, idx in remote.items()}
        if local:
            view = self.m.view
            for i, code in zip(local, write_here(self.m.node, [markers[i] for i in local],
                                                 lambda t, p: view.check_produce(t, p, 1))):
                codes[i] = code
        for broker, fut in futures.items():
            for i, code in zip(remote[broker], fut.result()):
                codes[i] = code
        return codes

    def _send(self, broker: int, markers: list[Marker]) -> list[int]:
        """One WriteTxnMarkers request; NETWORK_EXCEPTION for all of them if the broker cannot be reached."""
        groups: dict[tuple, dict[str, list[int]]] = {}
        for mk in markers:
            key = (mk.producer_id, mk.producer_epoch, mk.commit, mk.coordinator_epoch)
            groups.setdefault(key, {}).setdefault(mk.topic, []).append(mk.partition)
        body = {"markers": [{"producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
                             "coordinator_epoch": cepoch,
                             "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}
                            for (pid, epoch, commit, cepoch), topics in groups.items()]}
        try:
            r = self._connection(broker).request(ApiKey.WRITE_TXN_MARKERS, body)
        except SeglogError as e:
            self._drop(broker)
            log.info("WriteTxnMarkers to broker %d failed: %s", broker, e)
            return [code_of(e) if code_of(e) != -1 else NetworkError.code] * len(markers)
        found = {(m["producer_id"], t["name"], p["partition_index"]): p["error_code"]
                 for m in r["markers"] for t in m["topics"] for p in t["partitions"]}
        return [found.get((mk.producer_id, mk.topic, mk.partition), NetworkError.code) for mk in markers]

    def _connection(self, broker: int) -> BrokerConnection:
        with self._lock:
            conn = self._conns.get(broker)
            if conn is None:
                address = self.m.broker_address(broker)
                if address is None:
                    raise NotLeaderOrFollowerError(f"broker {broker} is not registered")
                conn = self._conns[broker] = BrokerConnection(
                    *address, client_id=f"seglog-txn-markers-{self.m.broker_id}", timeout=MARKER_REQUEST_TIMEOUT_S,
                    security=self.m.security)
            return conn

    def _drop(self, broker: int) -> None:
        with self._lock:
            conn = self._conns.pop(broker, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            conns, self._conns = list(self._conns.values()), {}
        for c in conns:
            c.close()


class ClusterTxnVerifier:
    """Node.transaction_verifier of a cluster member (see the module docstring)."""

    def __init__(self, member):
        self.m = member
        self._remote: RemoteTxnCoordinator | None = None
        self._lock = threading.Lock()

    def __call__(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions) -> dict:
        broker, _, _ = self.m.view.txn_coordinator_for(transactional_id)
        if broker == self.m.broker_id:
            return self.m.node.txn_coordinator.verify(transactional_id, producer_id, producer_epoch, partitions)
        return self._client().verify(transactional_id, producer_id, producer_epoch, partitions)

    def _client(self) -> RemoteTxnCoordinator:
        with self._lock:
            if self._remote is None:
                self._remote = RemoteTxnCoordinator(
                    ClusterClient(f"{self.m.host}:{self.m.port}", client_id=f"seglog-txn-verify-{self.m.broker_id}",
                                  timeout=MARKER_REQUEST_TIMEOUT_S, security=self.m.security),
                    retry_timeout=VERIFY_RETRY_S)
            return self._remote

    def close(self) -> None:
        with self._lock:
            remote, self._remote = self._remote, None
        if remote is not None:
            remote.close()
            remote.cluster.close()

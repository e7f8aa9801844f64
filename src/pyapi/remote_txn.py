"""RemoteTxnCoordinator: the transaction coordinator calls of seglog.Producer (and of the CLI, and of a
partition leader verifying a transactional batch, KIP-890), as requests to the transactional id's coordinator
broker found with FindCoordinator key_type 1. Answers and errors are those of the in-process
seglog.txn.coordinator.TransactionCoordinator, so the Producer is written once for both doors. Coordinator moves
(NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, lost connections) find the
coordinator again and retry; every other error is raised for the caller to handle (CONCURRENT_TRANSACTIONS
included: the Producer retries it as Kafka's clients do). Part of the RemoteNode surface (seglog.remote)."""

from __future__ import annotations

from typing import Iterable

from .client import error_for
from .errors import SeglogError, UnknownTopicOrPartitionError, for_code
from .offsets_format import partitions_by_topic
from .protocol import ApiKey
from .remote_group import RemoteCoordinator
from .txn.coordinator import TransactionDescription, TransactionListing

__all__ = ["RemoteTxnCoordinator"]

def _error(code: int, what: str) -> SeglogError:
    return error_for(code, f"{what}: {for_code(code).kafka_name}")


class RemoteTxnCoordinator(RemoteCoordinator):
    """See the module docstring."""

    KEY_TYPE = 1
    KIND = "transactional id"

    def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int = -1,
                         producer_epoch: int = -1) -> tuple[int, int]:
        """InitProducerId at the transactional id's coordinator (see TransactionCoordinator.init_producer_id)."""
        body = {"transactional_id": transactional_id, "transaction_timeout_ms": timeout_ms,
                "producer_id": producer_id, "producer_epoch": producer_epoch}
        r = self.request(transactional_id, ApiKey.INIT_PRODUCER_ID, body, lambda r: r["error_code"])
        if r["error_code"]:
            raise _error(r["error_code"], f"InitProducerId of {transactional_id!r}")
        return r["producer_id"], r["producer_epoch"]

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[tuple[str, int]]) -> None:
        codes = self._add(transactional_id, producer_id, producer_epoch, partitions, False)
        unknown = [tp for tp, c in codes.items() if c == UnknownTopicOrPartitionError.code]
        if unknown:
            e = UnknownTopicOrPartitionError(f"AddPartitionsToTxn of {transactional_id!r}: unknown partitions "
                                             f"{', '.join(f'{t}-{p}' for t, p in unknown)}")
            e.partitions = unknown
            raise e
        for code in codes.values():
            if code:
                raise _error(code, f"AddPartitionsToTxn of {transactional_id!r}")

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], SeglogError | None]:
        """AddPartitionsToTxn v4 verify_only, as a partition leader asks it (KIP-890)."""
        codes = self._add(transactional_id, producer_id, producer_epoch, partitions, True)
        return {tp: _error(c, f"transaction of {transactional_id!r} at {tp[0]}-{tp[1]}") if c else None
                for tp, c in codes.items()}

    def _add(self, tid: str, pid: int, epoch: int, partitions, verify_only: bool) -> dict[tuple[str, int], int]:
        topics = [{"name": t, "partitions": ps} for t, ps in partitions_by_topic(partitions).items()]
        if verify_only:
            body = {"transactions": [{"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                      "verify_only": True, "topics": topics}]}

            def results(r: dict) -> list:
                return r["results_by_transaction"][0]["topic_results"] if r["results_by_transaction"] else []
            version = 4                                  # the broker-to-coordinator form
        else:
            body = {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                    "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": topics}

            def results(r: dict) -> list:
                return r["results_by_topic_v3_and_below"]
            version = 3                                  # the newest a client sends

        def common(r: dict) -> int:
            if r.get("error_code"):
                return r["error_code"]
            c = [p["partition_error_code"] for t in results(r) for p in t["results_by_partition"]]
            return c[0] if c and all(x == c[0] for x in c) else 0

        r = self.request(tid, ApiKey.ADD_PARTITIONS_TO_TXN, body, common, max_version=version)
        if r.get("error_code"):
            raise _error(r["error_code"], f"AddPartitionsToTxn of {tid!r}")
        return {(t["name"], p["partition_index"]): p["partition_error_code"]
                for t in results(r) for p in t["results_by_partition"]}

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> None:
        r = self.request(transactional_id, ApiKey.ADD_OFFSETS_TO_TXN,
                         {"transactional_id": transactional_id, "producer_id": producer_id,
                          "producer_epoch": producer_epoch, "group_id": group_id}, lambda r: r["error_code"])
        if r["error_code"]:
            raise _error(r["error_code"], f"AddOffsetsToTxn of {transactional_id!r}")

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> None:
        r = self.request(transactional_id, ApiKey.END_TXN,
                         {"transactional_id": transactional_id, "producer_id": producer_id,
                          "producer_epoch": producer_epoch, "committed": commit}, lambda r: r["error_code"])
        if r["error_code"]:
            raise _error(r["error_code"], f"EndTxn ({'commit' if commit else 'abort'}) of {transactional_id!r}")

    def describe(self, transactional_ids: Iterable[str]) -> list[TransactionDescription | SeglogError]:
        """DescribeTransactions at each id's coordinator (``coordinator_id`` says which broker answered)."""
        out: list[TransactionDescription | SeglogError] = []
        for tid in transactional_ids:
            try:
                r = self.request(tid, ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [tid]},
                                 lambda r: r["transaction_states"][0]["error_code"])
            except SeglogError as e:
                out.append(e)
                continue
            s = r["transaction_states"][0]
            if s["error_code"]:
                out.append(_error(s["error_code"], f"DescribeTransactions of {tid!r}"))
                continue
            out.append(TransactionDescription(
                tid, s["transaction_state"], s["transaction_timeout_ms"], s["transaction_start_time_ms"],
                s["producer_id"], s["producer_epoch"],
                tuple(sorted((t["topic"], p) for t in s["topics"] for p in t["partitions"])),
                self.coordinator(tid)[0]))
        return out

    def list(self, states: Iterable[str] = (), producer_ids: Iterable[int] = ()
             ) -> tuple[list[str], list[tuple[int, TransactionListing]]]:
        """ListTransactions at every broker: (unknown state filters, [(broker id, listing)])."""
        body = {"state_filters": list(states), "producer_id_filters": list(producer_ids)}
        unknown: list[str] = []
        found = []
        for broker_id in self.cluster.broker_ids():
            r = self.cluster.broker(broker_id).request(ApiKey.LIST_TRANSACTIONS, body)
            if r["error_code"]:
                raise _error(r["error_code"], f"ListTransactions at broker {broker_id}")
            unknown = r["unknown_state_filters"]
            found += [(broker_id, TransactionListing(t["transactional_id"], t["producer_id"], t["transaction_state"]))
                      for t in r["transaction_states"]]
        return unknown, sorted(found, key=lambda x: x[1].transactional_id)

"""Fetch over the wire: the one Fetch request seglog sends and the one reading of its answer.

Every fetcher that reads a broker goes through :func:`fetch`: the remote node's consumers (remote.RemoteNode,
a short fetch and a long poll), Spark's broker-mode reader (spark.broker) and the replication fetcher
(replication.fetcher, as a replica: ``replica_id`` set, up to the log end). It builds the request from a
position per partition, sends it on a connection, raises for a request-level error, and gives each partition's
answer as a :class:`Fetched`: the whole batches of its records (a broker may end them with a cut-short batch,
which the next fetch starts with), the offset after them, the partition's error code and bounds. What to do
with an error code (retry at a new leader, reset an offset, truncate) is the caller's: they differ.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

from . import _engine
from .client import BrokerConnection, error_for
from .protocol import ApiKey
from .txn_index import AbortedTxn

__all__ = ["Position", "Fetched", "fetch", "whole_batches"]

NO_BATCHES = memoryview(b"")


class Position(NamedTuple):
    """Where to fetch one partition from: Fetch's fetch_offset, partition_max_bytes, and for replicas their log
    start offset and current leader epoch (-1: not sent, as a consumer)."""
    offset: int
    max_bytes: int
    log_start_offset: int = -1
    leader_epoch: int = -1


class Fetched(NamedTuple):
    """One partition of a Fetch answer. ``records`` holds whole batches only (CRCs not checked yet: they are
    when the records are decoded or appended); ``next_offset`` is the offset after them, -1 if there are none;
    ``cut_short``: the answer went on with part of a batch (the size limit cut it; when ``records`` is empty, a
    batch larger than the limit that a broker without Kafka's "at least one batch" rule did not send whole)."""
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: memoryview
    next_offset: int
    cut_short: bool = False
    last_stable_offset: int = -1
    aborted_transactions: list | None = None   # read_committed: AbortedTxn (last offsets unknown: -1)


def whole_batches(records) -> tuple[memoryview, int]:
    """The whole record batches at the start of a fetch response's records and the offset after the last one
    (-1 when there is none). Framing and header checks are the engine's (``_engine.batches``:
    CorruptRecordError for a malformed batch)."""
    view = memoryview(records if records is not None else b"").cast("B")
    infos = _engine.batches(view, False)
    if not infos:
        return view[:0], -1
    last = infos[-1]
    return view[:last.position + last.size], last.next_offset


FETCH_BY_NAME_MAX_VERSION = 12
"""The last Fetch version that names topics (v13+ name them by topic id): callers here know names only."""


def fetch(conn: BrokerConnection, wanted: Mapping[tuple[str, int], Position], *, max_bytes: int,
          max_wait_ms: int = 0, min_bytes: int = 0, replica_id: int = -1, what: str = "fetch",
          isolation_level: int = 0) -> dict[tuple[str, int], Fetched]:
    """Send one Fetch for the (topic, partition) -> Position in `wanted` and return the answer per partition
    (partitions the broker left out are missing). ``max_wait_ms``/``min_bytes``: 0 answers at once, else the
    broker holds the request until min_bytes arrived or max_wait_ms passed (the connection's timeout is
    extended by it). ``isolation_level`` 1 (read_committed): records up to the last stable offset, with the
    aborted transactions they overlap (the caller filters them, isolation.AbortedFilter). Raises the broker's
    error for a request-level error code (``what`` names the request),
    NetworkError for a lost connection, CorruptRecordError for a malformed batch."""
    topics: dict[str, list] = {}
    for (topic, p), pos in wanted.items():
        topics.setdefault(topic, []).append({
            "partition": p, "current_leader_epoch": pos.leader_epoch, "fetch_offset": pos.offset,
            "log_start_offset": pos.log_start_offset, "partition_max_bytes": pos.max_bytes})
    body = {"replica_id": replica_id, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
            "max_bytes": max(max_bytes, 1), "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()], "forgotten_topics_data": [],
            "rack_id": ""}
    version = min(conn.version(ApiKey.FETCH), FETCH_BY_NAME_MAX_VERSION)
    response = conn.request(ApiKey.FETCH, body, version=version, extra_timeout=max_wait_ms / 1000)
    if response.get("error_code"):
        raise error_for(response["error_code"], f"{what} refused")
    out = {}
    for t in response["responses"]:
        for p in t["partitions"]:
            records = p["records"] if not p["error_code"] else None
            view, next_offset = whole_batches(records)
            aborted = p.get("aborted_transactions")
            out[(t["topic"], p["partition_index"])] = Fetched(
                p["error_code"], p["high_watermark"], p["log_start_offset"], view, next_offset,
                records is not None and len(view) < memoryview(records).nbytes, p.get("last_stable_offset", -1),
                None if aborted is None else [AbortedTxn(a["producer_id"], a["first_offset"], -1, -1)
                                              for a in aborted])
    return out

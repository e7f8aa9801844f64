"""Which requests client quotas apply to, and how a throttled client is held back (KIP-13, KIP-124, KIP-219).

Byte rates: a produce request's size is recorded against producer_byte_rate, a fetch response's records
against consumer_byte_rate (a fetch throttled for its bytes or its request time is answered empty and its bytes
taken back, as Kafka's). Request time: every client request's handling time is recorded against
request_percentage, as a percentage of one second; as Kafka counts its request threads' time and not a
request's time in purgatory, a fetch's long poll and the waits a handler marks ``parked()`` (acks=all
replication, a JoinGroup or SyncGroup waiting for the rebalance) are left out. The broker's own requests (a
follower's fetch, WriteTxnMarkers, AddPartitionsToTxn v4+) and SASL's are exempt, as they are in Kafka. A
request's throttle_time_ms is the largest of its quotas' (controller_mutation_rate's too, for topic changes).

Muting (KIP-219): the connection reads nothing more from the client for throttle_time_ms. A response version
at which the client throttles itself is sent at once, then the connection pauses; to an older one the response
itself is held back that long.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from typing import Iterator

from ..protocol import ApiKey

_parked: contextvars.ContextVar[float] = contextvars.ContextVar("parked", default=0.0)

CLIENT_THROTTLES_SINCE = {
    ApiKey.PRODUCE: 6, ApiKey.FETCH: 8, ApiKey.LIST_OFFSETS: 3, ApiKey.METADATA: 6, ApiKey.OFFSET_COMMIT: 4,
    ApiKey.OFFSET_FETCH: 4, ApiKey.FIND_COORDINATOR: 2, ApiKey.JOIN_GROUP: 3, ApiKey.HEARTBEAT: 2,
    ApiKey.LEAVE_GROUP: 2, ApiKey.SYNC_GROUP: 2, ApiKey.DESCRIBE_GROUPS: 2, ApiKey.LIST_GROUPS: 2,
    ApiKey.API_VERSIONS: 2, ApiKey.CREATE_TOPICS: 3, ApiKey.DELETE_TOPICS: 2, ApiKey.DELETE_RECORDS: 1,
    ApiKey.INIT_PRODUCER_ID: 1, ApiKey.OFFSET_FOR_LEADER_EPOCH: 3, ApiKey.ADD_PARTITIONS_TO_TXN: 1,
    ApiKey.ADD_OFFSETS_TO_TXN: 1, ApiKey.END_TXN: 1, ApiKey.TXN_OFFSET_COMMIT: 1, ApiKey.DESCRIBE_ACLS: 1,
    ApiKey.CREATE_ACLS: 1, ApiKey.DELETE_ACLS: 1, ApiKey.DESCRIBE_CONFIGS: 2, ApiKey.ALTER_CONFIGS: 1,
    ApiKey.ALTER_REPLICA_LOG_DIRS: 1,    ApiKey.DESCRIBE_LOG_DIRS: 1, ApiKey.CREATE_PARTITIONS: 1, ApiKey.DELETE_GROUPS: 1, ApiKey.ELECT_LEADERS: 1,
    ApiKey.SASL_AUTHENTICATE: 1,
}
"""The first response version each API's client throttles itself at (Kafka's shouldClientThrottle); APIs not
listed were added after KIP-219 and are client-throttled at every version."""

_EXEMPT = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.WRITE_TXN_MARKERS})


def client_throttles(api_key: int, version: int) -> bool:
    return version >= CLIENT_THROTTLES_SINCE.get(api_key, 0)


def exempt(header, body) -> bool:
    """Whether a request is exempt from every client quota (the broker's own requests, SASL's)."""
    if header.api_key in _EXEMPT:
        return True
    if header.api_key == ApiKey.ADD_PARTITIONS_TO_TXN:
        return header.api_version >= 4
    if header.api_key == ApiKey.FETCH:
        return replica_id(header, body) >= 0
    return False


def replica_id(header, body) -> int:
    """A Fetch request's replica id (-1 for a consumer)."""
    return body["replica_state"]["replica_id"] if header.api_version >= 15 else body["replica_id"]


def quota_user(principal: str) -> str:
    """The user a principal's quotas are looked up under: its name (Kafka's KafkaPrincipal.getName)."""
    return principal.partition(":")[2]


@contextlib.contextmanager
def parked() -> Iterator[None]:
    """Mark a wait of the request being handled as no work of the broker's (left out of its request time)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        _parked.set(_parked.get() + time.perf_counter() - started)


def take_parked() -> float:
    """The seconds the request being handled was parked (see ``parked``); starts the count over."""
    seconds = _parked.get()
    _parked.set(0.0)
    return seconds

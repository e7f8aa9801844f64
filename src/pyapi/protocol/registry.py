"""The APIs seglog speaks: keys, supported version ranges, and the compiled codec of each (api, version, direction).

Codecs are compiled on first use and cached (a few hundred microseconds each, once per process).
"""

from __future__ import annotations

from enum import IntEnum
from types import MappingProxyType

from . import messages_admin, messages_data, messages_groups, messages_security, messages_txn
from .compiler import Codec, compile_message
from .schema import Api

__all__ = ["ApiKey", "SUPPORTED_VERSIONS", "api", "codec", "api_versions_body"]


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69


_APIS: dict[int, Api] = {a.key: a for a in sorted(messages_data.APIS + messages_groups.APIS + messages_admin.APIS
                                                  + messages_security.APIS + messages_txn.APIS,
                                                  key=lambda a: a.key)}

#: api key -> (min version, max version) seglog decodes and encodes, in both directions.
SUPPORTED_VERSIONS = MappingProxyType({key: a.versions for key, a in _APIS.items()})

_CODECS: dict[tuple[int, int, bool], Codec] = {}


def api(api_key: int) -> Api | None:
    """The schema of an API, or None if seglog does not speak it."""
    return _APIS.get(api_key)


def codec(api_key: int, version: int, response: bool) -> Codec | None:
    """The codec of one message (request or response) at one version; None if that version is not supported."""
    key = (api_key, version, response)
    found = _CODECS.get(key)
    if found is None:
        spec = _APIS.get(api_key)
        if spec is None or not spec.supports(version):
            return None
        found = _CODECS[key] = compile_message(spec.response if response else spec.request, version,
                                               version >= spec.flexible,
                                               f"{spec.name}{'Response' if response else 'Request'}")
    return found


def api_versions_body(error_code: int = 0) -> dict:
    """An ApiVersions response body advertising :data:`SUPPORTED_VERSIONS` (a fresh dict the caller may edit)."""
    return {"error_code": error_code, "throttle_time_ms": 0,
            "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi}
                         for k, (lo, hi) in SUPPORTED_VERSIONS.items()]}

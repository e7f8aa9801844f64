"""What the request handlers of every API family share: the error-code mapping, running a blocking call off
the event loop, the connection-closing answer, and the protocol constants they use."""

from __future__ import annotations

import asyncio
import dataclasses

from ..config import LogConfig
from ..errors import code_of

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3          # ListOffsets' special timestamps
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
TOPIC_KEYS = {f.metadata["key"].kafka: f.metadata["key"] for f in dataclasses.fields(LogConfig)}
LIST_CONFIGS = frozenset(name for name, key in TOPIC_KEYS.items() if key.kind == "list")
# DescribeConfigs' config_type (DescribeConfigsResponse.ConfigType), by a config key's kind
_CONFIG_TYPES = {"bool": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}
_CONFIG_TYPE_PASSWORD = 9


def config_type(key) -> int:
    """Kafka's DescribeConfigs type of a config key (config._Key): BOOLEAN, STRING, INT, LONG, DOUBLE, LIST, or
    PASSWORD for a secret."""
    return _CONFIG_TYPE_PASSWORD if key.secret else _CONFIG_TYPES[key.kind]


class CloseConnection(Exception):
    """Raised by a handler that answers by closing the connection (a failed acks=0 produce request): the
    server logs the message with the client's address and closes it, sending nothing."""


def _err(exc: BaseException) -> int:
    return code_of(exc)


async def _off_loop(fn, *args, **kwargs):
    """Run a call that may block (metadata store round trips, waiting for replication) off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(None, lambda: fn(*args, **kwargs))

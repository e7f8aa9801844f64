"""Replication throttles, as Kafka's ReplicationQuotaManager (KIP-73).

A broker has two byte-rate quotas, ``leader.replication.throttled.rate`` (bytes it serves to followers) and
``follower.replication.throttled.rate`` (bytes its fetchers copy), dynamic broker configs kept in the cluster's
metadata (ZooKeeper's ``/config/brokers/<id>``, falling back to ``/config/brokers/<default>``; unset: no limit).
A topic names the replicas they apply to in ``leader.replication.throttled.replicas`` and
``follower.replication.throttled.replicas``: ``"*"`` (every replica) or ``partition:broker,...``; a broker
throttles the partitions listed with its own id.

The rules are Kafka's: a leader answers a follower's fetch with no records for a throttled partition while that
follower is out of the ISR and the leader quota is exceeded; a follower leaves a throttled partition out of its
fetch while it is out of the ISR and the follower quota is exceeded. The bytes of every throttled partition
(in sync or not) are recorded in the quota's rate. Rates are :class:`seglog.quotas.rate.SampledRate` over
``replication.quota.window.num`` windows of ``replication.quota.window.size.seconds``.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from typing import Callable, Mapping

from ..errors import InvalidConfigError
from ..quotas.rate import SampledRate

__all__ = ["ALL_REPLICAS", "ALTER_LOG_DIRS_RATE_KEY", "BROKER_RATE_KEYS", "DYNAMIC_BROKER_KEYS", "FOLLOWER", "LEADER",
           "ReplicationQuota", "ReplicationThrottles",
           "check_broker_rate", "parse_throttled_replicas", "rates_for_broker"]

LEADER, FOLLOWER = "leader", "follower"
RATE_KEYS = {LEADER: "leader.replication.throttled.rate", FOLLOWER: "follower.replication.throttled.rate"}
REPLICAS_KEYS = {LEADER: "leader.replication.throttled.replicas", FOLLOWER: "follower.replication.throttled.replicas"}
BROKER_RATE_KEYS = tuple(RATE_KEYS.values())
ALTER_LOG_DIRS_RATE_KEY = "replica.alter.log.dirs.io.max.bytes.per.second"   # seglog.log_dir_mover's copy rate
DYNAMIC_BROKER_KEYS = BROKER_RATE_KEYS + (ALTER_LOG_DIRS_RATE_KEY,)           # every dynamic broker config
ALL_REPLICAS = "*"
LONG_MAX = (1 << 63) - 1
_ENTRY = re.compile(r"\s*\d+\s*:\s*\d+\s*")


@functools.lru_cache(maxsize=4096)
def parse_throttled_replicas(name: str, value: str) -> str | frozenset[tuple[int, int]]:
    """``ALL_REPLICAS`` or the (partition, broker) pairs of a throttled-replicas list ("" : none);
    InvalidConfigError with Kafka's message for anything else."""
    text = value.strip()
    if text == ALL_REPLICAS:
        return ALL_REPLICAS
    if not text:
        return frozenset()
    entries = text.split(",")
    if not all(_ENTRY.fullmatch(e) for e in entries):
        raise InvalidConfigError(f"Invalid value {value} for configuration {name}: {name} must be the literal '*' "
                                 f"or a list of replicas in the following format: [partitionId]:[brokerId],"
                                 f"[partitionId]:[brokerId],...")
    return frozenset((int(p), int(b)) for p, b in (e.split(":") for e in entries))


def check_broker_rate(name: str, value: str) -> int:
    """A throttled rate's value: a long >= 0 (bytes/s); InvalidConfigError otherwise."""
    try:
        rate = int(value.strip())
    except ValueError:
        raise InvalidConfigError(f"Invalid value {value} for configuration {name}: Not a number of type LONG") \
            from None
    if not 0 <= rate <= LONG_MAX:
        raise InvalidConfigError(f"Invalid value {value} for configuration {name}: Value must be at least 0")
    return rate


def rates_for_broker(entity_configs: Mapping[str, Mapping[str, str]], broker_id: int
                     ) -> dict[str, tuple[int, str]]:
    """{rate key: (bytes/s, "brokers/<id>" or "brokers/<default>")} of the rates set for this broker, its own
    entity first; malformed values (written around the broker) are left out."""
    out = {}
    for path in (f"brokers/{broker_id}", "brokers/<default>"):
        for key, text in entity_configs.get(path, {}).items():
            if key in DYNAMIC_BROKER_KEYS and key not in out:
                try:
                    out[key] = (check_broker_rate(key, text), path)
                except InvalidConfigError:
                    continue
    return out


class ReplicationQuota:
    """One byte-rate quota (``rate`` bytes/s, None: unlimited) over a sampled rate; thread-safe (the event loop
    records a leader's bytes, each fetcher thread a follower's)."""

    def __init__(self, samples: int, window_seconds: int, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._rate = SampledRate(samples, window_seconds * 1000, self._now())
        self.limit: int | None = None

    def _now(self) -> int:
        return int(self._clock() * 1000)

    def exceeded(self) -> bool:
        if self.limit is None:
            return False
        with self._lock:
            return self._rate.measure(self._now()) > self.limit

    def record(self, nbytes: int) -> None:
        if nbytes and self.limit is not None:
            with self._lock:
                self._rate.record(nbytes, self._now())


class ReplicationThrottles:
    """A broker's two quotas and the throttled-replica lists of its topics (``topic_config(topic)``: the topic's
    config overrides, None for an unknown topic)."""

    def __init__(self, broker_id: int, topic_config: Callable[[str], Mapping[str, str] | None], *,
                 samples: int = 11, window_seconds: int = 1, clock: Callable[[], float] = time.monotonic):
        self.broker_id = broker_id
        self._topic_config = topic_config
        self.quotas = {kind: ReplicationQuota(samples, window_seconds, clock) for kind in (LEADER, FOLLOWER)}

    def set_rates(self, rates: Mapping[str, tuple[int, str]]) -> None:
        """The rates now set for this broker (rates_for_broker); a rate not given is unlimited."""
        for kind, key in RATE_KEYS.items():
            self.quotas[kind].limit = rates[key][0] if key in rates else None

    def throttled(self, kind: str, topic: str, partition: int) -> bool:
        """Whether this broker's replica of the partition is in the topic's ``kind`` list."""
        config = self._topic_config(topic)
        if not config:
            return False
        value = config.get(REPLICAS_KEYS[kind])
        if not value:
            return False
        try:
            listed = parse_throttled_replicas(REPLICAS_KEYS[kind], value)
        except InvalidConfigError:
            return False                    # written around the brokers' checks: not a list, throttles nothing
        return listed == ALL_REPLICAS or (partition, self.broker_id) in listed

    def hold_back(self, kind: str, topic: str, partition: int, in_sync: bool) -> bool:
        """Kafka's shouldLeaderThrottle / shouldFollowerThrottle: leave the partition's records out now."""
        return not in_sync and self.throttled(kind, topic, partition) and self.quotas[kind].exceeded()

    def record(self, kind: str, nbytes: int) -> None:
        self.quotas[kind].record(nbytes)

"""The broker's client quotas: the current configs, one sampled rate per quota key and metric tags, and the
throttle time of each value recorded (Kafka's ClientQuotaManager and ClientRequestQuotaManager).

``throttle_ms(key, user, client_id, value)`` records ``value`` (bytes of a produce request or fetch response,
or for request_percentage the request's handling time as a percentage of a second) in the rate the client's
entity resolves to (seglog.quotas.entities.resolve) and returns how long the client is throttled: 0 without a
quota or under it, else QuotaUtils' throttle time (capped at one window for request_percentage). A value is
recorded even when it violates the quota, as Kafka's sensors do; ``unrecord`` takes back a fetch response that
was not sent. Rates unused for an hour are dropped (Kafka's inactive sensor expiry).

controller_mutation_rate (Kafka's ControllerMutationQuotaManager, KIP-599) counts partitions created or deleted
in a token bucket per metric tags: ``check_mutations`` refuses (ThrottlingQuotaExceededError carrying
``throttle_ms``) while the bucket is below zero, as the strict request versions are refused (CreateTopics v6+,
CreatePartitions v3+, DeleteTopics v5+); ``record_mutations`` takes the partitions done and returns the throttle
time the older, permissive versions are answered with.

Threads: records happen on the broker's event loop only; ``reload`` (after an alter, or from the store's watch
on its own thread) swaps the configs snapshot in one reference assignment, so a record sees one consistent set.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Iterable, Mapping

from ..errors import InvalidRequestError, ThrottlingQuotaExceededError, UnsupportedVersionError
from .entities import (CLIENT_ID, DEFAULT, MUTATION, REQUEST, USER, QuotaEntity, check_value, entity_path,
                       format_value, resolve)
from .rate import SampledRate, TokenBucket, throttle_time_ms

__all__ = ["ClientQuotas", "MATCH_EXACT", "MATCH_DEFAULT", "MATCH_ANY"]

log = logging.getLogger("seglog.quotas")
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2          # DescribeClientQuotas' match types
INACTIVE_MS = 3600 * 1000
MAX_CACHED = 100_000                                     # resolutions kept between config changes
Quotas = Mapping[QuotaEntity, Mapping[str, float]]


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class ClientQuotas:
    """See the module docstring. ``store``: seglog.quotas.store's FileQuotaStore or MetadataQuotaStore;
    ``clock``: milliseconds (tests pass their own). Loads the store and watches it at once."""

    def __init__(self, store, *, samples: int = 11, window_seconds: int = 1,
                 clock: Callable[[], int] = _monotonic_ms):
        self.store = store
        self.samples, self.window_ms = samples, window_seconds * 1000
        self._clock = clock
        self._state: tuple[Quotas, dict] = ({}, {})         # (configs, resolutions cache): swapped whole
        self._rates: dict[tuple[str, tuple[str, str]], SampledRate | TokenBucket] = {}
        self._next_expiry = clock() + INACTIVE_MS
        self._reload_lock = threading.Lock()
        self.reload()
        self._watch = self.store.watch(self.reload)

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def reload(self) -> None:
        """Read the store and swap the snapshot (one reload at a time: the last one reads the newest)."""
        with self._reload_lock:
            self.set_quotas(self.store.load())

    def set_quotas(self, quotas: Quotas) -> None:
        self._state = ({e: dict(v) for e, v in quotas.items()}, {})

    @property
    def enabled(self) -> bool:
        """Whether any quota is set (none: nothing is recorded)."""
        return bool(self._state[0])

    def quota(self, key: str, user: str, client_id: str) -> tuple[tuple[str, str], float | None]:
        """(metric tags, quota or None) of a client for one key."""
        quotas, cache = self._state
        found = cache.get((key, user, client_id))
        if found is None:
            if len(cache) >= MAX_CACHED:                 # many short-lived client ids: start over
                cache.clear()
            found = cache[(key, user, client_id)] = resolve(quotas, key, user, client_id)
        return found

    def throttle_ms(self, key: str, user: str, client_id: str, value: float, now_ms: int | None = None) -> int:
        tags, limit = self.quota(key, user, client_id)
        if limit is None:
            return 0
        now = self._clock() if now_ms is None else now_ms
        rate = self._rate(key, tags, now)
        rate.record(value, now)
        return throttle_time_ms(rate.measure(now), limit, rate.window(now),
                                self.window_ms if key == REQUEST else None)

    def unrecord(self, key: str, user: str, client_id: str, value: float, now_ms: int | None = None) -> None:
        tags, limit = self.quota(key, user, client_id)
        if limit is not None:
            now = self._clock() if now_ms is None else now_ms
            self._rate(key, tags, now).record(-value, now)

    def max_value_in_window(self, key: str, user: str, client_id: str) -> float | None:
        """The most a client may record at once without being throttled for it alone (Kafka's
        getMaxValueInQuotaWindow: quota x (samples - 1) windows), None without a quota: a fetch is cut to it."""
        limit = self.quota(key, user, client_id)[1]
        return None if limit is None else limit * (self.samples - 1) * self.window_ms / 1000

    def check_mutations(self, user: str, client_id: str, now_ms: int | None = None) -> None:
        """ThrottlingQuotaExceededError (``throttle_ms``: until the bucket is back at zero) while the client's
        controller_mutation_rate bucket is below zero."""
        tags, limit = self.quota(MUTATION, user, client_id)
        if limit is None:
            return
        now = self._clock() if now_ms is None else now_ms
        tokens = self._rate(MUTATION, tags, now).measure(limit, self._burst(limit), now)
        if tokens < 0:
            e = ThrottlingQuotaExceededError("The throttling quota has been exceeded.")
            e.throttle_ms = TokenBucket.throttle_time_ms(tokens, limit)
            raise e

    def record_mutations(self, user: str, client_id: str, permits: int, now_ms: int | None = None) -> int:
        """Take ``permits`` (partitions created or deleted) from the client's bucket: the throttle time (ms) it is
        below zero by now, 0 without a quota."""
        tags, limit = self.quota(MUTATION, user, client_id)
        if limit is None:
            return 0
        now = self._clock() if now_ms is None else now_ms
        bucket = self._rate(MUTATION, tags, now)
        bucket.record(permits, limit, self._burst(limit), now)
        return TokenBucket.throttle_time_ms(bucket.tokens, limit)

    def _burst(self, limit: float) -> float:
        return self.samples * self.window_ms / 1000 * limit

    def _rate(self, key: str, tags: tuple[str, str], now: int):
        """The key's SampledRate (a TokenBucket for controller_mutation_rate) of the metric tags."""
        if now >= self._next_expiry:
            self._rates = {k: r for k, r in self._rates.items() if now - r.last_used_ms < INACTIVE_MS}
            self._next_expiry = now + INACTIVE_MS
        rate = self._rates.get((key, tags))
        if rate is None:
            rate = self._rates[(key, tags)] = (TokenBucket(now) if key == MUTATION
                                               else SampledRate(self.samples, self.window_ms, now))
        return rate

    # -- DescribeClientQuotas / AlterClientQuotas ------------------------------------------------------------

    def describe(self, components: Iterable[tuple[str, int, str | None]], strict: bool
                 ) -> dict[QuotaEntity, dict[str, float]]:
        """The stored entities a DescribeClientQuotas filter matches, as Kafka's: a component per entity type
        (user, client-id) matches a name exactly, the default, or any name; a type without a component matches
        entities without that part, or (not ``strict``) any. InvalidRequestError / UnsupportedVersionError with
        Kafka's messages for a bad filter."""
        wanted: dict[str, object] = {}
        ip = False
        for kind, match_type, match in components:
            if kind == "":
                raise InvalidRequestError("Unexpected empty filter component entity type")
            if kind not in (USER, CLIENT_ID, "ip"):
                raise UnsupportedVersionError(f"Custom entity type '{kind}' not supported")
            if kind in wanted or (kind == "ip" and ip):
                raise InvalidRequestError(f"Duplicate {'client' if kind == CLIENT_ID else kind} filter component "
                                          f"entity type")
            if match_type == MATCH_EXACT:
                if match is None:
                    raise InvalidRequestError("Request specified MATCH_EXACT, but set match string to null")
                name: object = match
            elif match_type == MATCH_DEFAULT:
                name = DEFAULT
            elif match_type == MATCH_ANY:
                name = MATCH_ANY
            else:
                raise InvalidRequestError(f"Unexpected match type: {match_type}")
            if kind == "ip":
                ip = True
            else:
                wanted[kind] = name
        if ip:
            if wanted:
                raise InvalidRequestError("Invalid entity filter component combination, IP filter component "
                                          "should not be used with User or clientId filter component.")
            return {}                                    # seglog keeps no ip (connection) quotas

        def matches(kind: str, name: str | None) -> bool:
            if kind not in wanted:
                return name is None or not strict
            if wanted[kind] == MATCH_ANY:
                return name is not None
            return name == wanted[kind]

        stored = self.store.load()
        return {e: dict(stored[e]) for e in sorted(stored, key=entity_path)
                if matches(USER, e.user) and matches(CLIENT_ID, e.client_id)}

    def alter(self, entity: QuotaEntity, ops: Iterable[tuple[str, float, bool]], validate_only: bool) -> None:
        """Apply one entity's (key, value, remove) ops, or only check them: InvalidRequestError with Kafka's
        message for an unknown key or a bad value. The broker's configs are reloaded afterwards."""
        sets: dict[str, str] = {}
        removes: set[str] = set()
        for key, value, remove in ops:
            if key in sets or key in removes:
                raise InvalidRequestError(f"Duplicate quota key {key} not updating quota for entity {entity}")
            if remove:
                check_value(key, 1.0)                    # the key must be known
                removes.add(key)
            else:
                sets[key] = format_value(key, check_value(key, value))
        if validate_only:
            return

        def change(config: dict[str, str]) -> dict[str, str]:
            for key in removes:
                config.pop(key, None)
            config.update(sets)
            return config
        self.store.update(entity, change)
        self.reload()

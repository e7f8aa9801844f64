"""Kafka's windowed rate (``Rate`` over a ``SampledStat``) and the throttle time of a quota violation.

A :class:`SampledRate` keeps at most ``samples`` (quota.window.num, 11) samples of ``window_ms``
(quota.window.size.seconds x 1000). A value is added to the current sample; once that sample is
``window_ms`` old, the next one (the oldest, reset) starts at the time of the value. Samples older than
``samples x window_ms`` count as empty. The rate is the sum of the samples over the time since the oldest one
started, that time being at least ``samples - 1`` whole windows (a rate measured right after a quiet period is
not inflated) and at least 1 ms; per second.

Throttle time (Kafka's QuotaUtils.throttleTime): over a quota ``q`` with observed rate ``o`` it is
``round((o - q) / q x window)`` ms, ``window`` being the rate's current window as above: the time by which the
window would have to grow for what it holds to be at the quota. Byte-rate quotas are not capped; the request
quota caps it at one window (QuotaUtils.boundedThrottleTime).

controller_mutation_rate is a :class:`TokenBucket` instead (KIP-599): it holds at most ``samples x window x
quota`` tokens (full at first), refills at ``quota`` per second, and each partition created or deleted takes one,
going below zero if need be; below zero the client waits ``-tokens / quota`` seconds.

All times are the caller's milliseconds, so the arithmetic is deterministic under a test clock.
"""

from __future__ import annotations

__all__ = ["SampledRate", "TokenBucket", "throttle_time_ms"]


class SampledRate:
    """A rate per second over sampled windows (see the module docstring). Not thread-safe: the broker records
    on its event loop."""

    __slots__ = ("samples", "window_ms", "_values", "_starts", "_current", "last_used_ms")

    def __init__(self, samples: int, window_ms: int, now_ms: int):
        if samples < 1 or window_ms < 1:
            raise ValueError("a sampled rate needs at least 1 sample of at least 1 ms")
        self.samples, self.window_ms = samples, window_ms
        self._values = [0.0]
        self._starts = [now_ms]
        self._current = 0
        self.last_used_ms = now_ms

    def record(self, value: float, now_ms: int) -> None:
        self.last_used_ms = now_ms
        i = self._current
        if now_ms - self._starts[i] >= self.window_ms:         # the current sample is complete: advance
            i = self._current = (i + 1) % self.samples
            if i == len(self._values):
                self._values.append(0.0)
                self._starts.append(now_ms)
            else:
                self._values[i], self._starts[i] = 0.0, now_ms
        self._values[i] += value

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for i, start in enumerate(self._starts):
            if now_ms - start >= expire:
                self._values[i], self._starts[i] = 0.0, now_ms

    def window(self, now_ms: int) -> int:
        """The time (ms) the rate is measured over now."""
        self._purge(now_ms)
        elapsed = now_ms - min(self._starts)
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """Units per second now."""
        window = self.window(now_ms)
        return sum(self._values) * 1000.0 / window


def throttle_time_ms(observed: float, quota: float, window_ms: int, cap_ms: int | None = None) -> int:
    """How long (ms) a client at ``observed`` units/s, over a window of ``window_ms``, waits to be back at
    ``quota``; 0 when it is not over. ``cap_ms`` bounds it (the request quota's one window)."""
    if observed <= quota:
        return 0
    # Java's Math.round: halves round up
    throttle = int((observed - quota) / quota * window_ms + 0.5)
    return throttle if cap_ms is None else min(throttle, cap_ms)


class TokenBucket:
    """Kafka's TokenBucket stat (see the module docstring); the quota and burst are given at each call, so a
    changed quota applies at once. Not thread-safe (the broker's event loop)."""

    __slots__ = ("tokens", "_last_ms", "last_used_ms")

    def __init__(self, now_ms: int):
        self.tokens = float("inf")                        # full: clamped to the burst at the first refill
        self._last_ms = now_ms
        self.last_used_ms = now_ms

    def _refill(self, quota: float, burst: float, now_ms: int) -> None:
        self.tokens = min(burst, self.tokens + quota * (now_ms - self._last_ms) / 1000)
        self._last_ms = now_ms

    def measure(self, quota: float, burst: float, now_ms: int) -> float:
        self._refill(quota, burst, now_ms)
        return self.tokens

    def record(self, permits: float, quota: float, burst: float, now_ms: int) -> None:
        self.last_used_ms = now_ms
        self._refill(quota, burst, now_ms)
        self.tokens = min(burst, self.tokens - permits)

    @staticmethod
    def throttle_time_ms(tokens: float, quota: float) -> int:
        """How long (ms) until the bucket is back at zero; 0 when it is not below."""
        return int(-tokens / quota * 1000 + 0.5) if tokens < 0 else 0

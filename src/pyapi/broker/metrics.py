"""Broker metrics: requests per API (count, latency percentiles), bytes in/out, connections.

Readable as a dict (``Broker.metrics.snapshot()``), and over HTTP when the broker runs with a metrics port:
``GET /metrics`` gives Prometheus text (exposition format 0.0.4, with ``# HELP`` / ``# TYPE`` lines),
``GET /metrics.json`` the snapshot.

- Latency percentiles come from the last RESERVOIR samples of each kind. A request's latency is the broker's
  time on it: a Fetch's long-poll wait (for ``min_bytes``, up to ``max_wait_ms``) is left out and reported
  as its own kind, ``fetch_wait`` (Kafka splits its request time the same way). ``produce_append`` is the
  append plus the acks wait of one partition. ``<api>_throttle`` (``produce_throttle``, ``fetch_throttle``, ...) are
  the throttle times given to clients over their quotas (seglog.quotas), in seconds.
- ``corrupt_batches``: per partition, fetches answered CORRUPT_MESSAGE because a stored batch failed its checks
  (each also logs an ERROR naming file, offset and position).
- ``recovery_lost_offsets``: per partition, the offsets its log no longer held when it opened although its
  checkpoint vouched for them (deleted or damaged files; each also logged a WARNING), from ``losses()``.
- Rates (``requests_per_s``, ``bytes_in_per_s``, ``bytes_out_per_s``) are over the last RATE_WINDOW_S
  seconds (or the uptime, when shorter), not lifetime averages.

Updated from the broker's event loop only (no locking needed); other threads read snapshots, which are
consistent enough for monitoring.
"""

from __future__ import annotations

import json
import time
from collections import deque

RESERVOIR = 4096
RATE_WINDOW_S = 60


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


class Metrics:
    def __init__(self, clock=time.monotonic, losses=dict):
        self._clock = clock
        self._losses = losses
        self.started = time.time()
        self._started_mono = clock()
        self.requests: dict[str, int] = {}
        self.latency: dict[str, deque] = {}
        self.latency_count: dict[str, int] = {}
        self.latency_sum: dict[str, float] = {}
        self.bytes_in = 0
        self.bytes_out = 0
        self.connections_open = 0
        self.connections_total = 0
        self.connection_errors = 0
        self.connections_rejected = 0       # closed at once: max.connections.per.ip reached
        self.corrupt_batches: dict[str, int] = {}   # "topic-partition" -> fetches that met a corrupt batch
        self._buckets: deque = deque()          # [second, requests, bytes in, bytes out], oldest first

    def request(self, api: str, seconds: float, bytes_in: int, bytes_out: int) -> None:
        self.requests[api] = self.requests.get(api, 0) + 1
        self.bytes_in += bytes_in
        self.bytes_out += bytes_out
        self.observe(api, seconds)
        second = int(self._clock())
        b = self._buckets
        if not b or b[-1][0] != second:
            b.append([second, 0, 0, 0])
            while b[0][0] <= second - RATE_WINDOW_S:
                b.popleft()
        last = b[-1]
        last[1] += 1
        last[2] += bytes_in
        last[3] += bytes_out

    def corrupt_batch(self, topic: str, partition: int) -> None:
        key = f"{topic}-{partition}"
        self.corrupt_batches[key] = self.corrupt_batches.get(key, 0) + 1

    def observe(self, name: str, seconds: float) -> None:
        d = self.latency.get(name)
        if d is None:
            d = self.latency[name] = deque(maxlen=RESERVOIR)
        d.append(seconds)
        self.latency_count[name] = self.latency_count.get(name, 0) + 1
        self.latency_sum[name] = self.latency_sum.get(name, 0.0) + seconds

    def rates(self) -> tuple[float, float, float]:
        """(requests/s, bytes in/s, bytes out/s) over the last RATE_WINDOW_S seconds."""
        now = self._clock()
        window = min(float(RATE_WINDOW_S), max(now - self._started_mono, 1e-9))
        n = bin_ = bout = 0
        for second, req, bi, bo in list(self._buckets):
            if second > now - RATE_WINDOW_S:
                n += req
                bin_ += bi
                bout += bo
        return n / window, bin_ / window, bout / window

    def snapshot(self) -> dict:
        up = max(time.time() - self.started, 1e-9)
        total = sum(self.requests.values())
        lat = {}
        for name, d in list(self.latency.items()):
            values = sorted(d)
            lat[name] = {"p50_ms": _percentile(values, 0.5) * 1e3, "p99_ms": _percentile(values, 0.99) * 1e3,
                         "max_ms": (values[-1] if values else 0) * 1e3, "samples": len(values),
                         "count": self.latency_count.get(name, 0), "sum_s": self.latency_sum.get(name, 0.0)}
        req_rate, in_rate, out_rate = self.rates()
        return {"uptime_s": up, "requests_total": total, "requests_per_s": req_rate, "rate_window_s": RATE_WINDOW_S,
                "requests": dict(self.requests), "bytes_in": self.bytes_in, "bytes_out": self.bytes_out,
                "bytes_in_per_s": in_rate, "bytes_out_per_s": out_rate,
                "connections_open": self.connections_open, "connections_total": self.connections_total,
                "connection_errors": self.connection_errors, "connections_rejected": self.connections_rejected,
                "corrupt_batches": dict(self.corrupt_batches),
                "recovery_lost_offsets": self._losses(),
                "latency": lat}

    def prometheus(self) -> str:
        s = self.snapshot()
        lines: list[str] = []

        def metric(name: str, kind: str, doc: str, samples) -> None:
            lines.append(f"# HELP {name} {doc}")
            lines.append(f"# TYPE {name} {kind}")
            lines.extend(samples)

        def single(name: str, kind: str, doc: str, key: str, fmt: str = "") -> None:
            """A metric of one unlabelled sample: the snapshot's ``key``."""
            metric(name, kind, doc, [f"{name} {s[key]:{fmt}}"])

        single("seglog_uptime_seconds", "gauge", "Seconds since the broker started.", "uptime_s", ".3f")
        metric("seglog_requests_total", "counter", "Requests answered, per API.",
               [f'seglog_requests_total{{api="{api}"}} {n}' for api, n in sorted(s["requests"].items())])
        single("seglog_requests_per_second", "gauge", f"Requests per second over the last {RATE_WINDOW_S} s.",
               "requests_per_s", ".3f")
        single("seglog_bytes_in_total", "counter", "Request bytes received.", "bytes_in")
        single("seglog_bytes_out_total", "counter", "Response bytes sent.", "bytes_out")
        single("seglog_bytes_in_per_second", "gauge", f"Request bytes per second over the last {RATE_WINDOW_S} s.",
               "bytes_in_per_s", ".3f")
        single("seglog_bytes_out_per_second", "gauge", f"Response bytes per second over the last {RATE_WINDOW_S} s.",
               "bytes_out_per_s", ".3f")
        single("seglog_connections_open", "gauge", "Client connections open now.", "connections_open")
        single("seglog_connections_total", "counter", "Client connections accepted.", "connections_total")
        single("seglog_connection_errors_total", "counter", "Connections closed or lost because of an error.",
               "connection_errors")
        single("seglog_connections_rejected_total", "counter", "Connections closed at once because their IP "
               "address had max.connections.per.ip open.", "connections_rejected")
        metric("seglog_corrupt_batches_total", "counter", "Fetches that met a stored batch failing its checks "
               "(answered CORRUPT_MESSAGE), per partition.",
               [f'seglog_corrupt_batches_total{{partition="{tp}"}} {n}' for tp, n in sorted(s["corrupt_batches"].items())])
        metric("seglog_recovery_lost_offsets", "gauge", "Offsets a partition's log no longer held when it opened "
               "although its checkpoint vouched for them.",
               [f'seglog_recovery_lost_offsets{{partition="{tp}"}} {n}'
                for tp, n in sorted(s["recovery_lost_offsets"].items())])
        samples = []
        for name, q in sorted(s["latency"].items()):
            samples.append(f'seglog_latency_seconds{{kind="{name}",quantile="0.5"}} {q["p50_ms"] / 1e3:.6f}')
            samples.append(f'seglog_latency_seconds{{kind="{name}",quantile="0.99"}} {q["p99_ms"] / 1e3:.6f}')
            samples.append(f'seglog_latency_seconds_sum{{kind="{name}"}} {q["sum_s"]:.6f}')
            samples.append(f'seglog_latency_seconds_count{{kind="{name}"}} {q["count"]}')
        metric("seglog_latency_seconds", "summary", "Broker time per request by API (a fetch's long-poll wait is "
               "the kind fetch_wait), and per produced partition (produce_append).", samples)
        return "\n".join(lines) + "\n"

    def json(self) -> str:
        return json.dumps(self.snapshot(), indent=1, sort_keys=True)

"""Broker metrics: requests per API (count, errors, latency percentiles), bytes in/out, connections.

Readable as a dict (``Broker.metrics.snapshot()``), and over HTTP when the broker runs with a metrics port:
``GET /metrics`` gives Prometheus text, ``GET /metrics.json`` the snapshot. Latency percentiles come from the
last RESERVOIR samples of each kind. Updated from the broker's event loop only (no locking needed); other
threads read snapshots, which are consistent enough for monitoring.
"""

from __future__ import annotations

import json
import time
from collections import deque

RESERVOIR = 4096


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


class Metrics:
    def __init__(self):
        self.started = time.time()
        self.requests: dict[str, int] = {}
        self.latency: dict[str, deque] = {}
        self.bytes_in = 0
        self.bytes_out = 0
        self.connections_open = 0
        self.connections_total = 0
        self.connection_errors = 0

    def request(self, api: str, seconds: float, bytes_in: int, bytes_out: int) -> None:
        self.requests[api] = self.requests.get(api, 0) + 1
        self.bytes_in += bytes_in
        self.bytes_out += bytes_out
        self.observe(api, seconds)

    def observe(self, name: str, seconds: float) -> None:
        d = self.latency.get(name)
        if d is None:
            d = self.latency[name] = deque(maxlen=RESERVOIR)
        d.append(seconds)

    def snapshot(self) -> dict:
        up = max(time.time() - self.started, 1e-9)
        total = sum(self.requests.values())
        lat = {}
        for name, d in list(self.latency.items()):
            values = sorted(d)
            lat[name] = {"p50_ms": _percentile(values, 0.5) * 1e3, "p99_ms": _percentile(values, 0.99) * 1e3,
                         "max_ms": (values[-1] if values else 0) * 1e3, "samples": len(values)}
        return {"uptime_s": up, "requests_total": total, "requests_per_s": total / up,
                "requests": dict(self.requests), "bytes_in": self.bytes_in, "bytes_out": self.bytes_out,
                "bytes_in_per_s": self.bytes_in / up, "bytes_out_per_s": self.bytes_out / up,
                "connections_open": self.connections_open, "connections_total": self.connections_total,
                "connection_errors": self.connection_errors, "latency": lat}

    def prometheus(self) -> str:
        s = self.snapshot()
        lines = [f"seglog_uptime_seconds {s['uptime_s']:.3f}",
                 f"seglog_bytes_in_total {s['bytes_in']}", f"seglog_bytes_out_total {s['bytes_out']}",
                 f"seglog_connections_open {s['connections_open']}",
                 f"seglog_connections_total {s['connections_total']}",
                 f"seglog_connection_errors_total {s['connection_errors']}"]
        for api, n in sorted(s["requests"].items()):
            lines.append(f'seglog_requests_total{{api="{api}"}} {n}')
        for name, q in sorted(s["latency"].items()):
            lines.append(f'seglog_latency_seconds{{kind="{name}",quantile="0.5"}} {q["p50_ms"] / 1e3:.6f}')
            lines.append(f'seglog_latency_seconds{{kind="{name}",quantile="0.99"}} {q["p99_ms"] / 1e3:.6f}')
        return "\n".join(lines) + "\n"

    def json(self) -> str:
        return json.dumps(self.snapshot(), indent=1, sort_keys=True)

"""The recorded history of a chaos run: one JSON object per line, in the order things happened.

Every event has ``t`` (seconds since the run began, monotonic clock) and ``type``. The types, their fields and
who writes them:

====================  ===================================================================  ==================
type                  fields                                                               written by
====================  ===================================================================  ==================
``send``              producer, partition, value                                           a producer
``ack``               producer, partition, value, offset                                   its delivery report
``fail``              producer, partition, value, error                                    its delivery report
``assign``            consumer, group, partitions, committed ({partition: offset|null}),   a consumer, when a
                      t_ask (when it asked the coordinator for the committed offsets)      rebalance hands it
                                                                                           partitions
``read``              consumer, group, partition, offset, value                            a consumer
``commit``            consumer, group, partition, offset (acknowledged by the coordinator)  a consumer
``commit_fail``       consumer, group, error                                               a consumer
``fault_start``       id, kind, detail                                                     the nemesis
``fault_end``         id, kind, detail                                                     the nemesis
``recovered``         id, seconds, ok, detail (what was still wrong when not ok)           the runner
``restart``           broker, reason (a broker found dead and started again)               the runner
``final``             partition, high_watermark, records ([[offset, value], ...])          the runner
``replicas``          partition, brokers ({id: {end, batches, sha256}}), identical, detail  the runner
``end``               (the workload stopped)                                               the runner
====================  ===================================================================  ==================

Values are the producers' unique strings (ASCII, so JSON keeps them exactly). ``read_history`` gives the
events back as dicts, the checker's input.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path


class History:
    """A thread-safe append-only event log, written through to a JSON-lines file and kept in memory."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else None
        self.events: list[dict] = []
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self._file = open(self.path, "w") if self.path is not None else None

    def now(self) -> float:
        return round(time.monotonic() - self._t0, 4)

    def record(self, type_: str, **fields) -> dict:
        with self._lock:
            event = {"t": self.now(), "type": type_, **fields}
            self.events.append(event)
            if self._file is not None:
                self._file.write(json.dumps(event, separators=(",", ":")) + "\n")
            return event

    def flush(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def read_history(path: str | Path) -> list[dict]:
    """The events of a history file (a torn last line, from a run that was killed, is left out)."""
    events = []
    with open(path) as f:
        for line in f:
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return events

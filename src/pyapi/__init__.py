"""seglog: a Kafka-compatible segmented-log storage engine (Cython core, Kafka wire protocol broker, Spark source)."""

from __future__ import annotations

import os
from typing import Any, Mapping

from . import errors
from .config import BrokerConfig, LogConfig
from .consumer import Consumer
from .errors import SeglogError
from .log import Log, Record, RecoveryReport, TimestampOffset
from .node import Node
from .offsets_format import TopicPartition
from .producer import Producer, RecordFuture, RecordMetadata

__all__ = ["serve", "errors", "BrokerConfig", "Consumer", "Log", "LogConfig", "Node", "Producer", "Record", "RecordFuture",
           "RecordMetadata", "RecoveryReport", "SeglogError", "TimestampOffset", "TopicPartition", "connect", "open"]
__version__ = "0.1.0"


def serve(data_dir: str | os.PathLike, config: BrokerConfig | Mapping[str, Any] | None = None, **kwargs):
    """Run a Kafka-protocol broker on `data_dir` in a background thread (a free 127.0.0.1 port by default):
    ``with seglog.serve(tmp_path) as broker: broker.bootstrap_servers``. Keywords: host, port, metrics_port
    and broker settings with '_' for '.' (an unknown one is an error). See seglog.broker.serve."""
    from .broker import serve as _serve
    return _serve(data_dir, config, **kwargs)


def open(path: str | os.PathLike, config: BrokerConfig | Mapping[str, Any] | None = None) -> Node:  # noqa: A001
    """Open (or create) a seglog data directory of topics. `config`: a BrokerConfig or server.properties names."""
    return Node(path, config)


def connect(bootstrap_servers: str, *, client_id: str = "seglog", security=None, **kwargs):
    """The same surface as :func:`open`'s Node, over a Kafka-protocol broker (seglog's or Kafka's):
    ``seglog.Producer(seglog.connect("host:9092"))``; topics are administered with the same calls
    (create_topic, create_partitions, alter_topic_config, delete_topic). `bootstrap_servers` is
    "host:port[,host:port...]" (anything else: InvalidConfigError). ``security``: Kafka's client settings for a
    TLS or SASL listener, e.g. ``{"security.protocol": "SASL_SSL", "ssl.ca.location": "ca.pem",
    "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": "..."}`` (see
    seglog.security.client). Other keyword arguments: see seglog.remote.RemoteNode."""
    from .remote import RemoteNode
    return RemoteNode(bootstrap_servers, client_id=client_id, security=security, **kwargs)

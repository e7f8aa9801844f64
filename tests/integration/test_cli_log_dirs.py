"""`seglog log-dirs --describe` (kafka-log-dirs.sh): DescribeLogDirs of every broker, or of a data dir."""

from __future__ import annotations

import json

import pytest
from helpers.kafka_wire import record_batch
from test_cli import ok

import seglog

pytestmark = [pytest.mark.broker]


def parse(text: str, *brokers: int) -> dict:
    lines = text.splitlines()
    assert lines[:2] == ["Querying brokers for log directories information",
                         f"Received log directory information from brokers {','.join(map(str, brokers))}"]
    assert len(lines) == 3
    return json.loads(lines[2])


def test_log_dirs_over_the_wire(seglog_broker, topic_name):
    topic, other = topic_name(), topic_name()
    seglog_broker.node.create_topic(topic, 2)
    seglog_broker.node.create_topic(other, 1)
    seglog_broker.node.partition(topic, 1).append(record_batch([(1, None, b"x" * 500, [])]), 1)
    doc = parse(ok("log-dirs", "--bootstrap-server", seglog_broker.bootstrap_servers, "--describe",
                   "--topic-list", topic), 0)
    [broker] = doc["brokers"]
    [d] = broker["logDirs"]
    assert (doc["version"], broker["broker"], d["logDir"], d["error"]) == (1, 0, seglog_broker.node.path, None)
    sizes = {p["partition"]: (p["size"], p["offsetLag"], p["isFuture"]) for p in d["partitions"]}
    assert set(sizes) == {f"{topic}-0", f"{topic}-1"}
    assert sizes[f"{topic}-0"] == (0, 0, False) and sizes[f"{topic}-1"][0] > 500


def test_log_dirs_of_a_data_dir(tmp_path):
    data = tmp_path / "data"
    with seglog.open(data) as node:
        node.create_topic("t", 1)
        path = node.path
    doc = parse(ok("log-dirs", "--data-dir", data, "--describe"), 0)
    assert [(d["logDir"], [p["partition"] for p in d["partitions"]]) for d in doc["brokers"][0]["logDirs"]] == \
        [(path, ["t-0"])]
    assert parse(ok("log-dirs", "--data-dir", data, "--describe", "--broker-list", "5")) == \
        {"version": 1, "brokers": []}

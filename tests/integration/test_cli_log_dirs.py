"""`seglog log-dirs --describe` (kafka-log-dirs.sh): DescribeLogDirs of every broker, or of a data dir; and
`seglog reassign-partitions` moving a replica between the log dirs of a broker ("log_dirs" in the plan)."""

from __future__ import annotations

import json
import time

import pytest
from helpers.kafka_wire import record_batch
from test_cli import fails, ok

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


def test_log_dirs_and_replica_moves_of_a_broker_with_two_dirs(start_broker, tmp_path):
    d1, d2 = str(tmp_path / "d1"), str(tmp_path / "d2")
    broker = start_broker([d1, d2])
    broker.node.create_topic("pet", 2)
    broker.node.partition("pet", 0).append(record_batch([(1, None, b"x" * 5000, [])]), 1)
    doc = parse(ok("log-dirs", "--bootstrap-server", broker.bootstrap_servers, "--describe"), 0)
    found = {d["logDir"]: sorted(p["partition"] for p in d["partitions"]) for d in doc["brokers"][0]["logDirs"]}
    assert found == {d1: ["pet-0"], d2: ["pet-1"]}

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "pet", "partition": 0, "replicas": [0], "log_dirs": [d2]},
        {"topic": "pet", "partition": 1, "replicas": [0], "log_dirs": ["any"]}]}))
    out = ok("reassign-partitions", "--bootstrap-server", broker.bootstrap_servers, "--execute",
             "--reassignment-json-file", plan, "--replica-alter-log-dirs-throttle", "1000000").splitlines()
    assert out[-3:] == ["The replica-alter-dir throttle limit was set to 1000000 B/s",
                        "Successfully started partition reassignments for pet-0,pet-1",
                        "Successfully started log directory move for: pet-0-0"]
    deadline = time.monotonic() + 30
    while True:
        verified = ok("reassign-partitions", "--bootstrap-server", broker.bootstrap_servers, "--verify",
                      "--reassignment-json-file", plan).splitlines()
        if "Clearing broker-level throttles on broker 0" in verified:
            break
        assert time.monotonic() < deadline, verified
        time.sleep(0.1)
    assert verified[verified.index("Status of replica log dir movement:") + 1] == \
        "Reassignment of replica pet-0-0 completed successfully."
    assert broker.node.replica_alter_log_dirs_rate is None
    doc = parse(ok("log-dirs", "--bootstrap-server", broker.bootstrap_servers, "--describe"), 0)
    found = {d["logDir"]: sorted(p["partition"] for p in d["partitions"]) for d in doc["brokers"][0]["logDirs"]}
    assert found == {d1: [], d2: ["pet-0", "pet-1"]}

    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "pet", "partition": 0, "replicas": [0], "log_dirs": ["/not/a/log/dir"]}]}))
    fails(1, "Failed to alter dir for pet-0-0", "reassign-partitions", "--bootstrap-server", broker.bootstrap_servers,
          "--execute", "--reassignment-json-file", plan)

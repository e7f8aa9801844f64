"""`seglog delete-records` (kafka-delete-records.sh): against a broker (DeleteRecords at the leaders) and a data
dir, with Kafka's JSON file and output lines."""

from __future__ import annotations

import json

import pytest
from helpers.kafka_wire import record_batch
from test_cli import fails, ok

import seglog

pytestmark = [pytest.mark.broker]


def offsets_file(tmp_path, entries) -> str:
    path = tmp_path / "offsets.json"
    path.write_text(json.dumps({"partitions": entries, "version": 1}))
    return str(path)


def fill(node, topic: str) -> None:
    """Partitions 0 and 1; five records in partition 0, produced as a client's batch."""
    node.create_topic(topic, 2)
    node.partition(topic, 0).append(record_batch([(1, None, b"v%d" % i, []) for i in range(5)]), 1)


def test_delete_records_over_the_wire(seglog_broker, topic_name, tmp_path):
    topic = topic_name()
    fill(seglog_broker.node, topic)
    path = offsets_file(tmp_path, [{"topic": topic, "partition": 0, "offset": 3},
                                   {"topic": topic, "partition": 1, "offset": -1},
                                   {"topic": topic, "partition": 7, "offset": 0}])
    text = ok("delete-records", "--bootstrap-server", seglog_broker.bootstrap_servers, "--offset-json-file", path)
    lines = text.splitlines()
    assert lines[:4] == ["Executing records delete operation", "Records delete operation completed:",
                         f"partition: {topic}-0\tlow_watermark: 3", f"partition: {topic}-1\tlow_watermark: 0"]
    assert lines[4].startswith(f"partition: {topic}-7\terror: UnknownTopicOrPartitionError")
    assert seglog_broker.node.partition(topic, 0).log_start_offset == 3
    too_far = offsets_file(tmp_path, [{"topic": topic, "partition": 0, "offset": 99}])
    text = ok("delete-records", "--bootstrap-server", seglog_broker.bootstrap_servers, "--offset-json-file", too_far)
    assert text.splitlines()[2].startswith(f"partition: {topic}-0\terror: OffsetOutOfRangeError")


def test_delete_records_in_a_data_dir_and_bad_files(tmp_path):
    data = tmp_path / "data"
    with seglog.open(data) as node:
        fill(node, "t")
    path = offsets_file(tmp_path, [{"topic": "t", "partition": 0, "offset": -1}])
    assert ok("delete-records", "--data-dir", data, "--offset-json-file", path).splitlines()[2] == \
        "partition: t-0\tlow_watermark: 5"
    with seglog.open(data) as node:
        assert node.partition("t", 0).log_start_offset == 5
    (tmp_path / "bad.json").write_text('{"partitions": [{"topic": "t", "partition": "0", "offset": 1}]}')
    fails(1, "integer partition and offset", "delete-records", "--data-dir", data, "--offset-json-file",
          tmp_path / "bad.json")
    (tmp_path / "notjson.json").write_text("{")
    fails(1, "is not JSON", "delete-records", "--data-dir", data, "--offset-json-file", tmp_path / "notjson.json")

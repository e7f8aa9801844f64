"""Request handlers driven directly (no sockets), with a stand-in cluster view where the test needs one."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest

from helpers.kafka_wire import record_batch
from seglog.broker.handlers import Handlers
from seglog.broker.local_view import LocalView
from seglog.broker.metrics import Metrics
from seglog.errors import (IllegalGenerationError, NotCoordinatorError, RequestTimedOutError,
                           UnknownTopicOrPartitionError)
from seglog.node import Node
from seglog.offsets_format import OffsetAndMetadata, TopicPartition
from seglog.protocol import RequestHeader

UNKNOWN_TOPIC_OR_PARTITION, REQUEST_TIMED_OUT, ILLEGAL_GENERATION = 3, 7, 22
NOT_COORDINATOR, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND = 16, 68, 69
PRODUCE_V9 = RequestHeader(0, 9, 1, "test")

# A broker stub without an authorizer: every request is allowed, as a broker without authorizer.class.name.
ALLOW_ALL = {"allowed": lambda *args: True, "allowed_any": lambda *args: True,   # and never throttled
             "quota_throttle": lambda key, value: 0, "request_size": lambda: 0,
             "check_mutations": lambda: None, "record_mutations": lambda partitions, strict: None}


class ReplicasThatNeverCatchUp:
    """A view whose acks=all waits last their whole timeout and fail, as a leader's whose followers are stuck
    (partition 1 of the topic `fast` is acknowledged at once)."""

    def __init__(self):
        self.waits: list[tuple[int, int]] = []
        self.waiting = self.most_waiting = 0

    def check_produce(self, topic, p, acks):
        pass

    async def wait_for_acks(self, part, last_offset, acks, timeout_ms):
        self.waits.append((part.index, timeout_ms))
        if part.topic == "fast" and part.index == 1:
            return
        self.waiting += 1
        self.most_waiting = max(self.most_waiting, self.waiting)
        try:
            await asyncio.sleep(timeout_ms / 1000)
        finally:
            self.waiting -= 1
        raise RequestTimedOutError(f"{part}: not replicated within {timeout_ms} ms")


async def _inline(fn, *args):
    """The broker's disk threads, here on the calling thread: these tests are about waiting, not I/O."""
    return fn(*args)


@pytest.fixture
def handlers(tmp_path):
    node = Node(tmp_path / "d")
    node.create_topic("slow", 4)
    node.create_topic("fast", 2)
    view = ReplicasThatNeverCatchUp()
    broker = SimpleNamespace(**ALLOW_ALL, node=node, config=node.config, view=view, metrics=Metrics(),
                             on_disk=_inline, append_on_disk=lambda topic, index, fn, *args: _inline(fn, *args))
    yield Handlers(broker)
    node.close()


def produce(topic: str, partitions, timeout_ms: int) -> dict:
    batch = record_batch([(1, None, b"v", [])])
    return {"transactional_id": None, "acks": -1, "timeout_ms": timeout_ms,
            "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": batch} for p in partitions]}]}


def test_acks_all_waits_for_every_partition_at_once(handlers):
    """Kafka's purgatory: the partitions of one request wait together under one deadline, so a request whose
    partitions cannot replicate is answered after about timeout_ms, not timeout_ms per partition."""
    view = handlers.broker.view
    started = time.monotonic()
    r = asyncio.run(handlers.handle_produce(PRODUCE_V9, produce("slow", [0, 1, 2, 3], 500)))
    took = time.monotonic() - started
    assert view.most_waiting == 4                            # all four waited at the same time
    assert 0.45 < took < 1.9, took                           # one timeout, not four in a row (2 s)
    parts = r["responses"][0]["partition_responses"]
    assert [(p["index"], p["error_code"], p["base_offset"]) for p in parts] == \
        [(p, REQUEST_TIMED_OUT, -1) for p in range(4)]
    assert sorted(p for p, _ in view.waits) == [0, 1, 2, 3] and all(0 < ms <= 500 for _, ms in view.waits)
    # all were appended before the waits began (Kafka appends, then waits for the ISR)
    assert [handlers.node.partition("slow", p).log_end_offset for p in range(4)] == [1] * 4


def test_one_slow_partition_does_not_fail_the_others(handlers):
    r = asyncio.run(handlers.handle_produce(PRODUCE_V9, produce("fast", [0, 1], 300)))
    parts = {p["index"]: p for p in r["responses"][0]["partition_responses"]}
    assert (parts[0]["error_code"], parts[0]["base_offset"]) == (REQUEST_TIMED_OUT, -1)
    assert (parts[1]["error_code"], parts[1]["base_offset"]) == (0, 0)


def test_offset_commit_keeps_the_errors_of_partitions_refused_before_the_group_check():
    """As Kafka: unknown partitions are refused (UNKNOWN_TOPIC_OR_PARTITION) before the group is checked, so
    a commit the group refuses answers its error only for the partitions it looked at."""
    class Coordinator:
        def commit_offsets(self, group_id, offsets, generation, member_id, group_instance_id=None,
                           epoch_version=True):
            e = IllegalGenerationError("generation 8 is not the group's 1")
            e.partition_errors = {("gone", 0): UnknownTopicOrPartitionError("gone-0")}
            raise e

    view = SimpleNamespace(check_coordinator=lambda group_id: None)
    h = Handlers(SimpleNamespace(**ALLOW_ALL, node=SimpleNamespace(group_coordinator=Coordinator()), config=None, view=view))
    partition = {"partition_index": 0, "committed_offset": 3, "committed_leader_epoch": -1, "committed_metadata": ""}
    body = {"group_id": "g", "generation_id_or_member_epoch": 8, "member_id": "m", "group_instance_id": None,
            "topics": [{"name": "t", "partitions": [partition]}, {"name": "gone", "partitions": [partition]}]}
    r = asyncio.run(h.handle_offset_commit(SimpleNamespace(api_version=8), body))
    assert [(t["name"], [p["error_code"] for p in t["partitions"]]) for t in r["topics"]] == \
        [("t", [ILLEGAL_GENERATION]), ("gone", [UNKNOWN_TOPIC_OR_PARTITION])]


def test_delete_groups_answers_per_group_as_kafka(tmp_path):
    """DeleteGroups: an empty group goes with its offsets, a group with members is NON_EMPTY_GROUP, an unknown one
    GROUP_ID_NOT_FOUND, one coordinated elsewhere NOT_COORDINATOR (and stays); a repeated name is answered once."""
    node = Node(tmp_path / "d")
    node.create_topic("t", 1)
    coord = node.group_coordinator
    coord.commit_offsets("idle", {TopicPartition("t", 0): OffsetAndMetadata(3)})
    coord.commit_offsets("elsewhere", {TopicPartition("t", 0): OffsetAndMetadata(4)})
    coord.join_group("busy", "", "consumer", [("range", b"")], 10_000)

    def check_coordinator(group_id):
        if group_id == "elsewhere":
            raise NotCoordinatorError(f"not the coordinator of {group_id}")

    view = SimpleNamespace(check_coordinator=check_coordinator)
    h = Handlers(SimpleNamespace(**ALLOW_ALL, node=node, config=node.config, view=view))
    try:
        r = asyncio.run(h.handle_delete_groups(None, {"groups_names": ["idle", "busy", "ghost", "elsewhere", "idle"]}))
        assert [(e["group_id"], e["error_code"]) for e in r["results"]] == \
            [("idle", 0), ("busy", NON_EMPTY_GROUP), ("ghost", GROUP_ID_NOT_FOUND), ("elsewhere", NOT_COORDINATOR)]
        assert {g.group_id for g in coord.list_groups()} == {"busy", "elsewhere"}
        assert coord.fetch_offsets("idle", None) == {}
        assert coord.fetch_offsets("elsewhere", None)[("t", 0)].offset == 4
    finally:
        node.close()


def test_metadata_carries_the_leader_epoch_of_each_partition(tmp_path):
    """v7+: each partition's leader epoch, never -1 for a led partition (librdkafka fences on it)."""
    node = Node(tmp_path / "d")
    node.create_topic("t", 2)
    h = Handlers(SimpleNamespace(**ALLOW_ALL, node=node, config=node.config, view=LocalView(node, 0, "127.0.0.1", 9092)))
    try:
        body = {"topics": [{"name": "t"}], "allow_auto_topic_creation": False}
        [t] = asyncio.run(h.handle_metadata(SimpleNamespace(api_version=8), body))["topics"]
        assert [(p["partition_index"], p["leader_epoch"]) for p in t["partitions"]] == \
            [(p, node.partition("t", p).log.leader_epoch) for p in range(2)]
        assert all(p["leader_epoch"] >= 0 for p in t["partitions"])
    finally:
        node.close()


# -- metrics -----------------------------------------------------------------------------------------------------

def test_request_rates_are_recent_not_lifetime_averages():
    now = [1000.0]
    m = Metrics(clock=lambda: now[0])
    for _ in range(600):                                     # a busy first minute: 10 requests/s
        m.request("produce", 0.001, 100, 10)
        now[0] += 0.1
    assert m.snapshot()["requests_per_s"] == pytest.approx(10, rel=0.05)
    now[0] += 300                                            # then five quiet minutes
    m.request("metadata", 0.001, 50, 50)
    s = m.snapshot()
    assert s["requests_per_s"] == pytest.approx(1 / 60)      # one request in the last minute
    assert s["bytes_in_per_s"] == pytest.approx(50 / 60) and s["requests_total"] == 601


def test_prometheus_text_declares_every_family():
    m = Metrics()
    m.request("fetch", 0.002, 100, 1000)
    m.observe("fetch_wait", 0.5)
    text = m.prometheus()
    lines = text.splitlines()
    assert "# TYPE seglog_requests_total counter" in lines and "# TYPE seglog_latency_seconds summary" in lines
    assert 'seglog_requests_total{api="fetch"} 1' in lines
    assert 'seglog_latency_seconds_sum{kind="fetch_wait"} 0.500000' in lines
    assert 'seglog_latency_seconds_count{kind="fetch"} 1' in lines
    declared = set()
    for line in lines:
        if line.startswith("# TYPE"):
            declared.add(line.split()[2])
        elif not line.startswith("#"):
            name = line.split("{")[0].split()[0]
            assert name in declared or name.rsplit("_", 1)[0] in declared, line

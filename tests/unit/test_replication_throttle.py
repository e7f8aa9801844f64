"""Replication throttles (seglog.replication.throttle): the throttled-replica lists, the broker rates, and the
rule that holds back only a throttled replica out of the ISR while its quota is exceeded."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from seglog.config import BrokerConfig, LogConfig
from seglog.errors import InvalidConfigError
from seglog.log import Log
from seglog.replication import fetcher
from seglog.replication.fetcher import LeaderFetcher, _Followed
from seglog.replication.throttle import (ALL_REPLICAS, FOLLOWER, LEADER, ReplicationThrottles,
                                         parse_throttled_replicas, rates_for_broker)
from seglog.wire_fetch import Fetched


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_throttled_replica_lists_parse_as_kafkas():
    name = "leader.replication.throttled.replicas"
    assert parse_throttled_replicas(name, " * ") == ALL_REPLICAS
    assert parse_throttled_replicas(name, "") == frozenset()
    assert parse_throttled_replicas(name, "0:1, 1 :2,0:1") == {(0, 1), (1, 2)}
    for bad in ("0-1", "0:1,", "*,0:1", "a:b", "0:1:2"):
        with pytest.raises(InvalidConfigError, match="must be the literal '\\*' or a list of replicas"):
            parse_throttled_replicas(name, bad)
    with pytest.raises(InvalidConfigError, match="follower.replication.throttled.replicas"):
        LogConfig().with_kafka({"follower.replication.throttled.replicas": "1"})
    assert LogConfig().with_kafka({name: "0:1"}).leader_replication_throttled_replicas == "0:1"


def test_a_brokers_own_rate_beats_the_default_and_bad_values_are_ignored():
    configs = {"brokers/<default>": {"leader.replication.throttled.rate": "100",
                                     "follower.replication.throttled.rate": "200"},
               "brokers/1": {"leader.replication.throttled.rate": "50"},
               "brokers/2": {"follower.replication.throttled.rate": "x"}, "users/alice": {"producer_byte_rate": "1"}}
    assert rates_for_broker(configs, 1) == {"leader.replication.throttled.rate": (50, "brokers/1"),
                                            "follower.replication.throttled.rate": (200, "brokers/<default>")}
    assert rates_for_broker(configs, 2)["follower.replication.throttled.rate"] == (200, "brokers/<default>")
    assert rates_for_broker({}, 1) == {}


def test_only_a_listed_replica_out_of_sync_is_held_back_while_its_quota_is_exceeded():
    clock = Clock()
    topics = {"t": {"leader.replication.throttled.replicas": "0:1,1:2",
                    "follower.replication.throttled.replicas": "*"}}
    th = ReplicationThrottles(1, topics.get, samples=2, window_seconds=1, clock=clock)
    assert th.throttled(LEADER, "t", 0) and not th.throttled(LEADER, "t", 1)      # 1:2 names broker 2
    assert th.throttled(FOLLOWER, "t", 7) and not th.throttled(LEADER, "u", 0)
    th.record(LEADER, 10_000)
    assert not th.hold_back(LEADER, "t", 0, in_sync=False), "no rate set: never held back"
    th.set_rates(rates_for_broker({"brokers/1": {"leader.replication.throttled.rate": "1000"}}, 1))
    th.record(LEADER, 3000)                                  # 3000 B over the 1 s minimum window: over 1000 B/s
    assert th.hold_back(LEADER, "t", 0, in_sync=False)
    assert not th.hold_back(LEADER, "t", 0, in_sync=True), "an in-sync replica is never throttled"
    assert not th.hold_back(LEADER, "t", 1, in_sync=False), "a replica not listed is never throttled"
    assert not th.hold_back(FOLLOWER, "t", 0, in_sync=False), "the follower quota has no rate"
    clock.now += 3.5                                          # the samples expire: under the quota again
    assert not th.hold_back(LEADER, "t", 0, in_sync=False)
    th.set_rates({})
    th.record(LEADER, 10**9)
    assert not th.hold_back(LEADER, "t", 0, in_sync=False)


def test_a_follower_leaves_held_back_partitions_out_of_its_fetch_and_records_their_bytes(tmp_path, monkeypatch):
    asked: list[set] = []
    records = {"a": b"x" * 300, "b": b"y" * 200}

    def fetch(conn, wanted, **kw):
        asked.append({t for t, _ in wanted})
        return {key: Fetched(error_code=0, high_watermark=0, log_start_offset=0, records=memoryview(b""),
                             next_offset=-1)._replace(records=memoryview(records[key[0]])) for key in wanted}

    monkeypatch.setattr(fetcher.wire_fetch, "fetch", fetch)
    clock = Clock()
    th = ReplicationThrottles(2, {"a": {"follower.replication.throttled.replicas": "0:2"}}.get, samples=2,
                              window_seconds=1, clock=clock)
    th.set_rates({"follower.replication.throttled.rate": (100, "brokers/2")})
    held = []
    manager = SimpleNamespace(broker_id=2, throttles=th, config=BrokerConfig(), on_log_dir_failure=None,
                              hold_back=lambda kind, t, p, r: held.append((kind, t, p, r)) or
                              th.hold_back(kind, t, p, in_sync=False))
    logs = {name: Log(tmp_path / f"{name}-0") for name in ("a", "b")}
    f = LeaderFetcher(manager, 1)
    monkeypatch.setattr(f, "_apply", lambda followed, answer: None)
    work = [_Followed(SimpleNamespace(topic=n, index=0, log=lg), 0, truncated=True) for n, lg in logs.items()]
    for followed in work:
        f.add(followed.partition, 0)
    try:
        f._fetch(None, work)
        assert asked == [{"a", "b"}] and held[0] == (FOLLOWER, "a", 0, 2)
        f._fetch(None, work)                     # a's 300 B (b's not counted) put broker 2 over 100 B/s
        assert asked[-1] == {"b"}
        clock.now += 5
        f._fetch(None, work)
        assert asked[-1] == {"a", "b"}
    finally:
        for lg in logs.values():
            lg.close()

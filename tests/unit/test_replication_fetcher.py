"""The follower fetcher on its own: where it cuts a diverged tail (Kafka's leader-epoch truncation, KIP-101 and
KIP-279) against a fake leader answering OffsetForLeaderEpoch from its own epoch history, and how it backs off
and logs while the leader cannot be reached.

The follower's log is a real seglog Log with one record per batch, so every offset is a possible cut point;
the fake leader computes its answers independently of seglog's epoch cache."""

from __future__ import annotations

import logging
import threading
import time
from types import SimpleNamespace

import pytest

from seglog.config import BrokerConfig
from seglog.errors import NetworkError
from seglog.log import Log
from seglog.protocol import ApiKey
from seglog.replication import fetcher
from seglog.replication.fetcher import LeaderFetcher, RetryBackoff, _Followed, truncation_offset
from seglog.security.client import PLAINTEXT
from seglog.wire_fetch import Fetched


# -- the decision itself (pure) ----------------------------------------------------------------------------------

UNTHROTTLED = {"throttles": None, "hold_back": lambda *_: False}   # a replica manager without throttles
EPOCHS = [(0, 0), (2, 100), (4, 150)]          # the follower's epoch cache: epoch 4 is its latest, log end 180


def test_same_epoch_cuts_at_the_leaders_end_of_it():
    assert truncation_offset(EPOCHS, 180, 120, 4, 170) == (170, True)
    assert truncation_offset(EPOCHS, 180, 120, 4, 250) == (180, True), "the leader has more: nothing to cut"


def test_leader_knows_only_an_older_epoch_the_follower_has_too():
    # the leader never had epoch 4; its epoch 2 ended at 140 while ours ran to 150: cut at 140
    assert truncation_offset(EPOCHS, 180, 120, 2, 140) == (140, True)
    # ... and if the leader's epoch 2 ran longer than ours, our own end of it is where we diverge
    assert truncation_offset(EPOCHS, 180, 120, 2, 165) == (150, True)


def test_leader_answers_with_an_epoch_the_follower_never_had():
    # the leader's largest epoch <= 4 is 3, which we never saw: cut back to the end of our epoch 2, ask again
    assert truncation_offset(EPOCHS, 180, 120, 3, 160) == (150, False)


def test_unknown_epoch_falls_back_to_the_high_watermark():
    assert truncation_offset(EPOCHS, 180, 120, -1, -1) == (120, True)
    assert truncation_offset(EPOCHS, 180, 120, 4, -1) == (120, True)
    assert truncation_offset(EPOCHS, 90, 120, -1, -1) == (90, True), "never past the log end"


def test_follower_without_an_epoch_that_old_takes_the_leaders_end():
    assert truncation_offset([(5, 50)], 80, 60, 3, 70) == (70, True)


# -- _truncate against a fake leader ------------------------------------------------------------------------------

class FakeLeader:
    """Answers OffsetForLeaderEpoch from `epochs` [(epoch, start offset)] and `end` (its log end offset), as
    Kafka's leader does: the largest epoch <= the one asked and where it ends (the next epoch's start, or the
    log end for the latest); UNDEFINED (-1, -1) when every epoch it knows is newer."""

    def __init__(self, epochs, end):
        self.epochs, self.end = epochs, end
        self.asked: list[int] = []

    def request(self, api, body, extra_timeout=0.0):
        assert api == ApiKey.OFFSET_FOR_LEADER_EPOCH
        asked = body["topics"][0]["partitions"][0]["leader_epoch"]
        self.asked.append(asked)
        older = [i for i, (e, _) in enumerate(self.epochs) if e <= asked]
        if not older:
            epoch, end = -1, -1
        else:
            i = older[-1]
            epoch = self.epochs[i][0]
            end = self.epochs[i + 1][1] if i + 1 < len(self.epochs) else self.end
        return {"topics": [{"topic": "t", "partitions": [{"error_code": 0, "partition": 0, "leader_epoch": epoch,
                                                          "end_offset": end}]}]}


def follower_log(path, spans, high_watermark):
    """A Log with `spans` [(epoch, records)] appended as a leader of those epochs would, one record per batch."""
    lg = Log(path)
    for epoch, count in spans:
        lg.leader_epoch = epoch
        for _ in range(count):
            lg.append_batch([b"e%d-%d" % (epoch, lg.end_offset)])
    lg.high_watermark = high_watermark
    return lg


def truncate(lg, leader: FakeLeader, current_epoch: int = 9) -> None:
    manager = SimpleNamespace(broker_id=2, **UNTHROTTLED, config=BrokerConfig(), broker_address=lambda _: None)
    f = _Followed(SimpleNamespace(topic="t", index=0, log=lg), current_epoch)
    LeaderFetcher(manager, 1)._truncate(leader, f)
    assert f.truncated


@pytest.fixture
def make_log(tmp_path):
    made = []

    def make(spans, high_watermark):
        lg = follower_log(tmp_path / f"t-{len(made)}", spans, high_watermark)
        made.append(lg)
        return lg

    yield make
    for lg in made:
        lg.close()


def test_truncate_same_epoch_keeps_what_the_leader_has(make_log):
    lg = make_log([(0, 10), (2, 10)], high_watermark=12)            # epoch 2 at 10..19
    leader = FakeLeader([(0, 0), (2, 10)], end=15)                  # the leader's epoch 2 ended at 15
    truncate(lg, leader)
    assert (leader.asked, lg.end_offset) == ([2], 15)
    assert lg.leader_epochs == [(0, 0), (2, 10)]


def test_truncate_when_the_leader_knows_only_a_smaller_epoch(make_log):
    lg = make_log([(0, 10), (1, 10), (3, 5)], high_watermark=15)    # epoch 3 at 20..24, never on the leader
    leader = FakeLeader([(0, 0), (1, 10), (4, 22)], end=40)          # its epoch 1 ran to 22
    truncate(lg, leader)
    assert (leader.asked, lg.end_offset) == ([3], 20)
    assert lg.leader_epochs == [(0, 0), (1, 10)]


def test_truncate_asks_again_when_it_never_had_the_leaders_epoch(make_log):
    lg = make_log([(0, 10), (1, 10), (3, 5)], high_watermark=12)    # epoch 1 at 10..19, 3 at 20..24
    leader = FakeLeader([(0, 0), (1, 10), (2, 18)], end=30)          # its epoch 1 ended at 18, then epoch 2
    truncate(lg, leader)
    # round 1: "3?" -> "epoch 2, ends at 30": we never had 2, so cut back to our epoch 1's end (20);
    # round 2: "1?" -> "epoch 1 ended at 18": offsets 18 and 19 diverge too
    assert (leader.asked, lg.end_offset) == ([3, 1], 18)
    assert [r.value for r in lg.records()][-1] == b"e1-17"


def test_truncate_unknown_epoch_falls_back_to_the_high_watermark(make_log):
    lg = make_log([(5, 10)], high_watermark=4)
    leader = FakeLeader([(6, 0)], end=30)                            # nothing as old as epoch 5
    truncate(lg, leader)
    assert (leader.asked, lg.end_offset) == ([5], 4)


def test_truncate_without_epochs_keeps_only_the_high_watermark(make_log):
    lg = make_log([], high_watermark=0)
    lg.append_batch([b"a"])                                         # written without any leader epoch
    lg.append_batch([b"b"])
    lg.high_watermark = 1
    assert lg.leader_epochs == []
    leader = FakeLeader([(0, 0)], end=5)
    truncate(lg, leader)
    assert (leader.asked, lg.end_offset) == ([], 1)


def test_kip101_high_watermark_truncation_would_lose_a_committed_record(make_log):
    """KIP-101's first scenario: both replicas hold offsets 0 and 1, committed (the leader's high watermark is
    2), but the follower learnt only HW 1 before it restarted. Truncating to its own high watermark would drop
    offset 1, and if the leader died next the follower would lead without it: a committed record lost. By leader
    epoch it asks where epoch 0 ends on the leader (2) and keeps both."""
    lg = make_log([(0, 2)], high_watermark=1)
    assert min(lg.high_watermark, lg.end_offset) == 1             # what high-watermark truncation would keep
    leader = FakeLeader([(0, 0)], end=2)
    truncate(lg, leader)
    assert lg.end_offset == 2
    assert [r.value for r in lg.records()] == [b"e0-0", b"e0-1"]


def test_kip101_diverged_replicas_end_identical(make_log):
    """KIP-101's second scenario: after both replicas crashed, the follower's offset 1 (epoch 0, never
    replicated) differs from the new leader's offset 1 (epoch 1). The follower cuts exactly there."""
    lg = make_log([(0, 2)], high_watermark=2)                      # it even believed offset 1 committed
    leader = FakeLeader([(0, 0), (1, 1)], end=3)
    truncate(lg, leader)
    assert (leader.asked, lg.end_offset) == ([0], 1)


# -- backoff while the leader cannot be reached -------------------------------------------------------------------

class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_retry_backoff_doubles_to_the_maximum_and_rate_limits_its_log_line():
    clock = Clock()
    b = RetryBackoff(0.1, 1.0, 30.0, clock)
    seen = []
    for _ in range(8):
        delay, log_it = b.failed()
        seen.append((round(delay, 3), log_it))
        clock.now += delay
    assert [d for d, _ in seen] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0]
    assert [lg for _, lg in seen] == [True] + [False] * 7
    clock.now += 30
    assert b.failed() == (1.0, True), "one line per log interval while it keeps failing"
    assert b.succeeded() == 9
    assert b.failed() == (0.1, True), "a new streak starts from the first delay and is logged"


def test_fetcher_backs_off_and_logs_once_while_the_leader_is_unreachable(tmp_path, monkeypatch, caplog):
    attempts: list[float] = []
    reachable = threading.Event()

    class Connection:
        def __init__(self, host, port, **kw):
            self.host, self.port = host, port

        def version(self, api):
            return 12

        def request(self, api, body, version=None, extra_timeout=0.0):
            attempts.append(time.monotonic())
            if not reachable.is_set():
                raise NetworkError(f"cannot connect to {self.host}:{self.port}: [Errno 111] Connection refused")
            time.sleep(0.05)
            return {"error_code": 0, "responses": []}

        def close(self):
            pass

    monkeypatch.setattr(fetcher, "BrokerConnection", Connection)
    lg = Log(tmp_path / "t-0")
    config = BrokerConfig.from_properties({"replica.fetch.backoff.ms": 1000})
    manager = SimpleNamespace(broker_id=2, **UNTHROTTLED, config=config, broker_address=lambda _: ("127.0.0.1", 9),
                              security=PLAINTEXT)
    f = LeaderFetcher(manager, 1)
    f.add(SimpleNamespace(topic="t", index=0, log=lg), 0)
    caplog.set_level(logging.DEBUG, logger="seglog.replication")
    f.start()
    try:
        time.sleep(2.6)
        failing = list(attempts)
        reachable.set()
        deadline = time.monotonic() + 5
        while len(attempts) < len(failing) + 3 and time.monotonic() < deadline:    # fetching again
            time.sleep(0.05)
    finally:
        f.stop()
        f.join(5)
        lg.close()
    gaps = [b - a for a, b in zip(failing, failing[1:])]
    # 0.1, 0.2, 0.4, 0.8, 1.0 s apart: about 6 attempts in 2.6 s (a fixed 0.2 s retry would make 13)
    assert 4 <= len(failing) <= 7, (len(failing), gaps)
    assert gaps[0] < 0.35 and max(gaps) <= 1.4 and gaps[-1] >= 0.7, gaps
    lines = [r for r in caplog.records if r.levelno >= logging.INFO and "cannot connect" in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert f.backoff.failures == 0, "fetching works again: the backoff is reset"
    assert any("fetching again after" in r.getMessage() for r in caplog.records)


def test_a_follower_takes_the_leaders_log_start_offset(make_log):
    """DeleteRecords on the leader reaches its followers through the fetch responses' log_start_offset."""
    lg = make_log([(0, 6)], high_watermark=6)
    manager = SimpleNamespace(broker_id=2, **UNTHROTTLED, config=BrokerConfig(), broker_address=lambda _: None)
    f = _Followed(SimpleNamespace(topic="t", index=0, log=lg), 0, truncated=True)
    fetcher = LeaderFetcher(manager, 1)
    answer = Fetched(error_code=0, high_watermark=6, log_start_offset=4, records=memoryview(b""), next_offset=-1)
    fetcher._apply(f, answer)
    assert lg.start_offset == 4
    fetcher._apply(f, answer._replace(log_start_offset=9))        # never past what this replica has committed
    assert lg.start_offset == 6


def test_a_follower_behind_a_log_start_inside_a_batch_restarts_at_the_batch(tmp_path):
    """DeleteRecords can leave the leader's log start offset inside a batch (here 5 of the batch 0-9): a follower
    behind it is answered OFFSET_OUT_OF_RANGE, restarts empty at 5, and is then sent the whole batch from 0. As
    Kafka's Partition.appendRecordsToFollowerOrFutureReplica, its empty log restarts at the batch's base offset,
    takes it, and moves its start offset back up to the leader's."""
    leader = Log(tmp_path / "leader")
    leader.append_batch([b"r%d" % i for i in range(10)])
    leader.high_watermark = 10
    leader.delete_records_before(5)
    batch = leader.read(5)                      # the whole batch holding offset 5: from 0
    lg = Log(tmp_path / "follower")
    manager = SimpleNamespace(broker_id=2, **UNTHROTTLED, config=BrokerConfig(), broker_address=lambda _: None)
    f = _Followed(SimpleNamespace(topic="t", index=0, log=lg), 0, truncated=True)
    fetcher = LeaderFetcher(manager, 1)
    try:
        fetcher._apply(f, Fetched(error_code=1, high_watermark=10, log_start_offset=5, records=memoryview(b""),
                                  next_offset=-1))                        # OFFSET_OUT_OF_RANGE
        assert (lg.start_offset, lg.end_offset) == (5, 5)
        fetcher._apply(f, Fetched(error_code=0, high_watermark=10, log_start_offset=5, records=batch,
                                  next_offset=10))
        assert (lg.start_offset, lg.end_offset, lg.high_watermark) == (5, 10, 10)
        assert [r.value for r in lg.records(5, 10)] == [b"r%d" % i for i in range(5, 10)]
    finally:
        leader.close()
        lg.close()


def test_a_partition_the_leader_does_not_lead_yet_delays_only_itself(tmp_path, monkeypatch, caplog):
    """Right after a leader election the new leader learns of its partitions one by one: OffsetForLeaderEpoch
    for a partition it has not learned yet answers NOT_LEADER_OR_FOLLOWER. The other partitions followed
    from it must keep replicating meanwhile (one such answer stalled every partition for 25 s, and with them
    every acks=all produce on the leader's other partitions), and the late one starts once it is answered."""
    knows_a = threading.Event()
    fetched: list[set] = []

    class Connection:
        def __init__(self, host, port, **kw):
            pass

        def version(self, api):
            return 12

        def request(self, api, body, version=None, extra_timeout=0.0):
            if api == ApiKey.OFFSET_FOR_LEADER_EPOCH:
                t = body["topics"][0]
                code = 6 if t["topic"] == "a" and not knows_a.is_set() else 0     # NOT_LEADER_OR_FOLLOWER
                return {"topics": [{"topic": t["topic"], "partitions": [
                    {"error_code": code, "partition": 0, "leader_epoch": 0, "end_offset": 0}]}]}
            fetched.append({t["topic"] for t in body["topics"]})
            time.sleep(0.02)
            return {"error_code": 0, "responses": []}

        def close(self):
            pass

    monkeypatch.setattr(fetcher, "BrokerConnection", Connection)
    logs = {name: Log(tmp_path / f"{name}-0") for name in ("a", "b")}
    for lg in logs.values():
        lg.leader_epoch = 0
        lg.append_batch([b"x"])
        lg.high_watermark = 1
    manager = SimpleNamespace(broker_id=2, **UNTHROTTLED, config=BrokerConfig(),
                              broker_address=lambda _: ("127.0.0.1", 9), security=PLAINTEXT, on_log_dir_failure=None)
    f = LeaderFetcher(manager, 1)
    for name, lg in logs.items():
        f.add(SimpleNamespace(topic=name, index=0, log=lg), 0)
    caplog.set_level(logging.INFO, logger="seglog.replication")
    f.start()
    try:
        deadline = time.monotonic() + 5
        while len(fetched) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(fetched) >= 5 and all(topics == {"b"} for topics in fetched), fetched
        assert f.backoff.failures == 0, "a partition's error is not the fetcher's"
        knows_a.set()
        deadline = time.monotonic() + 5
        while (not fetched or fetched[-1] != {"a", "b"}) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fetched[-1] == {"a", "b"}
    finally:
        f.stop()
        f.join(5)
        for lg in logs.values():
            lg.close()
    refused = [r for r in caplog.records if "NOT_LEADER_OR_FOLLOWER" in r.getMessage()]
    assert len(refused) == 1, "logged once per streak, not once per attempt"
    assert any("works again" in r.getMessage() for r in caplog.records)

"""Consumer groups in-process: several seglog.Consumer members in threads on one Node.

Scenarios: members join, leave, crash (their link to the coordinator goes dead: heartbeats stop and the
session expires) and stall (they stop polling past max_poll_interval_ms, so their own heartbeat thread leaves
the group). Throughout, with the range assignor and with cooperative-sticky:

* ownership: every member reports its partitions through on_assign / on_revoke; a partition handed to a
  live member while another live member still holds it is a violation. After each rebalance completes, the
  coordinator's own view of the assignment (DescribeGroups) must give every partition to exactly one member
  and agree with what the members hold.
* delivery: members commit after processing every poll; at the end every produced record was delivered
  exactly once (none skipped, none twice) and in order within each partition.

Also: the seeds' range example, idle members, independent groups, offsets across a Node restart,
auto-commit, auto_offset_reset, seek/position/committed/lag, and pattern subscriptions.
"""

import threading
import time
from collections import Counter, defaultdict

import pytest

import seglog
from seglog.assignors import Assignment
from seglog.errors import (CoordinatorNotAvailableError, IllegalGenerationError, IllegalStateError,
                           InvalidArgumentError, NoOffsetForPartitionError, OffsetOutOfRangeError,
                           RebalanceInProgressError, UnknownMemberIdError, UnknownTopicOrPartitionError)

NODE_CONFIG = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "100",
               "offsets.topic.num.partitions": "3"}
RANGE = ("range",)
COOPERATIVE = ("cooperative-sticky",)
SETTLE_S = 30


@pytest.fixture
def node(tmp_path):
    n = seglog.open(tmp_path / "data", NODE_CONFIG)
    yield n
    n.close()


def produce(node, topic, n, *, partitions=None, start=0):
    """n records (values b"<i>") spread round-robin over the topic's partitions (or the given ones)."""
    parts = partitions if partitions is not None else range(node.topic(topic).partitions)
    parts = list(parts)
    with seglog.Producer(node, linger_ms=0) as prod:
        for i in range(start, start + n):
            prod.send(topic, b"%d" % i, partition=parts[i % len(parts)])


def all_offsets(node, topic):
    return {(topic, p.index, o) for p in node.partitions(topic) for o in range(p.log_start_offset, p.high_watermark)}


def wait_for(cond, timeout=SETTLE_S, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


# --- a member's link to the node, which a test can cut --------------------------------------------------------

class Link:
    """Stands between a Consumer and the Node. ``cut()`` makes every group coordinator call from then on hang
    (heartbeats, commits, leaving) as if the member's process had died; ``restore()`` lets the hung calls
    fail, so the member can be closed at teardown. ``heartbeat_delay`` (seconds) delays each heartbeat's answer
    (a slow network). Everything else passes straight through."""

    def __init__(self, node, heartbeat_delay=0.0):
        self._node = node
        self.heartbeat_delay = heartbeat_delay
        self._cut = False
        self._restored = threading.Event()
        self.joins = []                              # monotonic time of every JoinGroup the member sent

    def __getattr__(self, name):
        return getattr(self._node, name)

    @property
    def group_coordinator(self):
        return _CoordinatorLink(self._node.group_coordinator, self)

    def cut(self):
        self._cut = True

    def restore(self):
        self._restored.set()


class _CoordinatorLink:
    def __init__(self, coord, link):
        self._coord, self._link = coord, link

    def __getattr__(self, name):
        target = getattr(self._coord, name)
        if not callable(target):
            return target

        def call(*args, **kwargs):
            if self._link._cut:
                self._link._restored.wait()
                raise ConnectionError("link to the coordinator is cut")
            if name == "join_group":
                self._link.joins.append(time.monotonic())
            if name == "heartbeat" and self._link.heartbeat_delay:
                try:
                    return target(*args, **kwargs)
                finally:
                    time.sleep(self._link.heartbeat_delay)
            return target(*args, **kwargs)
        return call


# --- ownership and delivery bookkeeping ---------------------------------------------------------------------

class Tracker:
    """What the members report: ownership from their rebalance callbacks, deliveries from their polls."""

    def __init__(self):
        self.lock = threading.Lock()
        self.owner = {}                              # tp -> member name
        self.dead = set()
        self.violations = []
        self.deliveries = []                         # (member, topic, partition, offset)
        self.commit_failures = []
        self.errors = []

    def assigned(self, name, tps):
        with self.lock:
            for tp in tps:
                tp = tuple(tp)
                cur = self.owner.get(tp)
                if cur is not None and cur != name and cur not in self.dead:
                    self.violations.append(f"{tp} given to {name} while {cur} holds it")
                self.owner[tp] = name

    def revoked(self, name, tps):
        with self.lock:
            for tp in tps:
                if self.owner.get(tuple(tp)) == name:
                    del self.owner[tuple(tp)]

    def mark_dead(self, name):
        with self.lock:
            self.dead.add(name)
            for tp in [tp for tp, who in self.owner.items() if who == name]:
                del self.owner[tp]

    def mark_alive(self, name):
        with self.lock:
            self.dead.discard(name)

    def delivered(self, name, records):
        with self.lock:
            self.deliveries.extend((name, r.topic, r.partition, r.offset) for r in records)

    def owned_by(self):
        with self.lock:
            out = defaultdict(set)
            for tp, who in self.owner.items():
                out[who].add(tp)
            return dict(out)

    def delivered_set(self):
        with self.lock:
            return {(t, p, o) for _, t, p, o in self.deliveries}

    def check_exactly_once(self, expected):
        """Every expected (topic, partition, offset) delivered once, nothing else; per-partition order kept."""
        with self.lock:
            counts = Counter((t, p, o) for _, t, p, o in self.deliveries)
            per_member = defaultdict(list)
            for who, t, p, o in self.deliveries:
                per_member[(who, t, p)].append(o)
        missing = sorted(expected - set(counts))
        twice = sorted(k for k, c in counts.items() if c > 1)
        extra = sorted(set(counts) - expected)
        assert not missing, f"{len(missing)} records skipped, e.g. {missing[:10]}"
        assert not twice, f"{len(twice)} records delivered twice, e.g. {twice[:10]}"
        assert not extra, f"unexpected deliveries {extra[:10]}"
        for key, offs in per_member.items():
            assert offs == sorted(offs), f"{key} delivered out of order"


class Member:
    """One consumer in its own thread: poll, process (record the deliveries), commit, repeat.

    ``crash()`` and ``stall()`` take effect in the member's thread right after a commit, so everything it
    processed is committed: no record needs to be delivered twice afterwards."""

    def __init__(self, node, name, group, topics, tracker, strategy=RANGE, *, session_timeout_ms=1000,
                 heartbeat_interval_ms=50, max_poll_interval_ms=20000, pattern=None, heartbeat_delay=0.0,
                 **consumer_kw):
        self.name, self.tracker, self.topics, self.pattern = name, tracker, topics, pattern
        self.link = Link(node, heartbeat_delay)
        self.consumer = seglog.Consumer(self.link, group_id=group, client_id=name, auto_offset_reset="earliest",
                                        enable_auto_commit=False, session_timeout_ms=session_timeout_ms,
                                        heartbeat_interval_ms=heartbeat_interval_ms,
                                        max_poll_interval_ms=max_poll_interval_ms,
                                        partition_assignment_strategy=strategy, **consumer_kw)
        self._requests = []
        self._req_lock = threading.Lock()
        self.state = "running"                  # running / stalled / crashed / closed
        self._changed = threading.Condition()
        self.thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)
        self.thread.start()

    def _request(self, what, wait_for):
        with self._req_lock:
            self._requests.append(what)
        with self._changed:
            if not self._changed.wait_for(lambda: self.state == wait_for, timeout=SETTLE_S):
                raise AssertionError(f"{self.name} did not reach {wait_for}")

    def _set(self, state):
        with self._changed:
            self.state = state
            self._changed.notify_all()

    def crash(self):
        self._request("crash", "crashed")

    def stall(self):
        self._request("stall", "stalled")

    def resume(self):
        self._request("resume", "running")

    def close(self):
        if self.state != "closed":
            self._request("close", "closed")
        self.thread.join(SETTLE_S)

    def _run(self):
        c, t = self.consumer, self.tracker
        try:
            if self.pattern is not None:
                c.subscribe(pattern=self.pattern, on_assign=lambda tps: t.assigned(self.name, tps),
                            on_revoke=lambda tps: t.revoked(self.name, tps))
            else:
                c.subscribe(self.topics, on_assign=lambda tps: t.assigned(self.name, tps),
                            on_revoke=lambda tps: t.revoked(self.name, tps))
            while True:
                with self._req_lock:
                    req = self._requests.pop(0) if self._requests else None
                if req == "close":
                    if self.state == "crashed":
                        self.link.restore()
                    t.mark_dead(self.name)
                    c.close()
                    self._set("closed")
                    return
                if req == "crash":
                    t.mark_dead(self.name)
                    self.link.cut()
                    self._set("crashed")
                elif req == "stall":
                    t.mark_dead(self.name)
                    self._set("stalled")
                elif req == "resume":
                    t.mark_alive(self.name)
                    self._set("running")
                if self.state != "running":
                    time.sleep(0.02)
                    continue
                records = c.poll(0.05)
                if records:
                    t.delivered(self.name, records)            # "processing"
                    try:
                        c.commit()
                    except (IllegalGenerationError, UnknownMemberIdError, RebalanceInProgressError) as e:
                        t.commit_failures.append((self.name, repr(e)))
        except BaseException as e:                             # reported by the test
            t.errors.append((self.name, repr(e)))
            self._set("closed")


def coordinator_view(node, group):
    """(state, {client_id: set of tps}) from DescribeGroups (assignments only while Stable)."""
    (desc,) = node.group_coordinator.describe_groups([group])
    view = {}
    for m in desc.members:
        view[m.client_id] = {tuple(tp) for tp in Assignment.decode(m.assignment).partitions} if m.assignment else set()
    return str(desc.state), view


def settled(node, group, tracker, live, partitions):
    """True once the group is Stable with exactly the live members, every partition given to exactly one of
    them (coordinator's view), and each member holds what the coordinator gave it."""
    state, view = coordinator_view(node, group)
    if state != "Stable" or set(view) != set(live):
        return False
    given = [tp for tps in view.values() for tp in tps]
    if len(given) != len(set(given)) or set(given) != set(partitions):
        return False
    owned = tracker.owned_by()
    return all(owned.get(name, set()) == view[name] for name in live)


def wait_settled(node, group, tracker, live, partitions, what):
    wait_for(lambda: settled(node, group, tracker, live, partitions), what=f"a settled group after {what}")
    assert not tracker.violations, tracker.violations
    state, view = coordinator_view(node, group)
    return view


class Background:
    """A producer thread sending round-robin records until stopped."""

    def __init__(self, node, topic, per_tick=20, tick=0.01):
        self.stop_flag = threading.Event()
        self.count = 0

        def run():
            with seglog.Producer(node, linger_ms=2) as prod:
                while not self.stop_flag.is_set():
                    for _ in range(per_tick):
                        prod.send(topic, b"%d" % self.count)
                        self.count += 1
                    prod.flush()
                    time.sleep(tick)
        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def stop(self):
        self.stop_flag.set()
        self.thread.join(10)


@pytest.fixture
def members():
    started = []
    yield started
    for m in started:
        try:
            m.close()
        except AssertionError:
            pass


# --- rebalances: join, leave, crash --------------------------------------------------------------------------

@pytest.mark.parametrize("strategy", [RANGE, COOPERATIVE], ids=["range", "cooperative-sticky"])
def test_join_leave_crash_keep_ownership_exclusive_and_delivery_exactly_once(node, members, strategy):
    node.create_topic("orders", 6)
    parts = {("orders", p) for p in range(6)}
    tracker = Tracker()
    producer = Background(node, "orders")

    def add(name):
        m = Member(node, name, "g", ["orders"], tracker, strategy)
        members.append(m)
        return m

    live = {"m0"}
    m0 = add("m0")
    view = wait_settled(node, "g", tracker, live, parts, "the first join")
    assert view["m0"] == parts
    m1, m2 = add("m1"), add("m2")
    live |= {"m1", "m2"}
    view = wait_settled(node, "g", tracker, live, parts, "two joins")
    assert sorted(len(v) for v in view.values()) == [2, 2, 2]

    m1.close()                                          # a clean leave
    live.discard("m1")
    view = wait_settled(node, "g", tracker, live, parts, "a leave")
    assert sorted(len(v) for v in view.values()) == [3, 3]

    add("m3")
    live.add("m3")
    wait_settled(node, "g", tracker, live, parts, "a join after a leave")

    t0 = time.monotonic()
    m2.crash()                                          # heartbeats stop: the session (1 s) must expire
    live.discard("m2")
    view = wait_settled(node, "g", tracker, live, parts, "a crash")
    assert time.monotonic() - t0 >= 0.5                 # it took a session expiry, not a leave
    assert sorted(len(v) for v in view.values()) == [3, 3]

    producer.stop()
    expected = all_offsets(node, "orders")
    assert len(expected) == producer.count > 0
    wait_for(lambda: tracker.delivered_set() >= expected, what="every record delivered")
    time.sleep(0.2)                                     # time for a stray duplicate to show up
    assert not tracker.errors, tracker.errors
    assert not tracker.commit_failures, tracker.commit_failures
    assert not tracker.violations, tracker.violations
    tracker.check_exactly_once(expected)
    committed = node.group_coordinator.fetch_offsets("g", sorted(parts))
    assert {tp: om.offset for tp, om in committed.items()} == {
        tp: node.partition(*tp).high_watermark for tp in parts}


def test_stalled_member_loses_its_partitions_then_rejoins(node, members):
    node.create_topic("orders", 2)
    parts = {("orders", 0), ("orders", 1)}
    tracker = Tracker()
    produce(node, "orders", 40)
    a = Member(node, "a", "g", ["orders"], tracker, RANGE, max_poll_interval_ms=800)
    members.append(a)
    wait_settled(node, "g", tracker, {"a"}, parts, "a joined")
    wait_for(lambda: len(tracker.delivered_set()) == 40, what="a read the first records")
    a.stall()                                           # stops polling: it keeps its partitions locally
    b = Member(node, "b", "g", ["orders"], tracker, RANGE)
    members.append(b)
    view = wait_settled(node, "g", tracker, {"b"}, parts, "a stalled past max_poll_interval")
    assert view == {"b": parts}
    produce(node, "orders", 40, start=40)
    wait_for(lambda: len(tracker.delivered_set()) == 80, what="b read what came while a stalled")
    a.resume()                                          # a polls again and rejoins
    wait_settled(node, "g", tracker, {"a", "b"}, parts, "a rejoined")
    produce(node, "orders", 40, start=80)
    expected = all_offsets(node, "orders")
    wait_for(lambda: tracker.delivered_set() >= expected, what="every record delivered")
    time.sleep(0.3)
    assert not tracker.errors, tracker.errors
    tracker.check_exactly_once(expected)


@pytest.mark.parametrize("strategy", [RANGE, COOPERATIVE], ids=["range", "cooperative-sticky"])
def test_member_returning_after_falling_out_resumes_at_the_committed_offsets(node, members, strategy):
    node.create_topic("orders", 2)
    parts = {("orders", 0), ("orders", 1)}
    tracker = Tracker()
    produce(node, "orders", 20)
    a = Member(node, "a", "g", ["orders"], tracker, strategy, max_poll_interval_ms=500)
    members.append(a)
    wait_settled(node, "g", tracker, {"a"}, parts, "a joined")
    wait_for(lambda: len(tracker.delivered_set()) == 20, what="a read the first records")
    a.stall()                                           # a falls out of the group (it leaves by itself) ...
    wait_for(lambda: coordinator_view(node, "g")[0] == "Empty", what="a left")
    b = Member(node, "b", "g", ["orders"], tracker, strategy)    # ... b takes over, reads on and leaves
    members.append(b)
    produce(node, "orders", 20, start=20)
    wait_for(lambda: len(tracker.delivered_set()) == 40, what="b read the new records")
    b.close()
    assert {tp: om.offset for tp, om in node.group_coordinator.fetch_offsets("g", sorted(parts)).items()} == {
        ("orders", 0): 20, ("orders", 1): 20}
    a.resume()                                          # a comes back to an empty group
    produce(node, "orders", 10, start=40)
    expected = all_offsets(node, "orders")
    wait_for(lambda: tracker.delivered_set() >= expected, what="every record delivered")
    time.sleep(0.3)
    assert not tracker.errors, tracker.errors
    tracker.check_exactly_once(expected)
    wait_settled(node, "g", tracker, {"a"}, parts, "a came back")      # and on_assign told a what it holds


def test_a_settled_group_stops_rebalancing(node, members):
    node.create_topic("t", 6)
    parts = {("t", p) for p in range(6)}
    tracker = Tracker()
    members.append(Member(node, "a", "g", ["t"], tracker, RANGE, heartbeat_interval_ms=20))
    wait_settled(node, "g", tracker, {"a"}, parts, "a joined")
    for name in ("b", "c"):       # members whose heartbeat answers come back slowly: they notice rebalances late
        members.append(Member(node, name, "g", ["t"], tracker, RANGE, heartbeat_interval_ms=50,
                              heartbeat_delay=0.15, session_timeout_ms=3000))
        time.sleep(0.5)
    time.sleep(1.5)
    mark = time.monotonic()
    time.sleep(1.5)
    joins = {m.name: sum(1 for t in m.link.joins if t > mark) for m in members}
    assert joins == {"a": 0, "b": 0, "c": 0}, f"JoinGroups sent while nobody joined or left: {joins}"
    assert settled(node, "g", tracker, {"a", "b", "c"}, parts)
    assert not tracker.violations


def test_commit_from_a_member_that_fell_out_is_rejected(node, members):
    node.create_topic("t", 2)
    produce(node, "t", 10)
    tracker = Tracker()
    with seglog.Consumer(node, group_id="g", client_id="z", auto_offset_reset="earliest", enable_auto_commit=False,
                         session_timeout_ms=1000, heartbeat_interval_ms=50, max_poll_interval_ms=500,
                         partition_assignment_strategy=RANGE) as zombie:
        zombie.subscribe(["t"])
        wait_for(lambda: zombie.poll(0.05) or zombie.assignment() == {("t", 0), ("t", 1)}, what="z joined")
        zombie.commit({("t", 0): 1, ("t", 1): 1})
        other = Member(node, "o", "g", ["t"], tracker, RANGE)
        members.append(other)
        # z does not poll: past max_poll_interval its heartbeat thread leaves and o takes everything
        wait_settled(node, "g", tracker, {"o"}, {("t", 0), ("t", 1)}, "z fell out")
        wait_for(lambda: len(tracker.delivered_set()) == 8, what="o read the rest")
        before = node.group_coordinator.fetch_offsets("g", [("t", 0), ("t", 1)])
        with pytest.raises((UnknownMemberIdError, IllegalGenerationError)):
            zombie.commit({("t", 0): 0, ("t", 1): 0})
        assert node.group_coordinator.fetch_offsets("g", [("t", 0), ("t", 1)]) == before
        assert {om.offset for om in before.values()} == {5}


def test_a_member_that_fell_out_commits_nothing_into_the_emptied_group(node, members):
    """Once the new owner left too, the group is Empty and would take a simple commit: the member that fell out
    must not commit its stale positions that way (commit() nor close()), and on rejoining it loses (on_lost)
    rather than revokes what it held, then reads on from the committed offsets."""
    node.create_topic("t", 2)
    produce(node, "t", 10)
    parts = {("t", 0), ("t", 1)}
    tracker = Tracker()
    calls = []
    zombie = seglog.Consumer(node, group_id="g", client_id="z", auto_offset_reset="earliest",
                             enable_auto_commit=True, auto_commit_interval_ms=60_000, session_timeout_ms=1000,
                             heartbeat_interval_ms=50, max_poll_interval_ms=500, partition_assignment_strategy=RANGE)
    try:
        zombie.subscribe(["t"], on_revoke=lambda tps: calls.append(("revoke", tps)),
                         on_lost=lambda tps: calls.append(("lost", tps)))
        got = []
        wait_for(lambda: got.extend(zombie.poll(0.05, max_records=3)) or got, what="z read some")
        assert len(got) == 3 and zombie.assignment() == parts
        wait_for(lambda: coordinator_view(node, "g")[0] == "Empty", what="z fell out")   # z does not poll
        other = Member(node, "o", "g", ["t"], tracker, RANGE)
        members.append(other)
        wait_for(lambda: len(tracker.delivered_set()) == 10, what="o read everything")
        other.close()
        wait_for(lambda: coordinator_view(node, "g")[0] == "Empty", what="o left")
        committed = {tp: om.offset for tp, om in node.group_coordinator.fetch_offsets("g", sorted(parts)).items()}
        assert committed == {("t", 0): 5, ("t", 1): 5}
        with pytest.raises(UnknownMemberIdError):
            zombie.commit()
        assert not zombie.poll(0.5)                     # rejoins: starts at the committed offsets
        assert calls == [("lost", sorted(parts))]
        assert zombie.assignment() == parts and {zombie.position(tp) for tp in parts} == {5}
    finally:
        zombie.close()
    assert {tp: om.offset for tp, om in node.group_coordinator.fetch_offsets("g", sorted(parts)).items()} == committed


def test_close_of_a_member_that_fell_out_does_not_auto_commit(node):
    node.create_topic("t", 1)
    produce(node, "t", 10)
    tp = ("t", 0)
    with seglog.Consumer(node, group_id="g", client_id="z", auto_offset_reset="earliest", enable_auto_commit=True,
                         auto_commit_interval_ms=60_000, session_timeout_ms=1000, heartbeat_interval_ms=50,
                         max_poll_interval_ms=300) as zombie:
        zombie.subscribe(["t"])
        wait_for(lambda: zombie.poll(0.05, max_records=3), what="z read some")
        wait_for(lambda: coordinator_view(node, "g")[0] == "Empty", what="z fell out")
        node.group_coordinator.commit_offsets("g", {tp: 8})      # say, a standalone tool moved the offset
    assert node.group_coordinator.fetch_offsets("g", [tp])[tp].offset == 8


class _HeldHeartbeats:
    """A node whose group coordinator holds the next heartbeat of the member until released."""

    def __init__(self, node):
        self._node, self.armed, self.entered, self.released = node, False, threading.Event(), threading.Event()
        self.joins = 0

    def __getattr__(self, name):
        return getattr(self._node, name)

    @property
    def group_coordinator(self):
        outer, coord = self, self._node.group_coordinator

        class Coord:
            def __getattr__(self, name):
                return getattr(coord, name)

            def heartbeat(self, *args, **kwargs):
                if outer.armed:
                    outer.armed = False
                    outer.entered.set()
                    outer.released.wait(10)
                return coord.heartbeat(*args, **kwargs)

            def join_group(self, *args, **kwargs):
                outer.joins += 1
                return coord.join_group(*args, **kwargs)
        return Coord()


def test_a_heartbeat_answered_for_an_older_generation_is_ignored(node, members):
    node.create_topic("t", 2)
    tracker = Tracker()
    held = _HeldHeartbeats(node)
    lost = []
    with seglog.Consumer(held, group_id="g", client_id="a", enable_auto_commit=False, session_timeout_ms=3000,
                         heartbeat_interval_ms=50, partition_assignment_strategy=RANGE) as a:
        a.subscribe(["t"], on_lost=lost.append)
        wait_for(lambda: a.poll(0.05) or a.assignment() == {("t", 0), ("t", 1)}, what="a joined")
        held.armed = True
        assert held.entered.wait(5)                     # a heartbeat of generation N is on its way ...
        members.append(Member(node, "b", "g", ["t"], tracker, RANGE))
        a.subscribe(["t"], on_lost=lost.append)         # ... a rejoins (for another reason) into generation N+1
        wait_for(lambda: a.poll(0.05) or len(a.assignment()) == 1, what="a rejoined with b")
        joins = held.joins
        held.released.set()                             # ... and then it is answered ILLEGAL_GENERATION
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            a.poll(0.05)
        assert held.joins == joins and not lost
        assert coordinator_view(node, "g")[0] == "Stable" and len(a.assignment()) == 1


def test_a_failed_join_is_retried_by_the_next_poll(node):
    node.create_topic("t", 2)
    failing = {"left": 1}
    coord = node.group_coordinator

    class Flaky:
        def __getattr__(self, name):
            return getattr(node, name)

        @property
        def group_coordinator(self):
            class Coord:
                def __getattr__(self, name):
                    return getattr(coord, name)

                def join_group(self, *args, **kwargs):
                    if failing["left"]:
                        failing["left"] -= 1
                        raise CoordinatorNotAvailableError("the coordinator moved")
                    return coord.join_group(*args, **kwargs)
            return Coord()

    with seglog.Consumer(Flaky(), group_id="g", enable_auto_commit=False, session_timeout_ms=1000,
                         heartbeat_interval_ms=50) as c:
        c.subscribe(["t"])
        with pytest.raises(CoordinatorNotAvailableError):
            c.poll(0.1)
        wait_for(lambda: c.poll(0.05) or c.assignment() == {("t", 0), ("t", 1)}, timeout=5, what="a rejoin")


# --- assignment shapes ---------------------------------------------------------------------------------------

def test_range_example_six_partitions_four_consumers(node, members):
    node.create_topic("pet", 6)
    parts = {("pet", p) for p in range(6)}
    tracker = Tracker()
    for i in range(4):
        members.append(Member(node, f"c{i}", "g", ["pet"], tracker, RANGE))
    view = wait_settled(node, "g", tracker, {"c0", "c1", "c2", "c3"}, parts, "four joins")
    # member ids start with the client id, so c0 < c1 < c2 < c3 in the range assignor's order
    assert {name: sorted(p for _, p in tps) for name, tps in view.items()} == {
        "c0": [0, 1], "c1": [2, 3], "c2": [4], "c3": [5]}


def test_more_members_than_partitions_leaves_some_idle(node, members):
    node.create_topic("one", 1)
    parts = {("one", 0)}
    tracker = Tracker()
    for i in range(2):
        members.append(Member(node, f"c{i}", "g", ["one"], tracker, RANGE))
    view = wait_settled(node, "g", tracker, {"c0", "c1"}, parts, "two joins")
    assert view == {"c0": parts, "c1": set()}            # c1 is in the group, idle
    produce(node, "one", 10)
    wait_for(lambda: len(tracker.delivered_set()) == 10, what="c0 read")
    members[0].close()                                   # the idle member takes over where c0 committed
    view = wait_settled(node, "g", tracker, {"c1"}, parts, "a leave")
    assert view == {"c1": parts}
    produce(node, "one", 10, start=10)
    wait_for(lambda: len(tracker.delivered_set()) == 20, what="all read")
    time.sleep(0.2)
    assert Counter(who for who, *_ in tracker.deliveries) == {"c0": 10, "c1": 10}
    tracker.check_exactly_once(all_offsets(node, "one"))


def test_groups_are_independent(node, members):
    node.create_topic("t", 4)
    parts = {("t", p) for p in range(4)}
    t1, t2 = Tracker(), Tracker()
    for i in range(2):
        members.append(Member(node, f"a{i}", "group-a", ["t"], t1, RANGE))
    members.append(Member(node, "b0", "group-b", ["t"], t2, COOPERATIVE))
    va = wait_settled(node, "group-a", t1, {"a0", "a1"}, parts, "group-a formed")
    vb = wait_settled(node, "group-b", t2, {"b0"}, parts, "group-b formed")
    assert {n: len(v) for n, v in va.items()} == {"a0": 2, "a1": 2} and vb == {"b0": parts}
    produce(node, "t", 100)
    expected = all_offsets(node, "t")
    wait_for(lambda: t1.delivered_set() == expected and t2.delivered_set() == expected, what="both groups read all")
    time.sleep(0.2)
    t1.check_exactly_once(expected)                      # each group gets every record once
    t2.check_exactly_once(expected)
    assert Counter(who for who, *_ in t1.deliveries) == {"a0": 50, "a1": 50}
    # offsets are per group: moving one group's offset does not move the other's
    members[2].close()
    coord = node.group_coordinator
    wait_for(lambda: coordinator_view(node, "group-b")[0] == "Empty", what="group-b empty")
    coord.commit_offsets("group-b", {("t", 0): 3})
    assert coord.fetch_offsets("group-b", [("t", 0)])[("t", 0)].offset == 3
    assert coord.fetch_offsets("group-a", [("t", 0)])[("t", 0)].offset == 25


# --- offsets -------------------------------------------------------------------------------------------------

def test_offsets_survive_a_node_restart(tmp_path):
    path = tmp_path / "data"
    with seglog.open(path, NODE_CONFIG) as node:
        node.create_topic("t", 3)
        produce(node, "t", 60)
        with seglog.Consumer(node, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=1000, heartbeat_interval_ms=50) as c:
            c.subscribe(["t"])
            got = []
            wait_for(lambda: got.extend(c.poll(0.05, max_records=7)) or len(got) >= 30, what="30 records")
            c.commit()
            positions = {tp: c.position(tp) for tp in c.assignment()}
        first = {(r.partition, r.offset) for r in got}
    assert sum(positions.values()) == len(got)
    with seglog.open(path, NODE_CONFIG) as node:
        with seglog.Consumer(node, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=1000, heartbeat_interval_ms=50) as c:
            assert {tp: c.committed(tp) for tp in positions} == positions
            assert sum(c.lag(tp) for tp in positions) == 60 - len(got)
            c.subscribe(["t"])
            rest = []
            wait_for(lambda: rest.extend(c.poll(0.05)) or len(rest) >= 60 - len(got), what="the rest")
            time.sleep(0.1)
            rest += c.poll(0.1)
        second = {(r.partition, r.offset) for r in rest}
        assert not first & second and len(first | second) == 60 == len(got) + len(rest)


def test_auto_commit_commits_returned_records(node):
    node.create_topic("t", 1)
    produce(node, "t", 20)
    node.group_coordinator                              # created up front (it opens __consumer_offsets)
    tp = ("t", 0)
    with seglog.Consumer(node, group_id="g", auto_offset_reset="earliest", enable_auto_commit=True,
                         auto_commit_interval_ms=500, session_timeout_ms=1000, heartbeat_interval_ms=50) as c:
        c.subscribe(["t"])
        got = []
        wait_for(lambda: got.extend(c.poll(0.05, max_records=5)) or got, what="a first poll")
        assert c.committed(tp) in (None, 0)             # the interval has not passed: nothing returned committed
        c.poll(0, max_records=5)
        assert c.committed(tp) in (None, 0)
        time.sleep(0.6)
        returned = c.position(tp)
        more = c.poll(0, max_records=5)                 # the interval passed: commits what was returned so far
        assert c.committed(tp) == returned == 10
        time.sleep(0.6)
        c.poll(0, max_records=1)
        assert c.committed(tp) == returned + len(more)  # returned, not necessarily processed: at-most-once
        pos = c.position(tp)
    with seglog.Consumer(node, group_id="g", enable_auto_commit=False) as check:
        assert check.committed(tp) == pos == 16         # close() committed the final position


def test_auto_commit_before_a_rebalance_hands_partitions_over_cleanly(node):
    node.create_topic("t", 2)
    produce(node, "t", 40)
    kw = dict(group_id="g", auto_offset_reset="earliest", enable_auto_commit=True, auto_commit_interval_ms=60_000,
              session_timeout_ms=1000, heartbeat_interval_ms=50, partition_assignment_strategy=RANGE)
    seen = Counter()
    lock = threading.Lock()

    def take(records):
        with lock:
            seen.update((r.partition, r.offset) for r in records)
    with seglog.Consumer(node, client_id="a", **kw) as a:
        a.subscribe(["t"])
        wait_for(lambda: take(a.poll(0.05, max_records=5)) or len(seen) >= 10, what="a read some")
        assert a.committed(("t", 0)) is None and a.committed(("t", 1)) is None    # the interval is long
        done = threading.Event()

        def run_b():                                    # b in its own thread: its join waits for a to rejoin
            with seglog.Consumer(node, client_id="b", **kw) as b:
                b.subscribe(["t"])
                while not done.is_set():
                    take(b.poll(0.02))
        tb = threading.Thread(target=run_b)
        tb.start()
        try:
            wait_for(lambda: take(a.poll(0.02, max_records=3)) or len(seen) == 40, what="all read by a and b")
            assert len(a.assignment()) == 1              # a gave one partition to b
        finally:
            done.set()
            tb.join(10)
    assert len(seen) == 40 and set(seen.values()) == {1}, [k for k, v in seen.items() if v > 1]


@pytest.mark.parametrize("reset", ["earliest", "latest", "none"])
def test_auto_offset_reset(node, reset):
    node.create_topic("t", 2)
    produce(node, "t", 10)
    with seglog.Consumer(node, group_id=f"g-{reset}", auto_offset_reset=reset, enable_auto_commit=False) as c:
        c.assign([("t", 0), ("t", 1)])
        if reset == "none":
            with pytest.raises(NoOffsetForPartitionError):
                c.poll(0.1)
            with pytest.raises(NoOffsetForPartitionError):
                c.position(("t", 0))
            c.commit({("t", 0): 2, ("t", 1): 4})       # with a committed offset there is nothing to reset
            assert sorted((r.partition, r.offset) for r in c.poll(0.5)) == [(0, 2), (0, 3), (0, 4), (1, 4)]
            return
        assert (c.position(("t", 0)), c.position(("t", 1))) == ((0, 0) if reset == "earliest" else (5, 5))
        produce(node, "t", 4, start=10)
        got = []
        wait_for(lambda: got.extend(c.poll(0.05)) or len(got) >= (14 if reset == "earliest" else 4), timeout=5,
                 what="records")
        assert sorted(int(r.value) for r in got) == (list(range(14)) if reset == "earliest" else [10, 11, 12, 13])


def test_a_committed_offset_wins_over_the_reset_policy(node):
    node.create_topic("t", 1)
    produce(node, "t", 10)
    with seglog.Consumer(node, group_id="g", enable_auto_commit=False) as c:
        c.assign([("t", 0)])
        c.commit({("t", 0): 7})
    for reset in ("earliest", "latest", "none"):
        with seglog.Consumer(node, group_id="g", auto_offset_reset=reset, enable_auto_commit=False) as c:
            c.assign([("t", 0)])
            assert [r.offset for r in c.poll(0.5)] == [7, 8, 9]


@pytest.mark.parametrize("reset, expected", [("earliest", 0), ("latest", 10), ("none", None)])
def test_position_out_of_range_is_reset(node, reset, expected):
    node.create_topic("t", 1)
    produce(node, "t", 10)
    with seglog.Consumer(node, auto_offset_reset=reset, enable_auto_commit=False) as c:
        c.assign([("t", 0)])
        c.seek(("t", 0), 50)
        if expected is None:
            with pytest.raises(OffsetOutOfRangeError):
                c.poll(0.1)
        else:
            got = c.poll(0.5)
            assert [r.offset for r in got] == list(range(expected, 10))
            assert c.position(("t", 0)) == 10


def test_seek_position_committed_lag_pause(node):
    node.create_topic("t", 2)
    produce(node, "t", 20)                                   # 10 per partition
    tp0, tp1 = ("t", 0), ("t", 1)
    with seglog.Consumer(node, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False) as c:
        c.assign([tp0, tp1])
        assert c.assignment() == {tp0, tp1}
        assert (c.position(tp0), c.committed(tp0), c.lag(tp0)) == (0, None, None)
        got = c.poll(0.5, max_records=3)
        assert len(got) == 3 and len({r.partition for r in got}) == 1
        p = got[0].partition
        assert [r.offset for r in got] == [0, 1, 2] and c.position(("t", p)) == 3
        c.seek(tp0, 8)
        c.seek(tp1, 8)
        assert sorted((r.partition, r.offset) for r in c.poll(0.5, max_records=100)) == [(0, 8), (0, 9), (1, 8), (1, 9)]
        assert c.poll(0.05) == []
        assert c.position(tp0) == 10
        c.seek_to_beginning(tp0)
        assert c.position(tp0) == 0
        c.seek_to_end()
        assert (c.position(tp0), c.position(tp1)) == (10, 10)
        c.seek(tp0, 4)
        c.commit()
        assert (c.committed(tp0), c.committed(tp1)) == (4, 10)
        assert (c.lag(tp0), c.lag(tp1)) == (6, 0)
        produce(node, "t", 2, partitions=[1], start=100)
        assert c.lag(tp1) == 2
        assert c.beginning_offsets([tp0]) == {tp0: 0} and c.end_offsets([tp1]) == {tp1: 12}
        c.pause(tp0)
        assert c.paused() == {tp0}
        assert [(r.partition, r.offset) for r in c.poll(0.2)] == [(1, 10), (1, 11)]
        assert c.poll(0.05) == []
        c.resume(tp0)
        assert [(r.partition, r.offset) for r in c.poll(0.5)] == [(0, o) for o in range(4, 10)]
        with pytest.raises(InvalidArgumentError):
            c.seek(tp0, -1)
        with pytest.raises(InvalidArgumentError):
            c.position(("t", 9))
        with pytest.raises(InvalidArgumentError):
            c.seek(("other", 0), 1)


def test_offsets_for_times(node):
    node.create_topic("t", 1)
    with seglog.Producer(node, linger_ms=0) as prod:
        for i, ts in enumerate([1000, 2000, 3000]):
            prod.send("t", b"%d" % i, partition=0, timestamp=ts)
    with seglog.Consumer(node, enable_auto_commit=False) as c:
        res = c.offsets_for_times({("t", 0): 1500})
        assert tuple(res[("t", 0)])[:2] == (1, 2000)
        assert c.offsets_for_times({("t", 0): 5000})[("t", 0)] is None


# --- pattern subscriptions -----------------------------------------------------------------------------------

def test_pattern_subscription_picks_up_a_new_topic(node, members):
    node.create_topic("pat.a", 2)
    node.create_topic("other", 1)
    produce(node, "pat.a", 10)
    produce(node, "other", 5)
    tracker = Tracker()
    m = Member(node, "p0", "g", None, tracker, RANGE, pattern=r"^pat\.")
    members.append(m)
    wait_for(lambda: len(tracker.delivered_set()) == 10, what="pat.a read")
    node.create_topic("pat.b", 3)
    produce(node, "pat.b", 9)
    wait_settled(node, "g", tracker, {"p0"}, {("pat.a", 0), ("pat.a", 1)} | {("pat.b", p) for p in range(3)},
                 "a matching topic appeared")
    wait_for(lambda: len(tracker.delivered_set()) == 19, timeout=10, what="pat.b read")
    tracker.check_exactly_once(all_offsets(node, "pat.a") | all_offsets(node, "pat.b"))
    assert not {t for _, t, _, _ in tracker.deliveries} & {"other"}


# --- poll timeouts while the group forms ----------------------------------------------------------------------

class _FakeClock:
    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self):
        return self.now


class _OwnCoordinator:
    """A node whose group coordinator is one of the test's own, on a clock the test moves (group.initial.
    rebalance.delay.ms 3000, as Kafka's default), counting the calls each member makes."""

    def __init__(self, node, coord, calls):
        self._node, self._coord, self._calls = node, coord, calls

    def __getattr__(self, name):
        return getattr(self._node, name)

    @property
    def group_coordinator(self):
        outer = self

        class Counting:
            def __getattr__(self, name):
                target = getattr(outer._coord, name)
                if not callable(target):
                    return target

                def call(*args, **kwargs):
                    outer._calls[name] += 1
                    return target(*args, **kwargs)
                return call
        return Counting()


@pytest.fixture
def own_coordinator(node):
    """(clock, coordinator, make_consumer(name, **kw) -> (consumer, Counter of its coordinator calls))."""
    from seglog.group import GroupConfig, GroupCoordinator, InMemoryOffsetStore

    clock = _FakeClock()
    coord = GroupCoordinator(InMemoryOffsetStore(), GroupConfig(initial_rebalance_delay_ms=3000,
                                                                min_session_timeout_ms=100),
                             clock=clock, timer=False)
    made = []

    def make(name, **kw):
        calls = Counter()
        c = seglog.Consumer(_OwnCoordinator(node, coord, calls), group_id="g", client_id=name,
                            enable_auto_commit=False, session_timeout_ms=10_000, heartbeat_interval_ms=50,
                            partition_assignment_strategy=RANGE, **kw)
        made.append(c)
        return c, calls
    yield clock, coord, make
    for c in made:
        c.close()
    coord.close()


def test_poll_returns_within_its_timeout_while_the_group_forms(node, own_coordinator):
    """The first JoinGroup waits group.initial.rebalance.delay.ms (here on a clock that stands still): poll()
    still returns within its timeout, empty, and the next polls go on with the JoinGroup already sent
    instead of sending another; once the delay passed, a poll completes the join."""
    node.create_topic("t", 2)
    produce(node, "t", 4)
    clock, coord, make = own_coordinator
    c, calls = make("a", auto_offset_reset="earliest")
    c.subscribe(["t"])
    started = time.monotonic()
    assert c.poll(0.2) == []
    assert time.monotonic() - started < 30, "poll() waited for the rebalance instead of its timeout"
    for _ in range(3):
        assert c.poll(0) == [] and c.assignment() == set()
    assert (calls["join_group"], calls["sync_group"]) == (1, 0)
    with pytest.raises(RebalanceInProgressError):
        c.commit({("t", 0): 1})                     # not a member yet: nothing to commit as
    clock.now += 3000
    coord.tick()                                    # the delay passed: the join completes
    got = []
    wait_for(lambda: got.extend(c.poll(0.2)) or len(got) == 4, what="the records")
    assert c.assignment() == {("t", 0), ("t", 1)}
    assert (calls["join_group"], calls["sync_group"]) == (1, 1)


def test_a_syncgroup_left_waiting_by_poll_is_answered_in_the_next_poll(node, own_coordinator):
    """A follower's SyncGroup waits for the leader's: the follower's poll returns meanwhile and its next poll
    takes the answer to the SyncGroup already sent (no JoinGroup or SyncGroup twice)."""
    node.create_topic("t", 2)
    clock, coord, make = own_coordinator
    (leader, lcalls), (follower, fcalls) = make("a"), make("b")
    leader.subscribe(["t"])
    follower.subscribe(["t"])
    assert leader.poll(0) == [] and follower.poll(0) == []      # both JoinGroups sent (in this order)
    while coordinator_view(_OwnCoordinator(node, coord, Counter()), "g")[0] == "PreparingRebalance":
        clock.now += 3000                           # each new member during the delay extends it
        coord.tick()
    assert follower.poll(0.1) == []                 # its SyncGroup waits for the leader's
    assert follower.poll(0) == [] and follower.assignment() == set()
    leader.poll(0.1)                                # the leader assigns
    wait_for(lambda: follower.poll(0.05) or follower.assignment(), what="the follower's assignment")
    assert leader.assignment() | follower.assignment() == {("t", 0), ("t", 1)}
    assert len(leader.assignment()) == len(follower.assignment()) == 1
    assert (lcalls["join_group"], lcalls["sync_group"], fcalls["join_group"], fcalls["sync_group"]) == (1, 1, 1, 1)


def test_poll_over_the_network_returns_within_its_timeout_while_the_group_forms(start_broker):
    """Against a broker the JoinGroup is a request that blocks until answered: poll() returns meanwhile (the
    request goes on in a thread of its own) and sends no second one; close() does not wait for it (it holds
    the coordinator's connection) and the member leaves once it is answered."""
    from seglog.remote import RemoteNode

    broker = start_broker(group_initial_rebalance_delay_ms=8_000)
    broker.node.create_topic("t", 1)
    groups = broker.node.group_coordinator
    with RemoteNode(broker.bootstrap_servers, client_id="remote") as rnode:
        coord = rnode.group_coordinator
        joins = []
        real_join = coord.join_group
        coord.join_group = lambda *a, **kw: joins.append(a) or real_join(*a, **kw)
        c = seglog.Consumer(rnode, group_id="g", client_id="remote", session_timeout_ms=60_000,
                            heartbeat_interval_ms=50, enable_auto_commit=False)
        try:
            c.subscribe(["t"])
            started = time.monotonic()
            assert c.poll(0.2) == []
            assert time.monotonic() - started < 6, "poll() waited for the rebalance instead of its timeout"
            wait_for(lambda: c.poll(0.05) == [] and groups.describe_groups(["g"])[0].members,
                     what="the JoinGroup reached the broker")
            assert groups.describe_groups(["g"])[0].state.value == "PreparingRebalance"
            sent = len(joins)                       # two: the first is answered MEMBER_ID_REQUIRED
            for _ in range(3):
                assert c.poll(0.05) == []
            assert len(joins) == sent and sent <= 2
            closing = time.monotonic()
            c.close()
            assert time.monotonic() - closing < 6, "close() waited for the JoinGroup's answer"
            # not a session timeout (60 s): the LeaveGroup followed the JoinGroup's answer
            wait_for(lambda: groups.describe_groups(["g"])[0].state.value == "Empty", timeout=30,
                     what="the member to leave once its JoinGroup was answered")
        finally:
            c.close()


# --- leaving: callbacks, static members -------------------------------------------------------------------------

def test_unsubscribe_and_close_revoke_what_the_member_holds(node):
    """As Kafka's onLeavePrepare: leaving gives the partitions up through on_revoke, while still a member, so
    on_revoke can commit them; a member that fell out gets on_lost instead."""
    node.create_topic("t", 2)
    produce(node, "t", 10)
    parts = [("t", 0), ("t", 1)]
    calls = []
    kw = dict(group_id="g", auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=1000,
              heartbeat_interval_ms=50, partition_assignment_strategy=RANGE)
    c = seglog.Consumer(node, client_id="a", **kw)
    try:
        def on_revoke(tps):
            calls.append(("revoke", tps))
            c.commit()                              # still a member: the commit goes through

        c.subscribe(["t"], on_revoke=on_revoke, on_lost=lambda tps: calls.append(("lost", tps)))
        got = []
        wait_for(lambda: got.extend(c.poll(0.05)) or len(got) == 10, what="a read everything")
        c.unsubscribe()
        assert calls == [("revoke", parts)] and c.assignment() == set()
        assert {tp: om.offset for tp, om in node.group_coordinator.fetch_offsets("g", parts).items()} == {
            ("t", 0): 5, ("t", 1): 5}
        wait_for(lambda: coordinator_view(node, "g")[0] == "Empty", what="a left")   # a dynamic member leaves
        calls.clear()
        c.subscribe(["t"], on_revoke=lambda tps: calls.append(("revoke", tps)),
                    on_lost=lambda tps: calls.append(("lost", tps)))
        wait_for(lambda: c.poll(0.05) or c.assignment() == set(parts), what="a joined again")
    finally:
        c.close()
    assert calls == [("revoke", parts)]
    assert coordinator_view(node, "g")[0] == "Empty"

    calls.clear()
    with seglog.Consumer(node, client_id="z", max_poll_interval_ms=300, **kw) as z:
        z.subscribe(["t"], on_revoke=lambda tps: calls.append(("revoke", tps)),
                    on_lost=lambda tps: calls.append(("lost", tps)))
        wait_for(lambda: z.poll(0.05) or z.assignment() == set(parts), what="z joined")
        wait_for(lambda: coordinator_view(node, "g")[0] == "Empty", what="z fell out")   # z does not poll
    assert calls == [("lost", parts)]


def test_a_static_member_restarting_gets_its_partitions_back_without_a_rebalance(node, members):
    """Since Kafka 2.3 a static member (group_instance_id) sends no LeaveGroup (on close, unsubscribe or a poll
    timeout): the group keeps its partitions for it, and when the same instance id joins again the
    coordinator hands them back without a rebalance: the other members notice nothing."""
    node.create_topic("t", 4)
    parts = {("t", p) for p in range(4)}
    tracker = Tracker()
    other = Member(node, "b", "g", ["t"], tracker, RANGE, session_timeout_ms=10_000, group_instance_id="i-b")
    members.append(other)
    leaves = []
    coord = node.group_coordinator
    real_leave = coord.leave_group

    def counting_leave(group_id, who):
        leaves.append(who)
        return real_leave(group_id, who)
    coord.leave_group = counting_leave
    kw = dict(group_id="g", enable_auto_commit=False, session_timeout_ms=10_000, heartbeat_interval_ms=50,
              partition_assignment_strategy=RANGE, group_instance_id="i-a")
    revoked = []
    try:
        with seglog.Consumer(node, client_id="a", **kw) as a:
            a.subscribe(["t"], on_revoke=revoked.append)
            def shared():
                state, view = coordinator_view(node, "g")
                return state == "Stable" and view == {"a": a.assignment(), "b": parts - a.assignment()} \
                    and len(view["a"]) == 2 and tracker.owned_by().get("b") == view["b"]
            wait_for(lambda: a.poll(0.05) or shared(), what="a and b share the partitions")
            mine = a.assignment()
            generation = a._generation
            revoked.clear()                         # a may have held all four before b joined
        assert revoked == [sorted(mine)]            # close() revoked them locally ...
        assert leaves == []                         # ... but sent no LeaveGroup
        state, view = coordinator_view(node, "g")
        assert state == "Stable" and view["a"] == mine and view["b"] == parts - mine
        b_assigned = other.consumer.assignment()
        with seglog.Consumer(node, client_id="a", **kw) as again:
            again.subscribe(["t"])
            wait_for(lambda: again.poll(0.05) or again.assignment(), what="the restarted a joined")
            assert again.assignment() == mine and again._generation == generation
            assert coordinator_view(node, "g")[1]["b"] == parts - mine
            assert other.consumer.assignment() == b_assigned and not tracker.violations
            again.unsubscribe()                     # no LeaveGroup either
        assert leaves == [] and coordinator_view(node, "g")[0] == "Stable"
    finally:
        coord.leave_group = real_leave


def test_subscribing_assigning_and_patterns_are_exclusive(node):
    node.create_topic("t", 1)
    with seglog.Consumer(node, group_id="g", enable_auto_commit=False) as c:
        c.subscribe(["t"])
        for call in (lambda: c.assign([("t", 0)]), lambda: c.subscribe(pattern="^t$")):
            with pytest.raises(IllegalStateError, match="Subscription to topics, partitions and pattern are "
                                                        "mutually exclusive"):
                call()
        c.subscribe(["t"])                          # the same kind again replaces the subscription
        assert c.subscription() == {"t"} and c.assignment() == set()
        c.unsubscribe()
        c.assign([("t", 0)])
        with pytest.raises(IllegalStateError):
            c.subscribe(["t"])
        assert c.assignment() == {("t", 0)} and c.subscription() == set()
        c.assign([])                                # as Kafka: an empty assignment unsubscribes
        c.subscribe(pattern="^t$")
        with pytest.raises(IllegalStateError):
            c.assign([("t", 0)])
        c.subscribe([])                             # so does an empty subscription
        c.assign([("t", 0)])
        assert c.assignment() == {("t", 0)}


def test_commit_of_unknown_partitions_and_negative_offsets(node):
    """OffsetCommit answers UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist and commits the
    others; the consumer refuses negative offsets before sending anything (as Java's OffsetAndMetadata)."""
    node.create_topic("t", 1)
    with seglog.Consumer(node, group_id="g", enable_auto_commit=False) as c:
        c.assign([("t", 0)])
        with pytest.raises(UnknownTopicOrPartitionError):
            c.commit({("t", 0): 3, ("t", 1): 1, ("missing", 0): 1})
        assert c.committed(("t", 0)) == 3
        with pytest.raises(InvalidArgumentError, match="negative offset"):
            c.commit({("t", 0): -1})
        assert c.committed(("t", 0)) == 3
    committed = node.group_coordinator.fetch_offsets("g")
    assert set(committed) == {("t", 0)}


def test_offset_commit_over_the_wire_answers_per_partition(seglog_broker, topic_name):
    """OffsetCommit through the broker: unknown partitions get UNKNOWN_TOPIC_OR_PARTITION (3) each, the rest is
    committed; with a stale generation the known ones get ILLEGAL_GENERATION (22) and the unknown ones keep 3."""
    from seglog.remote import RemoteNode

    topic, group = topic_name(), topic_name()
    seglog_broker.node.create_topic(topic, 2)
    with RemoteNode(seglog_broker.bootstrap_servers, client_id="wire") as rnode:
        coord = rnode.group_coordinator
        errs = coord.commit_offsets(group, {(topic, 0): 5, (topic, 2): 1, ("no-such-topic", 0): 1})
        assert errs[(topic, 0)] is None
        assert errs[(topic, 2)].code == errs[("no-such-topic", 0)].code == 3
        assert coord.fetch_offsets(group, [(topic, 0), (topic, 2)]) == {
            (topic, 0): coord.fetch_offsets(group, [(topic, 0)])[(topic, 0)], (topic, 2): None}
        assert coord.fetch_offsets(group, [(topic, 0)])[(topic, 0)].offset == 5
        member_group = topic_name()
        with seglog.Consumer(seglog_broker.node, group_id=member_group, enable_auto_commit=False,
                             session_timeout_ms=6000, heartbeat_interval_ms=50) as member:
            member.subscribe([topic])
            wait_for(lambda: member.poll(0.05) or member.assignment(), what="the member joined")
            errs = coord.commit_offsets(member_group, {(topic, 0): 1, ("no-such-topic", 0): 1},
                                        member._generation + 1, member._member_id)
        assert errs[(topic, 0)].code == 22 and errs[("no-such-topic", 0)].code == 3

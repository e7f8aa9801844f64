"""Consumer-group faults with real processes, shared by tests/integration/test_group_recovery.py and
``python -m bench.group_recovery``: a `seglog consume --group` stopped (SIGINT, SIGTERM, SIGKILL) while its
JoinGroup waits, and how long the next member then takes to get records; a faust-streaming word count
(tests/helpers/faust_wordcount.py) killed with SIGKILL and restarted, and how long it takes to catch up.

Every function takes a broker running in this process (``seglog.serve``): group state and committed offsets
are read from its node directly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from cluster_harness import seglog_env, wait_until

import seglog
from seglog.group import GroupState

TIMEOUT = 60
DELAY_MS = 3000               # Kafka's default group.initial.rebalance.delay.ms, which the brokers here use
SESSION_MS = 20_000           # the console consumers' session.timeout.ms: what a vanished member would cost
# The next member's first record after one stopped mid-join: the initial delay, plus a process start, two
# JoinGroups (MEMBER_ID_REQUIRED first), a SyncGroup, an OffsetFetch and a Fetch on a busy 2-core machine.
MID_JOIN_BOUND_S = DELAY_MS / 1000 + 6
# A faust app restarted after kill -9: its group forms again once its dead predecessor's session ended (it
# never left), plus a JoinGroup and SyncGroup; it has caught up after faust's start-up on top (its own
# rebalance work, the table's recovery from its changelog, which grows run after run, and a commit).
FAUST_REJOIN_SLACK_S = 4
FAUST_STARTUP_S = 20


def faust_bounds_s(session_s: float) -> tuple[float, float]:
    """(group Stable again, app caught up) after a restart, in seconds."""
    return session_s + FAUST_REJOIN_SLACK_S, session_s + FAUST_REJOIN_SLACK_S + FAUST_STARTUP_S
FAUST_APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "faust_wordcount.py")


class ConsoleConsumer:
    """`python -m seglog consume --group` in a process of its own; stdout lines are collected with the time
    the first one came."""

    def __init__(self, bootstrap: str, topic: str, group: str, *props: str):
        args = [sys.executable, "-m", "seglog", "consume", "--bootstrap-server", bootstrap, "--topic", topic,
                "--group", group, "--from-beginning", "--consumer-property", f"session.timeout.ms={SESSION_MS}"]
        for p in props:
            args += ["--consumer-property", p]
        self.started = time.monotonic()
        self.first_record: float | None = None
        self.lines: list[str] = []
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=seglog_env())
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in iter(self.proc.stdout.readline, ""):
            if self.first_record is None:
                self.first_record = time.monotonic()
            self.lines.append(line)

    def stop(self, sig: int) -> tuple[int, str]:
        """Send `sig`; (exit status, stderr)."""
        self.proc.send_signal(sig)
        try:
            _, err = self.proc.communicate(timeout=TIMEOUT)
        finally:
            self.proc.kill()
        self._reader.join(TIMEOUT)
        return self.proc.returncode, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=TIMEOUT)


def describe(broker, group: str):
    return broker.node.group_coordinator.describe_groups([group])[0]


def joining(broker, group: str, n: int = 1) -> bool:
    """The group is rebalancing with `n` members (their JoinGroups wait out the initial delay)."""
    d = describe(broker, group)
    return d.state is GroupState.PREPARING_REBALANCE and len(d.members) == n


def produce(broker, topic: str, n: int, partitions: int = 2, *, keyed_words: int = 0, start: int = 0) -> None:
    """`n` records to `topic` (created with `partitions` if missing): "v<i>" round robin, or with
    ``keyed_words`` the words "w<i % keyed_words>" keyed by themselves."""
    node = broker.node
    if topic not in node.topics():
        node.create_topic(topic, partitions)
    with seglog.Producer(node) as p:
        for i in range(start, start + n):
            if keyed_words:
                word = f"w{i % keyed_words}".encode()
                p.send(topic, value=word, key=word)
            else:
                p.send(topic, value=f"v{i}".encode(), partition=i % partitions)


def next_member_timing(broker, topic: str, group: str, stop) -> float:
    """A consumer joins `group` and is stopped by ``stop(consumer)`` while its JoinGroup waits (the broker's
    group.initial.rebalance.delay.ms); another then joins. Seconds the second took from its start to its first
    record (all 10 records of `topic` must come)."""
    produce(broker, topic, 10)
    first = ConsoleConsumer(broker.bootstrap_servers, topic, group)
    try:
        wait_until(lambda: joining(broker, group), TIMEOUT, "the first consumer's JoinGroup", interval=0.05)
        stop(first)
    finally:
        first.kill()
    second = ConsoleConsumer(broker.bootstrap_servers, topic, group)
    try:
        wait_until(lambda: len(second.lines) >= 10, TIMEOUT, "the second consumer's records",
                   details=lambda: str(describe(broker, group)))
        return second.first_record - second.started
    finally:
        second.stop(signal.SIGINT)


class FaustWordCount:
    """The faust word count of tests/helpers/faust_wordcount.py against `broker`, reading the topic `words`
    (2 partitions, created here). ``start()`` / ``kill()`` the worker process; ``lag()`` is what its group
    (``wordcount``) has not committed yet."""

    GROUP, TOPIC = "wordcount", "words"

    def __init__(self, broker, work_dir, session_s: float = 10.0):
        self.broker = broker
        self.work_dir = str(work_dir)
        self.session_s = session_s
        self.proc: subprocess.Popen | None = None
        self.produced = 0
        os.makedirs(self.work_dir, exist_ok=True)
        self._log = open(os.path.join(self.work_dir, "faust.log"), "ab")

    def produce(self, n: int) -> None:
        produce(self.broker, self.TOPIC, n, keyed_words=50, start=self.produced)
        self.produced += n

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, FAUST_APP, self.broker.bootstrap_servers,
                                      os.path.join(self.work_dir, "data"), str(self.session_s)],
                                     stdout=self._log, stderr=self._log, env=seglog_env())

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(TIMEOUT)

    def lag(self) -> int:
        node = self.broker.node
        tps = [(self.TOPIC, p) for p in range(node.topic(self.TOPIC).partitions)]
        committed = node.group_coordinator.fetch_offsets(self.GROUP, tps)
        return sum(node.partition(*tp).high_watermark - (om.offset if om else 0) for tp, om in committed.items())

    def catch_up(self, timeout: float) -> float:
        """Seconds from now until the group committed everything produced (AssertionError after `timeout`)."""
        t0 = time.monotonic()
        wait_until(lambda: self.lag() == 0 or self.proc.poll() is not None, timeout, "the faust app to catch up",
                   details=lambda: f"lag {self.lag()}, {describe(self.broker, self.GROUP)}", interval=0.05)
        assert self.proc.poll() is None, f"the faust worker exited with {self.proc.returncode} (see faust.log)"
        return time.monotonic() - t0

    def restart_after_kill(self, records: int, timeout: float) -> tuple[float, float]:
        """kill -9 the worker, write `records` more, start it again 0.5 s after the kill: seconds from the
        restart until the group is Stable with the new member alone (the broker's part: the killed member's
        session ends first), and until the app caught up (faust's part on top: its rebalance, the table's
        recovery from its changelog, the records, a commit)."""
        before = {m.member_id for m in describe(self.broker, self.GROUP).members}
        self.kill()
        self.produce(records)
        time.sleep(0.5)
        self.start()
        t0 = time.monotonic()

        def formed():
            d = describe(self.broker, self.GROUP)
            return d.state is GroupState.STABLE and len(d.members) == 1 and d.members[0].member_id not in before
        wait_until(formed, timeout, "the group to form again with the restarted app",
                   details=lambda: str(describe(self.broker, self.GROUP)), interval=0.05)
        stable = time.monotonic() - t0
        return stable, stable + self.catch_up(timeout)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(TIMEOUT)
        self._log.close()

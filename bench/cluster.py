"""The replicated cluster (issue 5): acks=all produce throughput on a 3-broker cluster with RF=3 against acks=1
on a single broker with RF=1, measured in the same run, and the time a leader's kill -9 stops acks=all writes.

    python -m bench.cluster [--messages 1000000] [--runs 3] [--failovers 5] [--dir DIR] [--quick]

Every server is a subprocess: ZooKeeper (the Debian package, tickTime 500 ms) and three
``python -m seglog broker --zookeeper ...`` brokers started by tests/cluster_harness.py (the launcher the
cluster fault tests use, with their short timeouts: ZooKeeper session 6 s, replica.lag.time.max.ms 3 s,
replica.fetch.wait.max.ms 200 ms), and a lone ``seglog broker`` (no ZooKeeper) started as bench/broker.py does.
The client is confluent-kafka in this process. Figures:

- produce msg/s (bench.broker.produce_rate: 100-byte values, 6 partitions, linger.ms=5, batch.num.messages=10000,
  no idempotence, from the first produce() to flush() returning), medians of --runs runs, run order alternating:
  acks=1 on the lone broker with RF=1 (the baseline), acks=all on the cluster with RF=3 and
  min.insync.replicas=2, acks=1 on the cluster with RF=3, and acks=1 on the cluster with RF=1 (6 leaders
  spread over 3 brokers, no followers). A fresh topic per run. Server CPU is the sum over the brokers.
- checks that acks=all waits for the followers: after every acks=all run, each follower's log already holds
  every acknowledged record when flush() returns (segment bytes read from disk, compared with the leader's) and
  the ISR did not change during the run (so nothing was acknowledged by a shrunken ISR); and with both followers
  of a partition stopped (SIGSTOP) an acks=all produce is not acknowledged (REQUEST_TIMED_OUT after its 1.5 s
  timeout) while acks=1 is, and acks=all is acknowledged again once they continue.
- failover: an idempotent acks=all confluent-kafka producer (the fault tests' ConfluentBackgroundProducer, at
  most 400 records in flight) writes continuously to a 1-partition RF=3 topic; the partition's current leader is
  killed with SIGKILL; the figure is the time from the kill to the first acknowledged record written by the new
  leader (the first acknowledgement at an offset at or past where the new leader epoch starts in the new
  leader's log). The killed broker is restarted, the ISR is full again and leadership has settled before the next
  kill. Median and max of --failovers kills, against ZooKeeper session timeout + 2 s (the timeout the brokers were
  configured with; ZooKeeper's negotiated value is shown as well).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import sys
import tempfile
import time

from bench import broker as single

TESTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
if TESTS_DIR not in sys.path:
    sys.path.append(TESTS_DIR)
import cluster_harness as harness  # noqa: E402 - the cluster launcher of tests/ (not a package)

TITLE = "Replicated cluster: acks=all throughput and leader failover (issue 5)"
LIBRARIES = ["confluent-kafka", "kazoo", "kafka-python"]

PARTITIONS = 6
THROUGHPUT_TARGET = 0.5                # acks=all RF=3 / acks=1 RF=1
FAILOVER_SLACK_S = 2.0                 # target: session timeout + 2 s
MIN_ISR = 2


class ClientCpu:
    """A bench.broker server (bootstrap, create_topic, cpu) that also notes this process's CPU time whenever
    produce_rate reads the server's: at the start and at the end of its timed part."""

    def __init__(self, server):
        self.server, self.bootstrap, self.marks = server, server.bootstrap, []

    def create_topic(self, topic: str, partitions: int) -> None:
        self.server.create_topic(topic, partitions)

    def cpu(self) -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        self.marks.append(r.ru_utime + r.ru_stime)
        return self.server.cpu()

    def produce_rate(self, topic: str, acks: str, n: int) -> tuple[float, float, float]:
        """(msg/s, server CPU cores, client CPU seconds per message) of bench.broker.produce_rate."""
        rate, cores = single.produce_rate(self, topic, PARTITIONS, acks, n)
        return rate, cores, (self.marks[-1] - self.marks[-2]) / n


class ClusterTarget:
    """bench.broker's server surface (bootstrap, create_topic, cpu) over a harness Cluster, for topics of one
    replication factor."""

    def __init__(self, cluster: harness.Cluster, rf: int):
        self.cluster, self.rf = cluster, rf
        self.bootstrap = cluster.bootstrap
        self.versions: dict[int, int] = {}             # partition state versions once the topic was created

    def create_topic(self, topic: str, partitions: int) -> None:
        self.cluster.create_topic(topic, partitions, rf=self.rf, configs={"min.insync.replicas": min(MIN_ISR, self.rf)},
                                  timeout=60)
        self.versions = {p: self.cluster.state(topic, p)["version"] for p in range(partitions)}

    def cpu(self) -> float:
        return sum(single._cpu_seconds(b.pid) for b in self.cluster.brokers.values() if b.alive)


def _log_bytes(directory) -> int:
    """Bytes in a partition directory's .log segments (replicas hold the same batches byte for byte)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return 0
    return sum(os.stat(os.path.join(directory, n)).st_size for n in names if n.endswith(".log"))


def replication_snapshot(cluster: harness.Cluster, topic: str, partitions: int) -> dict:
    """{partition: (leader, ISR, state version, {replica: .log bytes})}, followers read before the leader."""
    out = {}
    for p in range(partitions):
        st = cluster.state(topic, p)
        replicas = cluster.assignment(topic)[p]
        order = [r for r in replicas if r != st["leader"]] + [st["leader"]]
        sizes = {r: _log_bytes(cluster.brokers[r].partition_dir(topic, p)) for r in order}
        out[p] = (st["leader"], tuple(st["isr"]), st["version"], sizes)
    return out


def produce_on_cluster(cluster: harness.Cluster, rf: int, acks: str, n: int, topic: str) -> tuple[float, float,
                                                                                                 float, dict]:
    """(msg/s, broker CPU cores, client CPU s per message, check) of one bench.broker.produce_rate run on a new
    topic of the cluster. check: bytes acknowledged but missing from a follower when flush() returned, and the
    partitions whose ISR changed."""
    target = ClusterTarget(cluster, rf)
    rate, cpu, client = ClientCpu(target).produce_rate(topic, acks, n)
    snap = replication_snapshot(cluster, topic, PARTITIONS)
    missing = sum(max(0, sizes[leader] - sizes[r]) for leader, _isr, _v, sizes in snap.values() for r in sizes)
    changed = [p for p, (_l, isr, v, _s) in snap.items() if v != target.versions[p] or len(isr) != rf]
    return rate, cpu, client, {"missing_bytes": missing, "isr_changed": changed}


def followers_stopped_check(cluster: harness.Cluster, topic: str) -> dict:
    """Stop (SIGSTOP) both followers of partition 0 and send one produce of 10 records straight to its leader with
    acks=all (1.5 s timeout), then with acks=1; continue the followers and send acks=all again.
    {case: (error code, seconds)}."""
    cluster.create_topic(topic, 1, rf=3, configs={"min.insync.replicas": MIN_ISR}, timeout=60)
    st = cluster.state(topic, 0)
    leader = cluster.brokers[st["leader"]]
    followers = [cluster.brokers[r] for r in cluster.assignment(topic)[0] if r != st["leader"]]
    values = [single.VALUE] * 10
    out = {}

    def send(case, acks):
        t = time.perf_counter()
        code, _base = harness.raw_produce(harness.HOST, leader.port, topic, 0, values, acks=acks, timeout_ms=1500)
        out[case] = (code, time.perf_counter() - t)

    send("warm-up", -1)                     # connection, followers' first fetches of the new topic
    send("acks=all, followers running", -1)
    del out["warm-up"]
    for f in followers:
        f.pause()
    try:
        send("acks=all, both followers stopped", -1)
        send("acks=1, both followers stopped", 1)
    finally:
        for f in followers:
            f.resume()
    send("acks=all, followers continued", -1)
    return out


# -- failover ---------------------------------------------------------------------------------------------------

def granted_session_timeouts(zk_port: int, cluster: harness.Cluster) -> list[int]:
    """The session timeouts ZooKeeper granted (its `cons` command) to every session but the harness's own
    reader: the brokers'."""
    from seglog.cluster.zookeeper_server import four_letter_word
    own = cluster.zk.client_id[0]
    out = set()
    for line in four_letter_word(zk_port, "cons").splitlines():
        sid, to = re.search(r"\bsid=(0x[0-9a-f]+)", line), re.search(r"\bto=(\d+)", line)
        if sid and to and int(sid.group(1), 16) != own:
            out.add(int(to.group(1)))
    return sorted(out)


def _epoch_start(cluster: harness.Cluster, broker_id: int, topic: str, after_epoch: int) -> list[int] | None:
    """[the offset where the first leader epoch above `after_epoch` starts in the broker's log], from its
    leader-epoch-checkpoint (written when the broker becomes leader); None before that."""
    from seglog.checkpoints import read_checkpoint
    from seglog.leader_epochs import FILE_NAME
    rows = read_checkpoint(str(cluster.brokers[broker_id].partition_dir(topic, 0) / FILE_NAME), 2) or []
    return next(([int(o)] for e, o in rows if int(e) > after_epoch), None)


def settle(cluster: harness.Cluster, topic: str, timeout: float = 60.0) -> dict:
    """Full ISR, and leadership back on the preferred replica (auto.leader.rebalance moves it there within
    leader.imbalance.check.interval.seconds once it is in sync); returns the partition state."""
    cluster.wait_full_isr(topic, [0], timeout=timeout)
    preferred = cluster.assignment(topic)[0][0]
    interval = float(cluster.overrides.get("leader.imbalance.check.interval.seconds", 300))
    try:
        harness.wait_until(lambda: cluster.leader(topic, 0) == preferred, 3 * interval + 5,
                           "leadership back on the preferred replica")
    except AssertionError:
        pass                                   # settled elsewhere: kill whoever leads
    time.sleep(0.5)
    return cluster.wait_leader(topic, 0)


def failover_once(cluster: harness.Cluster, producer, topic: str, session_s: float, say=print) -> dict:
    """Kill -9 the current leader while `producer` writes; seconds from the kill to the victim's ZooKeeper
    session expiring (its /brokers/ids node gone), to a new leader in the partition state, and to the first
    acknowledgement of a record the new leader wrote. The victim is restarted afterwards."""
    st = settle(cluster, topic)
    victim, epoch = st["leader"], st["leader_epoch"]
    producer.wait_acked(200, 60, details=cluster.describe)          # writing steadily before the kill
    with producer._lock:
        seen = len(producer.acked[0])                               # acknowledged by the old leader
    t0 = time.monotonic()
    cluster.brokers[victim].kill()                                  # SIGKILL, then reaps it
    deadline = t0 + session_s + 60
    expired = elected = None
    new: dict = {}
    while elected is None:                                          # ZooKeeper polled every 20 ms
        now = time.monotonic()
        if now > deadline:
            raise AssertionError(f"no new leader of {topic}-0 within {now - t0:.0f} s\n{cluster.describe()}")
        if expired is None and victim not in cluster.live_ids():
            expired = now
        s = cluster.state(topic, 0)
        if s and s["leader"] not in (victim, -1) and s["leader_epoch"] > epoch:
            elected, new = now, s
            expired = expired or now
        time.sleep(0.02)
    start, = harness.wait_until(lambda: _epoch_start(cluster, new["leader"], topic, epoch), 60,
                                "the new leader's epoch in its log", interval=0.02, details=cluster.describe)

    def first_ack():                      # acknowledgements arrive in offset order: look at the new ones only
        nonlocal seen
        with producer._lock:
            fresh = producer.acked[0][seen:]
        seen += len(fresh)
        return next((t for _seq, off, t in fresh if off >= start), None)
    t_ack = harness.wait_until(first_ack, 60, "an acknowledgement from the new leader", interval=0.02,
                               details=cluster.describe)
    out = {"seconds": t_ack - t0, "expired": expired - t0, "elected": elected - t0, "victim": victim,
           "new_leader": new["leader"], "epoch": new["leader_epoch"]}
    say(f"    killed broker {victim} (leader, epoch {epoch}): session expired after {out['expired']:.2f} s, broker "
        f"{new['leader']} leads epoch {new['leader_epoch']} (from offset {start}) after {out['elected']:.2f} s, first "
        f"acks=all acknowledgement of its writes after {out['seconds']:.2f} s")
    cluster.brokers[victim].start()
    return out


# -- the table --------------------------------------------------------------------------------------------------

def _fmt_rate(r: float) -> str:
    return f"{r / 1e6:.2f} M msg/s" if r >= 1e6 else f"{r / 1e3:.0f} k msg/s"


def _spread(values: list[float]) -> str:
    return f" ({min(values) / 1e3:.0f}-{max(values) / 1e3:.0f} k)" if len(values) > 1 else ""


def measure(root: str, n: int, runs: int, failovers: int, say=print) -> tuple[list[dict], list[str]]:
    """(table rows, notes)."""
    rows: list[dict] = []
    notes: list[str] = []

    def row(figure, value, baseline="", ratio="", target="", met=""):
        rows.append({"figure": figure, "measured": value, "baseline": baseline, "ratio": ratio, "target": target,
                     "met": met})
        if met and not figure.startswith(" "):     # a verdict on a target; indented rows detail the row above
            rows[-1]["summary"] = {"figure": figure, "target": target, "met": met,
                                   "measured": value + (f"; {ratio} of the baseline" if ratio else "")}
        say(f"  {figure:<66} {value:>28} {baseline:>13} {ratio:>6}  {target} {met}")

    load_start = os.getloadavg()[0]
    seq = iter(range(10**6))
    zk = harness.start_zookeeper(os.path.join(root, "zookeeper"))
    lone = cluster = None
    try:
        cluster = harness.Cluster(zk.connect_string, os.path.join(root, "cluster"), 3).start()
        lone = single.SeglogServer(os.path.join(root, "lone"))
        session_ms = int(cluster.overrides["zookeeper.session.timeout.ms"])

        # -- throughput ---------------------------------------------------------------------------------------
        cases = [("lone", "1", 1), ("cluster", "all", 3), ("cluster", "1", 3), ("cluster", "1", 1)]
        labels = {cases[0]: "acks=1, RF=1, one broker (no ZooKeeper): baseline",
                  cases[1]: f"acks=all, RF=3, min.insync.replicas={MIN_ISR}, 3 brokers",
                  cases[2]: "acks=1, RF=3, 3 brokers",
                  cases[3]: "acks=1, RF=1, 3 brokers (2 leaders each)"}
        rates = {c: [] for c in cases}
        broker_us = {c: [] for c in cases}            # broker CPU per message (all brokers)
        client_us = {c: [] for c in cases}            # this process's CPU per message
        checks = {c: [] for c in cases}
        for r in range(runs):
            for case in (cases if r % 2 == 0 else cases[::-1]):   # alternate who goes first
                where, acks, rf = case
                topic = f"tput-{next(seq)}"
                if where == "lone":
                    rate, cores, client = ClientCpu(lone).produce_rate(topic, acks, n)
                else:
                    rate, cores, client, check = produce_on_cluster(cluster, rf, acks, n, topic)
                    checks[case].append(check)
                rates[case].append(rate)
                broker_us[case].append(cores / rate * 1e6)
                client_us[case].append(client * 1e6)
                say(f"    run {r + 1}: {labels[case]}: {_fmt_rate(rate)}, {cores:.2f} broker cores"
                    + (f", {checks[case][-1]}" if where == "cluster" else ""))
        base = statistics.median(rates[cases[0]])
        for case in cases:
            med = statistics.median(rates[case])
            target = case == cases[1]
            row(f"produce, {PARTITIONS} partitions, {labels[case]}", _fmt_rate(med) + _spread(rates[case]),
                "" if case == cases[0] else _fmt_rate(base), "" if case == cases[0] else f"{med / base:.2f}x",
                f">= {THROUGHPUT_TARGET}x" if target else "",
                ("yes" if med >= THROUGHPUT_TARGET * base else "NO") if target else "")
        row("  acks=all RF=3 / baseline in each run (the two measured back to back)",
            ", ".join(f"{a / b:.2f}x" for a, b in zip(rates[cases[1]], rates[cases[0]])))
        row("  CPU per message, brokers (sum) + client, in the order of the rows above",
            " / ".join(f"{statistics.median(broker_us[c]):.2f} + {statistics.median(client_us[c]):.2f}"
                       for c in cases) + " us")
        all_checks = checks[cases[1]]
        missing = max(c["missing_bytes"] for c in all_checks)
        changed = sum(len(c["isr_changed"]) for c in all_checks)
        row("  acks=all: bytes acknowledged but not on every follower at flush() (max of runs)", f"{missing} B", "",
            "", "0", "yes" if missing == 0 else "NO")
        row("  acks=all: partitions whose ISR changed during a run (sum of runs)", str(changed), "", "", "0",
            "yes" if changed == 0 else "NO")
        row("  acks=1, RF=3: bytes not yet on every follower at flush() (each run)",
            ", ".join(f"{c['missing_bytes']:,} B" for c in checks[cases[2]]))
        stopped = followers_stopped_check(cluster, f"waits-{next(seq)}")
        for case, (code, secs) in stopped.items():
            expect = 7 if case == "acks=all, both followers stopped" else 0
            name = "REQUEST_TIMED_OUT" if code == 7 else ("acknowledged" if code == 0 else f"error {code}")
            row(f"  10 records straight to the leader, {case}", f"{name} in {secs * 1000:.0f} ms", "", "",
                "REQUEST_TIMED_OUT" if expect else "acknowledged", "yes" if code == expect else "NO")

        # -- failover ------------------------------------------------------------------------------------------
        topic = f"failover-{next(seq)}"
        cluster.create_topic(topic, 1, rf=3, configs={"min.insync.replicas": MIN_ISR}, timeout=60)
        producer = harness.ConfluentBackgroundProducer(cluster.bootstrap, topic, [0], tag=b"f",
                                                       max_pending=400).start()
        granted = granted_session_timeouts(zk.port, cluster)
        results = []
        try:
            for _ in range(failovers):
                results.append(failover_once(cluster, producer, topic, session_ms / 1000, say))
            settle(cluster, topic)
            producer.wait_acked(200, 60, details=cluster.describe)
        finally:
            producer.stop()
        secs = [x["seconds"] for x in results]
        target_s = session_ms / 1000 + FAILOVER_SLACK_S
        med, worst = statistics.median(secs), max(secs)
        row(f"failover: kill -9 of the leader to the first acks=all ack of the new leader's writes, median of "
            f"{failovers}", f"{med:.2f} s", "", "", f"<= {target_s:.1f} s", "yes" if med <= target_s else "NO")
        row("  max", f"{worst:.2f} s", "", "", f"<= {target_s:.1f} s", "yes" if worst <= target_s else "NO")
        row("  every kill", ", ".join(f"{x:.2f}" for x in secs) + " s")
        row("  kill -> session expired -> new leader in ZooKeeper -> first ack (medians, from the kill)",
            " -> ".join(f"{statistics.median(x[k] for x in results):.2f}" for k in ("expired", "elected", "seconds"))
            + " s")
        row("  new leader in ZooKeeper -> first ack (each kill)",
            ", ".join(f"{x['seconds'] - x['elected']:.2f}" for x in results) + " s")
        row("  ZooKeeper session timeout: brokers' zookeeper.session.timeout.ms / granted by ZooKeeper",
            f"{session_ms} ms / " + (", ".join(f"{g} ms" for g in granted) or "-"))
        row("  records acknowledged / failed by the failover producer",
            f"{producer.acked_count():,} / {len(producer.failed)}", "", "", "0 failed",
            "yes" if not producer.failed else "NO")
        row("machine load average (1 min) at start / end", f"{load_start:.1f} / {os.getloadavg()[0]:.1f}", "", "",
            f"{os.cpu_count()} cores")
        notes.append(f"ZooKeeper {_zookeeper_version(zk.port)}, tickTime {zk.tick_time_ms} ms; the brokers run with "
                     f"zookeeper.session.timeout.ms={session_ms} (ZooKeeper granted "
                     f"{', '.join(map(str, granted)) or '?'} ms), so the failover target is {target_s:.1f} s. Other "
                     "broker settings: " + ", ".join(f"{k}={v}" for k, v in cluster.overrides.items()
                                                     if k.startswith(("replica.", "leader.", "min.insync"))) + ".")
    finally:
        if lone is not None:
            lone.close()
        if cluster is not None:
            cluster.close()
        zk.stop()
    return rows, notes


def _zookeeper_version(port: int) -> str:
    from seglog.cluster.zookeeper_server import four_letter_word
    m = re.search(r"version: ([^,\s-]+)", four_letter_word(port, "srvr"))
    return m.group(1) if m else "(version unknown)"


def run(ctx) -> list[dict]:
    """bench.suite section."""
    from bench import suite
    from seglog.cluster.zookeeper_server import find_installation
    suite.require("kazoo", "kafka", "confluent_kafka", hint="pip install kazoo kafka-python confluent-kafka")
    if find_installation() is None:
        raise suite.Skip("needs the Debian ZooKeeper package and java (apt-get install zookeeper)")
    n = 100_000 if ctx.quick else 1_000_000
    runs = 1 if ctx.quick else ctx.runs
    failovers = 1 if ctx.quick else 5
    ctx.note(f"confluent-kafka {single._client_version()}; ZooKeeper + 3 `seglog broker --zookeeper` processes "
             f"(tests/cluster_harness.py) and a lone `seglog broker`; {n:,} messages of 100 B per produce figure, "
             f"medians of {runs} runs; {failovers} leader kills. Also `python -m bench.cluster`.")
    rows, notes = measure(ctx.dir, n, runs, failovers, say=lambda s: print(s, flush=True))
    for text in notes:
        ctx.note(text)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--failovers", type=int, default=5)
    p.add_argument("--dir", default=None)
    p.add_argument("--quick", action="store_true", help="100,000 messages, 1 run, 1 failover")
    a = p.parse_args(argv)
    if a.quick:
        a.messages, a.runs, a.failovers = 100_000, 1, 1
    root = a.dir or tempfile.mkdtemp(prefix="seglog-bench-cluster-")
    os.makedirs(root, exist_ok=True)
    print(f"seglog cluster benchmark: confluent-kafka {single._client_version()}, {a.messages:,} messages of 100 B, "
          f"median of {a.runs} runs, {a.failovers} failovers, in {root}", flush=True)
    try:
        rows, notes = measure(root, a.messages, a.runs, a.failovers)
    finally:
        if not a.dir:
            shutil.rmtree(root, ignore_errors=True)
    print()
    for text in notes:
        print(text)
    print()
    print(single.markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

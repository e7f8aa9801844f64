"""Trust under faults (issue 12): how long acks=all writes stop when a leader is killed and restarted, killed
for good, or when every broker is restarted in turn.

    python -m bench.failover [--restarts 10] [--kills 3] [--rolling 1] [--no-controlled-shutdown] [--dir DIR] [--quick]

ZooKeeper (tickTime 500 ms) and three ``python -m seglog broker --zookeeper ...`` processes are started by
tests/cluster_harness.py with the fault tests' settings (zookeeper.session.timeout.ms=6000,
replica.lag.time.max.ms=3000, leader.imbalance.check.interval.seconds=2). One idempotent acks=all confluent-kafka
producer (the fault tests' ConfluentBackgroundProducer: enable.idempotence, message.timeout.ms=60000, 1,000
records/s) writes to a 1-partition topic with RF=3 and min.insync.replicas=2 through all of it. Figures:

- kill -9 + restart: the partition's leader is killed with SIGKILL and started again 0.5 s later (same id,
  port and data dir); seconds from the kill to the next acknowledgement. Median and worst of --restarts
  (target: median <= 3 s). Before each kill the ISR is full and leadership is back on the preferred replica.
- kill -9, no restart: the leader is killed and stays down until a new leader acknowledged a write; seconds
  from the kill to the next acknowledgement (target: <= session timeout + 2 s).
- rolling restart: each broker in turn is stopped with SIGTERM (controlled shutdown moves its leadership
  first), started again, and the ISR is full before the next; the longest gap between two consecutive
  acknowledgements over the whole restart (target: < 1 s).
- every run: the deliveries that failed (target: none), and at the end every acknowledged record read back
  exactly once (kafka-python, from the first offset to the high watermark).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

TESTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
if TESTS_DIR not in sys.path:
    sys.path.append(TESTS_DIR)
import cluster_harness as harness  # noqa: E402 - the cluster launcher of tests/ (not a package)

from bench.cluster import _epoch_start  # noqa: E402 - where a leader epoch starts in a broker's log

TOPIC = "failover"
RESTART_DELAY_S = 0.5
RESTART_TARGET_S = 3.0
SLACK_S = 2.0
GAP_TARGET_S = 1.0
RATE = 1000


def settle(cluster: harness.Cluster, timeout: float = 60.0) -> dict:
    """Every broker up, the ISR full and leadership on the preferred replica; returns the partition state."""
    cluster.wait_full_isr(TOPIC, [0], timeout=timeout)
    preferred = cluster.assignment(TOPIC)[0][0]
    interval = float(cluster.overrides.get("leader.imbalance.check.interval.seconds", 300))
    harness.wait_until(lambda: cluster.leader(TOPIC, 0) == preferred, 3 * interval + 10,
                       "leadership back on the preferred replica", details=cluster.describe)
    return cluster.wait_leader(TOPIC, 0)


def ack_times(producer) -> list[float]:
    with producer._lock:
        return sorted(t for _seq, _off, t in producer.acked[0])


def kill_once(cluster: harness.Cluster, producer, restart: bool, session_s: float) -> dict:
    """Kill the leader (and restart it after RESTART_DELAY_S); seconds from the kill to the first
    acknowledgement at an offset written by a later leader epoch (at or past where the next epoch starts in
    the new leader's log: an acknowledgement of the old leader's arriving late does not count)."""
    st = settle(cluster)
    producer.wait_acked(200, 60, details=cluster.describe)
    victim, epoch = cluster.brokers[st["leader"]], st["leader_epoch"]
    t0 = time.monotonic()
    victim.kill()
    if restart:
        time.sleep(max(0.0, t0 + RESTART_DELAY_S - time.monotonic()))
        victim.spawn()
    def elected():
        s = cluster.state(TOPIC, 0)
        return s if s and s["leader_epoch"] > epoch and s["leader"] >= 0 else None
    new = harness.wait_until(elected, session_s + 60, "a new leader epoch", interval=0.01, details=cluster.describe)
    start, = harness.wait_until(lambda: _epoch_start(cluster, new["leader"], TOPIC, epoch), 60,
                                "the new leader's epoch in its log", interval=0.01, details=cluster.describe)

    def first_ack():
        with producer._lock:
            return min((t for _seq, off, t in producer.acked[0] if off >= start), default=None)
    t_ack = harness.wait_until(first_ack, 60, "an acknowledgement from the new leader epoch", interval=0.01,
                               details=cluster.describe)
    if restart:
        victim.wait_started()
    else:
        victim.start()
    return {"victim": victim.id, "seconds": t_ack - t0, "failed": len(producer.failed)}


def rolling_restart(cluster: harness.Cluster, producer) -> dict:
    settle(cluster)
    producer.wait_acked(200, 60, details=cluster.describe)
    t0 = time.monotonic()
    for b in cluster.brokers.values():
        b.stop()
        b.start()
        cluster.wait_full_isr(TOPIC, [0], timeout=60)
        producer.wait_acked(200, 60, details=cluster.describe)
    t1 = time.monotonic()
    times = [t for t in ack_times(producer) if t0 <= t <= t1]
    gaps = [b - a for a, b in zip(times, times[1:])]
    return {"max_gap": max(gaps), "seconds": t1 - t0, "acked": len(times), "failed": len(producer.failed)}


def measure(root: str, restarts: int, kills: int, rolling: int, say=print, overrides: dict | None = None) -> list[dict]:
    zk = harness.start_zookeeper(os.path.join(root, "zookeeper"))
    cluster = producer = None
    try:
        cluster = harness.Cluster(zk.connect_string, os.path.join(root, "cluster"), 3, overrides).start()
        session_s = int(cluster.overrides["zookeeper.session.timeout.ms"]) / 1000
        cluster.create_topic(TOPIC, 1, 3, {"min.insync.replicas": 2})
        producer = harness.ConfluentBackgroundProducer(cluster.bootstrap, TOPIC, [0], tag=b"f", rate=RATE,
                                                       max_pending=400, **{"message.timeout.ms": 60000}).start()
        results: dict[str, list[dict]] = {"restart": [], "kill": [], "rolling": []}
        for i in range(restarts):
            r = kill_once(cluster, producer, True, session_s)
            results["restart"].append(r)
            say(f"  kill -9 + restart {i + 1}: broker {r['victim']}, next ack after {r['seconds']:.2f} s, "
                f"{r['failed']} failed so far")
        for i in range(kills):
            r = kill_once(cluster, producer, False, session_s)
            results["kill"].append(r)
            say(f"  kill -9, no restart {i + 1}: broker {r['victim']}, next ack after {r['seconds']:.2f} s, "
                f"{r['failed']} failed so far")
        for i in range(rolling):
            r = rolling_restart(cluster, producer)
            results["rolling"].append(r)
            say(f"  rolling restart {i + 1}: {r['seconds']:.1f} s, {r['acked']} acks, longest gap "
                f"{r['max_gap']:.3f} s, {r['failed']} failed so far")
        producer.stop()
        consumed = harness.consume_all(cluster.bootstrap, TOPIC, [0])[0]
        values = [v for _, _, v in consumed]
        acked = {producer.value(0, seq) for seq, _, _ in producer.acked[0]}
        lost = len(acked - set(values))
        duplicated = len(values) - len(set(values))
    finally:
        if producer is not None:
            producer.close()
        if cluster is not None:
            cluster.close()
        zk.stop()

    rows = []

    def row(figure, measured, target="", met=""):
        rows.append({"figure": figure, "measured": measured, "target": target, "met": met})

    if results["restart"]:
        s = [r["seconds"] for r in results["restart"]]
        med = statistics.median(s)
        row(f"kill -9 + restart after {RESTART_DELAY_S} s: kill to next acks=all ack, median of {len(s)}",
            f"{med:.2f} s (worst {max(s):.2f} s)", f"<= {RESTART_TARGET_S:.0f} s",
            "yes" if med <= RESTART_TARGET_S else "no")
    if results["kill"]:
        s = [r["seconds"] for r in results["kill"]]
        row(f"kill -9, no restart: kill to next acks=all ack, worst of {len(s)}",
            f"{max(s):.2f} s (median {statistics.median(s):.2f} s)", f"<= {session_s + SLACK_S:.0f} s",
            "yes" if max(s) <= session_s + SLACK_S else "no")
    if results["rolling"]:
        g = max(r["max_gap"] for r in results["rolling"])
        how = "" if (overrides or {}).get("controlled.shutdown.enable", True) else ", controlled.shutdown.enable=false"
        row(f"rolling restart (SIGTERM{how}) of 3 brokers: longest gap between acks, worst of {len(results['rolling'])}",
            f"{g:.3f} s", f"< {GAP_TARGET_S:.0f} s", "yes" if g < GAP_TARGET_S else "no")
    failed = len(producer.failed)
    row("deliveries failed / acknowledged records lost / duplicated",
        f"{failed} / {lost} / {duplicated} (of {len(acked)} acknowledged)", "0 / 0 / 0",
        "yes" if failed == lost == duplicated == 0 else "no")
    return rows


def markdown(rows: list[dict]) -> str:
    lines = ["| figure | measured | target | met |", "|---|---|---|---|"]
    lines += [f"| {r['figure']} | {r['measured']} | {r['target']} | {r['met']} |" for r in rows]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--restarts", type=int, default=10, help="kill -9 + restart runs (default 10)")
    p.add_argument("--kills", type=int, default=3, help="kill -9 runs without restart (default 3)")
    p.add_argument("--rolling", type=int, default=1, help="rolling restarts of the 3 brokers (default 1)")
    p.add_argument("--no-controlled-shutdown", action="store_true",
                   help="brokers with controlled.shutdown.enable=false (for comparison)")
    p.add_argument("--dir", default=None)
    p.add_argument("--quick", action="store_true", help="3 restarts, 1 kill, 1 rolling restart")
    a = p.parse_args(argv)
    if a.quick:
        a.restarts, a.kills, a.rolling = 3, 1, 1
    root = a.dir or tempfile.mkdtemp(prefix="seglog-bench-failover-")
    os.makedirs(root, exist_ok=True)
    print(f"seglog failover benchmark: {a.restarts} kill -9 + restarts, {a.kills} kills, {a.rolling} rolling "
          f"restarts, in {root}", flush=True)
    try:
        rows = measure(root, a.restarts, a.kills, a.rolling, say=lambda s: print(s, flush=True),
                       overrides={"controlled.shutdown.enable": False} if a.no_controlled_shutdown else None)
    finally:
        if not a.dir:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print(markdown(rows))
    return 0 if all(r["met"] in ("", "yes") for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

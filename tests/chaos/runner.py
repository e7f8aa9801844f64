"""One chaos run: ZooKeeper + 3 brokers (started here), the workload, a seeded schedule of faults, the final
state, the check.

``run(work_dir, seed=..., faults=...)`` returns the checker's Report and leaves in ``work_dir``:
``history.jsonl`` (every event), ``report.json`` (violations, per-fault windows, worst per kind), the brokers'
logs (``cluster/broker-N.log``), ZooKeeper's (``zookeeper/zookeeper.log``) and the clients' (``clients.log``);
with ``keep_data``, when the checker finds a violation, the brokers' data dirs as they were when the brokers were
killed at the end (``data/d<id>``, copied before their tmpfs mounts go).

The schedule: the first ``len(kinds)`` faults are every kind once in a seeded order (a short run covers them
all), then kinds are drawn at random. After each fault the runner waits for the cluster to recover (every broker
running and registered, every partition of the workload topic and of ``__consumer_offsets`` with a live leader
and its full ISR, an acknowledgement on every partition and a read by every group since the fault ended),
starting any broker it finds dead; a cluster still unhealthy after ``recover_timeout`` s is recorded
(``recovered`` ok=false) and repaired (``Run.repair``).
At the end the producers stop (every pending send resolves), the groups catch up with the log's end, each
partition is read from the start with kafka-python (``final``) and its replicas compared byte for byte
(``replicas``).
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import time
from pathlib import Path

from cluster_harness import OFFSETS_TOPIC, Cluster, consume_all, start_zookeeper

from . import checker
from .history import History
from .nemesis import KINDS, Nemesis
from .workload import GroupMember, RecordingProducer, TxnReader, TxnWriter, client_logger

TXN_STATE_TOPIC = "__transaction_state"


class Run:
    def __init__(self, work_dir, *, seed: int, faults: int, kinds=KINDS, producers: int = 3, rate: float = 50.0,
                 groups: int = 2, members: int = 2, partitions: int = 3, txn_writers: int = 1,
                 max_minutes: float | None = None, keep_data: bool = False, client_debug: str | None = None,
                 recover_timeout: float = 90.0, tmpfs_size: str = "512m", out=sys.stdout):
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.seed, self.faults, self.kinds = seed, faults, list(kinds)
        self.n_producers, self.rate, self.n_groups, self.n_members = producers, rate, groups, members
        self.topic, self.txn_topic, self.partitions = "chaos", "chaos-txn", list(range(partitions))
        self.n_txn_writers = txn_writers
        self.max_minutes, self.recover_timeout, self.tmpfs_size = max_minutes, recover_timeout, tmpfs_size
        self.keep_data, self.client_debug = keep_data, client_debug
        self.out = out
        self.rng = random.Random(seed)
        self.history = History(self.work_dir / "history.jsonl")
        self.client_log = client_logger(self.work_dir / "clients.log", debug=bool(client_debug))
        self.zookeeper = None
        self.cluster: Cluster | None = None
        self.producers: list[RecordingProducer] = []
        self.members: list[GroupMember] = []
        self.txn_writers: list[TxnWriter] = []
        self.txn_generations: dict[int, int] = {}       # writer index -> generation of its current TxnWriter
        self.txn_readers: list[TxnReader] = []
        self.generation = 0
        self.notes: list[str] = []
        self.faults_run = 0

    def log(self, text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} [{self.history.now():8.1f}] {text}", file=self.out, flush=True)

    @property
    def session_s(self) -> float:
        return int(self.cluster.overrides["zookeeper.session.timeout.ms"]) / 1000

    # -- setup ------------------------------------------------------------------------------------------------

    def _start_cluster(self) -> None:
        self.zookeeper = start_zookeeper(self.work_dir / "zookeeper")
        tmpfs = self.tmpfs_size if "disk_full" in self.kinds else None
        self.cluster = Cluster(self.zookeeper.connect_string, self.work_dir / "cluster", 3, proxied=True,
                               chroot="/chaos", tmpfs_size=tmpfs)
        try:
            self.cluster.start()
        except RuntimeError as e:                      # no tmpfs mounts here (not root): no full-disk faults
            if tmpfs is None:
                raise
            self.cluster.close()
            self.kinds.remove("disk_full")
            self.notes.append(f"disk_full left out: {e}")
            self.log(self.notes[-1])
            self.cluster = Cluster(self.zookeeper.connect_string, self.work_dir / "cluster", 3, proxied=True,
                                   chroot="/chaos")
            self.cluster.start()
        for topic in [self.topic] + ([self.txn_topic] if self.n_txn_writers else []):
            self._create_topic(topic)

    def _create_topic(self, topic: str) -> None:
        for attempt in range(3):       # a fresh cluster may not answer its first CreateTopics (issue: fixed?)
            try:
                self.cluster.create_topic(topic, len(self.partitions), 3, {"min.insync.replicas": 2})
                break
            except Exception as e:
                if "TopicAlreadyExists" in repr(e):
                    self.cluster.wait_full_isr(topic, self.partitions, 60)
                    break
                self.notes.append(f"CreateTopics attempt {attempt + 1} failed: {e!r}"[:300])
                self.log(self.notes[-1])
                if attempt == 2:
                    raise

    def _new_producer(self, i: int) -> RecordingProducer:
        self.generation += 1
        name = f"p{i}" if self.generation <= self.n_producers else f"p{i}.{self.generation}"
        return RecordingProducer(self.history, name, self.cluster.bootstrap, self.topic, self.partitions,
                                 self.rate, logger=self.client_log, debug=self.client_debug).start()

    def _new_member(self, g: int, m: int, gen: int = 0) -> GroupMember:
        name = f"g{g}m{m}" + (f".{gen}" if gen else "")
        return GroupMember(self.history, name, f"group{g}", self.cluster.bootstrap, self.topic,
                           logger=self.client_log).start()

    def _new_txn_writer(self, i: int) -> TxnWriter:
        """Transactional writer i: transactional id ``tx<i>`` throughout (a replacement fences its predecessor),
        a new generation each time (its transactions' values never repeat a predecessor's)."""
        self.txn_generations[i] = generation = self.txn_generations.get(i, -1) + 1
        return TxnWriter(self.history, f"tx{i}", self.cluster.bootstrap, self.txn_topic, self.partitions,
                         seed=self.rng.randrange(1 << 32), logger=self.client_log, generation=generation).start()

    def _start_workload(self) -> None:
        self.producers = [self._new_producer(i) for i in range(self.n_producers)]
        self.members = [self._new_member(g, m) for g in range(self.n_groups) for m in range(self.n_members)]
        self.txn_writers = [self._new_txn_writer(i) for i in range(self.n_txn_writers)]
        if self.n_txn_writers:
            self.txn_readers = [TxnReader(self.history, "rc0", self.cluster.bootstrap, self.txn_topic,
                                          self.partitions, logger=self.client_log).start()]

    # -- health -----------------------------------------------------------------------------------------------

    def _last_ack(self, p: int) -> float:
        return max((bp.acked[p][-1][2] for bp in self.producers if bp.acked.get(p)), default=0.0)

    def _last_read(self, group: str) -> float:
        return max((m.last_read for m in self.members if m.group == group), default=0.0)

    def supervise(self) -> None:
        """Start ZooKeeper or any broker found dead (a supervisor's job); replace producers that failed fatally."""
        if not self.zookeeper.running:
            self.history.record("restart", broker="zookeeper", reason="not running")
            self.zookeeper.start()
        for b in self.cluster.brokers.values():
            if b.paused:
                continue
            if not b.alive:
                code = None if b.proc is None else b.proc.returncode
                self.history.record("restart", broker=b.id, reason=f"exited with {code}",
                                    log_tail=b.log_tail(8))
                self.log(f"broker {b.id} exited with {code}: starting it again")
                b.spawn()
        for i, bp in enumerate(self.producers):
            if bp.dead is not None:
                self.history.record("client_error", client=bp.name, error=f"replaced: {bp.dead}", fatal=True)
                self.log(f"producer {bp.name} cannot go on ({bp.dead}): replacing it")
                try:
                    bp.close()
                except Exception:
                    pass
                self.producers[i] = self._new_producer(i)
        for i, w in enumerate(self.txn_writers):
            if w.error is not None:
                self.history.record("client_error", client=w.name, error=f"replaced: {w.error!r}", fatal=True)
                self.log(f"transactional writer {w.name} failed ({w.error!r}): replacing it")
                self.txn_writers[i] = self._new_txn_writer(i)

    def health_problem(self, since: float) -> str | None:
        """What is still wrong (None when healthy); `since` is a time.monotonic() the progress must follow."""
        c = self.cluster
        dead = [b.id for b in c.brokers.values() if not b.alive]
        if dead:
            return f"brokers {dead} not running"
        live = c.live_ids()
        if sorted(live) != sorted(c.brokers):
            return f"registered brokers {live}"
        for topic in (self.topic, OFFSETS_TOPIC, self.txn_topic, TXN_STATE_TOPIC):
            if topic not in c.topics():
                continue
            for p, replicas in sorted(c.assignment(topic).items()):
                st = c.state(topic, p)
                if st is None or st["leader"] not in live or sorted(st["isr"]) != sorted(replicas):
                    return f"{topic}-{p}: {st and {k: st[k] for k in ('leader', 'leader_epoch', 'isr')}}"
        stale = [p for p in self.partitions if self._last_ack(p) < since]
        if stale:
            return f"no acknowledgement on partitions {stale} since the fault ended"
        idle = sorted({m.group for m in self.members if self._last_read(m.group) < since})
        if idle:
            return f"groups {idle} read nothing since the fault ended"
        stuck = [w.name for w in self.txn_writers if w.last_commit < since]
        if stuck:
            return f"no transaction committed by {stuck} since the fault ended"
        return None

    def recover(self, fault_id: int) -> bool:
        t0 = time.monotonic()
        problem = None
        while True:
            self.supervise()
            try:
                problem = self.health_problem(t0)
            except Exception as e:                      # ZooKeeper reader reconnecting
                problem = f"cannot read the cluster state: {e!r}"
            if problem is None or time.monotonic() - t0 > self.recover_timeout:
                break
            time.sleep(0.25)
        seconds = round(time.monotonic() - t0, 2)
        self.history.record("recovered", id=fault_id, seconds=seconds, ok=problem is None, detail=problem or "")
        if problem is None:
            self.log(f"  recovered in {seconds} s")
            return True
        self.log(f"  NOT recovered after {seconds} s: {problem}\n{self.cluster.describe()}")
        self.repair(fault_id, problem)
        return False

    def repair(self, fault_id: int, problem: str) -> None:
        """After a failed recovery, by what was still wrong: producers without acknowledgements on a cluster
        that looks healthy are replaced (a client stuck for good), as are members of groups that read nothing;
        brokers not registered or partitions without a full ISR get every broker killed and started again.
        Then one more wait, recorded as a ``repair`` event."""
        c = self.cluster
        if "acknowledgement" in problem:
            for i, bp in enumerate(self.producers):
                self.history.record("client_error", client=bp.name, error="replaced: no acknowledgement",
                                    fatal=True)
                bp.close()
                self.producers[i] = self._new_producer(i)
        elif "transaction" in problem:
            for i, w in enumerate(self.txn_writers):
                self.history.record("client_error", client=w.name, error="replaced: no commit", fatal=True)
                w.abandon()
                self.txn_writers[i] = self._new_txn_writer(i)
        elif "groups" not in problem:
            for b in c.brokers.values():
                if b.paused:
                    b.resume()
                b.kill()
            for b in c.brokers.values():
                b.spawn()
        for i, m in enumerate(self.members):
            if self._last_read(m.group) < time.monotonic() - self.recover_timeout / 2:
                m.stop(10)
                g, rest = m.name[1:].split("m", 1)
                self.members[i] = self._new_member(int(g), int(rest.split(".")[0]), fault_id)
        t0 = time.monotonic()
        left = None
        while time.monotonic() - t0 < self.recover_timeout:
            self.supervise()
            try:
                left = self.health_problem(t0)
            except Exception as e:
                left = repr(e)
            if left is None:
                break
            time.sleep(0.5)
        self.history.record("repair", id=fault_id, ok=left is None, detail=left or "")
        self.log(f"  repair {'worked' if left is None else 'did not work: ' + left}")

    # -- the end --------------------------------------------------------------------------------------------

    def _final(self) -> None:
        for bp in self.producers:
            try:
                bp.stop(flush_timeout=90)
            except Exception as e:                       # records still pending: their fate stays unknown
                self.notes.append(f"producer {bp.name}: {e}")
        for w in self.txn_writers:
            try:
                w.stop()
            except Exception as e:                       # the checker judges what is visible
                self.notes.append(f"transactional writer {w.name}: {e}")
        for r in self.txn_readers:
            r.stop()
        self.history.record("end")
        self.log("workload stopped; reading the final logs")
        if self.txn_writers:
            self._final_transactions()
        try:
            consumed = consume_all(self.cluster.bootstrap, self.topic, self.partitions, timeout=120)
        except Exception as e:                           # the checker reports the missing final logs
            self.notes.append(f"cannot read the final logs: {e!r}"[:500])
            self.log(self.notes[-1])
            return
        ends = {}
        for p in self.partitions:
            recs = [[o, v.decode()] for o, _, v in consumed[p]]
            ends[p] = recs[-1][0] + 1 if recs else 0
            self.history.record("final", partition=p, high_watermark=ends[p], records=recs)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(
                max((m.highest.get(p, -1) for m in self.members if m.group == g), default=-1) >= ends[p] - 1
                for g in {m.group for m in self.members} for p in self.partitions if ends[p]):
            time.sleep(0.5)
        for m in self.members:
            m.stop(30)
            if m.error is not None:
                self.notes.append(f"member {m.name}: {m.error!r}")
        behind = {m.group: {p: m.highest.get(p, -1) for p in self.partitions} for m in self.members}
        self.history.record("groups_caught_up", ends=ends, highest=behind)
        for p in self.partitions:
            self.history.record("replicas", partition=p, **self._replicas(p, ends[p], consumed[p]))

    def _final_transactions(self) -> None:
        """The transactional topic as a read_committed consumer reads it (``txn_final``), its replicas compared."""
        try:
            consumed = consume_all(self.cluster.bootstrap, self.txn_topic, self.partitions, timeout=120,
                                   isolation_level="read_committed")
        except Exception as e:
            self.notes.append(f"cannot read the final transactional logs: {e!r}"[:500])
            self.log(self.notes[-1])
            return
        for p in self.partitions:
            self.history.record("txn_final", partition=p, records=[[o, v.decode()] for o, _, v in consumed[p]])
            end = consumed[p][-1][0] + 1 if consumed[p] else 0
            self.history.record("replicas", partition=p, topic=self.txn_topic,
                                **self._replicas(p, end, None, self.txn_topic))

    def _replicas(self, p: int, end: int, consumed, topic: str | None = None) -> dict:
        """Whether every replica of the partition holds the same bytes; `consumed` (when given) must be what
        they store."""
        c = self.cluster
        topic = topic or self.topic
        detail = ""
        try:
            c.wait_converged(topic, p, min_end=end, timeout=60)
        except AssertionError as e:
            detail = str(e).split("\nlive brokers")[0][:2000]
        logs = c.replica_logs(topic, p)
        brokers = {str(i): {"end": rl.end_offset, "batches": len(rl.batches),
                            "sha256": hashlib.sha256(rl.data).hexdigest()} for i, rl in logs.items()}
        identical = len({b["sha256"] for b in brokers.values()}) == 1 and not detail
        first = next(iter(logs.values()))
        stored = [(o, v) for o, _, v in first.records()]
        if identical and consumed is not None and stored != [(o, v) for o, _, v in consumed]:
            identical, detail = False, "what a consumer reads differs from what the replicas store"
        return {"brokers": brokers, "identical": identical, "detail": detail, "producers": producer_batches(first)}

    # -- the whole run ------------------------------------------------------------------------------------

    def execute(self) -> checker.Report:
        t_start = time.monotonic()
        ran = False
        try:
            self._start_cluster()
            self.log(f"cluster up (bootstrap {self.cluster.bootstrap}); kinds {self.kinds}; seed {self.seed}")
            self._start_workload()
            time.sleep(5)
            self.recover(0)
            order = self.rng.sample(self.kinds, len(self.kinds))
            for i in range(1, self.faults + 1):
                if self.max_minutes is not None and time.monotonic() - t_start > self.max_minutes * 60:
                    self.notes.append(f"stopped after {i - 1} faults: --max-minutes {self.max_minutes}")
                    self.log(self.notes[-1])
                    break
                kind = order[i - 1] if i <= len(order) else self.rng.choice(self.kinds)
                Nemesis(self).inject(i, kind)
                self.faults_run = i
                self.recover(i)
                time.sleep(self.rng.uniform(1.0, 3.0))
            self._final()
            ran = True
        finally:
            for bp in self.producers:
                bp.close()
            for m in self.members:
                m.stop(10)
            for w in self.txn_writers:
                w.abandon()
            for r in self.txn_readers:
                r.stop(10)
            if self.cluster is not None:
                self.cluster.kill_brokers()
            self.history.close()
            if not ran:
                self._close()
        report = None
        try:
            report = checker.check(self.history.events)
        finally:
            self._close(self.work_dir / "data" if self.keep_data and (report is None or not report.ok) else None)
        summary = {"seed": self.seed, "faults_requested": self.faults, "faults_run": self.faults_run,
                   "kinds": self.kinds, "duration_s": round(time.monotonic() - t_start, 1), "notes": self.notes,
                   "violations": [str(v) for v in report.violations], "worst_by_kind": report.worst_by_kind(),
                   "windows": report.windows, "counts": report.counts,
                   "sequence_restarts": report.sequence_restarts}
        (self.work_dir / "report.json").write_text(json.dumps(summary, indent=1))
        return report

    def _close(self, keep_data: Path | None = None) -> None:
        """Close the cluster (its data dirs copied into `keep_data` first, when given) and stop ZooKeeper."""
        if self.cluster is not None:
            self.cluster.close(keep_data=keep_data)
            if keep_data is not None:
                self.log(f"data dirs kept in {keep_data}")
        if self.zookeeper is not None:
            self.zookeeper.stop()


def producer_batches(rl) -> list[list[int]]:
    """[base offset, last offset, producer id, producer epoch, base sequence] of each idempotent batch of a
    replica's log: what tells a duplicate the broker let through (same producer id, epoch and sequence) from
    one the client sent again under a new producer id or epoch."""
    from seglog import _engine

    data = rl.data
    return [[b.base_offset, b.last_offset, b.producer_id, b.producer_epoch, b.base_sequence]
            for b in _engine.batches(data, False) if b.producer_id >= 0]


def run(work_dir, **kwargs) -> checker.Report:
    return Run(work_dir, **kwargs).execute()

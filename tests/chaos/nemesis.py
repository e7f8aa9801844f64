"""The faults of a chaos run. ``Nemesis.inject(id, kind)`` picks a target with the run's seeded random
generator, records ``fault_start``, does the damage, holds it, undoes it and records ``fault_end``.

========================  ====================================================================================
kind                      what happens
========================  ====================================================================================
``kill_fast``             kill -9 the leader of a random partition, start it again 0.5 s later
``kill_slow``             kill -9 the leader of a random partition, start it again after the session timeout + 2 s
``pause_leader``          SIGSTOP the leader of a random partition for the session timeout + 2 s, then SIGCONT
``pause_controller``      the same for the controller
``partition``             cut one random broker off from clients, brokers and ZooKeeper (the cluster's TCP proxies)
                          for the session timeout + 2 s, then heal
``zk_restart``            stop ZooKeeper (SIGTERM), start it again 0.5-3 s later on the same data
``disk_full``             fill one random broker's data dir (a tmpfs of its own) with a ballast file for the
                          session timeout + 2 s, then remove it; only when tmpfs mounts are permitted (root)
``rolling_restart``       SIGTERM each broker in turn (kill -9 when still running 30 s later), start it again and
                          wait for full ISRs before the next
========================  ====================================================================================

A broker that a fault leaves dead (it exited on a full disk, say) is started again by the runner's recovery step.
"""

from __future__ import annotations

import time

import faults

KINDS = ("kill_fast", "kill_slow", "pause_leader", "pause_controller", "partition", "zk_restart", "disk_full",
         "rolling_restart")


class Nemesis:
    def __init__(self, run):
        self.run = run
        self.cluster = run.cluster
        self.rng = run.rng
        self.hold_s = run.session_s + 2.0

    def inject(self, fault_id: int, kind: str) -> None:
        getattr(self, kind)(fault_id, kind)

    # -- helpers ----------------------------------------------------------------------------------------------

    def _start(self, fault_id: int, kind: str, detail: str) -> None:
        self.detail = detail
        self.run.history.record("fault_start", id=fault_id, kind=kind, detail=detail)
        self.run.log(f"fault #{fault_id} {kind}: {detail}")

    def _end(self, fault_id: int, kind: str) -> None:
        self.run.history.record("fault_end", id=fault_id, kind=kind, detail=self.detail)

    def _leader(self) -> tuple[int, str]:
        """A random partition's leader (a random live broker when that partition has none)."""
        p = self.rng.choice(self.run.partitions)
        try:
            leader = self.cluster.leader(self.run.topic, p)
        except Exception:
            leader = -1
        if leader not in self.cluster.brokers:
            leader = self.rng.choice(sorted(self.cluster.brokers))
            return leader, f"broker {leader} (partition {p} had no leader)"
        return leader, f"broker {leader}, leader of partition {p}"

    def _controller(self) -> tuple[int, str]:
        try:
            cid, epoch = self.cluster.controller()
        except Exception:
            cid, epoch = None, -1
        if cid not in self.cluster.brokers:
            cid = self.rng.choice(sorted(self.cluster.brokers))
            return cid, f"broker {cid} (no controller found)"
        return cid, f"broker {cid}, controller (epoch {epoch})"

    # -- the faults --------------------------------------------------------------------------------------------

    def _kill(self, fault_id, kind, down_s: float) -> None:
        victim, detail = self._leader()
        self._start(fault_id, kind, f"kill -9 {detail}, restart after {down_s:.1f} s")
        b = self.cluster.brokers[victim]
        b.kill()
        time.sleep(down_s)
        b.spawn()
        self._end(fault_id, kind)

    def kill_fast(self, fault_id, kind) -> None:
        self._kill(fault_id, kind, 0.5)

    def kill_slow(self, fault_id, kind) -> None:
        self._kill(fault_id, kind, self.hold_s)

    def _pause(self, fault_id, kind, victim: int, detail: str) -> None:
        self._start(fault_id, kind, f"SIGSTOP {detail} for {self.hold_s:.1f} s")
        b = self.cluster.brokers[victim]
        b.pause()
        try:
            time.sleep(self.hold_s)
        finally:
            b.resume()
        self._end(fault_id, kind)

    def pause_leader(self, fault_id, kind) -> None:
        self._pause(fault_id, kind, *self._leader())

    def pause_controller(self, fault_id, kind) -> None:
        self._pause(fault_id, kind, *self._controller())

    def partition(self, fault_id, kind) -> None:
        victim = self.rng.choice(sorted(self.cluster.brokers))
        self._start(fault_id, kind, f"isolate broker {victim} for {self.hold_s:.1f} s")
        self.cluster.isolate(victim)
        try:
            time.sleep(self.hold_s)
        finally:
            self.cluster.heal(victim)
        self._end(fault_id, kind)

    def zk_restart(self, fault_id, kind) -> None:
        down = round(self.rng.uniform(0.5, 3.0), 1)
        self._start(fault_id, kind, f"stop ZooKeeper, start it again after {down} s")
        self.run.zookeeper.stop()
        time.sleep(down)
        self.run.zookeeper.start()
        self._end(fault_id, kind)

    def disk_full(self, fault_id, kind) -> None:
        victim = self.rng.choice(sorted(self.cluster.brokers))
        b = self.cluster.brokers[victim]
        self._start(fault_id, kind, f"fill broker {victim}'s disk for {self.hold_s:.1f} s")
        size = faults.fill_disk(b.data_dir)
        try:
            time.sleep(self.hold_s)
        finally:
            faults.free_disk(b.data_dir)
        self.detail += f" (ballast {size >> 20} MiB; broker {'alive' if b.alive else 'exited'} when freed)"
        self._end(fault_id, kind)

    def rolling_restart(self, fault_id, kind) -> None:
        order = sorted(self.cluster.brokers)
        self._start(fault_id, kind, f"SIGTERM and restart brokers {order} in turn")
        notes = []
        for i in order:
            b = self.cluster.brokers[i]
            try:
                role = " (controller)" if self.cluster.controller()[0] == i else ""
            except Exception:
                role = ""
            t0 = time.monotonic()
            code = b.stop(timeout=30)
            stopped = time.monotonic() - t0
            note = f"{i}{role}: " + (f"exited {code} after {stopped:.1f} s" if code != -9 else
                                      f"still running {stopped:.0f} s after SIGTERM, killed")
            b.start(timeout=60)
            try:
                self.cluster.wait_full_isr(self.run.topic, self.run.partitions, timeout=60)
            except AssertionError:
                note += ", ISRs not full 60 s after its restart"
            notes.append(note)
        self.detail += " (" + "; ".join(notes) + ")"
        self._end(fault_id, kind)

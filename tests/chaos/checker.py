"""The chaos checker: pure functions over a recorded history (tests/chaos/history.py), no I/O.

``check(events)`` runs every check and returns a ``Report``; each ``check_*`` function returns the
``Violation``s of one property:

- ``lost``: an acknowledged write is not in the final log at the partition and offset its acknowledgement gave
  (``moved`` when it is there at another offset). librdkafka acknowledges some writes without an offset (a
  retried batch it infers was written because a later one of the same idempotent producer was): those must be
  in their partition's final log at some offset.
- ``duplicate``: a value stored more than once; ``phantom``: a stored value nobody sent.
- ``order``: a producer's acknowledged writes to one partition do not have increasing offsets in send order, or
  its stored records are not in send order.
- ``truncated_read``: a consumer read a record at (partition, offset) that the final log does not hold there
  (it was read, then truncated or replaced).
- ``commit_backwards``: a group's acknowledged commits for a partition went down, a member was handed a
  partition with a committed offset below one acknowledged before it asked, or a commit points past the end of
  the final log.
- ``replicas``: the replicas of a partition do not hold identical bytes at the end.
- ``unrecovered``: the cluster did not return to health (every broker up, full ISRs) after a fault.
- ``no_final``: a partition written to has no final log in the history (the run could not read it).
- Transactions (``txn_*`` events; the final log of the transactional topic as a read_committed consumer reads
  it): ``txn_lost`` a committed transaction's value is missing; ``txn_aborted`` an aborted transaction's value
  is visible; ``txn_torn`` a transaction (of unknown outcome too) is partly visible; ``txn_aborted_read`` and
  ``txn_dirty_read`` a read_committed consumer read a value of an aborted transaction, or one the final log
  does not hold there; ``txn_duplicate``/``txn_phantom`` as above.

``unavailability(events)`` gives each fault's window: the longest time one partition went without an
acknowledgement, from the last ack before the fault began to the next fault (or the end of the workload).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Violation:
    check: str
    message: str

    def __str__(self) -> str:
        return f"[{self.check}] {self.message}"


@dataclass
class Report:
    violations: list[Violation]
    windows: list[dict]
    counts: dict = field(default_factory=dict)
    sequence_restarts: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations

    def worst_by_kind(self) -> dict[str, dict]:
        """Per fault kind: how many faults, the worst and the median window (s)."""
        out: dict[str, dict] = {}
        for kind in sorted({w["kind"] for w in self.windows}):
            ws = sorted(w["window"] for w in self.windows if w["kind"] == kind)
            out[kind] = {"faults": len(ws), "worst_s": ws[-1], "median_s": ws[len(ws) // 2]}
        return out


def final_logs(events) -> dict[int, dict[int, str]]:
    """{partition: {offset: value}} from the ``final`` events."""
    return {e["partition"]: {o: v for o, v in e["records"]} for e in events if e["type"] == "final"}


def _high_watermarks(events) -> dict[int, int]:
    return {e["partition"]: e["high_watermark"] for e in events if e["type"] == "final"}


def check_final_present(events) -> list[Violation]:
    finals = final_logs(events)
    written = sorted({e["partition"] for e in events if e["type"] == "ack"})
    return [Violation("no_final", f"partition {p} was written to but the history has no final log of it")
            for p in written if p not in finals]


def check_acked_durable(events) -> list[Violation]:
    finals = final_logs(events)
    where = {v: (p, o) for p, log in finals.items() for o, v in log.items()}
    out = []
    for e in events:
        if e["type"] != "ack" or e["partition"] not in finals:
            continue
        p, o, v = e["partition"], e["offset"], e["value"]
        if finals[p].get(o) == v or (o is None and where.get(v, (None,))[0] == p):
            continue
        if v in where:
            out.append(Violation("moved", f"{v} acknowledged at {p}:{o} (t={e['t']}) is stored at "
                                          f"{where[v][0]}:{where[v][1]}"))
        else:
            out.append(Violation("lost", f"{v} acknowledged at {p}:{o} (t={e['t']}, producer {e['producer']}) is "
                                         f"not in the final log (which holds {finals[p].get(o)!r} there)"))
    return out


def check_no_duplicates(events) -> list[Violation]:
    sent = {e["value"] for e in events if e["type"] == "send"}
    seen: dict[str, list] = defaultdict(list)
    for p, log in final_logs(events).items():
        for o, v in log.items():
            seen[v].append((p, o))
    batch_of = producer_batches(events)
    out = []
    for v, places in seen.items():
        if len(places) > 1:
            out.append(Violation("duplicate", f"{v} is stored {len(places)} times: "
                                              + ", ".join(f"{p}:{o}{batch_of(p, o)}" for p, o in sorted(places))))
        if v not in sent:
            out.append(Violation("phantom", f"{v} is stored at {places[0][0]}:{places[0][1]} but was never sent"))
    return out


def producer_batches(events):
    """(partition, offset) -> " (producer P epoch E seq S)" of the idempotent batch holding it, from the
    replicas' batch headers the run recorded (empty when not recorded)."""
    found = {}
    for e in events:
        if e["type"] == "replicas" and e.get("topic", "chaos") == "chaos":
            found[e["partition"]] = e.get("producers") or []

    def describe(p: int, o: int) -> str:
        for base, last, pid, epoch, seq in found.get(p, ()):
            if base <= o <= last:
                return f" (producer {pid} epoch {epoch} seq {seq + o - base})"
        return ""
    return describe


def sequence_restarts(events) -> dict[str, list]:
    """Producer name -> the (producer id, epoch) pairs its stored batches of the main topic carry, for every
    idempotent producer that wrote under more than one: it started its sequence numbers over, which is what
    lets a retried batch be stored twice (the leader cannot tell it from a new one). Not a violation by itself
    (a client does so after a message timed out, as with Apache Kafka), so reported as a figure; empty when
    the batch headers were not recorded."""
    who = {e["value"]: e["producer"] for e in events if e["type"] == "send"}
    finals = final_logs(events)
    sessions: dict[str, set] = defaultdict(set)
    for e in events:
        if e["type"] != "replicas" or e.get("topic", "chaos") != "chaos":
            continue
        log = finals.get(e["partition"], {})
        for base, last, pid, epoch, _ in e.get("producers") or ():
            name = next((who[log[o]] for o in range(base, last + 1) if log.get(o) in who), None)
            if name is not None and pid >= 0:            # -1: not idempotent, no sequences
                sessions[name].add((pid, epoch))
    return {name: sorted(s) for name, s in sorted(sessions.items()) if len(s) > 1}


def check_order(events) -> list[Violation]:
    """Per producer and partition: acknowledged offsets increase in send order, and so do stored records."""
    send_index: dict[str, tuple[str, int]] = {}
    for i, e in enumerate(events):
        if e["type"] == "send":
            send_index[e["value"]] = (e["producer"], i)
    out = []
    acks: dict[tuple[str, int], list] = defaultdict(list)
    for e in events:
        if e["type"] == "ack" and e["value"] in send_index and e["offset"] is not None:
            acks[(e["producer"], e["partition"])].append((send_index[e["value"]][1], e["offset"], e["value"]))
    for (producer, p), items in sorted(acks.items()):
        items.sort()
        for (_, o1, v1), (_, o2, v2) in zip(items, items[1:]):
            if o2 <= o1:
                out.append(Violation("order", f"producer {producer} partition {p}: {v2} sent after {v1} was "
                                              f"acknowledged at offset {o2} <= {o1}"))
    for p, log in sorted(final_logs(events).items()):
        last: dict[str, tuple[int, int, str]] = {}
        for o in sorted(log):
            v = log[o]
            if v not in send_index:
                continue
            producer, i = send_index[v]
            if producer in last and i < last[producer][0]:
                out.append(Violation("order", f"partition {p}: {v} (stored at {o}) was sent before "
                                              f"{last[producer][2]} (stored at {last[producer][1]})"))
            last[producer] = (i, o, v)
    return out


def check_reads(events) -> list[Violation]:
    finals = final_logs(events)
    out = []
    for e in events:
        if e["type"] != "read" or e["partition"] not in finals:
            continue
        p, o, v = e["partition"], e["offset"], e["value"]
        stored = finals[p].get(o)
        if stored != v:
            out.append(Violation("truncated_read", f"consumer {e['consumer']} (group {e['group']}) read {v} at "
                                                   f"{p}:{o} (t={e['t']}); the final log holds {stored!r} there"))
    return out


def check_commits(events) -> list[Violation]:
    hw = _high_watermarks(events)
    out = []
    acked: dict[tuple[str, int], list[tuple[float, int]]] = defaultdict(list)   # (ack time, offset)
    for e in events:
        if e["type"] == "commit":
            key = (e["group"], e["partition"])
            best = max((o for _, o in acked[key]), default=None)
            if best is not None and e["offset"] < best:
                out.append(Violation("commit_backwards", f"group {e['group']} partition {e['partition']}: "
                                                         f"{e['consumer']} committed {e['offset']} at t={e['t']} "
                                                         f"after a commit of {best} was acknowledged"))
            acked[key].append((e["t"], e["offset"]))
            if e["partition"] in hw and e["offset"] > hw[e["partition"]]:
                out.append(Violation("commit_backwards", f"group {e['group']} partition {e['partition']}: "
                                                         f"committed {e['offset']} at t={e['t']}, past the final "
                                                         f"log's end {hw[e['partition']]}"))
        elif e["type"] == "assign":
            for p_text, got in e["committed"].items():
                p = int(p_text)
                before = [o for t, o in acked[(e["group"], p)] if t < e["t_ask"]]
                if before and (got is None or got < max(before)):
                    out.append(Violation("commit_backwards", f"group {e['group']} partition {p}: {e['consumer']} "
                                                             f"was handed the committed offset {got} at "
                                                             f"t={e['t_ask']} after {max(before)} had been "
                                                             f"acknowledged"))
    return out


def check_replicas(events) -> list[Violation]:
    return [Violation("replicas", f"{e.get('topic', 'chaos')}-{e['partition']}: replicas differ: {e['detail']}")
            for e in events if e["type"] == "replicas" and not e["identical"]]


def check_recovery(events) -> list[Violation]:
    kinds = {e["id"]: e["kind"] for e in events if e["type"] == "fault_start"}
    return [Violation("unrecovered", f"fault #{e['id']} ({kinds.get(e['id'], '?')}): not healthy "
                                     f"{e['seconds']} s after it ended: {e['detail']}")
            for e in events if e["type"] == "recovered" and not e["ok"]]


def check_transactions(events) -> list[Violation]:
    sends: dict[str, list[str]] = defaultdict(list)
    for e in events:
        if e["type"] == "txn_send":
            sends[e["txn"]].append(e["value"])
    if not sends:
        return []
    finals = [e for e in events if e["type"] == "txn_final"]
    if not finals:
        return [Violation("no_final", "transactions were written but the history has no final log of them")]
    outcome = {e["txn"]: e["outcome"] for e in events if e["type"] == "txn_end"}
    txn_of = {v: t for t, vs in sends.items() for v in vs}
    stored: dict[tuple[int, int], str] = {}
    places: dict[str, list] = defaultdict(list)
    for e in finals:
        for o, v in e["records"]:
            stored[(e["partition"], o)] = v
            places[v].append((e["partition"], o))
    out = []
    for v, where in places.items():
        if len(where) > 1:
            out.append(Violation("txn_duplicate", f"{v} is visible {len(where)} times: {where}"))
        if v not in txn_of:
            out.append(Violation("txn_phantom", f"{v} is visible at {where[0]} but was never sent"))
    for txn, values in sends.items():
        seen = [v for v in values if v in places]
        state = outcome.get(txn, "unknown")
        if state == "committed" and len(seen) < len(values):
            missing = [v for v in values if v not in places]
            out.append(Violation("txn_lost", f"{txn} committed but {missing} are not visible"))
        elif state == "aborted" and seen:
            out.append(Violation("txn_aborted", f"{txn} aborted but {seen} are visible"))
        elif state == "unknown" and 0 < len(seen) < len(values):
            out.append(Violation("txn_torn", f"{txn} (outcome unknown) is partly visible: {seen} of {values}"))
    for e in events:
        if e["type"] != "txn_read":
            continue
        p, o, v = e["partition"], e["offset"], e["value"]
        if outcome.get(txn_of.get(v)) == "aborted":
            out.append(Violation("txn_aborted_read", f"{e['consumer']} read {v} of aborted {txn_of[v]} at {p}:{o} "
                                                     f"(t={e['t']})"))
        elif stored.get((p, o)) != v:
            out.append(Violation("txn_dirty_read", f"{e['consumer']} read {v} at {p}:{o} (t={e['t']}); the final "
                                                   f"committed log holds {stored.get((p, o))!r} there"))
    return out


CHECKS = (check_final_present, check_acked_durable, check_no_duplicates, check_order, check_reads,
          check_commits, check_replicas, check_recovery, check_transactions)


def unavailability(events) -> list[dict]:
    """Per fault: {id, kind, detail, start, end, window, partition, failed, recovery_s}, where window is the
    longest span (s) one partition had no acknowledgement, measured from the last ack before the fault's start
    to the next fault's start (or the ``end`` event, or the last event)."""
    acks: dict[int, list[float]] = defaultdict(list)
    for e in events:
        if e["type"] == "ack":
            acks[e["partition"]].append(e["t"])
    for ts in acks.values():
        ts.sort()
    starts = [e for e in events if e["type"] == "fault_start"]
    ends = {e["id"]: e["t"] for e in events if e["type"] == "fault_end"}
    recovered = {e["id"]: e["seconds"] for e in events if e["type"] == "recovered"}
    stop = next((e["t"] for e in events if e["type"] == "end"), events[-1]["t"] if events else 0.0)
    fails = sorted(e["t"] for e in events if e["type"] == "fail")
    out = []
    for i, f in enumerate(starts):
        s = f["t"]
        e_ = starts[i + 1]["t"] if i + 1 < len(starts) else stop
        worst, worst_p = 0.0, None
        for p, ts in acks.items():
            first = bisect_left(ts, s)
            prev = ts[first - 1] if first else s
            longest = 0.0
            for t in ts[first:]:
                if t > e_:
                    break
                longest = max(longest, t - prev)
                prev = t
            longest = max(longest, e_ - prev)
            if longest > worst:
                worst, worst_p = longest, p
        out.append({"id": f["id"], "kind": f["kind"], "detail": f.get("detail", ""), "start": s,
                    "end": ends.get(f["id"]), "window": round(worst, 3), "partition": worst_p,
                    "failed": sum(1 for t in fails if s <= t < e_), "recovery_s": recovered.get(f["id"])})
    return out


def check(events) -> Report:
    violations = [v for fn in CHECKS for v in fn(events)]
    counts: dict[str, int] = defaultdict(int)
    for e in events:
        counts[e["type"]] += 1
    return Report(violations, unavailability(events), dict(counts), sequence_restarts(events))


def format_report(report: Report, limit: int = 20) -> str:
    c = report.counts
    lines = [f"faults {c.get('fault_start', 0)}, sends {c.get('send', 0)}, acks {c.get('ack', 0)}, "
             f"failed deliveries {c.get('fail', 0)}, reads {c.get('read', 0)}, commits {c.get('commit', 0)}, "
             f"broker restarts by the runner {c.get('restart', 0)}, transactions {c.get('txn_end', 0)}, "
             f"read_committed reads {c.get('txn_read', 0)}",
             f"violations: {len(report.violations)}",
             f"idempotent producers that started their sequences over (a new producer id or epoch): "
             f"{len(report.sequence_restarts)}"
             + "".join(f"\n  {name}: (id, epoch) {pairs}" for name, pairs in report.sequence_restarts.items())]
    by_check: dict[str, int] = defaultdict(int)
    for v in report.violations:
        by_check[v.check] += 1
    if by_check:
        lines.append("  by check: " + ", ".join(f"{k} {n}" for k, n in sorted(by_check.items())))
    lines += [f"  {v}" for v in report.violations[:limit]]
    if len(report.violations) > limit:
        lines.append(f"  ... and {len(report.violations) - limit} more")
    lines.append("unavailability per fault kind (longest gap between acks of one partition):")
    for kind, w in report.worst_by_kind().items():
        lines.append(f"  {kind:<18} {w['faults']:>4} faults  worst {w['worst_s']:7.2f} s  "
                     f"median {w['median_s']:6.2f} s")
    return "\n".join(lines)

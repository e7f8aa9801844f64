"""The chaos checker (tests/chaos/checker.py) on hand-made histories: a clean one passes, and each kind of
violation is found and named."""

import pytest

from chaos.checker import check, format_report, unavailability
from chaos.history import History, read_history


def clean_history() -> list[dict]:
    """Two producers on partitions 0 and 1, one group reading and committing, one fault; final logs hold every
    acknowledged write once, replicas identical."""
    h = History()
    for producer, p, values in (("a", 0, ["a-0", "a-1"]), ("b", 1, ["b-0", "b-1"])):
        for v in values:
            h.record("send", producer=producer, partition=p, value=v)
    events = h.events
    t = 1.0

    def add(type_, **f):
        nonlocal t
        t += 0.1
        events.append({"t": round(t, 3), "type": type_, **f})

    add("ack", producer="a", partition=0, value="a-0", offset=0)
    add("ack", producer="b", partition=1, value="b-0", offset=0)
    add("fault_start", id=1, kind="kill_fast", detail="broker 0")
    add("ack", producer="a", partition=0, value="a-1", offset=1)
    add("fault_end", id=1, kind="kill_fast", detail="broker 0")
    add("ack", producer="b", partition=1, value="b-1", offset=1)
    add("recovered", id=1, seconds=0.5, ok=True, detail="")
    add("assign", consumer="c0", group="g", partitions=[0, 1], committed={"0": None, "1": None}, t_ask=t)
    add("read", consumer="c0", group="g", partition=0, offset=0, value="a-0")
    add("read", consumer="c0", group="g", partition=0, offset=1, value="a-1")
    add("commit", consumer="c0", group="g", partition=0, offset=2)
    add("end")
    add("final", partition=0, high_watermark=2, records=[[0, "a-0"], [1, "a-1"]])
    add("final", partition=1, high_watermark=2, records=[[0, "b-0"], [1, "b-1"]])
    add("replicas", partition=0, brokers={}, identical=True, detail="")
    return events


def final_of(events, p):
    return next(e for e in events if e["type"] == "final" and e["partition"] == p)


def checks_of(events) -> set[str]:
    return {v.check for v in check(events).violations}


def test_a_clean_history_passes():
    report = check(clean_history())
    assert report.ok, format_report(report)
    assert report.counts["ack"] == 4


def test_a_lost_acknowledged_write():
    events = clean_history()
    final_of(events, 1)["records"] = [[0, "b-0"]]
    report = check(events)
    assert [v.check for v in report.violations] == ["lost"]
    assert "b-1 acknowledged at 1:1" in report.violations[0].message


def test_an_acknowledged_write_at_another_offset():
    events = clean_history()
    final_of(events, 0)["records"] = [[0, "a-0"], [1, "b-9"], [2, "a-1"]]
    assert "moved" in checks_of(events)


def test_a_duplicate_and_a_phantom():
    events = clean_history()
    final_of(events, 1)["records"].append([2, "b-1"])
    assert checks_of(events) == {"duplicate"}
    events = clean_history()
    final_of(events, 1)["records"].append([2, "zz-1"])
    assert checks_of(events) == {"phantom"}


def test_a_duplicate_names_the_producer_id_epoch_and_sequence_of_each_copy():
    """With the replicas' batch headers recorded, each stored copy says which producer id, epoch and sequence
    wrote it: the same three twice is a broker that let a retry through, a new epoch a client that sent the
    batch again after bumping it."""
    events = clean_history()
    final_of(events, 1)["records"].append([2, "b-1"])
    events.append({"t": 9.0, "type": "replicas", "partition": 1, "brokers": {}, "identical": True, "detail": "",
                   "producers": [[0, 1, 7, 0, 0], [2, 2, 7, 1, 0]]})
    (v,) = check(events).violations
    assert v.message == "b-1 is stored 2 times: 1:1 (producer 7 epoch 0 seq 1), 1:2 (producer 7 epoch 1 seq 0)"


def test_a_producer_that_started_its_sequences_over_is_reported_not_a_violation():
    """A new producer id or epoch in one producer's stored batches is counted and named (a client does this
    after a message timeout, as against Apache Kafka), without failing the run."""
    events = clean_history()
    events.append({"t": 9.0, "type": "replicas", "partition": 1, "brokers": {}, "identical": True, "detail": "",
                   "producers": [[0, 0, 7, 0, 0], [1, 1, 7, 1, 0]]})
    events.append({"t": 9.1, "type": "replicas", "partition": 0, "brokers": {}, "identical": True, "detail": "",
                   "producers": [[0, 1, 3, 0, 0]]})
    report = check(events)
    assert report.ok and report.sequence_restarts == {"b": [(7, 0), (7, 1)]}
    assert "a new producer id or epoch): 1\n  b: (id, epoch) [(7, 0), (7, 1)]" in format_report(report)
    assert check(clean_history()).sequence_restarts == {}


def test_an_acknowledgement_without_an_offset_needs_the_value_somewhere_in_its_partition():
    events = clean_history()
    next(e for e in events if e["type"] == "ack" and e["value"] == "a-1")["offset"] = None
    assert check(events).ok, "librdkafka's offset-less acknowledgement of a retried batch"
    final_of(events, 0)["records"] = [[0, "a-0"]]
    assert "lost" in checks_of(events)


def transactions_history(outcomes: dict[str, str], visible: dict[int, list], reads=()) -> list[dict]:
    """The clean history plus transactions t0.. of two values each (t<i>-0 to partition 0, t<i>-1 to
    partition 1) with the given outcomes, a final committed log per partition, and read_committed reads."""
    events = clean_history()
    for txn, outcome in outcomes.items():
        for i in (0, 1):
            events.append({"t": 3.0, "type": "txn_send", "txn": txn, "partition": i, "value": f"{txn}-{i}"})
        if outcome is not None:
            events.append({"t": 3.1, "type": "txn_end", "txn": txn, "outcome": outcome, "error": ""})
    for p, o, v in reads:
        events.append({"t": 3.2, "type": "txn_read", "consumer": "rc0", "partition": p, "offset": o, "value": v})
    for p, records in visible.items():
        events.append({"t": 3.3, "type": "txn_final", "partition": p, "records": records})
    return events


def test_transactions_visible_whole_or_not_at_all():
    ok = transactions_history({"t0": "committed", "t1": "aborted", "t2": "unknown", "t3": None},
                              {0: [[0, "t0-0"], [5, "t2-0"]], 1: [[0, "t0-1"], [4, "t2-1"]]},
                              reads=[(0, 0, "t0-0"), (1, 4, "t2-1")])
    report = check(ok)
    assert report.ok, format_report(report)
    assert checks_of(transactions_history({"t0": "committed"}, {0: [[0, "t0-0"]], 1: []})) == {"txn_lost"}
    assert checks_of(transactions_history({"t1": "aborted"}, {0: [[2, "t1-0"]], 1: []})) == {"txn_aborted"}
    assert checks_of(transactions_history({"t2": "unknown"}, {0: [[0, "t2-0"]], 1: []})) == {"txn_torn"}
    assert checks_of(transactions_history({"t0": "committed"}, {0: [[0, "t0-0"], [1, "t0-0"]], 1: [[0, "t0-1"]]})) \
        == {"txn_duplicate"}
    assert checks_of(transactions_history({"t0": "committed"}, {0: [[0, "t0-0"], [1, "x-0"]], 1: [[0, "t0-1"]]})) \
        == {"txn_phantom"}
    assert checks_of(transactions_history({"t0": "committed"}, {})) == {"no_final"}


def test_a_read_committed_reader_that_saw_an_aborted_or_vanished_value():
    final = {0: [[0, "t0-0"]], 1: [[0, "t0-1"]]}
    aborted = transactions_history({"t0": "committed", "t1": "aborted"}, final, reads=[(0, 1, "t1-0")])
    assert checks_of(aborted) == {"txn_aborted_read"}
    dirty = transactions_history({"t0": "committed", "t2": "unknown"}, final, reads=[(0, 1, "t2-0")])
    assert checks_of(dirty) == {"txn_dirty_read"}


def test_order_of_acknowledged_offsets_and_of_stored_records():
    events = clean_history()
    for e in events:                         # a-1, sent after a-0, acknowledged at a lower offset
        if e["type"] == "ack" and e["value"] == "a-0":
            e["offset"] = 5
    assert "order" in checks_of(events)
    events = clean_history()
    final_of(events, 0)["records"] = [[0, "a-1"], [1, "a-0"]]
    found = checks_of(events)
    assert {"order", "moved"} <= found           # and each ack names the other offset


def test_a_read_of_a_record_later_truncated():
    events = clean_history()
    events.insert(-3, {"t": 9.0, "type": "read", "consumer": "c1", "group": "g", "partition": 0, "offset": 2,
                       "value": "a-2"})
    report = check(events)
    assert [v.check for v in report.violations] == ["truncated_read"]
    assert "read a-2 at 0:2" in report.violations[0].message


def test_commits_going_backwards():
    events = clean_history()
    events.insert(-4, {"t": 3.0, "type": "commit", "consumer": "c1", "group": "g", "partition": 0, "offset": 1})
    assert checks_of(events) == {"commit_backwards"}
    # a member handed the partition afterwards with a lower committed offset
    events = clean_history()
    events.insert(-4, {"t": 3.0, "type": "assign", "consumer": "c1", "group": "g", "partitions": [0],
                       "committed": {"0": 1}, "t_ask": 2.99})
    assert checks_of(events) == {"commit_backwards"}
    # ... but an offset asked for before the commit was acknowledged may be the older one
    events[-5]["t_ask"] = 0.5
    assert check(events).ok
    # and a commit past the end of the final log
    events = clean_history()
    events.insert(-4, {"t": 3.0, "type": "commit", "consumer": "c1", "group": "g", "partition": 0, "offset": 7})
    assert checks_of(events) == {"commit_backwards"}


def test_replicas_that_differ_and_a_cluster_that_did_not_recover_and_a_missing_final_log():
    events = clean_history()
    events.append({"t": 9.0, "type": "replicas", "partition": 1, "brokers": {}, "identical": False,
                   "detail": "batch #3 differs"})
    assert checks_of(events) == {"replicas"}
    events = clean_history()
    next(e for e in events if e["type"] == "recovered").update(ok=False, detail="broker 0 down")
    assert checks_of(events) == {"unrecovered"}
    events = [e for e in clean_history() if not (e["type"] == "final" and e["partition"] == 1)]
    assert checks_of(events) == {"no_final"}


def test_unavailability_is_the_longest_ack_gap_of_one_partition_around_each_fault():
    events = [
        {"t": 0.0, "type": "ack", "partition": 0}, {"t": 0.0, "type": "ack", "partition": 1},
        {"t": 1.0, "type": "ack", "partition": 0}, {"t": 1.0, "type": "ack", "partition": 1},
        {"t": 1.5, "type": "fault_start", "id": 1, "kind": "pause_leader"},
        {"t": 1.6, "type": "ack", "partition": 1},
        {"t": 1.7, "type": "fail", "partition": 0},
        {"t": 3.0, "type": "ack", "partition": 1}, {"t": 4.5, "type": "ack", "partition": 1},
        {"t": 5.0, "type": "ack", "partition": 0},           # partition 0: 1.0 -> 5.0
        {"t": 6.0, "type": "fault_end", "id": 1, "kind": "pause_leader"},
        {"t": 6.5, "type": "ack", "partition": 1},
        {"t": 7.0, "type": "fault_start", "id": 2, "kind": "zk_restart"},
        {"t": 7.1, "type": "ack", "partition": 0}, {"t": 7.2, "type": "ack", "partition": 1},
        {"t": 7.5, "type": "end"},
    ]
    w1, w2 = unavailability(events)
    assert (w1["kind"], w1["window"], w1["partition"], w1["failed"]) == ("pause_leader", 4.0, 0, 1)
    # partition 0's last ack before t=7.0 is at 5.0, its next at 7.1: 2.1 s (partition 1: 6.5 -> 7.2)
    assert (w2["kind"], w2["window"], w2["partition"], w2["failed"]) == ("zk_restart", 2.1, 0, 0)


def test_a_history_file_round_trips_and_a_torn_last_line_is_left_out(tmp_path):
    h = History(tmp_path / "h.jsonl")
    h.record("send", producer="a", partition=0, value="a-0")
    h.record("ack", producer="a", partition=0, value="a-0", offset=0)
    h.close()
    with open(tmp_path / "h.jsonl", "a") as f:
        f.write('{"t": 1.0, "type": "se')
    events = read_history(tmp_path / "h.jsonl")
    assert [e["type"] for e in events] == ["send", "ack"] and events[1]["offset"] == 0


@pytest.mark.parametrize("broken", ["lost", "duplicate", "truncated_read"])
def test_the_report_names_each_violation(broken):
    events = clean_history()
    if broken == "lost":
        final_of(events, 1)["records"] = []
    elif broken == "duplicate":
        final_of(events, 0)["records"].append([2, "a-0"])
    else:
        events.insert(-3, {"t": 9.0, "type": "read", "consumer": "c", "group": "g", "partition": 1, "offset": 0,
                           "value": "x"})
    text = format_report(check(events))
    assert f"[{broken}]" in text and "violations: 0" not in text


def test_the_command_checks_a_recorded_history(tmp_path):
    """``python -m tests.chaos --check history.jsonl``: exit 0 and the summary for a clean history, 1 and the
    violation for a broken one."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for name, events, code in (("clean", clean_history(), 0), ("lost", clean_history(), 1)):
        if name == "lost":
            final_of(events, 1)["records"] = [[0, "b-0"]]
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in events))
        res = subprocess.run([sys.executable, "-m", "tests.chaos", "--check", str(path)], cwd=root,
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == code, res.stdout + res.stderr
        assert ("[lost] b-1 acknowledged at 1:1" in res.stdout) == (name == "lost")
        assert "kill_fast" in res.stdout


def test_a_replacement_transactional_writer_names_its_transactions_apart():
    """A TxnWriter replacing a failed one keeps the transactional id (to fence it) but not its transaction names:
    generation 0 writes tx0-t<k>, generation 1 tx0.1-t<k>, so a value never stands for two transactions (the
    checker saw the same value committed twice when both started counting at t0)."""
    from chaos.workload import TxnWriter

    h = History()
    first = TxnWriter(h, "tx0", "127.0.0.1:1", "t", [0], seed=1)
    second = TxnWriter(h, "tx0", "127.0.0.1:1", "t", [0], seed=1, generation=1)
    assert (first.name, second.name) == ("tx0", "tx0")
    assert (first.label, second.label) == ("tx0", "tx0.1")

"""Several log directories per node (log.dirs): placement, the per-directory lock and meta.properties checks,
the future-log swap of AlterReplicaLogDirs, and what a crash leaves behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

import seglog
from seglog.errors import (InconsistentClusterIdError, InvalidConfigError, InvalidTopicError, LogDirNotFoundError,
                           ReplicaNotAvailableError, StorageError, UnknownTopicOrPartitionError)
from seglog.faults import FaultPlan
from seglog.log_dirs import parse_log_dirs, read_meta_properties


@pytest.fixture
def dirs(tmp_path):
    return [str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "c")]


def wait_for(cond, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def located(node, topic, p):
    return os.path.dirname(node.partition(topic, p).log.path)


def fill(node, topic, p, n, size=100):
    log = node.partition(topic, p).log
    log.append_batch([b"%08d" % i + b"x" * (size - 8) for i in range(n)])
    return log.end_offset


def values(node, topic, p):
    return [r.value[:8] for r in node.partition(topic, p).log.records()]


# -- log.dirs ------------------------------------------------------------------------------------------------

def test_log_dirs_parse_a_comma_list_or_a_list(dirs):
    assert parse_log_dirs(",".join(dirs)) == dirs
    assert parse_log_dirs(f" {dirs[0]} , {dirs[1]} ") == dirs[:2]
    assert parse_log_dirs(dirs[:2]) == dirs[:2]
    with pytest.raises(InvalidConfigError, match="Duplicate log directory"):
        parse_log_dirs([dirs[0], dirs[0] + "/"])
    with pytest.raises(InvalidConfigError):
        parse_log_dirs(" , ")


def test_one_directory_keeps_its_layout(tmp_path):
    with seglog.open(tmp_path / "d") as node:
        node.create_topic("t", 2)
        assert node.log_dirs == [node.path] == [str(tmp_path / "d")]
    assert sorted(os.listdir(tmp_path / "d")) == [".lock", "meta.properties", "t-0", "t-1", "topics.json"]


def test_new_partitions_go_to_the_directory_with_the_fewest(dirs):
    with seglog.open(",".join(dirs)) as node:
        node.create_topic("t", 4)
        assert [located(node, "t", p) for p in range(4)] == [dirs[0], dirs[1], dirs[2], dirs[0]]
        node.create_topic("u", 2)
        assert [located(node, "u", p) for p in range(2)] == [dirs[1], dirs[2]]
        node.delete_topic("t")
        node.create_partitions("u", 4)
        assert [located(node, "u", p) for p in (2, 3)] == [dirs[0], dirs[0]]
    with seglog.open(dirs) as node:                          # found again where they are
        assert [located(node, "u", p) for p in range(4)] == [dirs[1], dirs[2], dirs[0], dirs[0]]
        assert node.topic("u").partitions == 4


def test_a_future_log_counts_for_placement(dirs):
    with seglog.open(dirs[:2]) as node:
        node.create_topic("t", 2)
        node.replica_alter_log_dirs_rate = 1                 # the move stays a future log (1 MiB copied)
        fill(node, "t", 0, 20000)
        assert node.alter_replica_log_dirs({("t", 0): dirs[1]}) == {("t", 0): None}
        node.create_topic("u", 1)                            # dirs: a 1 current, b 1 current + 1 future
        assert located(node, "u", 0) == dirs[0]


def test_each_directory_is_locked_and_has_meta_properties(dirs):
    with seglog.open(dirs[:2]) as node:
        metas = [read_meta_properties(d) for d in dirs[:2]]
        assert metas[0] == metas[1] and metas[0]["cluster.id"] == node.cluster_id
        assert all(os.path.exists(os.path.join(d, ".lock")) for d in dirs[:2])
        with pytest.raises(StorageError, match="already open"):
            seglog.open([dirs[2], dirs[1]])
        assert not os.path.exists(os.path.join(dirs[2], "meta.properties"))
    with seglog.open(dirs) as node:                          # a new directory joins with the same ids
        assert read_meta_properties(dirs[2]) == read_meta_properties(dirs[0])


def test_directories_of_different_clusters_are_refused(dirs):
    seglog.open(dirs[0]).close()
    seglog.open(dirs[1]).close()
    with pytest.raises(InconsistentClusterIdError, match="not consistent across log.dirs"):
        seglog.open(dirs[:2])
    for d in dirs[:2]:                                       # nothing written, nothing left locked
        assert read_meta_properties(d)["cluster.id"]
    seglog.open(dirs[0]).close()


def test_a_directory_of_another_broker_is_refused(dirs):
    seglog.open(dirs[0]).close()
    seglog.open(dirs[1], {"broker.id": "3"}).close()
    with pytest.raises(InvalidConfigError, match="doesn't match stored broker.id 3"):
        seglog.open(dirs[:2])


def test_a_partition_in_two_directories_is_refused(dirs):
    with seglog.open(dirs[:2]) as node:
        node.create_topic("t", 1)
    os.makedirs(os.path.join(dirs[1], "t-0"))
    with pytest.raises(StorageError, match="Duplicate log directories for t-0"):
        seglog.open(dirs[:2])


# -- AlterReplicaLogDirs -----------------------------------------------------------------------------------

def test_a_replica_moves_while_it_serves(dirs):
    with seglog.open(dirs[:2]) as node:
        node.create_topic("t", 1, {"segment.bytes": "20000"})
        end = fill(node, "t", 0, 3000)
        node.partition("t", 0).log.delete_records_before(100)
        log = node.partition("t", 0).log
        assert node.alter_replica_log_dirs({("t", 0): dirs[1]}) == {("t", 0): None}
        appended, deadline = 0, time.monotonic() + 60
        while located(node, "t", 0) != dirs[1]:              # appends go on during the copy
            assert time.monotonic() < deadline
            log.append(b"%08d" % (end + appended))
            appended += 1
            time.sleep(0.001)
        assert node.partition("t", 0).log is log and log.path == os.path.join(dirs[1], "t-0")
        assert (log.start_offset, log.end_offset) == (100, end + appended)
        assert values(node, "t", 0) == [b"%08d" % i for i in range(100, end + appended)]
        wait_for(lambda: not [n for n in os.listdir(dirs[0]) if n.startswith("t-0")])     # the old one deleted
        log.append(b"after")
    with seglog.open(dirs[:2]) as node:
        assert located(node, "t", 0) == dirs[1]
        assert node.partition("t", 0).log.get(end + appended).value == b"after"


def test_moving_to_the_current_directory_is_a_no_op_and_errors_are_kafkas(dirs):
    with seglog.open(dirs[:2]) as node:
        node.create_topic("t", 1)
        assert node.alter_replica_log_dirs({("t", 0): dirs[0]}) == {("t", 0): None}
        assert not node._mover.logs()
        done = node.alter_replica_log_dirs({("t", 0): dirs[2], ("t", 5): dirs[1], ("nope", 0): dirs[1],
                                            ("x" * 250, 0): dirs[1], ("t", 1): "relative"})
        assert isinstance(done[("t", 0)], LogDirNotFoundError) and done[("t", 0)].code == 57
        assert isinstance(done[("t", 5)], UnknownTopicOrPartitionError)
        assert isinstance(done[("nope", 0)], UnknownTopicOrPartitionError)
        assert isinstance(done[("x" * 250, 0)], InvalidTopicError)
        assert isinstance(done[("t", 1)], LogDirNotFoundError)


def test_a_replica_not_hosted_here_is_not_available_and_its_dir_is_remembered(dirs):
    with seglog.open(dirs[:2]) as node:
        node.cluster_managed = True
        node.apply_topic("t", uuid.uuid4(), 2, {}, hosted={0})
        done = node.alter_replica_log_dirs({("t", 1): dirs[0]})
        assert isinstance(done[("t", 1)], ReplicaNotAvailableError) and done[("t", 1)].code == 9
        node.apply_topic("t", node.topic("t").topic_id, 2, {}, hosted={0, 1})
        assert located(node, "t", 1) == dirs[0]               # the fewest would have been b


def test_a_new_target_restarts_the_move_and_the_current_dir_cancels_it(dirs):
    with seglog.open(dirs) as node:
        node.create_topic("t", 1)
        fill(node, "t", 0, 20000)
        node.replica_alter_log_dirs_rate = 1
        node.alter_replica_log_dirs({("t", 0): dirs[1]})
        [first] = [n for n in os.listdir(dirs[1]) if n.endswith("-future")]
        node.alter_replica_log_dirs({("t", 0): dirs[2]})
        assert not [n for n in os.listdir(dirs[1]) if n.endswith("-future")]
        assert [n for n in os.listdir(dirs[2]) if n.endswith("-future")]
        described = {d["path"]: d["partitions"] for d in node.describe_log_dirs()}
        assert described[dirs[0]][0][:2] == ("t", 0) and not described[dirs[0]][0][4]
        [(t, p, size, lag, future)] = described[dirs[2]]
        assert (t, p, future) == ("t", 0, True) and lag > 0
        node.alter_replica_log_dirs({("t", 0): dirs[0]})
        assert not node._mover.logs() and not [n for d in dirs for n in os.listdir(d) if n.endswith("-future")]
        node.replica_alter_log_dirs_rate = None
        node.alter_replica_log_dirs({("t", 0): dirs[2]})
        wait_for(lambda: located(node, "t", 0) == dirs[2])
        assert values(node, "t", 0) == [b"%08d" % i for i in range(20000)]


def test_deleting_a_moving_topic_removes_both_logs(dirs):
    with seglog.open(dirs[:2]) as node:
        node.create_topic("t", 1)
        fill(node, "t", 0, 20000)
        node.replica_alter_log_dirs_rate = 1
        node.alter_replica_log_dirs({("t", 0): dirs[1]})
        node.delete_topic("t")
        wait_for(lambda: not [n for d in dirs[:2] for n in os.listdir(d) if n.startswith("t-0")])


def test_a_failed_rename_keeps_the_current_log(dirs):
    with seglog.open(dirs[:2]) as node:
        node.create_topic("t", 1)
        end = fill(node, "t", 0, 500)
        plan = FaultPlan().fail("rename", path="*-future", times=None)
        with plan:
            node.alter_replica_log_dirs({("t", 0): dirs[1]})
            wait_for(lambda: plan.fired and not node._mover.logs())
        assert located(node, "t", 0) == dirs[0] and not node.partition("t", 0).log.closed
        assert node.partition("t", 0).log.end_offset == end
        wait_for(lambda: not os.listdir(dirs[1]) or all(n in (".lock", "meta.properties") for n in os.listdir(dirs[1])))
        node.partition("t", 0).log.append(b"more")


# -- what a crash leaves -----------------------------------------------------------------------------------

def test_leftovers_at_start(dirs):
    with seglog.open(dirs[:2]) as node:
        node.create_topic("t", 3)
        for p in range(3):
            fill(node, "t", p, 100)
    # t-0: a future next to its current one (resumed); t-1: a future whose current was retired (promoted);
    # t-2: a future in its own directory (discarded); a -delete dir (removed)
    seglog.Log(os.path.join(dirs[1], f"t-0.{uuid.uuid4().hex}-future"), topic="t", partition=0).close()
    os.rename(os.path.join(dirs[1], "t-1"), os.path.join(dirs[0], f"t-1.{uuid.uuid4().hex}-future"))
    os.makedirs(os.path.join(dirs[0], f"t-2.{uuid.uuid4().hex}-future"))
    os.makedirs(os.path.join(dirs[1], f"t-9.{uuid.uuid4().hex}-delete"))
    with seglog.open(dirs[:2]) as node:
        wait_for(lambda: located(node, "t", 0) == dirs[1])
        assert located(node, "t", 1) == dirs[0] and located(node, "t", 2) == dirs[0]
        for p in range(3):
            assert values(node, "t", p) == [b"%08d" % i for i in range(100)]
        assert node.topics() == ["t"]
        wait_for(lambda: sorted(n for d in dirs[:2] for n in os.listdir(d) if "." in n and n != ".lock"
                                and not n.endswith("properties") and not n.endswith(".json")) == [])


CHILD = textwrap.dedent("""
    import os, sys, time
    import seglog
    from seglog.faults import FaultPlan
    a, b, mode = sys.argv[1:]
    node = seglog.open([a, b])
    if mode == "copy":
        node.replica_alter_log_dirs_rate = 200_000
    plan = FaultPlan()
    if mode == "swap":
        plan.delay("rename", 60.0, path="*-future")
        plan.install()
    node.alter_replica_log_dirs({("t", 0): b})
    print("moving", flush=True)
    time.sleep(120)
""")


@pytest.mark.parametrize("mode", ["copy", "swap"])
def test_kill_9_during_a_move_loses_nothing(dirs, mode):
    a, b = dirs[:2]
    with seglog.open([a, b]) as node:
        node.create_topic("t", 1, {"segment.bytes": "1000000"})
        end = fill(node, "t", 0, 50000)                      # 5 MB: copied at 200 kB/s after the first MiB
    child = subprocess.Popen([sys.executable, "-c", CHILD, a, b, mode], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "moving"
        futures = lambda: [n for n in os.listdir(b) if n.endswith("-future")]   # noqa: E731
        if mode == "copy":                                  # part of the log copied
            wait_for(lambda: futures() and any(
                f.endswith(".log") and os.path.getsize(os.path.join(b, futures()[0], f)) > 0
                for f in os.listdir(os.path.join(b, futures()[0]))))
        else:                                               # the current log retired, the future not renamed yet
            wait_for(lambda: [n for n in os.listdir(a) if n.endswith("-delete")])
            assert futures()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    with seglog.open([a, b]) as node:
        wait_for(lambda: located(node, "t", 0) == b)
        assert values(node, "t", 0) == [b"%08d" % i for i in range(end)]


def test_a_future_log_that_cannot_be_created_is_a_storage_error(dirs):
    with seglog.open(dirs[:2]) as node:
        node.create_topic("t", 1)
        with FaultPlan().fail("open", 13, path=f"{dirs[1]}/t-0.*-future/*", times=None):
            done = node.alter_replica_log_dirs({("t", 0): dirs[1]})
        assert isinstance(done[("t", 0)], StorageError) and done[("t", 0)].code == 56
        assert not node._mover.logs() and located(node, "t", 0) == dirs[0]
        assert not [n for n in os.listdir(dirs[1]) if n.endswith("-future")]
        node.partition("t", 0).log.append(b"still serving")


def test_no_move_starts_or_goes_on_once_a_log_dir_failed(dirs):
    with seglog.open(dirs[:2]) as node:
        node.create_topic("t", 2)
        fill(node, "t", 0, 20000)
        node.replica_alter_log_dirs_rate = 1
        node.alter_replica_log_dirs({("t", 0): dirs[1]})
        node.fail_log_dir(StorageError("No space left on device", dirs[0], 28))
        done = node.alter_replica_log_dirs({("t", 1): dirs[0]})
        assert isinstance(done[("t", 1)], StorageError) and "is offline" in str(done[("t", 1)])
        node.replica_alter_log_dirs_rate = None
        time.sleep(0.3)
        assert located(node, "t", 0) == dirs[0] and node._mover.logs()


def test_lock_free_reads_answer_throughout_the_swap(dirs):
    import threading
    with seglog.open(dirs[:2]) as node:
        node.create_topic("t", 1)
        log = node.partition("t", 0).log
        moves, seen, errors, stop = 0, set(), [], threading.Event()

        def read():
            while not stop.is_set():
                try:
                    seen.add((log.start_offset, log.end_offset, log.high_watermark, log.leader_epoch))
                except Exception as e:          # noqa: BLE001 - any error is the failure
                    errors.append(e)
                    return

        end = fill(node, "t", 0, 1000)
        reader = threading.Thread(target=read)
        reader.start()
        try:
            for target in dirs[1], dirs[0], dirs[1], dirs[0], dirs[1]:
                node.alter_replica_log_dirs({("t", 0): target})
                wait_for(lambda: located(node, "t", 0) == target and not node._mover.logs())
                moves += 1
        finally:
            stop.set()
            reader.join()
        assert not errors and moves == 5
        assert seen == {(0, end, end, 0)}

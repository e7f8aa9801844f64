"""Compaction crash safety: a subprocess compacting a log is killed with SIGKILL, then the log is reopened.

Two ways to pick the moment:
- at every step of the swap protocol: the child watches renames through the engine's file-call seam and kills
  itself (SIGKILL) just before the N-th one (work dir -> .cleaned, .cleaned -> .swap, old segments -> .deleted, .swap -> final
  names, the cleaner checkpoint; see crash_points for which N), and once more after the pass completed;
- at random times while a child appends and compacts in a loop (mostly lands while cleaned segments are written).

After each crash the reopened log must hold only records that were written (same offset, key, value), in
increasing offsets, and every key's last record must be the model's latest (a key whose latest record is a
tombstone may instead be gone entirely): the latest value is readable exactly once and no older value is
resurrected. Later passes, past the delete horizon, must then leave exactly the latest live value per key.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from seglog.config import LogConfig
from seglog.log import Log
from seglog.scheduler import Scheduler

pytestmark = pytest.mark.slow          # crash loops: several subprocesses per test

T0 = 1_700_000_000_000
RETENTION = 1000                      # delete.retention.ms
CONFIG = dict(segment_bytes=8192, cleanup_policy=("compact",), delete_retention_ms=RETENTION)

CHILD = r"""
import json, os, signal, sys
from seglog.config import LogConfig
from seglog.log import Log
from seglog.scheduler import Scheduler

config = LogConfig(**json.loads(sys.argv[2]))
mode = sys.argv[1]
if mode == "hook":
    path, crash_at, now = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    log = Log(path, config, scheduler=Scheduler())
    calls = []

    def hook(op, src, nbytes, dst):
        if op == "rename":
            calls.append([os.path.basename(src), os.path.basename(dst)])
            if len(calls) == crash_at:
                os.kill(os.getpid(), signal.SIGKILL)

    from seglog import _engine
    _engine.set_fault_handler(hook)
    result = log.compact(now_ms=now)
    print(json.dumps({"calls": calls, "groups": result.groups, "aborted": result.aborted}), flush=True)
    os._exit(0)                        # no close(): the directory stays as a crash right after the pass leaves it
else:
    path, keys, rounds, per_round = sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    sys.path.insert(0, os.path.dirname(sys.argv[7]))
    from test_compaction_crash import T0 as t0, generated
    log = Log(path, config, scheduler=Scheduler())
    for r in range(rounds):
        first = log.end_offset
        batch = [generated(o, keys) for o in range(first, first + per_round)]
        log.append_batch([v for _, v in batch], keys=[k for k, _ in batch],
                         timestamps=list(range(t0 + first, t0 + first + per_round)))
        log.roll()
        log.compact(now_ms=t0 + first + per_round)
        print(r, flush=True)
    log.close()
"""


def generated(offset: int, keys: int):
    """The record the loop child writes at `offset`: (key, value); every 11th is a tombstone."""
    key = b"key-%05d" % ((offset * 7919 + offset // 3) % keys)
    return key, (None if offset % 11 == 0 else b"value-%d-" % offset + b"." * (offset % 37))


def run_child(*args, timeout=60):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, "-c", CHILD, *map(str, args)], env=env, capture_output=True,
                          timeout=timeout, text=True)


def crash_points(calls) -> list[int]:
    """Which calls to die before (1-based): in every run of consecutive renames of one kind (work -> .cleaned,
    .cleaned -> .swap, old -> .deleted, .swap -> final, checkpoint), the first, second, middle and last one;
    plus len(calls) + 1, after the whole pass. Other calls inside a run leave states of the same shape."""
    def kind(call):                    # the protocol stage: what the rename moves files to
        src, dst = (os.path.splitext(name)[1] for name in call)
        return "final" if src == ".swap" else dst
    points, i = {len(calls) + 1}, 0
    while i < len(calls):
        j = i
        while j + 1 < len(calls) and kind(calls[j + 1]) == kind(calls[i]):
            j += 1
        points |= {i + 1, min(i + 2, j + 1), (i + j) // 2 + 1, j + 1}
        i = j + 1
    return sorted(points)


def check_after_crash(path, model: dict[int, tuple]):
    """Reopen; check the invariants of the module docstring against model (offset -> (key, value)). Returns
    the reopened log's records as (offset, key, value)."""
    with Log(str(path), LogConfig(**CONFIG), scheduler=Scheduler()) as log:
        got = [(r.offset, r.key, r.value) for r in log.records()]
        end = log.end_offset
        names = os.listdir(path)
    assert not [n for n in names if n.endswith((".swap", ".cleaned", ".deleted"))], names
    assert ".cleaner" not in names
    stems = {n[:20] for n in names if n.endswith(".log")}
    orphans = [n for n in names if n.endswith((".index", ".timeindex")) and n[:20] not in stems]
    assert not orphans, f"index files without their .log: {orphans}"
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets)), "offsets must increase, none twice"
    for off, key, value in got:
        assert model[off] == (key, value), f"record at {off} was never written"
    latest = {}
    for off in sorted(model):
        if off < end:
            latest[model[off][0]] = off
    last_seen = {}
    for off, key, _ in got:
        last_seen[key] = off
    for key, off in latest.items():
        if model[off][1] is None:
            assert last_seen.get(key) in (None, off), f"{key}: older record {last_seen.get(key)} resurrected"
        else:
            assert last_seen.get(key) == off, f"{key}: latest {off} missing (last seen {last_seen.get(key)})"
    return got


def settle_and_check(path, model: dict[int, tuple], now: int):
    """Two more passes past every delete horizon: only the latest live value of each key may remain."""
    with Log(str(path), LogConfig(**CONFIG), scheduler=Scheduler()) as log:
        log.roll()
        end = log.end_offset
        for step in (0, 2 * RETENTION + 1, 4 * RETENTION + 2):
            assert log.compact(now_ms=now + step).aborted is None
        got = [(r.offset, r.key, r.value) for r in log.records()]
    latest = {}
    for off in sorted(model):
        if off < end:
            latest[model[off][0]] = off
    want = sorted((off, model[off][0], model[off][1]) for off in latest.values() if model[off][1] is not None)
    assert got == want


# ------------------------------------------------------------------------------------- every step of a pass

@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A cleanly closed log: 480 records over 30 keys (some deleted) in 12 small segments, compacted once at
    T0 (tombstones then carry a delete horizon of T0 + RETENTION), then 480 more records over 20 of the keys
    (tombstones among them) in 12 more segments. A pass at T0 + 10 * RETENTION rewrites everything in two or more
    groups of several segments: old tombstones of the 10 untouched keys are dropped, older values superseded."""
    path = tmp_path_factory.mktemp("template") / "t-0"
    rng = random.Random(42)
    model = {}
    with Log(str(path), LogConfig(**CONFIG), scheduler=Scheduler()) as log:
        for phase, keys in ((0, 30), (1, 20)):
            for i in range(480):
                key = b"k%02d" % rng.randrange(keys)
                value = None if rng.randrange(6) == 0 else b"v%d-%d" % (phase, i) + b"#" * rng.randrange(30)
                off = log.append(value, key=key, timestamp=T0 + len(model))
                model[off] = (key, value)
                if (i + 1) % 40 == 0:
                    log.roll()
            if phase == 0:
                assert log.compact(now_ms=T0).aborted is None
        log.append(b"active", key=b"k00", timestamp=T0 + len(model))
        model[log.end_offset - 1] = (b"k00", b"active")
    return path, model


def test_crash_at_every_step_of_the_swap(template, tmp_path):
    path, model = template
    now = T0 + 10 * RETENTION
    dry = tmp_path / "dry" / "t-0"
    shutil.copytree(path, dry)
    out = run_child("hook", json.dumps(CONFIG), dry, 0, now)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    calls = info["calls"]
    assert info["groups"] >= 2 and info["aborted"] is None
    kinds = {(os.path.splitext(src)[1], os.path.splitext(dst)[1]) for src, dst in calls}
    assert {(".log", ".cleaned"), (".cleaned", ".swap"), (".log", ".deleted"), (".swap", ".log"),
            (".tmp", "")} <= kinds, calls
    full = check_after_crash(dry, model)
    assert len(full) < len(model) // 4
    print(f"{len(calls)} renames in {info['groups']} groups")

    def crash_at(n):
        d = tmp_path / f"crash-{n}" / "t-0"
        shutil.copytree(path, d)
        res = run_child("hook", json.dumps(CONFIG), d, n, now)
        return n, d, res

    points = crash_points(calls)
    assert len(points) >= 20
    print(f"{len(points)} crash points")
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(crash_at, points))
    for n, d, res in runs:
        step = calls[n - 1] if n <= len(calls) else "after the pass"
        if n <= len(calls):
            assert res.returncode == -signal.SIGKILL, (n, step, res.returncode, res.stderr)
        try:
            check_after_crash(d, model)
            settle_and_check(d, model, now)
        except AssertionError as e:
            raise AssertionError(f"crash before rename #{n} {step}: {e}") from None


def test_swap_committed_but_old_segments_still_present(template, tmp_path):
    """The state right after the commit point, built by hand: .swap files next to every old segment."""
    path, model = template
    now = T0 + 10 * RETENTION
    runs = run_child("hook", json.dumps(CONFIG), shutil.copytree(path, tmp_path / "dry" / "t-0"), 0, now)
    calls = json.loads(runs.stdout)["calls"]
    first_delete = next(i for i, (s, d) in enumerate(calls) if d.endswith(".deleted")) + 1
    d = shutil.copytree(path, tmp_path / "c" / "t-0")
    res = run_child("hook", json.dumps(CONFIG), d, first_delete, now)
    assert res.returncode == -signal.SIGKILL
    names = os.listdir(d)
    swaps = [n for n in names if n.endswith(".swap")]
    assert sorted(os.path.splitext(os.path.splitext(n)[0])[1] for n in swaps) == [".index", ".log", ".timeindex"]
    base = swaps[0][:20]
    assert base + ".log" in names                      # the old segment the swap replaces is still there
    check_after_crash(d, model)
    settle_and_check(d, model, now)


# --------------------------------------------------------------------------------------- kill -9 at random

@pytest.mark.parametrize("delay", [0.5, 0.9, 1.4])
def test_kill_9_while_appending_and_compacting(tmp_path, delay):
    keys, rounds, per_round = 2000, 100_000, 8000       # the child runs until it is killed
    path = tmp_path / "t-0"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    child = subprocess.Popen([sys.executable, "-c", CHILD, "loop", json.dumps(dict(CONFIG, segment_bytes=256 << 10)),
                              str(path), str(keys), str(rounds), str(per_round), os.path.abspath(__file__)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = child.stdout.readline()                # the first round compacted: kill somewhere after it
        assert first.strip() == "0", child.stderr.read()
        time.sleep(delay)
        assert child.poll() is None, child.stderr.read()
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    config = LogConfig(**dict(CONFIG, segment_bytes=256 << 10))
    with Log(str(path), config, scheduler=Scheduler()) as log:
        end = log.end_offset
        got = [(r.offset, r.key, r.value) for r in log.records()]
    assert end > per_round
    model = {o: generated(o, keys) for o in range(end)}
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets))
    assert all(model[o] == (k, v) for o, k, v in got)
    latest = {}
    for o in range(end):
        latest[model[o][0]] = o
    last_seen = {k: o for o, k, _ in got}
    for key, off in latest.items():
        if model[off][1] is None:
            assert last_seen.get(key) in (None, off)
        else:
            assert last_seen.get(key) == off
    with Log(str(path), config, scheduler=Scheduler()) as log:
        log.roll()
        now = T0 + end
        for step in (0, 2 * RETENTION + 1, 4 * RETENTION + 2):
            assert log.compact(now_ms=now + step).aborted is None
        final = [(r.offset, r.key, r.value) for r in log.records()]
    assert final == sorted((o, model[o][0], model[o][1]) for o in latest.values() if model[o][1] is not None)

"""A full disk (a 2 MiB tmpfs) and a file size limit (RLIMIT_FSIZE): the failing append raises StorageError
with the errno, the process survives (no SIGBUS/SIGXFSZ), nothing of the failed call is visible, earlier data
reads fine, appends work again once there is room, and a reopen shows every acknowledged record.

Each scenario runs in helpers/disk_full_child.py, its own process, and reports what it saw as JSON."""

import errno
import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.disk_full_child import AFTER

CHILD = Path(__file__).resolve().parents[1] / "helpers" / "disk_full_child.py"


def run_scenario(scenario: str, directory) -> dict:
    res = subprocess.run([sys.executable, str(CHILD), scenario, str(directory)], capture_output=True, timeout=120)
    assert res.returncode == 0, f"scenario {scenario} exited with {res.returncode} " \
                                f"(negative: killed by that signal):\n{res.stderr.decode()}"
    return json.loads(res.stdout)


def check_report(r: dict, expected_errno: int) -> None:
    assert r["errno"] == expected_errno, f"no StorageError with errno {expected_errno}: {r}"
    assert r["acked"] > 0
    assert r["end_after_error"] == r["acked"], "records of the failed call are visible"
    assert r["read_problem"] is None, "records acknowledged before the error do not read back"
    assert r["after_free_problem"] is None, "appends fail once there is room again"
    assert r["end_after_free"] == r["acked"] + AFTER
    assert r["reopen_problem"] is None and r["reopen_end"] == r["acked"] + AFTER


def test_append_batch_on_a_full_disk(mount_tmpfs):
    check_report(run_scenario("batches", mount_tmpfs("2m")), errno.ENOSPC)


@pytest.mark.xfail(strict=True, reason="known gap: while the disk is full, a read of a Log holding returned but "
                   "unwritten append() records first tries to write them and fails with StorageError, instead of "
                   "serving what the segments hold (the records are kept in the append journal)")
def test_buffered_appends_on_a_full_disk(mount_tmpfs):
    check_report(run_scenario("records", mount_tmpfs("2m")), errno.ENOSPC)


def test_every_amount_of_space_left_fails_cleanly(mount_tmpfs):
    runs = run_scenario("sweep", mount_tmpfs("2m"))["runs"]
    bad = []
    for r in runs:
        try:
            check_report(r, errno.ENOSPC)
        except AssertionError as e:
            bad.append(f"{r['spare']} bytes left: {e}")
    assert not bad, "\n".join(bad[:5])


def test_file_size_limit(tmp_path):
    check_report(run_scenario("rlimit", tmp_path), errno.EFBIG)

"""A short run of every fuzz target (tests/fuzz; the long runs: `python -m tests.fuzz all`, tests/fuzz/README.md).

Each target runs a few thousand inputs under atheris (the plain mutation loop where atheris is missing), on
the regular engine build: a finding (an exception other than the target's allowed errors, a crash, RSS over
the limit) fails the run."""

import os
import subprocess
import sys

import pytest

from tests.cluster_harness import seglog_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("target", ["batch", "records", "codecs", "frame", "sasl"])
def test_fuzz_target_short_run(target, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tests.fuzz", target, "--runs", "3000", "--no-trace-cmp",
                           "--rss-limit-mb", "512", "--artifacts", str(tmp_path)],
                          cwd=ROOT, env=seglog_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert f"{target}: 3000 runs, 0 crashes" in proc.stdout, proc.stdout
    assert os.listdir(tmp_path) == []                # no crash-/oom-/leak- artifact

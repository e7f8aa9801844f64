"""The engine compiles without compiler warnings: a warning such as "may be used uninitialized" or a
signed/unsigned comparison points at Cython code whose control flow or types the C compiler cannot follow."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_engine_compiles_without_warnings(tmp_path):
    done = subprocess.run([sys.executable, "setup.py", "build_ext", "--force", "--build-temp", str(tmp_path / "temp"),
                           "--build-lib", str(tmp_path / "lib")], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=dict(os.environ, CFLAGS="-g0"))
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "_engine.c" in output                       # the compiler ran on the engine: its output is here
    warnings = [line for line in output.splitlines() if "warning:" in line]
    assert not warnings, "\n".join(warnings)

"""The package as users get it: a wheel built from this tree, installed into a fresh virtual environment with
no compiler on the PATH, runs append/read/recover and the CLI; the sdist carries every engine source."""

import glob
import os
import subprocess
import sys
import tarfile
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.slow

SMOKE = textwrap.dedent("""
    import os, sys
    import seglog
    from seglog import Log, LogConfig, _engine
    assert seglog.__file__.startswith(sys.prefix), seglog.__file__      # the installed copy, not the tree
    assert _engine.crc32c(b"123456789") == 0xE3069283
    path = sys.argv[1]
    with Log(path, LogConfig(segment_bytes=1 << 16)) as log:
        log.append_batch([b"%d" % i for i in range(20000)], compression="lz4")
        log.append(b"last", key=b"k")
        log.flush()
        assert log.segment_count > 1
    open(os.path.join(path, ".clean-shutdown"), "w").close()
    os.remove(os.path.join(path, ".clean-shutdown"))                    # reopen as after a crash
    with Log(path) as log:
        assert not log.recovery.clean_shutdown
        assert log.end_offset == 20001
        assert [r.value for r in log.records(19999)] == [b"19999", b"last"]
    print("smoke ok")
""")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), ROOT],
                   check=True, timeout=600)
    [whl] = glob.glob(str(out / "seglog-*.whl"))
    return whl


def test_wheel_installs_and_runs_without_a_compiler(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    # dependencies come from the outer environment; the wheel itself must need no build step
    env = dict(os.environ, PATH=str(venv / "bin") + ":/usr/bin:/bin", CC="false", CXX="false", LDSHARED="false")
    env.pop("PYTHONPATH", None)
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", wheel],
                   check=True, env=env, timeout=300)
    run = subprocess.run([py, "-c", SMOKE, str(tmp_path / "t-0")], capture_output=True, text=True,
                         env=env, cwd=str(tmp_path), timeout=300)
    assert run.returncode == 0, run.stderr
    assert "smoke ok" in run.stdout
    demo = subprocess.run([str(venv / "bin" / "seglog"), "demo", "--records", "20000", "--data-dir",
                           str(tmp_path / "demo")], capture_output=True, text=True, env=env, timeout=300)
    assert demo.returncode == 0, demo.stderr
    assert "verified: every record read back once" in demo.stdout
    dump = subprocess.run([str(venv / "bin" / "seglog"), "dump-log", "--print-payload",
                           str(tmp_path / "t-0" / "00000000000000000000.log")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert dump.returncode == 0 and "payload: 0" in dump.stdout


def test_wheel_contents(wheel):
    import zipfile
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("seglog/_engine.") and n.endswith(".so") for n in names)
    assert "seglog/log.py" in names and "seglog/errors.py" in names
    assert not any(n.startswith(("engine/", "pyapi/", "tests/")) for n in names)


def test_sdist_carries_the_engine_sources(tmp_path):
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", str(tmp_path), ROOT],
                   check=True, capture_output=True, timeout=300)
    [sdist] = glob.glob(str(tmp_path / "seglog-*.tar.gz"))
    names = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
    for f in os.listdir(os.path.join(ROOT, "src", "engine")):
        if f.endswith((".pyx", ".pxd", ".pxi", ".h")) or f == "crc32c_impl.c":
            assert f"src/engine/{f}" in names, f
    assert {"setup.py", "pyproject.toml", "README.md", "src/pyapi/log.py"} <= names

"""The package as users get it. One build, the way PyPA's `build` makes releases: the sdist of this tree is
built into a wheel with `pip wheel` (so the sdist alone is proven to build), `auditwheel repair` turns it into
a manylinux wheel, and that wheel, installed into a fresh virtual environment with no compiler on the PATH,
runs wheels/smoke.py (append/roll/recover/read with every codec, the `seglog` command). The extension compiles
once, with CFLAGS=-g0 as the release wheels are ([tool.cibuildwheel] environment); the module takes ~1 min."""

import glob
import importlib.resources
import json
import os
import platform
import re
import subprocess
import sys
import tarfile
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMOKE = os.path.join(ROOT, "wheels", "smoke.py")
pytestmark = pytest.mark.slow


def run(cmd, **kwargs) -> subprocess.CompletedProcess:
    """Run a command, failing the test with its output when it fails."""
    kwargs.setdefault("timeout", 600)
    done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def sdist(tmp_path_factory):
    out = tmp_path_factory.mktemp("sdist")
    run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", str(out), ROOT])
    [path] = glob.glob(str(out / "seglog-*.tar.gz"))
    return path


@pytest.fixture(scope="module")
def wheel(sdist, tmp_path_factory):
    """Built from the sdist tarball, not from the tree."""
    out = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), sdist],
        env=dict(os.environ, CFLAGS="-g0"))
    [path] = glob.glob(str(out / "seglog-*.whl"))
    return path


@pytest.fixture(scope="module")
def repaired(wheel, tmp_path_factory):
    out = tmp_path_factory.mktemp("repaired")
    run([sys.executable, "-m", "auditwheel", "repair", "-w", str(out), wheel])
    [path] = glob.glob(str(out / "seglog-*.whl"))
    return path


def test_sdist_carries_the_engine_sources(sdist):
    names = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
    for f in os.listdir(os.path.join(ROOT, "src", "engine")):
        if f.endswith((".pyx", ".pxd", ".pxi", ".h")) or f == "crc32c_impl.c":
            assert f"src/engine/{f}" in names, f
    assert {"setup.py", "pyproject.toml", "README.md", "src/pyapi/log.py"} <= names


def test_wheel_contents(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("seglog/_engine.") and n.endswith(".so") for n in names)
    assert "seglog/log.py" in names and "seglog/errors.py" in names
    assert not any(n.startswith(("engine/", "pyapi/", "tests/", "bench/", "wheels/")) for n in names)


def _needed_libraries(so_bytes: bytes) -> set[str]:
    import io

    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    elf = ELFFile(io.BytesIO(so_bytes))
    return {tag.needed for section in elf.iter_sections() if isinstance(section, DynamicSection)
            for tag in section.iter_tags() if tag.entry.d_tag == "DT_NEEDED"}


def test_repaired_wheel_is_manylinux_and_self_contained(repaired):
    name = os.path.basename(repaired)
    platforms = name[:-len(".whl")].split("-")[-1].split(".")
    machine = platform.machine()
    assert platforms and all(re.fullmatch(rf"manylinux(_\d+_\d+|\d+)_{machine}", p) for p in platforms), name
    show = run([sys.executable, "-m", "auditwheel", "show", repaired]).stdout
    m = re.search(r'consistent\s+with\s+the\s+following\s+platform\s+tag:\s+"([^"]+)"', show)
    assert m and m.group(1) in platforms, show

    # nothing grafted, and the extension links only libraries the manylinux policy guarantees
    whl = zipfile.ZipFile(repaired)
    assert not [n for n in whl.namelist() if n.startswith("seglog.libs/")]
    policies = json.loads(importlib.resources.files("auditwheel.policy").joinpath("manylinux-policy.json").read_text())
    tag = next(p for p in platforms if p.startswith("manylinux_"))
    policy_name = tag[:-len(machine) - 1]
    [policy] = [p for p in policies if p["name"] == policy_name]
    sos = [n for n in whl.namelist() if n.endswith(".so")]
    assert sos
    for so in sos:
        needed = _needed_libraries(whl.read(so))
        assert needed and needed <= set(policy["lib_whitelist"]), (so, needed)
    wheel_meta = whl.read(next(n for n in whl.namelist() if n.endswith(".dist-info/WHEEL"))).decode()
    assert f"-{tag}" in wheel_meta, wheel_meta


def test_repaired_wheel_installs_and_runs_without_a_compiler(repaired, tmp_path):
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)])
    py = str(venv / "bin" / "python")
    # runtime dependencies come from the outer environment; the wheel itself must need no build step
    env = dict(os.environ, PATH=str(venv / "bin") + ":/usr/bin:/bin", CC="false", CXX="false", LDSHARED="false")
    env.pop("PYTHONPATH", None)
    run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--ignore-installed", repaired],
        env=env, timeout=300)
    done = run([py, SMOKE, str(tmp_path / "smoke")], env=env, cwd=str(tmp_path), timeout=300)
    assert "smoke ok" in done.stdout

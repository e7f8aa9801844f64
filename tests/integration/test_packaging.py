"""The package as users get it. One build, the way PyPA's `build` makes releases: the sdist of this tree is
built into a wheel with `pip wheel` (so the sdist alone is proven to build), `auditwheel repair` turns it into
a manylinux wheel, and that wheel is installed the way users install it: `pip install` into a fresh virtual
environment without the system's site-packages and with no compiler on the PATH, so pip resolves the wheel's
declared dependencies itself (from the index pip is configured with). There it runs wheels/smoke.py
(append/roll/recover/read with every codec, the `seglog` command), and `import seglog` must not even try to
import a library only an extra needs. The extension compiles once, with CFLAGS=-g0 as the release wheels are
([tool.cibuildwheel] environment), and that one compilation must print no compiler warning; the module takes
~1 min."""

import email.parser
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

RUNTIME_DEPENDENCIES = {"lz4", "cramjam"}                 # [project] dependencies: all a plain install brings
EXTRAS = {"cluster", "spark", "bench", "test"}
OPTIONAL_LIBRARIES = {"pyarrow", "pyspark", "numpy", "pandas", "kazoo"}   # only ever behind an extra

# Run by the venv's interpreter: imports seglog with a finder in front of every other one that records each
# attempt to import an optional library (even one caught by `except ImportError`), then prints what happened.
IMPORT_CHECK = r"""
import json, sys
OPTIONAL = set(sys.argv[1].split(","))
tried = []
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in OPTIONAL:
            tried.append(name)
        return None
sys.meta_path.insert(0, Spy())
import seglog
seglog.Log, seglog.LogConfig, seglog.open, seglog.Producer, seglog.Consumer
loaded = sorted(m for m in sys.modules if m.split(".")[0] in OPTIONAL)
print(json.dumps({"file": seglog.__file__, "tried": tried, "loaded": loaded}))
"""


def _name(requirement: str) -> str:
    """The normalized project name of a Requires-Dist value ("lz4>=4.3", "kazoo>=2.9; extra == 'cluster'")."""
    return re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip()).group(0).lower().replace("_", "-")


def _wheel_metadata(wheel_path: str):
    whl = zipfile.ZipFile(wheel_path)
    text = whl.read(next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    return email.parser.Parser().parsestr(text)


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
def wheel_build(sdist, tmp_path_factory):
    """Built from the sdist tarball, not from the tree: (the wheel's path, the build's output)."""
    out = tmp_path_factory.mktemp("wheel")
    done = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-v", "-w", str(out),
                sdist], env=dict(os.environ, CFLAGS="-g0"))
    [path] = glob.glob(str(out / "seglog-*.whl"))
    return path, done.stdout + done.stderr


@pytest.fixture(scope="module")
def wheel(wheel_build):
    return wheel_build[0]


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


def test_engine_compiles_without_warnings(wheel_build):
    """A warning such as "may be used uninitialized" or a signed/unsigned comparison points at Cython code whose
    control flow or types the C compiler cannot follow."""
    output = wheel_build[1]
    assert "_engine.c" in output                       # the compiler ran on the engine: its output is here
    warnings = [line for line in output.splitlines() if re.search(r":\d+:(\d+:)? warning:", line)]   # the compiler's
    assert not warnings, "\n".join(warnings)


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


def test_wheel_requires_only_the_runtime_dependencies(repaired):
    meta = _wheel_metadata(repaired)
    requires = meta.get_all("Requires-Dist") or []
    core = [r for r in requires if not re.search(r"extra\s*==", r)]
    assert {_name(r) for r in core} == RUNTIME_DEPENDENCIES, core
    assert len(core) == len(RUNTIME_DEPENDENCIES), core
    assert set(meta.get_all("Provides-Extra") or []) == EXTRAS
    for r in requires:                              # the heavy libraries come only with an extra
        if _name(r) in OPTIONAL_LIBRARIES:
            assert re.search(r"extra\s*==", r), r
    spark = {_name(r) for r in requires if re.search(r"""extra\s*==\s*['"]spark['"]""", r)}
    assert {"pyspark", "pyarrow"} <= spark, requires


def test_repaired_wheel_installs_and_runs_without_a_compiler(repaired, tmp_path):
    venv = tmp_path / "venv"
    # no --system-site-packages: the wheel's own Requires-Dist must bring everything the smoke test needs
    run([sys.executable, "-m", "venv", str(venv)])
    py = str(venv / "bin" / "python")
    # no compiler: a dependency without a wheel for this platform, or the wheel itself, cannot build anything
    env = dict(os.environ, PATH=str(venv / "bin") + ":/usr/bin:/bin", CC="false", CXX="false", LDSHARED="false")
    for var in ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PIP_NO_DEPS", "PIP_TARGET", "PIP_PREFIX",
                "PIP_USER", "PIP_REQUIRE_VIRTUALENV"):
        env.pop(var, None)
    # dependencies resolved by pip from the index and find-links it is configured with (pip config, PIP_*)
    run([py, "-m", "pip", "install", "-q", "--only-binary=:all:", repaired], env=env, timeout=300)
    listed = json.loads(run([py, "-m", "pip", "list", "--format=json"], env=env).stdout)
    installed = {p["name"].lower().replace("_", "-") for p in listed} - {"pip", "setuptools", "wheel"}
    assert installed == {"seglog"} | RUNTIME_DEPENDENCIES, installed
    done = run([py, SMOKE, str(tmp_path / "smoke")], env=env, cwd=str(tmp_path), timeout=300)
    assert "smoke ok" in done.stdout

    # `import seglog` tries no optional library (the spy sees attempts that an `except ImportError` would hide)
    check = json.loads(run([py, "-c", IMPORT_CHECK, ",".join(sorted(OPTIONAL_LIBRARIES))], env=env,
                           cwd=str(tmp_path)).stdout)
    assert check["file"].startswith(str(venv)), check
    assert check["tried"] == [] and check["loaded"] == [], check


def test_import_seglog_loads_no_optional_library_where_they_are_installed(repaired, tmp_path):
    """The same import, in a venv that sees this environment's packages (pyarrow, pyspark, pandas, ... when
    the test extras are installed): none of them may end up in sys.modules."""
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)])
    py = str(venv / "bin" / "python")
    env = dict(os.environ, PATH=str(venv / "bin") + ":/usr/bin:/bin")
    env.pop("PYTHONPATH", None)
    run([py, "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed", repaired], env=env, timeout=300)
    probe = ("import importlib.util, sys\n"
             "print(','.join(m for m in sys.argv[1].split(',') if importlib.util.find_spec(m)))")
    available = run([py, "-c", probe, ",".join(sorted(OPTIONAL_LIBRARIES))], env=env).stdout.strip()
    code = IMPORT_CHECK.replace("sys.meta_path.insert(0, Spy())", "")      # imports happen for real here
    check = json.loads(run([py, "-c", code, ",".join(sorted(OPTIONAL_LIBRARIES))], env=env,
                           cwd=str(tmp_path)).stdout)
    assert check["file"].startswith(str(venv)), check
    assert check["loaded"] == [], (check, f"installed here: {available}")

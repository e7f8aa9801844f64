"""The machine and software a benchmark run measured: CPU, cores, RAM, kernel, the file system of the bench
directory, load, and the versions of Python, seglog and every compared library."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sqlite3
import subprocess

from bench import suite


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _mem_total() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


def _mount_of(path: str) -> tuple[str, str, str]:
    """(device, fs type, options) of the mount holding path, from /proc/mounts (longest matching prefix)."""
    path = os.path.realpath(path)
    best = ("?", "?", "?", "")
    with open("/proc/mounts") as f:
        for line in f:
            dev, mnt, fstype, opts = line.split()[:4]
            mnt = mnt.replace("\\040", " ")
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best[3]):
                best = (dev, fstype, opts, mnt)
    return best[0], best[1], best[2]


def _hypervisor() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return "virtual machine" if " hypervisor" in f.read() else "bare metal"
    except OSError:
        return "?"


def describe(bench_dir: str) -> list[tuple[str, str]]:
    os.makedirs(bench_dir, exist_ok=True)
    dev, fstype, opts = _mount_of(bench_dir)
    st = os.statvfs(bench_dir)
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    u = platform.uname()
    return [
        ("CPU", f"{_cpu_model()} ({_hypervisor()})"),
        ("cores", f"{os.cpu_count()} logical, {affinity} usable by this process"),
        ("RAM", f"{_mem_total() / (1 << 30):.1f} GiB"),
        ("kernel", f"{u.system} {u.release} {u.machine}"),
        ("bench dir", f"{bench_dir}: {fstype} on {dev} ({opts}), {st.f_bavail * st.f_frsize / (1 << 30):.0f} GiB free"),
        ("load average at start", " / ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1/5/15 min)"),
    ]


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", "-C", suite.REPO_DIR, *args], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _where(path: str) -> str:
    """A directory as seen from the bench tree: relative inside it (a development checkout), else "site-packages"
    (an installed wheel) or the path itself."""
    rel = os.path.relpath(path, suite.REPO_DIR)
    if not rel.startswith(".."):
        return f"this tree's {rel}"
    return "site-packages (an installed wheel)" if "site-packages" in path else path


def versions(libraries: list[str]) -> list[tuple[str, str]]:
    import seglog
    commit = _git("rev-parse", "--short", "HEAD")
    dirty = " + uncommitted changes" if _git("status", "--porcelain", "--untracked-files=no") else ""
    out = [
        ("Python", f"{platform.python_implementation()} {platform.python_version()} ({platform.python_compiler()})"),
        ("seglog", f"{seglog.__version__} imported from " + _where(os.path.dirname(seglog.__file__))),
        ("bench tree", f"git {commit}{dirty}" if commit else "not a git checkout"),
        ("sqlite3 (library)", sqlite3.sqlite_version),
    ]
    seen = set()
    for name in ["Cython", "lz4", "cramjam", "matplotlib", *libraries]:
        if name.lower() not in seen:
            seen.add(name.lower())
            out.append((name, _dist_version(name)))
    return out

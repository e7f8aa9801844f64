"""Run the Debian ``zookeeper`` package as a plain standalone process on 127.0.0.1 (no systemd, no root).

The Debian package (``zookeeper`` + ``libzookeeper-java``) ships ``/usr/share/java/zookeeper.jar`` whose
manifest ``Class-Path`` names every dependency jar in ``/usr/share/java``; its own scripts run
``java -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar``. We run ``ZooKeeperServerMain`` with our own
``zoo.cfg`` in the data dir instead of ``/etc/zookeeper/conf``, and add ``slf4j-simple`` (when installed) so
the server's log lands in ``<data_dir>/zookeeper.log`` (without a binding slf4j logs nothing).

Layout of a data dir: ``zoo.cfg``, ``zookeeper.log``, ``data/`` (snapshots and transaction logs), ``.lock``.

One server per data dir: ``start()`` takes an exclusive lock on ``.lock`` (flock) before touching anything,
and the java process inherits it, so the directory stays locked while either the launcher or ZooKeeper
lives; a second start on the same directory is refused (another ZooKeeper on it would rewrite its zoo.cfg
and snapshots under the live one).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ZooKeeperInstall", "ZooKeeperServer", "find_installation", "four_letter_word", "port_in_use",
           "run_foreground"]

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_BINDING_JAR = Path("/usr/share/java/slf4j-simple.jar")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
HOST = "127.0.0.1"


@dataclass(frozen=True)
class ZooKeeperInstall:
    """Where the Debian package's java and jars are: enough to build a command line."""

    java: str
    classpath: tuple[str, ...]


def find_installation() -> ZooKeeperInstall | None:
    """The installed ZooKeeper (Debian layout) and a ``java`` on PATH, or None when either is missing."""
    java = shutil.which("java")
    if java is None or not ZOOKEEPER_JAR.is_file():
        return None
    classpath = [str(ZOOKEEPER_JAR)]
    if SLF4J_BINDING_JAR.is_file():
        classpath.append(str(SLF4J_BINDING_JAR))
    return ZooKeeperInstall(java, tuple(classpath))


def four_letter_word(port: int, word: str = "ruok", timeout: float = 1.0) -> str:
    """Send a 4lw command to 127.0.0.1:``port`` and return the reply ('' when nothing answers)."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
    except OSError:
        return ""
    return b"".join(chunks).decode(errors="replace")


def port_in_use(port: int) -> bool:
    """Whether something listens on 127.0.0.1:``port`` (SO_REUSEADDR: sockets in TIME_WAIT do not count)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return True
    return False


def _terminate(process: subprocess.Popen, timeout: float) -> None:
    """SIGTERM, wait ``timeout`` seconds, then SIGKILL. A no-op when the process already exited."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class ZooKeeperServer:
    """One standalone ZooKeeper on 127.0.0.1:``port`` with its files in ``data_dir``.

    ``start()`` writes ``zoo.cfg``, launches java and returns once the server serves (``srvr`` reports its
    mode: ``ruok`` already answers while the database is still loading); ``stop()``
    sends SIGTERM then SIGKILL. Also a context manager. The process runs in its own session (Ctrl-C in a
    terminal reaches only Python, which stops it cleanly) and is killed when this object is collected or the
    interpreter exits. Not thread-safe: start and stop from one thread.
    """

    def __init__(self, data_dir: str | os.PathLike, port: int = 2181, *, tick_time_ms: int = 2000,
                 heap_mb: int = 256, log_level: str = "info"):
        self.data_dir = Path(data_dir)
        self.port = port
        self.tick_time_ms = tick_time_ms
        self.heap_mb = heap_mb
        self.log_level = log_level
        self._process: subprocess.Popen | None = None
        self._finalizer: weakref.finalize | None = None
        self._lock_fd = -1

    @property
    def connect_string(self) -> str:
        """``127.0.0.1:port``: append ``/chroot`` for a namespaced store."""
        return f"{HOST}:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.data_dir / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.log"

    @property
    def pid(self) -> int | None:
        """The java process id while running, else None."""
        return self._process.pid if self.running else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def config_text(self) -> str:
        """The ``zoo.cfg`` this server runs with: loopback only, admin server off, a few 4lw commands."""
        return "\n".join([
            f"tickTime={self.tick_time_ms}",
            f"dataDir={(self.data_dir / 'data').resolve()}",
            f"clientPort={self.port}",
            f"clientPortAddress={HOST}",
            "maxClientCnxns=0",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,stat,mntr,cons",
            "autopurge.snapRetainCount=3",
            "autopurge.purgeInterval=1",
            "",
        ])

    def command(self, install: ZooKeeperInstall) -> list[str]:
        """The java command line (serial GC and a bounded heap: a metadata server needs little)."""
        return [install.java, f"-Xmx{self.heap_mb}m", "-XX:+UseSerialGC",
                "-Dzookeeper.jmx.log4j.disable=true",
                f"-Dorg.slf4j.simpleLogger.defaultLogLevel={self.log_level}",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss,SSS",
                "-cp", os.pathsep.join(install.classpath), MAIN_CLASS, str(self.config_path.resolve())]

    def start(self, timeout: float = 30.0) -> "ZooKeeperServer":
        """Launch and wait until the server serves clients.

        Raises FileNotFoundError when the Debian package or java is missing, RuntimeError when the port is
        taken, when java exits early (with the log's tail) or when called while running, TimeoutError when
        it does not serve within ``timeout`` s (the process is then stopped).
        """
        if self.running:
            raise RuntimeError(f"ZooKeeper is already running on {self.connect_string} (pid {self.pid})")
        install = find_installation()
        if install is None:
            raise FileNotFoundError(f"ZooKeeper is not installed: need {ZOOKEEPER_JAR} and java on PATH "
                                    "(apt-get install zookeeper)")
        self._lock()
        try:
            if port_in_use(self.port):
                raise RuntimeError(f"Cannot start ZooKeeper: {self.connect_string} is already in use")
            (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
            self.config_path.write_text(self.config_text())
            with open(self.log_path, "ab") as log:
                self._process = subprocess.Popen(self.command(install), stdin=subprocess.DEVNULL, stdout=log,
                                                 stderr=subprocess.STDOUT, cwd=self.data_dir,
                                                 start_new_session=True, pass_fds=(self._lock_fd,))
        except BaseException:
            self._unlock()
            raise
        os.pwrite(self._lock_fd, f"{self._process.pid}\n".encode(), 0)
        self._finalizer = weakref.finalize(self, _terminate, self._process, 5.0)
        deadline = time.monotonic() + timeout
        while "Mode:" not in four_letter_word(self.port, "srvr"):
            if self._process.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with code {self._process.returncode} while starting on "
                                   f"{self.connect_string}; {self.log_path} ends with:\n{self._log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"ZooKeeper did not serve on {self.connect_string} within {timeout} s; "
                                   f"see {self.log_path}")
            time.sleep(0.1)
        return self

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout`` s; returns the exit code (None if never started). Idempotent."""
        if self._process is None:
            return None
        self._finalizer.detach()
        _terminate(self._process, timeout)
        self._unlock()
        return self._process.returncode

    def _lock(self) -> None:
        """Lock the data dir (RuntimeError naming the holder's pid when another server has it)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.data_dir / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise RuntimeError(f"Cannot start ZooKeeper: its data directory {self.data_dir} is in use by another "
                               f"ZooKeeper{f' (pid {holder})' if holder else ''}") from None
        os.ftruncate(fd, 0)
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def wait(self) -> int:
        """Block until the process exits on its own; returns its exit code. Requires a started server."""
        return self._process.wait()

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> "ZooKeeperServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def run_foreground(data_dir: str | os.PathLike, port: int = 2181, *, tick_time_ms: int = 2000) -> int:
    """``seglog zookeeper``: run until Ctrl-C or SIGTERM (then stop cleanly and return 0), or until the
    server exits by itself (its exit code is returned). Start errors propagate (see ``ZooKeeperServer.start``).
    """
    server = ZooKeeperServer(data_dir, port, tick_time_ms=tick_time_ms)
    stop_requested = threading.Event()
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: stop_requested.set())
    try:
        server.start()
        print(f"ZooKeeper running on {server.connect_string} (pid {server.pid}), data in {server.data_dir}, "
              f"log {server.log_path}; Ctrl-C stops it", file=sys.stderr, flush=True)
        while not stop_requested.wait(0.5):
            if not server.running:
                return server.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0

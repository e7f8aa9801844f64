"""Shared fixtures: data dirs, ZooKeeper, brokers, a SparkSession; the hang watchdogs. Markers are declared in
pyproject.toml."""

import faulthandler
import gc
import os
import signal
import socket
import sys

import pytest
from hypothesis import HealthCheck, settings

# Property tests judge results, not speed: Hypothesis's default 200 ms deadline per example fails a test whose
# first example imports a client library on a loaded 2-core machine (CI), and so does the too-slow health check.
# Speed goals live in bench/.
settings.register_profile("seglog", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("seglog")

# Tests stop the processes they start with Ctrl-C (SIGINT) and check what a user sees. A shell that runs a command
# in the background without job control (`bash tests/run.sh &` in a script) starts it with SIGINT ignored,
# and an ignored signal stays ignored in every child: `seglog consume` would then never see the test's Ctrl-C.
# The suite's processes get Python's usual Ctrl-C, so their children start with SIGINT at its default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# -- a hang must end the run, not stall it -----------------------------------------------------------------------
# pytest-timeout (pyproject: timeout, method "signal") fails a test that overruns by raising from a SIGALRM handler
# in the main thread. Python runs that handler only between bytecodes of the main thread: not while it is inside
# a C call that does not return (a client library's destroy, close or flush), not while another thread holds the
# GIL, not if a library swallows the exception; and it is armed once per test, so a teardown that hangs after it
# fired (joining a broker thread whose node never closes) runs forever. faulthandler's watchdog is a C thread
# that needs neither the GIL nor the main thread: HARD_TIMEOUT_GRACE seconds past a test's timeout (setup, call
# and teardown together) it writes every thread's stack to the terminal and ends the process with status 1.
# It never waits past SESSION_GRACE seconds after pytest-timeout's session_timeout (after which no test starts),
# and it also bounds the interpreter's exit, which joins leftover non-daemon threads.
HARD_TIMEOUT_GRACE = 60
SESSION_GRACE = 90
EXIT_TIMEOUT = 120
_hard_timeout_stream = None
_hard_deadline = None          # time.monotonic() past which no watchdog waits (session_timeout + SESSION_GRACE)


def _timeout_setting(config, option: str, ini: str, env: str | None = None) -> float | None:
    """A pytest-timeout setting in seconds (command line, then environment, then ini); None if unset or 0."""
    value = config.getoption(option, None)                   # --timeout=0 turns timeouts off
    if value is None and env is not None:
        value = os.environ.get(env)
    if value is None:
        try:
            value = config.getini(ini)
        except ValueError:                                   # pytest-timeout is not installed
            return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if value > 0 else None


def _test_timeout(item) -> float | None:
    marker = item.get_closest_marker("timeout")
    if marker is None:
        return _timeout_setting(item.config, "timeout", "timeout", "PYTEST_TIMEOUT")
    try:
        value = float(marker.args[0] if marker.args else marker.kwargs.get("timeout"))
    except (TypeError, ValueError):
        return None
    return value if value > 0 else None


def _arm_watchdog(seconds: float) -> None:
    import time

    if _hard_deadline is not None:
        seconds = min(seconds, max(_hard_deadline - time.monotonic(), 10))
    faulthandler.dump_traceback_later(seconds, exit=True, file=_hard_timeout_stream)


def pytest_sessionstart(session):
    import time

    global _hard_timeout_stream, _hard_deadline
    # the terminal's stderr: during tests fd 2 is pytest's capture file, lost when the process ends
    capman = session.config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        with capman.global_and_fixture_disabled():
            fd = os.dup(2)
    else:
        fd = os.dup(2)
    _hard_timeout_stream = os.fdopen(fd, "w")
    budget = _timeout_setting(session.config, "session_timeout", "session_timeout")
    if budget is not None:
        _hard_deadline = time.monotonic() + budget + SESSION_GRACE


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    # pytest's own faulthandler_timeout would replace this watchdog (there is one): then it is not armed
    armed = _hard_timeout_stream is not None and not item.config.getini("faulthandler_timeout")
    timeout = _test_timeout(item) if armed else None
    if timeout is not None:
        _arm_watchdog(timeout + HARD_TIMEOUT_GRACE)
    elif armed and _hard_deadline is not None:
        _arm_watchdog(float("inf"))                          # no test timeout: still bounded by the run's
    else:
        armed = False
    try:
        yield
    finally:
        if armed:
            faulthandler.cancel_dump_traceback_later()


def pytest_unconfigure(config):
    # only when this process is the pytest command: a program calling pytest.main() goes on afterwards
    main = os.path.basename(sys.argv[0]) if sys.argv else ""
    if _hard_timeout_stream is not None and main in ("pytest", "py.test", "__main__.py"):
        _arm_watchdog(EXIT_TIMEOUT)


@pytest.fixture(scope="session")
def free_port():
    """A function returning a TCP port on 127.0.0.1 that nothing listens on right now."""
    def pick() -> int:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]
    return pick


@pytest.fixture(scope="session")
def zookeeper_installed():
    """Skips the test when the Debian ZooKeeper package (or java) is missing."""
    from seglog.cluster.zookeeper_server import find_installation

    if find_installation() is None:
        pytest.skip("ZooKeeper is not installed (apt-get install zookeeper; needs java)")


@pytest.fixture(scope="session")
def zookeeper_server(zookeeper_installed, tmp_path_factory, free_port):
    """One real ZooKeeper for the whole run (tests isolate themselves with a chroot each)."""
    from seglog.cluster.zookeeper_server import ZooKeeperServer

    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), free_port(), tick_time_ms=500)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def make_cluster(zookeeper_server, tmp_path, request):
    """A function starting a cluster (cluster_harness.Cluster: 3 brokers unless ``n``; its other keywords:
    ``overrides``, ``proxied``, ``tmpfs_size``, ``disk_faults``) on the session's ZooKeeper, in a chroot of its
    own; every broker, proxy and producer it started is stopped when the test ends."""
    import re
    import time

    from cluster_harness import Cluster, close_producers

    made = []
    name = re.sub(r"[^a-zA-Z0-9]", "-", request.node.name)[:80]

    def make(n: int = 3, overrides: dict | None = None, **kw) -> "Cluster":
        c = Cluster(zookeeper_server.connect_string, tmp_path / f"cluster{len(made)}", n, overrides,
                    chroot=f"/{name}-{len(made)}-{int(time.time() * 1000) % 10**8}", **kw)
        made.append(c)
        c.start()
        return c

    yield make
    close_producers()
    for c in made:
        c.close()


@pytest.fixture
def mount_tmpfs(tmp_path):
    """A function mounting a tmpfs of the given size (e.g. "2m") on a fresh directory and returning it; the
    mounts go when the test ends. Skips the test when mounting is not permitted (needs root)."""
    import shutil
    import subprocess

    mounted = []

    def mount(size: str):
        target = tmp_path / f"tmpfs-{len(mounted)}"
        target.mkdir()
        if shutil.which("mount") is None:
            pytest.skip("no mount command to make a small tmpfs")
        res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)],
                             capture_output=True, text=True)
        if res.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needs root): {res.stderr.strip()}")
        mounted.append(target)
        return target

    yield mount
    for target in mounted:
        subprocess.run(["umount", "-l", str(target)], check=False)


# -- Kafka-protocol broker (tests/integration/test_broker_*.py) ------------------------------------------------

# Brokers started by these fixtures: no initial rebalance delay (groups form at once) and short session timeouts
# allowed, so consumer-group tests take seconds instead of minutes.
BROKER_TEST_OVERRIDES = {"group_initial_rebalance_delay_ms": 0, "group_min_session_timeout_ms": 500}


@pytest.fixture(scope="session")
def seglog_broker(tmp_path_factory):
    """One in-process seglog broker (seglog.serve) shared by the whole run; tests use topics of their own
    (see `topic_name`). ``.bootstrap_servers``, ``.node`` (the same data, in-process), ``.metrics()``."""
    import seglog

    with seglog.serve(tmp_path_factory.mktemp("broker"), **BROKER_TEST_OVERRIDES) as broker:
        yield broker


@pytest.fixture
def start_broker(tmp_path):
    """A function starting an in-process broker with Kafka-named overrides (``auto_create_topics_enable=False``)
    on a fresh data dir (or `data_dir=`); every broker it started is stopped when the test ends."""
    import seglog

    started = []

    def start(data_dir=None, **overrides):
        settings = dict(BROKER_TEST_OVERRIDES, **overrides)
        broker = seglog.serve(data_dir or tmp_path / f"broker-{len(started)}", **settings)
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.stop()


@pytest.fixture(params=["data-dir", "broker"])
def cli_door(request, tmp_path):
    """The two doors of the `seglog` commands, for a CLI suite written once and run over both: ``.args`` (the
    --data-dir or --bootstrap-server arguments), ``.live`` (a broker: other clients may write meanwhile, so
    `consume` waits for records until --max-messages or --timeout-ms), ``.path`` (the data dir: the data dir's
    own; the broker's, served by ``.broker``). A data dir goes to a tmpfs (/dev/shm) when there is one, so the
    fsyncs of every command's clean close do not make the suite wait on a busy disk."""
    import shutil
    import tempfile
    import types

    import seglog

    if request.param == "broker":
        with seglog.serve(tmp_path / "broker", **BROKER_TEST_OVERRIDES) as broker:
            yield types.SimpleNamespace(args=["--bootstrap-server", broker.bootstrap_servers], live=True,
                                        path=tmp_path / "broker", broker=broker)
        return
    shm = os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK)
    path = tempfile.mkdtemp(prefix="seglog-cli-", dir="/dev/shm") if shm else str(tmp_path / "data")
    try:
        yield types.SimpleNamespace(args=["--data-dir", path], live=False, path=path, broker=None)
    finally:
        shutil.rmtree(path, ignore_errors=True)


# A librdkafka consumer that is never closed is destroyed when Python frees it: confluent-kafka's dealloc calls
# rd_kafka_destroy without closing the consumer, and when a cooperative rebalance was waiting for the
# application's assign call, librdkafka's main thread loops "waiting for assign call before terminating"
# forever, so the destroy never returns. A test that fails with such a consumer open keeps it alive in
# its traceback, a reference cycle that the garbage collector frees later, in whatever thread happens to
# trigger a collection: inside a later test, in C, where pytest-timeout's signal handler cannot run. So a
# test that fails has the confluent-kafka consumers of its failing frames closed at once, here, in its own
# time (close() serves the pending rebalance itself).
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    yield
    if call.excinfo is not None and "confluent_kafka" in sys.modules:
        _close_open_consumers(call.excinfo.tb)


def _close_open_consumers(tb) -> None:
    from confluent_kafka import Consumer

    seen = set()
    while tb is not None:
        for value in list(tb.tb_frame.f_locals.values()):
            if isinstance(value, dict):
                candidates = list(value.values())
            elif isinstance(value, (list, tuple, set)):
                candidates = list(value)
            else:
                candidates = [value]
            for obj in candidates:
                if isinstance(obj, Consumer) and id(obj) not in seen:
                    seen.add(id(obj))
                    try:
                        obj.close()
                    except Exception:                  # RuntimeError: it was closed already
                        pass
        tb = tb.tb_next


class BrokerProcess:
    """A seglog broker in a subprocess (tests/helpers/broker_process.py): its own GIL, killable with -9.
    ``disk_trigger``: a file path; the broker runs under helpers/failing_disk.py, whose ``write_trigger`` on that
    path makes its file calls fail from then on."""

    def __init__(self, data_dir, log_path, disk_trigger=None, **overrides):
        import os
        import re
        import subprocess
        import sys
        import time

        helper = os.path.join(os.path.dirname(os.path.abspath(__file__)), "helpers", "broker_process.py")
        props = dict(BROKER_TEST_OVERRIDES, **overrides)
        args = [f"{k.replace('_', '.')}={v}" for k, v in props.items()]
        self.data_dir, self.log_path = str(data_dir), str(log_path)
        self._log = open(log_path, "ab")
        wrapper = [] if disk_trigger is None else [
            os.path.join(os.path.dirname(helper), "failing_disk.py"), str(disk_trigger)]
        self.proc = subprocess.Popen([sys.executable, *wrapper, helper, self.data_dir, *args],
                                     stdout=subprocess.PIPE, stderr=self._log)
        self.pid = self.proc.pid
        deadline = time.monotonic() + 30
        line = b""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            m = re.search(rb"listening on (\S+):(\d+)", line)
            if m:
                self.host, self.port = m.group(1).decode(), int(m.group(2))
                break
            if not line and self.proc.poll() is not None:
                break
        else:
            self.kill()
            raise RuntimeError("the broker subprocess did not start within 30 s")
        if not line or self.proc.poll() is not None:
            self._log.close()
            with open(log_path, errors="replace") as f:
                raise RuntimeError(f"the broker subprocess exited with {self.proc.poll()}:\n{f.read()[-4000:]}")

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def rss_bytes(self) -> int:
        """Resident set size of the broker process (VmRSS)."""
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS line")

    def peak_rss_bytes(self) -> int:
        """The broker process's peak resident set size so far (VmHWM)."""
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmHWM line")

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM (clean shutdown) and wait; returns the exit status."""
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self._close()

    def kill(self) -> int:
        """SIGKILL: no shutdown work at all."""
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            return self.proc.wait(30)
        finally:
            self._close()

    def _close(self) -> None:
        if self.proc.stdout:
            self.proc.stdout.close()
        self._log.close()


@pytest.fixture
def broker_process(tmp_path):
    """A function starting a seglog broker in a subprocess on `data_dir` (default: a fresh dir under tmp_path)
    with Kafka-named overrides; returns a BrokerProcess. Brokers still running at the end are killed."""
    started = []

    def start(data_dir=None, disk_trigger=None, **overrides):
        data_dir = data_dir or tmp_path / "broker-data"
        proc = BrokerProcess(data_dir, tmp_path / f"broker-{len(started)}.log", disk_trigger, **overrides)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.proc.poll() is None:
            proc.kill()


@pytest.fixture
def topic_name(request):
    """A function returning a topic name no other test uses (the test's name plus a counter)."""
    import itertools
    import re

    base = re.sub(r"[^a-zA-Z0-9._-]", "-", request.node.name)[:150]
    counter = itertools.count()
    return lambda: f"{base}-{next(counter)}"


# -- Spark (tests/integration/test_spark.py) -----------------------------------------------------------------

@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for the whole run, with the seglog source registered.

    Python workers run this interpreter (PYSPARK_PYTHON) and get the directory seglog is imported from on
    their PYTHONPATH, so both an installed seglog (CI) and a development checkout on PYTHONPATH work. Spark's
    Python filter pushdown setting is on (seglog's source uses it only with the pushFilters option). Skips only when pyspark >= 4.2 (seglog.spark's floor),
    pyarrow or java is missing; any other failure to import seglog.spark fails the tests.
    """
    import os
    import shutil
    import sys

    # minversion: an older pyspark skips too (seglog.spark refuses to import below 4.2)
    pytest.importorskip("pyspark", minversion="4.2", reason="pyspark is not installed (pip install 'seglog[spark]')")
    pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'seglog[spark]')")
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        pytest.skip("java is not installed (Spark needs a JDK 17+)")
    import seglog

    seglog_parent = os.path.dirname(os.path.dirname(os.path.abspath(seglog.__file__)))
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if seglog_parent not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([seglog_parent] + paths)
    from pyspark.sql import SparkSession

    import seglog.spark

    builder = (SparkSession.builder.master("local[2]").appName("seglog-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.python.worker.reuse", "true"))
    builder = builder.config(seglog.spark.PUSHDOWN_CONF, "true")       # for the tests that opt in per query
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    seglog.spark.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    """A test CA and what it signed: ``.ca`` (the CA certificate's path), ``.server`` (CN=localhost, for
    127.0.0.1 and localhost), ``.client`` (CN=alice,OU=eng), ``.expired`` (a server certificate past its end)
    and ``.self_signed`` (a server certificate no CA signed); see tests/helpers/certs.py."""
    from types import SimpleNamespace

    from tests.helpers.certs import CertificateAuthority
    ca = CertificateAuthority(tmp_path_factory.mktemp("ca"))
    return SimpleNamespace(authority=ca, ca=ca.cert, server=ca.issue("localhost"), client=ca.issue("alice", ou="eng"),
                           expired=ca.issue("expired", expired=True), self_signed=ca.issue("rogue", self_signed=True))


# -- clients left for the garbage collector -------------------------------------------------------------------
# A confluent-kafka client that a test drops while a traceback still holds its frame (pytest.raises keeps one)
# lives on until a garbage collection, and librdkafka's threads keep writing to the process's stderr: "Connect
# to ... failed" once its broker is gone. A test reading stderr with capfd would read those lines as its own.
# So the garbage is collected when a module ends, and before any test that reads the process's stderr.

@pytest.fixture(autouse=True, scope="module")
def _collect_dropped_clients():
    yield
    gc.collect()


def pytest_runtest_setup(item):
    if "capfd" in getattr(item, "fixturenames", ()):
        gc.collect()

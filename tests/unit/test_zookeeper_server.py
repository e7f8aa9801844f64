"""The ZooKeeper launcher: its config and command line, and (with the Debian package) a real start/stop."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import seglog
from seglog.cluster import zookeeper_server
from seglog.cluster.zookeeper_server import MAIN_CLASS, ZooKeeperInstall, ZooKeeperServer, four_letter_word


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_config_listens_on_loopback_only_without_admin_server(tmp_path):
    server = ZooKeeperServer(tmp_path, 2999, tick_time_ms=500)
    lines = server.config_text().splitlines()
    for expected in ("clientPort=2999", "clientPortAddress=127.0.0.1", "admin.enableServer=false",
                     "tickTime=500", f"dataDir={(tmp_path / 'data').resolve()}"):
        assert expected in lines
    assert any(line.startswith("4lw.commands.whitelist=") and "ruok" in line for line in lines)
    assert server.connect_string == "127.0.0.1:2999"


def test_command_runs_the_standalone_main_on_the_given_classpath(tmp_path):
    command = ZooKeeperServer(tmp_path).command(ZooKeeperInstall("/usr/bin/java", ("/a.jar", "/b.jar")))
    assert command[0] == "/usr/bin/java"
    assert command[command.index("-cp") + 1] == os.pathsep.join(["/a.jar", "/b.jar"])
    assert command[-2:] == [MAIN_CLASS, str((tmp_path / "zoo.cfg").resolve())]


def test_missing_package_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(zookeeper_server, "ZOOKEEPER_JAR", tmp_path / "absent.jar")
    assert zookeeper_server.find_installation() is None
    with pytest.raises(FileNotFoundError, match="apt-get install zookeeper"):
        ZooKeeperServer(tmp_path).start()


def test_nothing_answers_on_a_closed_port(free_port):
    assert four_letter_word(free_port(), timeout=0.5) == ""


@pytest.mark.zookeeper
def test_start_answers_ruok_and_stop_ends_the_process(zookeeper_installed, tmp_path, free_port):
    with ZooKeeperServer(tmp_path, free_port(), tick_time_ms=500) as server:
        pid = server.pid
        assert four_letter_word(server.port) == "imok"
        assert "Mode: standalone" in four_letter_word(server.port, "srvr")
        assert (tmp_path / "zoo.cfg").is_file() and (tmp_path / "data").is_dir()
    assert not server.running and not alive(pid)
    assert four_letter_word(server.port) == ""
    assert server.stop() == server.stop()                                   # idempotent


@pytest.mark.zookeeper
def test_a_taken_port_is_refused(zookeeper_server, tmp_path):
    with pytest.raises(RuntimeError, match="already in use"):
        ZooKeeperServer(tmp_path, zookeeper_server.port).start()
    assert four_letter_word(zookeeper_server.port) == "imok"                # the other one is unharmed


@pytest.mark.zookeeper
def test_run_foreground_stops_cleanly_on_sigterm(zookeeper_installed, tmp_path, free_port):
    port = free_port()
    package_parent = str(Path(seglog.__path__[0]).parent)                   # however seglog is importable here
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")]))}
    code = ("import sys; from seglog.cluster.zookeeper_server import run_foreground; "
            f"sys.exit(run_foreground({str(tmp_path)!r}, {port}))")
    cli = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while four_letter_word(port) != "imok":
            assert cli.poll() is None and time.monotonic() < deadline, cli.stderr.read()
            time.sleep(0.1)
        cli.send_signal(signal.SIGTERM)
        assert cli.wait(15) == 0
        assert "Ctrl-C stops it" in cli.stderr.read()
    finally:
        if cli.poll() is None:
            cli.kill()
    assert four_letter_word(port) == ""


@pytest.mark.zookeeper
def test_an_early_exit_is_reported_with_the_log_tail(zookeeper_installed, tmp_path, free_port):
    with pytest.raises(RuntimeError, match="exited with code 1 while starting(.|\n)*heap"):
        ZooKeeperServer(tmp_path, free_port(), heap_mb=1).start()                # the JVM refuses a 1 MiB heap


@pytest.mark.zookeeper
def test_a_second_server_on_a_locked_data_dir_is_refused_before_touching_it(zookeeper_installed, tmp_path,
                                                                             free_port):
    with ZooKeeperServer(tmp_path, free_port(), tick_time_ms=500) as first:
        config = first.config_path.read_text()
        second = ZooKeeperServer(tmp_path, free_port(), tick_time_ms=500)
        with pytest.raises(RuntimeError, match=rf"data directory {tmp_path} is in use by another ZooKeeper "
                                               rf"\(pid {first.pid}\)"):
            second.start()
        assert first.config_path.read_text() == config                       # its zoo.cfg is not rewritten
        assert four_letter_word(first.port) == "imok"
    with ZooKeeperServer(tmp_path, free_port(), tick_time_ms=500) as again:  # free once the first one stopped
        assert four_letter_word(again.port) == "imok"


@pytest.mark.zookeeper
def test_the_lock_outlives_a_killed_launcher_while_zookeeper_runs(zookeeper_installed, tmp_path, free_port):
    """kill -9 of the Python launcher leaves java running on the directory: the lock stays with it."""
    port = free_port()
    package_parent = str(Path(seglog.__path__[0]).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")]))}
    code = f"from seglog.cluster.zookeeper_server import run_foreground; run_foreground({str(tmp_path)!r}, {port})"
    launcher = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while four_letter_word(port) != "imok":
            assert launcher.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        java_pid = int((tmp_path / ".lock").read_text())
        launcher.kill()
        launcher.wait()
        assert alive(java_pid)
        with pytest.raises(RuntimeError, match="in use by another ZooKeeper"):
            ZooKeeperServer(tmp_path, free_port()).start()
    finally:
        if launcher.poll() is None:
            launcher.kill()
        if (tmp_path / ".lock").exists():
            pid = int((tmp_path / ".lock").read_text() or 0)
            if pid and alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.zookeeper
@pytest.mark.parametrize("taken", ["port", "data dir"])
def test_cli_reports_a_taken_port_or_data_dir_on_one_line(zookeeper_server, tmp_path, free_port, taken):
    package_parent = str(Path(seglog.__path__[0]).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")]))}
    if taken == "port":
        args = ["--data-dir", str(tmp_path / "zk"), "--port", str(zookeeper_server.port)]
        expected = f"127.0.0.1:{zookeeper_server.port} is already in use"
    else:
        args = ["--data-dir", str(zookeeper_server.data_dir), "--port", str(free_port())]
        expected = f"data directory {zookeeper_server.data_dir} is in use by another ZooKeeper"
    res = subprocess.run([sys.executable, "-m", "seglog", "zookeeper", *args], env=env, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1 and expected in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert four_letter_word(zookeeper_server.port) == "imok"

"""Shared pytest configuration. Other suites will add their fixtures here."""

import socket

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "zookeeper: starts a real ZooKeeper (the Debian `zookeeper` package); "
                                       "skipped only when that package or java is missing")


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

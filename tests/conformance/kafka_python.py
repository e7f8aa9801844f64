"""kafka-python's own integration suite (``test/integration``) run against a seglog broker.

The suite ships in kafka-python's source distribution. It is fetched at :data:`VERSION` with pip (never
vendored) into ``tests/conformance/.cache/`` (git-ignored, reused by later runs) and run in its own
external-broker mode: ``KAFKA_URI`` names the broker, ``KAFKA_VERSION`` the Kafka release whose behaviour the
tests expect (it also becomes the clients' ``api_version``), ``KAFKA_ROOT`` a Kafka installation (an empty
directory: an external broker needs none). The sdist leaves out two files the suite imports; they are supplied:
``test/__init__.py`` (so ``test`` is the suite and not the standard library's ``test`` package) and
``test/service.py`` with the ``ExternalService`` the fixtures use for an external broker (their
``SpawnedService`` starts a Kafka JVM and is never reached here).

The broker runs in this process (``seglog.serve``) with the settings the suite's own fixture gives Kafka
(:data:`BROKER_SETTINGS`, from kafka-python's ``servers/resources/default/kafka.properties``): the tests count on
them (four partitions for auto-created topics, one-second minimum session timeouts).

:data:`KNOWN_FAILURES` names each test seglog does not pass yet and why; a failure not named there is a
regression. ``python -m tests.conformance`` prints the table CONFORMANCE.md records.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from .junit import Results, parse_junit

VERSION = "3.0.12"                  # kafka-python release whose suite runs (the test extra installs 3.x)
KAFKA_VERSION = "3.7.0"             # the Kafka release seglog's protocol versions follow
CACHE = Path(__file__).resolve().parent / ".cache"

#: The suite fixture's broker settings (kafka-python's servers/resources/default/kafka.properties), in Kafka's
#: names; the authorizer lines only matter once seglog has one (unknown names are logged and ignored).
BROKER_SETTINGS = {
    "num.partitions": "4",                    # kafka_broker_factory's default `partitions`
    "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "2",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.min.session.timeout.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}

_SSL_FIXTURE = ("needs the suite's own TLS fixture (JKS keystores generated for a Kafka it starts), "
                "not an external broker")
#: test id (file::name) -> why seglog does not pass it yet.
KNOWN_FAILURES = {
    "test_ssl_integration.py::TestSSLConnection::test_ssl_handshake": _SSL_FIXTURE,
    "test_ssl_integration.py::TestSSLConnection::test_legacy_kafka_client_ssl": _SSL_FIXTURE,
}


def fetch(cache: Path = CACHE) -> Path:
    """The suite's source tree at VERSION, downloaded once (pip) and prepared; raises RuntimeError with pip's
    message when it cannot be downloaded (no network)."""
    root = cache / f"kafka-python-{VERSION}"
    if (root / "test" / "service.py").is_file():
        return root
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        got = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                              "--dest", tmp, f"kafka-python=={VERSION}"], capture_output=True, text=True)
        sdists = list(Path(tmp).glob("*.tar.gz"))
        if got.returncode or not sdists:
            raise RuntimeError(f"cannot download kafka-python {VERSION}'s source: {got.stderr.strip()[-500:]}")
        with tarfile.open(sdists[0]) as tar:
            tar.extractall(tmp, filter="data")
        unpacked = Path(tmp) / f"kafka_python-{VERSION}"
        (unpacked / "test" / "__init__.py").touch()
        (unpacked / "test" / "service.py").write_text(
            '"""Supplied by seglog\'s conformance runner (kafka-python\'s sdist leaves this module out): the\n'
            'external-broker service only."""\n\n\n'
            "class ExternalService:\n"
            "    def __init__(self, host, port):\n"
            "        self.host, self.port = host, port\n\n"
            "    def open(self):\n        pass\n\n"
            "    def close(self):\n        pass\n\n\n"
            "class SpawnedService:\n"
            "    def __init__(self, *args, **kwargs):\n"
            "        raise RuntimeError('this run uses an external broker (KAFKA_URI)')\n")
        (cache / "kafka-root").mkdir(exist_ok=True)
        unpacked.rename(root)
    return root


def run(selection: list[str] | None = None, *, timeout_s: float = 900.0, workdir: Path | None = None) -> Results:
    """Start a broker, run the suite (or `selection`: paths under test/integration, or -k style node ids
    relative to it) in a pytest subprocess, return every test's outcome."""
    import seglog

    root = fetch()
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        junit = Path(tmp) / "junit.xml"
        with seglog.serve(Path(tmp) / "data", config=dict(BROKER_SETTINGS)) as broker:
            env = dict(os.environ, KAFKA_URI=f"PLAINTEXT://{broker.bootstrap_servers}", KAFKA_VERSION=KAFKA_VERSION,
                       KAFKA_ROOT=str(CACHE / "kafka-root"), PYTHONPATH=str(root))
            targets = [f"test/integration/{s}" for s in selection] if selection else ["test/integration"]
            subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=",
                            "-o", "log_level=WARNING", "--timeout=120", "-q", f"--junitxml={junit}", *targets],
                           cwd=root, env=env, timeout=timeout_s, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return parse_junit(junit, KNOWN_FAILURES)


def markdown(results: Results) -> str:
    """The CONFORMANCE.md table: counts, then every test that did not pass, with its reason."""
    return "\n".join([f"| kafka-python {VERSION} `test/integration` | passed | failed | errors | skipped |",
                      "|---|---|---|---|---|",
                      f"| against one seglog broker | {results.count('passed')} | {results.count('failed')} | "
                      f"{results.count('error')} | {results.count('skipped')} |", "", *results.rows()])

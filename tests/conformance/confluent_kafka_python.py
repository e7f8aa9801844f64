"""confluent-kafka-python's own integration suite (``tests/integration``) run against a seglog broker.

``python -m tests.conformance.confluent_kafka_python --source DIR`` runs it from a checkout of the client's
repository (DIR holds its ``tests/`` and ``pyproject.toml``); without ``--source`` the pinned tag (:data:`TAG`) is
downloaded from GitHub into ``tests/conformance/.cache/`` (git-ignored), which fails with the network's own error
where GitHub cannot be reached. The suite is not in the client's source distribution on PyPI.

The suite's bring-your-own-cluster mode is used: ``BROKERS`` names the bootstrap servers, and every test on the
``kafka_cluster`` fixture runs against them. The suite imports trivup (its own-cluster mode, never started here)
and the Schema Registry clients at collection, so it runs in a virtual environment of its own
(``.cache/venv-confluent``, made with the system's site packages so the installed confluent-kafka is the client
tested) holding :data:`SUITE_IMPORTS`. The broker runs in this process (``seglog.serve``) with the settings
trivup gives its one-broker Kafka (:data:`BROKER_SETTINGS`).

Only the directories whose tests use the external cluster run (:data:`SELECTION`); :data:`NOT_RUN` says why
each other one does not, and ``-k`` leaves out the tests parametrized with a SASL cluster trivup would start.
:data:`KNOWN_FAILURES` names each test seglog does not pass and why; a failure not named there is a regression.
Not part of CI's test run: CI cannot reach GitHub.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from .junit import Results, parse_junit

VERSION = "2.16.1"                  # the confluent-kafka release the test extra installs
TAG = f"v{VERSION}"
ARCHIVE_URL = f"https://github.com/confluentinc/confluent-kafka-python/archive/refs/tags/{TAG}.tar.gz"
CACHE = Path(__file__).resolve().parent / ".cache"

#: What the suite imports at collection beyond pytest and confluent-kafka: trivup (conftest), pytest-asyncio
#: (its asyncio_mode), the Avro, JSON and Protobuf Schema Registry clients (tests.common).
SUITE_IMPORTS = ("trivup", "pytest-asyncio", "async-timeout", "avro", "fastavro", "httpx", "cachetools", "authlib",
                 "protobuf", "googleapis-common-protos")

#: trivup's one-broker settings (tests.common.TestUtils.broker_conf) in seglog's terms, and an authorizer that
#: allows everyone (test_basic_operations creates ACLs, which Kafka refuses SECURITY_DISABLED without one).
BROKER_SETTINGS = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}

SELECTION = ("tests/integration/admin", "tests/integration/consumer", "tests/integration/producer",
             "tests/integration/serialization", "tests/integration/integration_test.py")
DESELECT = "not sasl_cluster"       # admin/test_describe_operations[sasl_cluster0]: a SASL Kafka trivup starts

#: The suite's other directories, and why they do not run against seglog.
NOT_RUN = {
    "tests/integration/schema_registry": "needs a Schema Registry (SR_URL); the bring-your-own fixture has none "
                                         "without it, and its cp_7_0_1 cases start a Kafka of their own (trivup)",
    "tests/integration/share_consumer": "KIP-932 share groups (Kafka 4.2): seglog has none; every test's setup "
                                        "sets share.auto.offset.reset with IncrementalAlterConfigs on a GROUP "
                                        "resource, answered INVALID_REQUEST (measured: 154 failed, 4 skipped)",
    "tests/integration/share_consumer_sasl": "starts its own SASL Kafka 4.2 with trivup (downloads Kafka)",
    "tests/integration/share_consumer_oauth": "starts its own OAUTHBEARER Kafka 4.2 with trivup (downloads Kafka)",
    "tests/integration/admin/test_describe_operations.py": "its one case runs on a SASL Kafka trivup starts "
                                                           "(`sasl_cluster`, left out by -k)",
}

#: test id (path under tests/integration::name) -> why seglog does not pass it.
KNOWN_FAILURES = {
    "admin/test_incremental_alter_configs.py::test_incremental_alter_configs":
        "expects min.insync.replicas=\"1\" among every topic's non-default configs: KIP-966's cluster-level "
        "ConfigRecord a Kafka 4.1+ KRaft controller writes (DYNAMIC_DEFAULT_BROKER_CONFIG); seglog is a "
        "ZooKeeper-mode broker, where it stays the default (the test skips itself below 4.1)",
}


def integration_id(classname: str, name: str) -> str:
    """path under tests/integration (``admin/test_x.py``) :: name, from pytest's JUnit classname."""
    parts = classname.split(".")
    parts = parts[parts.index("integration") + 1:] if "integration" in parts else parts
    file_at = next((i for i, p in enumerate(parts) if p.startswith("test_") or p == "integration_test"),
                   len(parts) - 1)
    return "::".join(["/".join(parts[:file_at + 1]) + ".py", *parts[file_at + 1:], name])


def source(path: str | None, cache: Path = CACHE) -> Path:
    """The client's source tree: `path` (a checkout), or the pinned tag downloaded once from GitHub. RuntimeError
    naming the reason when neither is there."""
    if path is not None:
        root = Path(path)
        if not (root / "tests" / "integration" / "conftest.py").is_file():
            raise RuntimeError(f"{root} is not a confluent-kafka-python checkout (no tests/integration/conftest.py)")
        return root
    root = cache / f"confluent-kafka-python-{VERSION}"
    if (root / "tests" / "integration").is_dir():
        return root
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        archive = Path(tmp) / "src.tar.gz"
        try:
            with urllib.request.urlopen(ARCHIVE_URL, timeout=30) as r:
                archive.write_bytes(r.read())
        except OSError as e:
            raise RuntimeError(f"cannot download {ARCHIVE_URL}: {e}; pass --source with a checkout") from None
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        (Path(tmp) / f"confluent-kafka-python-{VERSION}").rename(root)
    return root


def environment(cache: Path = CACHE) -> Path:
    """The python of the suite's virtual environment (made once, see the module docstring)."""
    venv = cache / "venv-confluent"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    missing = subprocess.run([str(python), "-c", "import trivup, pytest_asyncio, avro, fastavro, httpx, cachetools, "
                              "authlib, google.protobuf"], capture_output=True)
    if missing.returncode:
        subprocess.run([str(python), "-m", "pip", "install", "-q", *SUITE_IMPORTS], check=True)
    return python


def run(root: Path, selection: list[str] | None = None, *, group_protocol: str = "classic",
        timeout_s: float = 1800.0) -> Results:
    """Start a broker, run the suite's external-cluster tests (or `selection`: paths under the checkout) in a
    pytest subprocess, return every test's outcome. ``group_protocol="consumer"`` is the suite's KIP-848 mode
    (TEST_CONSUMER_GROUP_PROTOCOL: its consumers that name no group.protocol use the consumer protocol)."""
    import seglog

    python = environment()
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        with seglog.serve(Path(tmp) / "data", config=dict(BROKER_SETTINGS)) as broker:
            env = dict(os.environ, BROKERS=broker.bootstrap_servers, PYTHONPATH=str(root),
                       TEST_CONSUMER_GROUP_PROTOCOL=group_protocol)
            env.pop("SR_URL", None)
            subprocess.run([str(python), "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "--timeout=120",
                            "-q", "-k", DESELECT, f"--junitxml={junit}", *(selection or SELECTION)],
                           cwd=root, env=env, timeout=timeout_s, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return parse_junit(junit, KNOWN_FAILURES, integration_id)


def markdown(results: Results, tests_from: str, group_protocol: str = "classic") -> str:
    """The CONFORMANCE.md tables: counts, every test that did not pass with its reason, what was not run."""
    import confluent_kafka
    return "\n".join([
        f"| confluent-kafka {confluent_kafka.__version__}, `tests/integration` of {tests_from} | passed | failed "
        f"| errors | skipped |", "|---|---|---|---|---|",
        f"| against one seglog broker, group.protocol={group_protocol} | {results.count('passed')} | {results.count('failed')} | "
        f"{results.count('error')} | {results.count('skipped')} |", "", *results.rows(), "",
        "| not run | why |", "|---|---|", *(f"| `{d}` | {why} |" for d, why in NOT_RUN.items())])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.conformance.confluent_kafka_python",
                                 description="Run confluent-kafka-python's integration suite against a seglog "
                                             "broker and print the table CONFORMANCE.md records.")
    ap.add_argument("--source", metavar="DIR", help="a checkout of confluent-kafka-python (default: download "
                                                    f"{TAG} from GitHub)")
    ap.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic",
                    help="the group protocol of the suite's consumers that name none (default classic; consumer "
                         "is its KIP-848 mode)")
    ap.add_argument("selection", nargs="*", help="paths under the checkout (default: the external-cluster "
                                                 "directories)")
    args = ap.parse_args(argv)
    try:
        root = source(args.source)
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 2
    results = run(root, args.selection or None, group_protocol=args.group_protocol)
    print(markdown(results, args.source or TAG, args.group_protocol))
    for o in results.fixed:
        print(f"passes now, remove from KNOWN_FAILURES: {o.test}", file=sys.stderr)
    return 1 if results.unexpected else 0


if __name__ == "__main__":
    sys.exit(main())

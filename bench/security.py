"""Produce and consume over SASL_SSL vs PLAINTEXT on one broker, in the same run (issue 16: >= 0.7x for 100 B
records), and what the fetch path costs the broker under TLS, where sendfile cannot be used.

    python -m bench.security [--messages 1000000] [--runs 5] [--dir DIR] [--quick]

One `seglog broker` subprocess with two listeners: PLAINTEXT and SASL_SSL (SCRAM-SHA-512, the user's credential
added over the wire with AlterUserScramCredentials; a test CA's ECDSA P-256 server certificate, made as
tests/helpers/certs.py makes them). The same client code runs against each listener, alternating which goes
first in every round; figures are medians of --runs rounds:

- produce msg/s (confluent-kafka): --messages values of 100 B, 6 partitions, acks=1 and acks=all, linger.ms=5,
  batch.num.messages=10000, no compression (bench.broker.produce_rate), and the broker's CPU per message, after
  one untimed producer of a tenth as many over each listener;
- consume msg/s (confluent-kafka): 6 partitions x 40,000 records read again and again from the beginning with
  assign() (bench.broker.consume_rate);
- large fetches: Fetch v11 requests of 1 MiB per partition, one after the other, over seglog's own blocking
  client connection (seglog.client.BrokerConnection, TLS and SASL included), records counted from the batch
  headers only (bench.broker.fetch_loop): MB/s of record batches and the broker's CPU seconds per GB sent.
  On PLAINTEXT a fetch's record batches of 64 KiB and more leave with sendfile from the segment file; on TLS
  the broker hands the view of the mapped segment to the TLS transport in 256 KiB slices, encrypted in user
  space (kernel TLS is out of reach: Python 3.11 has no ssl.OP_ENABLE_KTLS).

Rate ratios are medians over the rounds of SASL_SSL / PLAINTEXT measured back to back in that round (higher is
better); CPU ratios are SASL_SSL / PLAINTEXT of the medians (a cost: lower is better).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile

from bench import broker as wire
from bench.broker import Server
from bench.suite import ratio as cost_ratio

TITLE = "Security: SASL_SSL vs PLAINTEXT on one broker (issue 16)"
LIBRARIES = ["confluent-kafka", "cryptography"]

USER, PASSWORD = "bench", "bench-secret"
PARTITIONS = 6
CONSUME_PER_PARTITION = 40_000
TARGET = 0.7                   # issue 16: SASL_SSL >= 0.7x PLAINTEXT for 100 B records


class SecureSeglogServer(Server):
    """`seglog broker` with a PLAINTEXT listener (bootstrap, used to create topics) and a SASL_SSL one
    (SCRAM-SHA-512) on free ports; `sasl_ssl` is the SASL_SSL listener's address."""

    name = "seglog broker"

    def __init__(self, data_dir: str, keystore: str):
        os.makedirs(data_dir, exist_ok=True)
        props = os.path.join(os.path.dirname(data_dir), "server.properties")
        with open(props, "w") as f:
            f.write("listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0\n"
                    "ssl.keystore.type=PEM\n"
                    f"ssl.keystore.location={keystore}\n"
                    "sasl.enabled.mechanisms=SCRAM-SHA-512\n")
        super().__init__([sys.executable, "-m", "seglog", "broker", "--config", props, "--data-dir", data_dir,
                          "--log-level", "WARNING"])
        addresses = dict((name, addr) for addr, name in
                         (part.strip().rstrip(",").rsplit(" ", 1) for part in
                          self.banner.split("listening on", 1)[1].split(", metrics")[0].split(",")))
        self.sasl_ssl = addresses["(SASL_SSL)"]

    def create_topic(self, topic: str, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)

    def add_scram_user(self, user: str, password: str) -> None:
        """A SCRAM-SHA-512 credential for `user`, set over the PLAINTEXT listener."""
        from confluent_kafka import admin
        client = admin.AdminClient({"bootstrap.servers": self.bootstrap})
        info = admin.ScramCredentialInfo(admin.ScramMechanism.SCRAM_SHA_512, 4096)
        client.alter_user_scram_credentials(
            [admin.UserScramCredentialUpsertion(user, info, password.encode())])[user].result(30)


def listener_settings(server: SecureSeglogServer, ca: str) -> dict[str, dict]:
    """Client settings (librdkafka's names; seglog's ClientSecurity reads the same) of each listener."""
    host, port = server.sasl_ssl.rsplit(":", 1)
    return {
        "PLAINTEXT": {"bootstrap.servers": server.bootstrap},
        "SASL_SSL": {"bootstrap.servers": f"localhost:{port}", "security.protocol": "SASL_SSL",
                     "ssl.ca.location": ca, "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER,
                     "sasl.password": PASSWORD},
    }


def fetch_rate(server: Server, conf: dict, topic: str, per_partition: int, total: int) -> tuple[float, float, float]:
    """bench.broker.fetch_loop over one seglog.client.BrokerConnection secured by `conf`."""
    from seglog.client import BrokerConnection
    from seglog.protocol import ApiKey
    from seglog.security.client import ClientSecurity
    host, port = conf["bootstrap.servers"].rsplit(":", 1)
    security = ClientSecurity.of({k: v for k, v in conf.items() if k != "bootstrap.servers"})
    c = BrokerConnection(host, int(port), client_id="bench-fetch", security=security)
    try:
        return wire.fetch_loop(lambda body: c.request(ApiKey.FETCH, body, version=11), server, topic, PARTITIONS,
                               per_partition, total)
    finally:
        c.close()


def _rate(r: float) -> str:
    return f"{r / 1e6:.2f} M msg/s" if r >= 1e6 else f"{r / 1e3:.0f} k msg/s"


def _range(values: list[float], scale: float = 1e3, unit: str = "k") -> str:
    return f" ({min(values) / scale:.0f}-{max(values) / scale:.0f} {unit})" if len(values) > 1 else ""


def paired(values: dict[str, list[float]]) -> float:
    """The median over rounds of SASL_SSL / PLAINTEXT, each round's two figures measured back to back (steadier
    than the ratio of the medians on a loaded machine, where a round's load hits both alike)."""
    return statistics.median(s / p for p, s in zip(values["PLAINTEXT"], values["SASL_SSL"]))


def paired_text(values: dict[str, list[float]]) -> str:
    """paired() and, over several rounds, the range of the rounds' ratios (how far one round can be trusted)."""
    ratios = [s / p for p, s in zip(values["PLAINTEXT"], values["SASL_SSL"])]
    spread = f" ({min(ratios):.2f}-{max(ratios):.2f}x)" if len(ratios) > 1 else ""
    return f"{paired(values):.2f}x{spread}"


def measure(root: str, n: int, runs: int, say=print) -> list[dict]:
    from tests.helpers.certs import CertificateAuthority
    rows: list[dict] = []

    def row(figure, plain, secure, ratio, target="", met=""):
        rows.append({"figure": figure, "PLAINTEXT": plain, "SASL_SSL (SCRAM-SHA-512)": secure,
                     "SASL_SSL / PLAINTEXT": ratio, "target": target, "met": met})
        if met:
            rows[-1]["summary"] = {"figure": figure, "target": target, "met": met,
                                   "measured": f"{ratio} ({secure} vs {plain})"}
        say(f"  {figure:<46} {plain:>24} {secure:>24} {ratio:>7}  {target} {met}")

    ca = CertificateAuthority(os.path.join(root, "ca"), "seglog bench CA")
    keystore = ca.issue("localhost").keystore
    load_start = os.getloadavg()[0]
    server = SecureSeglogServer(os.path.join(root, "data"), str(keystore))
    try:
        server.add_scram_user(USER, PASSWORD)
        confs = listener_settings(server, str(ca.cert))
        names = list(confs)
        seq = iter(range(10**6))
        for k in names:            # untimed: the first producer over each listener runs slow (first segments, TLS)
            wire.produce_rate(server, f"warm-up-{next(seq)}", PARTITIONS, "1", max(n // 10, 10_000), confs[k])
        for acks in ("1", "all"):
            rates = {k: [] for k in names}
            cpu = {k: [] for k in names}
            for r in range(runs):
                for k in (names if r % 2 == 0 else names[::-1]):       # alternate who goes first
                    rate, cores = wire.produce_rate(server, f"produce-{next(seq)}", PARTITIONS, acks, n, confs[k])
                    rates[k].append(rate)
                    cpu[k].append(cores / rate)
            pl, ss, rel = (*(statistics.median(rates[k]) for k in names), paired(rates))
            row(f"produce, 100 B, {PARTITIONS} partitions, acks={acks}", _rate(pl) + _range(rates["PLAINTEXT"]),
                _rate(ss) + _range(rates["SASL_SSL"]), paired_text(rates), f">= {TARGET}x",
                "yes" if rel >= TARGET else "NO")
            pc, sc = (statistics.median(cpu[k]) * 1e6 for k in names)
            row(f"  broker CPU per produced message, acks={acks}", f"{pc:.2f} us", f"{sc:.2f} us",
                cost_ratio(sc, pc))

        topic = f"consume-{next(seq)}"
        wire.fill(server, topic, PARTITIONS, CONSUME_PER_PARTITION)
        rates = {k: [] for k in names}
        cpu = {k: [] for k in names}
        fetched = {k: [] for k in names}
        for r in range(runs):
            for k in (names if r % 2 == 0 else names[::-1]):
                rate, cores = wire.consume_rate(server, topic, PARTITIONS, CONSUME_PER_PARTITION, n, confs[k])
                rates[k].append(rate)
                cpu[k].append(cores)
            for k in (names if r % 2 == 0 else names[::-1]):
                fetched[k].append(fetch_rate(server, confs[k], topic, CONSUME_PER_PARTITION, 4 * n))
        pl, ss, rel = (*(statistics.median(rates[k]) for k in names), paired(rates))
        row(f"consume, 100 B, {PARTITIONS} partitions", _rate(pl) + _range(rates["PLAINTEXT"]),
            _rate(ss) + _range(rates["SASL_SSL"]), paired_text(rates), f">= {TARGET}x",
            "yes" if rel >= TARGET else "NO")
        pc, sc = (statistics.median(cpu[k]) for k in names)
        row("  broker CPU while consuming", f"{pc:.2f} cores", f"{sc:.2f} cores", cost_ratio(sc, pc))
        mbs = {k: [f[1] / 1e6 for f in fetched[k]] for k in names}
        per_gb = {k: [f[2] / f[1] * 1e9 for f in fetched[k]] for k in names}
        pl, ss = (statistics.median(mbs[k]) for k in names)
        row("large fetches (1 MiB per partition), record bytes sent",
            f"{pl:.0f} MB/s{_range(mbs['PLAINTEXT'], 1, 'MB/s')} (sendfile)",
            f"{ss:.0f} MB/s{_range(mbs['SASL_SSL'], 1, 'MB/s')} (mapped view -> TLS)", paired_text(mbs))
        pc, sc = (statistics.median(per_gb[k]) for k in names)
        row("  broker CPU per GB fetched", f"{pc:.2f} s", f"{sc:.2f} s", cost_ratio(sc, pc) + " (cost)")
    finally:
        server.close()
    row("machine load average (1 min) at start / end", f"{load_start:.1f} / {os.getloadavg()[0]:.1f}", "same run",
        "", f"{os.cpu_count()} cores", "")
    return rows


def run(ctx) -> list[dict]:
    """bench.suite section."""
    from bench import suite
    suite.require("confluent_kafka", hint="pip install confluent-kafka")
    suite.require("cryptography", hint="pip install cryptography (the test CA)")
    n = 50_000 if ctx.quick else 1_000_000
    runs = 1 if ctx.quick else ctx.runs
    ctx.note(f"confluent-kafka {wire._client_version()} against one `seglog broker` with a PLAINTEXT and a SASL_SSL "
             f"(SCRAM-SHA-512) listener, alternating; {n:,} messages of 100 B per produce figure, medians "
             f"of {runs} rounds (rate ratios: the median of each round's ratio). Also `python -m bench.security`.")
    return measure(ctx.dir, n, runs, say=lambda s: print(s, flush=True))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--dir", default=None)
    p.add_argument("--quick", action="store_true", help="50,000 messages, 1 round")
    a = p.parse_args(argv)
    if a.quick:
        a.messages, a.runs = 50_000, 1
    root = a.dir or tempfile.mkdtemp(prefix="seglog-bench-security-")
    os.makedirs(root, exist_ok=True)
    print(f"seglog security benchmark: confluent-kafka {wire._client_version()}, {a.messages:,} messages of 100 B, "
          f"median of {a.runs} rounds, in {root}", flush=True)
    try:
        rows = measure(root, a.messages, a.runs)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print()
    print(wire.markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

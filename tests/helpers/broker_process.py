"""Run a seglog broker in this process until SIGTERM/SIGINT (for tests that need it in a subprocess).

    python broker_process.py DATA_DIR [kafka.name=value ...]

Listens on a free port of 127.0.0.1 unless ``listeners=...`` is given; seglog.broker.run_forever prints
``seglog broker N listening on HOST:PORT`` once it accepts connections. Exit status is run_forever's.
"""

import sys

from seglog.broker import run_forever
from seglog.config import BrokerConfig


def main(argv: list[str]) -> int:
    data_dir, *pairs = argv
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": data_dir,
             "group.initial.rebalance.delay.ms": "0"}
    for pair in pairs:
        name, _, value = pair.partition("=")
        props[name] = value
    return run_forever(BrokerConfig().with_kafka(props))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""The `seglog` command (entry point ``seglog.cli:main``; ``python -m seglog`` runs it too).

    seglog topics     create, describe, list, alter, delete topics              (kafka-topics.sh)
    seglog produce    stdin lines -> records                                     (kafka-console-producer.sh)
    seglog consume    records -> stdout                                          (kafka-console-consumer.sh)
    seglog groups     list, describe, delete groups; reset offsets               (kafka-consumer-groups.sh)
    seglog transactions  list transactional ids, describe one                  (kafka-transactions.sh)
    seglog leader-election  preferred or unclean leader elections              (kafka-leader-election.sh)
    seglog reassign-partitions  move partition replicas between brokers        (kafka-reassign-partitions.sh)
    seglog acls       add, remove, list ACLs                                     (kafka-acls.sh)
    seglog configs    describe, alter client quotas of users and client ids      (kafka-configs.sh)
    seglog demo       append and read back a million records; print the throughput
    seglog dump-log   every batch and record of .log files, entries of index files (kafka-dump-log.sh)
    seglog broker     run a Kafka-protocol broker (alone, or in a ZooKeeper cluster) (kafka-server-start.sh)
    seglog zookeeper  run the Debian ZooKeeper on loopback                        (zookeeper-server-start.sh)

Each command module registers its subcommands with ``register(subparsers)``; a subcommand is a function of
the parsed arguments returning the exit status. topics/produce/consume/groups work through the Admin
interface of seglog.cli.admin (seglog.cli.connect picks the implementation), so they run on a data dir (``--data-dir``) or a broker
(``--bootstrap-server``) alike. Errors are one line on stderr: exit status 1, or 2 for bad usage.
"""

from __future__ import annotations

import os
import sys

from .. import __version__
from ..errors import SeglogError
from . import (acls, configs, console, demo, dumplog, election, groups, logdirs, reassign, records, servers,
               topics, transactions)
from .common import CliError, Parser, interrupt_status, raise_on_sigterm

COMMANDS = (topics, console, groups, transactions, records, election, reassign, acls, configs, logdirs, demo,
            dumplog, servers)
"""The modules whose register(subparsers) make up the command, in --help order."""


def build_parser() -> Parser:
    p = Parser(prog="seglog", description="seglog: a Kafka-compatible segmented log for Python")
    p.add_argument("--version", action="version", version=f"seglog {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for module in COMMANDS:
        module.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    raise_on_sigterm()
    try:
        return args.func(args)
    except CliError as e:
        return _fail(args, str(e), e.status)
    except SeglogError as e:
        return _fail(args, str(e), 1)
    except KeyboardInterrupt as e:
        return interrupt_status(e)
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except OSError as e:
        return _fail(args, f"{e.strerror or e}" + (f": {e.filename}" if e.filename else ""), 1)


def _fail(args, message: str, status: int) -> int:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    sys.stderr.write(f"seglog {args.command}: error: {message}\n")
    return status


def _silence_stdout() -> None:
    """stdout's reader went away (`seglog consume ... | head`): drop what is still buffered quietly."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())

"""Helpers the commands share: one-line errors, the --data-dir / --bootstrap-server options, key=value
arguments, number parsing and Kafka-style text tables."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Iterable, Sequence


class Interrupted(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C raises KeyboardInterrupt, so a command stops the same way
    (``seglog consume`` commits and leaves its group) and exits 128 + 15, as a process killed by it would
    report. A KeyboardInterrupt without ``status`` (Ctrl-C) exits 130."""

    status = 128 + signal.SIGTERM


def interrupt_status(exc: KeyboardInterrupt) -> int:
    """The exit status of a command stopped by ``exc``: 143 for SIGTERM, 130 for SIGINT."""
    return getattr(exc, "status", 128 + signal.SIGINT)


def raise_on_sigterm() -> None:
    """Make SIGTERM raise :class:`Interrupted` in the main thread (commands that serve, broker and zookeeper,
    install handlers of their own)."""
    def interrupted(signum, frame):
        raise Interrupted()
    signal.signal(signal.SIGTERM, interrupted)


class CliError(Exception):
    """A problem to report on one line (``seglog CMD: error: MESSAGE``); ``status`` is the exit code."""

    status = 1

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        if status is not None:
            self.status = status


class UsageError(CliError):
    """The arguments do not make sense together (exit code 2, as argparse's own usage errors)."""

    status = 2


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the command (no usage dump)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_target(p: argparse.ArgumentParser, *aliases: str, config_aliases: Sequence[str] = ()) -> None:
    """The data source every command takes: a data dir in this process, or a broker (with --command-config,
    or its `config_aliases`, for a TLS or SASL listener)."""
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--data-dir", metavar="DIR", help="a seglog data directory, opened in this process (fails "
                                                     "while a broker runs on it)")
    g.add_argument("--bootstrap-server", *aliases, dest="bootstrap_server", metavar="HOST:PORT",
                   help="a running seglog (or Kafka) broker")
    add_command_config(p, *config_aliases)


def add_command_config(p: argparse.ArgumentParser, *aliases: str) -> None:
    """--command-config FILE, as Kafka's tools: a properties file of client settings (security.protocol,
    ssl.*, sasl.*: how to reach a TLS or SASL listener)."""
    p.add_argument("--command-config", *aliases, dest="command_config", metavar="FILE",
                   help="a properties file of client settings for --bootstrap-server, e.g. security.protocol, "
                        "ssl.ca.location (or ssl.truststore.location), sasl.mechanism, sasl.username, "
                        "sasl.password (or sasl.jaas.config)")


def json_partitions(path: str, fields: Sequence[str]) -> list[tuple]:
    """The ``{"partitions": [{"topic": "t", "partition": 0, ...}]}`` file of Kafka's tools (kafka-delete-records.sh,
    kafka-leader-election.sh): per entry its topic and the integer `fields`, in order; CliError for a file that is
    not JSON, has no partitions, or has an entry of another shape or a partition twice."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except ValueError as e:
        raise CliError(f"{path} is not JSON: {e}") from None
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    shape = ", ".join(f'"{k}": ...' for k in ("topic", *fields))
    if not isinstance(entries, list) or not entries:
        raise CliError(f'{path}: expected {{"partitions": [{{{shape}}}]}}')
    out, seen = [], set()
    for e in entries:
        if not (isinstance(e, dict) and isinstance(e.get("topic"), str) and all(type(e.get(k)) is int for k in fields)):
            raise CliError(f"{path}: each partition needs a string topic and integer {' and '.join(fields)}: {e!r}")
        if (e["topic"], e["partition"]) in seen:
            raise CliError(f"{path}: partition {e['topic']}-{e['partition']} is listed more than once")
        seen.add((e["topic"], e["partition"]))
        out.append((e["topic"], *(e[k] for k in fields)))
    return out


def key_values(items: Iterable[str] | None, what: str) -> dict[str, str]:
    """``["a=1", "b=2"]`` -> ``{"a": "1", "b": "2"}``; UsageError for an item without '=' or an empty key."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"invalid {what} {item!r}: expected key=value")
        out[key.strip()] = value
    return out


def split_config_list(text: str) -> list[str]:
    """kafka-configs' ``--add-config k1=v1,k2=[a,b]`` list: commas separate entries except inside [...]."""
    items, depth, cur = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    items.append(cur)
    out = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if sep and value.startswith("[") and value.endswith("]"):
            item = f"{key}={value[1:-1]}"
        out.append(item)
    return out


def boolean(props: dict[str, str], name: str, default: bool) -> bool:
    raw = props.get(name)
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise UsageError(f"property {name} must be true or false, not {raw!r}")
    return raw.strip().lower() == "true"


def check_known(props: dict[str, str], known: Sequence[str], what: str) -> None:
    unknown = sorted(set(props) - set(known))
    if unknown:
        raise UsageError(f"unknown {what} {', '.join(unknown)} (known: {', '.join(known)})")


def positive(text: str) -> int:
    try:
        v = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text}")
    return v


def non_negative(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text}")
    return v


def table(header: Sequence[str], rows: Iterable[Sequence[object]], min_width: Sequence[int] = ()) -> list[str]:
    """Left-aligned columns separated by one space, each as wide as its widest cell (and at least
    ``min_width``), the last column unpadded: the layout of kafka-consumer-groups.sh."""
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    widths = [max(w, min_width[i] if i < len(min_width) else 0) for i, w in enumerate(widths)]
    return [" ".join(c.ljust(w) for c, w in zip(r[:-1], widths)) + " " + r[-1] for r in cells]


def out(line: str = "") -> None:
    sys.stdout.write(line + "\n")


def err(line: str) -> None:
    sys.stderr.write(line + "\n")

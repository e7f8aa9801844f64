"""`seglog transactions`: list the transactional ids and describe one (kafka-transactions.sh).

    seglog transactions --bootstrap-server localhost:9092 --list
    seglog transactions --data-dir data --describe --transactional-id orders-eos

Output is kafka-transactions.sh's: a table whose cells are padded to their column's width and each followed
by a tab. --list prints TransactionalId, Coordinator, ProducerId, TransactionState per id (every broker is
asked); --describe the id's coordinator, producer id and epoch, state, timeout, the start of its transaction
("None" without one), how long ago that was, and the partitions still without a marker.
"""

from __future__ import annotations

import time

from ..errors import SeglogError
from .common import CliError, add_target, out
from .connect import connect

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions")


def register(sub) -> None:
    p = sub.add_parser("transactions", help="list and describe transactions (kafka-transactions.sh)",
                       description="The transactional ids the transaction coordinators know, and the state of "
                                   "one of them.")
    add_target(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="every transactional id, its coordinator and state")
    action.add_argument("--describe", action="store_true", help="the state of --transactional-id")
    p.add_argument("--transactional-id", metavar="ID", help="--describe: the transactional id")
    p.set_defaults(func=cmd_transactions)


def pretty_table(headers, rows) -> list[str]:
    """Kafka's ToolsUtils.prettyPrintTable: every cell padded to its column's width, then a tab."""
    cells = [list(headers)] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return ["".join(c.ljust(w) + "\t" for c, w in zip(r, widths)) for r in cells]


def cmd_transactions(args) -> int:
    if args.describe and not args.transactional_id:
        raise CliError("--describe needs --transactional-id", 2)
    if args.list and args.transactional_id:
        raise CliError("--transactional-id goes with --describe", 2)
    with connect(args) as admin:
        if args.list:
            rows = [(t.transactional_id, coordinator, t.producer_id, t.state)
                    for coordinator, t in admin.list_transactions()]
            for line in pretty_table(LIST_HEADERS, rows):
                out(line)
            return 0
        tid = args.transactional_id
        try:
            d = admin.describe_transaction(tid)
        except SeglogError as e:
            raise CliError(f"Failed to describe transaction state of transactional-id `{tid}`: {e}", 1) from None
        started = d.start_ms if d.start_ms >= 0 and d.state not in ("Empty", "Dead") else None
        row = (d.coordinator_id, tid, d.producer_id, d.producer_epoch, d.state, d.timeout_ms,
               "None" if started is None else started,
               "None" if started is None else int(time.time() * 1000) - started,
               ",".join(f"{t}-{p}" for t, p in d.partitions))
        for line in pretty_table(DESCRIBE_HEADERS, [row]):
            out(line)
        return 0

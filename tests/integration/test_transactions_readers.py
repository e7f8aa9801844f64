"""read_committed through seglog's readers over both doors: `seglog consume --isolation-level` (a data dir and
a broker) and the consumer's Kafka property isolation.level. The transactions are written by seglog's
transactional Producer through the same door: committed, aborted after their records reached the log, and one
left open (read_committed stops before it, read_uncommitted reads it)."""

from __future__ import annotations

from test_cli import ok, run

import seglog


def _write_transactions(door) -> None:
    node = seglog.connect(door.broker.bootstrap_servers) if door.live else seglog.open(door.path)
    try:
        node.create_topic("tx", 2)
        with seglog.Producer(node) as plain:
            plain.send("tx", b"plain", partition=0).get()
        p = seglog.Producer(node, transactional_id="readers")
        p.init_transactions()
        for t, end in enumerate(("commit", "abort", "commit", "abort")):
            p.begin_transaction()
            for i in range(3):
                p.send("tx", b"%s-%d-%d" % (end.encode(), t, i), partition=i % 2)
            p.flush()
            p.commit_transaction() if end == "commit" else p.abort_transaction()
        p.close()
        open_txn = seglog.Producer(node, transactional_id="left-open")
        open_txn.init_transactions()
        open_txn.begin_transaction()
        open_txn.send("tx", b"open", partition=1)
        open_txn.flush()                 # not closed: closing would abort it
    finally:
        node.close()


def test_consume_isolation_levels_over_both_doors(cli_door):
    d = cli_door.args
    _write_transactions(cli_door)
    committed = sorted(["plain"] + [f"commit-{t}-{i}" for t in (0, 2) for i in range(3)])
    aborted = [f"abort-{t}-{i}" for t in (1, 3) for i in range(3)]

    def consume(*extra):
        r = run("consume", *d, "--topic", "tx", "--from-beginning", "--timeout-ms", "3000", *extra)
        assert r.returncode == 0, r.stderr
        return sorted(r.stdout.splitlines())

    # the open transaction comes last in partition 1: read_committed stops before it, with every committed record
    got = consume("--isolation-level", "read_committed")
    assert got == committed
    assert consume("--consumer-property", "isolation.level=read_committed") == committed
    assert consume() == sorted(committed + aborted + ["open"])
    assert consume("--isolation-level", "read_uncommitted") == consume()
    r = run("consume", *d, "--topic", "tx", "--isolation-level", "committed")
    assert r.returncode != 0 and "invalid choice" in r.stderr

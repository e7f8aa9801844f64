"""Transactional produce vs idempotent produce, and read_committed fetch vs read_uncommitted fetch, measured in
the same run (issue 14's targets: >= 0.8x with a commit every 100 ms; >= 0.9x).

    python -m bench.transactions [--seconds 4] [--runs 3] [--commit-ms 100] [--value-bytes 100]
                                 [--partitions 4] [--clients seglog,seglog-connect,confluent] [--dir DIR]

Each client sends 100-byte records to a 4-partition topic for ``seconds``: idempotent (acks=all, no
transaction) and transactional (begin, send, commit every ``commit-ms``; each transaction's records are on
disk and its markers written before the next begins), alternating so both see the same machine state; runs
are repeated ``runs`` times and the medians compared. Clients: seglog's Producer in process (``seglog.open``),
seglog's Producer over the wire (``seglog.connect`` to ``seglog.serve``), and confluent-kafka (librdkafka)
against the same broker. Records/s counts the records of committed transactions only (every transaction
commits here).

Fetch: a topic of 200,000 records written by 100 transactions of 2,000 (every ``--abort-every``-th one aborted
after its records reached the log, default 4; 0: none) is read whole by a consumer at each isolation level,
alternating (each goes first in every other run), ``runs`` times each: seglog's Consumer over the wire and
confluent-kafka's consumer. Records/s counts the records each level returns; the time ratio compares the time
each takes to read the whole topic (read_uncommitted time / read_committed time). JSON on the last line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time

import seglog

CLIENTS = ("seglog", "seglog-connect", "confluent")


def _seglog_rate(node, topic: str, value: bytes, seconds: float, commit_s: float | None, tid: str) -> float:
    p = seglog.Producer(node, linger_ms=5, transactional_id=tid if commit_s else None)
    send = p.send
    sent = 0
    try:
        if commit_s:
            p.init_transactions()
        t0 = time.perf_counter()
        end = t0 + seconds
        while True:
            if commit_s:
                p.begin_transaction()
            txn_end = time.perf_counter() + (commit_s or seconds)
            while time.perf_counter() < txn_end:
                for _ in range(200):
                    send(topic, value)
                sent += 200
            if commit_s:
                p.commit_transaction()
            else:
                p.flush()
            if time.perf_counter() >= end:
                break
        return sent / (time.perf_counter() - t0)
    finally:
        p.close()


def _seglog_fetch_rate(node, topic: str, partitions: int, isolation: str) -> tuple[int, float]:
    c = seglog.Consumer(node, auto_offset_reset="earliest", enable_auto_commit=False, isolation_level=isolation,
                        max_poll_records=100_000)
    try:
        tps = [(topic, p) for p in range(partitions)]
        c.assign(tps)
        ends = c.end_offsets(tps)
        n = 0
        t0 = time.perf_counter()
        while any(c.position(tp) < end for tp, end in ends.items()):
            n += len(c.poll(0.2))
        return n, n / (time.perf_counter() - t0)
    finally:
        c.close()


def _confluent_fetch_rate(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int
                          ) -> tuple[int, float]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.time()}", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": isolation})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        n = 0
        t0 = time.perf_counter()
        idle = 0
        while n < expected and idle < 20:
            msgs = c.consume(10_000, 0.2)
            idle = 0 if msgs else idle + 1
            n += sum(1 for m in msgs if not m.error())
        return n, n / (time.perf_counter() - t0)
    finally:
        c.close()


def measure_fetch(client: str, broker, topic: str, args) -> dict:
    """Median records/s of reading `topic` whole at each isolation level (alternating), and what each read."""
    rates: dict[str, list[float]] = {"read_uncommitted": [], "read_committed": []}
    seconds: dict[str, list[float]] = {"read_uncommitted": [], "read_committed": []}
    counts: dict[str, int] = {}
    for run in range(args.runs):
        for level in list(rates)[::1 if run % 2 == 0 else -1]:      # each level goes first in every other run
            if client == "confluent":
                n, rate = _confluent_fetch_rate(broker.bootstrap_servers, topic, args.partitions, level,
                                                counts.get(level, 1 << 62))
            else:
                with seglog.connect(broker.bootstrap_servers) as node:
                    n, rate = _seglog_fetch_rate(node, topic, args.partitions, level)
            counts[level] = n
            rates[level].append(rate)
            seconds[level].append(n / rate)
    unc, com = (statistics.median(rates[k]) for k in ("read_uncommitted", "read_committed"))
    unc_s, com_s = (statistics.median(seconds[k]) for k in ("read_uncommitted", "read_committed"))
    return {"read_uncommitted_rps": round(unc), "read_committed_rps": round(com), "ratio": round(com / unc, 3),
            "records": counts, "read_uncommitted_s": round(unc_s, 3), "read_committed_s": round(com_s, 3),
            "time_ratio": round(unc_s / com_s, 3)}


def _aborting_topic(node, topic: str, args) -> None:
    """`topic` written by transactions of 2,000 records, every `abort_every`-th one aborted after its records
    reached the log (0: none aborted), 200,000 records in all."""
    node.create_topic(topic, args.partitions)
    p = seglog.Producer(node, linger_ms=5, transactional_id=f"fill-{topic}")
    value = b"x" * args.value_bytes
    try:
        p.init_transactions()
        for t in range(100):
            p.begin_transaction()
            for _ in range(2000):
                p.send(topic, value)
            p.flush()
            if args.abort_every and t % args.abort_every == args.abort_every - 1:
                p.abort_transaction()
            else:
                p.commit_transaction()
    finally:
        p.close()


def _confluent_rate(bootstrap: str, topic: str, value: bytes, seconds: float, commit_s: float | None,
                    tid: str) -> float:
    from confluent_kafka import Producer
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True, "acks": "all"}
    if commit_s:
        conf["transactional.id"] = tid
    p = Producer(conf)
    if commit_s:
        p.init_transactions(30)
    sent = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while True:
        if commit_s:
            p.begin_transaction()
        txn_end = time.perf_counter() + (commit_s or seconds)
        while time.perf_counter() < txn_end:
            for _ in range(200):
                try:
                    p.produce(topic, value)
                except BufferError:
                    p.poll(0.01)
                    continue
                sent += 1
            p.poll(0)
        if commit_s:
            p.commit_transaction(30)
        else:
            p.flush(30)
        if time.perf_counter() >= end:
            break
    return sent / (time.perf_counter() - t0)


def measure(client: str, node, bootstrap: str, args, run: int) -> tuple[float, float]:
    """(idempotent records/s, transactional records/s) of one run, each on a topic of its own."""
    value = b"x" * args.value_bytes
    rates = []
    for kind, commit_s in (("idem", None), ("txn", args.commit_ms / 1000)):
        topic = f"bench-{client}-{kind}-{run}"
        node.create_topic(topic, args.partitions)
        tid = f"bench-{client}-{run}"
        if client == "confluent":
            rates.append(_confluent_rate(bootstrap, topic, value, args.seconds, commit_s, tid))
        else:
            door = node if client == "seglog" else seglog.connect(bootstrap)
            try:
                rates.append(_seglog_rate(door, topic, value, args.seconds, commit_s, tid))
            finally:
                if door is not node:
                    door.close()
    return rates[0], rates[1]


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m bench.transactions", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=4.0)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--commit-ms", type=int, default=100)
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--clients", default=",".join(CLIENTS))
    p.add_argument("--abort-every", type=int, default=4,
                   help="fetch part: every N-th transaction of the topic read is aborted (0: none)")
    p.add_argument("--dir", default=None, help="scratch directory (default: a temporary one)")
    args = p.parse_args(argv)
    clients = [c for c in args.clients.split(",") if c]
    unknown = set(clients) - set(CLIENTS)
    if unknown:
        p.error(f"unknown clients {sorted(unknown)}; choose from {', '.join(CLIENTS)}")
    scratch = args.dir or tempfile.mkdtemp(prefix="seglog-txn-bench-")
    results = {}
    try:
        with seglog.serve(scratch, transaction_state_log_num_partitions=5) as broker:
            for client in clients:
                runs = [measure(client, broker.node, broker.bootstrap_servers, args, r) for r in range(args.runs)]
                idem = statistics.median(r[0] for r in runs)
                txn = statistics.median(r[1] for r in runs)
                results[client] = {"idempotent_rps": round(idem), "transactional_rps": round(txn),
                                   "ratio": round(txn / idem, 3),
                                   "runs": [[round(a), round(b)] for a, b in runs]}
                print(f"{client:15s} idempotent {idem:10,.0f} rec/s   transactional ({args.commit_ms} ms commits) "
                      f"{txn:10,.0f} rec/s   ratio {txn / idem:.2f}x   runs {results[client]['runs']}")
            topic = "bench-fetch"
            _aborting_topic(broker.node, topic, args)
            for client in [c for c in clients if c != "seglog"] or ["seglog-connect"]:
                f = results.setdefault(client, {})["fetch"] = measure_fetch(client, broker, topic, args)
                print(f"{client:15s} fetch read_uncommitted {f['read_uncommitted_rps']:10,.0f} rec/s   "
                      f"read_committed {f['read_committed_rps']:10,.0f} rec/s   ratio {f['ratio']:.2f}x   "
                      f"whole topic in {f['read_uncommitted_s']:.3f} s vs {f['read_committed_s']:.3f} s "
                      f"({f['time_ratio']:.2f}x)   records {f['records']}")
    finally:
        if args.dir is None:
            shutil.rmtree(scratch, ignore_errors=True)
    out = {"seconds": args.seconds, "runs": args.runs, "commit_ms": args.commit_ms, "abort_every": args.abort_every,
           "value_bytes": args.value_bytes, "partitions": args.partitions, "clients": results}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()

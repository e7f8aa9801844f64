"""An exactly-once consume-transform-produce loop with seglog's clients over the wire, the app the EOS test
kills with SIGKILL at random points and starts again.

    python eos_worker.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID [PACE_S]

It reads INPUT with a read_committed consumer of GROUP (static member "worker", so a restart takes its
partitions back at once), and per poll writes each record's value, upper-cased, to the same partition of OUTPUT
and the consumed positions to the group, in one transaction. init_transactions() comes first, as Kafka's EOS
apps do: it fences the previous (killed) instance and waits until its open transaction is aborted, so the
committed offsets the consumer then starts from are final. Prints one line per committed transaction.
PACE_S (default 0) holds each transaction open that long before committing, so a kill lands inside most
transactions and the loop lasts long enough to be killed several times.
"""

import sys
import time

import seglog


def main(bootstrap: str, src: str, dst: str, group: str, tid: str, pace_s: str = "0") -> None:
    node = seglog.connect(bootstrap)
    producer = seglog.Producer(node, transactional_id=tid, linger_ms=1)
    producer.init_transactions()
    consumer = seglog.Consumer(node, group_id=group, group_instance_id="worker", auto_offset_reset="earliest",
                               enable_auto_commit=False, isolation_level="read_committed",
                               session_timeout_ms=6000, max_poll_records=50)
    consumer.subscribe([src])
    while True:
        records = consumer.poll(0.5)
        if not records:
            continue
        producer.begin_transaction()
        ends = {}
        for r in records:
            producer.send(dst, r.value.upper(), key=r.key, partition=r.partition)
            ends[(src, r.partition)] = r.offset + 1
        producer.send_offsets_to_transaction(ends, consumer.group_metadata())
        time.sleep(float(pace_s))
        producer.commit_transaction()
        print(f"committed {len(records)} up to {ends}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:7])

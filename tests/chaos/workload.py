"""The chaos workload: idempotent producers writing unique values and consumer-group members reading and
committing, every step recorded in the History.

- ``RecordingProducer``: cluster_harness's ConfluentBackgroundProducer (librdkafka, enable.idempotence,
  acks=all) at a fixed rate, round robin over the partitions; values ``<name>-p<partition>-<seq>`` are unique.
  Records ``send``, ``ack`` (partition, offset), ``fail``; a fatal client error (librdkafka gives up on an
  idempotent producer whose sequence it cannot repair) is recorded as ``client_error`` and the runner replaces
  the producer with a new one under a new name.
- ``GroupMember``: a confluent-kafka consumer in a group (manual commits, auto.offset.reset=earliest) polling on a
  thread of its own. Records ``assign`` (with the committed offsets it resumes from), ``read`` and, about every
  second and on revocation, a synchronous ``commit`` of its position (or ``commit_fail``).
"""

from __future__ import annotations

import threading
import time

from cluster_harness import ConfluentBackgroundProducer

from .history import History


def client_logger(path, debug: bool = False) -> "logging.Logger":
    """A logger for librdkafka's log lines (``logger`` config), written to `path` instead of stderr; `debug`
    keeps the debug lines the producers' ``debug`` contexts ask for."""
    import logging

    logger = logging.getLogger(f"chaos.clients.{path}")
    logger.propagate = False
    if not logger.handlers:
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if debug else logging.INFO)
    return logger

CLIENT_TIMEOUTS = {"socket.timeout.ms": 10000, "reconnect.backoff.max.ms": 1000,
                   "topic.metadata.refresh.interval.ms": 5000, "retry.backoff.ms": 100}


class RecordingProducer(ConfluentBackgroundProducer):
    def __init__(self, history: History, name: str, bootstrap: str, topic: str, partitions, rate: float,
                 message_timeout_ms: int = 60000, logger=None, debug: str | None = None):
        self.history, self.name = history, name
        self.fatal: str | None = None
        extra = {"logger": logger} if logger is not None else {}
        if debug:
            extra["debug"] = debug
        super().__init__(bootstrap, topic, partitions, tag=name.encode(), rate=rate, max_pending=10 ** 6,
                         **{"message.timeout.ms": message_timeout_ms, "error_cb": self._client_error,
                            "client.id": name, **extra})

    def _client_error(self, err) -> None:
        self.history.record("client_error", client=self.name, error=str(err), fatal=bool(err.fatal()))
        if err.fatal():
            self.fatal = str(err)

    def _send(self, p: int, seq: int) -> None:
        from confluent_kafka import KafkaException

        self.history.record("send", producer=self.name, partition=p, value=self.value(p, seq).decode())
        try:
            super()._send(p, seq)
        except KafkaException as e:       # refused at once (the partition is unknown to the client right now)
            self._err(p, seq, e.args[0] if e.args else e)

    @property
    def dead(self) -> str | None:
        """Why this producer cannot go on (a fatal client error, or its sending thread died), else None."""
        if self.fatal is not None:
            return self.fatal
        if self.error is not None:
            return repr(self.error)
        return None

    def _ok(self, p, seq, offset):
        self.history.record("ack", producer=self.name, partition=p, value=self.value(p, seq).decode(),
                            offset=offset)
        super()._ok(p, seq, offset)

    def _err(self, p, seq, exc):
        self.history.record("fail", producer=self.name, partition=p, value=self.value(p, seq).decode(),
                            error=str(exc))
        super()._err(p, seq, exc)


class GroupMember:
    """One consumer of `group` on its own thread; ``start()``, ``stop()``. ``highest`` is the highest offset read
    per partition, ``last_read`` when it last read one."""

    COMMIT_EVERY_S = 1.0

    def __init__(self, history: History, name: str, group: str, bootstrap: str, topic: str,
                 session_timeout_ms: int = 6000, logger=None):
        from confluent_kafka import Consumer

        self.history, self.name, self.group, self.topic = history, name, group, topic
        self.highest: dict[int, int] = {}
        self.last_read = 0.0                      # time.monotonic() of the last record read
        self._dirty = False
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "session.timeout.ms": session_timeout_ms, "heartbeat.interval.ms": 1000,
                                  "max.poll.interval.ms": 60000, "fetch.wait.max.ms": 200,
                                  "error_cb": self._client_error, **CLIENT_TIMEOUTS,
                                  **({"logger": logger} if logger is not None else {})})
        self._thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)

    def _client_error(self, err) -> None:
        self.history.record("client_error", client=self.name, error=str(err), fatal=bool(err.fatal()))

    def start(self) -> "GroupMember":
        self._thread.start()
        return self

    def _assigned(self, consumer, partitions) -> None:
        t_ask = self.history.now()
        committed: dict[str, int | None] = {}
        error = None
        try:
            for tp in consumer.committed(partitions, timeout=10):
                committed[str(tp.partition)] = tp.offset if tp.offset >= 0 else None
        except Exception as e:                    # KafkaException: the coordinator did not answer in time
            error = str(e)
            committed = {}
        self.history.record("assign", consumer=self.name, group=self.group,
                            partitions=sorted(tp.partition for tp in partitions), committed=committed,
                            t_ask=t_ask, error=error)

    def _revoked(self, consumer, partitions) -> None:
        self.history.record("revoke", consumer=self.name, group=self.group,
                            partitions=sorted(tp.partition for tp in partitions))
        self.commit()

    def commit(self) -> None:
        """Commit the position of every assigned partition, synchronously; record what the coordinator took."""
        from confluent_kafka import KafkaException

        if not self._dirty:
            return
        self._dirty = False
        try:
            done = self.consumer.commit(asynchronous=False) or []
        except KafkaException as e:
            self.history.record("commit_fail", consumer=self.name, group=self.group, error=str(e))
            return
        for tp in done:
            if tp.error is not None:
                self.history.record("commit_fail", consumer=self.name, group=self.group, error=str(tp.error),
                                    partition=tp.partition)
            elif tp.offset >= 0:
                self.history.record("commit", consumer=self.name, group=self.group, partition=tp.partition,
                                    offset=tp.offset)

    def _run(self) -> None:
        from confluent_kafka import KafkaError

        try:
            self.consumer.subscribe([self.topic], on_assign=self._assigned, on_revoke=self._revoked)
            last_commit = time.monotonic()
            while not self._stop.is_set():
                msg = self.consumer.poll(0.2)
                if msg is not None:
                    if msg.error():
                        if msg.error().code() != KafkaError._PARTITION_EOF:
                            self.history.record("client_error", client=self.name, error=str(msg.error()),
                                                fatal=False)
                    else:
                        p, o = msg.partition(), msg.offset()
                        self.history.record("read", consumer=self.name, group=self.group, partition=p, offset=o,
                                            value=msg.value().decode())
                        self.highest[p] = max(self.highest.get(p, -1), o)
                        self.last_read = time.monotonic()
                        self._dirty = True
                if time.monotonic() - last_commit >= self.COMMIT_EVERY_S:
                    self.commit()
                    last_commit = time.monotonic()
            self.commit()
        except BaseException as e:               # noqa: BLE001 - reported by stop()
            self.error = e
        finally:
            try:
                self.consumer.close()
            except Exception:
                pass

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout)


class TxnWriter:
    """A confluent-kafka transactional producer (``transactional.id`` = its name) on its own thread: each
    transaction writes 2-6 values ``<name>-t<k>-<i>`` (``<name>.<generation>-t<k>-<i>`` for a writer that
    replaces another with the same transactional id, so no value repeats) to random partitions of `topic`,
    then commits, or aborts
    about one time in four (seeded). Records ``txn_send`` (txn, partition, value) and ``txn_end`` (txn,
    outcome, error) where outcome is ``committed`` (commit_transaction returned), ``aborted``
    (abort_transaction returned, also after an abortable error) or ``unknown`` (the client gave up between:
    the transaction may still commit or abort, but whole). After an unknown outcome the producer is replaced by
    a new one with the same transactional id, whose init_transactions() completes or aborts the old
    transaction and fences the old producer, as an application restarted by its supervisor would."""

    OP_TIMEOUT_S = 30.0
    RETRY_FOR_S = 60.0

    def __init__(self, history: History, name: str, bootstrap: str, topic: str, partitions, seed: int,
                 abort_ratio: float = 0.25, logger=None, generation: int = 0):
        import random

        self.history, self.name, self.bootstrap, self.topic = history, name, bootstrap, topic
        self.label = f"{name}.{generation}" if generation else name        # what its transactions are named by
        self.partitions, self.abort_ratio, self.logger = list(partitions), abort_ratio, logger
        self.rng = random.Random(seed)
        self.last_commit = 0.0                    # time.monotonic() of the last committed transaction
        self.committed = 0
        self.error: BaseException | None = None
        self.producer = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"txn-{name}", daemon=True)

    def start(self) -> "TxnWriter":
        self._thread.start()
        return self

    def _client_error(self, err) -> None:
        self.history.record("client_error", client=self.name, error=str(err), fatal=bool(err.fatal()))

    def _new_producer(self, within: float | None = None):
        """A producer with this writer's transactional id, initialised (retried until it is, until stop(), or
        for `within` seconds); None when it could not be."""
        from confluent_kafka import KafkaException, Producer

        conf = {"bootstrap.servers": self.bootstrap, "transactional.id": self.name, "client.id": self.name,
                "transaction.timeout.ms": 20000, "message.timeout.ms": 20000, "error_cb": self._client_error,
                "linger.ms": 5, **CLIENT_TIMEOUTS, **({"logger": self.logger} if self.logger is not None else {})}
        deadline = None if within is None else time.monotonic() + within
        while not self._stop.is_set() and (deadline is None or time.monotonic() < deadline):
            producer = Producer(conf)
            try:
                producer.init_transactions(self.OP_TIMEOUT_S)
                return producer
            except KafkaException as e:
                self.history.record("client_error", client=self.name, error=f"init_transactions: {e}",
                                    fatal=False)
                producer.flush(0)
                time.sleep(0.5)
        return None

    def _retrying(self, call) -> None:
        """`call` (commit or abort) retried while its error is retriable, for up to RETRY_FOR_S."""
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + self.RETRY_FOR_S
        while True:
            try:
                call(self.OP_TIMEOUT_S)
                return
            except KafkaException as e:
                if not e.args[0].retriable() or time.monotonic() > deadline:
                    raise

    def _one(self, txn: str) -> tuple[str, str]:
        """Run one transaction: (outcome, error text)."""
        from confluent_kafka import KafkaException

        p = self.producer
        try:
            p.begin_transaction()
            for i in range(self.rng.randint(2, 6)):
                part = self.rng.choice(self.partitions)
                value = f"{txn}-{i}"
                self.history.record("txn_send", txn=txn, partition=part, value=value)
                p.produce(self.topic, value=value.encode(), partition=part)
                p.poll(0)
            if self.rng.random() < self.abort_ratio:
                self._retrying(p.abort_transaction)
                return "aborted", ""
            try:
                self._retrying(p.commit_transaction)
                return "committed", ""
            except KafkaException as e:
                if not e.args[0].txn_requires_abort():
                    raise
                self._retrying(p.abort_transaction)
                return "aborted", str(e)
        except KafkaException as e:
            return "unknown", str(e)

    def _run(self) -> None:
        try:
            self.producer = self._new_producer()
            k = 0
            while self.producer is not None and not self._stop.is_set():
                txn = f"{self.label}-t{k}"
                k += 1
                outcome, error = self._one(txn)
                self.history.record("txn_end", txn=txn, outcome=outcome, error=error)
                if outcome == "committed":
                    self.committed += 1
                    self.last_commit = time.monotonic()
                elif outcome == "unknown":
                    self.producer.flush(0)
                    self.producer = self._new_producer()
                time.sleep(self.rng.uniform(0.05, 0.2))
        except BaseException as e:               # noqa: BLE001 - reported by the runner
            self.error = e

    def abandon(self) -> None:
        """Stop after the transaction under way, settling nothing (a replacement's init_transactions fences
        this one)."""
        self._stop.set()

    def stop(self, timeout: float = 120.0) -> None:
        """Finish the transaction under way and stop; then settle any transaction left open (a new producer's
        init_transactions completes or aborts it), so a read_committed reader sees the final state."""
        self._stop.set()
        self._thread.join(timeout)
        if self.producer is not None:
            self.producer.flush(0)
        self._stop.clear()
        settle = self._new_producer(within=timeout)
        if settle is None:
            raise RuntimeError(f"{self.name}: no producer could settle the last transaction in {timeout} s")
        settle.flush(0)


class TxnReader:
    """A read_committed confluent-kafka consumer of every partition of `topic` from the start (assigned, no
    group), on its own thread; records ``txn_read`` (partition, offset, value)."""

    def __init__(self, history: History, name: str, bootstrap: str, topic: str, partitions, logger=None):
        from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING

        self.history, self.name = history, name
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{name}-unused",
                                  "client.id": name, "enable.auto.commit": False,
                                  "isolation.level": "read_committed", "fetch.wait.max.ms": 200,
                                  "error_cb": lambda err: None, **CLIENT_TIMEOUTS,
                                  **({"logger": logger} if logger is not None else {})})
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        self._thread = threading.Thread(target=self._run, name=f"reader-{name}", daemon=True)

    def start(self) -> "TxnReader":
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                msg = self.consumer.poll(0.2)
                if msg is not None and not msg.error():
                    self.history.record("txn_read", consumer=self.name, partition=msg.partition(),
                                        offset=msg.offset(), value=msg.value().decode())
        except BaseException as e:               # noqa: BLE001 - reported by the runner
            self.error = e
        finally:
            try:
                self.consumer.close()
            except Exception:
                pass

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

"""Transactions against `seglog.serve` with real clients: confluent-kafka (librdkafka), kafka-python 3.x and
aiokafka transactional producers, and seglog's own Producer through both doors.

Each transaction writes a known set of values; read_committed readers must see exactly the committed ones
(never a record of an aborted or fenced transaction, never part of a transaction), read_uncommitted readers
every record. Offsets sent with a transaction must appear only when it commits. A zombie (a producer fenced
by a newer instance of its transactional id) must never commit, and a transaction older than its timeout is
aborted by the coordinator.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

import seglog
from seglog.errors import IllegalStateError, InvalidProducerEpochError, ProducerFencedError

ck = pytest.importorskip("confluent_kafka")

from confluent_kafka import Consumer as CkConsumer, KafkaException, Producer as CkProducer  # noqa: E402
from confluent_kafka import TopicPartition as CkTopicPartition  # noqa: E402

pytestmark = [pytest.mark.broker, pytest.mark.timeout(180)]

# small state log, a quick timeout check: the coordinator's settings a test can wait for
TXN_BROKER = {"transaction_state_log_num_partitions": 5,
              "transaction_abort_timed_out_transaction_cleanup_interval_ms": 200}


@pytest.fixture
def broker(start_broker):
    return start_broker(**TXN_BROKER)


def wait_for(cond, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"{what}: not met in {timeout} s"
        time.sleep(0.05)


def describe(broker, tid):
    [d] = broker.node.txn_coordinator.describe([tid])
    return d


def ck_consume_all(bootstrap, topic, isolation, expected_min=0, idle_s=2.0, timeout=30.0):
    """Every value of `topic` a confluent consumer with `isolation` reads (until `idle_s` pass without one
    after at least `expected_min` arrived)."""
    c = CkConsumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4()}",
                    "auto.offset.reset": "earliest", "enable.auto.commit": False, "isolation.level": isolation})
    try:
        c.subscribe([topic])
        values, last = [], time.monotonic()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                if len(values) >= expected_min and time.monotonic() - last > idle_s:
                    break
                continue
            if m.error():
                continue
            values.append(m.value())
            last = time.monotonic()
        return values
    finally:
        c.close()


# -- confluent-kafka ---------------------------------------------------------------------------------------------

def test_confluent_commits_and_aborts_interleaved_across_partitions(broker, topic_name):
    topic = topic_name()
    broker.node.create_topic(topic, 3)
    p = CkProducer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"tx-{topic}",
                    "linger.ms": 5})
    p.init_transactions(30)
    committed, aborted = [], []
    for t in range(12):
        values = [f"t{t}-r{i}".encode() for i in range(30)]
        p.begin_transaction()
        for i, v in enumerate(values):
            p.produce(topic, v, partition=i % 3)
        if t % 3 == 1:
            p.flush()                                    # the records are in the log before the abort
            p.abort_transaction(30)
            aborted += values
        else:
            p.commit_transaction(30)
            committed += values
    wait_for(lambda: describe(broker, f"tx-{topic}").state == "CompleteCommit", what="last commit completed")
    got = ck_consume_all(broker.bootstrap_servers, topic, "read_committed", len(committed))
    assert sorted(got) == sorted(committed)
    every = ck_consume_all(broker.bootstrap_servers, topic, "read_uncommitted", len(committed) + len(aborted))
    assert sorted(every) == sorted(committed + aborted)


def test_a_zombie_producer_never_commits(broker, topic_name):
    topic = topic_name()
    broker.node.create_topic(topic, 2)
    conf = {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"z-{topic}"}
    zombie = CkProducer(conf)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    for i in range(10):
        zombie.produce(topic, b"zombie %d" % i, partition=i % 2)
    zombie.flush()
    successor = CkProducer(conf)
    successor.init_transactions(30)                   # fences the zombie and aborts its transaction
    with pytest.raises(KafkaException) as e:
        zombie.produce(topic, b"late", partition=0)
        zombie.commit_transaction(30)
    assert e.value.args[0].fatal() or e.value.args[0].txn_requires_abort()
    successor.begin_transaction()
    successor.produce(topic, b"successor", partition=1)
    successor.commit_transaction(30)
    assert ck_consume_all(broker.bootstrap_servers, topic, "read_committed", 1) == [b"successor"]
    assert describe(broker, f"z-{topic}").producer_epoch == 2      # 1 aborted the zombie's transaction


def test_a_transaction_past_its_timeout_is_aborted(broker, topic_name):
    topic = topic_name()
    broker.node.create_topic(topic, 1)
    tid = f"slow-{topic}"
    p = CkProducer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": tid,
                    "transaction.timeout.ms": 1000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"never seen")
    p.flush()
    wait_for(lambda: describe(broker, tid).state == "CompleteAbort", what="the coordinator aborted it")
    assert describe(broker, tid).producer_epoch == 1                  # the producer was fenced
    with pytest.raises(KafkaException):
        p.commit_transaction(10)
    assert ck_consume_all(broker.bootstrap_servers, topic, "read_committed", 0, idle_s=1.0) == []


def test_confluent_offsets_are_committed_with_the_transaction(broker, topic_name):
    src, dst = topic_name(), topic_name()
    broker.node.create_topic(src, 1)
    broker.node.create_topic(dst, 1)
    feed = CkProducer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(6):
        feed.produce(src, b"in %d" % i)
    feed.flush()
    group = f"g-{src}"
    consumer = CkConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                           "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([src])
    p = CkProducer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"ctp-{src}"})
    p.init_transactions(30)
    try:
        msgs = []
        deadline = time.monotonic() + 30
        while len(msgs) < 6 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                msgs.append(m)
        assert len(msgs) == 6
        for attempt, commit in enumerate((False, True)):
            p.begin_transaction()
            for m in msgs:
                p.produce(dst, m.value().upper())
            p.send_offsets_to_transaction([CkTopicPartition(src, 0, 6)], consumer.consumer_group_metadata(), 30)
            if commit:
                p.commit_transaction(30)
            else:
                p.flush()
                p.abort_transaction(30)
                time.sleep(0.3)
                assert consumer.committed([CkTopicPartition(src, 0)], 10)[0].offset < 0   # nothing committed
        wait_for(lambda: consumer.committed([CkTopicPartition(src, 0)], 10)[0].offset == 6,
                 what="the offset committed with the transaction")
        assert sorted(ck_consume_all(broker.bootstrap_servers, dst, "read_committed", 6)) == \
            sorted(b"IN %d" % i for i in range(6))
    finally:
        consumer.close()


# -- kafka-python ----------------------------------------------------------------------------------------------

def test_kafka_python_transactions_and_offsets(broker, topic_name):
    kafka = pytest.importorskip("kafka")
    from kafka.structs import OffsetAndMetadata as KOffset, TopicPartition as KTP
    topic = topic_name()
    broker.node.create_topic(topic, 2)
    p = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=f"kp-{topic}")
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(20):
            p.send(topic, b"kept %d" % i, partition=i % 2)
        p.send_offsets_to_transaction({KTP(topic, 0): KOffset(42, None, -1)}, f"kg-{topic}")
        p.commit_transaction()
        p.begin_transaction()
        for i in range(7):
            p.send(topic, b"dropped %d" % i, partition=i % 2)
        p.send_offsets_to_transaction({KTP(topic, 0): KOffset(99, None, -1)}, f"kg-{topic}")
        p.flush()
        p.abort_transaction()
    finally:
        p.close()
    coord = broker.node.group_coordinator
    wait_for(lambda: describe(broker, f"kp-{topic}").state == "CompleteAbort", what="abort completed")
    assert {tp.partition: om.offset for tp, om in coord.fetch_offsets(f"kg-{topic}").items()} == {0: 42}
    got = {}
    for level in ("read_committed", "read_uncommitted"):
        c = kafka.KafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, isolation_level=level,
                                auto_offset_reset="earliest", consumer_timeout_ms=3000, group_id=None)
        try:
            got[level] = sorted(m.value for m in c)
        finally:
            c.close()
    assert got["read_committed"] == sorted(b"kept %d" % i for i in range(20))
    assert got["read_uncommitted"] == sorted([b"kept %d" % i for i in range(20)] +
                                             [b"dropped %d" % i for i in range(7)])


# -- aiokafka --------------------------------------------------------------------------------------------------

def test_aiokafka_transactions(broker, topic_name):
    aiokafka = pytest.importorskip("aiokafka")
    topic = topic_name()
    broker.node.create_topic(topic, 2)

    async def run():
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, transactional_id=f"aio-{topic}")
        await p.start()
        try:
            async with p.transaction():
                for i in range(10):
                    await p.send(topic, b"a %d" % i, partition=i % 2)
            await p.begin_transaction()
            for i in range(5):
                await p.send(topic, b"b %d" % i, partition=i % 2)
            await p.flush()
            await p.abort_transaction()
        finally:
            await p.stop()
        c = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers,
                                      isolation_level="read_committed", auto_offset_reset="earliest")
        await c.start()
        try:
            got = []
            deadline = time.monotonic() + 20
            while len(got) < 10 and time.monotonic() < deadline:
                for msgs in (await c.getmany(timeout_ms=300)).values():
                    got += [m.value for m in msgs]
            await asyncio.sleep(1.0)
            for msgs in (await c.getmany(timeout_ms=300)).values():
                got += [m.value for m in msgs]
            return got
        finally:
            await c.stop()

    assert sorted(asyncio.run(run())) == sorted(b"a %d" % i for i in range(10))


# -- seglog's own Producer, through both doors -------------------------------------------------------------------

@pytest.fixture(params=["open", "connect"])
def door(request, broker):
    """The node a seglog Producer/Consumer runs over: the broker's own (in process) or seglog.connect."""
    if request.param == "open":
        yield broker.node
        return
    node = seglog.connect(broker.bootstrap_servers)
    yield node
    node.close()


def seglog_read(node, topic, partitions, isolation):
    c = seglog.Consumer(node, auto_offset_reset="earliest", enable_auto_commit=False, isolation_level=isolation)
    try:
        c.assign([(topic, p) for p in range(partitions)])
        got, idle = [], 0
        while idle < 4:
            batch = c.poll(0.3)
            idle = 0 if batch else idle + 1
            got += [r.value for r in batch]
        return got
    finally:
        c.close()


def test_seglog_producer_transactions(door, broker, topic_name):
    topic = topic_name()
    broker.node.create_topic(topic, 3)
    p = seglog.Producer(door, transactional_id=f"sp-{topic}")
    with pytest.raises(IllegalStateError):
        p.send(topic, b"outside")                       # sends only inside a transaction
    p.init_transactions()
    p.begin_transaction()
    for i in range(30):
        p.send(topic, b"c %d" % i)
    p.commit_transaction()
    p.begin_transaction()
    for i in range(9):
        p.send(topic, b"a %d" % i)
    p.flush()
    p.abort_transaction()
    p.begin_transaction()
    p.send(topic, b"last", partition=2)
    p.commit_transaction()
    p.close()
    expected = sorted([b"c %d" % i for i in range(30)] + [b"last"])
    wait_for(lambda: describe(broker, f"sp-{topic}").state == "CompleteCommit", what="last commit completed")
    assert sorted(seglog_read(door, topic, 3, "read_committed")) == expected
    assert len(seglog_read(door, topic, 3, "read_uncommitted")) == 40


def test_seglog_consume_transform_produce_with_offsets(door, broker, topic_name):
    src, dst = topic_name(), topic_name()
    broker.node.create_topic(src, 2)
    broker.node.create_topic(dst, 2)
    with seglog.Producer(broker.node) as feed:
        for i in range(20):
            feed.send(src, b"%d" % i, partition=i % 2)
    group = f"ctp-{src}"
    c = seglog.Consumer(door, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                        isolation_level="read_committed")
    p = seglog.Producer(door, transactional_id=f"ctp-{src}")
    p.init_transactions()
    try:
        c.subscribe([src])
        records = []
        deadline = time.monotonic() + 30
        while len(records) < 20 and time.monotonic() < deadline:
            records += c.poll(0.5)
        assert len(records) == 20
        ends = {(src, r.partition): r.offset + 1 for r in records}
        p.begin_transaction()
        for r in records:
            p.send(dst, r.value * 2, partition=r.partition)
        p.send_offsets_to_transaction(ends, c.group_metadata())
        p.abort_transaction()
        assert broker.node.group_coordinator.fetch_offsets(group) == {}
        p.begin_transaction()
        for r in records:
            p.send(dst, r.value * 2, partition=r.partition)
        p.send_offsets_to_transaction(ends, c.group_metadata())
        p.commit_transaction()
        wait_for(lambda: {tuple(tp): om.offset for tp, om in broker.node.group_coordinator.fetch_offsets(group)
                          .items()} == ends, what="offsets visible after the commit")
        assert sorted(seglog_read(door, dst, 2, "read_committed")) == sorted(b"%d" % i * 2 for i in range(20))
    finally:
        p.close()
        c.close()


def test_seglog_zombie_is_fenced(door, broker, topic_name):
    topic = topic_name()
    broker.node.create_topic(topic, 1)
    zombie = seglog.Producer(door, transactional_id=f"zs-{topic}")
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.send(topic, b"zombie")
    zombie.flush()
    successor = seglog.Producer(door, transactional_id=f"zs-{topic}")
    successor.init_transactions()
    with pytest.raises((ProducerFencedError, InvalidProducerEpochError)):
        zombie.send(topic, b"late")
        zombie.commit_transaction()
    with pytest.raises((ProducerFencedError, InvalidProducerEpochError, IllegalStateError)):
        zombie.commit_transaction()                    # and never later
    successor.begin_transaction()
    successor.send(topic, b"successor")
    successor.commit_transaction()
    successor.close()
    zombie.close()
    wait_for(lambda: describe(broker, f"zs-{topic}").state == "CompleteCommit", what="successor committed")
    assert seglog_read(door, topic, 1, "read_committed") == [b"successor"]


# -- exactly once through kill -9 ----------------------------------------------------------------------------------

KILLS = 5


def test_consume_transform_produce_killed_at_random_points_is_exactly_once(broker, topic_name, tmp_path):
    """The worker (tests/helpers/eos_worker.py) is SIGKILLed KILLS times at random moments (inside a
    transaction, while committing, between transactions) and started again, until the group's committed
    offsets reach the end of the input; then the output, read_committed, holds every input exactly once."""
    import os
    import random
    import signal
    import subprocess
    import sys

    from cluster_harness import seglog_env

    src, dst = topic_name(), topic_name()
    broker.node.create_topic(src, 2)
    broker.node.create_topic(dst, 2)
    values = [b"record-%05d" % i for i in range(3000)]
    with seglog.Producer(broker.node) as feed:
        for i, v in enumerate(values):
            feed.send(src, v, key=v, partition=i % 2)
    ends = {(src, 0): 1500, (src, 1): 1500}
    group, tid = f"eos-{src}", f"eos-{src}"
    worker = os.path.join(os.path.dirname(os.path.dirname(__file__)), "helpers", "eos_worker.py")
    rng = random.Random(14)
    log = open(tmp_path / "worker.log", "w")

    def committed():
        return {tuple(tp): om.offset for tp, om in broker.node.group_coordinator.fetch_offsets(group).items()}

    def start():
        return subprocess.Popen([sys.executable, worker, broker.bootstrap_servers, src, dst, group, tid, "0.15"],
                                stdout=log, stderr=subprocess.STDOUT, env=seglog_env())

    kills = 0
    proc = start()
    try:
        while kills < KILLS and committed() != ends:
            time.sleep(rng.uniform(0.5, 2.5))
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            kills += 1
            proc = start()
        wait_for(lambda: committed() == ends, timeout=120, what="every input processed")
    finally:
        proc.kill()
        proc.wait(10)
        log.close()
    out = seglog_read(broker.node, dst, 2, "read_committed")
    assert len(out) == len(values) and sorted(out) == sorted(v.upper() for v in values), \
        (len(out), len(set(out)), (tmp_path / "worker.log").read_text()[-2000:])
    assert kills == KILLS, f"the input was processed before {KILLS} kills ({kills}): make it longer"


def test_a_faust_exactly_once_app(broker, tmp_path):
    """faust-streaming with processing_guarantee="exactly_once" (its producers are aiokafka's transactional
    ones, one per partition): every word is upper-cased into the output exactly once, read_committed."""
    pytest.importorskip("faust", reason="faust-streaming is not installed")
    import os
    import subprocess
    import sys

    from cluster_harness import seglog_env

    broker.node.create_topic("words", 2)
    broker.node.create_topic("upper", 2)
    words = [b"word-%04d" % i for i in range(400)]
    with seglog.Producer(broker.node) as feed:
        for w in words:
            feed.send("words", w, key=w)
    app = os.path.join(os.path.dirname(os.path.dirname(__file__)), "helpers", "faust_eos.py")
    with open(tmp_path / "faust.log", "w") as log:
        proc = subprocess.Popen([sys.executable, app, broker.bootstrap_servers, str(tmp_path / "faust")],
                                stdout=log, stderr=subprocess.STDOUT, env=seglog_env())
        try:
            def done():
                committed = broker.node.group_coordinator.fetch_offsets("eosupper")
                return sum(om.offset for tp, om in committed.items() if tp.topic == "words") == len(words)
            wait_for(done, timeout=90, what="faust consumed every word")
        finally:
            proc.terminate()
            proc.wait(30)
    listed = broker.node.txn_coordinator.list()[1]
    assert listed and all(t.transactional_id.startswith("eosupper-") for t in listed)
    got = seglog_read(broker.node, "upper", 2, "read_committed")
    assert sorted(got) == sorted(w.upper() for w in words), (len(got), (tmp_path / "faust.log").read_text()[-2000:])


def test_consume_transform_produce_survives_the_broker_killed(broker_process, free_port, topic_name, tmp_path):
    """The `seglog broker` process is SIGKILLed twice in the middle of the worker's loop and restarted on the
    same data dir and port (the worker, if the outage made it fail, is started again): once the group's
    committed offsets reach the end of the input, the output, read_committed, holds every input exactly once."""
    import os
    import random
    import signal
    import subprocess
    import sys

    from cluster_harness import seglog_env

    port = free_port()
    overrides = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "transaction_state_log_num_partitions": 3,
                 "offsets_topic_num_partitions": 3}
    data = tmp_path / "broker-data"
    broker = broker_process(data, **overrides)
    src, dst = topic_name(), topic_name()
    values = [b"record-%05d" % i for i in range(3000)]
    node = seglog.connect(broker.bootstrap_servers)
    try:
        node.create_topic(src, 2)
        node.create_topic(dst, 2)
        with seglog.Producer(node) as feed:
            for i, v in enumerate(values):
                feed.send(src, v, key=v, partition=i % 2)
    finally:
        node.close()
    ends = {(src, 0): 1500, (src, 1): 1500}
    group = tid = f"eos-{src}"
    worker = os.path.join(os.path.dirname(os.path.dirname(__file__)), "helpers", "eos_worker.py")
    rng = random.Random(99)
    log = open(tmp_path / "worker.log", "w")

    def start():
        return subprocess.Popen([sys.executable, worker, broker.bootstrap_servers, src, dst, group, tid, "0.2"],
                                stdout=log, stderr=subprocess.STDOUT, env=seglog_env())

    def committed():
        with seglog.connect(broker.bootstrap_servers) as n:
            return {tuple(tp): om.offset for tp, om in n.group_coordinator.fetch_offsets(group).items()}

    proc = start()
    try:
        for _ in range(2):
            time.sleep(rng.uniform(2.0, 3.5))
            assert committed() != ends, "the input was processed before the broker was killed: make it longer"
            broker.kill()
            broker = broker_process(data, **overrides)
            if proc.poll() is not None:
                proc = start()
        deadline = time.monotonic() + 60
        while committed() != ends:
            assert time.monotonic() < deadline, (committed(), (tmp_path / "worker.log").read_text()[-2000:])
            if proc.poll() is not None:
                proc = start()
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        log.close()
    with seglog.connect(broker.bootstrap_servers) as n:
        out = seglog_read(n, dst, 2, "read_committed")
        every = seglog_read(n, dst, 2, "read_uncommitted")
    assert len(out) == len(values) and sorted(out) == sorted(v.upper() for v in values), \
        (len(out), len(set(out)), (tmp_path / "worker.log").read_text()[-2000:])
    assert len(every) >= len(out)

"""The Spark source's kafka.isolation.level over both of its locations (a data dir, read-only while a broker
serves it, and the broker through Fetch): read_uncommitted (the default, as Spark's Kafka source) returns every
data record, read_committed stops at the last stable offset and skips aborted transactions; markers are never
rows."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import seglog  # noqa: E402
from seglog.spark.errors import SourceOptionError  # noqa: E402
from seglog.spark.options import parse_read_options  # noqa: E402

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory):
    """A broker whose topic `tx` (2 partitions) holds plain records, committed and aborted transactions, and
    one transaction left open in partition 1 after a committed one."""
    with seglog.serve(tmp_path_factory.mktemp("spark-txn") / "data") as broker:
        node = seglog.connect(broker.bootstrap_servers)
        node.create_topic("tx", 2)
        with seglog.Producer(node) as plain:
            for i in range(4):
                plain.send("tx", b"plain-%d" % i, partition=i % 2).get()
        p = seglog.Producer(node, transactional_id="spark-readers")
        p.init_transactions()
        for t in range(6):
            p.begin_transaction()
            for i in range(5):
                p.send("tx", b"%s-%d-%d" % (b"abort" if t % 3 == 1 else b"commit", t, i), partition=i % 2)
            p.flush()
            p.abort_transaction() if t % 3 == 1 else p.commit_transaction()
        p.close()
        left_open = seglog.Producer(node, transactional_id="spark-open")
        left_open.init_transactions()
        left_open.begin_transaction()
        left_open.send("tx", b"open", partition=1)
        left_open.flush()
        yield broker
        node.close()


def _values(spark, location: dict, **options) -> list[bytes]:
    reader = spark.read.format("seglog").option("subscribe", "tx")
    for k, v in {**location, **options}.items():
        reader = reader.option(k, v)
    return sorted(bytes(r.value) for r in reader.load().select("value").collect())


@pytest.mark.parametrize("door", ["data-dir", "broker"])
def test_spark_isolation_levels(spark, txn_broker, door):
    location = {"path": str(txn_broker.node.path)} if door == "data-dir" else \
        {"kafka.bootstrap.servers": txn_broker.bootstrap_servers}
    plain = [b"plain-%d" % i for i in range(4)]
    committed = [b"commit-%d-%d" % (t, i) for t in (0, 2, 3, 5) for i in range(5)]
    aborted = [b"abort-%d-%d" % (t, i) for t in (1, 4) for i in range(5)]
    assert _values(spark, location) == sorted(plain + committed + aborted + [b"open"])
    assert _values(spark, location, **{"kafka.isolation.level": "read_uncommitted"}) == \
        sorted(plain + committed + aborted + [b"open"])
    assert _values(spark, location, **{"kafka.isolation.level": "read_committed"}) == sorted(plain + committed)


def test_isolation_level_option_is_checked():
    with pytest.raises(SourceOptionError, match="kafka.isolation.level"):
        parse_read_options({"path": "/x", "subscribe": "t", "kafka.isolation.level": "committed"}, streaming=False)
    assert parse_read_options({"path": "/x", "subscribe": "t", "KAFKA.ISOLATION.LEVEL": "read_committed"},
                              streaming=False).read_committed

"""seglog as a PySpark data source (pyspark >= 4.2, Python Data Source API).

``import seglog.spark`` registers the source named "seglog" with the active SparkSession, if there is one;
``seglog.spark.register(spark)`` does it explicitly. Batch filter pushdown is opt-in per query
(``option("pushFilters", "true")``, see seglog.spark.filters for why it is off by default)::

    import seglog.spark
    df = (spark.read.format("seglog").option("path", "data").option("subscribe", "pet")
          .option("startingOffsets", "earliest").load())
    # key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
    # timestampType int (+ headers array<struct<key: string, value: binary>> with includeHeaders=true)
    # a user schema is a projection (the Python Data Source API cannot prune columns): only value is read
    values = spark.read.format("seglog").schema("value binary").option("path", "data").option("subscribe", "pet").load()
    q = spark.readStream.format("seglog").option("path", "data").option("subscribe", "pet").load()
    df.select("key", "value").write.format("seglog").option("path", "data").option("topic", "copy").save()
    # broker mode: any Kafka-protocol broker, for executors that cannot see the disks
    df = spark.read.format("seglog").option("kafka.bootstrap.servers", "host:9092").option("subscribe", "pet").load()

Modules: options (every option and its checks), catalog (the Catalog interface and the data dir's partition
metadata), broker (the same interface over Metadata/ListOffsets, and Fetch on executors), planning (offset
ranges and splits), splits, projection (a user schema as the columns to read), arrow_reader (executor-side
decoding into Arrow), filters (pushdown), batch_reader, stream_reader, writer, source (the DataSource), errors.

Workers (executors) must run the same Python (``PYSPARK_PYTHON=sys.executable``) and be able to import
seglog. With ``path`` they must see the data dir at the same path (local mode, or a shared file system);
with ``kafka.bootstrap.servers`` they only need to reach the brokers.

pyspark >= 4.2 is required (read limits and Trigger.AvailableNow for Python streaming sources arrived in
4.2; filter pushdown in 4.1): importing this package with an older pyspark raises ImportError.

pyarrow is imported here (and by nothing under ``import seglog``).
"""

from __future__ import annotations

import re

MIN_PYSPARK = (4, 2)


def check_pyspark_version(version: str) -> None:
    """ImportError unless `version` (pyspark.__version__) is at least MIN_PYSPARK."""
    m = re.match(r"(\d+)\.(\d+)", version)
    if m is None or (int(m.group(1)), int(m.group(2))) < MIN_PYSPARK:
        raise ImportError(f"seglog.spark needs pyspark >= {MIN_PYSPARK[0]}.{MIN_PYSPARK[1]} (read limits and "
                          f"Trigger.AvailableNow for Python streaming sources), this is pyspark {version}; "
                          "upgrade with pip install 'seglog[spark]'")


try:
    import pyarrow  # noqa: F401
    import pyspark
    from pyspark.sql import SparkSession
except ImportError as e:                  # pragma: no cover - depends on the environment
    raise ImportError(f"seglog.spark needs pyspark >= 4.2 and pyarrow ({e}); install them with "
                      "pip install 'seglog[spark]'") from e
check_pyspark_version(pyspark.__version__)

from .errors import (BrokerUnavailableError, DataLossError, NotADataDirError, SourceOptionError,  # noqa: E402
                     TopicNotFoundError, WriteLockTimeoutError)
from .source import SeglogDataSource  # noqa: E402

__all__ = ["register", "SeglogDataSource", "SourceOptionError", "NotADataDirError",
           "TopicNotFoundError", "DataLossError", "WriteLockTimeoutError", "BrokerUnavailableError",
           "check_pyspark_version"]

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"      # needed by option("pushFilters", "true")


def register(spark: "SparkSession | None" = None) -> str:
    """Register the "seglog" data source with `spark` (default: the active session); returns the name.
    Raises RuntimeError without a session."""
    if spark is None:
        spark = SparkSession.getActiveSession()
        if spark is None:
            raise RuntimeError("no active SparkSession: create one, then call seglog.spark.register(spark)")
    spark.dataSource.register(SeglogDataSource)
    return SeglogDataSource.name()


def _register_with_active_session() -> None:
    spark = SparkSession.getActiveSession()
    if spark is not None:
        register(spark)


_register_with_active_session()

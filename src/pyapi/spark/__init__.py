"""seglog as a PySpark data source (pyspark >= 4.0, Python Data Source API).

``import seglog.spark`` registers the source named "seglog" with the active SparkSession, if there is one;
``seglog.spark.register(spark)`` does it explicitly (again after changing
``spark.sql.python.filterPushdown.enabled``, which decides whether the reader offers filter pushdown)::

    import seglog.spark
    df = (spark.read.format("seglog").option("path", "data").option("subscribe", "pet")
          .option("startingOffsets", "earliest").load())
    # key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
    # timestampType int (+ headers array<struct<key: string, value: binary>> with includeHeaders=true)
    q = spark.readStream.format("seglog").option("path", "data").option("subscribe", "pet").load()
    df.select("key", "value").write.format("seglog").option("path", "data").option("topic", "copy").save()

Modules: options (every option and its checks), catalog (the data dir and partition metadata), planning
(offset ranges and splits), splits, arrow_reader (executor-side decoding into Arrow), filters (pushdown),
batch_reader, stream_reader, writer, source (the DataSource), errors.

Workers (executors) must run the same Python (``PYSPARK_PYTHON=sys.executable``) and be able to import
seglog, and must see the data dir at the same path (local mode, or a shared file system). Reading through
a broker's Kafka protocol for clusters whose executors cannot see the disks is not implemented yet: splits
are (topic, partition, offset range) and the decoder takes the v2 batches a Fetch response carries, so a
broker catalog and fetcher can be added behind the same planning and decoding.

pyarrow is imported here (and by nothing under ``import seglog``).
"""

from __future__ import annotations

try:
    import pyarrow  # noqa: F401
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource  # noqa: F401  (pyspark >= 4.0)
except ImportError as e:                  # pragma: no cover - depends on the environment
    raise ImportError(f"seglog.spark needs pyspark >= 4.0 and pyarrow ({e}); install them with "
                      "pip install 'seglog[spark]'") from e

from .errors import DataLossError, NotADataDirError, SourceOptionError, TopicNotFoundError, WriteLockTimeoutError
from .source import SeglogDataSource, SeglogPushdownDataSource

__all__ = ["register", "SeglogDataSource", "SeglogPushdownDataSource", "SourceOptionError", "NotADataDirError",
           "TopicNotFoundError", "DataLossError", "WriteLockTimeoutError", "pushdown_available"]

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def pushdown_available() -> bool:
    """Whether the installed pyspark can push filters into Python data sources (4.1+)."""
    try:
        from pyspark.sql.datasource import Filter  # noqa: F401
    except ImportError:
        return False
    return True


def register(spark: "SparkSession | None" = None) -> str:
    """Register the "seglog" data source with `spark` (default: the active session); returns the name.

    The reader offers filter pushdown when pyspark supports it and the session has
    spark.sql.python.filterPushdown.enabled=true at this moment. Raises RuntimeError without a session.
    """
    if spark is None:
        spark = SparkSession.getActiveSession()
        if spark is None:
            raise RuntimeError("no active SparkSession: create one, then call seglog.spark.register(spark)")
    enabled = pushdown_available() and str(spark.conf.get(PUSHDOWN_CONF, "false")).lower() == "true"
    spark.dataSource.register(SeglogPushdownDataSource if enabled else SeglogDataSource)
    return SeglogDataSource.name()


def _register_with_active_session() -> None:
    spark = SparkSession.getActiveSession()
    if spark is not None:
        register(spark)


_register_with_active_session()

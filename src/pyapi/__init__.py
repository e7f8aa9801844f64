"""seglog: a Kafka-compatible segmented-log storage engine (Cython core, Kafka wire protocol broker, Spark source)."""

from . import errors
from .config import LogConfig
from .errors import SeglogError
from .log import Log, Record, RecoveryReport, TimestampOffset

__all__ = ["errors", "Log", "LogConfig", "Record", "RecoveryReport", "SeglogError", "TimestampOffset"]
__version__ = "0.1.0"

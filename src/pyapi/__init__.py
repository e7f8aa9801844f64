"""seglog: a Kafka-compatible segmented-log storage engine (Cython core, Kafka wire protocol broker, Spark source)."""

from . import errors
from .config import LogConfig
from .errors import SeglogError

__all__ = ["errors", "LogConfig", "SeglogError"]
__version__ = "0.1.0"

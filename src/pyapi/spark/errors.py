"""Errors of the Spark data source, raised at planning time on the driver (or by a task for data lost later).

Each derives from the seglog error that fits, so ``except seglog.errors.SeglogError`` catches them too.
Spark wraps an exception raised in a Python data source worker in its own (AnalysisException,
PythonException, StreamingQueryException...), keeping the class name and message in the text: messages here
therefore name the option, topic or partition concerned and say what to change.
"""

from __future__ import annotations

from ..errors import (InvalidConfigError, NetworkError, OffsetOutOfRangeError, SeglogError, StorageError,
                      UnknownTopicOrPartitionError)

__all__ = ["SourceOptionError", "NotADataDirError", "TopicNotFoundError", "DataLossError", "WriteLockTimeoutError",
           "BrokerUnavailableError"]


class SourceOptionError(InvalidConfigError):
    """An option is missing, unknown in its context, conflicting with another, or has a malformed value."""


class NotADataDirError(StorageError):
    """``path`` is not a seglog data directory (a directory of ``<topic>-<partition>`` log directories)."""


class TopicNotFoundError(UnknownTopicOrPartitionError):
    """A subscribed or assigned topic (or partition) has no partition directory in the data dir, or the
    brokers do not know it (broker mode)."""


class BrokerUnavailableError(NetworkError):  # noqa: F821 - defined by seglog.errors' table
    """Broker mode: no broker of ``kafka.bootstrap.servers`` answered (wrong address, nothing listening, or
    every broker down for longer than ``kafka.request.timeout.ms``)."""


class DataLossError(OffsetOutOfRangeError):
    """Offsets asked for are no longer (or not yet) in the log: retention or truncation removed them, or they
    were never written. Raised only with ``failOnDataLoss=true`` (the default), as Spark's Kafka source does."""

    def __init__(self, message: str, offset: int = -1, start: int = -1, end: int = -1):
        SeglogError.__init__(self, message + " (set failOnDataLoss=false to skip the missing offsets instead)")
        self.offset = offset
        self.start = start
        self.end = end


class WriteLockTimeoutError(StorageError):
    """The writer could not take a partition's directory lock in time: another process (a seglog node or
    broker, or a stuck task) is writing that partition."""

"""The seglog exception hierarchy.

Every error seglog raises derives from :class:`SeglogError`. Each class carries the Kafka protocol error
``code`` it maps to on the wire and whether it is ``retriable`` (a client may retry the same request and
expect it to succeed later). The broker turns an exception into its code with :func:`code_of`; clients
turn a code back into an exception with :func:`for_code`. One class per Kafka code; a few seglog-only
conditions (log closed, bad argument) map to the nearest Kafka code.
"""

from __future__ import annotations

__all__ = ["SeglogError", "for_code", "code_of"]

_BY_CODE: dict[int, type["SeglogError"]] = {}


class SeglogError(Exception):
    """Base of every seglog error. ``code`` is the Kafka error code, ``retriable`` whether retrying may succeed."""

    code: int = -1
    kafka_name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.code != -1:                      # the first class defined for a code is the one for_code gives
            _BY_CODE.setdefault(cls.code, cls)


def _define(name: str, code: int, kafka_name: str, retriable: bool = False, base=SeglogError, doc: str = ""):
    cls = type(name, base if isinstance(base, tuple) else (base,), {"code": code, "kafka_name": kafka_name, "retriable": retriable,
                                "__doc__": doc or kafka_name, "__module__": __name__})
    globals()[name] = cls
    __all__.append(name)
    return cls


# --- storage ---------------------------------------------------------------------------------------------

class CorruptRecordError(SeglogError):
    """A batch failed validation (CRC, length, magic, offsets). ``reason`` says what is wrong; ``path`` and
    ``offset``/``position`` locate it."""

    code = 2
    kafka_name = "CORRUPT_MESSAGE"
    retriable = True

    def __init__(self, message: str, path: str | None = None, offset: int | None = None,
                 position: int | None = None):
        where = []
        if path is not None:
            where.append(f"file {path}")
        if offset is not None:
            where.append(f"offset {offset}")
        if position is not None:
            where.append(f"position {position}")
        super().__init__(message + (f" ({', '.join(where)})" if where else ""))
        self.reason = message
        self.path = path
        self.offset = offset
        self.position = position


class OffsetOutOfRangeError(SeglogError):
    """The offset is outside ``[start, end]`` of the log (``end`` itself is valid: it reads nothing)."""

    code = 1
    kafka_name = "OFFSET_OUT_OF_RANGE"

    def __init__(self, offset: int, start: int, end: int, what: str = "log"):
        super().__init__(f"offset {offset} is out of range for {what}: valid offsets are {start}..{end} "
                         f"(start offset {start}, end offset {end})")
        self.offset = offset
        self.start = start
        self.end = end


class RecordTooLargeError(SeglogError):
    """A record or batch is larger than ``max.message.bytes`` (or a segment could ever hold)."""

    code = 10
    kafka_name = "MESSAGE_TOO_LARGE"

    def __init__(self, size: int, limit: int, what: str = "batch", setting: str = "max.message.bytes"):
        super().__init__(f"{what} of {size} bytes is larger than the limit of {limit} bytes ({setting})")
        self.size = size
        self.limit = limit


class LogClosedError(SeglogError):
    """The log (or node, producer, consumer) was closed; nothing more can be read or written through it."""

    code = -1
    kafka_name = "UNKNOWN_SERVER_ERROR"


class StorageError(SeglogError):
    """An I/O error from the file system (disk full, permission, missing directory). Nothing was acknowledged."""

    code = 56
    kafka_name = "KAFKA_STORAGE_ERROR"
    retriable = True

    def __init__(self, message: str, path: str | None = None, errno: int | None = None):
        super().__init__(message + (f" ({path})" if path else ""))
        self.path = path
        self.errno = errno


class NoOffsetForPartitionError(SeglogError):
    """A consumer has no committed offset for a partition and its auto_offset_reset is "none"."""

    code = -1
    kafka_name = "UNKNOWN_SERVER_ERROR"


class IllegalStateError(SeglogError):
    """A consumer call that its current state does not allow (Java's IllegalStateException), e.g. assign()
    while subscribed to topics: subscriptions to topics, to a pattern, and hand-assigned partitions exclude
    each other until unsubscribe()."""

    code = -1
    kafka_name = "UNKNOWN_SERVER_ERROR"


class ReadOnlyLogError(SeglogError):
    """A write was attempted on a log opened with ``readonly=True``."""

    code = -1
    kafka_name = "UNKNOWN_SERVER_ERROR"


_define("InvalidRecordError", 87, "INVALID_RECORD",
        doc="A batch is well-formed but breaks a rule (control batch from a client, bad offset deltas ...).")
_define("InvalidTimestampError", 32, "INVALID_TIMESTAMP",
        doc="A timestamp is outside message.timestamp.difference.max.ms or otherwise invalid.")
_define("UnsupportedCompressionTypeError", 76, "UNSUPPORTED_COMPRESSION_TYPE",
        doc="A batch uses a codec this build cannot decode, or an unknown codec id.")
_define("UnsupportedForMessageFormatError", 43, "UNSUPPORTED_FOR_MESSAGE_FORMAT",
        doc="A batch is not record batch v2 (magic 2).")

# --- topics and partitions ---------------------------------------------------------------------------------
_define("UnknownTopicOrPartitionError", 3, "UNKNOWN_TOPIC_OR_PARTITION", True,
        doc="The topic or partition does not exist.")
_define("InvalidTopicError", 17, "INVALID_TOPIC_EXCEPTION", doc="The topic name is not valid.")
_define("TopicAlreadyExistsError", 36, "TOPIC_ALREADY_EXISTS", doc="A topic with this name exists.")
_define("InvalidPartitionsError", 37, "INVALID_PARTITIONS", doc="The partition count is not valid.")
_define("InvalidReplicationFactorError", 38, "INVALID_REPLICATION_FACTOR",
        doc="The replication factor is not valid (e.g. larger than the live brokers).")
_define("InvalidReplicaAssignmentError", 39, "INVALID_REPLICA_ASSIGNMENT", doc="The replica assignment is not valid.")
_define("InvalidConfigError", 40, "INVALID_CONFIG", doc="A configuration name or value is not valid.")


class UnknownConfigError(InvalidConfigError, TypeError):  # noqa: F821
    """A configuration name that does not exist (a typo). An InvalidConfigError like every bad setting, and a
    TypeError as Python raises for an unexpected keyword argument, so either ``except`` catches it."""


__all__.append("UnknownConfigError")
_define("PolicyViolationError", 44, "POLICY_VIOLATION", doc="The request breaks a configured policy.")
_define("TopicDeletionDisabledError", 73, "TOPIC_DELETION_DISABLED", doc="delete.topic.enable is false.")
_define("UnknownTopicIdError", 100, "UNKNOWN_TOPIC_ID", True, doc="The topic id is not known.")

# --- produce and replication ---------------------------------------------------------------------------------
_define("LeaderNotAvailableError", 5, "LEADER_NOT_AVAILABLE", True, doc="No leader for the partition right now.")
_define("NotLeaderOrFollowerError", 6, "NOT_LEADER_OR_FOLLOWER", True,
        doc="This broker is not the leader (or a follower, for a replica fetch) of the partition.")
_define("RequestTimedOutError", 7, "REQUEST_TIMED_OUT", True, doc="The request timed out.")
_define("BrokerNotAvailableError", 8, "BROKER_NOT_AVAILABLE", doc="The broker is not available.")
_define("ReplicaNotAvailableError", 9, "REPLICA_NOT_AVAILABLE", True, doc="The replica is not available.")
_define("StaleControllerEpochError", 11, "STALE_CONTROLLER_EPOCH", doc="The controller epoch is older than the known one.")
_define("NetworkError", 13, "NETWORK_EXCEPTION", True, doc="The connection was lost.")
_define("RecordListTooLargeError", 18, "RECORD_LIST_TOO_LARGE", doc="The request's records exceed the segment size.")
_define("NotEnoughReplicasError", 19, "NOT_ENOUGH_REPLICAS", True,
        doc="Fewer in-sync replicas than min.insync.replicas: the acks=all write was not appended.")
_define("NotEnoughReplicasAfterAppendError", 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True,
        doc="The write was appended, but the ISR shrank below min.insync.replicas before it was replicated.")
_define("InvalidRequiredAcksError", 21, "INVALID_REQUIRED_ACKS", doc="acks must be -1 (all), 0 or 1.")
_define("NotControllerError", 41, "NOT_CONTROLLER", True, doc="This broker is not the controller.")
_define("InconsistentClusterIdError", 104, "INCONSISTENT_CLUSTER_ID",
        doc="The data directory belongs to another cluster (its meta.properties holds another cluster.id).")
_define("InvalidRequestError", 42, "INVALID_REQUEST", doc="The request is malformed or not valid.")
_define("InvalidArgumentError", 42, "INVALID_REQUEST", base=(InvalidRequestError, ValueError),  # noqa: F821
        doc="A call was given an argument of the wrong type or value.")
_define("OutOfOrderSequenceError", 45, "OUT_OF_ORDER_SEQUENCE_NUMBER",
        doc="An idempotent producer's batch skips sequence numbers (a gap): it was not appended.")
_define("DuplicateSequenceError", 46, "DUPLICATE_SEQUENCE_NUMBER", doc="The batch is a duplicate of one already written.")
_define("InvalidProducerEpochError", 47, "INVALID_PRODUCER_EPOCH", doc="The producer epoch is older than the current one.")
_define("UnknownProducerIdError", 59, "UNKNOWN_PRODUCER_ID", doc="The producer id is not known to the partition.")
_define("ProducerFencedError", 90, "PRODUCER_FENCED", doc="A newer instance with the same producer id fenced this one.")
_define("FencedLeaderEpochError", 74, "FENCED_LEADER_EPOCH", True, doc="The request's leader epoch is older than the broker's.")
_define("UnknownLeaderEpochError", 75, "UNKNOWN_LEADER_EPOCH", True, doc="The request's leader epoch is newer than the broker's.")
_define("OffsetNotAvailableError", 78, "OFFSET_NOT_AVAILABLE", True, doc="The offset is not available yet (leader election).")
_define("EligibleLeadersNotAvailableError", 83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True,
        doc="No replica in the ISR is alive to become leader.")
_define("PreferredLeaderNotAvailableError", 80, "PREFERRED_LEADER_NOT_AVAILABLE", True,
        doc="The preferred leader is not available.")
_define("ElectionNotNeededError", 84, "ELECTION_NOT_NEEDED", doc="The leader is already the preferred one.")

# --- groups and offsets --------------------------------------------------------------------------------------
_define("OffsetMetadataTooLargeError", 12, "OFFSET_METADATA_TOO_LARGE", doc="The commit's metadata string is too large.")
_define("CoordinatorLoadInProgressError", 14, "COORDINATOR_LOAD_IN_PROGRESS", True, doc="The coordinator is loading offsets.")
_define("CoordinatorNotAvailableError", 15, "COORDINATOR_NOT_AVAILABLE", True, doc="The group coordinator is not available.")
_define("NotCoordinatorError", 16, "NOT_COORDINATOR", True, doc="This broker is not the coordinator of the group.")
_define("IllegalGenerationError", 22, "ILLEGAL_GENERATION",
        doc="The generation id is not the group's current one (a rebalance happened).")
_define("InconsistentGroupProtocolError", 23, "INCONSISTENT_GROUP_PROTOCOL",
        doc="The member's protocols do not match the group's.")
_define("InvalidGroupIdError", 24, "INVALID_GROUP_ID", doc="The group id is empty or not valid.")
_define("UnknownMemberIdError", 25, "UNKNOWN_MEMBER_ID", doc="The member id is not in the group.")
_define("InvalidSessionTimeoutError", 26, "INVALID_SESSION_TIMEOUT",
        doc="The session timeout is outside group.min/max.session.timeout.ms.")
_define("RebalanceInProgressError", 27, "REBALANCE_IN_PROGRESS", doc="The group is rebalancing; rejoin.")
_define("InvalidCommitOffsetSizeError", 28, "INVALID_COMMIT_OFFSET_SIZE", doc="The committed offset is not valid.")
_define("NonEmptyGroupError", 68, "NON_EMPTY_GROUP", doc="The group has active members.")
_define("GroupIdNotFoundError", 69, "GROUP_ID_NOT_FOUND", doc="The group does not exist.")
_define("MemberIdRequiredError", 79, "MEMBER_ID_REQUIRED", doc="Rejoin with the member id given in this response.")
_define("GroupMaxSizeReachedError", 81, "GROUP_MAX_SIZE_REACHED", doc="The group is full (group.max.size).")
_define("FencedInstanceIdError", 82, "FENCED_INSTANCE_ID", doc="A newer member with the same group.instance.id exists.")
_define("UnstableOffsetCommitError", 88, "UNSTABLE_OFFSET_COMMIT", True, doc="There are pending offset commits.")

# --- protocol ------------------------------------------------------------------------------------------------
_define("UnsupportedVersionError", 35, "UNSUPPORTED_VERSION", doc="The API version is not supported.")
_define("InvalidFetchSizeError", 4, "INVALID_FETCH_SIZE", doc="The fetch size is not valid.")
_define("FetchSessionIdNotFoundError", 70, "FETCH_SESSION_ID_NOT_FOUND", True, doc="The fetch session is not known.")
_define("InvalidFetchSessionEpochError", 71, "INVALID_FETCH_SESSION_EPOCH", True, doc="The fetch session epoch is wrong.")
_define("ClusterAuthorizationFailedError", 31, "CLUSTER_AUTHORIZATION_FAILED", doc="Not authorized for the cluster operation.")

__all__ += ["CorruptRecordError", "OffsetOutOfRangeError", "RecordTooLargeError", "LogClosedError",
            "StorageError", "ReadOnlyLogError", "NoOffsetForPartitionError", "IllegalStateError"]


class UnknownServerError(SeglogError):
    """An unexpected server-side error (Kafka code -1) or a code this module does not know."""


__all__.append("UnknownServerError")
_BY_CODE[-1] = UnknownServerError


def for_code(code: int) -> type[SeglogError]:
    """The exception class for a Kafka error code (``UnknownServerError`` for codes not known here)."""
    return _BY_CODE.get(code, UnknownServerError)


def code_of(exc: BaseException) -> int:
    """The Kafka error code a broker answers for ``exc`` (-1 for anything that is not a SeglogError)."""
    return exc.code if isinstance(exc, SeglogError) else -1

"""The seglog exception hierarchy.

Every error seglog raises derives from :class:`SeglogError`. Each class carries the Kafka protocol error
``code`` it maps to on the wire and whether it is ``retriable`` (a client may retry the same request and
expect it to succeed later). The broker turns an exception into its code with :func:`code_of`; clients
turn a code back into an exception with :func:`for_code`. One class per Kafka code; a few seglog-only
conditions (log closed, bad argument) map to the nearest Kafka code. Every class can be built from a message
alone (as a client does from a wire error); classes with data fields take them as keyword arguments, which are
``None`` when unknown.
"""

from __future__ import annotations

import errno as _errno

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

    def __init__(self, message: str | None = None, *, offset: int | None = None, start: int | None = None,
                 end: int | None = None, what: str = "log"):
        if message is None:
            message = (f"offset {offset} is out of range for {what}: valid offsets are {start}..{end} "
                       f"(start offset {start}, end offset {end})")
        super().__init__(message)
        self.offset = offset
        self.start = start
        self.end = end


class RecordTooLargeError(SeglogError):
    """A record or batch is larger than ``max.message.bytes`` (or a segment could ever hold)."""

    code = 10
    kafka_name = "MESSAGE_TOO_LARGE"

    def __init__(self, message: str | None = None, *, size: int | None = None, limit: int | None = None,
                 what: str = "batch", setting: str = "max.message.bytes"):
        if message is None:
            message = f"{what} of {size} bytes is larger than the limit of {limit} bytes ({setting})"
        super().__init__(message)
        self.size = size
        self.limit = limit


class LogClosedError(SeglogError):
    """The log (or node, producer, consumer) was closed; nothing more can be read or written through it."""

    code = -1
    kafka_name = "UNKNOWN_SERVER_ERROR"


_DISK_FAILURES = frozenset({_errno.ENOSPC, _errno.EDQUOT, _errno.EROFS, _errno.EIO})


class StorageError(SeglogError):
    """An I/O error from the file system (disk full, permission, missing directory). Nothing was acknowledged."""

    code = 56
    kafka_name = "KAFKA_STORAGE_ERROR"
    retriable = True

    def __init__(self, message: str, path: str | None = None, errno: int | None = None):
        super().__init__(message + (f" ({path})" if path else ""))
        self.path = path
        self.errno = errno

    @property
    def disk_failure(self) -> bool:
        """The file system failed the write itself (full, over quota, read-only, I/O error), not a missing or
        locked directory: Kafka takes the log directory offline for such an error."""
        return self.errno in _DISK_FAILURES


class LogDirNotFoundError(SeglogError):
    """The log directory named is not one of the broker's (log.dirs)."""

    code = 57
    kafka_name = "LOG_DIR_NOT_FOUND"


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


class InvalidRecordError(SeglogError):
    """A batch is well-formed but breaks a rule (control batch from a client, bad offset deltas ...)."""

    code = 87
    kafka_name = "INVALID_RECORD"


class InvalidTimestampError(SeglogError):
    """A timestamp is outside message.timestamp.difference.max.ms or otherwise invalid."""

    code = 32
    kafka_name = "INVALID_TIMESTAMP"


class UnsupportedCompressionTypeError(SeglogError):
    """A batch uses a codec this build cannot decode, or an unknown codec id."""

    code = 76
    kafka_name = "UNSUPPORTED_COMPRESSION_TYPE"


class UnsupportedForMessageFormatError(SeglogError):
    """A batch is not record batch v2 (magic 2)."""

    code = 43
    kafka_name = "UNSUPPORTED_FOR_MESSAGE_FORMAT"



# --- topics and partitions ---------------------------------------------------------------------------------
class UnknownTopicOrPartitionError(SeglogError):
    """The topic or partition does not exist."""

    code = 3
    kafka_name = "UNKNOWN_TOPIC_OR_PARTITION"
    retriable = True


class InvalidTopicError(SeglogError):
    """The topic name is not valid."""

    code = 17
    kafka_name = "INVALID_TOPIC_EXCEPTION"


class TopicAlreadyExistsError(SeglogError):
    """A topic with this name exists."""

    code = 36
    kafka_name = "TOPIC_ALREADY_EXISTS"


class InvalidPartitionsError(SeglogError):
    """The partition count is not valid."""

    code = 37
    kafka_name = "INVALID_PARTITIONS"


class InvalidReplicationFactorError(SeglogError):
    """The replication factor is not valid (e.g. larger than the live brokers)."""

    code = 38
    kafka_name = "INVALID_REPLICATION_FACTOR"


class InvalidReplicaAssignmentError(SeglogError):
    """The replica assignment is not valid."""

    code = 39
    kafka_name = "INVALID_REPLICA_ASSIGNMENT"


class InvalidConfigError(SeglogError):
    """A configuration name or value is not valid."""

    code = 40
    kafka_name = "INVALID_CONFIG"




class UnknownConfigError(InvalidConfigError, TypeError):
    """A configuration name that does not exist (a typo). An InvalidConfigError like every bad setting, and a
    TypeError as Python raises for an unexpected keyword argument, so either ``except`` catches it."""


class ThrottlingQuotaExceededError(SeglogError):
    """A topic creation or deletion refused: its client's controller_mutation_rate quota is used up (KIP-599)."""

    code = 89
    kafka_name = "THROTTLING_QUOTA_EXCEEDED"
    retriable = True


class PolicyViolationError(SeglogError):
    """The request breaks a configured policy."""

    code = 44
    kafka_name = "POLICY_VIOLATION"


class TopicDeletionDisabledError(SeglogError):
    """delete.topic.enable is false."""

    code = 73
    kafka_name = "TOPIC_DELETION_DISABLED"


class UnknownTopicIdError(SeglogError):
    """The topic id is not known."""

    code = 100
    kafka_name = "UNKNOWN_TOPIC_ID"
    retriable = True



# --- produce and replication ---------------------------------------------------------------------------------
class LeaderNotAvailableError(SeglogError):
    """No leader for the partition right now."""

    code = 5
    kafka_name = "LEADER_NOT_AVAILABLE"
    retriable = True


class ListenerNotFoundError(SeglogError):
    """The partition's leader is alive but has no endpoint on the listener the client connected to (a
    listener configured on some brokers only)."""

    code = 72
    kafka_name = "LISTENER_NOT_FOUND"
    retriable = True


class NotLeaderOrFollowerError(SeglogError):
    """This broker is not the leader (or a follower, for a replica fetch) of the partition."""

    code = 6
    kafka_name = "NOT_LEADER_OR_FOLLOWER"
    retriable = True


class RequestTimedOutError(SeglogError):
    """The request timed out."""

    code = 7
    kafka_name = "REQUEST_TIMED_OUT"
    retriable = True


class BrokerNotAvailableError(SeglogError):
    """The broker is not available."""

    code = 8
    kafka_name = "BROKER_NOT_AVAILABLE"


class ReplicaNotAvailableError(SeglogError):
    """The replica is not available."""

    code = 9
    kafka_name = "REPLICA_NOT_AVAILABLE"
    retriable = True


class StaleControllerEpochError(SeglogError):
    """The controller epoch is older than the known one."""

    code = 11
    kafka_name = "STALE_CONTROLLER_EPOCH"


class NetworkError(SeglogError):
    """The connection was lost."""

    code = 13
    kafka_name = "NETWORK_EXCEPTION"
    retriable = True


class RecordListTooLargeError(SeglogError):
    """The request's records exceed the segment size."""

    code = 18
    kafka_name = "RECORD_LIST_TOO_LARGE"


class NotEnoughReplicasError(SeglogError):
    """Fewer in-sync replicas than min.insync.replicas: the acks=all write was not appended."""

    code = 19
    kafka_name = "NOT_ENOUGH_REPLICAS"
    retriable = True


class NotEnoughReplicasAfterAppendError(SeglogError):
    """The write was appended, but the ISR shrank below min.insync.replicas before it was replicated."""

    code = 20
    kafka_name = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    retriable = True


class InvalidRequiredAcksError(SeglogError):
    """acks must be -1 (all), 0 or 1."""

    code = 21
    kafka_name = "INVALID_REQUIRED_ACKS"


class NotControllerError(SeglogError):
    """This broker is not the controller."""

    code = 41
    kafka_name = "NOT_CONTROLLER"
    retriable = True


class InconsistentClusterIdError(SeglogError):
    """The data directory belongs to another cluster (its meta.properties holds another cluster.id)."""

    code = 104
    kafka_name = "INCONSISTENT_CLUSTER_ID"


class MismatchedEndpointTypeError(SeglogError):
    """The request was sent to an endpoint of the wrong type (DescribeCluster for controllers, to a broker)."""

    code = 114
    kafka_name = "MISMATCHED_ENDPOINT_TYPE"


class InvalidRequestError(SeglogError):
    """The request is malformed or not valid."""

    code = 42
    kafka_name = "INVALID_REQUEST"


class InvalidArgumentError(InvalidRequestError, ValueError):
    """A call was given an argument of the wrong type or value."""

    code = 42
    kafka_name = "INVALID_REQUEST"


class OutOfOrderSequenceError(SeglogError):
    """An idempotent producer's batch skips sequence numbers (a gap): it was not appended."""

    code = 45
    kafka_name = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class DuplicateSequenceError(SeglogError):
    """The batch is a duplicate of one already written."""

    code = 46
    kafka_name = "DUPLICATE_SEQUENCE_NUMBER"


class InvalidProducerEpochError(SeglogError):
    """The producer epoch is older than the current one."""

    code = 47
    kafka_name = "INVALID_PRODUCER_EPOCH"


class UnknownProducerIdError(SeglogError):
    """The producer id is not known to the partition."""

    code = 59
    kafka_name = "UNKNOWN_PRODUCER_ID"


class ProducerFencedError(SeglogError):
    """A newer instance with the same producer id fenced this one."""

    code = 90
    kafka_name = "PRODUCER_FENCED"


# --- transactions (KIP-98) -------------------------------------------------------------------------------------
class InvalidTxnStateError(SeglogError):
    """The request does not fit the transaction's state: committing an aborted transaction, ending one that
    never began, or (KIP-890) producing transactionally to a partition not added to the transaction."""

    code = 48
    kafka_name = "INVALID_TXN_STATE"


class InvalidProducerIdMappingError(SeglogError):
    """The producer id is not the one the transaction coordinator holds for the transactional id."""

    code = 49
    kafka_name = "INVALID_PRODUCER_ID_MAPPING"


class InvalidTransactionTimeoutError(SeglogError):
    """transaction.timeout.ms is not positive or above the broker's transaction.max.timeout.ms."""

    code = 50
    kafka_name = "INVALID_TRANSACTION_TIMEOUT"


class ConcurrentTransactionsError(SeglogError):
    """The previous transaction of the transactional id is still completing (markers being written): retry."""

    code = 51
    kafka_name = "CONCURRENT_TRANSACTIONS"
    retriable = True


class TransactionCoordinatorFencedError(SeglogError):
    """A transaction marker came from a coordinator older than the one the partition already heard from."""

    code = 52
    kafka_name = "TRANSACTION_COORDINATOR_FENCED"


class TransactionalIdAuthorizationFailedError(SeglogError):
    """Not authorized to use the transactional id (Write on the TransactionalId resource), or a produce
    request carries transactional record batches without a transactional id (Kafka answers this code for both)."""

    code = 53
    kafka_name = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"


class TransactionalIdNotFoundError(SeglogError):
    """The transaction coordinator has no state for the transactional id."""

    code = 105
    kafka_name = "TRANSACTIONAL_ID_NOT_FOUND"


class FencedLeaderEpochError(SeglogError):
    """The request's leader epoch is older than the broker's."""

    code = 74
    kafka_name = "FENCED_LEADER_EPOCH"
    retriable = True


class UnknownLeaderEpochError(SeglogError):
    """The request's leader epoch is newer than the broker's."""

    code = 75
    kafka_name = "UNKNOWN_LEADER_EPOCH"
    retriable = True


class OffsetNotAvailableError(SeglogError):
    """The offset is not available yet (leader election)."""

    code = 78
    kafka_name = "OFFSET_NOT_AVAILABLE"
    retriable = True


class EligibleLeadersNotAvailableError(SeglogError):
    """No replica in the ISR is alive to become leader."""

    code = 83
    kafka_name = "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    retriable = True


class PreferredLeaderNotAvailableError(SeglogError):
    """The preferred leader is not available."""

    code = 80
    kafka_name = "PREFERRED_LEADER_NOT_AVAILABLE"
    retriable = True


class ElectionNotNeededError(SeglogError):
    """The leader is already the preferred one."""

    code = 84
    kafka_name = "ELECTION_NOT_NEEDED"


class NoReassignmentInProgressError(SeglogError):
    """A reassignment was cancelled for a partition that has none under way."""

    code = 85
    kafka_name = "NO_REASSIGNMENT_IN_PROGRESS"



# --- groups and offsets --------------------------------------------------------------------------------------
class OffsetMetadataTooLargeError(SeglogError):
    """The commit's metadata string is too large."""

    code = 12
    kafka_name = "OFFSET_METADATA_TOO_LARGE"


class CoordinatorLoadInProgressError(SeglogError):
    """The coordinator is loading offsets."""

    code = 14
    kafka_name = "COORDINATOR_LOAD_IN_PROGRESS"
    retriable = True


class CoordinatorNotAvailableError(SeglogError):
    """The group coordinator is not available."""

    code = 15
    kafka_name = "COORDINATOR_NOT_AVAILABLE"
    retriable = True


class NotCoordinatorError(SeglogError):
    """This broker is not the coordinator of the group."""

    code = 16
    kafka_name = "NOT_COORDINATOR"
    retriable = True


class IllegalGenerationError(SeglogError):
    """The generation id is not the group's current one (a rebalance happened)."""

    code = 22
    kafka_name = "ILLEGAL_GENERATION"


class InconsistentGroupProtocolError(SeglogError):
    """The member's protocols do not match the group's."""

    code = 23
    kafka_name = "INCONSISTENT_GROUP_PROTOCOL"


class InvalidGroupIdError(SeglogError):
    """The group id is empty or not valid."""

    code = 24
    kafka_name = "INVALID_GROUP_ID"


class UnknownMemberIdError(SeglogError):
    """The member id is not in the group."""

    code = 25
    kafka_name = "UNKNOWN_MEMBER_ID"


class InvalidSessionTimeoutError(SeglogError):
    """The session timeout is outside group.min/max.session.timeout.ms."""

    code = 26
    kafka_name = "INVALID_SESSION_TIMEOUT"


class RebalanceInProgressError(SeglogError):
    """The group is rebalancing; rejoin."""

    code = 27
    kafka_name = "REBALANCE_IN_PROGRESS"


class InvalidCommitOffsetSizeError(SeglogError):
    """The committed offset is not valid."""

    code = 28
    kafka_name = "INVALID_COMMIT_OFFSET_SIZE"


class NonEmptyGroupError(SeglogError):
    """The group has active members."""

    code = 68
    kafka_name = "NON_EMPTY_GROUP"


class GroupIdNotFoundError(SeglogError):
    """The group does not exist."""

    code = 69
    kafka_name = "GROUP_ID_NOT_FOUND"


class MemberIdRequiredError(SeglogError):
    """Rejoin with the member id given in this response."""

    code = 79
    kafka_name = "MEMBER_ID_REQUIRED"


class GroupSubscribedToTopicError(SeglogError):
    """The consumer group is actively subscribed to the topic."""

    code = 86
    kafka_name = "GROUP_SUBSCRIBED_TO_TOPIC"


class GroupMaxSizeReachedError(SeglogError):
    """The group is full (group.max.size)."""

    code = 81
    kafka_name = "GROUP_MAX_SIZE_REACHED"


class FencedInstanceIdError(SeglogError):
    """A newer member with the same group.instance.id exists."""

    code = 82
    kafka_name = "FENCED_INSTANCE_ID"


class UnstableOffsetCommitError(SeglogError):
    """There are pending offset commits."""

    code = 88
    kafka_name = "UNSTABLE_OFFSET_COMMIT"
    retriable = True


class FencedMemberEpochError(SeglogError):
    """The consumer group member's epoch is not the coordinator's (KIP-848): rejoin with epoch 0."""

    code = 110
    kafka_name = "FENCED_MEMBER_EPOCH"


class UnreleasedInstanceIdError(SeglogError):
    """The group.instance.id is still used by a member that has not left (KIP-848 static membership)."""

    code = 111
    kafka_name = "UNRELEASED_INSTANCE_ID"


class UnsupportedAssignorError(SeglogError):
    """The server assignor named is not one of group.consumer.assignors."""

    code = 112
    kafka_name = "UNSUPPORTED_ASSIGNOR"


class StaleMemberEpochError(SeglogError):
    """The member epoch of an offset commit or fetch is not the member's current epoch."""

    code = 113
    kafka_name = "STALE_MEMBER_EPOCH"


class InvalidRegularExpressionError(SeglogError):
    """The subscription's regular expression does not compile."""

    code = 128
    kafka_name = "INVALID_REGULAR_EXPRESSION"



# --- protocol ------------------------------------------------------------------------------------------------
class UnsupportedVersionError(SeglogError):
    """The API version is not supported."""

    code = 35
    kafka_name = "UNSUPPORTED_VERSION"


class InvalidFetchSizeError(SeglogError):
    """The fetch size is not valid."""

    code = 4
    kafka_name = "INVALID_FETCH_SIZE"


class FetchSessionIdNotFoundError(SeglogError):
    """The fetch session is not known."""

    code = 70
    kafka_name = "FETCH_SESSION_ID_NOT_FOUND"
    retriable = True


class InvalidFetchSessionEpochError(SeglogError):
    """The fetch session epoch is wrong."""

    code = 71
    kafka_name = "INVALID_FETCH_SESSION_EPOCH"
    retriable = True


class ClusterAuthorizationFailedError(SeglogError):
    """Not authorized for the cluster operation."""

    code = 31
    kafka_name = "CLUSTER_AUTHORIZATION_FAILED"


# --- security ----------------------------------------------------------------------------------------------

class TopicAuthorizationFailedError(SeglogError):
    """Not authorized to access the topic."""

    code = 29
    kafka_name = "TOPIC_AUTHORIZATION_FAILED"


class GroupAuthorizationFailedError(SeglogError):
    """Not authorized to access the group."""

    code = 30
    kafka_name = "GROUP_AUTHORIZATION_FAILED"


class UnsupportedSaslMechanismError(SeglogError):
    """The SASL mechanism asked for is not enabled on the listener."""

    code = 33
    kafka_name = "UNSUPPORTED_SASL_MECHANISM"


class IllegalSaslStateError(SeglogError):
    """A SASL request out of order (SaslAuthenticate before SaslHandshake, a second handshake ...)."""

    code = 34
    kafka_name = "ILLEGAL_SASL_STATE"


class SaslAuthenticationError(SeglogError):
    """SASL authentication failed (wrong user or password, a malformed exchange). The message is what the
    client is told; ``reason`` (None: the message) is what the broker logs when the client is told less."""

    code = 58
    kafka_name = "SASL_AUTHENTICATION_FAILED"

    def __init__(self, message: str = "", reason: str | None = None):
        super().__init__(message)
        self.reason = reason


class SslAuthenticationError(SeglogError):
    """A client's TLS handshake failed: the broker's certificate is not trusted or does not name the host, or
    the broker refused the client's (Kafka's SslAuthenticationException; no wire code of its own)."""

    code = -1
    kafka_name = "UNKNOWN_SERVER_ERROR"


class SecurityDisabledError(SeglogError):
    """Security features are disabled (no authorizer configured for an ACL request)."""

    code = 54
    kafka_name = "SECURITY_DISABLED"


class DelegationTokenAuthDisabledError(SeglogError):
    """Delegation tokens are not enabled (Kafka without delegation.token.secret.key; seglog has none)."""

    code = 61
    kafka_name = "DELEGATION_TOKEN_AUTH_DISABLED"


class DelegationTokenRequestNotAllowedError(SeglogError):
    """Delegation token requests are not allowed on PLAINTEXT or one-way TLS connections (nor on token
    authenticated ones)."""

    code = 64
    kafka_name = "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"


class DelegationTokenAuthorizationFailedError(SeglogError):
    """The principal may not create (or describe) delegation tokens for that owner."""

    code = 65
    kafka_name = "DELEGATION_TOKEN_AUTHORIZATION_FAILED"


class InvalidPrincipalTypeError(SeglogError):
    """A principal type that is not supported (a delegation token's renewers must be Users)."""

    code = 67
    kafka_name = "INVALID_PRINCIPAL_TYPE"


class ResourceNotFoundError(SeglogError):
    """The resource (for example a SCRAM credential to delete) does not exist."""

    code = 91
    kafka_name = "RESOURCE_NOT_FOUND"


class UnacceptableCredentialError(SeglogError):
    """A credential does not meet the broker's rules (iteration count, empty user name)."""

    code = 93
    kafka_name = "UNACCEPTABLE_CREDENTIAL"





class UnknownServerError(SeglogError):
    """An unexpected server-side error (Kafka code -1) or a code this module does not know."""


_BY_CODE[-1] = UnknownServerError


def for_code(code: int) -> type[SeglogError]:
    """The exception class for a Kafka error code (``UnknownServerError`` for codes not known here)."""
    return _BY_CODE.get(code, UnknownServerError)


def code_of(exc: BaseException) -> int:
    """The Kafka error code a broker answers for ``exc`` (-1 for anything that is not a SeglogError)."""
    return exc.code if isinstance(exc, SeglogError) else -1


__all__ = ["SeglogError", "for_code", "code_of"] + sorted(
    name for name, obj in list(globals().items())
    if isinstance(obj, type) and issubclass(obj, SeglogError) and obj is not SeglogError)

"""Kafka's ACL model: resource patterns, access control entries, bindings and the filters that match them.

Codes are the wire's (``org.apache.kafka.common.acl`` / ``common.resource``); text forms are Kafka's:
``ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`` and
``(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)`` as kafka-acls.sh prints them, and
the ZooKeeper JSON of ``/kafka-acl/<Topic>/<name>``: ``{"version":1,"acls":[{"principal":"User:alice",
"permissionType":"Allow","operation":"Read","host":"*"}]}``. Names on input are Kafka's, case-insensitive,
with or without underscores (``IdempotentWrite``, ``idempotent_write``, ``IDEMPOTENTWRITE``).

Filters match as Kafka's ``AclBindingFilter``: a resource filter of pattern type ANY matches a pattern of any type
with exactly its name; MATCH also matches the patterns that would apply to a resource of that name (the
literal name, the literal wildcard ``*``, and every prefix); LITERAL / PREFIXED match that type with that name.
A null name, principal or host matches anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from ..errors import InvalidRequestError

WILDCARD = "*"                      # a literal resource name or host matching every one
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"      # the one name of the cluster resource


class _Named(IntEnum):
    """An enum with Kafka's spellings: ``kafka_name`` (TOPIC, IDEMPOTENT_WRITE), ``pascal`` (Topic,
    IdempotentWrite: what ZooKeeper's JSON and SecurityUtils write) and ``parse`` accepting any of them."""

    @property
    def kafka_name(self) -> str:
        return self.name

    @property
    def pascal(self) -> str:
        return "".join(w.capitalize() for w in self.name.split("_"))

    @classmethod
    def parse(cls, text: str):
        key = str(text).strip().replace("_", "").replace("-", "").upper()
        for member in cls:
            if member.name.replace("_", "") == key:
                return member
        raise ValueError(f"Unknown {cls.__name__} name {text!r}: one of "
                         f"{', '.join(m.pascal for m in cls if m.value > 1)}")


class ResourceType(_Named):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Named):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Named):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_Named):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


O = AclOperation
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({O.READ, O.WRITE, O.CREATE, O.DESCRIBE, O.DELETE, O.ALTER, O.DESCRIBE_CONFIGS,
                                   O.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({O.READ, O.DESCRIBE, O.DELETE}),
    ResourceType.CLUSTER: frozenset({O.CREATE, O.CLUSTER_ACTION, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS,
                                     O.IDEMPOTENT_WRITE, O.ALTER, O.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({O.DESCRIBE, O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({O.DESCRIBE}),
    ResourceType.USER: frozenset({O.CREATE_TOKENS, O.DESCRIBE_TOKENS}),
}
"""What each resource type's ACLs may name besides All (Kafka's AclEntry.supportedOperations)."""

IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    O.DESCRIBE: frozenset({O.DESCRIBE, O.READ, O.WRITE, O.DELETE, O.ALTER}),
    O.DESCRIBE_CONFIGS: frozenset({O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS}),
}
"""The allow ACLs that grant an operation besides its own and All: Read, Write, Delete and Alter imply
Describe; AlterConfigs implies DescribeConfigs. Deny ACLs imply nothing (deny Read does not deny Describe)."""


def parse_principal(text: str) -> str:
    """``Type:name`` (User:alice, User:*), InvalidRequestError otherwise (Kafka's message)."""
    kind, sep, name = str(text).partition(":")
    if not sep or not kind or not name:
        raise InvalidRequestError(f"expected a string in format principalType:principalName but got {text}")
    return f"{kind}:{name}"


@dataclass(frozen=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.kafka_name}, name={self.name}, "
                f"patternType={self.pattern_type.kafka_name})")


@dataclass(frozen=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.kafka_name}, "
                f"permissionType={self.permission.kafka_name})")

    def to_json(self) -> dict:
        """The entry as ZooKeeper's /kafka-acl JSON holds it."""
        return {"principal": self.principal, "permissionType": self.permission.pascal,
                "operation": self.operation.pascal, "host": self.host}

    @classmethod
    def from_json(cls, entry: dict) -> "AccessControlEntry":
        return cls(entry["principal"], entry["host"], AclOperation.parse(entry["operation"]),
                   AclPermissionType.parse(entry["permissionType"]))


@dataclass(frozen=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    @classmethod
    def allow(cls, principal: str, operation: str, resource_type: str, name: str = CLUSTER_NAME, *,
              pattern_type: str = "LITERAL", host: str = WILDCARD) -> "AclBinding":
        """``AclBinding.allow("User:alice", "Read", "Topic", "orders")``; names as Kafka spells them."""
        return cls._of(AclPermissionType.ALLOW, principal, operation, resource_type, name, pattern_type, host)

    @classmethod
    def deny(cls, principal: str, operation: str, resource_type: str, name: str = CLUSTER_NAME, *,
             pattern_type: str = "LITERAL", host: str = WILDCARD) -> "AclBinding":
        return cls._of(AclPermissionType.DENY, principal, operation, resource_type, name, pattern_type, host)

    @classmethod
    def _of(cls, permission, principal, operation, resource_type, name, pattern_type, host) -> "AclBinding":
        return cls(ResourcePattern(ResourceType.parse(resource_type), name, PatternType.parse(pattern_type)),
                   AccessControlEntry(principal, host, AclOperation.parse(operation), permission))

    def validate(self) -> None:
        """InvalidRequestError (Kafka's messages) for a binding that cannot be stored."""
        p, e = self.pattern, self.entry
        if p.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise InvalidRequestError(f"Invalid resourceType {p.resource_type.kafka_name}")
        if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidRequestError(f"Invalid patternType {p.pattern_type.kafka_name}")
        if e.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise InvalidRequestError(f"Invalid operation {e.operation.kafka_name}")
        if e.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise InvalidRequestError(f"Invalid permissionType {e.permission.kafka_name}")
        if not p.name:
            raise InvalidRequestError("Resource name should not be empty")
        if p.resource_type is ResourceType.CLUSTER and p.name != CLUSTER_NAME:
            raise InvalidRequestError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        parse_principal(e.principal)
        if not e.host:
            raise InvalidRequestError("Host should not be empty (use * for any host)")


@dataclass(frozen=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select (see the module docstring); None matches any name, principal,
    host."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def validate(self) -> None:
        """InvalidRequestError for a filter with an UNKNOWN field (it could match nothing meaningful)."""
        for value in (self.resource_type, self.pattern_type, self.operation, self.permission):
            if value.value == 0:
                raise InvalidRequestError(f"Filter contains UNKNOWN elements: {type(value).__name__} UNKNOWN")

    def matches_pattern(self, p: ResourcePattern) -> bool:
        if self.resource_type is not ResourceType.ANY and self.resource_type != p.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != p.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, p.pattern_type):
            return self.name == p.name
        if p.pattern_type is PatternType.LITERAL:                   # MATCH
            return self.name == p.name or p.name == WILDCARD
        return self.name.startswith(p.name)

    def matches_entry(self, e: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == e.principal)
                and (self.host is None or self.host == e.host)
                and (self.operation is AclOperation.ANY or self.operation == e.operation)
                and (self.permission is AclPermissionType.ANY or self.permission == e.permission))

    def matches(self, b: AclBinding) -> bool:
        return self.matches_pattern(b.pattern) and self.matches_entry(b.entry)

    def exact_pattern(self) -> ResourcePattern | None:
        """The one pattern a filter names exactly (LITERAL or PREFIXED, a name, a resource type), else None."""
        if (self.name is None or self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN)
                or self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED)):
            return None
        return ResourcePattern(self.resource_type, self.name, self.pattern_type)


ANY_ACL = AclBindingFilter()

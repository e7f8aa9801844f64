"""Quota entities, the quota keys, entity precedence and the validation of AlterClientQuotas, as Kafka's.

An entity is a user, a client id, or a user and a client id (Kafka's ClientQuotaEntity); each part is a name
or :data:`DEFAULT` (``<default>``: every user, every client id without a quota of its own). ZooKeeper keeps an
entity's configs at ``/config/users/<user>``, ``/config/users/<user>/clients/<client-id>`` or
``/config/clients/<client-id>``, names sanitized as Kafka's Sanitizer does (URL encoding, ``%2A`` for ``*``)
and ``<default>`` for the default; :func:`entity_path` and :func:`parse_entity_path` convert.

Precedence (Kafka's DefaultQuotaCallback), for each quota type apart: the first entity that has a value for it,
in the order

    user + client-id, user + default client-id, user,
    default user + client-id, default user + default client-id, default user,
    client-id, default client-id

gives both the quota and the metric tags, i.e. who shares one rate: an entity with a user shares it among all
the user's client ids unless it names a client id, one with a client id among all users unless it names a user.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping
from ..errors import InvalidRequestError
from ..sanitizer import desanitize, sanitize

__all__ = ["DEFAULT", "QuotaEntity", "PRODUCE", "FETCH", "REQUEST", "MUTATION", "QUOTA_KEYS", "resolve", "entity_path",
           "parse_entity_path", "check_value", "format_value", "entity_from_wire", "entity_to_wire",
           "USER", "CLIENT_ID"]

DEFAULT = "<default>"
"""The default entity's name, as Kafka writes it in ZooKeeper; a real name is stored sanitized, so never equal."""

USER, CLIENT_ID = "user", "client-id"                 # ClientQuotaEntity's entity types on the wire
PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
MUTATION = "controller_mutation_rate"
QUOTA_KEYS = {PRODUCE: "LONG", FETCH: "LONG", REQUEST: "DOUBLE", MUTATION: "DOUBLE"}
"""The quota configs seglog enforces and their Kafka types."""


@dataclass(frozen=True)
class QuotaEntity:
    """A quota entity: ``user`` and/or ``client_id`` (a name, DEFAULT, or None when not part of it)."""

    user: str | None = None
    client_id: str | None = None

    def __post_init__(self):
        if self.user is None and self.client_id is None:
            raise InvalidRequestError("Invalid empty client quota entity")


def resolve(quotas: Mapping[QuotaEntity, Mapping[str, float]], key: str, user: str,
            client_id: str) -> tuple[tuple[str, str], float | None]:
    """((user tag, client-id tag), quota or None) of a client for one quota key, by Kafka's precedence (see
    the module docstring); tags are "" where the rate is shared across that part."""
    for entity, tags in ((QuotaEntity(user, client_id), (user, client_id)),
                         (QuotaEntity(user, DEFAULT), (user, client_id)),
                         (QuotaEntity(user, None), (user, "")),
                         (QuotaEntity(DEFAULT, client_id), (user, client_id)),
                         (QuotaEntity(DEFAULT, DEFAULT), (user, client_id)),
                         (QuotaEntity(DEFAULT, None), (user, "")),
                         (QuotaEntity(None, client_id), ("", client_id)),
                         (QuotaEntity(None, DEFAULT), ("", client_id))):
        value = quotas.get(entity, {}).get(key)
        if value is not None:
            return tags, value
    return ("", ""), None


def _sanitize(name: str) -> str:
    return name if name == DEFAULT else sanitize(name)


def _desanitize(part: str) -> str:
    return part if part == DEFAULT else desanitize(part)


def entity_path(entity: QuotaEntity) -> str:
    """The entity's path under /config: ``users/alice``, ``users/alice/clients/c1``, ``clients/<default>``."""
    if entity.user is None:
        return f"clients/{_sanitize(entity.client_id)}"
    if entity.client_id is None:
        return f"users/{_sanitize(entity.user)}"
    return f"users/{_sanitize(entity.user)}/clients/{_sanitize(entity.client_id)}"


def parse_entity_path(path: str) -> QuotaEntity:
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == "users":
        return QuotaEntity(_desanitize(parts[1]), None)
    if len(parts) == 2 and parts[0] == "clients":
        return QuotaEntity(None, _desanitize(parts[1]))
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return QuotaEntity(_desanitize(parts[1]), _desanitize(parts[3]))
    raise ValueError(f"not a quota entity path: {path!r}")


def entity_from_wire(parts: list[dict]) -> QuotaEntity:
    """An AlterClientQuotas entity ([{entity_type, entity_name (None: the default)}]); InvalidRequestError as
    Kafka's for an unknown or repeated type, an empty name, or an ip entity (connection quotas: not served)."""
    found: dict[str, str] = {}
    for part in parts:
        kind, name = part["entity_type"], part["entity_name"]
        if kind not in (USER, CLIENT_ID):
            if kind == "ip":
                raise InvalidRequestError("ip quotas (connection_creation_rate) are not supported by seglog")
            raise InvalidRequestError(f"Unhandled client quota entity type: {kind}")
        if kind in found:
            raise InvalidRequestError(f"Duplicate {'user' if kind == USER else 'client'} entity type")
        if name is not None and not name:
            raise InvalidRequestError(f"Empty {kind} not supported")
        found[kind] = DEFAULT if name is None else name
    return QuotaEntity(found.get(USER), found.get(CLIENT_ID))


def entity_to_wire(entity: QuotaEntity) -> list[dict]:
    return [{"entity_type": kind, "entity_name": None if name == DEFAULT else name}
            for kind, name in ((USER, entity.user), (CLIENT_ID, entity.client_id)) if name is not None]


def check_value(key: str, value: float) -> float:
    """A quota value as Kafka accepts it for the key (a whole number for a LONG key, greater than 0), else
    InvalidRequestError with Kafka's message."""
    kind = QUOTA_KEYS.get(key)
    if kind is None:
        raise InvalidRequestError(f"Invalid configuration key {key}")
    if value != value or value in (float("inf"), float("-inf")):
        raise InvalidRequestError(f"Configuration {key} must be a {kind} value")
    if kind == "LONG":
        whole = int(value + 1e-6)
        if abs(whole - value) > 1e-6:
            raise InvalidRequestError(f"Configuration {key} must be a {kind} value")
        value = float(whole)
    if value <= 0:
        raise InvalidRequestError(f"Quota {key} must be greater than 0")
    return value


def format_value(key: str, value: float) -> str:
    """A value as Kafka's ZooKeeper JSON holds it: "1024" for a LONG key, "50.0" for a DOUBLE one."""
    return str(int(value)) if QUOTA_KEYS.get(key) == "LONG" else repr(float(value))

"""CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken and DescribeDelegationToken, answered as a
Kafka 3.7 ZooKeeper-mode broker without ``delegation.token.secret.key`` answers them: seglog has no delegation
tokens (no token store, no token authentication), so a client that asks learns that at once from the answer.

As Kafka's KafkaApis and DelegationTokenManager, in this order: on a PLAINTEXT connection, or a TLS one without a
client certificate (principal User:ANONYMOUS), every request is DELEGATION_TOKEN_REQUEST_NOT_ALLOWED; a creation
for another owner needs CreateTokens on that User (DELEGATION_TOKEN_AUTHORIZATION_FAILED), and renewers must be
Users (INVALID_PRINCIPAL_TYPE); everything else is DELEGATION_TOKEN_AUTH_DISABLED. Timestamps are -1 and the token
id and HMAC empty in every answer, as Kafka's error answers."""

from __future__ import annotations

from ..errors import (DelegationTokenAuthDisabledError, DelegationTokenAuthorizationFailedError,
                      DelegationTokenRequestNotAllowedError, InvalidPrincipalTypeError)
from ..protocol import ApiKey
from ..security.acls import AclOperation, ResourceType

ANONYMOUS = "User:ANONYMOUS"
USER_TYPE = "User"
DISABLED = DelegationTokenAuthDisabledError.code
NOT_ALLOWED = DelegationTokenRequestNotAllowedError.code


def _requests_allowed(conn) -> bool:
    """Kafka's allowTokenRequests: not over PLAINTEXT, nor over TLS without a client certificate."""
    protocol = conn.listener.protocol
    return not (protocol == "PLAINTEXT" or (protocol == "SSL" and conn.principal == ANONYMOUS))


async def handle_create_delegation_token(handlers, header, body):
    broker = handlers.broker
    conn = broker.connection()
    requester = conn.principal
    owner_name = body["owner_principal_name"]
    owner = requester if not owner_name else f"{body['owner_principal_type'] or ''}:{owner_name}"
    if not _requests_allowed(conn):
        code = NOT_ALLOWED
    elif owner != requester and not broker.allowed(AclOperation.CREATE_TOKENS, ResourceType.USER, owner):
        code = DelegationTokenAuthorizationFailedError.code
    elif any(r["principal_type"] != USER_TYPE for r in body["renewers"]):
        code = InvalidPrincipalTypeError.code
    else:
        code = DISABLED
    owner_type, _, owner_name = owner.partition(":")
    requester_type, _, requester_name = requester.partition(":")
    return {"error_code": code, "principal_type": owner_type, "principal_name": owner_name,
            "token_requester_principal_type": requester_type, "token_requester_principal_name": requester_name,
            "issue_timestamp_ms": -1, "expiry_timestamp_ms": -1, "max_timestamp_ms": -1, "token_id": "",
            "hmac": b"", "throttle_time_ms": 0}


async def handle_renew_or_expire_delegation_token(handlers, header, body):
    """Renew and Expire answer alike: an error code and expiry -1."""
    code = DISABLED if _requests_allowed(handlers.broker.connection()) else NOT_ALLOWED
    return {"error_code": code, "expiry_timestamp_ms": -1, "throttle_time_ms": 0}


async def handle_describe_delegation_token(handlers, header, body):
    code = DISABLED if _requests_allowed(handlers.broker.connection()) else NOT_ALLOWED
    return {"error_code": code, "tokens": [], "throttle_time_ms": 0}


TOKEN_HANDLERS = {
    ApiKey.CREATE_DELEGATION_TOKEN: handle_create_delegation_token,
    ApiKey.RENEW_DELEGATION_TOKEN: handle_renew_or_expire_delegation_token,
    ApiKey.EXPIRE_DELEGATION_TOKEN: handle_renew_or_expire_delegation_token,
    ApiKey.DESCRIBE_DELEGATION_TOKEN: handle_describe_delegation_token,
}

"""The security APIs: SaslHandshake, SaslAuthenticate, DescribeUserScramCredentials, AlterUserScramCredentials.

They run on the connection's task like every handler (``handlers.broker.connection()`` is the connection whose
request is being answered). A failed authentication is answered (SASL_AUTHENTICATION_FAILED with Kafka's
message) after a short delay and then the connection is closed, as Kafka does; the failure is logged with the
client's address, rate-limited, never with a password or token.
"""

from __future__ import annotations

import asyncio

from ..errors import (IllegalSaslStateError, ResourceNotFoundError, SaslAuthenticationError, SeglogError,
                      UnacceptableCredentialError, UnsupportedSaslMechanismError)
from ..protocol import ApiKey
from ..security.sasl import FAILED_LOGIN_DELAY
from ..security.scram import MECHANISM_IDS, check_iterations, credential_from_salted

SASL_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
_MECHANISM_NAMES = {v: k for k, v in MECHANISM_IDS.items()}


async def sasl_step(broker, conn, token: bytes) -> tuple[bytes, int | str]:
    """One token of a connection's exchange -> (response token, session lifetime ms), or (b"", error message)
    once the exchange failed (logged; the caller closes the connection)."""
    try:
        response, lifetime = conn.sasl.authenticate(token)
    except (SaslAuthenticationError, IllegalSaslStateError) as e:
        broker.failed_logins.failed(conn.address, conn.sasl.mechanism or "-", conn.sasl.claimed_user(), str(e))
        conn.sasl.server = None
        await asyncio.sleep(FAILED_LOGIN_DELAY)
        return b"", str(e)
    conn.principal = f"User:{conn.sasl.user}"
    return response, lifetime


async def handle_sasl_handshake(handlers, header, body):
    conn = handlers.broker.connection()
    if conn.sasl is None:
        return {"error_code": IllegalSaslStateError.code, "mechanisms": []}
    try:
        conn.sasl.handshake(body["mechanism"], header.api_version)
    except (UnsupportedSaslMechanismError, IllegalSaslStateError) as e:
        return {"error_code": e.code, "mechanisms": list(conn.sasl.mechanisms)}
    return {"error_code": 0, "mechanisms": list(conn.sasl.mechanisms)}


async def handle_sasl_authenticate(handlers, header, body):
    conn = handlers.broker.connection()
    if conn.sasl is None or conn.sasl.server is None:
        conn.close_after = "SaslAuthenticate without a SaslHandshake"
        return {"error_code": IllegalSaslStateError.code, "error_message": "SaslAuthenticate before SaslHandshake",
                "auth_bytes": b"", "session_lifetime_ms": 0}
    result = await sasl_step(handlers.broker, conn, bytes(body["auth_bytes"]))
    if isinstance(result[1], str):
        conn.close_after = f"authentication failed: {result[1]}"
        return {"error_code": SaslAuthenticationError.code, "error_message": result[1], "auth_bytes": b"",
                "session_lifetime_ms": 0}
    return {"error_code": 0, "error_message": None, "auth_bytes": result[0], "session_lifetime_ms": result[1]}


async def handle_describe_user_scram_credentials(handlers, header, body):
    handlers.broker.authorize_cluster("DESCRIBE")
    known = handlers.broker.credentials.describe()
    asked = None if body["users"] is None else [u["name"] for u in body["users"]]
    results = []
    for user in (sorted(known) if asked is None else asked):
        if user not in known:
            results.append({"user": user, "error_code": ResourceNotFoundError.code,
                            "error_message": f"Attempt to describe a user credential that does not exist: {user}",
                            "credential_infos": []})
            continue
        results.append({"user": user, "error_code": 0, "error_message": None,
                        "credential_infos": [{"mechanism": MECHANISM_IDS[m], "iterations": i}
                                             for m, i in sorted(known[user].items())]})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": results}


async def handle_alter_user_scram_credentials(handlers, header, body):
    handlers.broker.authorize_cluster("ALTER")
    known = handlers.broker.credentials.describe()
    errors: dict[str, tuple[int, str]] = {}
    upserts, deletions = [], []
    for d in body["deletions"]:
        mechanism = _MECHANISM_NAMES.get(d["mechanism"])
        if mechanism is None:
            errors[d["name"]] = (UnacceptableCredentialError.code, "Unknown SCRAM mechanism")
        elif mechanism not in known.get(d["name"], {}):
            errors[d["name"]] = (ResourceNotFoundError.code,
                                 "Attempt to delete a user credential that does not exist")
        else:
            deletions.append((d["name"], mechanism))
    for u in body["upsertions"]:
        mechanism = _MECHANISM_NAMES.get(u["mechanism"])
        try:
            if mechanism is None:
                raise UnacceptableCredentialError("Unknown SCRAM mechanism")
            if not u["name"]:
                raise UnacceptableCredentialError("Username must not be empty")
            check_iterations(u["iterations"])
            upserts.append((u["name"], mechanism, credential_from_salted(mechanism, bytes(u["salted_password"]),
                                                                         bytes(u["salt"]), u["iterations"])))
        except SeglogError as e:
            errors[u["name"]] = (e.code, str(e))
    upserts = [x for x in upserts if x[0] not in errors]
    deletions = [x for x in deletions if x[0] not in errors]
    await handlers.broker.on_disk(handlers.broker.credentials.alter, upserts, deletions)
    names = list(dict.fromkeys([d["name"] for d in body["deletions"]] + [u["name"] for u in body["upsertions"]]))
    return {"throttle_time_ms": 0, "results": [
        {"user": n, "error_code": errors.get(n, (0, None))[0], "error_message": errors.get(n, (0, None))[1]}
        for n in names]}


SECURITY_HANDLERS = {
    ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: handle_describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: handle_alter_user_scram_credentials,
}

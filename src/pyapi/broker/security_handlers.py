"""The security APIs: SaslHandshake, SaslAuthenticate, DescribeUserScramCredentials, AlterUserScramCredentials,
DescribeAcls, CreateAcls, DeleteAcls.

They run on the connection's task like every handler (``handlers.broker.connection()`` is the connection whose
request is being answered). A failed authentication is answered (SASL_AUTHENTICATION_FAILED with Kafka's
message) after a short delay and then the connection is closed, as Kafka does; the failure is logged with the
client's address, rate-limited, never with a password or token.
"""

from __future__ import annotations

import asyncio

from ..errors import (ClusterAuthorizationFailedError, IllegalSaslStateError, ResourceNotFoundError,
                      SaslAuthenticationError, SecurityDisabledError, SeglogError, UnacceptableCredentialError,
                      UnsupportedSaslMechanismError)
from ..protocol import ApiKey
from ..protocol import api_versions_body
from ..security.acls import AclOperation, ResourcePattern, ResourceType
from ..security.acls_wire import binding_from_wire, binding_to_wire, filter_from_wire
from ..security.sasl import FAILED_LOGIN_DELAY
from ..security.scram import MECHANISM_IDS, check_iterations, credential_from_salted

CLUSTER_DENIED = "Cluster authorization failed."          # Kafka's message for CLUSTER_AUTHORIZATION_FAILED
SASL_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
_MECHANISM_NAMES = {v: k for k, v in MECHANISM_IDS.items()}


async def _failed(broker, conn, mechanism: str, e: SeglogError) -> None:
    """A failed login: logged (rate-limited), the exchange dropped, answered after the failed-login delay."""
    broker.failed_logins.failed(conn.address, mechanism, conn.sasl.claimed_user(), getattr(e, "reason", None) or str(e))
    conn.sasl.server = None
    await asyncio.sleep(FAILED_LOGIN_DELAY)


async def sasl_step(broker, conn, token: bytes) -> tuple[bytes, int | str]:
    """One token of a connection's exchange -> (response token, session lifetime ms), or (b"", error message)
    once the exchange failed (logged; the caller closes the connection)."""
    try:
        response, lifetime = conn.sasl.authenticate(token)
    except (SaslAuthenticationError, IllegalSaslStateError) as e:
        await _failed(broker, conn, conn.sasl.mechanism or "-", e)
        return b"", str(e)
    conn.principal = f"User:{conn.sasl.user}"
    return response, lifetime


async def sasl_api_versions(broker, conn) -> dict:
    """The ApiVersions answer on a SASL connection (SaslState.api_versions says when it is allowed); during an
    exchange it is ILLEGAL_SASL_STATE without versions, the login failed and the connection then closed."""
    try:
        conn.sasl.api_versions()
    except IllegalSaslStateError as e:
        await _failed(broker, conn, conn.sasl.mechanism or "-", e)
        conn.close_after = f"authentication failed: {e}"
        return {**api_versions_body(e.code), "api_keys": []}
    return api_versions_body()


async def handle_sasl_handshake(handlers, header, body):
    """A mechanism the listener does not enable, a handshake during an exchange or a re-authentication with
    another mechanism fails the login as Kafka's does: answered with the error (and the enabled mechanisms),
    logged, and the connection closed."""
    conn = handlers.broker.connection()
    if conn.sasl is None:
        return {"error_code": IllegalSaslStateError.code, "mechanisms": []}
    try:
        conn.sasl.handshake(body["mechanism"], header.api_version)
    except (UnsupportedSaslMechanismError, IllegalSaslStateError) as e:
        await _failed(handlers.broker, conn, conn.sasl.mechanism or "-", e)
        conn.close_after = f"authentication failed: {e}"
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
    if not handlers.broker.allowed(AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return {"throttle_time_ms": 0, "error_code": ClusterAuthorizationFailedError.code,
                "error_message": CLUSTER_DENIED, "results": []}
    known = handlers.broker.credentials.describe()
    asked = [u["name"] for u in body["users"]] if body["users"] else None       # null or empty: every user
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
    if not handlers.broker.allowed(AclOperation.ALTER, ResourceType.CLUSTER):
        names = list(dict.fromkeys([d["name"] for d in body["deletions"]] + [u["name"] for u in body["upsertions"]]))
        return {"throttle_time_ms": 0, "results": [
            {"user": n, "error_code": ClusterAuthorizationFailedError.code, "error_message": CLUSTER_DENIED}
            for n in names]}
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
    try:
        await handlers.broker.on_disk(handlers.broker.credentials.alter, upserts, deletions)
    except SeglogError as e:                         # the metadata store unreachable: nothing said is known done
        for name, *_ in (*upserts, *deletions):
            errors[name] = (e.code, str(e))
    names = list(dict.fromkeys([d["name"] for d in body["deletions"]] + [u["name"] for u in body["upsertions"]]))
    return {"throttle_time_ms": 0, "results": [
        {"user": n, "error_code": errors.get(n, (0, None))[0], "error_message": errors.get(n, (0, None))[1]}
        for n in names]}


# -- ACLs -------------------------------------------------------------------------------------------------------

NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _acl_refusal(handlers, operation: AclOperation) -> tuple[int, str | None] | None:
    """(error code, message) when the ACL APIs cannot be served: no authorizer (SECURITY_DISABLED) or the
    principal may not `operation` the cluster (CLUSTER_AUTHORIZATION_FAILED); None when they can."""
    if handlers.broker.authorizer is None:
        return SecurityDisabledError.code, NO_AUTHORIZER
    if not handlers.broker.allowed(operation, ResourceType.CLUSTER):
        return ClusterAuthorizationFailedError.code, CLUSTER_DENIED
    return None


async def handle_describe_acls(handlers, header, body):
    """DescribeAcls (Describe on the cluster): the bindings the filter matches, grouped by resource pattern."""
    refused = _acl_refusal(handlers, AclOperation.DESCRIBE)
    if refused is not None:
        return {"throttle_time_ms": 0, "error_code": refused[0], "error_message": refused[1], "resources": []}
    selection = filter_from_wire(body, header.api_version)
    try:
        selection.validate()
    except SeglogError as e:
        return {"throttle_time_ms": 0, "error_code": e.code, "error_message": str(e), "resources": []}
    resources: dict[ResourcePattern, list] = {}
    for b in handlers.broker.authorizer.acls(selection):
        resources.setdefault(b.pattern, []).append(
            {"principal": b.entry.principal, "host": b.entry.host, "operation": b.entry.operation,
             "permission_type": b.entry.permission})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "resources": [
        {"resource_type": p.resource_type, "resource_name": p.name, "pattern_type": p.pattern_type, "acls": acls}
        for p, acls in resources.items()]}


async def handle_create_acls(handlers, header, body):
    """CreateAcls (Alter on the cluster): each creation stored or refused with its own error."""
    refused = _acl_refusal(handlers, AclOperation.ALTER)
    if refused is not None:
        return {"throttle_time_ms": 0, "results": [{"error_code": refused[0], "error_message": refused[1]}
                                                   for _ in body["creations"]]}
    bindings = [binding_from_wire(c, header.api_version, "resource_pattern_type") for c in body["creations"]]
    results = await handlers.broker.on_disk(handlers.broker.authorizer.create_acls, bindings)
    return {"throttle_time_ms": 0, "results": [{"error_code": 0 if e is None else e.code,
                                                "error_message": None if e is None else str(e)} for e in results]}


async def handle_delete_acls(handlers, header, body):
    """DeleteAcls (Alter on the cluster): per filter the bindings it deleted."""
    refused = _acl_refusal(handlers, AclOperation.ALTER)
    if refused is not None:
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": refused[0], "error_message": refused[1], "matching_acls": []} for _ in body["filters"]]}
    filters = [filter_from_wire(f, header.api_version) for f in body["filters"]]
    results = await handlers.broker.on_disk(handlers.broker.authorizer.delete_acls, filters)
    out = []
    for r in results:
        if isinstance(r, SeglogError):
            out.append({"error_code": r.code, "error_message": str(r), "matching_acls": []})
        else:
            out.append({"error_code": 0, "error_message": None, "matching_acls": [
                {"error_code": 0, "error_message": None, **binding_to_wire(b)} for b in r]})
    return {"throttle_time_ms": 0, "filter_results": out}


SECURITY_HANDLERS = {
    ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: handle_describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: handle_alter_user_scram_credentials,
    ApiKey.DESCRIBE_ACLS: handle_describe_acls,
    ApiKey.CREATE_ACLS: handle_create_acls,
    ApiKey.DELETE_ACLS: handle_delete_acls,
}

"""SASL on the broker: PLAIN and SCRAM exchanges, the JAAS settings that configure them, a connection's
authentication state, and the client side seglog's own connections (replication, admin) use.

JAAS (Kafka's ``sasl.jaas.config``, per listener and mechanism as
``listener.name.<listener>.<mechanism>.sasl.jaas.config``)::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="broker" password="broker-secret" user_broker="broker-secret" user_alice="alice-secret";

``username``/``password`` are the broker's own credentials on the inter-broker listener; ``user_<name>`` are the
PLAIN users the listener accepts. SCRAM users come from the credential store (seglog.security.credentials).

Passwords are compared in constant time; no password, token or salted key is ever logged, nor a user name the
listener does not know (it may be a password typed into the wrong field). Failed logins are logged with the
client's address, at most ``FAILED_LOGIN_LOG_BURST`` lines per minute (the rest are counted and
reported in the next line); each failure is answered after ``FAILED_LOGIN_DELAY`` seconds (Kafka's
connection.failed.authentication.delay.ms, 100 ms), which slows password guessing on one connection.
"""

from __future__ import annotations

import hmac
import logging
import re
import threading
import time

from ..errors import IllegalSaslStateError, InvalidConfigError, InvalidRequestError, SaslAuthenticationError
from .scram import HASHES, ScramClient, ScramRejected, ScramServer

log = logging.getLogger("seglog.security")

FAILED_LOGIN_DELAY = 0.1
FAILED_LOGIN_LOG_BURST = 10
MAX_PLAIN_BYTES = 1024            # authzid, user and password of a PLAIN message, together

_JAAS = re.compile(r'\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\s+(.*?);?\s*$', re.S)
_OPTION = re.compile(r'\s*([\w.-]+)\s*=\s*("((?:[^"\\]|\\.)*)"|[^\s"]+)')


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """(login module class, options) of one JAAS entry; InvalidConfigError (never showing the text, which
    holds passwords) if it does not parse."""
    m = _JAAS.fullmatch(text.strip())
    if m is None:
        raise InvalidConfigError("sasl.jaas.config is not 'LoginModule required key=\"value\" ...;'")
    options, pos, rest = {}, 0, m.group(3).rstrip().rstrip(";")
    while pos < len(rest.rstrip()):
        o = _OPTION.match(rest, pos)
        if o is None:
            raise InvalidConfigError(f"sasl.jaas.config of {m.group(1)}: bad option at character {pos}")
        value = o.group(3) if o.group(3) is not None else o.group(2)
        options[o.group(1)] = re.sub(r"\\(.)", r"\1", value) if o.group(3) is not None else value
        pos = o.end()
    return m.group(1), options


def jaas_options(config, listener: str, mechanism: str) -> dict[str, str]:
    """The JAAS options of a mechanism on a listener (listener.name.<l>.<mech>.sasl.jaas.config, else
    listener.name.<l>.sasl.jaas.config, else sasl.jaas.config); {} if none is set."""
    for name in (f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config",
                 f"listener.name.{listener.lower()}.sasl.jaas.config"):
        for key, value in config.listener_overrides:
            if key == name:
                return parse_jaas(value)[1]
    return parse_jaas(config.sasl_jaas_config)[1] if config.sasl_jaas_config else {}


def plain_users(config, listener: str) -> dict[str, str]:
    return {k[5:]: v for k, v in jaas_options(config, listener, "PLAIN").items() if k.startswith("user_")}


class FailedLogins:
    """Rate-limited logging of failed logins (thread-safe)."""

    def __init__(self, burst: int = FAILED_LOGIN_LOG_BURST, window: float = 60.0):
        self._burst, self._window = burst, window
        self._lock = threading.Lock()
        self._start, self._logged, self._suppressed = 0.0, 0, 0

    def failed(self, client: str, mechanism: str, user: str | None, why: str) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self._start >= self._window:
                self._start, self._logged = now, 0
            if self._logged >= self._burst:
                self._suppressed += 1
                return
            self._logged += 1
            suppressed, self._suppressed = self._suppressed, 0
        log.warning("Failed authentication with %s (%s%s): %s%s", client, mechanism,
                    f", user {user!r}" if user else "", why,
                    f" ({suppressed} more failed logins not logged)" if suppressed else "")


class PlainServer:
    """The server side of PLAIN (RFC 4616): one message ``authzid NUL user NUL password``. ``known_user`` is
    the message's user once it is read, if that user exists (for the log line of a failure)."""

    def __init__(self, users: dict[str, str]):
        self._users = users
        self.user: str | None = None
        self.complete = False
        self.known_user: str | None = None
        self._stepped = False

    def step(self, token: bytes) -> bytes:
        if self._stepped:
            raise SaslAuthenticationError("Authentication failed: unexpected PLAIN message after the exchange")
        self._stepped = True
        if len(token) > MAX_PLAIN_BYTES:
            raise SaslAuthenticationError("Authentication failed: PLAIN message too long")
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        self.known_user = user if user in self._users else None
        if not user or not password:
            raise SaslAuthenticationError("Authentication failed: username or password not specified")
        expected = self._users.get(user)
        # compared in constant time whether or not the user exists
        ok = hmac.compare_digest(password.encode(), (expected if expected is not None else "\0" + password).encode())
        if not ok or expected is None:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise SaslAuthenticationError("Authentication failed: Client requested an authorization id that is "
                                          "different from username")
        self.user, self.complete = user, True
        return b""


class SaslState:
    """The SASL state of one connection on a SASL listener. ``mechanisms`` are the listener's; ``credentials``
    the SCRAM store; ``plain`` the PLAIN users. Used by one connection's task only (no lock).

    ``authenticated`` once an exchange succeeded; ``expires_at`` (monotonic seconds, None: never) is when the
    session ends under connections.max.reauth.ms unless the client re-authenticates (KIP-368): a handshake
    on an authenticated connection starts a new exchange, which must end with the same user.

    ApiVersions is answered before the handshake once (Kafka's SaslServerAuthenticator): a second one closes
    the connection unanswered, one during an exchange fails the login (ILLEGAL_SASL_STATE)."""

    def __init__(self, mechanisms, credentials, plain: dict[str, str], reauth_ms: int):
        self.mechanisms, self._credentials, self._plain, self._reauth_ms = mechanisms, credentials, plain, reauth_ms
        self.server: PlainServer | ScramServer | None = None
        self.mechanism: str | None = None
        self.raw_tokens = False              # after a v0 handshake: tokens travel without Kafka framing
        self.user: str | None = None
        self.expires_at: float | None = None
        self._versions_answered = False

    @property
    def authenticated(self) -> bool:
        return self.user is not None

    def expired(self) -> bool:
        return self.expires_at is not None and time.monotonic() >= self.expires_at

    def api_versions(self) -> None:
        """Whether ApiVersions may be answered now: IllegalSaslStateError during an exchange (the login fails),
        InvalidRequestError for a second one before the handshake (closed unanswered)."""
        if self.server is not None:
            raise IllegalSaslStateError("Unexpected Kafka request of type API_VERSIONS during SASL authentication.")
        if self.authenticated:
            return
        if self._versions_answered:
            raise InvalidRequestError("Unexpected ApiVersions request received during SASL authentication state "
                                      "HANDSHAKE_REQUEST")
        self._versions_answered = True

    def handshake(self, mechanism: str, version: int) -> None:
        if self.server is not None:
            raise IllegalSaslStateError("SaslHandshake during an exchange")
        if mechanism not in self.mechanisms:
            from ..errors import UnsupportedSaslMechanismError
            raise UnsupportedSaslMechanismError(f"Unsupported SASL mechanism {mechanism!r}")
        if self.authenticated and mechanism != self.mechanism:
            raise IllegalSaslStateError("re-authentication must use the mechanism of the session")
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self.server = PlainServer(self._plain)
        else:
            self.server = ScramServer(mechanism, lambda user: self._credentials.get(user, mechanism))
        self.raw_tokens = version == 0

    def authenticate(self, token: bytes) -> tuple[bytes, int]:
        """One token of the exchange -> (response token, session lifetime ms: 0 until complete or when
        re-authentication is off). SaslAuthenticationError on failure: the connection is then closed."""
        if self.server is None:
            raise IllegalSaslStateError("SaslAuthenticate before SaslHandshake")
        try:
            response = self.server.step(token)
        except ScramRejected as e:
            raise SaslAuthenticationError(
                f"Authentication failed during {'re-' if self.authenticated else ''}authentication due to invalid "
                f"credentials with SASL mechanism {self.mechanism}", reason=str(e)) from None
        if not self.server.complete:
            return response, 0
        user = self.server.user
        if self.user is not None and user != self.user:
            raise SaslAuthenticationError("re-authentication must be as the same user")
        self.user, self.server, self.raw_tokens = user, None, False
        self.expires_at = time.monotonic() + self._reauth_ms / 1000 if self._reauth_ms else None
        return response, self._reauth_ms

    def claimed_user(self) -> str | None:
        """The user the failed exchange was for (for the log line), if it got that far and the user exists."""
        return self.server.known_user if self.server is not None else None


# -- the client side --------------------------------------------------------------------------------------------

def client_credentials(config, listener: str) -> tuple[str, str, str]:
    """(mechanism, user, password) the broker authenticates with on `listener` (the inter-broker one):
    sasl.mechanism.inter.broker.protocol and that mechanism's JAAS username/password."""
    mechanism = config.sasl_mechanism_inter_broker_protocol.upper()
    if mechanism not in ("PLAIN", *HASHES):
        raise InvalidConfigError(f"Invalid value {mechanism!r} for configuration "
                                 f"sasl.mechanism.inter.broker.protocol: seglog uses PLAIN, SCRAM-SHA-256 or "
                                 f"SCRAM-SHA-512")
    options = jaas_options(config, listener, mechanism)
    if "username" not in options or "password" not in options:
        raise InvalidConfigError(f"the inter-broker listener {listener} uses SASL ({mechanism}): its "
                                 f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config needs "
                                 f"username and password")
    return mechanism, options["username"], options["password"]


def client_exchange(mechanism: str, user: str, password: str):
    """A generator of the client's tokens: send what it yields, send() it the server's answers."""
    if mechanism == "PLAIN":
        yield f"\0{user}\0{password}".encode()
        return
    client = ScramClient(mechanism, user, password)
    server_first = yield client.first()
    server_final = yield client.final(server_first)
    client.verify(server_final)

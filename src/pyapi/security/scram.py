"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them, and the credentials it stores.

A credential is what Kafka keeps per user and mechanism: salt, StoredKey = H(ClientKey), ServerKey and the
iteration count (at least 4096, at most 16384, as Kafka checks), in Kafka's text form
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``; the password itself is never stored.
Proofs are compared in constant time (hmac.compare_digest).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from dataclasses import dataclass

from ..errors import SaslAuthenticationError, UnacceptableCredentialError

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: Kafka's ScramMechanism ids (AlterUserScramCredentials, DescribeUserScramCredentials)
MECHANISM_IDS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384
DEFAULT_ITERATIONS = 4096
MAX_MESSAGE_BYTES = 4096          # a SCRAM message is a few hundred bytes; anything longer is refused


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_kafka(self) -> str:
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},server_key={b64(self.server_key)},"
                f"iterations={self.iterations}")

    @classmethod
    def from_kafka(cls, text: str) -> "ScramCredential":
        parts = dict(item.split("=", 1) for item in text.split(","))
        return cls(base64.b64decode(parts["salt"]), base64.b64decode(parts["stored_key"]),
                   base64.b64decode(parts["server_key"]), int(parts["iterations"]))

    def __repr__(self) -> str:
        return f"ScramCredential(iterations={self.iterations})"


def check_iterations(iterations: int) -> None:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise UnacceptableCredentialError(f"Iterations {iterations} must be in {MIN_ITERATIONS}..{MAX_ITERATIONS}")


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password, salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The stored credential of a salted password (AlterUserScramCredentials sends the salted password)."""
    h = HASHES[mechanism]
    client_key = hmac.digest(salted, b"Client Key", h)
    return ScramCredential(salt, hashlib.new(h, client_key).digest(), hmac.digest(salted, b"Server Key", h),
                           iterations)


def new_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    check_iterations(iterations)
    salt = os.urandom(32)
    return credential_from_salted(mechanism, salted_password(mechanism, password.encode(), salt, iterations),
                                  salt, iterations)


def _attributes(message: str) -> dict[str, str]:
    """The attributes of a server message (seglog's client side)."""
    out = {}
    for item in message.split(","):
        key, sep, value = item.partition("=")
        if not sep or len(key) != 1:
            raise SaslAuthenticationError(f"Authentication failed: malformed SCRAM message")
        out.setdefault(key, value)
    return out


# RFC 5802's grammar as Kafka's ScramMessages matches it: ASCII only; a nonce is printable and has no ','
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_BASE64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
CLIENT_FIRST = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
                          rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))")
CLIENT_FINAL = re.compile(rf"(?P<without_proof>c=(?P<binding>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),"
                          rf"p=(?P<proof>{_BASE64})")


class ScramRejected(SaslAuthenticationError):
    """A SCRAM failure Kafka reports to the client only as invalid credentials (a SaslException in its
    ScramSaslServer): the message says why, for the broker's log; SaslState tells the client Kafka's words."""


def _saslname(name: str) -> str:
    """RFC 5802 saslname decoding (=2C is ',', =3D is '='; CLIENT_FIRST admits no other '=')."""
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """The server side of one SCRAM exchange: ``step(client_first)`` -> server-first, ``step(client_final)`` ->
    server-final; then ``user`` is the authenticated user. ``lookup(user)`` gives the user's ScramCredential or
    None; an unknown user goes through the same steps with a made-up credential and fails at the proof, like a
    wrong password (no telling which). ``known_user`` is the client-first's user once read, if it exists (for
    the log line of a failure)."""

    def __init__(self, mechanism: str, lookup):
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._lookup = lookup
        self._state = "first"
        self.user: str | None = None
        self.known_user: str | None = None
        self.complete = False

    def step(self, token: bytes) -> bytes:
        if len(token) > MAX_MESSAGE_BYTES:
            raise ScramRejected("SCRAM message too long")
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramRejected("SCRAM message is not UTF-8") from None
        if self._state == "first":
            return self._first(message)
        if self._state == "final":
            return self._final(message)
        raise ScramRejected("unexpected SCRAM message after the exchange")

    def _first(self, message: str) -> bytes:
        m = CLIENT_FIRST.fullmatch(message)
        if m is None:
            raise ScramRejected("Invalid SCRAM client first message format (only channel binding flag 'n', "
                                "a printable nonce without ',', names escaped with =2C and =3D)")
        extensions = dict(item.split("=", 1) for item in m["extensions"][1:].split(",")) if m["extensions"] else {}
        if extensions.get("tokenauth", "").lower() == "true":
            raise ScramRejected("Token Authentication failed: seglog has no delegation tokens")
        user = _saslname(m["saslname"])
        if m["authzid"] is not None and _saslname(m["authzid"]) != user:
            raise SaslAuthenticationError("Authentication failed: Client requested an authorization id that is "
                                          "different from username")
        credential = self._lookup(user)
        self.known_user = user if credential is not None else None
        if credential is None:
            credential = ScramCredential(hashlib.sha256(b"seglog" + user.encode()).digest(),
                                         os.urandom(hashlib.new(self._hash).digest_size),
                                         os.urandom(hashlib.new(self._hash).digest_size), DEFAULT_ITERATIONS)
        self._credential = credential
        self._nonce = m["nonce"] + base64.b64encode(os.urandom(24)).decode()
        self._client_first_bare = m["bare"]
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._gs2 = message[:m.start("bare")]
        self._state = "final"
        return self._server_first.encode()

    def _final(self, message: str) -> bytes:
        self._state = "done"
        m = CLIENT_FINAL.fullmatch(message)
        if m is None:
            raise ScramRejected("Invalid SCRAM client final message format")
        # Kafka 3.8.1-3.9 check only that the nonce ends with the server's: librdkafka before 2.6.1 sends the
        # client nonce twice (Kafka 4 wants the server's exactly and refuses those clients)
        if not m["nonce"].endswith(self._nonce):
            raise ScramRejected("Invalid client nonce in the final client message.")
        if base64.b64decode(m["binding"]) != self._gs2.encode():
            raise ScramRejected("Invalid channel binding in the final client message (not the gs2 header)")
        proof = base64.b64decode(m["proof"])
        auth_message = f"{self._client_first_bare},{self._server_first},{m['without_proof']}".encode()
        signature = hmac.digest(self._credential.stored_key, auth_message, self._hash)
        if len(proof) != len(signature):
            raise ScramRejected("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), self._credential.stored_key) \
                or self.known_user is None:
            raise ScramRejected("Invalid client credentials")
        self.user = self.known_user
        self.complete = True
        server_signature = hmac.digest(self._credential.server_key, auth_message, self._hash)
        return f"v={base64.b64encode(server_signature).decode()}".encode()


class ScramClient:
    """The client side (seglog's own connections): ``first()``, ``final(server_first)``, ``verify(server_final)``."""

    def __init__(self, mechanism: str, user: str, password: str):
        self.mechanism, self._hash = mechanism, HASHES[mechanism]
        self._user = user.replace("=", "=3D").replace(",", "=2C")
        self._password = password.encode()
        self._nonce = base64.b64encode(os.urandom(24)).decode()

    def first(self) -> bytes:
        self._bare = f"n={self._user},r={self._nonce}"
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attrs = _attributes(text)
        if not attrs.get("r", "").startswith(self._nonce) or "s" not in attrs or "i" not in attrs:
            raise SaslAuthenticationError(f"bad SCRAM server-first message")
        iterations = int(attrs["i"])
        check_iterations(iterations)
        salted = salted_password(self.mechanism, self._password, base64.b64decode(attrs["s"]), iterations)
        without_proof = f"c=biws,r={attrs['r']}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", self._hash)
        signature = hmac.digest(hashlib.new(self._hash, client_key).digest(), auth_message, self._hash)
        self._expected = hmac.digest(hmac.digest(salted, b"Server Key", self._hash), auth_message, self._hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = _attributes(server_final.decode())
        if "v" not in attrs or not hmac.compare_digest(base64.b64decode(attrs["v"]), self._expected):
            raise SaslAuthenticationError("the server's SCRAM signature does not verify")

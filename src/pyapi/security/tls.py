"""TLS contexts from Kafka's ssl.* settings (PEM only), and the principal of a client certificate.

Key and certificate chain, one of: ``ssl.keystore.location`` (``ssl.keystore.type=PEM``: a PEM file holding the
private key and the certificate chain; ``ssl.key.password`` if the key is encrypted), ``ssl.keystore.key`` +
``ssl.keystore.certificate.chain`` (the PEM text itself, Kafka's inline PEM options), or seglog's (librdkafka's
names) ``ssl.key.location`` + ``ssl.certificate.location``. Trusted CAs: ``ssl.truststore.location`` (PEM file)
or ``ssl.truststore.certificates`` (PEM text). ``ssl.client.auth``: none, requested (a certificate is checked if
the client sends one) or required. TLS 1.2 is the oldest version accepted.

The principal of an authenticated client certificate is ``ssl.principal.mapping.rules`` applied to its subject
DN in RFC 2253 form (most specific first, as Java's X500Principal.getName()): DEFAULT keeps the whole DN,
``RULE:pattern/replacement/[LU]`` rewrites a DN the pattern matches (Kafka's syntax, ``$1`` for groups).
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from typing import Callable

from ..errors import InvalidConfigError
from .protocols import listener_setting

_DN_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
                "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
                "domainComponent": "DC", "userId": "UID"}


Setting = Callable[[str], str]
"""A Kafka ssl.* setting's value by name ("" when unset): a broker listener's or a client's."""


def broker_setting(config, listener: str) -> Setting:
    """The ssl.* settings of one listener of a BrokerConfig (its listener.name.<l>. overrides first)."""
    return lambda name: listener_setting(config, listener, name)


def _load_key_pair(ctx: ssl.SSLContext, s: Setting, where: str, required: bool) -> bool:
    """Load the key and certificate chain into ctx; False if none is configured (an error if `required`).
    `where` names the listener in errors."""
    password = s("ssl.key.password") or s("ssl.keystore.password") or None
    try:
        if s("ssl.keystore.location"):
            ctx.load_cert_chain(s("ssl.keystore.location"), password=password)
        elif s("ssl.keystore.key") or s("ssl.keystore.certificate.chain"):
            if not (s("ssl.keystore.key") and s("ssl.keystore.certificate.chain")):
                raise InvalidConfigError(f"ssl.keystore.key and ssl.keystore.certificate.chain go together{where}")
            with tempfile.TemporaryDirectory(prefix="seglog-pem-") as d:   # load_cert_chain reads files only
                path = os.path.join(d, "keystore.pem")
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write(s("ssl.keystore.key").strip() + "\n" + s("ssl.keystore.certificate.chain").strip() + "\n")
                ctx.load_cert_chain(path, password=password)
        elif s("ssl.key.location") or s("ssl.certificate.location"):
            if not (s("ssl.key.location") and s("ssl.certificate.location")):
                raise InvalidConfigError(f"ssl.key.location and ssl.certificate.location go together{where}")
            ctx.load_cert_chain(s("ssl.certificate.location"), s("ssl.key.location"), password=password)
        elif required:
            raise InvalidConfigError(f"a TLS listener{where} needs a key and certificate: ssl.keystore.location "
                                     f"(PEM), ssl.keystore.key + ssl.keystore.certificate.chain, or ssl.key.location "
                                     f"+ ssl.certificate.location")
        else:
            return False
    except (OSError, ssl.SSLError) as e:
        raise InvalidConfigError(f"cannot load the TLS key and certificate{where}: {e}") from None
    return True


def _load_trust(ctx: ssl.SSLContext, s: Setting) -> bool:
    try:
        location = s("ssl.truststore.location")
        if location and os.path.isdir(location):         # a directory of hashed CA files (c_rehash)
            ctx.load_verify_locations(capath=location)
        elif location:
            ctx.load_verify_locations(cafile=location)
        elif s("ssl.truststore.certificates"):
            ctx.load_verify_locations(cadata=s("ssl.truststore.certificates"))
        else:
            return False
    except (OSError, ssl.SSLError) as e:
        raise InvalidConfigError(f"cannot load the TLS trust store: {e}") from None
    return True


def server_context(config, listener: str) -> ssl.SSLContext:
    """The server SSLContext of one listener (InvalidConfigError if its files do not load)."""
    s = broker_setting(config, listener)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_key_pair(ctx, s, f" (listener {listener})", required=True)
    client_auth = s("ssl.client.auth").lower()
    trusted = _load_trust(ctx, s)
    if client_auth != "none":
        if not trusted:
            raise InvalidConfigError(f"ssl.client.auth={client_auth} (listener {listener}) needs a trust store: "
                                     f"ssl.truststore.location or ssl.truststore.certificates")
        ctx.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    return ctx


def client_context(s: Setting, *, check_hostname: bool, verify: bool = True, where: str = "") -> ssl.SSLContext:
    """A client SSLContext (inter-broker connections, seglog's own clients): the trust store verifies the
    server (the system's CAs without one; nothing at all when not `verify`), `check_hostname` checks its
    host name, and a configured key pair is offered as the client certificate."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif not _load_trust(ctx, s):
        ctx.load_default_certs()
    if verify:
        ctx.check_hostname = check_hostname
    _load_key_pair(ctx, s, where, required=False)
    return ctx


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" "):
        out = out[:-1] + "\\ "
    return out


def subject_dn(cert: dict) -> str:
    """The subject of a certificate (ssl.SSLSocket.getpeercert()) in RFC 2253 form: CN=alice,OU=eng,O=acme."""
    rdns = []
    for rdn in reversed(cert.get("subject", ())):
        rdns.append("+".join(f"{_DN_KEYWORDS.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


_RULE = re.compile(r"\s*((DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?)|(.*?))\s*(?:[,\n]\s*|$)")


def parse_mapping_rules(text: str) -> list[tuple[re.Pattern, str, str] | None]:
    """ssl.principal.mapping.rules as a list of (pattern, replacement, case) rules, None for DEFAULT."""
    rules: list[tuple[re.Pattern, str, str] | None] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _RULE.match(text, pos)
        if m is None or m.end() == pos or m.group(6):
            raise InvalidConfigError(f"Invalid value {text!r} for configuration ssl.principal.mapping.rules: "
                                     f"expected DEFAULT or RULE:pattern/replacement/[LU] at {text[pos:]!r}")
        pos = m.end()
        if m.group(2):
            rules.append(None)
            continue
        try:
            pattern = re.compile(m.group(3).replace("\\/", "/"))
        except re.error as e:
            raise InvalidConfigError(f"Invalid pattern in ssl.principal.mapping.rules: {e}") from None
        replacement = re.sub(r"\$(\d+)", r"\\g<\1>", m.group(4).replace("\\/", "/"))
        rules.append((pattern, replacement, m.group(5)))
    return rules or [None]


def principal_name(dn: str, rules) -> str:
    """The principal name of a DN under parsed mapping rules (the first rule that applies wins; the DN
    itself if none does, as Kafka's DEFAULT)."""
    for rule in rules:
        if rule is None:
            return dn
        pattern, replacement, case = rule
        if pattern.fullmatch(dn):
            name = pattern.sub(replacement, dn)
            return name.lower() if case == "L" else name.upper() if case == "U" else name
    return dn

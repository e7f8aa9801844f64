"""How seglog's own connections secure themselves: :class:`ClientSecurity`, parsed once from Kafka client
settings (seglog.connect's ``security=``, the CLI's ``--command-config`` file) or, for a broker's connections
to the other brokers, from its inter-broker listener (:func:`inter_broker_security`).

Client settings (Java's names, and librdkafka's where they differ)::

    security.protocol                       PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL
    ssl.truststore.location                 CA certificates (PEM file, or a directory of hashed ones);
      (ssl.ca.location)                     the system's CAs without one
    ssl.truststore.certificates             the same as PEM text
    ssl.truststore.type, ssl.keystore.type  PEM only
    ssl.keystore.location                   client key + certificate chain in one PEM file, or
    ssl.certificate.location + ssl.key.location  apart (librdkafka), or
    ssl.keystore.key + ssl.keystore.certificate.chain  as PEM text; ssl.key.password if the key is encrypted
    ssl.endpoint.identification.algorithm   https (default: the certificate must name the host) or empty
    enable.ssl.certificate.verification     true (default); false accepts any certificate (librdkafka)
    sasl.mechanism (sasl.mechanisms)        PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
    sasl.username + sasl.password           the credentials (librdkafka), or
    sasl.jaas.config                        Java's: '...PlainLoginModule required username="u" password="p";'

Invariants: an unknown name, a bad value, or a setting its protocol does not use (ssl.* without SSL, sasl.*
without SASL) is an InvalidConfigError naming it, before any connection is made; a TLS protocol always has an
SSLContext and a SASL protocol always has a mechanism, user and password. Passwords never appear in errors or
in ``repr``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from ..errors import InvalidConfigError
from .protocols import SECURITY_PROTOCOLS, SecurityProtocol
from .sasl import client_credentials, parse_jaas
from .scram import HASHES

if TYPE_CHECKING:
    import ssl

__all__ = ["ClientSecurity", "PLAINTEXT", "inter_broker_security", "is_security_setting"]

MECHANISMS = ("PLAIN", *HASHES)
LOGIN_MODULES = {"PLAIN": "PlainLoginModule", "SCRAM-SHA-256": "ScramLoginModule",
                 "SCRAM-SHA-512": "ScramLoginModule"}

SSL_SETTINGS = ("ssl.truststore.location", "ssl.ca.location", "ssl.truststore.certificates", "ssl.truststore.type",
                "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
                "ssl.certificate.location", "ssl.key.location", "ssl.keystore.key", "ssl.keystore.certificate.chain",
                "ssl.endpoint.identification.algorithm", "enable.ssl.certificate.verification")
SASL_SETTINGS = ("sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password", "sasl.jaas.config")
SETTINGS = ("security.protocol", *SSL_SETTINGS, *SASL_SETTINGS)
SECRET = frozenset({"ssl.keystore.password", "ssl.key.password", "ssl.keystore.key", "sasl.password",
                    "sasl.jaas.config"})


def is_security_setting(name: str) -> bool:
    """Whether a client property is ClientSecurity's to parse (security.protocol, ssl.*, sasl.*), as opposed
    to a producer's, consumer's or admin's."""
    return name in SETTINGS or name.startswith(("ssl.", "sasl.", "security."))


@dataclass(frozen=True)
class ClientSecurity(SecurityProtocol):
    """A connection's security: ``protocol`` and, as it needs them, ``ssl_context`` and SASL ``mechanism``,
    ``username``, ``password``. Immutable; share one among all the connections of a client."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = field(default=None, compare=False)
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @classmethod
    def of(cls, security: "ClientSecurity | Mapping[str, object] | None") -> "ClientSecurity":
        """`security` as a ClientSecurity: itself, parsed from a mapping of settings, PLAINTEXT for None."""
        if security is None:
            return PLAINTEXT
        if isinstance(security, ClientSecurity):
            return security
        if isinstance(security, Mapping):
            return cls.from_properties(security)
        raise InvalidConfigError(f"security must be a mapping of Kafka client settings (security.protocol, ssl.*, "
                                 f"sasl.*) or a ClientSecurity, not {type(security).__name__}")

    @classmethod
    def from_properties(cls, properties: Mapping[str, object]) -> "ClientSecurity":
        """Parse Kafka client settings (see the module docstring); InvalidConfigError for anything wrong."""
        props = {}
        for name, value in properties.items():
            if name not in SETTINGS:
                raise InvalidConfigError(f"Unknown client security setting {name!r} (known: {', '.join(SETTINGS)})")
            if value is None or not isinstance(value, (str, bool)):
                raise InvalidConfigError(f"Invalid value for configuration {name}: expected a string"
                                         + ("" if name in SECRET else f", not {value!r}"))
            props[name] = str(value).lower() if isinstance(value, bool) else value
        protocol = props.pop("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise InvalidConfigError(f"Invalid value {protocol!r} for configuration security.protocol: expected one "
                                     f"of {', '.join(SECURITY_PROTOCOLS)}")
        unused = [n for n in props if (n in SSL_SETTINGS and "SSL" not in protocol)
                  or (n in SASL_SETTINGS and "SASL" not in protocol)]
        if unused:
            raise InvalidConfigError(f"{', '.join(sorted(unused))} given, but security.protocol is {protocol}, which "
                                     f"does not use {'them' if len(unused) > 1 else 'it'}")
        for java, librdkafka in (("ssl.truststore.location", "ssl.ca.location"),
                                 ("sasl.mechanism", "sasl.mechanisms")):
            if java in props and librdkafka in props:
                raise InvalidConfigError(f"{java} and {librdkafka} name the same setting: give one")
            if librdkafka in props:
                props[java] = props.pop(librdkafka)
        context = _context(props) if "SSL" in protocol else None
        if "SASL" not in protocol:
            return cls(protocol, context)
        mechanism, username, password = _sasl(props)
        return cls(protocol, context, mechanism, username, password)


PLAINTEXT = ClientSecurity()


def _context(props: dict[str, str]) -> "ssl.SSLContext":
    from .tls import client_context             # ssl is imported only by the connections that use it
    for name in ("ssl.truststore.type", "ssl.keystore.type"):
        if props.get(name, "PEM").strip().upper() != "PEM":
            raise InvalidConfigError(f"Invalid value {props[name]!r} for configuration {name}: seglog reads PEM only")
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("https", "", "none"):
        raise InvalidConfigError(f"Invalid value {algorithm!r} for configuration ssl.endpoint.identification."
                                 f"algorithm: expected https or an empty value (no host name check)")
    verify = props.get("enable.ssl.certificate.verification", "true").strip().lower()
    if verify not in ("true", "false"):
        raise InvalidConfigError(f"Invalid value {verify!r} for configuration enable.ssl.certificate.verification: "
                                 f"expected true or false")
    return client_context(lambda name: props.get(name, ""), check_hostname=algorithm == "https",
                          verify=verify == "true")


def _sasl(props: dict[str, str]) -> tuple[str, str, str]:
    mechanism = props.get("sasl.mechanism", "").strip().upper()
    if mechanism not in MECHANISMS:
        raise InvalidConfigError(f"Invalid value {mechanism!r} for configuration sasl.mechanism: seglog's clients "
                                 f"use {', '.join(MECHANISMS)}" if mechanism else
                                 f"a SASL security.protocol needs sasl.mechanism ({', '.join(MECHANISMS)})")
    plain = "sasl.username" in props or "sasl.password" in props
    if plain and "sasl.jaas.config" in props:
        raise InvalidConfigError("give either sasl.username + sasl.password or sasl.jaas.config, not both")
    if "sasl.jaas.config" in props:
        module, options = parse_jaas(props["sasl.jaas.config"])
        if module.rsplit(".", 1)[-1] != LOGIN_MODULES[mechanism]:
            raise InvalidConfigError(f"sasl.jaas.config: {mechanism} logs in with {LOGIN_MODULES[mechanism]}, "
                                     f"not {module}")
        username, password = options.get("username"), options.get("password")
    else:
        username, password = props.get("sasl.username"), props.get("sasl.password")
    if not username or not password:
        raise InvalidConfigError(f"SASL ({mechanism}) needs a user and a password: sasl.username and "
                                 f"sasl.password, or username=\"...\" password=\"...\" in sasl.jaas.config")
    return mechanism, username, password


def inter_broker_security(config) -> ClientSecurity:
    """The security a broker's connections to the other brokers use (replica fetches, transaction markers and
    verification): the inter-broker listener's protocol; for TLS its trust store and key pair (the
    listener's ssl.* overrides first) and its ssl.endpoint.identification.algorithm; for SASL
    sasl.mechanism.inter.broker.protocol with the listener's JAAS username and password."""
    from .listeners import broker_listeners, inter_broker_listener
    from .tls import broker_setting, client_context
    listener = inter_broker_listener(config, broker_listeners(config))
    context = None
    if listener.tls:
        s = broker_setting(config, listener.name)
        algorithm = s("ssl.endpoint.identification.algorithm").strip().lower()
        if algorithm not in ("https", ""):
            raise InvalidConfigError(f"Invalid value {algorithm!r} for configuration ssl.endpoint.identification."
                                     f"algorithm (listener {listener.name}): expected https or an empty value")
        context = client_context(s, check_hostname=algorithm == "https", where=f" (listener {listener.name})")
    if not listener.sasl:
        return ClientSecurity(listener.protocol, context)
    return ClientSecurity(listener.protocol, context, *client_credentials(config, listener.name))

"""Security protocols and per-listener settings: what every part of seglog.security and the broker config read
(the leaf of the package: it imports nothing of seglog but the errors).

``SECURITY_PROTOCOLS`` are Kafka's four; ``SecurityProtocol`` says what one asks of a connection;
``parse_listeners`` reads a listeners value; ``listener_setting`` a setting of one listener
(``listener.name.<listener>.<setting>`` over the broker-wide value).
"""

from __future__ import annotations

from typing import Mapping

from ..errors import InvalidConfigError

__all__ = ["SECURITY_PROTOCOLS", "SecurityProtocol", "parse_listeners", "listener_setting"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class SecurityProtocol:
    """What a security ``protocol`` (one of config.SECURITY_PROTOCOLS) asks of a connection: TLS (SSL,
    SASL_SSL), SASL authentication (SASL_PLAINTEXT, SASL_SSL). Shared by a listener and a client's settings."""

    protocol: str

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def parse_listeners(text: str, name: str = "listeners", *, advertised: bool = False,
                    protocol_map: Mapping[str, str] | None = None) -> list[tuple[str, str, int]]:
    """[(listener name, host, port), ...] of a Kafka listeners value ``NAME://host:port,...`` (``host:port``
    alone is taken as PLAINTEXT; an empty host binds every interface; port 0 picks a free one). Each name must
    be in `protocol_map` (listener.security.protocol.map; Kafka's default maps the four protocol names to
    themselves). InvalidConfigError for a name given twice, an unknown name, a port outside 0..65535."""
    entries = [e.strip() for e in text.split(",") if e.strip()]
    protocol_map = protocol_map if protocol_map is not None else {p: p for p in SECURITY_PROTOCOLS}

    def bad(why: str) -> InvalidConfigError:
        return InvalidConfigError(f"Invalid value {text!r} for configuration {name}: {why}")

    if not entries:
        raise bad("no listener given (expected PLAINTEXT://host:port)")
    out = []
    for entry in entries:
        listener, sep, address = entry.partition("://")
        if not sep:
            listener, address = "PLAINTEXT", entry
        listener = listener.upper()
        if listener not in protocol_map:
            raise bad(f"unknown listener name {listener} (not in listener.security.protocol.map)")
        host, colon, port = address.rpartition(":")
        if not colon or not port.isdigit():
            raise bad(f"{entry!r} is not {listener}://host:port")
        if host.startswith("[") != host.endswith("]") or ("/" in host) or (":" in host and not host.startswith("[")):
            raise bad(f"{entry!r}: bad host {host!r} (IPv6 addresses go in brackets: [::1])")
        low = 1 if advertised else 0
        if not low <= int(port) <= 65535:
            raise bad(f"port {port} is not in {low}..65535")
        if any(listener == seen for seen, _, _ in out):
            raise bad(f"listener name {listener} is given twice (each listener needs its own name)")
        out.append((listener, host.strip("[]"), int(port)))
    return out


def listener_setting(config, listener: str, kafka_name: str) -> str:
    """`kafka_name`'s value for one listener: ``listener.name.<listener>.<kafka_name>`` if set, else the
    broker-wide setting."""
    key = f"listener.name.{listener.lower()}.{kafka_name}"
    for name, value in config.listener_overrides:
        if name == key:
            return value
    return getattr(config, kafka_name.replace(".", "_"))

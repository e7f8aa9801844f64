"""A broker's listeners as Kafka configures them.

``listeners=SASL_SSL://:9093,INTERNAL://10.0.0.1:9094`` names each listener; ``listener.security.protocol.map``
gives its security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL); ``advertised.listeners`` (default:
``listeners``) what Metadata tells clients of that listener; ``inter.broker.listener.name`` (or
``security.inter.broker.protocol``, the listener of that name) the one brokers use to reach each other.
``listener.name.<name>.<setting>`` overrides any TLS or SASL setting for one listener (Kafka's prefix).

A listener is served exactly as configured: a TLS listener without a key and certificate, or a SASL listener
with no usable mechanism, is a configuration error, never a listener served in plaintext.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidConfigError
from .protocols import SECURITY_PROTOCOLS, SecurityProtocol, listener_setting, parse_listeners
from .sasl import client_credentials

SERVED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class Listener(SecurityProtocol):
    """One configured listener: its name, security protocol, bind address and advertised address."""

    name: str
    protocol: str
    host: str
    port: int
    advertised_host: str
    advertised_port: int          # 0 until bound when the port is 0 (then the bound port is advertised)


def protocol_map(config) -> dict[str, str]:
    """listener.security.protocol.map as {listener name: security protocol}."""
    out = {}
    for item in config.listener_security_protocol_map.split(","):
        if not item.strip():
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise InvalidConfigError(f"Invalid value {config.listener_security_protocol_map!r} for configuration "
                                     f"listener.security.protocol.map: {item.strip()!r} is not NAME:PROTOCOL with "
                                     f"PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}")
        out[name] = protocol
    return out


def mechanisms(config, listener: str) -> tuple[str, ...]:
    """sasl.enabled.mechanisms of a listener, upper case, checked against what seglog serves."""
    raw = listener_setting(config, listener, "sasl.enabled.mechanisms")
    out = tuple(m.strip().upper() for m in raw.split(",") if m.strip())
    unknown = [m for m in out if m not in SERVED_MECHANISMS]
    if unknown or not out:
        raise InvalidConfigError(f"Invalid value {raw!r} for configuration sasl.enabled.mechanisms (listener "
                                 f"{listener}): seglog serves {', '.join(SERVED_MECHANISMS)}"
                                 + (f", not {', '.join(unknown)}" if unknown else ""))
    return out


def broker_listeners(config) -> list[Listener]:
    """Every listener of a BrokerConfig, checked (InvalidConfigError naming the setting otherwise)."""
    pmap = protocol_map(config)
    bound = parse_listeners(config.listeners, "listeners", protocol_map=pmap)
    advertised = {}
    if config.advertised_listeners:
        for name, host, port in parse_listeners(config.advertised_listeners, "advertised.listeners", advertised=True,
                                                protocol_map=pmap):
            if name not in {b[0] for b in bound}:
                raise InvalidConfigError(f"Invalid value {config.advertised_listeners!r} for configuration "
                                         f"advertised.listeners: listener {name} is not in listeners")
            advertised[name] = (host, port)
    out = []
    for name, host, port in bound:
        ahost, aport = advertised.get(name, (host, port))
        listener = Listener(name, pmap[name], host, port, ahost, aport)
        if listener.sasl:
            mechanisms(config, name)
        if listener.tls:
            from .tls import server_context
            server_context(config, name)            # the key, certificates and trust store load, or an error now
        out.append(listener)
    if config.zookeeper_connect:
        inter = inter_broker_listener(config, out)
        if inter.sasl:
            client_credentials(config, inter.name)      # the broker's own user and password are there, or an error now
    from .tls import parse_mapping_rules
    parse_mapping_rules(config.ssl_principal_mapping_rules)
    return out


def inter_broker_listener(config, listeners: list[Listener]) -> Listener:
    """The listener brokers use to reach each other: inter.broker.listener.name, else the listener named as
    security.inter.broker.protocol; it must be one of `listeners` (Kafka: "must be a listener name defined in
    advertised.listeners")."""
    name = (config.inter_broker_listener_name or config.security_inter_broker_protocol).upper()
    for listener in listeners:
        if listener.name == name:
            return listener
    which = "inter.broker.listener.name" if config.inter_broker_listener_name else "security.inter.broker.protocol"
    raise InvalidConfigError(f"Invalid value {name!r} for configuration {which}: the inter-broker listener must be "
                             f"one of listeners ({', '.join(li.name for li in listeners)})")

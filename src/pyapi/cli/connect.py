"""How a command gets its Admin: the data dir's (``--data-dir``) or the broker's (``--bootstrap-server``,
secured by the client settings of ``--command-config``)."""

from __future__ import annotations

from ..config import read_properties
from ..security.client import ClientSecurity, is_security_setting
from .admin import Admin
from .broker_admin import BrokerAdmin
from .common import UsageError, err
from .datadir import DataDirAdmin

__all__ = ["connect", "command_settings"]


def command_settings(args) -> dict[str, str]:
    """The client settings of ``--command-config`` (none without it); UsageError with --data-dir, which
    connects to nothing."""
    path = getattr(args, "command_config", None)
    if path is None:
        return {}
    if not getattr(args, "bootstrap_server", None):
        raise UsageError("--command-config goes with --bootstrap-server (a data dir needs no client settings)")
    return read_properties(path)


def split_security(settings: dict[str, str]) -> tuple[ClientSecurity, dict[str, str]]:
    """(the security of `settings`' security.protocol, ssl.* and sasl.* entries, the other entries)."""
    security = ClientSecurity.from_properties({k: v for k, v in settings.items() if is_security_setting(k)})
    return security, {k: v for k, v in settings.items() if not is_security_setting(k)}


def connect(args, *, create: bool = False, client_id: str = "seglog-cli",
            security: ClientSecurity | None = None) -> Admin:
    """The Admin for a command's ``--data-dir`` / ``--bootstrap-server`` arguments. ``create``: make the
    data dir if it does not exist (topic creation); otherwise a missing data dir is an error. A broker that
    does not answer fails at once (NetworkError). ``security``: given by a command that reads client
    settings of its own (produce, consume); otherwise those of ``--command-config``, whose other settings
    are reported as Kafka's tools report them and ignored."""
    settings = command_settings(args)
    servers = getattr(args, "bootstrap_server", None)
    if servers:
        if security is None:
            security, others = split_security(settings)
            for name in sorted(others):
                err(f"WARN The configuration '{name}' was supplied but isn't a known config.")
        return BrokerAdmin(servers, client_id=client_id, security=security)
    return DataDirAdmin(args.data_dir, create=create)

"""How a command gets its Admin: the data dir's (``--data-dir``) or the broker's (``--bootstrap-server``)."""

from __future__ import annotations

from .broker_admin import BrokerAdmin
from .admin import Admin
from .datadir import DataDirAdmin

__all__ = ["connect"]


def connect(args, *, create: bool = False, client_id: str = "seglog-cli") -> Admin:
    """The Admin for a command's ``--data-dir`` / ``--bootstrap-server`` arguments. ``create``: make the
    data dir if it does not exist (topic creation); otherwise a missing data dir is an error. A broker that
    does not answer fails at once (NetworkError)."""
    servers = getattr(args, "bootstrap_server", None)
    if servers:
        return BrokerAdmin(servers, client_id=client_id)
    return DataDirAdmin(args.data_dir, create=create)

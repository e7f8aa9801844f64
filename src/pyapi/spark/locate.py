"""The catalog a reader's location names: above both catalogs, so neither imports the other."""

from __future__ import annotations

from .broker import BrokerCatalog
from .catalog import Catalog, DataDir
from .options import Location

__all__ = ["open_catalog"]


def open_catalog(location: Location, read_committed: bool = False) -> Catalog:
    """A DataDir (``path``) or a BrokerCatalog (``kafka.bootstrap.servers``); with read_committed, partitions
    end at their last stable offset. Raises NotADataDirError / BrokerUnavailableError when it cannot be
    reached."""
    if location.broker_mode:
        return BrokerCatalog(location.bootstrap_servers, location.request_timeout_ms, read_committed,
                             location.security)
    return DataDir(location.path, read_committed)

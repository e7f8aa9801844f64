"""LogDirs: the log directories of a node (Kafka's ``log.dirs``, the directory side of its LogManager).

``log.dirs`` is a comma-separated list (or a list) of directories. Each one has its own ``.lock`` (held by the
process that opened the node) and ``meta.properties`` (cluster.id, broker.id), which must agree across the
directories as Kafka requires (InconsistentBrokerMetadataException) and with the configured broker.id
(InconsistentBrokerIdException). A partition's log lives in exactly one directory as ``<topic>-<p>``; found in
two at start it is refused, as Kafka refuses to start. While a replica moves to another directory
(AlterReplicaLogDirs) its copy is ``<topic>-<p>.<id>-future`` there; a deleted log waits as
``<topic>-<p>.<id>-delete`` until it is removed. Layout of each directory::

    meta.properties          the same cluster.id and broker.id in every directory
    .lock                    held by the process that owns the node
    <topic>-<p>/             current logs (seglog.Log)
    <topic>-<p>.<id>-future/ a replica being moved here (seglog.log_dir_mover)
    <topic>-<p>.<id>-delete/ removed at the next start, or in the background

New partitions go to the directory holding the fewest logs, current and future counted (ties: the first listed),
unless AlterReplicaLogDirs named one for the partition first (Kafka's preferred log dir). The first directory
also keeps what belongs to the node rather than to a partition (topics.json, producer ids, ACLs, quotas).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import threading
import uuid
from typing import Iterable, Mapping

from .checkpoints import fsync_dir, lock_directory, storage_errors
from .errors import InconsistentClusterIdError, InvalidConfigError, StorageError

__all__ = ["LogDirs", "parse_log_dirs", "read_meta_properties", "future_dir_name", "delete_dir_name",
           "PARTITION_DIR", "FUTURE_DIR", "DELETED_DIR"]

PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
DELETED_DIR = re.compile(r"^.+-\d+\.[0-9a-f]{32}-delete$")
FUTURE_DIR = re.compile(r"^(.+)-(\d+)\.[0-9a-f]{32}-future$")
META_FILE = "meta.properties"
_OPEN_DIRS: set[str] = set()          # real paths of the log directories Nodes of this process hold
_OPEN_LOCK = threading.Lock()


def parse_log_dirs(value: str | os.PathLike | Iterable[str | os.PathLike]) -> list[str]:
    """The absolute log directories of a ``log.dirs`` value (comma-separated, or a list), in order.
    InvalidConfigError for none, or for one named twice."""
    if isinstance(value, (str, os.PathLike)):
        value = os.fspath(value)
        items = [v.strip() for v in value.split(",")] if "," in value else [value]
    else:
        items = [os.fspath(v).strip() for v in value]
    dirs = [os.path.abspath(os.path.expanduser(d)) for d in items if d]
    if not dirs:
        raise InvalidConfigError("log.dirs names no directory")
    seen = set()
    for d in dirs:
        real = os.path.realpath(d)
        if real in seen:
            raise InvalidConfigError(f"Duplicate log directory found: {', '.join(dirs)}")
        seen.add(real)
    return dirs


def read_meta_properties(data_dir: str | os.PathLike) -> dict[str, str]:
    """The key=value pairs of ``<data_dir>/meta.properties`` (broker.id, cluster.id, version); {} when there
    is none. StorageError when it cannot be read."""
    path = os.path.join(data_dir, META_FILE)
    props: dict[str, str] = {}
    if os.path.exists(path):
        with storage_errors("cannot read meta.properties", path), open(path, encoding="utf-8") as f:
            for line in f:
                if "=" in line and not line.startswith("#"):
                    k, v = line.strip().split("=", 1)
                    props[k.strip()] = v.strip()
    return props


def future_dir_name(topic: str, partition: int) -> str:
    """Kafka's UnifiedLog.logFutureDirName: ``<topic>-<p>.<32 hex>-future``."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}-future"


def delete_dir_name(topic: str, partition: int) -> str:
    """Kafka's UnifiedLog.logDeleteDirName: ``<topic>-<p>.<32 hex>-delete``."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}-delete"


class LogDirs:
    """The locked log directories of one node: their meta.properties, what they hold, and where a new
    partition goes. ``dirs[0]`` is the node's home (see the module docstring)."""

    def __init__(self, dirs: list[str], broker_id: int):
        self.dirs = list(dirs)
        self.broker_id = broker_id
        self._fds: dict[str, int] = {}
        self.preferred: dict[tuple[str, int], str] = {}     # AlterReplicaLogDirs for a partition not hosted yet
        for d in self.dirs:
            try:
                os.makedirs(d, exist_ok=True)
            except OSError as e:
                self.release()
                raise StorageError(f"cannot create data directory: {e.strerror}", d, e.errno) from None
        try:
            for d in self.dirs:
                self._lock(d)
        except BaseException:
            self.release()
            raise

    @property
    def home(self) -> str:
        return self.dirs[0]

    def _lock(self, d: str) -> None:
        key = os.path.realpath(d)
        with _OPEN_LOCK:
            if key in _OPEN_DIRS:
                raise StorageError("data directory is already open in this process (a Node or a broker of "
                                   "this process holds it: use that one, or close it first)", d)
            self._fds[key] = lock_directory(d, "data directory is in use by another process (a running broker?); "
                                               "use --bootstrap-server to reach it")
            _OPEN_DIRS.add(key)

    def release(self) -> None:
        """Drop every directory lock (idempotent)."""
        with _OPEN_LOCK:
            for key, fd in self._fds.items():
                os.close(fd)
                _OPEN_DIRS.discard(key)
            self._fds.clear()

    def find(self, path: str) -> str | None:
        """The log directory `path` names (compared as real paths), or None."""
        real = os.path.realpath(path)
        return next((d for d in self.dirs if os.path.realpath(d) == real), None)

    # -- meta.properties ------------------------------------------------------------------------------------

    def meta_properties(self) -> tuple[str | None, bool]:
        """(cluster.id, whether it was stored before) after checking every directory's meta.properties: a
        stored broker.id other than the configured one is refused with InvalidConfigError, directories that
        disagree with InconsistentClusterIdError, both before anything is written. Directories without the
        file (new ones) or without broker.id get it: the stored cluster.id, else None (left to the caller)."""
        found = {d: read_meta_properties(d) for d in self.dirs}
        for d, props in found.items():
            stored = props.get("broker.id")
            if stored is not None and not (stored.isdecimal() and int(stored) == self.broker_id):
                raise InvalidConfigError(
                    f"Configured broker.id {self.broker_id} doesn't match stored broker.id {stored} in "
                    f"{os.path.join(d, META_FILE)}. If you moved your data, make sure your configured broker.id "
                    f"matches. If you intend to create a new broker, you should remove all data in your data "
                    f"directories (log.dirs).")
        ids = {d: p["cluster.id"] for d, p in found.items() if "cluster.id" in p}
        if len(set(ids.values())) > 1:
            listing = "".join(f"- {d} -> cluster.id={c}\n" for d, c in ids.items())
            raise InconsistentClusterIdError(
                "BrokerMetadata is not consistent across log.dirs. This could happen if multiple brokers shared a "
                f"log directory (log.dirs) or partial data was manually copied from another broker. Found:\n{listing}")
        cluster_id = next(iter(ids.values()), None)
        if cluster_id is not None:
            for d, props in found.items():
                if props.get("cluster.id") != cluster_id or "broker.id" not in props:
                    self._write_meta(d, cluster_id)
        return cluster_id, cluster_id is not None

    def new_cluster_id(self) -> str:
        """Make up a cluster id (a lone node's) and store it in every directory."""
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.write_cluster_id(cluster_id)
        return cluster_id

    def write_cluster_id(self, cluster_id: str) -> None:
        for d in self.dirs:
            self._write_meta(d, cluster_id)

    def _write_meta(self, d: str, cluster_id: str) -> None:
        path = os.path.join(d, META_FILE)
        props = {"version": "0", "broker.id": str(self.broker_id), "cluster.id": cluster_id}
        tmp = path + ".tmp"
        with storage_errors("cannot write meta.properties", path):
            with open(tmp, "w", encoding="utf-8") as f:
                f.write("#seglog\n" + "".join(f"{k}={v}\n" for k, v in props.items()))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        fsync_dir(d)

    # -- what the directories hold --------------------------------------------------------------------------

    def scan(self) -> tuple[dict[tuple[str, int], str], dict[tuple[str, int], str]]:
        """({(topic, p): its log directory}, {(topic, p): the path of its future log}) of every directory.
        Leftover ``-delete`` directories are removed. A future log without a current one is the end of a swap a
        crash interrupted (the current one was retired only once the future held every offset): it is renamed
        to be the current log. A future log in the directory of its current one is discarded. Raises
        StorageError for a partition found in two directories (current or future), as Kafka refuses to start."""
        current: dict[tuple[str, int], str] = {}
        futures: dict[tuple[str, int], str] = {}
        for d in self.dirs:
            with storage_errors("cannot list data directory", d):
                names = sorted(os.listdir(d))
            for name in names:
                full = os.path.join(d, name)
                if DELETED_DIR.match(name):
                    shutil.rmtree(full, ignore_errors=True)
                    continue
                if not os.path.isdir(full):
                    continue
                m = FUTURE_DIR.match(name) or PARTITION_DIR.match(name)
                if not m:
                    continue
                tp = (m.group(1), int(m.group(2)))
                found = futures if name.endswith("-future") else current
                if tp in found:
                    other = found[tp] if found is futures else os.path.join(found[tp], f"{tp[0]}-{tp[1]}")
                    raise StorageError(
                        f"Duplicate log directories for {tp[0]}-{tp[1]} are found in both {other} and {full}. It is "
                        f"likely because log directory failure happened while broker was replacing current replica "
                        f"with future replica. Recover broker from this failure by manually deleting one of the two "
                        f"directories for this partition. It is recommended to delete the partition in the log "
                        f"directory that is known to have failed recently.", full)
                found[tp] = full if found is futures else d
        for tp, path in list(futures.items()):
            parent = os.path.dirname(path)
            if current.get(tp) == parent:
                shutil.rmtree(self.retire(path), ignore_errors=True)
                del futures[tp]
            elif tp not in current:
                final = os.path.join(parent, f"{tp[0]}-{tp[1]}")
                with storage_errors("cannot promote a future log", path):
                    os.rename(path, final)
                fsync_dir(parent)
                current[tp] = parent
                del futures[tp]
        return current, futures

    def retire(self, path: str) -> str:
        """Rename a log directory to ``<topic>-<p>.<id>-delete`` (fsynced); its new path. Raises StorageError."""
        name = os.path.basename(path)
        m = FUTURE_DIR.match(name) or PARTITION_DIR.match(name)
        dst = os.path.join(os.path.dirname(path), delete_dir_name(m.group(1), int(m.group(2))))
        with storage_errors("cannot delete partition directory", path):
            os.rename(path, dst)
        fsync_dir(os.path.dirname(path))
        return dst

    def next_dir(self, tp: tuple[str, int], located: Mapping[tuple[str, int], str],
                 future_dirs: Iterable[str]) -> str:
        """Where a new log of `tp` goes: its preferred directory if AlterReplicaLogDirs named one, else the
        directory with the fewest logs (`located`: current logs' directories, `future_dirs`: future logs'),
        the first listed among equals (Kafka's LogManager.nextLogDirs)."""
        preferred = self.preferred.pop(tp, None)
        if preferred is not None:
            return preferred
        counts = dict.fromkeys(self.dirs, 0)
        for d in list(located.values()) + list(future_dirs):
            if d in counts:
                counts[d] += 1
        return min(self.dirs, key=lambda d: counts[d])

    def usage(self, d: str) -> tuple[int, int]:
        """(total bytes, usable bytes) of the file system holding `d`."""
        disk = shutil.disk_usage(d)
        return disk.total, disk.free

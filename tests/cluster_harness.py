"""Real-process helpers for replicated-cluster fault tests (tests/integration/test_cluster_faults.py) and the
cluster benchmark (bench/cluster.py).

- ``start_zookeeper(dir)``: the Debian ZooKeeper as a loopback process (seglog.cluster.zookeeper_server).
- ``Cluster(zk_connect, work_dir, n)``: N ``python -m seglog broker`` subprocesses on free ports, each with its
  own data dir and a log file (stdout + stderr, appended across restarts). ``BrokerProc`` can be killed with
  SIGKILL, paused with SIGSTOP/SIGCONT, stopped with SIGTERM and restarted on the same port and data dir.
- The cluster's state is read from ZooKeeper directly (kazoo): live brokers, controller and controller epoch,
  every partition's leader / leader epoch / ISR.
- ``Cluster(..., proxied=True)``: a TCP proxy in front of every broker (brokers advertise the proxy's address,
  so clients AND followers reach a broker only through it) and one in front of ZooKeeper per broker.
  ``isolate(id)`` cuts the broker off from everything (its inbound proxy, its ZooKeeper proxy, and its own
  connections through the other brokers' proxies, recognised by the owning process): traffic is silently
  dropped, as a partition does, so its ZooKeeper session expires. ``heal(id)`` closes the dead connections
  and lets new ones through. The real listener (127.0.0.1:port) stays reachable to the test, as a client on
  the isolated broker's side of the partition.
- ``Cluster(..., security={...})``: client settings (seglog.security.client) for the harness's own requests to
  the brokers, when their listener is TLS or SASL (the overrides configure it).
- ``Cluster(..., tmpfs_size="256m")``: every broker's data dir is a tmpfs of its own (root only), so
  ``faults.fill_disk(broker.data_dir)`` fills one broker's disk and ``faults.free_disk`` frees it.
- ``Cluster(..., disk_faults=True)``: every broker runs under helpers/failing_disk.py, so
  ``broker.fail_disk(errno.ENOSPC, ops)`` makes exactly those file calls of its process fail from that moment
  (``heal_disk()`` ends it), without root.
- ``replica_log(dir)`` / ``Cluster.wait_converged``: the batches of a partition directory's ``.log`` segments,
  parsed with struct (independently of seglog), compared byte for byte across replicas.

Nothing here imports pytest: failures raise AssertionError with the cluster state and broker log tails.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import signal
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

HOST = "127.0.0.1"
OFFSETS_TOPIC = "__consumer_offsets"

# Short timeouts so a failover takes seconds: a dead broker is noticed when its ZooKeeper session expires.
FAST_OVERRIDES = {
    "zookeeper.session.timeout.ms": 6000,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
    "leader.imbalance.check.interval.seconds": 2,
    "min.insync.replicas": 2,
    "default.replication.factor": 3,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 3,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 500,
    "auto.create.topics.enable": "false",
}


# -- small utilities --------------------------------------------------------------------------------------------

def free_port(host: str = HOST) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def seglog_env() -> dict:
    """The environment for subprocesses: they must import the same seglog as this process."""
    import seglog

    parent = os.path.dirname(os.path.dirname(os.path.abspath(seglog.__file__)))
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if parent not in paths:
        env["PYTHONPATH"] = os.pathsep.join([parent] + paths)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def wait_until(predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.1,
               details: Callable[[], str] | None = None):
    """Poll `predicate` until it returns something truthy (returned); AssertionError after `timeout` s."""
    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as e:                      # the cluster is in flux: keep polling
            last_error = e
        if time.monotonic() > deadline:
            msg = f"timed out after {timeout:.0f} s waiting for {what}"
            if last_error is not None:
                msg += f" (last error: {last_error!r})"
            if details is not None:
                msg += "\n" + details()
            raise AssertionError(msg)
        time.sleep(interval)


def start_zookeeper(data_dir, port: int | None = None, tick_time_ms: int = 500):
    """A started ZooKeeperServer (tickTime 500 ms allows sessions of 1-10 s). ``.stop()`` it."""
    from seglog.cluster.zookeeper_server import ZooKeeperServer

    server = ZooKeeperServer(Path(data_dir), port or free_port(), tick_time_ms=tick_time_ms)
    server.start()
    return server


# -- partition logs on disk ----------------------------------------------------------------------------------

_HEADER = 61


@dataclass(frozen=True)
class Batch:
    base_offset: int
    last_offset: int
    leader_epoch: int
    crc: int
    data: bytes

    @property
    def producer(self) -> tuple[int, int, int]:
        """(producer id, producer epoch, base sequence) from the batch header."""
        return struct.unpack_from(">qhi", self.data, 43)


@dataclass
class ReplicaLog:
    """The whole batches of one partition directory's segments, oldest first (a torn tail is left out)."""
    path: Path
    batches: list = field(default_factory=list)
    segments: list = field(default_factory=list)       # base offsets of the .log files

    @property
    def data(self) -> bytes:
        return b"".join(b.data for b in self.batches)

    @property
    def end_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else (self.segments[-1] if self.segments else 0)

    @property
    def start_offset(self) -> int:
        return self.batches[0].base_offset if self.batches else self.end_offset

    def records(self) -> list[tuple[int, bytes | None, bytes | None]]:
        """(offset, key, value) of every data record, decoded by kafka-python's own reader (CRC checked)."""
        from kafka.record.memory_records import MemoryRecords

        out = []
        for b in self.batches:
            mr = MemoryRecords(b.data)
            batch = mr.next_batch()
            assert batch.validate_crc(), f"{self.path}: bad CRC in batch at offset {b.base_offset}"
            if batch.is_control_batch:
                continue
            out.extend((r.offset, r.key, r.value) for r in batch)
        return out

    def summary(self) -> str:
        epochs: dict[int, list[int]] = {}
        for b in self.batches:
            epochs.setdefault(b.leader_epoch, [b.base_offset, b.last_offset])[1] = b.last_offset
        spans = ", ".join(f"e{e}:{lo}..{hi}" for e, (lo, hi) in epochs.items())
        return (f"{self.path}: offsets {self.start_offset}..{self.end_offset} in {len(self.batches)} batches, "
                f"{len(self.data)} B, segments {self.segments}; epochs {spans}")

    def headers(self) -> str:
        """One line per batch: offsets, leader epoch and the producer's id, epoch and base sequence, to read how
        a record came to be stored twice."""
        return "\n".join("%d..%d le=%d pid=%d pe=%d seq=%d" % (b.base_offset, b.last_offset, b.leader_epoch, *b.producer)
                         for b in self.batches)


def parse_batches(data: bytes) -> list[Batch]:
    out, pos = [], 0
    while pos + _HEADER <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        size = length + 12
        if size < _HEADER or pos + size > len(data) or data[pos + 16] != 2:
            break
        epoch, = struct.unpack_from(">i", data, pos + 12)
        crc, = struct.unpack_from(">I", data, pos + 17)
        delta, = struct.unpack_from(">i", data, pos + 23)
        out.append(Batch(base, base + delta, epoch, crc, bytes(data[pos:pos + size])))
        pos += size
    return out


def replica_log(directory) -> ReplicaLog:
    d = Path(directory)
    rl = ReplicaLog(d)
    if not d.is_dir():
        return rl
    for p in sorted(d.iterdir()):
        if p.name.endswith(".log") and p.name[:20].isdigit() and len(p.name) == 24:
            rl.segments.append(int(p.name[:20]))
            rl.batches.extend(parse_batches(p.read_bytes()))
    return rl


def first_difference(a: ReplicaLog, b: ReplicaLog) -> str:
    for i, (x, y) in enumerate(zip(a.batches, b.batches)):
        if x.data != y.data:
            return (f"batch #{i}: offsets {x.base_offset}..{x.last_offset} epoch {x.leader_epoch} crc {x.crc:#x} vs "
                    f"offsets {y.base_offset}..{y.last_offset} epoch {y.leader_epoch} crc {y.crc:#x}")
    if len(a.batches) != len(b.batches):
        return f"one is a prefix of the other: {len(a.batches)} vs {len(b.batches)} batches"
    return "identical"


# -- TCP proxies -------------------------------------------------------------------------------------------------

def _socket_inode(local_port: int, remote_port: int) -> str | None:
    """The inode of the IPv4 TCP socket with that local and remote port (loopback), from /proc/net/tcp."""
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                parts = line.split()
                lport = int(parts[1].rsplit(":", 1)[1], 16)
                rport = int(parts[2].rsplit(":", 1)[1], 16)
                if lport == local_port and rport == remote_port:
                    return parts[9]
    except OSError:
        pass
    return None


def _owner_pid(inode: str | None, pids) -> int | None:
    if inode is None:
        return None
    target = f"socket:[{inode}]"
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                        return pid
                except OSError:
                    continue
        except OSError:
            continue
    return None


class _Conn:
    def __init__(self, proxy, client_writer, owner):
        self.proxy = proxy
        self.client_writer = client_writer
        self.upstream_writer = None
        self.owner = owner
        self.frozen = False
        self.closed = asyncio.Event()

    def abort(self):
        for w in (self.client_writer, self.upstream_writer):
            if w is not None:
                w.transport.abort()
        self.closed.set()


class Proxy:
    """listen (host, port) -> upstream (host, port). ``cut``: existing and new connections hang (bytes dropped)."""

    def __init__(self, hub, name, listen, upstream):
        self.hub, self.name, self.listen, self.upstream = hub, name, listen, upstream
        self.cut = False
        self.conns: set[_Conn] = set()
        self.server = None

    async def _start(self):
        self.server = await asyncio.start_server(self._handle, self.listen[0], self.listen[1], reuse_address=True)

    async def _handle(self, reader, writer):
        peer = writer.get_extra_info("peername")
        # a copy: the test's thread adds the pid of every broker it starts while this loop's thread looks
        owner = _owner_pid(_socket_inode(peer[1], self.listen[1]), list(self.hub.known_pids)) if peer else None
        conn = _Conn(self, writer, owner)
        self.conns.add(conn)
        try:
            if self.cut or owner in self.hub.isolated_pids:
                conn.frozen = True
                await conn.closed.wait()
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.upstream)
            except OSError:
                writer.transport.abort()
                return
            conn.upstream_writer = up_writer
            await asyncio.gather(self._pump(conn, reader, up_writer), self._pump(conn, up_reader, writer))
        finally:
            self.conns.discard(conn)
            conn.abort()

    async def _pump(self, conn, reader, writer):
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if conn.frozen:              # a partition: bytes vanish; the connection hangs until healed
                    await conn.closed.wait()
                    return
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            if not conn.frozen:
                conn.abort()


class ProxyHub:
    """Every proxy of a cluster on one asyncio loop in a daemon thread."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="cluster-proxies", daemon=True)
        self.thread.start()
        self.proxies: list[Proxy] = []
        self.known_pids: set[int] = set()
        self.isolated_pids: set[int] = set()

    def _call(self, fn, *args):
        async def run():
            r = fn(*args)
            if asyncio.iscoroutine(r):
                r = await r
            return r
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    def add(self, name, listen, upstream) -> Proxy:
        proxy = Proxy(self, name, listen, upstream)
        self._call(proxy._start)
        self.proxies.append(proxy)
        return proxy

    def cut(self, proxies, pid: int | None = None) -> None:
        """Drop everything through `proxies`, and every connection the process `pid` opens through any proxy."""
        def do():
            if pid is not None:
                self.isolated_pids.add(pid)
            for p in self.proxies:
                if p in proxies:
                    p.cut = True
                for c in p.conns:
                    if p in proxies or (pid is not None and c.owner == pid):
                        c.frozen = True
        self._call(do)

    def heal(self, proxies, pid: int | None = None) -> None:
        def do():
            self.isolated_pids.discard(pid)
            for p in self.proxies:
                if p in proxies:
                    p.cut = False
                for c in list(p.conns):
                    if c.frozen and (p in proxies or c.owner == pid):
                        c.abort()
        self._call(do)

    def close(self) -> None:
        def do():
            for p in self.proxies:
                p.server.close()
                for c in list(p.conns):
                    c.abort()
        try:
            self._call(do)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)


# -- brokers ---------------------------------------------------------------------------------------------------

def _copy_sparse(src, dst) -> None:
    """Copy a file leaving its zero blocks as holes (a killed broker's preallocated indexes are mostly zeros)."""
    block = 1 << 16
    zeros = bytes(block)
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        while chunk := fin.read(block):
            if chunk == zeros:
                fout.seek(len(chunk), os.SEEK_CUR)
            else:
                fout.write(chunk)
        fout.truncate()
    shutil.copystat(src, dst)


class BrokerProc:
    """One ``python -m seglog broker`` subprocess with a fixed id, port and data dir."""

    def __init__(self, cluster, broker_id: int, port: int, data_dir: Path, log_path: Path, args: list[str]):
        self.cluster = cluster
        self.id = broker_id
        self.port = port
        self.data_dir = data_dir
        self.log_path = log_path
        self.args = args
        self.disk_trigger: Path | None = None      # set when it runs under helpers/failing_disk.py
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.paused = False
        self._log_offset = 0

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def spawn(self) -> None:
        assert not self.alive, f"broker {self.id} is already running"
        self.starts += 1
        with open(self.log_path, "ab") as f:
            f.write(f"=== harness: start #{self.starts} of broker {self.id} at {time.strftime('%H:%M:%S')} ===\n"
                    .encode())
            self._log_offset = f.tell()
            self.proc = subprocess.Popen(self.args, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=seglog_env(), start_new_session=True)
        self.paused = False
        if self.cluster.hub is not None:
            self.cluster.hub.known_pids.add(self.proc.pid)

    def wait_started(self, timeout: float = 40.0) -> None:
        """Until the broker printed "listening on" (it registered in ZooKeeper before that)."""
        def started():
            if self.proc.poll() is not None:
                raise AssertionError(f"broker {self.id} exited with {self.proc.returncode}:\n{self.log_tail(40)}")
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                return b"listening on" in f.read()
        deadline = time.monotonic() + timeout
        while not started():
            if time.monotonic() > deadline:
                raise AssertionError(f"broker {self.id} did not start within {timeout:.0f} s:\n{self.log_tail(40)}")
            time.sleep(0.05)

    def start(self, timeout: float = 40.0) -> "BrokerProc":
        self.spawn()
        self.wait_started(timeout)
        return self

    def kill(self) -> None:
        """kill -9: no shutdown work at all (its ZooKeeper session stays until it times out)."""
        if self.alive:
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(30)
        self.paused = False

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM: a clean shutdown."""
        if self.alive:
            if self.paused:
                self.resume()
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return None if self.proc is None else self.proc.returncode

    def fail_disk(self, error: int, ops=("pwrite", "write", "fallocate", "ftruncate")) -> None:
        """From now on this broker's file calls of `ops` fail with `error` (Cluster(disk_faults=True) only)."""
        from helpers.failing_disk import write_trigger
        assert self.disk_trigger is not None, "the cluster was not started with disk_faults=True"
        write_trigger(self.disk_trigger, error, ops)

    def heal_disk(self) -> None:
        from helpers.failing_disk import clear_trigger
        if self.disk_trigger is not None:
            clear_trigger(self.disk_trigger)

    def pause(self) -> None:
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)
        self.paused = False

    def partition_dir(self, topic: str, p: int) -> Path:
        return self.data_dir / f"{topic}-{p}"

    def meta_properties(self) -> dict[str, str]:
        """The data dir's meta.properties (empty if there is none)."""
        try:
            lines = (self.data_dir / "meta.properties").read_text().splitlines()
        except OSError:
            return {}
        return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def log_since_start(self) -> str:
        with open(self.log_path, "rb") as f:
            f.seek(self._log_offset)
            return f.read().decode(errors="replace")


class Cluster:
    """N broker subprocesses on one ZooKeeper (under a chroot of their own). See the module docstring."""

    def __init__(self, zk_connect: str, work_dir, n: int = 3, overrides: dict | None = None, *,
                 proxied: bool = False, chroot: str | None = None, log_level: str = "INFO",
                 tmpfs_size: str | None = None, security: dict | None = None, log_dirs: int = 1,
                 disk_faults: bool = False):
        self.zk_base = zk_connect
        self.security = security          # client settings for the harness's own requests (a TLS/SASL listener)
        self.tmpfs_size = tmpfs_size
        self._mounted: list[Path] = []
        self.chroot = chroot or f"/seglog-{os.getpid()}-{int(time.time() * 1000) % 10**9}"
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.overrides = dict(FAST_OVERRIDES, **(overrides or {}))
        self.proxied = proxied
        self.hub = ProxyHub() if proxied else None
        self.brokers: dict[int, BrokerProc] = {}
        self.client_addr: dict[int, tuple[str, int]] = {}
        self.proxies: dict[int, list[Proxy]] = {}
        zk_host, zk_port = zk_connect.split(",")[0].rsplit(":", 1)
        taken: set[int] = set()

        def pick_port() -> int:
            """A free port not handed out here before: a broker's port is bound only when it starts, so
            free_port alone can give it to a proxy too."""
            port = free_port()
            while port in taken:
                port = free_port()
            taken.add(port)
            return port

        for i in range(n):
            port = pick_port()
            advertised = HOST
            zk = f"{zk_connect}{self.chroot}"
            if proxied:
                advertised = f"127.0.0.{11 + i}"        # the proxy listens there on the broker's port
                inbound = self.hub.add(f"broker-{i}", (advertised, port), (HOST, port))
                zk_proxy_port = pick_port()
                zk_proxy = self.hub.add(f"zk-of-{i}", (HOST, zk_proxy_port), (zk_host, int(zk_port)))
                zk = f"{HOST}:{zk_proxy_port}{self.chroot}"
                self.proxies[i] = [inbound, zk_proxy]
            self.client_addr[i] = (advertised, port)
            data_dir = self.work_dir / f"d{i}"
            dirs = ",".join([str(data_dir)] + [f"{data_dir}-{k}" for k in range(1, log_dirs)])   # log.dirs
            args = [sys.executable, "-m", "seglog", "broker", "--broker-id", str(i), "--host", HOST,
                    "--port", str(port), "--zookeeper", zk, "--data-dir", dirs, "--log-level", log_level]
            props = dict(self.overrides)
            if proxied:
                props["advertised.listeners"] = f"PLAINTEXT://{advertised}:{port}"
            for k, v in props.items():
                args += ["--override", f"{k}={str(v).lower() if isinstance(v, bool) else v}"]
            trigger = None
            if disk_faults:
                trigger = self.work_dir / f"disk-faults-{i}"
                args[1:1] = [str(Path(__file__).resolve().parent / "helpers" / "failing_disk.py"), str(trigger)]
            self.brokers[i] = BrokerProc(self, i, port, data_dir, self.work_dir / f"broker-{i}.log", args)
            self.brokers[i].disk_trigger = trigger
        self._zk = None

    # -- lifecycle ------------------------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> "Cluster":
        if self.tmpfs_size is not None and not self._mounted:
            from faults import mount_tmpfs
            for b in self.brokers.values():
                mount_tmpfs(b.data_dir, self.tmpfs_size)
                self._mounted.append(b.data_dir)
        for b in self.brokers.values():
            b.spawn()
        for b in self.brokers.values():
            b.wait_started(timeout)
        wait_until(lambda: set(self.live_ids()) == set(self.brokers), 20, "every broker registered",
                   details=self.describe)
        wait_until(lambda: self.controller()[0] is not None, 20, "a controller", details=self.describe)
        return self

    def kill_brokers(self) -> None:
        """SIGKILL every live broker (a paused one is resumed first); their data dirs stay as they are."""
        for b in self.brokers.values():
            try:
                if b.alive:
                    if b.paused:
                        b.resume()
                    b.kill()
            except Exception:
                pass

    def close(self, keep_data: Path | None = None) -> None:
        """Kill every broker (SIGKILL) and the proxies; close the ZooKeeper reader. ``keep_data``: a directory
        each broker's data dir is copied into (as ``d<id>``) once the brokers are dead, before the tmpfs
        mounts (if any) go away with what they held (a full-disk fault's ballast is left out)."""
        self.kill_brokers()
        if keep_data is not None:
            from faults import BALLAST
            for i, b in self.brokers.items():
                if b.proc is not None:
                    b.proc.wait(10)
                shutil.copytree(b.data_dir, Path(keep_data) / f"d{i}", dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns(BALLAST), copy_function=_copy_sparse)
        if self.hub is not None:
            self.hub.close()
        if self._zk is not None:
            self._zk.stop()
            self._zk.close()
            self._zk = None
        if self._mounted:
            from faults import unmount
            while self._mounted:
                unmount(self._mounted.pop())

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.client_addr.values())

    def bootstrap_of(self, ids) -> str:
        return ",".join(f"{self.client_addr[i][0]}:{self.client_addr[i][1]}" for i in ids)

    # -- ZooKeeper (read-only view of the cluster's state) ----------------------------------------------------

    @property
    def zk(self):
        if self._zk is None:
            from kazoo.client import KazooClient
            client = KazooClient(hosts=self.zk_base + self.chroot, timeout=10)
            client.start(timeout=15)
            self._zk = client
        return self._zk

    def live_ids(self) -> list[int]:
        if not self.zk.exists("/brokers/ids"):
            return []
        return sorted(int(c) for c in self.zk.get_children("/brokers/ids"))

    def controller(self) -> tuple[int | None, int]:
        """(controller broker id or None, controller epoch), read consistently (both change in one transaction:
        the epoch is read again after /controller and the pair retried if it moved)."""
        def epoch() -> int:
            return int(self.zk.get("/controller_epoch")[0]) if self.zk.exists("/controller_epoch") else 0
        while True:
            before = epoch()
            try:
                data, _ = self.zk.get("/controller")
                cid = int(json.loads(data)["brokerid"])
            except Exception:           # NoNodeError: no controller right now
                cid = None
            if epoch() == before:
                return cid, before

    def state(self, topic: str, p: int) -> dict | None:
        path = f"/brokers/topics/{topic}/partitions/{p}/state"
        try:
            data, stat = self.zk.get(path)
        except Exception:
            return None
        st = json.loads(data)
        st["version"] = stat.version
        return st

    def assignment(self, topic: str) -> dict[int, list[int]]:
        data, _ = self.zk.get(f"/brokers/topics/{topic}")
        return {int(p): rs for p, rs in json.loads(data)["partitions"].items()}

    def topics(self) -> list[str]:
        return sorted(self.zk.get_children("/brokers/topics")) if self.zk.exists("/brokers/topics") else []

    def cluster_id(self) -> str | None:
        """The cluster id the first broker stored in ZooKeeper (/cluster/id), None if there is none."""
        try:
            data, _ = self.zk.get("/cluster/id")
        except Exception:
            return None
        return json.loads(data)["id"]

    def topic_config(self, topic: str) -> dict[str, str]:
        data, _ = self.zk.get(f"/config/topics/{topic}")
        return dict(json.loads(data)["config"])

    def set_topic_config(self, topic: str, changes: dict) -> None:
        """Change a topic's config overrides in ZooKeeper, as ``kafka-configs --zookeeper ... --alter`` did; the
        brokers watch the znode."""
        config = dict(self.topic_config(topic), **{k: str(v).lower() if isinstance(v, bool) else str(v)
                                                    for k, v in changes.items()})
        self.zk.set(f"/config/topics/{topic}", json.dumps({"version": 1, "config": config}).encode())

    def leader(self, topic: str, p: int) -> int:
        st = self.state(topic, p)
        return -1 if st is None else st["leader"]

    def leader_view(self, topic: str, p: int, st: dict) -> dict | None:
        """The partition as the leader in ZooKeeper state `st` serves it itself, or None while it does not lead
        in st's epoch yet: ZooKeeper shows a new leader before that broker has taken over. Its answer to a
        ListOffsets request carrying the epoch (current_leader_epoch) must be no error (NOT_LEADER_OR_FOLLOWER
        until it leads, FENCED/UNKNOWN_LEADER_EPOCH while it leads in another epoch), and its own Metadata must
        name it leader in that epoch; that Metadata partition (with the ISR the leader knows) is returned. A
        broker that does not answer within a few seconds (paused, stopped) does not lead."""
        from seglog.client import BrokerConnection
        from seglog.errors import SeglogError
        from seglog.protocol import ApiKey

        leader, epoch = st["leader"], st["leader_epoch"]
        from seglog.security.client import ClientSecurity
        conn = BrokerConnection(HOST, self.brokers[leader].port, client_id="fault-test-leader", timeout=5,
                                security=ClientSecurity.of(self.security))
        try:
            r = conn.request(ApiKey.LIST_OFFSETS, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [{"partition_index": p, "current_leader_epoch": epoch,
                                                "timestamp": -1}]}]})
            if r["topics"][0]["partitions"][0]["error_code"] != 0:
                return None
            md = conn.request(ApiKey.METADATA, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
        except (SeglogError, OSError):
            return None
        finally:
            conn.close()
        parts = next((t["partitions"] for t in md["topics"] if t["name"] == topic), [])
        part = next((x for x in parts if x["partition_index"] == p), None)
        if part and (part["error_code"], part["leader_id"], part["leader_epoch"]) == (0, leader, epoch):
            return part
        return None

    def wait_leader(self, topic: str, p: int, *, not_in=(), min_epoch: int = -1, timeout: float = 30.0) -> dict:
        """The partition state once it has a live leader outside `not_in` with an epoch >= min_epoch, and that
        broker itself serves as leader in that epoch (``leader_view``)."""
        def ok():
            st = self.state(topic, p)
            if st and st["leader"] >= 0 and st["leader"] not in not_in and st["leader_epoch"] >= min_epoch \
                    and st["leader"] in self.live_ids() and self.leader_view(topic, p, st):
                return st
        return wait_until(ok, timeout, f"a leader of {topic}-{p} not in {list(not_in)} with epoch >= {min_epoch}, "
                          f"serving as leader", details=self.describe)

    def wait_isr(self, topic: str, p: int, members, timeout: float = 30.0) -> dict:
        """The partition state once its ISR is exactly `members`, it has a leader, and that leader itself serves
        in the state's epoch with that ISR (``leader_view``)."""
        want = set(members)
        def ok():
            st = self.state(topic, p)
            if st and st["leader"] >= 0 and set(st["isr"]) == want:
                view = self.leader_view(topic, p, st)
                if view and set(view["isr_nodes"]) == want:
                    return st
        return wait_until(ok, timeout, f"ISR {sorted(want)} for {topic}-{p}, served so by its leader",
                          details=self.describe)

    def wait_full_isr(self, topic: str, partitions, timeout: float = 30.0) -> None:
        a = self.assignment(topic)
        for p in partitions:
            self.wait_isr(topic, p, a[p], timeout)

    def describe(self) -> str:
        """Brokers, controller, every partition state and the tail of every broker log: for failure messages."""
        lines = []
        try:
            lines.append(f"live brokers {self.live_ids()}, controller {self.controller()}")
            for t in self.topics():
                for p in sorted(self.assignment(t)):
                    lines.append(f"  {t}-{p}: {self.state(t, p)}")
        except Exception as e:
            lines.append(f"(cannot read ZooKeeper: {e!r})")
        for b in self.brokers.values():
            lines.append(f"--- broker {b.id} (pid {b.pid}, alive {b.alive}, paused {b.paused}) log tail:")
            lines.append(b.log_tail(25))
        return "\n".join(lines)

    # -- topics ---------------------------------------------------------------------------------------------

    def admin(self):
        from kafka.admin import KafkaAdminClient
        return KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=15000)

    def create_topic(self, name: str, partitions: int = 1, rf: int = 3, configs: dict | None = None,
                     timeout: float = 30.0) -> None:
        """Create through a real client (CreateTopics), then wait until every partition has its full ISR."""
        from kafka.admin import NewTopic
        admin = self.admin()
        try:
            admin.create_topics([NewTopic(name, partitions, rf, topic_configs={k: str(v) for k, v in
                                                                                (configs or {}).items()})])
        finally:
            admin.close()
        wait_until(lambda: all(self.state(name, p) for p in range(partitions)), timeout,
                   f"partition states of {name}", details=self.describe)
        self.wait_full_isr(name, range(partitions), timeout)

    # -- faults ---------------------------------------------------------------------------------------------

    def isolate(self, broker_id: int) -> None:
        """Cut the broker off from clients, other brokers and ZooKeeper (proxied clusters only)."""
        assert self.hub is not None, "isolate() needs Cluster(..., proxied=True)"
        self.hub.cut(self.proxies[broker_id], self.brokers[broker_id].pid)

    def heal(self, broker_id: int) -> None:
        self.hub.heal(self.proxies[broker_id], self.brokers[broker_id].pid)

    # -- replicas -------------------------------------------------------------------------------------------

    def replica_logs(self, topic: str, p: int, ids=None) -> dict[int, ReplicaLog]:
        ids = self.assignment(topic)[p] if ids is None else ids
        return {i: replica_log(self.brokers[i].partition_dir(topic, p)) for i in ids}

    def wait_converged(self, topic: str, p: int, *, min_end: int = 0, timeout: float = 30.0,
                       ids=None) -> ReplicaLog:
        """Until every replica's log holds the same batches, byte for byte (offsets, epochs, CRCs, records),
        ending at min_end or later; returns one of them."""
        def same():
            logs = self.replica_logs(topic, p, ids)
            first = next(iter(logs.values()))
            if first.end_offset >= min_end and all(rl.data == first.data for rl in logs.values()):
                return first

        def details():
            logs = self.replica_logs(topic, p, ids)
            items = list(logs.items())
            out = [f"replicas of {topic}-{p}:"] + [f"  broker {i}: {rl.summary()}" for i, rl in items]
            for i, rl in items[1:]:
                out.append(f"  broker {items[0][0]} vs {i}: {first_difference(items[0][1], rl)}")
            return "\n".join(out) + "\n" + self.describe()

        return wait_until(same, timeout, f"replicas of {topic}-{p} identical up to offset >= {min_end}",
                          interval=0.2, details=details)


# -- clients ---------------------------------------------------------------------------------------------------

def consume_all(bootstrap: str, topic: str, partitions, timeout: float = 60.0,
                isolation_level: str = "read_uncommitted") -> dict[int, list]:
    """Every record of the partitions, from the start to the current end (ListOffsets latest: the high
    watermark, or the last stable offset with ``isolation_level="read_committed"``), with kafka-python:
    {partition: [(offset, key, value)]}."""
    from kafka import KafkaConsumer, TopicPartition

    # metadata_max_age_ms: kafka-python 3.0 loses an update requested while a Metadata request is in flight, so
    # the assigned topic's leaders could stay unknown for the default 5 minutes (end_offsets timed out, 1 run in 80)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             auto_offset_reset="earliest", request_timeout_ms=20000, fetch_max_wait_ms=200,
                             isolation_level=isolation_level, metadata_max_age_ms=1000)
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        out = {tp.partition: [] for tp in tps}
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise AssertionError(f"consumed only up to {[consumer.position(tp) for tp in tps]} of "
                                     f"{[ends[tp] for tp in tps]} within {timeout} s")
            for tp, recs in consumer.poll(timeout_ms=500).items():
                out[tp.partition].extend((r.offset, r.key, r.value) for r in recs)
        return out
    finally:
        consumer.close()


def raw_produce(host: str, port: int, topic: str, p: int, values: list[bytes], acks: int = -1,
                timeout_ms: int = 3000, socket_timeout: float = 15.0) -> tuple[int, int]:
    """One Produce request (a single non-idempotent batch built by kafka-python) straight to host:port,
    bypassing metadata routing: (error_code, base_offset). NetworkError/OSError propagate."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from seglog.client import BrokerConnection
    from seglog.protocol import ApiKey

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    now = int(time.time() * 1000)
    for i, v in enumerate(values):
        builder.append(i, timestamp=now, key=None, value=v, headers=[])
    conn = BrokerConnection(host, port, client_id="fault-test-raw", timeout=socket_timeout)
    try:
        resp = conn.request(ApiKey.PRODUCE, {"transactional_id": None, "acks": acks, "timeout_ms": timeout_ms,
                                             "topic_data": [{"name": topic, "partition_data": [
                                                 {"index": p, "records": bytes(builder.build())}]}]},
                            extra_timeout=timeout_ms / 1000)
    finally:
        conn.close()
    r = resp["responses"][0]["partition_responses"][0]
    return r["error_code"], r["base_offset"]


_OPEN_PRODUCERS: list = []


class LineRing(logging.Handler):
    """The last `size` lines logged to its own logger, with their time."""

    def __init__(self, name: str, size: int = 20000):
        super().__init__(logging.DEBUG)
        self.lines: collections.deque[str] = collections.deque(maxlen=size)
        self.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        self.logger = logging.Logger(name, logging.DEBUG)      # outside logging's registry: freed with the client
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    def text(self) -> str:
        return "\n".join(self.lines)


def close_producers() -> None:
    """Close every producer of this module still open (test teardown)."""
    while _OPEN_PRODUCERS:
        try:
            _OPEN_PRODUCERS.pop().close()
        except Exception:
            pass


class BackgroundProducer:
    """A kafka-python producer (by default idempotent, acks=all) that can send in a background thread, round
    robin over `partitions`, as fast as `max_pending` unacknowledged records allow (or at `rate` rec/s), or
    synchronously (`send_sync`). Records which sends were acknowledged (sequence number, offset, time) and which
    failed. Values are ``<tag>-p<partition>-<seq>`` so each record says who sent it, where, and in which order."""

    client = "kafka-python"

    def __init__(self, bootstrap: str, topic: str, partitions, *, tag: bytes = b"k", rate: float | None = None,
                 max_pending: int = 1000, **config):
        self.topic, self.partitions, self.tag = topic, list(partitions), tag
        self.rate = rate
        self.max_pending = max_pending
        self.acked: dict[int, list[tuple[int, int, float]]] = {p: [] for p in self.partitions}  # (seq, offset, t)
        self.failed: list[tuple[int, int, str]] = []
        self.sent = {p: 0 for p in self.partitions}
        self._inflight = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"producer-{tag.decode()}", daemon=True)
        self.error: BaseException | None = None
        self._closed = False
        self._make(bootstrap, config)
        _OPEN_PRODUCERS.append(self)

    # -- client specifics ----------------------------------------------------------------------------------

    def _make(self, bootstrap: str, config: dict) -> None:
        from kafka import KafkaProducer

        cfg = dict(bootstrap_servers=bootstrap, acks="all", linger_ms=2, request_timeout_ms=10000,
                   delivery_timeout_ms=120000, retry_backoff_ms=100, reconnect_backoff_max_ms=1000,
                   metadata_max_age_ms=5000, max_block_ms=120000)
        cfg.update(config)
        self.producer = KafkaProducer(**cfg)

    def _send(self, p: int, seq: int) -> None:
        fut = self.producer.send(self.topic, value=self.value(p, seq), partition=p)
        fut.add_callback(lambda md: self._ok(p, seq, md.offset))
        fut.add_errback(lambda exc: self._err(p, seq, exc))

    def _wait(self, seconds: float) -> None:
        time.sleep(seconds)

    def _flush(self, timeout: float) -> None:
        self.producer.flush(timeout)

    def _close(self) -> None:
        self.producer.close(10)

    def client_log(self) -> str:
        """The client's own recent log lines kept by the harness ("" when the client logs through Python's
        logging, which pytest captures)."""
        return ""

    # -- common --------------------------------------------------------------------------------------------

    def value(self, p: int, seq: int) -> bytes:
        return b"%s-p%d-%08d" % (self.tag, p, seq)

    @staticmethod
    def parse(value: bytes) -> tuple[bytes, int, int]:
        """(tag, partition, seq) of a value."""
        tag, p, seq = value.rsplit(b"-", 2)
        return tag, int(p[1:]), int(seq)

    on_ack: Callable[[int], None] | None = None
    """Called (on the client's callback thread) with the number of acknowledged records after each one."""

    def _ok(self, p, seq, offset):
        with self._lock:
            self.acked[p].append((seq, offset, time.monotonic()))
            self._inflight -= 1
            n = sum(len(v) for v in self.acked.values())
        if self.on_ack is not None:
            self.on_ack(n)

    def _err(self, p, seq, exc):
        with self._lock:
            self.failed.append((p, seq, repr(exc)))
            self._inflight -= 1

    def _send_next(self, i: int) -> None:
        p = self.partitions[i % len(self.partitions)]
        seq = self.sent[p]
        self.sent[p] += 1
        with self._lock:
            self._inflight += 1
        self._send(p, seq)

    def start(self) -> "BackgroundProducer":
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            i = 0
            t0 = time.monotonic()
            while not self._stop.is_set():
                while self._inflight >= self.max_pending and not self._stop.is_set():
                    self._wait(0.01)
                if self._stop.is_set():
                    return
                self._send_next(i)
                i += 1
                if self.rate:
                    delay = t0 + i / self.rate - time.monotonic()
                    if delay > 0:
                        self._wait(delay)
                else:
                    self._wait(0)
        except BaseException as e:          # noqa: BLE001 - reported by stop()
            self.error = e

    def send_sync(self, n: int, timeout: float = 120.0) -> None:
        """Send n more records (round robin) and wait until each is acknowledged or failed."""
        for i in range(n):
            self._send_next(i)
            self._wait(0)
        self._flush(timeout)
        wait_until(lambda: self._inflight == 0, 10, "every send to complete")

    def acked_count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self.acked.values())

    def wait_acked(self, more: int, timeout: float, details=None) -> None:
        target = self.acked_count() + more
        wait_until(lambda: self.acked_count() >= target, timeout,
                   f"{more} more acknowledged records from {self.client} producer {self.tag!r} "
                   f"({len(self.failed)} failed: {self.failed[-3:]})", details=details)

    def stop(self, flush_timeout: float = 120.0) -> None:
        """Stop sending, wait for every pending record, close."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        self._flush(flush_timeout)
        self.close()
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._stop.set()
            self._close()
            if self in _OPEN_PRODUCERS:
                _OPEN_PRODUCERS.remove(self)


class ConfluentBackgroundProducer(BackgroundProducer):
    """The same with confluent-kafka (librdkafka), enable.idempotence=true by default. Delivery reports run in
    poll()/flush() on the sending thread."""

    client = "confluent-kafka"

    def _make(self, bootstrap: str, config: dict) -> None:
        from confluent_kafka import Producer

        # socket.timeout.ms bounds how long a request may hang on a broker cut off by a network partition
        # (librdkafka's default waits 60 s; request.timeout.ms is only the broker-side ack timeout)
        cfg = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 2,
               "message.timeout.ms": 120000, "request.timeout.ms": 10000, "socket.timeout.ms": 10000,
               "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 1000, "topic.metadata.refresh.interval.ms": 5000}
        self._ring = None
        if "logger" not in config:
            # librdkafka's idempotence log (pid, epoch bumps, sequence resets and why) is kept, so that a failed
            # exactly-once check shows what the client saw (client_log); it is a few lines per fault
            self._ring = LineRing(f"{__name__}.{self.tag.decode()}.{id(self)}")
            cfg.update({"logger": self._ring.logger, "debug": "eos"})
        cfg.update(config)
        self.producer = Producer(cfg)
        self._plock = threading.Lock()

    def client_log(self) -> str:
        return self._ring.text() if self._ring is not None else ""

    def _send(self, p: int, seq: int) -> None:
        def report(err, msg, p=p, seq=seq):
            if err is not None:
                self._err(p, seq, err)
            else:
                self._ok(p, seq, msg.offset())
        while True:
            try:
                with self._plock:
                    self.producer.produce(self.topic, value=self.value(p, seq), partition=p, on_delivery=report)
                return
            except BufferError:
                self._wait(0.05)

    def _wait(self, seconds: float) -> None:
        with self._plock:
            self.producer.poll(seconds)

    def _flush(self, timeout: float) -> None:
        with self._plock:
            left = self.producer.flush(timeout)
        if left:
            raise AssertionError(f"{left} records still unacknowledged after {timeout} s")

    def _close(self) -> None:
        with self._plock:
            self.producer.flush(5)
            self.producer = None          # librdkafka's handle is destroyed with the object

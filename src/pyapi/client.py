"""A small blocking Kafka-protocol client over seglog's codec: one connection per broker, one request at a time.

Used where seglog itself talks to brokers: replica fetchers (follower -> leader), the CLI's
``--bootstrap-server`` mode, Spark's broker mode. ``BrokerConnection.request(api, body)`` sends one request
at the highest version both sides support (from ApiVersions) and returns the decoded response body; errors
inside the body are the caller's to map (``errors.for_code``). ``ClusterClient`` adds bootstrap, metadata and
leader routing. Connection problems raise NetworkError (retriable); a connection is closed after one, and after
anything else that interrupts a request (KeyboardInterrupt included), so no response is ever read by the wrong
request.
"""

from __future__ import annotations

import itertools
import socket
import threading

from .errors import InvalidConfigError, NetworkError, UnsupportedVersionError, for_code
from .protocol import SUPPORTED_VERSIONS, ApiKey, RequestHeader, decode_response, encode_request, frame_size

__all__ = ["BrokerConnection", "ClusterClient", "parse_bootstrap"]

MAX_RESPONSE_BYTES = (1 << 31) - 1
# The callers build these APIs' bodies in the shape they had before the versions that batch them (FindCoordinator
# v4 looks up several keys, OffsetFetch v8 several groups, LeaveGroup v3 several members): negotiation stops below.
CALLER_MAX_VERSIONS = {ApiKey.FIND_COORDINATOR: 3, ApiKey.OFFSET_FETCH: 7, ApiKey.LEAVE_GROUP: 2}


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """'host:port,host2:port2' -> [(host, port), ...]; InvalidConfigError for anything else (as Kafka's
    clients refuse a bad bootstrap.servers before connecting)."""
    if not isinstance(servers, str):
        raise InvalidConfigError(f"bootstrap servers must be a string 'host:port[,host:port...]', not "
                                 f"{type(servers).__name__} {servers!r}")
    out = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) <= 65535:
            raise InvalidConfigError(f"bootstrap server {item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise InvalidConfigError("no bootstrap servers given")
    return out


class BrokerConnection:
    """One TCP connection to a broker. Thread-safe (requests are serialized). ``timeout`` bounds connect and
    every read (a Fetch's max_wait_ms is added to it)."""

    def __init__(self, host: str, port: int, *, client_id: str = "seglog", timeout: float = 30.0):
        self.host, self.port, self.client_id, self.timeout = host, port, client_id, timeout
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._versions: dict[int, int] = {}

    def __repr__(self):
        return f"BrokerConnection({self.host}:{self.port})"

    def _connect(self) -> socket.socket:
        if self._sock is None:
            try:
                sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
            except OSError as e:
                raise NetworkError(f"cannot connect to {self.host}:{self.port}: {e}") from None
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock = sock
            self._versions = {}
            try:
                body = self._roundtrip(sock, ApiKey.API_VERSIONS, 0, {})
            except BaseException:
                self.close()
                raise
            if body["error_code"]:
                raise for_code(body["error_code"])(f"ApiVersions from {self.host}:{self.port} failed")
            theirs = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
            for api, (lo, hi) in SUPPORTED_VERSIONS.items():
                hi = min(hi, CALLER_MAX_VERSIONS.get(api, hi))
                if api in theirs and theirs[api][0] <= hi and lo <= theirs[api][1]:
                    self._versions[api] = min(hi, theirs[api][1])
        return self._sock

    def _roundtrip(self, sock: socket.socket, api: int, version: int, body: dict, extra_timeout: float = 0.0):
        header = RequestHeader(api, version, next(self._ids), self.client_id)
        try:
            sock.settimeout(self.timeout + extra_timeout)
            sock.sendall(b"".join(bytes(p) for p in encode_request(header, body)))
            size = frame_size(_recv_exactly(sock, 4), MAX_RESPONSE_BYTES)
            frame = _recv_exactly(sock, size)
        except OSError as e:
            self.close()
            raise NetworkError(f"{self.host}:{self.port}: {e}") from None
        return decode_response(header, frame)

    def request(self, api: int, body: dict, *, version: int | None = None, extra_timeout: float = 0.0) -> dict:
        """Send one request and return the decoded response (acks=0 produce requests are not supported)."""
        with self._lock:
            sock = self._connect()
            v = self._versions.get(api) if version is None else version
            if v is None:
                raise UnsupportedVersionError(f"{self.host}:{self.port} does not support {ApiKey(api).name}")
            try:
                return self._roundtrip(sock, api, v, body, extra_timeout)
            except BaseException:
                # Whatever stopped it (an error, a bad frame, KeyboardInterrupt or another signal's exception
                # while waiting for the answer), the response may still be on its way: a later request must not
                # read it as its own. Only a new connection is in step again.
                self.close()
                raise

    def version(self, api: int) -> int:
        with self._lock:
            self._connect()
            return self._versions[api]

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass


def _recv_exactly(sock: socket.socket, n: int) -> memoryview:
    """Exactly ``n`` bytes, read straight into one buffer of that size (however the socket splits them) and
    handed out without a copy: a fresh buffer per call, so views of an earlier response (the records of a
    fetch) stay valid. ConnectionResetError if the broker closes the connection first."""
    view = memoryview(bytearray(n))
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise ConnectionResetError("connection closed by the broker")
        got += k
    return view


class ClusterClient:
    """Bootstrap, metadata and per-broker connections: ``controller()``, ``leader(topic, p)``, ``any()``."""

    def __init__(self, bootstrap_servers: str, *, client_id: str = "seglog", timeout: float = 30.0):
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.client_id, self.timeout = client_id, timeout
        self._conns: dict[tuple[str, int], BrokerConnection] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        self.controller_id = -1
        self.topics: dict[str, dict] = {}

    def connection(self, host: str, port: int) -> BrokerConnection:
        conn = self._conns.get((host, port))
        if conn is None:
            conn = self._conns[(host, port)] = BrokerConnection(host, port, client_id=self.client_id,
                                                                timeout=self.timeout)
        return conn

    def any(self) -> BrokerConnection:
        """A connection to some reachable broker (known brokers first, then the bootstrap list)."""
        last: Exception | None = None
        for host, port in list(self.brokers.values()) + self.bootstrap:
            conn = self.connection(host, port)
            try:
                conn.version(ApiKey.METADATA)
                return conn
            except NetworkError as e:
                last = e
        raise NetworkError(f"no broker reachable ({last})")

    def refresh(self, topics: list[str] | None = None, allow_auto_create: bool = False) -> dict:
        """Fetch metadata (all topics when None) and remember brokers, controller and partition leaders."""
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": allow_auto_create}
        md = self.any().request(ApiKey.METADATA, body)
        self.brokers = {b["node_id"]: (b["host"], b["port"]) for b in md["brokers"]}
        self.controller_id = md["controller_id"]
        for t in md["topics"]:
            self.topics[t["name"]] = t
        return md

    def broker(self, broker_id: int) -> BrokerConnection:
        if broker_id not in self.brokers:
            self.refresh()
        if broker_id not in self.brokers:
            raise NetworkError(f"broker {broker_id} is not in the cluster metadata")
        return self.connection(*self.brokers[broker_id])

    def controller(self) -> BrokerConnection:
        self.refresh()
        return self.broker(self.controller_id)

    def leader(self, topic: str, partition: int) -> BrokerConnection:
        t = self.topics.get(topic) or self.refresh([topic])["topics"][0]
        for p in t.get("partitions", ()):
            if p["partition_index"] == partition and p["leader_id"] >= 0:
                return self.broker(p["leader_id"])
        self.refresh([topic])
        for p in self.topics.get(topic, {}).get("partitions", ()):
            if p["partition_index"] == partition and p["leader_id"] >= 0:
                return self.broker(p["leader_id"])
        raise NetworkError(f"no leader known for {topic}-{partition}")

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def __enter__(self) -> "ClusterClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


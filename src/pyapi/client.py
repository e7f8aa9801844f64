"""A small blocking Kafka-protocol client over seglog's codec: one connection per broker, one request at a time.

Used where seglog itself talks to brokers: replica fetchers (follower -> leader), the CLI's
``--bootstrap-server`` mode, Spark's broker mode. ``BrokerConnection.request(api, body)`` sends one request
at the highest version both sides support (from ApiVersions) and returns the decoded response body; errors
inside the body are the caller's to map (``errors.for_code``, ``error_for``). ``ClusterClient`` adds bootstrap,
metadata, leader and controller routing and ListOffsets, with retries paced by ``RetryDeadline``: the one
routing client of the wire door (RemoteNode, the admin, Spark's broker reader). Every connection is secured as
its ``security`` says (seglog.security.client.ClientSecurity: TLS, SASL). Connection problems raise
NetworkError (retriable); a connection is closed after one, and after anything else that interrupts a request
(KeyboardInterrupt included), so no response is ever read by the wrong request.
"""

from __future__ import annotations

import itertools
import random
import select
import socket
import threading
import time
from typing import Callable, Iterable, Mapping, Sequence

from .errors import (IllegalSaslStateError, InvalidConfigError, LeaderNotAvailableError, NetworkError,
                     NotControllerError, SaslAuthenticationError, SeglogError, SslAuthenticationError,
                     UnknownTopicOrPartitionError, UnsupportedSaslMechanismError, UnsupportedVersionError, for_code)
from .log import TimestampOffset
from .offsets_format import TopicPartition
from .protocol import SUPPORTED_VERSIONS, ApiKey, RequestHeader, decode_response, encode_request, frame_size
from .security.client import PLAINTEXT, ClientSecurity

__all__ = ["BrokerConnection", "ClusterClient", "RetryDeadline", "error_for", "parse_bootstrap", "LEADER_MOVED",
           "LATEST", "EARLIEST"]

LATEST, EARLIEST = -1, -2              # ListOffsets timestamps: the high watermark, the log start offset

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
    """One connection to a broker. Thread-safe (requests are serialized). ``timeout`` bounds connect and
    every read (a Fetch's max_wait_ms is added to it). ``security`` (a seglog.security.client.ClientSecurity,
    PLAINTEXT by default) says how it is secured: TLS wraps the socket (the broker's certificate checked, the
    host name too unless disabled); SASL authenticates right after ApiVersions (SaslHandshake, then
    SaslAuthenticate tokens until the exchange completes) and again before the session lifetime the broker
    granted runs out (KIP-368: at 85-95% of it, as Kafka's clients), so no request is sent unauthenticated or
    on an expired session. A refused certificate raises SslAuthenticationError, refused credentials
    SaslAuthenticationError (or UnsupportedSaslMechanismError): neither is retriable."""

    def __init__(self, host: str, port: int, *, client_id: str = "seglog", timeout: float = 30.0,
                 security: ClientSecurity | None = None):
        self.host, self.port, self.client_id, self.timeout = host, port, client_id, timeout
        self.security = security or PLAINTEXT
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._versions: dict[int, int] = {}
        self._reauth_at: float | None = None        # monotonic time to re-authenticate at (None: never)

    def __repr__(self):
        return f"BrokerConnection({self.host}:{self.port})"

    def _connect(self) -> socket.socket:
        """The connected, version-negotiated and authenticated socket (made now if there is none)."""
        if self._sock is None:
            try:
                sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
            except OSError as e:
                raise NetworkError(f"cannot connect to {self.host}:{self.port}: {e}") from None
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.security.tls:
                sock = self._tls(sock)
            self._sock = sock
            self._versions = {}
            self._reauth_at = None
            try:
                body = self._roundtrip(sock, ApiKey.API_VERSIONS, 0, {})
                if body["error_code"]:
                    raise for_code(body["error_code"])(f"ApiVersions from {self.host}:{self.port} failed")
                theirs = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
                for api, (lo, hi) in SUPPORTED_VERSIONS.items():
                    hi = min(hi, CALLER_MAX_VERSIONS.get(api, hi))
                    if api in theirs and theirs[api][0] <= hi and lo <= theirs[api][1]:
                        self._versions[api] = min(hi, theirs[api][1])
                if self.security.sasl:
                    self._authenticate(sock)
            except BaseException:
                self.close()
                raise
        elif self._reauth_at is not None and time.monotonic() >= self._reauth_at:
            try:
                self._authenticate(self._sock)
            except BaseException:
                self.close()
                raise
        return self._sock

    def _tls(self, sock: socket.socket) -> socket.socket:
        import ssl
        try:
            return self.security.ssl_context.wrap_socket(sock, server_hostname=self.host)
        except ssl.SSLCertVerificationError as e:
            sock.close()
            raise SslAuthenticationError(f"TLS handshake with {self.host}:{self.port} failed: {e.verify_message} "
                                         f"(check ssl.truststore.location / ssl.ca.location and "
                                         f"ssl.endpoint.identification.algorithm)") from None
        except ssl.SSLError as e:
            sock.close()
            raise SslAuthenticationError(f"TLS handshake with {self.host}:{self.port} failed: "
                                         f"{e.reason or e}") from None
        except OSError as e:
            sock.close()
            raise NetworkError(f"TLS handshake with {self.host}:{self.port}: {e}") from None

    def _authenticate(self, sock: socket.socket) -> None:
        """One SASL exchange (the first, or a re-authentication) with this connection's credentials."""
        from .security.sasl import client_exchange
        sec, where = self.security, f"{self.host}:{self.port}"
        handshake = self._versions.get(ApiKey.SASL_HANDSHAKE)
        authenticate = self._versions.get(ApiKey.SASL_AUTHENTICATE)
        if not handshake or authenticate is None:
            raise UnsupportedSaslMechanismError(f"{where} does not serve SaslHandshake v1 and SaslAuthenticate: "
                                                f"is it a SASL listener (security.protocol={sec.protocol})?")
        r = self._roundtrip(sock, ApiKey.SASL_HANDSHAKE, handshake, {"mechanism": sec.mechanism})
        if r["error_code"] == IllegalSaslStateError.code and not r["mechanisms"]:
            raise IllegalSaslStateError(f"{where} is not a SASL listener (security.protocol={sec.protocol} here: "
                                        f"it may serve PLAINTEXT or SSL)")
        if r["error_code"]:
            raise error_for(r["error_code"], f"{where} does not enable SASL mechanism {sec.mechanism} (enabled: "
                                             f"{', '.join(r['mechanisms'])})")
        exchange = client_exchange(sec.mechanism, sec.username, sec.password)
        token = next(exchange)
        while True:
            r = self._roundtrip(sock, ApiKey.SASL_AUTHENTICATE, authenticate, {"auth_bytes": token})
            if r["error_code"]:
                why = r["error_message"] or for_code(r["error_code"]).kafka_name
                raise error_for(r["error_code"], f"{where}: {why} ({sec.mechanism}, user {sec.username!r})")
            try:
                token = exchange.send(bytes(r["auth_bytes"]))
            except StopIteration:
                break
            except SaslAuthenticationError as e:          # the server's SCRAM proof did not verify
                raise SaslAuthenticationError(f"{where}: {e}") from None
        lifetime_ms = r.get("session_lifetime_ms", 0)
        self._reauth_at = (time.monotonic() + lifetime_ms / 1000 * random.uniform(0.85, 0.95)
                           if lifetime_ms > 0 else None)

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
        """Send one request and return the decoded response (acks=0 produce requests: :meth:`send_one_way`)."""
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

    def send_one_way(self, api: int, body: dict) -> None:
        """Send a request the broker does not answer (an acks=0 Produce), on a connection used for nothing
        else. A broker closes such a connection after a failed request (Kafka's way to tell the client): one
        found closed is opened again first."""
        with self._lock:
            if self._sock is not None and _closed_by_peer(self._sock, self.timeout):
                self.close()
            sock = self._connect()
            v = self._versions.get(api)
            if v is None:
                raise UnsupportedVersionError(f"{self.host}:{self.port} does not support {ApiKey(api).name}")
            header = RequestHeader(api, v, next(self._ids), self.client_id)
            try:
                sock.sendall(b"".join(bytes(p) for p in encode_request(header, body)))
            except OSError as e:
                self.close()
                raise NetworkError(f"{self.host}:{self.port}: {e}") from None
            except BaseException:
                self.close()                     # interrupted mid-frame: the stream is out of step
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


def _closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    """Whether the broker closed a connection it never answers on (EOF, a reset, or bytes it should not have
    sent). poll(), not select(): select() refuses descriptors from FD_SETSIZE (1024) up. Under TLS a readable
    socket may hold only TLS records (TLS 1.3 session tickets): those read as "nothing yet", not as a close."""
    import ssl
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    if not poller.poll(0):
        return False
    sock.setblocking(False)
    try:
        sock.recv(1)                               # b"": EOF; a byte: the broker broke the protocol
        return True
    except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return False
    except OSError:
        return True
    finally:
        try:
            sock.settimeout(timeout)
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


# -- errors and retries ---------------------------------------------------------------------------------------

# Codes after which the request may succeed at the (new) leader once metadata is fresh.
LEADER_MOVED = frozenset({
    3,    # UNKNOWN_TOPIC_OR_PARTITION (a broker that has not heard of a new partition yet)
    5,    # LEADER_NOT_AVAILABLE
    6,    # NOT_LEADER_OR_FOLLOWER
    9,    # REPLICA_NOT_AVAILABLE
    13,   # NETWORK_EXCEPTION
    74,   # FENCED_LEADER_EPOCH
    75,   # UNKNOWN_LEADER_EPOCH
    78,   # OFFSET_NOT_AVAILABLE
})

def error_for(code: int, message: str | None = None) -> SeglogError:
    """The seglog exception for a Kafka error code, carrying the broker's message (or the code's name)."""
    cls = for_code(code)
    return cls(message or f"{cls.kafka_name} (error code {code})")


class RetryDeadline:
    """Retry pacing: exponential backoff from 50 ms to 1 s until `seconds` have passed (since creation or the
    last reset())."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.reset()

    def reset(self) -> None:
        self.end = time.monotonic() + self.seconds
        self.delay = 0.05

    def expired(self) -> bool:
        return time.monotonic() + self.delay > self.end

    def sleep(self) -> None:
        time.sleep(self.delay)
        self.delay = min(self.delay * 2, 1.0)


# -- cluster metadata and routing ------------------------------------------------------------------------------

class ClusterClient:
    """Bootstrap, metadata, routing and per-broker connections: the wire door's one client of a cluster.
    Thread-safe (one lock over the metadata and the connection table; requests on a connection are serialized
    by the connection). Topic metadata is cached until :meth:`forget` (or a ``refresh=True`` lookup) asks the
    brokers again; ``brokers`` and ``controller_id`` are those of the last Metadata response. Requests that
    meet a moved leader or controller are retried until ``retry_timeout`` seconds have passed. ``security``
    (a ClientSecurity, or a mapping of Kafka client settings parsed into one; PLAINTEXT by default) secures
    every connection it opens (:meth:`open`)."""

    def __init__(self, bootstrap_servers: str, *, client_id: str = "seglog", timeout: float = 30.0,
                 retry_timeout: float = 30.0, security: ClientSecurity | Mapping[str, object] | None = None):
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.security = ClientSecurity.of(security)
        self.client_id, self.timeout, self.retry_timeout = client_id, timeout, retry_timeout
        self._lock = threading.RLock()
        self._conns: dict[tuple[str, int], BrokerConnection] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        self.controller_id = -1
        self._topics: dict[str, dict] = {}

    # -- metadata -------------------------------------------------------------------------------------------

    def metadata(self, topics: Sequence[str] | None = None, auto_create: bool = False) -> dict:
        """A fresh Metadata response (all topics when None); remembers brokers and the topics it names."""
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": auto_create}
        with self._lock:
            md = self.any().request(ApiKey.METADATA, body)
            self.brokers = {b["node_id"]: (b["host"], b["port"]) for b in md["brokers"]}
            self.controller_id = md["controller_id"]
            for t in md["topics"]:
                if t["error_code"] == 0:
                    self._topics[t["name"]] = t
                else:
                    self._topics.pop(t["name"], None)
            return md

    def topic(self, name: str, *, refresh: bool = False, auto_create: bool = False) -> dict:
        """The Metadata entry of a topic; UnknownTopicOrPartitionError (or the broker's error) if there is
        none. A topic the broker is still creating (LEADER_NOT_AVAILABLE) is waited for briefly."""
        if not refresh:
            t = self._topics.get(name)
            if t is not None:
                return t
        deadline = RetryDeadline(5.0)
        while True:
            md = self.metadata([name], auto_create)
            entry = next((t for t in md["topics"] if t["name"] == name), None)
            code = entry["error_code"] if entry is not None else UnknownTopicOrPartitionError.code
            if code == 0:
                return entry
            if code != LeaderNotAvailableError.code or deadline.expired():
                if code == UnknownTopicOrPartitionError.code:
                    raise UnknownTopicOrPartitionError(f"This server does not host this topic: {name}")
                raise error_for(code, f"topic {name}: {for_code(code).kafka_name}")
            deadline.sleep()

    def forget(self, topic: str | None = None) -> None:
        """Drop cached metadata (of one topic, or all) so the next lookup asks a broker."""
        with self._lock:
            if topic is None:
                self._topics.clear()
            else:
                self._topics.pop(topic, None)

    def partition_metadata(self, topic: str, p: int, *, refresh: bool = False) -> dict:
        t = self.topic(topic, refresh=refresh)
        for pm in t["partitions"]:
            if pm["partition_index"] == p:
                return pm
        if not refresh:
            return self.partition_metadata(topic, p, refresh=True)
        raise UnknownTopicOrPartitionError(f"This server does not host this topic-partition: {topic}-{p}")

    def leader_id(self, topic: str, p: int) -> int:
        """The broker id leading the partition (LeaderNotAvailableError while it has none)."""
        pm = self.partition_metadata(topic, p)
        if pm["leader_id"] < 0 or pm["leader_id"] not in self.brokers:
            pm = self.partition_metadata(topic, p, refresh=True)
            if pm["leader_id"] < 0:
                raise LeaderNotAvailableError(f"no leader for {topic}-{p} right now")
        return pm["leader_id"]

    # -- connections ----------------------------------------------------------------------------------------

    def broker(self, broker_id: int) -> BrokerConnection:
        """The connection to a broker by id (metadata is asked again for an id not known yet); NetworkError
        if the cluster has no such broker."""
        with self._lock:
            if broker_id not in self.brokers:
                self.metadata(None)
            if broker_id not in self.brokers:
                raise NetworkError(f"broker {broker_id} is not in the cluster metadata")
            return self.connection(*self.brokers[broker_id])

    def connection(self, host: str, port: int) -> BrokerConnection:
        """The one connection to host:port (made on first use)."""
        with self._lock:
            conn = self._conns.get((host, port))
            if conn is None:
                conn = self._conns[(host, port)] = self.open(host, port)
            return conn

    def open(self, host: str, port: int, client_id: str | None = None) -> BrokerConnection:
        """A new connection to host:port of this client's (its id unless `client_id`, its timeout and security),
        not shared: the caller closes it."""
        return BrokerConnection(host, port, client_id=client_id or self.client_id, timeout=self.timeout,
                                security=self.security)

    def leader(self, topic: str, p: int) -> BrokerConnection:
        return self.broker(self.leader_id(topic, p))

    def any(self) -> BrokerConnection:
        """A connection to some reachable broker (known brokers first, then the bootstrap list)."""
        last: Exception | None = None
        with self._lock:
            for host, port in list(self.brokers.values()) + self.bootstrap:
                conn = self.connection(host, port)
                try:
                    conn.version(ApiKey.METADATA)
                    return conn
                except NetworkError as e:
                    last = e
        raise NetworkError(f"no broker reachable ({last})")

    def broker_ids(self) -> list[int]:
        """The ids of the brokers in the cluster now (fresh metadata)."""
        self.metadata([])
        return sorted(self.brokers)

    def controller_request(self, api: int, body: dict, error_code: Callable[[dict], int]) -> dict:
        """Send an admin request to the controller; NOT_CONTROLLER (`error_code(response)` says 41) or a lost
        controller makes it find the controller again and resend."""
        deadline = RetryDeadline(self.retry_timeout)
        while True:
            try:
                self.metadata([])
                cid = self.controller_id
                if cid < 0:
                    raise NotControllerError("the cluster has no controller right now")
                response = self.broker(cid).request(api, body)
                if error_code(response) != NotControllerError.code:
                    return response
                last: SeglogError = NotControllerError(f"broker {cid} is no longer the controller")
            except (NetworkError, NotControllerError) as e:
                last = e
            if deadline.expired():
                raise last
            deadline.sleep()

    # -- offsets --------------------------------------------------------------------------------------------

    def list_offsets(self, tps: Iterable[tuple[str, int]], timestamp: int, isolation_level: int = 0
                     ) -> dict[TopicPartition, TimestampOffset | None]:
        """ListOffsets at each partition's leader: per partition (offset, timestamp) for `timestamp`
        (LATEST: the high watermark, or the last stable offset with isolation_level 1; EARLIEST: the log start
        offset, else the first record at or after it), or None for a partition that does not exist (or, for a
        timestamp, has no such record)."""
        pending = list(dict.fromkeys(TopicPartition(*tp) for tp in tps))
        out: dict[TopicPartition, TimestampOffset | None] = {}
        deadline = RetryDeadline(self.retry_timeout)
        while pending:
            retry: list[TopicPartition] = []
            last: SeglogError | None = None
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in pending:
                try:
                    by_leader.setdefault(self.leader_id(*tp), []).append(tp)
                except UnknownTopicOrPartitionError:
                    out[tp] = None
                except (LeaderNotAvailableError, NetworkError) as e:
                    retry.append(tp)
                    last = e
            for leader, group in by_leader.items():
                topics: dict[str, list] = {}
                for tp in group:
                    topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "timestamp": timestamp,
                                                            "current_leader_epoch": -1})
                body = {"replica_id": -1, "isolation_level": isolation_level,
                        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                try:
                    response = self.broker(leader).request(ApiKey.LIST_OFFSETS, body)
                except NetworkError as e:
                    retry.extend(group)
                    last = e
                    continue
                answered = set()
                for t in response["topics"]:
                    for p in t["partitions"]:
                        tp = TopicPartition(t["name"], p["partition_index"])
                        answered.add(tp)
                        code = p["error_code"]
                        if code == 0:
                            out[tp] = None if p["offset"] < 0 else TimestampOffset(p["offset"], p["timestamp"])
                        elif code in LEADER_MOVED:
                            retry.append(tp)
                            last = error_for(code, f"{tp.topic}-{tp.partition}: {for_code(code).kafka_name}")
                        else:
                            raise error_for(code, f"ListOffsets of {tp.topic}-{tp.partition}: "
                                                  f"{for_code(code).kafka_name}")
                retry.extend(tp for tp in group if tp not in answered)
            if not retry:
                break
            if deadline.expired():
                raise last or LeaderNotAvailableError(f"no answer for {retry[0].topic}-{retry[0].partition}")
            deadline.sleep()
            for topic in {tp.topic for tp in retry}:
                self.forget(topic)
            pending = retry
        return out

    def close(self) -> None:
        """Close every connection (a later request connects again)."""
        with self._lock:
            for conn in self._conns.values():
                conn.close()
            self._conns.clear()

    def __enter__(self) -> "ClusterClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

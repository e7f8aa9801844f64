"""The asyncio server: connections, framing, dispatch, zero-copy fetch responses, long polls, shutdown.

Each connection is served by one task that reads a frame, answers it, and reads the next, so responses
leave in request order (Kafka's broker also handles one request per connection at a time). A frame's size is
checked against socket.request.max.bytes before anything is allocated; a frame that does not decode, or an
unsupported API, closes that connection (with one log line naming the client) and the broker keeps serving
the others. An unsupported ApiVersions version gets Kafka's v0 fallback answer instead.

Disk work never runs on the event loop: appends (validation, decompression, writes, and at a roll fsync,
producer-state snapshot and checkpoint), fetch reads (CRC checks, index rebuilds) and offset lookups run on a
pool of ``num.io.threads`` threads (Kafka's name for its request handler threads, default 8), so a partition
whose disk stalls holds one thread and its own requests, never the loop or other partitions. Appends to one
partition run one at a time in arrival order (a per-partition asyncio lock, FIFO), reads run concurrently.

Memory per request: the frame (at most socket.request.max.bytes, 100 MiB by default, checked before it is
read), its records left as views of it, plus for each partition's batch, one after the other, its inflated
records (at most 32 x max.message.bytes: seglog._engine.inflate_limit) and one copy of the batch (at most
max.message.bytes). A connection is served one request at a time, so this is also the bound per connection;
at most num.io.threads batches are inflated at once in the whole broker.

Fetch responses carry record batches as views of the mapped segments; a large one is written with
``loop.sendfile`` straight from the segment file (no copy through user space). On a TLS connection the records
must be encrypted in user space, so the view of the mapped segment is handed to the TLS transport in slices of
``TLS_WRITE_BYTES``, each drained before the next (no read() into an intermediate buffer as asyncio's sendfile
fallback would do; the transport's buffer stays small, where one multi-MiB write would be copied and shifted
down at every partial send). Kernel TLS, which would let sendfile encrypt, is out of reach: Python 3.11's ssl
module has no OP_ENABLE_KTLS. Fetches wait (long poll) for ``min_bytes`` up to ``max_wait_ms``; appends from any
thread wake them through a node listener.

Listeners (seglog.security.listeners): one server socket per configured listener, each PLAINTEXT, SSL,
SASL_PLAINTEXT or SASL_SSL. A connection's :class:`Connection` (listener, client address, principal, SASL
state) is the context of every request it sends. On a SASL listener only ApiVersions, SaslHandshake and
SaslAuthenticate are served until the client authenticated (anything else closes the connection, as Kafka),
frames are limited to sasl.server.max.receive.size until then, and a session past connections.max.reauth.ms
that was not re-authenticated is closed at its next request.

Authorization (authorizer.class.name): handlers ask ``allowed(operation, resource type, name)`` for the principal
and address of the connection whose request they answer, on the event loop (the connection is a context variable,
unknown on the disk and group threads, where ``allowed`` answers no).

Client quotas (seglog.quotas; what applies to which request: seglog.broker.throttling): handlers record bytes
(``quota_throttle``) and topic changes (``check_mutations``, ``record_mutations``), the server records each
request's handling time after its handler (``request_time_throttle``), puts the largest throttle in the
response's throttle_time_ms and reads nothing more from the connection for that long.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import contextvars
import logging
import os
import socket
import time

from .. import _engine
from ..errors import (ClusterAuthorizationFailedError, InvalidConfigError, InvalidRequestError, LogClosedError,
                      StorageError, ThrottlingQuotaExceededError, TransactionalIdAuthorizationFailedError,
                      UnsupportedVersionError)
from ..protocol import ApiKey, api_versions_fallback, decode_request, encode_response, frame_size
from ..quotas.entities import REQUEST
from ..quotas.manager import ClientQuotas
from ..quotas.store import FileQuotaStore, MetadataQuotaStore
from ..security import tls
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from ..security.authorizer import Authorizer, FileAclStore, MetadataAclStore
from ..security.credentials import FileCredentialStore, MetadataCredentialStore
from ..security.listeners import Listener, broker_listeners, inter_broker_listener, mechanisms
from ..security.sasl import FailedLogins, SaslState, plain_users
from .handlers import HANDLERS, CloseConnection, Handlers
from .security_handlers import SASL_APIS
from .local_view import LocalView
from .metrics import Metrics
from .throttling import client_throttles, exempt, quota_user, take_parked

log = logging.getLogger("seglog.broker")

SENDFILE_MIN_BYTES = 64 * 1024
RECEIVE_BUFFER_BYTES = 256 * 1024     # asyncio's own read size, plain and TLS
TLS_WRITE_BYTES = 256 * 1024        # fastest of 64 KiB, 256 KiB and 1 MiB on the 2-core bench machine
_peer_host: contextvars.ContextVar[str] = contextvars.ContextVar("peer_host", default="")
_waited: contextvars.ContextVar[float] = contextvars.ContextVar("waited", default=0.0)
_client_gone: contextvars.ContextVar[asyncio.Event | None] = contextvars.ContextVar("client_gone", default=None)
_connection: contextvars.ContextVar["Connection | None"] = contextvars.ContextVar("connection", default=None)
# (header, size, start, request time recorded): the request being handled, for its quotas
_request: contextvars.ContextVar[list] = contextvars.ContextVar("request", default=[None, 0, 0.0, True])
_throttled: contextvars.ContextVar[int] = contextvars.ContextVar("throttled", default=0)
_API_NAMES = {k: k.name.lower() for k in ApiKey}
ANONYMOUS = "User:ANONYMOUS"


class Connection:
    """One client connection: the listener it came in on, the client's address, its principal (Kafka's
    "User:name"; User:ANONYMOUS until authenticated) and, on a SASL listener, its SaslState. Used by the
    connection's own task only."""

    __slots__ = ("listener", "address", "principal", "sasl", "close_after")

    def __init__(self, listener: Listener, address: str, principal: str, sasl: SaslState | None):
        self.listener, self.address, self.principal, self.sasl = listener, address, principal, sasl
        self.close_after: str | None = None      # set by a handler: close once its response is sent


class _ClientReader(asyncio.StreamReader):
    """A connection's reader that also tells when the client closed its end (``gone``), without reading ahead:
    a handler waiting for a delayed answer (JoinGroup) learns its client went away."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.gone = asyncio.Event()

    def feed_eof(self) -> None:
        super().feed_eof()
        self.gone.set()

    def set_exception(self, exc) -> None:
        super().set_exception(exc)
        self.gone.set()


class _ReaderProtocol(asyncio.StreamReaderProtocol, asyncio.BufferedProtocol):
    """The stream protocol of a connection, fed through a receive buffer (``get_buffer``): the socket is read
    into it, and asyncio's TLS transport decrypts into it, instead of making a bytes object per TLS record and
    joining them. ``buffer_updated`` copies what arrived into the reader at once, so every connection of the
    broker's event loop shares the one buffer (``receive``; a connection costs no buffer of its own)."""

    def __init__(self, reader: asyncio.StreamReader, connected, *, loop, receive: memoryview):
        super().__init__(reader, connected, loop=loop)
        self._receive = receive

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._receive

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self._receive[:nbytes])


class FileChunk:
    """Records of a fetch response to be sent from the segment file: a view of them plus where they live."""

    __slots__ = ("view", "path", "device", "inode", "offset", "length")

    def __init__(self, view, path, device, inode, offset, length):
        self.view, self.path, self.device, self.inode, self.offset, self.length = \
            view, path, device, inode, offset, length

    def __len__(self) -> int:
        return self.length


class Broker:
    """One broker serving a Node. ``await start()`` binds (port 0 picks a free one), ``await stop()`` closes
    connections, stops the group coordinator and closes the node cleanly (flush, clean-shutdown markers)."""

    def __init__(self, node, config, *, host: str | None = None, port: int | None = None,
                 metrics_port: int | None = None, metadata_store=None, ssl_context=None,
                 sasl_users: dict[str, str] | None = None):
        """`host`/`port` replace the first listener's; `ssl_context` (a server ssl.SSLContext) replaces what the
        ssl.* settings would build for every TLS listener; `sasl_users` ({user: password}) are accepted by PLAIN
        and, stored as SCRAM credentials, by SCRAM-SHA-256/512 too (the test-suite door)."""
        self.node = node
        self.config = config
        self.listeners = broker_listeners(config)
        first = self.listeners[0]
        self.host = first.host if host is None else host
        self.port = first.port if port is None else port
        for what, value in (("port", self.port), ("metrics port", metrics_port)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or not 0 <= value <= 65535):
                raise InvalidConfigError(f"Invalid {what} {value!r}: a port is a whole number in 0..65535 "
                                         f"(0 picks a free one)")
        self.metrics_port = metrics_port
        self.metrics = Metrics(losses=node.recovery_losses)
        self.metadata_store = metadata_store
        self.member = None
        self.view = None
        self.handlers = Handlers(self)
        self._servers: list[asyncio.base_events.Server] = []
        self.bound: dict[str, tuple[str, int]] = {}      # listener name -> bound (host, port)
        self._ssl_context = ssl_context
        self._principal_rules = tls.parse_mapping_rules(config.ssl_principal_mapping_rules)
        self._sasl_users = dict(sasl_users or {})
        self.credentials = FileCredentialStore(node.path) if metadata_store is None \
            else MetadataCredentialStore(metadata_store)
        if self._sasl_users:
            from ..security.scram import HASHES, new_credential
            self.credentials.alter([(u, m, new_credential(m, pw)) for u, pw in self._sasl_users.items()
                                    for m in HASHES], [])
        self.failed_logins = FailedLogins()
        acl_store = FileAclStore(node.path) if metadata_store is None else MetadataAclStore(metadata_store)
        self.authorizer = Authorizer.from_config(config, acl_store)         # None: authorization is off
        self.quotas = ClientQuotas(FileQuotaStore(node.path) if metadata_store is None
                                   else MetadataQuotaStore(metadata_store),
                                   samples=config.quota_window_num, window_seconds=config.quota_window_size_seconds)
        self._metrics_server = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters: dict[tuple[str, int], set[asyncio.Event]] = {}
        self._connections: dict[asyncio.Task, asyncio.StreamWriter] = {}
        self._per_ip: dict[str, int] = {}          # peer IP address -> connections open from it
        self._ip_limits = node.config.connection_limit_overrides()
        node.dynamic.add_hook(self._reconfigured)
        self._stopped = False
        self._abandoned = False                    # told to stop while starting (abandon_start)
        self.log_dir_failure: StorageError | None = None   # the disk error that stops a cluster member
        self._failed: asyncio.Event | None = None
        self._disk = concurrent.futures.ThreadPoolExecutor(node.config.num_io_threads, thread_name_prefix="seglog-io")
        self._append_locks: dict[tuple[str, int], asyncio.Lock] = {}

    # -- lifecycle --------------------------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        loop = self._loop
        self._failed = asyncio.Event()

        receive = memoryview(bytearray(RECEIVE_BUFFER_BYTES))     # shared by this loop's connections

        def factory(listener):         # asyncio's protocol factory, with a reader that reports EOF
            def connection():
                return _ReaderProtocol(
                    _ClientReader(limit=1 << 20, loop=loop),
                    lambda r, w: self._serve_connection(r, w, listener), loop=loop, receive=receive)
            return connection
        # bound now (a taken port fails fast, and the port is known to register), accepting connections only
        # once the broker can answer them: in a cluster, after it registered and knows brokers, controller, topics
        try:
            for i, listener in enumerate(self.listeners):
                host, port = (self.host, self.port) if i == 0 else (listener.host, listener.port)
                context = None
                if listener.tls:
                    context = self._ssl_context or tls.server_context(self.config, listener.name)
                server = await loop.create_server(factory(listener), host or None, port, reuse_address=True,
                                                  start_serving=False, ssl=context)
                self._servers.append(server)
                self.bound[listener.name] = (host, server.sockets[0].getsockname()[1])
        except BaseException:
            for server in self._servers:
                server.close()
            raise
        self.port = self.bound[self.listeners[0].name][1]
        if self.metadata_store is None:
            self.view = LocalView(self.node, self.config.broker_id, self.advertised_host(), self.port,
                                  address=self.advertised_address)
        else:
            from ..cluster.member import ClusterMember
            if self._abandoned:
                raise LogClosedError(f"broker {self.config.broker_id} was told to stop while starting")
            self.member = ClusterMember(
                self.node, self.config, self.metadata_store,
                *self.listener_address(inter_broker_listener(self.config, self.listeners)),
                endpoints=self._endpoints(),
                current_listener=lambda: None if (c := _connection.get()) is None else c.listener.name)
            self.view = self.member.view
            self.member.replicas.on_log_dir_failure = self.log_dir_failed
            await self._loop.run_in_executor(None, self.member.start)
        self.node.add_listener(self._on_append)
        for server in self._servers:
            await server.start_serving()
        if self.metrics_port is not None:
            self._metrics_server = await asyncio.start_server(self._serve_metrics, self.host or None,
                                                              self.metrics_port)
            self.metrics_port = self._metrics_server.sockets[0].getsockname()[1]
        log.info("broker %d listening on %s (data dir %s)", self.config.broker_id,
                 ", ".join(f"{li.name}://{h or '*'}:{p}" for li, (h, p) in zip(self.listeners, self.bound.values())),
                 self.node.path)

    def _reconfigured(self, old, new) -> None:
        """Dynamic broker configs changed (seglog.dynamic_config): connection limits apply to the next
        connection; new advertised.listeners to the next answer naming this broker (its listeners stay bound)."""
        if new.max_connections_per_ip_overrides != old.max_connections_per_ip_overrides:
            self._ip_limits = new.connection_limit_overrides()
        if new.num_io_threads != old.num_io_threads:
            if self._loop is None:
                self._resize_disk_pool(new.num_io_threads)
            else:                       # on the loop: no disk call is being handed to the pool being replaced
                self._loop.call_soon_threadsafe(self._resize_disk_pool, new.num_io_threads)
        if new.advertised_listeners != old.advertised_listeners:
            advertised = {li.name: li for li in broker_listeners(new)}
            self.listeners = [dataclasses.replace(li, advertised_host=advertised[li.name].advertised_host,
                                                  advertised_port=advertised[li.name].advertised_port)
                              for li in self.listeners]
            log.info("broker %d advertises %s", new.broker_id,
                     ", ".join(f"{li.name}://{':'.join(map(str, self.listener_address(li)))}"
                               for li in self.listeners))
            if self.member is not None:
                self.member.readvertise(*self.listener_address(inter_broker_listener(new, self.listeners)),
                                        self._endpoints())

    def _resize_disk_pool(self, threads: int) -> None:
        """num.io.threads changed: later disk calls go to a pool of the new size; the old pool finishes the calls
        it has, then its threads end."""
        old, self._disk = self._disk, concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="seglog-io")
        old.shutdown(wait=False)
        log.info("broker %d: %d I/O threads", self.config.broker_id, threads)

    def _endpoints(self) -> list[tuple[str, str, str, int]]:
        """(listener, protocol, advertised host, port) of every listener: what a cluster member registers."""
        return [(li.name, li.protocol, *self.listener_address(li)) for li in self.listeners]

    def listener_address(self, listener: Listener) -> tuple[str, int]:
        """The advertised (host, port) of a listener (its bound address when advertised.listeners leaves it
        out; the machine's name for a wildcard host, the bound port for port 0), as advertised now."""
        listener = next((li for li in self.listeners if li.name == listener.name), listener)
        host, port = listener.advertised_host, listener.advertised_port
        bound_host, bound_port = self.bound.get(listener.name, (listener.host, listener.port))
        if (host, port) == (listener.host, listener.port):       # not advertised apart: where it is bound
            host, port = bound_host, bound_port
        if host in ("", "0.0.0.0", "::"):
            host = socket.getfqdn()
        return host, port or bound_port

    def advertised_address(self) -> tuple[str, int]:
        """The advertised address of the listener the current request came in on (the first listener's
        outside a request)."""
        conn = _connection.get()
        return self.listener_address(conn.listener if conn is not None else self.listeners[0])

    def advertised_host(self) -> str:
        return self.listener_address(self.listeners[0])[0]

    def abandon_start(self) -> None:
        """Told to stop while start() runs (on the loop): a cluster member gives up joining at its next step
        (ClusterMember.abandon_start), so start() raises LogClosedError instead of waiting for metadata that may
        not come (ZooKeeper unreachable); stop() then stops what was started."""
        self._abandoned = True
        if self.member is not None:
            self.member.abandon_start()

    async def stop(self) -> None:
        """In a cluster, a controlled shutdown first (ClusterMember.controlled_shutdown); then stop accepting,
        close every connection, close the node. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        if self.member is not None:             # still serving: clients move with the leaderships it hands over
            await self._loop.run_in_executor(None, self.member.controlled_shutdown)
        self.node.remove_listener(self._on_append)
        for server in (*self._servers, self._metrics_server):
            if server is not None:
                server.close()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for server in (*self._servers, self._metrics_server):
            if server is not None:
                await server.wait_closed()
        if self.member is not None:
            await self._loop.run_in_executor(None, self.member.close)
        self.handlers.close()
        if self.authorizer is not None:
            self.authorizer.close()
        self.quotas.close()
        self.credentials.close()
        self._disk.shutdown(wait=True)
        self.node.close()
        log.info("broker %d stopped", self.config.broker_id)

    # -- connections ------------------------------------------------------------------------------------------

    def _new_connection(self, listener: Listener, writer: asyncio.StreamWriter, who: str) -> Connection:
        principal = ANONYMOUS
        if listener.tls:
            ssl_object = writer.get_extra_info("ssl_object")
            cert = ssl_object.getpeercert() if ssl_object is not None else None
            if cert:
                principal = "User:" + tls.principal_name(tls.subject_dn(cert), self._principal_rules)
        sasl = None
        if listener.sasl:
            plain = {**plain_users(self.config, listener.name), **self._sasl_users}
            sasl = SaslState(mechanisms(self.config, listener.name), self.credentials, plain,
                             self.config.connections_max_reauth_ms)
        return Connection(listener, who, principal, sasl)

    # -- authorization ------------------------------------------------------------------------------------------

    def allowed(self, operation: AclOperation, resource_type: ResourceType, name: str = CLUSTER_NAME) -> bool:
        """May the principal of the request being handled do this (seglog.security.authorizer)? Always when
        authorization is off. Call it on the event loop: the request's connection is not known on other threads,
        where it answers no."""
        if self.authorizer is None:
            return True
        conn = _connection.get()
        if conn is None:
            return False
        return self.authorizer.authorize(conn.principal, _peer_host.get(), operation, resource_type, name)

    def allowed_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """May the request's principal do `operation` on at least one resource of the type? (On the loop.)"""
        if self.authorizer is None:
            return True
        conn = _connection.get()
        if conn is None:
            return False
        return self.authorizer.authorize_any(conn.principal, _peer_host.get(), operation, resource_type)

    def authorize_cluster(self, operation: AclOperation) -> None:
        """ClusterAuthorizationFailedError unless the request's principal may do `operation` on the cluster."""
        if not self.allowed(operation, ResourceType.CLUSTER):
            raise ClusterAuthorizationFailedError(f"Cluster authorization failed ({operation.pascal} on the "
                                                  f"cluster)")

    def authorize_transactional_id(self, transactional_id: str) -> None:
        """TransactionalIdAuthorizationFailedError unless the request's principal may use the transactional id
        (Write on the TransactionalId resource), as Kafka checks InitProducerId, AddPartitionsToTxn,
        AddOffsetsToTxn, EndTxn, TxnOffsetCommit and transactional produce requests."""
        if not self.allowed(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            raise TransactionalIdAuthorizationFailedError(
                f"Transactional Id authorization failed for {transactional_id}")

    def connection(self) -> Connection | None:
        """The connection of the request being handled."""
        return _connection.get()

    # -- client quotas (seglog.broker.throttling) ----------------------------------------------------------------

    def quota_client(self) -> tuple[str, str]:
        """(user, client id) of the request being handled, as its quotas are looked up."""
        header = _request.get()[0]
        return quota_user(_connection.get().principal), (header.client_id if header is not None else "") or ""

    def request_size(self) -> int:
        """The size of the request being handled, its size prefix included."""
        return _request.get()[1]

    def quota_throttle(self, key: str, value: float) -> int:
        """Record `value` against the request's client's quota `key` (seglog.quotas): the throttle time (ms) the
        request's response carries and its connection is muted for, at least (on the loop)."""
        if not self.quotas.enabled:
            return 0
        throttle = self.quotas.throttle_ms(key, *self.quota_client(), value)
        self._note_throttle(throttle)
        return throttle

    def request_time_throttle(self) -> int:
        """Record the handling time of the request being handled so far against its client's request_percentage
        quota, once (the server does it after the handler, unless the handler did): its throttle time (on the
        loop). Waits are left out: a long poll's (``note_wait``) and those marked ``throttling.parked()``."""
        request = _request.get()
        if request[3] or not self.quotas.enabled:
            return 0
        request[3] = True
        busy = max(time.perf_counter() - request[2] - _waited.get() - take_parked(), 0.0)
        return self.quota_throttle(REQUEST, busy * 100)

    def check_mutations(self) -> None:
        """ThrottlingQuotaExceededError while the request's client is over its controller_mutation_rate quota
        (the strict CreateTopics, CreatePartitions and DeleteTopics versions); the response carries the throttle."""
        if self.quotas.enabled:
            try:
                self.quotas.check_mutations(*self.quota_client())
            except ThrottlingQuotaExceededError as e:
                self._note_throttle(e.throttle_ms)
                raise

    def record_mutations(self, partitions: int, strict: bool) -> None:
        """Partitions created or deleted by the request's client (controller_mutation_rate); an older, permissive
        request version is answered with the throttle time they cost."""
        if self.quotas.enabled:
            throttle = self.quotas.record_mutations(*self.quota_client(), partitions)
            if not strict:
                self._note_throttle(throttle)

    @staticmethod
    def _note_throttle(throttle: int) -> None:
        if throttle > _throttled.get():
            _throttled.set(throttle)

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                                listener: Listener) -> None:
        """Count the connection against its IP address's limit (max.connections.per.ip, or its entry in
        max.connections.per.ip.overrides; Kafka's ConnectionQuotas): one past the limit is closed at once,
        before a byte is read, and logged; then serve it."""
        peer = writer.get_extra_info("peername")
        ip = peer[0] if peer else ""
        limit = self._ip_limits.get(ip, self.node.config.max_connections_per_ip)
        if self._per_ip.get(ip, 0) >= limit:
            self.metrics.connections_rejected += 1
            log.info("Rejected connection from /%s, address already has the configured maximum of %d "
                     "connections.", ip, limit)
            writer.close()
            return
        self._per_ip[ip] = self._per_ip.get(ip, 0) + 1
        try:
            await self._serve_counted(reader, writer, listener, peer)
        finally:
            if self._per_ip[ip] == 1:
                del self._per_ip[ip]
            else:
                self._per_ip[ip] -= 1

    async def _serve_counted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                             listener: Listener, peer) -> None:
        who = f"{peer[0]}:{peer[1]}" if peer else "unknown client"
        _peer_host.set(peer[0] if peer else "")
        _client_gone.set(reader.gone)
        conn = self._new_connection(listener, writer, who)
        _connection.set(conn)
        m = self.metrics
        m.connections_open += 1
        m.connections_total += 1
        self._connections[asyncio.current_task()] = writer
        try:
            while True:
                try:
                    prefix = await reader.readexactly(4)
                except asyncio.IncompleteReadError as e:
                    if e.partial:
                        raise InvalidRequestError(f"connection closed inside a frame size ({len(e.partial)} bytes)")
                    return
                limit, setting = self.config.socket_request_max_bytes, "socket.request.max.bytes"
                if conn.sasl is not None and not conn.sasl.authenticated \
                        and self.config.sasl_server_max_receive_size < limit:
                    limit, setting = self.config.sasl_server_max_receive_size, "sasl.server.max.receive.size"
                size = frame_size(prefix, limit, setting)
                try:
                    frame = await reader.readexactly(size)
                except asyncio.IncompleteReadError as e:
                    raise InvalidRequestError(f"connection closed after {len(e.partial)} of a {size}-byte frame")
                if conn.sasl is not None and conn.sasl.raw_tokens:
                    await self._raw_sasl_token(conn, bytes(frame), writer)
                else:
                    await self._answer(frame, writer)
                if conn.close_after:              # a failed login: already logged, rate-limited
                    log.debug("closing connection from %s: %s", who, conn.close_after)
                    return
        except (InvalidRequestError, UnsupportedVersionError) as e:
            m.connection_errors += 1
            log.warning("closing connection from %s: %s", who, e)
        except CloseConnection as e:
            log.info("closing connection from %s: %s", who, e)
        except (ConnectionError, TimeoutError) as e:
            m.connection_errors += 1
            log.info("connection from %s lost: %s", who, e)
        except asyncio.CancelledError:
            return                   # the broker is stopping: end this connection's task quietly
        except Exception:
            m.connection_errors += 1
            log.exception("internal error serving %s; closing its connection", who)
        finally:
            self._connections.pop(asyncio.current_task(), None)
            m.connections_open -= 1
            writer.close()

    async def _answer(self, frame: bytes, writer: asyncio.StreamWriter) -> None:
        t0 = time.perf_counter()
        try:
            header, body = decode_request(frame)
        except UnsupportedVersionError as e:
            if e.header is not None and e.header.api_key == ApiKey.API_VERSIONS:
                sent = await self._write(writer, api_versions_fallback(e.header))
                self.metrics.request("api_versions", time.perf_counter() - t0, len(frame) + 4, sent)
                return
            raise
        _waited.set(0.0)
        take_parked()
        _throttled.set(0)
        _request.set([header, len(frame) + 4, t0, exempt(header, body)])
        name = _API_NAMES[header.api_key]
        conn = _connection.get()
        if conn.sasl is not None and header.api_key not in SASL_APIS:
            if not conn.sasl.authenticated:
                raise InvalidRequestError(f"Unexpected Kafka request of type {ApiKey(header.api_key).name} during "
                                          f"SASL handshake")
            if conn.sasl.expired():
                raise CloseConnection("its session expired (connections.max.reauth.ms) without re-authentication")
        try:
            response = await HANDLERS[header.api_key](self.handlers, header, body)
        except CloseConnection:
            self.metrics.request(name, time.perf_counter() - t0, len(frame) + 4, 0)
            raise
        # a long poll's wait is not the broker's work: reported apart (kind "<api>_wait"), left out of the latency
        waited = _waited.get()
        self.request_time_throttle()
        throttle = _throttled.get()
        client_side = client_throttles(header.api_key, header.api_version)
        held = 0.0
        if throttle:
            self.metrics.observe(f"{name}_throttle", throttle / 1000)
            if response is not None:
                response["throttle_time_ms"] = throttle
        if throttle and (response is None or not client_side):
            await asyncio.sleep(throttle / 1000)        # KIP-219: the response itself waits for an old client
            held = throttle / 1000
            throttle = 0
        sent = 0
        if response is not None:
            sent = await self._write(writer, encode_response(header, response))
        self.metrics.request(name, time.perf_counter() - t0 - waited - held, len(frame) + 4, sent)
        if waited:
            self.metrics.observe(f"{name}_wait", waited)
        if throttle:
            await asyncio.sleep(throttle / 1000)        # muted: nothing more is read from the client meanwhile

    async def _write(self, writer: asyncio.StreamWriter, parts: list) -> int:
        sent = 0
        tls = _connection.get().listener.tls
        for part in parts:
            if isinstance(part, FileChunk):
                if tls:                               # encrypted in user space: the mapped view, no sendfile
                    view = part.view
                    for i in range(0, len(view), TLS_WRITE_BYTES):
                        writer.write(view[i:i + TLS_WRITE_BYTES])
                        await writer.drain()
                else:
                    await writer.drain()
                    await self._sendfile(writer, part)
            else:
                writer.write(part)
            sent += len(part)
        await writer.drain()
        return sent

    async def _sendfile(self, writer: asyncio.StreamWriter, chunk: FileChunk) -> None:
        """Send chunk straight from its segment file; fall back to the view if the file was replaced."""
        try:
            fd = os.open(chunk.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            writer.write(chunk.view)
            return
        with os.fdopen(fd, "rb", buffering=0) as f:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (chunk.device, chunk.inode) or st.st_size < chunk.offset + chunk.length:
                writer.write(chunk.view)
                return
            await self._loop.sendfile(writer.transport, f, chunk.offset, chunk.length)

    async def _raw_sasl_token(self, conn: Connection, token: bytes, writer: asyncio.StreamWriter) -> None:
        """A SASL token after a SaslHandshake v0: answered as a bare size-prefixed token; a failure closes."""
        from .security_handlers import sasl_step
        response, outcome = await sasl_step(self, conn, token)
        if isinstance(outcome, str):
            conn.close_after = outcome
            return
        writer.write(len(response).to_bytes(4, "big") + response)
        await writer.drain()

    def records_chunk(self, view):
        """What a fetch response carries for a records view: the view itself, or a FileChunk for sendfile (on
        a TLS connection ``_write`` sends its view). Called on a disk thread, where the connection is unknown."""
        if len(view) < SENDFILE_MIN_BYTES:
            return view
        where = _engine.file_range(view)
        if where is None:
            return view
        return FileChunk(view, *where)

    def current_peer_host(self) -> str:
        """The client's address as Kafka reports a member's client host (Java's InetAddress.toString():
        "/127.0.0.1")."""
        host = _peer_host.get()
        return f"/{host}" if host else ""

    def client_gone(self) -> asyncio.Event:
        """Set once the client of the request being handled closed its connection."""
        return _client_gone.get() or asyncio.Event()

    def note_wait(self, seconds: float) -> None:
        """A handler spent `seconds` waiting for data (a long poll): kept out of the request's latency."""
        _waited.set(_waited.get() + seconds)

    # -- disk work ------------------------------------------------------------------------------------------------

    async def on_disk(self, fn, *args):
        """fn(*args) on the disk threads (see the module docstring). A disk failure it raises is also reported
        to log_dir_failed."""
        try:
            return await self._loop.run_in_executor(self._disk, fn, *args)
        except StorageError as e:
            self.log_dir_failed(e)
            raise

    async def append_on_disk(self, topic: str, index: int, fn, *args):
        """fn(*args) on the disk threads, after every earlier append_on_disk of the same partition."""
        lock = self._append_locks.get((topic, index))
        if lock is None:
            lock = self._append_locks[(topic, index)] = asyncio.Lock()
        async with lock:
            return await self.on_disk(fn, *args)

    def log_dir_failed(self, error: StorageError) -> None:
        """A write in the data directory failed with a disk error (``StorageError.disk_failure``: full, over
        quota, read-only, EIO). A cluster member then stops, as Kafka's broker halts when its last log directory
        fails, but through a controlled shutdown, so the other in-sync replicas take its leaderships at once and
        no acks=all write waits for it; meanwhile every produce is refused with KAFKA_STORAGE_ERROR
        (``Node.fail_log_dir``); ``wait_failed()`` returns and ``seglog broker`` exits with status 1 (a
        supervisor restarts it: it rejoins as a follower once the disk takes writes again). A lone broker keeps
        serving and answers KAFKA_STORAGE_ERROR until the disk takes writes again: no other replica could lead.
        Any thread; the first failure counts, later ones are ignored."""
        if self.member is None or not error.disk_failure or self.log_dir_failure is not None or self._stopped:
            return
        self.log_dir_failure = error
        self.node.fail_log_dir(error)            # no produce is taken from now on, as an offline log dir
        log.error("Shutdown broker %d because all log dirs in %s have failed: %s", self.config.broker_id,
                  self.node.path, error)
        self._loop.call_soon_threadsafe(self._failed.set)

    async def wait_failed(self) -> None:
        """Return once log_dir_failed stopped serving (never for a lone broker)."""
        await self._failed.wait()

        # -- long polls -------------------------------------------------------------------------------------------

    def data_version(self) -> int:
        return self.node.data_version()

    async def wait_for_data(self, partitions: set, since_version: int, timeout: float) -> None:
        """Return when one of `partitions` got data after since_version, or after timeout seconds."""
        event = asyncio.Event()
        for tp in partitions:
            self._waiters.setdefault(tp, set()).add(event)
        try:
            if self.node.data_version() == since_version:
                await asyncio.wait_for(event.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            for tp in partitions:
                s = self._waiters.get(tp)
                if s is not None:
                    s.discard(event)
                    if not s:
                        del self._waiters[tp]

    def _on_append(self, part) -> None:
        """Node listener (any thread): wake the fetches waiting on this partition."""
        if self._waiters and (part.topic, part.index) in self._waiters and self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake, (part.topic, part.index))

    def _wake(self, tp) -> None:
        for event in self._waiters.get(tp, ()):
            event.set()

    # -- metrics endpoint ---------------------------------------------------------------------------------------

    async def _serve_metrics(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), 5)
            path = request.split()[1].decode() if len(request.split()) > 1 else "/"
            if path == "/metrics.json":
                body, ctype, status = self.metrics.json(), "application/json", "200 OK"
            elif path == "/metrics":
                body, ctype, status = self.metrics.prometheus(), "text/plain; version=0.0.4", "200 OK"
            else:
                body, ctype, status = "see /metrics or /metrics.json\n", "text/plain", "404 Not Found"
            data = body.encode()
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(data)}\r\n"
                         f"Connection: close\r\n\r\n".encode() + data)
            await writer.drain()
        except (asyncio.TimeoutError, ConnectionError, IndexError):
            pass
        finally:
            writer.close()

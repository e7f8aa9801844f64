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
``loop.sendfile`` straight from the segment file (no copy through user space). Fetches wait (long poll) for
``min_bytes`` up to ``max_wait_ms``; appends from any thread wake them through a node listener.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import os
import socket
import time

from .. import _engine
from ..config import parse_listeners
from ..errors import InvalidConfigError, InvalidRequestError, UnsupportedVersionError
from ..protocol import ApiKey, api_versions_fallback, decode_request, encode_response, frame_size
from .handlers import HANDLERS, CloseConnection, Handlers
from .local_view import LocalView
from .metrics import Metrics

log = logging.getLogger("seglog.broker")

SENDFILE_MIN_BYTES = 64 * 1024
_peer_host: contextvars.ContextVar[str] = contextvars.ContextVar("peer_host", default="")
_waited: contextvars.ContextVar[float] = contextvars.ContextVar("waited", default=0.0)
_client_gone: contextvars.ContextVar[asyncio.Event | None] = contextvars.ContextVar("client_gone", default=None)
_API_NAMES = {k: k.name.lower() for k in ApiKey}


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


class FileChunk:
    """Records of a fetch response to be sent from the segment file: a view of them plus where they live."""

    __slots__ = ("view", "path", "device", "inode", "offset", "length")

    def __init__(self, view, path, device, inode, offset, length):
        self.view, self.path, self.device, self.inode, self.offset, self.length = \
            view, path, device, inode, offset, length

    def __len__(self) -> int:
        return self.length


def parse_listener(listener: str) -> tuple[str, int]:
    """('host', port) of a Kafka listeners string like PLAINTEXT://127.0.0.1:9092 (InvalidConfigError for one
    seglog cannot serve: see seglog.config.parse_listeners)."""
    return parse_listeners(listener)


class Broker:
    """One broker serving a Node. ``await start()`` binds (port 0 picks a free one), ``await stop()`` closes
    connections, stops the group coordinator and closes the node cleanly (flush, clean-shutdown markers)."""

    def __init__(self, node, config, *, host: str | None = None, port: int | None = None,
                 metrics_port: int | None = None, metadata_store=None):
        self.node = node
        self.config = config
        bind_host, bind_port = parse_listener(config.listeners)
        self.host = bind_host if host is None else host
        self.port = bind_port if port is None else port
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
        self._server: asyncio.base_events.Server | None = None
        self._metrics_server = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters: dict[tuple[str, int], set[asyncio.Event]] = {}
        self._connections: dict[asyncio.Task, asyncio.StreamWriter] = {}
        self._stopped = False
        self._disk = concurrent.futures.ThreadPoolExecutor(config.num_io_threads, thread_name_prefix="seglog-io")
        self._append_locks: dict[tuple[str, int], asyncio.Lock] = {}

    # -- lifecycle --------------------------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        loop = self._loop

        def connection():              # asyncio.start_server's factory, with a reader that reports EOF
            return asyncio.StreamReaderProtocol(_ClientReader(limit=1 << 20, loop=loop), self._serve_connection,
                                                loop=loop)
        # bound now (a taken port fails fast, and the port is known to register), accepting connections only
        # once the broker can answer them: in a cluster, after it registered and knows brokers, controller, topics
        self._server = await loop.create_server(connection, self.host or None, self.port, reuse_address=True,
                                                start_serving=False)
        self.port = self._server.sockets[0].getsockname()[1]
        if self.metadata_store is None:
            self.view = LocalView(self.node, self.config.broker_id, self.advertised_host(), self.port)
        else:
            from ..cluster.member import ClusterMember
            self.member = ClusterMember(self.node, self.config, self.metadata_store, self.advertised_host(),
                                        self.port)
            self.view = self.member.view
            await self._loop.run_in_executor(None, self.member.start)
        self.node.add_listener(self._on_append)
        await self._server.start_serving()
        if self.metrics_port is not None:
            self._metrics_server = await asyncio.start_server(self._serve_metrics, self.host or None,
                                                              self.metrics_port)
            self.metrics_port = self._metrics_server.sockets[0].getsockname()[1]
        log.info("broker %d listening on %s:%d (data dir %s)", self.config.broker_id, self.host or "*", self.port,
                 self.node.path)

    def advertised_host(self) -> str:
        if self.config.advertised_listeners:
            return parse_listener(self.config.advertised_listeners)[0]
        if self.host in ("", "0.0.0.0", "::"):
            return socket.getfqdn()
        return self.host

    async def stop(self) -> None:
        """In a cluster, a controlled shutdown first (ClusterMember.controlled_shutdown); then stop accepting,
        close every connection, close the node. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        if self.member is not None:             # still serving: clients move with the leaderships it hands over
            await self._loop.run_in_executor(None, self.member.controlled_shutdown)
        self.node.remove_listener(self._on_append)
        for server in (self._server, self._metrics_server):
            if server is not None:
                server.close()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for server in (self._server, self._metrics_server):
            if server is not None:
                await server.wait_closed()
        if self.member is not None:
            await self._loop.run_in_executor(None, self.member.close)
        self.handlers.close()
        self._disk.shutdown(wait=True)
        self.node.close()
        log.info("broker %d stopped", self.config.broker_id)

    # -- connections ------------------------------------------------------------------------------------------

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        who = f"{peer[0]}:{peer[1]}" if peer else "unknown client"
        _peer_host.set(peer[0] if peer else "")
        _client_gone.set(reader.gone)
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
                size = frame_size(prefix, self.config.socket_request_max_bytes)
                try:
                    frame = await reader.readexactly(size)
                except asyncio.IncompleteReadError as e:
                    raise InvalidRequestError(f"connection closed after {len(e.partial)} of a {size}-byte frame")
                await self._answer(frame, writer)
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
        name = _API_NAMES[header.api_key]
        try:
            response = await HANDLERS[header.api_key](self.handlers, header, body)
        except CloseConnection:
            self.metrics.request(name, time.perf_counter() - t0, len(frame) + 4, 0)
            raise
        sent = 0
        if response is not None:
            sent = await self._write(writer, encode_response(header, response))
        # a long poll's wait is not the broker's work: reported apart (kind "<api>_wait"), left out of the latency
        waited = _waited.get()
        self.metrics.request(name, time.perf_counter() - t0 - waited, len(frame) + 4, sent)
        if waited:
            self.metrics.observe(f"{name}_wait", waited)

    async def _write(self, writer: asyncio.StreamWriter, parts: list) -> int:
        sent = 0
        for part in parts:
            if isinstance(part, FileChunk):
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

    def records_chunk(self, view):
        """What a fetch response carries for a records view: the view itself, or a FileChunk for sendfile."""
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
        """fn(*args) on the disk threads (see the module docstring)."""
        return await self._loop.run_in_executor(self._disk, fn, *args)

    async def append_on_disk(self, topic: str, index: int, fn, *args):
        """fn(*args) on the disk threads, after every earlier append_on_disk of the same partition."""
        lock = self._append_locks.get((topic, index))
        if lock is None:
            lock = self._append_locks[(topic, index)] = asyncio.Lock()
        async with lock:
            return await self._loop.run_in_executor(self._disk, fn, *args)

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

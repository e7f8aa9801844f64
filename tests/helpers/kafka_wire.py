"""A raw Kafka-protocol client for broker tests: blocking sockets plus seglog's protocol codec.

    with RawConnection(("127.0.0.1", port)) as c:
        body = c.request(ApiKey.METADATA, 8, {"topics": None})
        c.send_bytes(b"\\x00\\x00\\x00\\x02ab")            # anything at all, for robustness tests
        assert c.closed_by_peer()

Record batches for raw Produce requests come from kafka-python's pure-Python builder
(``kafka.record.default_records.DefaultRecordBatchBuilder``), an encoder nobody here wrote, so a batch the
broker accepts or rejects is judged against an independent implementation of the format.
"""

from __future__ import annotations

import itertools
import select
import socket
import ssl
import struct
import time

from seglog.protocol import RequestHeader, decode_response, encode_request

_ids = itertools.count(1)


class RawConnection:
    """One TCP connection to a broker. Requests get increasing correlation ids; ``recv`` reads one response."""

    def __init__(self, address, timeout: float = 10.0, client_id: str | None = "raw-test", ssl_context=None):
        """`ssl_context` (a client ssl.SSLContext): TLS to the broker (its certificate must name "localhost")."""
        self.sock = socket.create_connection(address, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:
            try:
                self.sock = ssl_context.wrap_socket(self.sock, server_hostname="localhost")
            except BaseException:
                self.sock.close()
                raise
        self.client_id = client_id

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "RawConnection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- sending ----------------------------------------------------------------------------------------------
    def frame(self, api_key: int, version: int, body: dict, correlation_id: int | None = None):
        """(header, frame bytes with the size prefix) of one request; nothing is sent."""
        header = RequestHeader(int(api_key), version, next(_ids) if correlation_id is None else correlation_id,
                               self.client_id)
        return header, b"".join(encode_request(header, body))

    def send(self, api_key: int, version: int, body: dict, correlation_id: int | None = None) -> RequestHeader:
        header, data = self.frame(api_key, version, body, correlation_id)
        self.sock.sendall(data)
        return header

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    # -- receiving --------------------------------------------------------------------------------------------
    def _exactly(self, n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            chunk = self.sock.recv(min(n - got, 1 << 20))
            if not chunk:
                raise ConnectionError(f"connection closed after {got} of {n} bytes")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def recv_frame(self) -> bytes:
        """The next response frame (without its size prefix)."""
        (size,) = struct.unpack(">i", self._exactly(4))
        return self._exactly(size)

    def recv(self, header: RequestHeader) -> dict:
        return decode_response(header, self.recv_frame())

    def request(self, api_key: int, version: int, body: dict) -> dict:
        return self.recv(self.send(api_key, version, body))

    def readable_within(self, seconds: float) -> bool:
        """True if the broker sent something (or closed) within `seconds`."""
        r, _, _ = select.select([self.sock], [], [], seconds)
        return bool(r)

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True if the broker closes this connection within `timeout` (EOF or reset) without sending a byte
        first; False if it stays open that long. AssertionError if bytes arrive instead."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self.readable_within(left):
                return False
            try:
                data = self.sock.recv(4096)
            except (ConnectionResetError, BrokenPipeError, ssl.SSLEOFError):
                return True
            if not data:
                return True
            raise AssertionError(f"expected the broker to close the connection, got {len(data)} bytes: {data[:64]!r}")


def record_batch(records, *, compression: int = 0, producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1, transactional: bool = False) -> bytes:
    """A v2 record batch built by kafka-python's builder. records: (timestamp ms, key, value, headers) tuples
    with headers a list of (str, bytes) pairs."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, compression, transactional, producer_id, producer_epoch, base_sequence,
                                        batch_size=1 << 30)
    for i, (ts, key, value, headers) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=list(headers))
    return bytes(builder.build())


def produce_body(topic: str, partition: int, batch: bytes, acks: int = -1, timeout_ms: int = 5000) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}


def fetch_body(topic: str, partition: int, offset: int, *, max_wait_ms: int = 0, min_bytes: int = 1,
               max_bytes: int = 50 << 20, partition_max_bytes: int = 10 << 20) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                                        "partition_max_bytes": partition_max_bytes}]}]}


def batches(records_bytes):
    """kafka-python's reader over the records bytes of a fetch response: a list of DefaultRecordBatch."""
    from kafka.record.memory_records import MemoryRecords

    mr = MemoryRecords(bytes(records_bytes))
    out = []
    while True:
        b = mr.next_batch()
        if b is None:
            return out
        out.append(b)


def stored_batches(part):
    """kafka-python's reader over every batch of an in-process partition (seglog.node.Partition), in order."""
    out, offset, end = [], part.log.start_offset, part.log.end_offset
    while offset < end:
        for b in batches(part.log.read(offset, 8 << 20)):
            if b.next_offset > offset:
                out.append(b)
                offset = b.next_offset
    return out

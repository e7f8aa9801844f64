"""Frames and headers: the entry points that turn wire bytes into (header, body) and back.

A frame is an int32 size followed by that many bytes: a header, then the message body. Requests use header
v1 (api_key int16, api_version int16, correlation_id int32, client_id nullable int16 string), or v2 (v1 plus
tagged fields) in flexible versions. Responses use header v0 (correlation_id), or v1 (plus tagged fields) in
flexible versions, except ApiVersions responses, which always use v0.

Encoders return *parts*: a list of ``bytes`` objects interleaved with the external chunks that were passed as
records values, the int32 size prefix included and every length already counting the chunks. Without
external chunks the list is exactly one ``bytes`` object. Writing the parts in order (``sendfile`` for the
chunks) puts the frame on the wire.

Bytes after a request body are ignored, as Kafka's brokers ignore them (librdkafka's Metadata v9+ request for
all topics carries three: a 4-byte placeholder where one byte belongs); bytes after a response body are an error.

Decoders raise only :class:`InvalidRequestError` (malformed, truncated, trailing bytes in a response) and
:class:`UnsupportedVersionError` (api key or version seglog does not speak). Both carry ``header``: the
:class:`RequestHeader` as far as it could be read (``client_id`` None if that part was unreadable), or None.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..errors import InvalidArgumentError, InvalidRequestError, UnsupportedVersionError
from .registry import ApiKey, api_versions_body, codec
from .wire import skip_tagged_fields

__all__ = ["MAX_REQUEST_BYTES", "RequestHeader", "frame_size", "decode_request", "encode_response",
           "encode_request", "decode_response", "api_versions_fallback"]

#: Kafka's ``socket.request.max.bytes`` default: the largest request frame a broker accepts.
MAX_REQUEST_BYTES = 104857600

_FIXED_HEADER = struct.Struct(">hhi")
_HEADER_V1 = struct.Struct(">hhih").unpack_from              # the fixed part and the client_id length
_i16 = struct.Struct(">h").unpack_from
_i32 = struct.Struct(">i").unpack_from
_pack_i16 = struct.Struct(">h").pack
_pack_i32 = struct.Struct(">i").pack
_ENCODE_ERRORS = (struct.error, TypeError, AttributeError, ValueError, OverflowError)


class RequestHeader(NamedTuple):
    """A request header; clients build one per request, the broker gets one from :func:`decode_request`."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


def frame_size(prefix, max_bytes: int = MAX_REQUEST_BYTES, setting: str = "socket.request.max.bytes") -> int:
    """The size announced by a frame's 4-byte prefix; InvalidRequestError if negative or above ``max_bytes``
    (the error names ``setting``, the configuration ``max_bytes`` comes from).

    Call it before reading (allocating) the frame itself.
    """
    if len(prefix) != 4:
        raise _error(InvalidRequestError, f"a frame size prefix is 4 bytes, not {len(prefix)}", None)
    size = _i32(prefix)[0]
    if size < 0 or size > max_bytes:
        raise _error(InvalidRequestError, f"frame size {size} is outside 0..{max_bytes} ({setting})",
                     None)
    return size


def decode_request(frame) -> tuple[RequestHeader, dict]:
    """Decode one request frame (the bytes after the size prefix) into its header and body.

    ``frame`` is any bytes-like object; records in the body are memoryview slices of it (keep it alive and
    unmodified while they are used).
    """
    buf = _view(frame)
    if len(buf) < 10:
        header = RequestHeader(*_FIXED_HEADER.unpack_from(buf)) if len(buf) >= 8 else None
        raise _error(InvalidRequestError, f"request header truncated at {len(buf)} bytes", header)
    api_key, api_version, correlation_id, n = _HEADER_V1(buf)
    if n < 0 or n > len(buf) - 10:
        if n != -1:
            raise _error(InvalidRequestError, f"request header client_id length {n} is invalid",
                         RequestHeader(api_key, api_version, correlation_id))
        header = RequestHeader(api_key, api_version, correlation_id)
    else:
        try:
            header = RequestHeader(api_key, api_version, correlation_id, str(buf[10:10 + n], "utf-8"))
        except UnicodeDecodeError as e:
            raise _error(InvalidRequestError, f"request header client_id is not UTF-8: {e}",
                         RequestHeader(api_key, api_version, correlation_id)) from e
    return header, _decode_body(_codec(header, False), buf, 10 + max(n, 0), header, trailing=True)


def encode_response(header: RequestHeader, body: dict) -> list:
    """Encode the response to ``header``'s request from the mapping ``body``; returns parts (see module doc)."""
    return _encode(_codec(header, True), header, body, _response_header)


def encode_request(header: RequestHeader, body: dict) -> list:
    """Encode a request from its header and the mapping ``body``; returns parts (see module doc)."""
    return _encode(_codec(header, False), header, body, _request_header)


def decode_response(header: RequestHeader, frame) -> dict:
    """Decode the response frame (bytes after the size prefix) to the request sent with ``header``.

    InvalidRequestError if its correlation id is not ``header.correlation_id`` (Kafka answers in order). An
    ApiVersions response carrying UNSUPPORTED_VERSION is decoded as v0, the form brokers send it in.
    """
    c = _codec(header, True)
    buf = _view(frame)
    if len(buf) < 4:
        raise _error(InvalidRequestError, f"response header truncated at {len(buf)} bytes", header)
    correlation_id = _i32(buf)[0]
    if correlation_id != header.correlation_id:
        raise _error(InvalidRequestError, f"response correlation id {correlation_id} does not match the request's "
                                          f"{header.correlation_id}", header)
    if header.api_key == ApiKey.API_VERSIONS:
        if len(buf) >= 6 and _i16(buf, 4)[0] == UnsupportedVersionError.code:
            c = codec(ApiKey.API_VERSIONS, 0, True)
        return _decode_body(c, buf, 4, header, header_tags=False)
    return _decode_body(c, buf, 4, header)


def api_versions_fallback(header: RequestHeader) -> list:
    """The parts answering an ApiVersions request of an unsupported version, as Kafka brokers do.

    A v0 body (response header v0) with error 35 UNSUPPORTED_VERSION and the supported ranges; the client
    then retries with the highest ApiVersions version both sides know.
    """
    return _encode(codec(ApiKey.API_VERSIONS, 0, True), header, api_versions_body(UnsupportedVersionError.code),
                   _response_header)


def _codec(header: RequestHeader, response: bool):
    c = codec(header.api_key, header.api_version, response)
    if c is None:
        raise _error(UnsupportedVersionError, f"api key {header.api_key} version {header.api_version} is not supported",
                     header)
    return c


def _request_header(c, header: RequestHeader) -> bytes:
    """Request header v1, or v2 (empty tagged fields) in flexible versions."""
    head = _FIXED_HEADER.pack(header.api_key, header.api_version, header.correlation_id)
    if header.client_id is None:
        head += b"\xff\xff"
    else:
        client_id = header.client_id.encode()
        head += _pack_i16(len(client_id)) + client_id
    return head + b"\x00" if c.flexible else head


def _response_header(c, header: RequestHeader) -> bytes:
    """Response header v0, or v1 (empty tagged fields) in flexible versions other than ApiVersions'."""
    head = _pack_i32(header.correlation_id)
    return head + b"\x00" if c.flexible and header.api_key != ApiKey.API_VERSIONS else head


def _view(frame) -> memoryview:
    buf = memoryview(frame)
    if buf.format != "B" or buf.ndim != 1:
        buf = buf.cast("B")
    return buf


def _decode_body(c, buf: memoryview, pos: int, header: RequestHeader, header_tags: bool = True,
                 trailing: bool = False) -> dict:
    try:
        if c.flexible and header_tags:
            pos = skip_tagged_fields(buf, pos)
        body, pos = c.decode(buf, pos)
    except InvalidRequestError as e:
        e.header = header
        raise
    except (struct.error, UnicodeDecodeError) as e:
        raise _error(InvalidRequestError, f"malformed {_name(header)}: {e}", header) from e
    if pos != len(buf) and not trailing:
        raise _error(InvalidRequestError, f"{len(buf) - pos} trailing bytes after {_name(header)}", header)
    return body


def _encode(c, header: RequestHeader, body: dict, make_header) -> list:
    try:
        out = [b"", make_header(c, header)]
        external = c.encode(body, out)
        out[0] = _pack_i32(sum(map(len, out)))
    except _ENCODE_ERRORS as e:
        raise InvalidArgumentError(f"cannot encode {_name(header)}: {type(e).__name__}: {e}") from e
    if not external:
        return [b"".join(out)]
    parts, run = [], []
    for part in out:
        if isinstance(part, (bytes, bytearray, memoryview)):
            run.append(part)
        else:
            if run:
                parts.append(b"".join(run))
                run = []
            parts.append(part)
    if run:
        parts.append(b"".join(run))
    return parts


def _name(header: RequestHeader) -> str:
    try:
        name = ApiKey(header.api_key).name
    except ValueError:
        name = f"api {header.api_key}"
    return f"{name} v{header.api_version}"


def _error(cls, message: str, header: RequestHeader | None):
    err = cls(message)
    err.header = header
    return err

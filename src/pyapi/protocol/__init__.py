"""seglog.protocol: the Kafka wire codec (frames, headers, message bodies by API key and version). No I/O.

Broker direction::

    size = frame_size(prefix4)               # InvalidRequestError if < 0 or > max_bytes; before allocating
    header, body = decode_request(frame)     # frame: the `size` bytes after the prefix
    parts = encode_response(header, {...})   # list: bytes and external chunks, size prefix included
    # unsupported ApiVersions version: catch UnsupportedVersionError e, send api_versions_fallback(e.header)

Client direction::

    header = RequestHeader(ApiKey.FETCH, 11, correlation_id, "seglog-follower")
    parts = encode_request(header, {...})
    body = decode_response(header, frame)    # checks the correlation id

Bodies are plain dicts keyed by Kafka's message-JSON field names in snake_case, nested as the spec nests
them, e.g. a Produce request ``body["topic_data"][i]["partition_data"][j]["records"]``; a Fetch response
``body["responses"][i]["partitions"][j]["records"]``; a Metadata response ``body["topics"][i]["partitions"]``.
The schemas in ``messages_data``, ``messages_groups`` and ``messages_admin`` list every field, its versions and
default. Decoded bodies hold every field of the schema; a field the version lacks holds its default (so
handlers need not branch on version). Encoders take any mapping of the same shape: missing keys take their
defaults (``throttle_time_ms`` 0, ``error_code`` 0, offsets and epochs -1 where Kafka says so, nullable
fields None, arrays empty, tagged fields left out), unknown keys are ignored.

Value types: ints and bools as Python ints/bools, strings ``str``, bytes fields ``bytes`` (encoders take any
flat bytes-like object), records fields raw record-batch bytes that are never parsed here.

Records and external chunks: a decoded records field is a zero-copy ``memoryview`` slice of the frame (None
when null). To encode one, pass bytes, bytearray or memoryview to have it copied into the frame, or an
*external chunk*: any other object with ``__len__`` (its byte count), e.g. a file slice for ``sendfile``.
The encoder then returns ``[bytes, chunk, bytes, chunk, ..., bytes]`` with every size and length prefix
already counting the chunks; without chunks it returns ``[frame_bytes]``.

Errors: decoders raise only ``errors.InvalidRequestError`` and ``errors.UnsupportedVersionError``, with a
``header`` attribute (the request header as far as it was readable, or None); encoders raise
``errors.InvalidArgumentError`` for values that do not fit their fields and UnsupportedVersionError for
versions seglog does not speak. Acks=0 Produce requests expect no response: the broker reads ``body["acks"]``.
"""

from .framing import (MAX_REQUEST_BYTES, RequestHeader, api_versions_fallback, decode_request, decode_response,
                      encode_request, encode_response, frame_size)
from .registry import SUPPORTED_VERSIONS, ApiKey, api_versions_body

__all__ = ["ApiKey", "MAX_REQUEST_BYTES", "RequestHeader", "SUPPORTED_VERSIONS", "api_versions_body",
           "api_versions_fallback", "decode_request", "decode_response", "encode_request", "encode_response",
           "frame_size"]

"""Fuzz targets: each takes one input (bytes) and raises only for a defect (see FINDINGS in __init__).

batch    the batch validator and decoder: validate_client_batch, batches, decode_records, arrow_columns on the
         input as it is and, when its first byte is odd, with length, magic and CRC fixed so the checks that
         stop random bytes are passed and the record walk is reached.
records  the record decoder: the input (after a mode byte and a count byte) becomes the records section of a
         batch around a valid header; with mode bit 3 it is first compressed with the codec the mode names, so
         the decoder parses it after decompression.
codecs   the decompressors as the engine uses them (gzip, snappy raw and xerial-framed, lz4 frame, zstd): the
         input is the compressed records section of a valid batch of the codec the mode byte names.
frame    the protocol frame decoder: decode_request (and decode_response for the header the input implies);
         what decodes must re-encode to the same request.
sasl     the broker's SASL exchanges (mode byte, then a token): PLAIN's one message, a SCRAM client-first, or a
         SCRAM client-final after a valid client-first (``@N`` in it becomes the server's nonce; with mode 3 the
         input is the client-final without its proof, and the right proof is appended). Only
         SaslAuthenticationError may escape, an exchange may succeed only with the right password, and an
         accepted client-first's user must be the RFC 5802 decoding of its n= attribute.
"""

import base64
import hashlib
import hmac
import struct

from seglog import _engine, errors
from seglog.security.sasl import PlainServer
from seglog.security.scram import HASHES, ScramServer, credential_from_salted, salted_password

_HEADER = struct.Struct(">qiibIhiqqqhii")        # the 61-byte v2 batch header, CRC over bytes 21..
ENGINE_ERRORS = (errors.SeglogError,)            # bad input must raise one of seglog's errors, nothing else
FRAME_ERRORS = (errors.InvalidRequestError, errors.UnsupportedVersionError)
SASL_ERRORS = (errors.SaslAuthenticationError,)  # a failed exchange is an authentication failure, nothing else


def fix_batch(batch: bytearray) -> bytearray:
    """The first batch of `batch` with its length (the whole input), magic and CRC made right."""
    if len(batch) >= _HEADER.size:
        struct.pack_into(">i", batch, 8, len(batch) - 12)
        batch[16] = 2
        struct.pack_into(">I", batch, 17, _engine.crc32c(memoryview(batch)[21:]))
    return batch


def wrap_records(section: bytes, codec: int, count: int) -> bytearray:
    """A batch of `count` records (header valid, CRC right) whose records section is `section`."""
    header = _HEADER.pack(0, _HEADER.size - 12 + len(section), 0, 2, 0, codec, count - 1, 1000, 1000,
                          -1, -1, -1, count)
    return fix_batch(bytearray(header + section))


def _engine_calls(data) -> None:
    for call in (lambda: _engine.validate_client_batch(data, 1 << 30),
                 lambda: _engine.batches(data),
                 lambda: _engine.decode_records(data),
                 lambda: _engine.arrow_columns(data, include_headers=True, verify_crc=True)):
        try:
            call()
        except ENGINE_ERRORS:
            pass


def batch(data: bytes) -> None:
    if not data:
        return
    body = bytearray(data[1:])
    _engine_calls(fix_batch(body) if data[0] & 1 else body)


def records(data: bytes) -> None:
    if len(data) < 2:
        return
    codec = data[0] % 5
    section = data[2:]
    if data[0] & 8 and codec:
        section = _engine.compress_records(codec, section)
    _engine_calls(wrap_records(section, codec, data[1]))


XERIAL = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"


def codecs(data: bytes) -> None:
    if not data:
        return
    codec = 1 + data[0] % 4
    section = data[1:]
    if codec == 2 and data[0] & 4:
        section = XERIAL + section                  # the Java clients' framing, chunks of [length][block]
    _engine_calls(wrap_records(section, codec, 1 + (data[0] >> 4)))


def frame(data: bytes) -> None:
    from seglog.protocol import decode_request, encode_request
    try:
        header, body = decode_request(data)
    except FRAME_ERRORS:
        return
    again = decode_request(b"".join(encode_request(header, body))[4:])
    if again[0] != header:
        raise AssertionError(f"re-encoded header differs: {again[0]} != {header}")


SASL_USER, SASL_PASSWORD = "alice", "alice-secret"
SASL_CLIENT_FIRST = b"n,,n=alice,r=fuzznonce"
_SALT = b"fuzz-salt"
_SALTED = {m: salted_password(m, SASL_PASSWORD.encode(), _SALT, 4096) for m in HASHES}    # once: PBKDF2 is slow
_CREDENTIALS = {m: credential_from_salted(m, _SALTED[m], _SALT, 4096) for m in HASHES}


def _scram_proof(mechanism: str, server_first: bytes, without_proof: bytes) -> bytes:
    """The client proof of alice for this exchange (RFC 5802: ClientKey XOR HMAC(StoredKey, AuthMessage))."""
    h = HASHES[mechanism]
    auth_message = SASL_CLIENT_FIRST[3:] + b"," + server_first + b"," + without_proof
    client_key = hmac.digest(_SALTED[mechanism], b"Client Key", h)
    signature = hmac.digest(hashlib.new(h, client_key).digest(), auth_message, h)
    return base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature)))


def sasl(data: bytes) -> None:
    if not data:
        return
    mode, token = data[0] & 3, data[1:]
    if mode == 0:
        server = PlainServer({SASL_USER: SASL_PASSWORD})
        try:
            server.step(token)
        except SASL_ERRORS:
            return
        if server.user != SASL_USER or token.split(b"\0")[2] != SASL_PASSWORD.encode() \
                or server.known_user != SASL_USER:
            raise AssertionError(f"PLAIN accepted {token!r}")
        return
    mechanism = "SCRAM-SHA-512" if data[0] & 4 else "SCRAM-SHA-256"
    looked_up = []

    def lookup(user: str):
        looked_up.append(user)
        return _CREDENTIALS[mechanism] if user == SASL_USER else None

    server = ScramServer(mechanism, lookup)
    try:
        if mode == 1:
            server.step(token)
            escaped = looked_up[0].replace("=", "=3D").replace(",", "=2C")     # saslname decoding undone
            if f"n={escaped}" not in token.decode() or server.known_user not in (None, SASL_USER):
                raise AssertionError(f"SCRAM user {looked_up[0]!r} is not the decoded name of {token!r}")
            return
        server_first = server.step(SASL_CLIENT_FIRST)
        token = token.replace(b"@N", server_first.split(b",")[0][2:])
        if mode == 3:
            token += b",p=" + _scram_proof(mechanism, server_first, token)
        server_final = server.step(token)
    except SASL_ERRORS:
        return
    if mode == 2 or not server.complete or server.user != SASL_USER or not server_final.startswith(b"v="):
        raise AssertionError(f"SCRAM (mode {mode}) accepted {token!r} without the password's proof")


TARGETS = {"batch": batch, "records": records, "codecs": codecs, "frame": frame, "sasl": sasl}

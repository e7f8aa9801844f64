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
"""

import struct

from seglog import _engine, errors

_HEADER = struct.Struct(">qiibIhiqqqhii")        # the 61-byte v2 batch header, CRC over bytes 21..
ENGINE_ERRORS = (errors.SeglogError,)            # bad input must raise one of seglog's errors, nothing else
FRAME_ERRORS = (errors.InvalidRequestError, errors.UnsupportedVersionError)


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


TARGETS = {"batch": batch, "records": records, "codecs": codecs, "frame": frame}

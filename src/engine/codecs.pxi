# Compression codecs of the records section of a batch (codec id = attributes bits 0-2).
#
# A batch is compressed as a whole (one call per batch, never per record), so the codec libraries are called
# from here through Python: lz4 (frame format, independent 64 KiB blocks, no checksums: what Kafka writes),
# zlib for gzip, cramjam for snappy and zstd. Readers accept lz4 frames with or without content size, and
# snappy both raw (librdkafka) and in xerial framing (Java clients: b"\x82SNAPPY\x00" + version + compat,
# then chunks of [int32 length][raw snappy block]). The libraries release the GIL on large inputs themselves.

import zlib as _zlib

CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")

cdef object _lz4_frame = None
cdef object _cramjam = None
cdef bytes XERIAL_MAGIC = b"\x82SNAPPY\x00"
cdef int XERIAL_BLOCK = 32 * 1024


cdef int codec_id(object name) except -1:
    """Codec id for a name (None/'none'/'uncompressed' -> 0). Raises UnsupportedCompressionTypeError."""
    if name is None:
        return CODEC_NONE
    if isinstance(name, int):
        if 0 <= name <= 4:
            return name
    elif isinstance(name, str):
        if name == "uncompressed":
            return CODEC_NONE
        if name in CODEC_NAMES:
            return CODEC_NAMES.index(name)
    raise _errors.UnsupportedCompressionTypeError(
        f"unknown compression {name!r}: use one of none, gzip, snappy, lz4, zstd")


cdef object _lz4():
    global _lz4_frame
    if _lz4_frame is None:
        import lz4.frame
        _lz4_frame = lz4.frame
    return _lz4_frame


cdef object _cj():
    global _cramjam
    if _cramjam is None:
        import cramjam
        _cramjam = cramjam
    return _cramjam


cdef bytes compress(int codec, object data):
    """Compress the records section `data` (a 1-D unsigned-byte view: _xerial_compress slices it) with
    codec 1-4."""
    if codec == CODEC_LZ4:
        f = _lz4()
        return f.compress(data, block_size=f.BLOCKSIZE_MAX64KB, block_linked=False,
                          content_checksum=False, block_checksum=False, store_size=False)
    if codec == CODEC_GZIP:
        c = _zlib.compressobj(6, _zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == CODEC_SNAPPY:
        return _xerial_compress(data)
    if codec == CODEC_ZSTD:
        return bytes(_cj().zstd.compress(data))
    raise _errors.UnsupportedCompressionTypeError(f"unknown codec id {codec}")


cdef bytes _xerial_compress(object data):
    cdef list parts = [XERIAL_MAGIC, b"\x00\x00\x00\x01\x00\x00\x00\x01"]
    cdef Py_ssize_t n = len(data), i = 0
    mv = memoryview(data)
    raw = _cj().snappy.compress_raw
    while i < n:
        block = bytes(raw(mv[i:i + XERIAL_BLOCK]))
        parts.append(len(block).to_bytes(4, "big"))
        parts.append(block)
        i += XERIAL_BLOCK
    return b"".join(parts)


cdef bytes decompress(int codec, object data):
    """Decompress a records section; raises CorruptRecordError if the data does not decode."""
    try:
        if codec == CODEC_LZ4:
            return _lz4().decompress(data)
        if codec == CODEC_GZIP:
            return _zlib.decompress(data, 47)          # gzip or zlib header, auto-detected
        if codec == CODEC_SNAPPY:
            if bytes(data[:8]) == XERIAL_MAGIC:
                return _xerial_decompress(data)
            return bytes(_cj().snappy.decompress_raw(data))
        if codec == CODEC_ZSTD:
            return bytes(_cj().zstd.decompress(data))
    except _errors.SeglogError:
        raise
    except Exception as e:
        raise _errors.CorruptRecordError(f"{CODEC_NAMES[codec]} records do not decompress: {e}") from None
    raise _errors.UnsupportedCompressionTypeError(f"unknown compression codec id {codec} in batch attributes")


cdef bytes _xerial_decompress(object data):
    mv = memoryview(data)
    cdef Py_ssize_t pos = 16, n = len(mv), size
    cdef list out = []
    raw = _cj().snappy.decompress_raw
    while pos < n:
        if pos + 4 > n:
            raise ValueError("truncated xerial chunk header")
        size = int.from_bytes(mv[pos:pos + 4], "big")
        pos += 4
        if size < 0 or pos + size > n:
            raise ValueError("truncated xerial chunk")
        out.append(bytes(raw(mv[pos:pos + size])))
        pos += size
    return b"".join(out)


def codec_name(name):
    """The canonical name of a compression setting (None, 'none' and 'uncompressed' give 'none').
    Raises UnsupportedCompressionTypeError for anything else than none, gzip, snappy, lz4, zstd."""
    return CODEC_NAMES[codec_id(name)]


def compress_records(int codec, data):
    """The records section `data` compressed with codec id 1-4 exactly as BatchWriter does (for code that
    rebuilds batches, e.g. the log cleaner). Raises UnsupportedCompressionTypeError for other ids."""
    cdef Py_buffer b
    if not 1 <= codec <= 4:
        raise _errors.UnsupportedCompressionTypeError(f"unknown compression codec id {codec}")
    take_bytes(data, &b, "records")
    try:
        return compress(codec, PyMemoryView_FromMemory(<char *>b.buf, b.len, PyBUF_READ))
    finally:
        PyBuffer_Release(&b)

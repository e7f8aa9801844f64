# Compression codecs of the records section of a batch (codec id = attributes bits 0-2).
#
# A batch is compressed as a whole (one call per batch, never per record), so the codec libraries are called
# from here through Python. Writers: lz4 (frame format, independent 64 KiB blocks, no checksums: what Kafka
# writes), zlib for gzip, cramjam for snappy and zstd; readers use cramjam for all four (bounded: see
# inflate below). Readers accept lz4 frames with or without content size, and
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


# Inflation limits. A records section never inflates past a limit: the decoders stop as soon as the output
# would pass it and never hold more than limit + 1 bytes of it. gzip, lz4 and zstd stream into a buffer
# (cramjam's decompress_into, which fails once the buffer is full) sized by the size the data states (zstd's
# frame content size, gzip's ISIZE trailer: hints only, a lie just does not fit), else 16x the input, grown 8x
# while the output does not fit, at most limit + 1 bytes (the retries cost at most 1/7 more work); snappy
# blocks state their length in their header, which is checked before anything is inflated.
# A client batch may inflate to INFLATE_RATIO x max.message.bytes (32 MiB with Kafka's default 1 MiB):
# validate_client_batch refuses more with RecordTooLargeError (MESSAGE_TOO_LARGE, as Kafka answers a batch over
# its size limits; Java producers split such a batch and retry). Kafka itself inflates record by record without
# a total limit; ratios above 32 are bombs rather than data (text compresses 3-15x). Reads of stored batches
# allow MAX_INFLATED_BYTES (2 GiB - 1: Kafka's record and batch sizes are int32).
INFLATE_RATIO = 32
MAX_INFLATED_BYTES = 0x7fffffff
# The sizes data states are hints that cost memory before a byte is inflated: a 343-byte gzip batch stating
# 1.9 GB made a read allocate (and zero) 1.9 GB. A stated size above HINT_RATIO x the input (deflate's own
# maximum is 1032:1) is ignored: the buffer then grows with the real output. A raw snappy block cannot encode
# more than SNAPPY_MAX_RATIO x its size (a 3-byte copy yields at most 64 bytes), so a larger stated length
# is corrupt.
cdef int64_t HINT_RATIO = 1032
cdef int64_t SNAPPY_MAX_RATIO = 22


def inflate_limit(Py_ssize_t max_message_bytes):
    """How far a client batch's records may inflate under max.message.bytes: INFLATE_RATIO x it (see above)."""
    return min(<int64_t>max_message_bytes * INFLATE_RATIO, MAX_INFLATED_BYTES)


cdef class Inflated:
    """A decompressed records section: `ptr`/`size` stay valid while this object lives (it holds the buffer)."""

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.buf)


cdef Inflated _hold(object owner, Py_ssize_t size):
    cdef Inflated r = Inflated.__new__(Inflated)
    PyObject_GetBuffer(owner, &r.buf, PyBUF_SIMPLE)
    r.held = True
    r.ptr = <const unsigned char *>r.buf.buf
    r.size = size
    return r


cdef int _too_large(Py_ssize_t limit) except -1:
    raise _errors.RecordTooLargeError(size=limit + 1, limit=limit,
                                      what="decompressed records section (cut at the limit)",
                                      setting=f"{INFLATE_RATIO} x max.message.bytes")


cdef inline uint32_t get_le32(const unsigned char *p) noexcept nogil:
    return p[0] | (p[1] << 8) | (p[2] << 16) | (<uint32_t>p[3] << 24)


cdef int64_t _lz4_bound(const unsigned char *p, Py_ssize_t n) noexcept:
    """The most an LZ4 frame can inflate to, from its block headers: a compressed block at most the frame's
    block maximum size, a stored one its own size (its content size when the frame states one); -1 when the
    frame does not walk to its end mark."""
    cdef int flg, bd
    cdef int64_t pos = 7, block_max, total = 0, size
    if n < 7 or get_le32(p) != 0x184D2204:
        return -1
    flg = p[4]
    bd = p[5]
    if flg & 0x08:                               # content size stated
        return <int64_t>(get_le32(p + 6) | (<uint64_t>get_le32(p + 10) << 32)) if n >= 14 else -1
    if flg & 0x01:                               # dictionary id
        pos += 4
    block_max = 1 << (8 + 2 * ((bd >> 4) & 7))   # 4: 64 KiB ... 7: 4 MiB
    while pos + 4 <= n:
        size = get_le32(p + pos)
        pos += 4
        if size == 0:
            return total                         # end mark
        if size & 0x80000000:
            total += size & 0x7FFFFFFF
        else:
            total += block_max
        pos += (size & 0x7FFFFFFF) + (4 if flg & 0x10 else 0)
    return -1


cdef int64_t _stated_size(int codec, const unsigned char *p, Py_ssize_t n) noexcept:
    """The inflated size the data states (zstd frame content size, gzip ISIZE), or an upper bound of it (LZ4
    block headers, _lz4_bound); -1 if none."""
    cdef int d, fcs_flag, single, did, pos
    if codec == CODEC_GZIP:
        return get_le32(p + n - 4) if n >= 18 else -1
    if codec == CODEC_LZ4:
        return _lz4_bound(p, n)
    if codec != CODEC_ZSTD or n < 6 or get_le32(p) != 0xFD2FB528:
        return -1
    d = p[4]
    fcs_flag = d >> 6
    single = (d >> 5) & 1
    did = d & 3
    pos = 5 + (0 if single else 1) + (4 if did == 3 else did)
    if fcs_flag == 0:
        return p[pos] if single and pos < n else -1
    if fcs_flag == 1:
        return (p[pos] | (p[pos + 1] << 8)) + 256 if pos + 2 <= n else -1
    if fcs_flag == 2:
        return get_le32(p + pos) if pos + 4 <= n else -1
    return <int64_t>(get_le32(p + pos) | (<uint64_t>get_le32(p + pos + 4) << 32)) if pos + 8 <= n else -1


cdef Inflated inflate(int codec, const unsigned char *p, Py_ssize_t n, Py_ssize_t limit):
    """The records section p[0:n] decompressed with codec 1-4, at most `limit` bytes of it (see above).
    Raises RecordTooLargeError past the limit, CorruptRecordError if the data does not decode."""
    cdef int64_t stated, cap
    data = PyMemoryView_FromMemory(<char *>p, n, PyBUF_READ)
    try:
        if codec == CODEC_SNAPPY:
            if n >= 8 and memcmp(p, <const char *>XERIAL_MAGIC, 8) == 0:
                out = _xerial_decompress(data, limit)
                return _hold(out, len(out))
            size = _cj().snappy.decompress_raw_len(data)
            if size > limit:
                _too_large(limit)
            if size > <int64_t>n * SNAPPY_MAX_RATIO + 64:
                raise ValueError(f"the block states {size} bytes, more than {n} bytes of snappy can encode")
            out = bytearray(size)
            if _cj().snappy.decompress_raw_into(data, out) != size:
                raise ValueError("snappy block shorter than its header says")
            return _hold(out, size)
        if codec == CODEC_GZIP:
            into = _cj().gzip.decompress_into
        elif codec == CODEC_LZ4:
            into = _cj().lz4.decompress_into
        elif codec == CODEC_ZSTD:
            into = _cj().zstd.decompress_into
        else:
            raise _errors.UnsupportedCompressionTypeError(f"unknown compression codec id {codec} in batch attributes")
        stated = _stated_size(codec, p, n)
        if stated > <int64_t>n * HINT_RATIO + (1 << 16):
            stated = -1                         # more than the input can hold in practice: a hint not to trust
        cap = stated + 1 if 0 <= stated <= limit else min(max(<int64_t>n * 16, 1 << 16), <int64_t>limit + 1)
        while True:
            out = PyByteArray_FromStringAndSize(NULL, cap)      # not zeroed: only what is written is used
            try:
                written = into(data, out)
                if written < cap:
                    return _hold(out, written)
            except Exception as e:
                if "failed to write whole buffer" not in str(e):     # cramjam's answer when `out` is full
                    raise
            if cap > limit:
                _too_large(limit)
            out = None
            cap = min(cap * 8, <int64_t>limit + 1)
    except _errors.SeglogError:
        raise
    except Exception as e:
        raise _errors.CorruptRecordError(f"{CODEC_NAMES[codec]} records do not decompress: {e}") from None


cdef bytearray _xerial_decompress(object data, Py_ssize_t limit):
    """Java's xerial framing: a 16-byte header, then [int32 length][raw snappy block] chunks. Every block's
    inflated length is read from its header and summed before anything is inflated."""
    mv = memoryview(data)
    cdef Py_ssize_t pos = 16, n = len(mv), size, total = 0, at = 0
    cdef list chunks = []
    cj = _cj().snappy
    while pos < n:
        if pos + 4 > n:
            raise ValueError("truncated xerial chunk header")
        size = int.from_bytes(mv[pos:pos + 4], "big")
        pos += 4
        if size < 0 or pos + size > n:
            raise ValueError("truncated xerial chunk")
        chunk = mv[pos:pos + size]
        chunks.append(chunk)
        stated = cj.decompress_raw_len(chunk)
        if stated > size * SNAPPY_MAX_RATIO + 64:
            raise ValueError(f"a block states {stated} bytes, more than {size} bytes of snappy can encode")
        total += stated
        if total > limit:
            _too_large(limit)
        pos += size
    out = bytearray(total)
    omv = memoryview(out)
    for chunk in chunks:
        at += cj.decompress_raw_into(chunk, omv[at:])
    if at != total:
        raise ValueError("snappy blocks shorter than their headers say")
    return out


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

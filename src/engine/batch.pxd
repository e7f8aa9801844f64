# Record batch v2 (magic 2): the one format seglog uses on disk, on the wire and in memory.
#
# All integers big-endian. CRC-32C (Castagnoli) covers bytes 21..end, i.e. attributes through the last
# record. baseOffset, batchLength, partitionLeaderEpoch, magic and the crc field itself are outside it,
# so a broker stamps baseOffset and partitionLeaderEpoch without touching the CRC.
#
#   off  size  field
#     0     8  baseOffset
#     8     4  batchLength          bytes after this field: batch size = 12 + batchLength
#    12     4  partitionLeaderEpoch
#    16     1  magic = 2
#    17     4  crc (uint32)
#    21     2  attributes           bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd),
#                                    bit 3 timestampType (1 = LogAppendTime), bit 4 transactional,
#                                    bit 5 control, bit 6 delete horizon set
#    23     4  lastOffsetDelta
#    27     8  baseTimestamp
#    35     8  maxTimestamp
#    43     8  producerId           -1: none
#    51     2  producerEpoch
#    53     4  baseSequence         -1: none
#    57     4  recordsCount
#    61   ...  records              one compressed blob of the same records when codec != 0
#
# Record: length varint (bytes after it), attributes int8 (0), timestampDelta varlong, offsetDelta varint,
# keyLength varint (-1 = null), key, valueLength varint (-1 = null), value, headerCount varint, then per
# header: keyLength varint + UTF-8 key, valueLength varint (-1 = null) + value.

cdef enum:
    OFF_BASE_OFFSET = 0
    OFF_LENGTH = 8
    OFF_LEADER_EPOCH = 12
    OFF_MAGIC = 16
    OFF_CRC = 17
    OFF_ATTRIBUTES = 21
    OFF_LAST_OFFSET_DELTA = 23
    OFF_BASE_TIMESTAMP = 27
    OFF_MAX_TIMESTAMP = 35
    OFF_PRODUCER_ID = 43
    OFF_PRODUCER_EPOCH = 51
    OFF_BASE_SEQUENCE = 53
    OFF_RECORDS_COUNT = 57
    BATCH_HEADER_SIZE = 61
    LOG_OVERHEAD = 12                 # baseOffset + batchLength: the bytes not counted by batchLength
    CRC_START = 21

    ATTR_CODEC_MASK = 0x07
    ATTR_LOG_APPEND_TIME = 0x08
    ATTR_TRANSACTIONAL = 0x10
    ATTR_CONTROL = 0x20
    ATTR_DELETE_HORIZON = 0x40

    CODEC_NONE = 0
    CODEC_GZIP = 1
    CODEC_SNAPPY = 2
    CODEC_LZ4 = 3
    CODEC_ZSTD = 4


# Outcome of the structural check every reader applies before trusting a batch.
cdef enum BatchCheck:
    CHECK_OK = 0
    CHECK_SHORT_HEADER = 1        # fewer than 61 bytes left where a batch should start
    CHECK_BAD_LENGTH = 2          # batchLength < 49 (smaller than a header)
    CHECK_INCOMPLETE = 3          # the declared length runs past the end of the data
    CHECK_BAD_MAGIC = 4
    CHECK_BAD_CRC = 5


ctypedef struct BatchHeader:
    int64_t base_offset
    int32_t length                # batchLength
    int32_t leader_epoch
    int8_t magic
    uint32_t crc
    int16_t attributes
    int32_t last_offset_delta
    int64_t base_timestamp
    int64_t max_timestamp
    int64_t producer_id
    int16_t producer_epoch
    int32_t base_sequence
    int32_t records_count


cdef inline void read_header(const unsigned char *p, BatchHeader *h) noexcept nogil:
    h.base_offset = <int64_t>get_be64(p + OFF_BASE_OFFSET)
    h.length = <int32_t>get_be32(p + OFF_LENGTH)
    h.leader_epoch = <int32_t>get_be32(p + OFF_LEADER_EPOCH)
    h.magic = <int8_t>p[OFF_MAGIC]
    h.crc = get_be32(p + OFF_CRC)
    h.attributes = <int16_t>get_be16(p + OFF_ATTRIBUTES)
    h.last_offset_delta = <int32_t>get_be32(p + OFF_LAST_OFFSET_DELTA)
    h.base_timestamp = <int64_t>get_be64(p + OFF_BASE_TIMESTAMP)
    h.max_timestamp = <int64_t>get_be64(p + OFF_MAX_TIMESTAMP)
    h.producer_id = <int64_t>get_be64(p + OFF_PRODUCER_ID)
    h.producer_epoch = <int16_t>get_be16(p + OFF_PRODUCER_EPOCH)
    h.base_sequence = <int32_t>get_be32(p + OFF_BASE_SEQUENCE)
    h.records_count = <int32_t>get_be32(p + OFF_RECORDS_COUNT)


cdef inline int64_t batch_size_at(const unsigned char *p) noexcept nogil:
    """Total size of the batch starting at p (the caller checked that 12 bytes are there)."""
    return LOG_OVERHEAD + <int64_t><int32_t>get_be32(p + OFF_LENGTH)


cdef inline int64_t last_offset_at(const unsigned char *p) noexcept nogil:
    return <int64_t>get_be64(p) + <int32_t>get_be32(p + OFF_LAST_OFFSET_DELTA)


cdef inline BatchCheck check_batch(const unsigned char *p, int64_t avail, bint verify_crc) noexcept nogil:
    """Structural check of the batch at p with `avail` bytes readable: header, length, magic, CRC."""
    if avail < BATCH_HEADER_SIZE:
        return CHECK_SHORT_HEADER
    cdef int64_t length = <int32_t>get_be32(p + OFF_LENGTH)
    if length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
        return CHECK_BAD_LENGTH
    if length + LOG_OVERHEAD > avail:
        return CHECK_INCOMPLETE
    if p[OFF_MAGIC] != 2:
        return CHECK_BAD_MAGIC
    if verify_crc and seglog_crc32c(0, p + CRC_START, <size_t>(length + LOG_OVERHEAD - CRC_START)) != get_be32(p + OFF_CRC):
        return CHECK_BAD_CRC
    return CHECK_OK


# Outcome of the offset check every reader applies to a batch after the structural one. baseOffset is outside
# the CRC, so only this check catches a damaged one: a batch must start after the offsets before it (a
# segment's first batch: at or after the segment's base offset) and end below the offsets after it (the next
# segment's base offset, or what a relative offset or an int64 can hold).
cdef enum OffsetCheck:
    OFFSETS_OK = 0
    OFFSETS_BAD_DELTA = 1         # lastOffsetDelta < 0
    OFFSETS_NOT_AFTER = 2         # baseOffset <= the last offset before the batch
    OFFSETS_PAST_LIMIT = 3        # the batch's last offset is not below the limit


cdef inline OffsetCheck check_offsets(const unsigned char *p, int64_t prev_last, int64_t limit) noexcept nogil:
    """Offset check of the batch at p (its 61-byte header readable): prev_last < baseOffset, lastOffsetDelta
    >= 0, lastOffset < limit (computed without overflow, limit <= INT64_MAX)."""
    cdef int64_t first = <int64_t>get_be64(p + OFF_BASE_OFFSET)
    cdef int64_t delta = <int32_t>get_be32(p + OFF_LAST_OFFSET_DELTA)
    if delta < 0:
        return OFFSETS_BAD_DELTA
    if first <= prev_last:
        return OFFSETS_NOT_AFTER
    if first > limit - 1 - delta:
        return OFFSETS_PAST_LIMIT
    return OFFSETS_OK


cdef enum:
    SCAN_WINDOW = 4194304         # scan_batches checks this much ahead of the objects built from it (stays in cache)


cdef inline int64_t scan_batches(const unsigned char *p, int64_t n, int64_t start, bint verify_crc,
                                 BatchCheck *c) noexcept nogil:
    """check_batch over the batches of p[0:n] from `start` until SCAN_WINDOW bytes are checked, the end, or the
    first that fails. Returns where it stopped: the end of the last good batch, at the failing one (*c gets
    its check; CHECK_OK when none failed). Callers alternate it (without the GIL for large CRC-checked
    windows) with building Python objects from the batches it passed, window by window, so the headers they
    read back are still in cache."""
    cdef int64_t pos = start, limit = start + SCAN_WINDOW
    c[0] = CHECK_OK
    while pos < n and pos < limit:
        c[0] = check_batch(p + pos, n - pos, verify_crc)
        if c[0] != CHECK_OK:
            return pos
        pos += batch_size_at(p + pos)
    return pos


cdef inline int64_t scan_batches_gil(const unsigned char *p, int64_t n, int64_t start, bint verify_crc,
                                     BatchCheck *c) noexcept:
    """scan_batches, with the GIL released when it checks CRCs over NOGIL_BYTES or more."""
    cdef int64_t stop
    if verify_crc and n - start >= NOGIL_BYTES:
        with nogil:
            stop = scan_batches(p, n, start, verify_crc, c)
        return stop
    return scan_batches(p, n, start, verify_crc, c)

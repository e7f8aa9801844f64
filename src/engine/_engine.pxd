# The contract of seglog's Cython core: C-level declarations, inline hot helpers, and the classes with
# their fields. One extension module, `seglog._engine`, is built from _engine.pyx, which includes the
# topic files (*.pxi); calls between the parts are plain C calls.

from cpython.pythread cimport PyThread_type_lock
from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t,
                          INT32_MAX, INT64_MAX, INT64_MIN, SIZE_MAX)

# Work on at least this many bytes (CRC-32C, batch walks, copies, reads) runs with the GIL released so other
# threads keep running; below it, releasing and retaking the GIL costs more than the work itself.
cdef enum:
    NOGIL_BYTES = 65536

include "bigendian.pxd"
include "varint.pxd"
include "crc32c.pxd"
include "batch.pxd"


# Bytes taken from one argument (buffers.pxi): p/n, n = -1 for None; buf holds the exporter while taken.
ctypedef struct Span:
    Py_buffer buf
    bint held                               # buf holds an exporter (released by release_span)
    const unsigned char *p
    int64_t n

# A record's arguments, taken once before a writer encodes it (buffers.pxi, take_record).
ctypedef struct RecordIn:
    Span key
    Span value
    Span *hspans                            # header key, value, key, value ... (2 * hcount spans)
    Py_ssize_t hcount
    int64_t hsize                           # encoded size of the headers (after the count)


cdef class MappedFile:
    cdef unsigned char *addr
    cdef readonly size_t length
    cdef readonly str path
    cdef readonly uint64_t inode            # identity of the mapped file (a truncation copy is another inode)
    cdef readonly uint64_t device
    cdef tuple key                          # (device, inode): the file's entry in the live-view count

    @staticmethod
    cdef MappedFile map_fd(int fd, size_t length, str path)
    cdef object view(self, size_t start, size_t stop)


cdef class SegmentView:
    cdef MappedFile owner
    cdef const unsigned char *ptr
    cdef Py_ssize_t size


cdef class Inflated:                        # a decompressed records section (codecs.pxi)
    cdef Py_buffer buf
    cdef const unsigned char *ptr
    cdef Py_ssize_t size
    cdef bint held


cdef class Record:
    cdef readonly object topic
    cdef readonly int partition
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp
    cdef readonly int timestamp_type
    cdef readonly object key
    cdef readonly object value
    cdef readonly tuple headers


cdef class BatchWriter:
    cdef unsigned char *buf
    cdef size_t cap
    cdef size_t used                        # bytes of finished batches: [0, used)
    cdef size_t pos                         # end of the open batch's bytes (== used when none is open)
    cdef Py_ssize_t exports
    cdef bint is_open
    cdef readonly int32_t count             # records in the open batch
    cdef readonly int64_t next_offset
    cdef int64_t base_ts
    cdef int64_t max_ts
    cdef readonly int codec
    cdef public bint log_append_time
    cdef public int64_t timestamp_before_max_ms   # CreateTime window around now (INT64_MAX: unbounded)
    cdef public int64_t timestamp_after_max_ms
    cdef public bint accept_no_timestamp     # timestamp -1 (NO_TIMESTAMP, from a client batch) passes
    cdef public Py_ssize_t batch_bytes
    cdef public int32_t batch_records
    cdef public Py_ssize_t max_record_bytes
    cdef public str limit_name               # the setting max_record_bytes comes from, for error messages
    cdef public bint require_keys            # refuse records without a key (a compacted topic's)
    cdef public int32_t leader_epoch
    cdef public int64_t producer_id
    cdef public int16_t producer_epoch
    cdef public int32_t next_sequence
    cdef public bint transactional           # batches carry the transactional attribute (bit 4)
    cdef readonly bint full
    cdef readonly int batches               # finished batches not yet cleared
    cdef size_t keep_from                   # add_many: where the batch it found open starts (SIZE_MAX: none) ...
    cdef bytes kept_raw                     # ... whose records finish() copies here before compressing them
    cdef bint buf_borrowed                  # buf lies in buf_owner's memory (an AppendJournal's mapping,
    cdef object buf_owner                   # journal.pxi), which the writer neither frees nor resizes

    cdef int _reserve(self, size_t need) except -1
    cdef int _own_buffer(self, size_t cap) except -1
    cdef int _open(self) except -1
    cdef int64_t add_record(self, RecordIn *r, int64_t timestamp) except? -1
    cdef int64_t _record_timestamp(self, object timestamp) except? -1
    cpdef int64_t add(self, object value, object key=*, object headers=*, object timestamp=*) except? -1
    cdef Py_ssize_t _add_values(self, list values, Py_ssize_t i, Py_ssize_t stop_bytes, int64_t ts) except -1
    cpdef int finish(self) except -1
    cpdef int clear(self) except -1
    cpdef int reset(self, int64_t next_offset) except -1


cdef class BatchInfo:
    cdef readonly int64_t base_offset
    cdef readonly int64_t size
    cdef readonly int32_t leader_epoch
    cdef readonly int8_t magic
    cdef readonly uint32_t crc
    cdef readonly int16_t attributes
    cdef readonly int codec
    cdef readonly int32_t last_offset_delta
    cdef readonly int64_t base_timestamp
    cdef readonly int64_t max_timestamp
    cdef readonly int64_t producer_id
    cdef readonly int16_t producer_epoch
    cdef readonly int32_t base_sequence
    cdef readonly int32_t records_count
    cdef readonly int64_t position


cdef class IndexFile:
    cdef readonly str path
    cdef int fd
    cdef const unsigned char *addr          # the mapping (writable) or the snapshot's bytes (read-only)
    cdef size_t map_len
    cdef object snapshot                    # bytes copy of the file for read-only indexes, else None
    cdef readonly int64_t base_offset
    cdef readonly Py_ssize_t entries
    cdef readonly Py_ssize_t max_entries
    cdef int entry_size
    cdef readonly bint writable

    cdef int _open(self, str path, int64_t base_offset, Py_ssize_t max_index_bytes, bint writable,
                   int entry_size) except -1
    cdef int _remap(self) except -1
    cdef Py_ssize_t _count_entries(self)
    cdef bint _is_blank(self, Py_ssize_t i)
    cdef int32_t _rel(self, Py_ssize_t i) noexcept nogil
    cdef int _write_entry(self, Py_ssize_t i, const unsigned char *entry) except -1
    cdef int _append_entries(self, const unsigned char *data, Py_ssize_t n) except -1
    cdef int _resize(self, size_t nbytes) except -1
    cdef int _require_writable(self) except -1
    cpdef int truncate_entries(self, Py_ssize_t n) except -1
    cdef int _keep_entries(self, Py_ssize_t n) except -1
    cdef Py_ssize_t _first_rel_at_least(self, int64_t rel) noexcept nogil


cdef class OffsetIndex(IndexFile):
    cdef int32_t _pos(self, Py_ssize_t i) noexcept nogil
    cdef int64_t lookup_position(self, int64_t target, int64_t *entry_offset) noexcept nogil
    cpdef int append(self, int64_t offset, int64_t position) except -1


cdef class TimeIndex(IndexFile):
    cdef int64_t _ts(self, Py_ssize_t i) noexcept nogil
    cpdef int maybe_append(self, int64_t timestamp, int64_t offset, bint skip_full_check=*) except -1


cdef class Segment:
    cdef readonly str directory
    cdef readonly int64_t base_offset
    cdef readonly str log_path
    cdef readonly str index_path
    cdef readonly str timeindex_path
    cdef int fd
    cdef readonly int64_t size              # bytes of the trusted prefix of the .log
    cdef int64_t _next_offset               # -1: not loaded yet
    cdef readonly int64_t max_timestamp     # -1: none (or not loaded)
    cdef readonly int64_t offset_of_max_timestamp
    cdef int64_t rolling_ts                 # max timestamp of the first batch: the age a time-based roll counts from
    cdef readonly int64_t created_ms
    cdef int64_t bytes_since_index
    cdef readonly int64_t verified_end      # [0, verified_end) has had its CRCs checked
    cdef int64_t map_hint                   # map at least this much (active segment: its maximum size)
    cdef readonly Py_ssize_t index_interval_bytes
    cdef readonly Py_ssize_t max_index_bytes
    cdef readonly bint writable
    cdef readonly MappedFile mapping
    cdef OffsetIndex oindex
    cdef TimeIndex tindex
    cdef public int64_t offset_limit        # offsets stay below it: the next segment's base (INT64_MAX: none)
    cdef bytes window                       # read-only segments: file bytes [window_pos, + window_len) ...
    cdef int64_t window_pos                 # ... holding the batch headers a walk reads (see _header)
    cdef int64_t window_len
    cdef int64_t writeback_from             # the .log's bytes before it were handed to the disk (append)

    cdef int _open_log(self, bint create) except -1
    cdef int _load_tail(self) except -1
    cdef MappedFile _mapping(self, int64_t end)
    cdef int64_t _limit(self) noexcept
    cdef const unsigned char *_header(self, int64_t pos) except NULL
    cdef int64_t _batch_at(self, int64_t pos, const unsigned char **header) except -1
    cdef object _frame_error(self, int64_t pos, const unsigned char *p)
    cdef int64_t _walk_batch(self, int64_t pos, int64_t *prev_last, int64_t limit,
                             const unsigned char **header) except -1
    cdef int64_t _find_position(self, int64_t offset) except -2
    cdef bytes _pread(self, int64_t position, int64_t n)
    cdef int64_t _read_extent(self, const unsigned char *base, int64_t position, int64_t avail, int64_t max_bytes,
                              int64_t max_offset, bint min_one, int64_t *next_offset) except -1
    cdef int64_t _verify(self, const unsigned char *base, int64_t start, int64_t end) except -1
    cdef int64_t _last_batch_before(self, const unsigned char *base, int64_t start, int64_t stop) noexcept
    cdef int truncate_to_position(self, int64_t pos) except -1
    cdef void _start_writeback(self) noexcept


cdef class ProducerBatch:
    cdef public int64_t base
    cdef public bint done
    cdef public object error
    cdef public list callbacks


cdef class RecordAccumulator


cdef class RecordFuture:
    cdef RecordAccumulator acc
    cdef readonly ProducerBatch batch
    cdef int64_t index
    cdef readonly object topic
    cdef readonly Py_ssize_t partition
    cdef readonly int64_t timestamp


cdef class OpenBatch:
    cdef object topic
    cdef Py_ssize_t partition
    cdef BatchWriter writer
    cdef ProducerBatch batch
    cdef double since


cdef class RecordAccumulator:
    cdef PyThread_type_lock lock
    cdef object partitions_fn
    cdef object append_fn
    cdef object metadata_fn
    cdef object new_producer_id_fn
    cdef Py_ssize_t batch_size
    cdef double linger_s
    cdef int codec
    cdef readonly int64_t producer_id
    cdef readonly int16_t producer_epoch
    cdef object partitioner
    cdef object on_new_batch
    cdef Py_ssize_t max_request_size
    cdef dict open
    cdef dict counts
    cdef dict batch_limits
    cdef dict round_robin
    cdef dict sequences
    cdef bint closed
    cdef readonly bint transactional
    cdef public bint txn_open                # a transactional accumulator accepts send() only while set

    cdef void _acquire(self)
    cdef void _release(self)
    cdef Py_ssize_t _count(self, object topic) except -1
    cdef Py_ssize_t _choose(self, object topic, object key, Span *kspan, object partition,
                            Py_ssize_t n) except -1
    cpdef RecordFuture send(self, object topic, object value=*, object key=*, object partition=*,
                            object headers=*, object timestamp=*)
    cdef RecordFuture _add(self, object topic, Py_ssize_t p, RecordIn *r, int64_t ts)
    cdef OpenBatch _new_open(self, object topic, Py_ssize_t p)
    cdef int _send(self, OpenBatch o) except -1
    cdef list _all_open(self)
    cdef int _new_producer_id(self) except -1

# The producer's record accumulator: per-record send() in C speed (partition choice, encoding into the
# partition's open batch, a future per record), batches appended through a Python callable.
#
# RecordAccumulator.send() is the hot path of seglog.Producer.send. It chooses the partition as Kafka's Java
# producer does (explicit; else murmur2(key) & 0x7fffffff % n; else round-robin per topic) unless a custom
# partitioner is given, encodes the record into that partition's BatchWriter and returns a RecordFuture
# sharing the batch's ProducerBatch. When the open batch reaches batch_size (or at once with linger 0) it is
# finished and handed to `append(topic, partition, bytes) -> base offset`; the futures of its records then
# resolve to base + index. One lock serializes everything, including appends, so batches of a partition
# reach the log in sequence order (idempotence). The lock is waited for with the GIL released.
#
# A transactional accumulator (transactional=True) marks its batches transactional, accepts send() only
# while `txn_open` (between begin and the end of a transaction), keeps its producer id when an append fails
# (the transaction must abort; its owner then bumps the epoch with set_producer()) and can discard() the
# records not yet appended when a transaction aborts.

from cpython.pythread cimport (PyThread_acquire_lock, PyThread_allocate_lock, PyThread_free_lock,
                               PyThread_release_lock, PyThread_type_lock, NOWAIT_LOCK, WAIT_LOCK)
from libc.time cimport time_t
from posix.time cimport CLOCK_MONOTONIC


cdef inline int64_t _size_bound(RecordIn *r) noexcept:
    """An upper bound of a taken record's encoded size (its varints take at most 31 bytes)."""
    return 31 + (r.value.n if r.value.n > 0 else 0) + (r.key.n if r.key.n > 0 else 0) + r.hsize


cdef inline double monotonic_s() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


@cython.freelist(64)
cdef class ProducerBatch:
    """The outcome shared by the records of one batch: `base` offset once appended, or `error`."""

    def __cinit__(self):
        self.base = -1
        self.done = False
        self.error = None
        self.callbacks = None


@cython.freelist(1024)
cdef class RecordFuture:
    """The outcome of one send(). ``get(timeout)`` returns RecordMetadata (topic, partition, offset,
    timestamp) or raises the append's error; it also unpacks as ``(partition, offset)``. Asking for the
    offset of a record whose batch still lingers sends that batch at once."""

    def done(self):
        return self.batch.done

    def get(self, timeout=None):
        """Block until the record's batch is appended (sending it now if it still waits)."""
        if not self.batch.done:
            self.acc.complete(self.topic, self.partition, self.batch)
        if self.batch.error is not None:
            raise self.batch.error
        return self.acc.metadata(self.topic, self.partition,
                                 self.batch.base + self.index if self.batch.base >= 0 else -1, self.timestamp)

    result = get

    @property
    def offset(self):
        return self.get().offset

    def add_callback(self, fn):
        """Call fn(metadata, None) or fn(None, error) once the batch is appended (now if it already is)."""
        self.acc.add_callback(self, fn)

    def _fire(self, fn):
        if self.batch.error is not None:
            fn(None, self.batch.error)
        else:
            fn(self.acc.metadata(self.topic, self.partition,
                                 self.batch.base + self.index if self.batch.base >= 0 else -1, self.timestamp), None)

    def __iter__(self):
        return iter((self.partition, self.offset))

    def __getitem__(self, i):
        return (self.partition, self.offset)[i]

    def __len__(self):
        return 2

    def __repr__(self):
        if not self.batch.done:
            state = "pending"
        elif self.batch.error is not None:
            state = f"error={self.batch.error!r}"
        else:
            state = f"offset={self.batch.base + self.index}"
        return f"RecordFuture({self.topic!r}, partition={self.partition}, {state})"


cdef class OpenBatch:
    """The open batch of one partition."""


cdef class RecordAccumulator:
    """See the file comment. `partitions(topic) -> (partition count, max.message.bytes)` is called the first
    time a topic is seen (and after refresh()); `append(topic, partition, data) -> base offset` appends one
    finished batch."""

    def __cinit__(self, partitions, append, metadata, *, Py_ssize_t batch_size=16384, double linger_s=0.005,
                  compression=None, int64_t producer_id=-1, int16_t producer_epoch=-1, partitioner=None,
                  Py_ssize_t max_request_size=1048576, new_producer_id=None, bint transactional=False):
        self.lock = PyThread_allocate_lock()
        if self.lock == NULL:
            raise MemoryError()
        self.partitions_fn = partitions
        self.append_fn = append
        self.metadata_fn = metadata
        self.batch_size = batch_size
        self.linger_s = linger_s
        self.codec = codec_id(compression)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.partitioner = partitioner
        self.max_request_size = max_request_size
        self.new_producer_id_fn = new_producer_id
        self.transactional = transactional
        self.txn_open = False
        self.open = {}
        self.counts = {}
        self.batch_limits = {}
        self.round_robin = {}
        self.sequences = {}
        self.closed = False
        self.on_new_batch = getattr(partitioner, "on_new_batch", None) if partitioner is not None else None

    def __dealloc__(self):
        if self.lock != NULL:
            PyThread_free_lock(self.lock)

    cdef inline void _acquire(self):
        if not PyThread_acquire_lock(self.lock, NOWAIT_LOCK):
            with nogil:
                PyThread_acquire_lock(self.lock, WAIT_LOCK)

    cdef inline void _release(self):
        PyThread_release_lock(self.lock)

    def metadata(self, topic, partition, offset, timestamp):
        return self.metadata_fn(topic, partition, offset, timestamp)

    cdef Py_ssize_t _count(self, object topic) except -1:
        n = self.counts.get(topic)
        if n is None:
            n, limit = self.partitions_fn(topic)
            self.counts[topic] = n
            # a batch never outgrows the topic's max.message.bytes: an oversized record fails on its own
            self.batch_limits[topic] = max(1, min(self.batch_size, limit - BATCH_HEADER_SIZE))
        return n

    cdef Py_ssize_t _choose(self, object topic, object key, Span *kspan, object partition,
                            Py_ssize_t n) except -1:
        cdef Py_ssize_t p
        if partition is not None:
            p = partition
            if not 0 <= p < n:
                raise _errors.InvalidArgumentError(
                    f"Invalid partition: record has {partition!r}, topic {topic!r} has partitions 0..{n - 1}")
            return p
        if self.partitioner is not None:
            p = self.partitioner(topic, key, n)
            if not 0 <= p < n:
                raise _errors.InvalidArgumentError(
                    f"Invalid partition: partitioner {self.partitioner!r} returned {p}, topic {topic!r} "
                    f"has partitions 0..{n - 1}")
            return p
        if kspan.n >= 0:
            return (murmur2_raw(kspan.p, kspan.n) & 0x7fffffff) % n
        counter = self.round_robin.get(topic, 0)
        self.round_robin[topic] = (counter + 1) & 0x7fffffff
        return counter % n

    cpdef RecordFuture send(self, object topic, object value=None, object key=None, object partition=None,
                            object headers=None, object timestamp=None):
        """Queue one record; returns its future. Raises at once (nothing queued) for a bad partition, a
        value/key that is not bytes-like, or a record over max_request_size. Append errors go to the future."""
        cdef Py_ssize_t n, p
        cdef int64_t ts
        cdef RecordIn r
        memset(&r, 0, sizeof(RecordIn))
        try:
            take_record(value, key, headers, &r)
            n = self._count(topic)
            p = self._choose(topic, key, &r.key, partition, n)
            if timestamp is None:
                ts = now_ms()
            else:
                ts = _timestamp_arg(timestamp)
                _check_timestamps(ts, ts, 0, INT64_MAX, INT64_MAX)
            return self._add(topic, p, &r, ts)
        finally:
            release_record(&r)

    cdef RecordFuture _add(self, object topic, Py_ssize_t p, RecordIn *r, int64_t ts):
        """send() once its record is taken and its partition chosen."""
        cdef int64_t index
        cdef OpenBatch o
        cdef RecordFuture f
        cdef list slots
        self._acquire()
        try:
            if self.closed:
                raise _errors.LogClosedError("producer is closed")
            if self.transactional and not self.txn_open:
                raise _errors.IllegalStateError("a transactional producer sends records only inside a transaction: "
                                                "call begin_transaction() first")
            slots = self.open.get(topic)
            o = slots[p] if slots is not None and p < len(slots) else None
            if o is None:
                o = self._new_open(topic, p)
            elif o.writer.count and <Py_ssize_t>(o.writer.pos - o.writer.used) + _size_bound(r) \
                    > <Py_ssize_t>self.batch_limits[topic]:
                self._send(o)                  # the record would take the batch past batch_size: start a new one
            index = o.writer.add_record(r, ts)
            if o.writer.count == 1:
                o.since = monotonic_s()
            f = RecordFuture.__new__(RecordFuture)
            f.acc = self
            f.batch = o.batch
            f.index = index
            f.topic = topic
            f.partition = p
            f.timestamp = ts
            if self.linger_s <= 0 or o.writer.pos - o.writer.used >= <size_t>self.batch_limits[topic]:
                self._send(o)
            return f
        finally:
            self._release()

    cdef OpenBatch _new_open(self, object topic, Py_ssize_t p):
        cdef OpenBatch o = OpenBatch.__new__(OpenBatch)
        cdef list slots
        seq = self.sequences.get((topic, p), 0) if self.producer_id >= 0 else -1
        o.topic = topic
        o.partition = p
        o.writer = BatchWriter(next_offset=0, compression=self.codec, batch_bytes=1 << 62,
                               max_record_bytes=self.max_request_size, producer_id=self.producer_id,
                               producer_epoch=self.producer_epoch, next_sequence=seq,
                               transactional=self.transactional)
        o.writer.limit_name = "max.request.size"
        o.batch = ProducerBatch.__new__(ProducerBatch)
        o.since = 0
        slots = self.open.setdefault(topic, [])
        while len(slots) <= p:
            slots.append(None)
        slots[p] = o
        return o

    cdef int _send(self, OpenBatch o) except -1:
        """Append the open batch of o's partition (lock held) and start a new one there."""
        cdef ProducerBatch batch = o.batch
        cdef BatchWriter w = o.writer
        cdef list callbacks
        if w.count == 0:
            return 0
        w.finish()
        try:
            batch.base = self.append_fn(o.topic, o.partition, w.take())
            if self.producer_id >= 0:
                self.sequences[(o.topic, o.partition)] = w.next_sequence
        except Exception as e:                    # every failure reaches the batch's futures, whatever its type
            batch.error = e
            if self.producer_id >= 0 and not self.transactional:
                self._new_producer_id()           # the batch may or may not be in the log: never reuse its sequences
        w.reset(0)
        o.batch = ProducerBatch.__new__(ProducerBatch)
        batch.done = True
        if batch.callbacks is not None:
            callbacks, batch.callbacks = batch.callbacks, None
            self._release()
            try:
                for fn, fut in callbacks:
                    (<RecordFuture>fut)._fire(fn)
            finally:
                self._acquire()
        if self.on_new_batch is not None:
            self.on_new_batch(o.topic, o.partition, self.counts.get(o.topic, o.partition + 1))
        return 0

    cdef int _new_producer_id(self) except -1:
        """Continue under a fresh producer id, every partition's sequence restarting at 0 (Kafka's idempotent
        producer resets its id after a failure whose outcome it cannot know)."""
        cdef OpenBatch o
        self.producer_id = self.new_producer_id_fn()
        self.producer_epoch = 0
        self.sequences.clear()
        for o in self._all_open():
            o.writer.producer_id = self.producer_id
            o.writer.producer_epoch = 0
            o.writer.next_sequence = 0
        return 0

    def set_producer(self, int64_t producer_id, int16_t producer_epoch):
        """Continue under this producer id and epoch (a transactional producer's InitProducerId), every
        partition's sequence restarting at 0. Nothing may be open (call flush() or discard() first)."""
        cdef OpenBatch o
        self._acquire()
        try:
            for o in self._all_open():
                if o.writer.count:
                    raise _errors.IllegalStateError("records are still open: flush or discard them first")
            self.producer_id = producer_id
            self.producer_epoch = producer_epoch
            self.sequences.clear()
            for o in self._all_open():
                o.writer.producer_id = producer_id
                o.writer.producer_epoch = producer_epoch
                o.writer.next_sequence = 0
        finally:
            self._release()

    def discard(self, error):
        """Fail every record not yet appended with `error` (an aborted transaction's); their sequences are
        given back, so the partition's next batch follows the last appended one."""
        cdef OpenBatch o
        cdef ProducerBatch batch
        cdef list fired = []
        self._acquire()
        try:
            for o in self._all_open():
                if o.writer.count == 0:
                    continue
                batch = o.batch
                o.writer.reset(0)
                o.writer.next_sequence = self.sequences.get((o.topic, o.partition), 0) if self.producer_id >= 0 else -1
                o.batch = ProducerBatch.__new__(ProducerBatch)
                batch.error = error
                batch.done = True
                if batch.callbacks is not None:
                    fired.extend(batch.callbacks)
                    batch.callbacks = None
        finally:
            self._release()
        for fn, fut in fired:
            (<RecordFuture>fut)._fire(fn)

    def complete(self, topic, partition, ProducerBatch batch):
        """Send the open batch of (topic, partition) now if it is still `batch`."""
        cdef OpenBatch o
        self._acquire()
        try:
            for o in self._all_open():
                if o.batch is batch:
                    self._send(o)
                    break
        finally:
            self._release()

    def add_callback(self, RecordFuture f, fn):
        self._acquire()
        try:
            if not f.batch.done:
                if f.batch.callbacks is None:
                    f.batch.callbacks = []
                f.batch.callbacks.append((fn, f))
                return
        finally:
            self._release()
        f._fire(fn)

    def send_due(self):
        """Send every open batch whose linger time has passed; returns seconds until the next one is due
        (None when none is open)."""
        cdef OpenBatch o
        cdef double now = monotonic_s(), due, wait = -1
        self._acquire()
        try:
            for o in self._all_open():
                if o.writer.count:
                    due = o.since + self.linger_s
                    if due <= now:
                        self._send(o)
                    elif wait < 0 or due - now < wait:
                        wait = due - now
        finally:
            self._release()
        return None if wait < 0 else wait

    def flush(self):
        """Send every open batch now."""
        cdef OpenBatch o
        self._acquire()
        try:
            for o in self._all_open():
                self._send(o)
        finally:
            self._release()

    def close(self):
        """Send everything still open; later sends raise LogClosedError."""
        self.flush()
        self._acquire()
        self.closed = True
        self._release()

    cdef list _all_open(self):
        return [o for slots in self.open.values() for o in slots if o is not None]

    def refresh(self, topic=None):
        """Forget cached partition counts (all, or one topic's) so they are asked for again."""
        if topic is None:
            self.counts.clear()
        else:
            self.counts.pop(topic, None)

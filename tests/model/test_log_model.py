"""A Hypothesis state machine drives the real Log and a plain-Python model side by side: appends (per record,
append_batch with every codec, append_raw), truncation, flush, roll, clean reopen, crash, DeleteRecords and
retention. After every step the log must read back exactly the model.

The model keeps every record still physically in the log (a list of (offset, key, value, headers, timestamp))
plus the logical start offset. Facts the model cannot know (where batches begin, segment sizes) are read off
the log's files and checked for consistency, never copied into the model blindly.

Crash: the directory's files are copied while the Log is still open (crash_copy: exactly what a kill -9 leaves,
since written bytes live in the page cache), optionally with the active segment torn at a random point after
the last fsynced byte plus random garbage (what a power cut may leave) unless the clean-shutdown marker is still
there (nothing changed since a clean open). The copy is reopened; it must hold everything below the recovery
point the log claimed before the crash, and a prefix of the model beyond it."""

import os
import shutil
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from faults import batch_spans, crash_copy, segment_files
from seglog import Log, LogConfig, _engine
from seglog.errors import InvalidArgumentError, OffsetOutOfRangeError

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]
# crashes are simulated by copying files, so fsync buys nothing here: a tmpfs makes the many rolls cheap
SCRATCH = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None

records = st.lists(st.tuples(
    st.one_of(st.none(), st.binary(max_size=8)),                                        # key
    st.one_of(st.none(), st.binary(max_size=90)),                                       # value
    st.lists(st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=6))), max_size=2),
    st.integers(0, 1000),                                                               # timestamp
), min_size=1, max_size=25)


def batch_bounds(view) -> tuple[int, int]:
    """(base offset, last offset) of the first batch of a read view."""
    base, = struct.unpack_from(">q", view)
    delta, = struct.unpack_from(">i", view, 23)
    return base, base + delta


class LogMachine(RuleBasedStateMachine):

    def __init__(self):
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="seglog-model-", dir=SCRATCH))
        self.generation = 0
        self.model: list[tuple] = []          # (offset, key, value, headers, timestamp), physically present
        self.start = 0
        self.end = 0
        self.flushed = 0
        self.log = None

    @property
    def path(self) -> Path:
        return self.root / f"m{self.generation}-0"

    @initialize(retention_bytes=st.sampled_from([-1, 1500, 4000]), retention_ms=st.sampled_from([-1, 300]))
    def open_log(self, retention_bytes, retention_ms):
        self.config = LogConfig(segment_bytes=1024, index_interval_bytes=100, segment_index_bytes=96,
                                retention_bytes=retention_bytes, retention_ms=retention_ms)
        self.log = Log(self.path, self.config)

    def teardown(self):
        if self.log is not None:
            self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def add(self, recs) -> None:
        for key, value, headers, ts in recs:
            self.model.append((self.end, key, value, tuple(headers), ts))
            self.end += 1

    def cut(self, end: int) -> None:
        """The log now ends at `end` (truncation, crash)."""
        self.model = [r for r in self.model if r[0] < end]
        self.end = end
        self.flushed = min(self.flushed, end)

    # -------------------------------------------------------------------------------------------- appends

    @rule(rec=records.map(lambda rs: rs[0]))
    def append(self, rec):
        key, value, headers, ts = rec
        assert self.log.append(value, key=key, headers=headers, timestamp=ts) == self.end
        self.add([rec])

    @rule(recs=records, codec=st.sampled_from(CODECS))
    def append_batch(self, recs, codec):
        keys, values, headers, tss = map(list, zip(*recs))
        got = self.log.append_batch(values, keys=keys, headers=headers, timestamps=tss, compression=codec)
        assert got == (self.end, self.end + len(recs) - 1)
        self.add(recs)

    @rule(recs=records, codec=st.sampled_from(CODECS))
    def append_raw(self, recs, codec):
        w = _engine.BatchWriter(compression=codec, batch_bytes=1 << 20)
        keys, values, headers, tss = map(list, zip(*recs))
        w.add_many(values, keys, headers, tss)
        assert self.log.append_raw(w.take()) == self.end
        self.add(recs)

    # ----------------------------------------------------------------------------------- durability, files

    @rule()
    def flush(self):
        self.log.flush()
        self.flushed = self.end

    @rule()
    def roll(self):
        self.log.roll()

    @rule()
    def close_and_reopen(self):
        self.log.close()
        self.log = Log(self.path, self.config)
        assert self.log.recovery.clean_shutdown
        self.flushed = self.end

    @rule(data=st.data())
    def crash(self, data):
        claimed = self.log.recovery_point
        assert claimed >= self.flushed, f"recovery point {claimed} below the flushed end {self.flushed}"
        old = self.path
        self.generation += 1
        crash_copy(old, self.path)
        self.log.close()
        # the marker stays until the first change after a clean open: then nothing is unsynced to tear
        untouched = (self.path / ".clean-shutdown").exists()
        if not untouched and data.draw(st.booleans(), label="tear"):
            last = segment_files(self.path)[-1]
            durable = next((s.position for s in batch_spans(last) if s.base_offset >= claimed),
                           os.path.getsize(last))
            os.truncate(last, data.draw(st.integers(durable, os.path.getsize(last)), label="cut"))
            with open(last, "ab") as f:
                f.write(data.draw(st.binary(max_size=100), label="garbage"))
        shutil.rmtree(old)
        self.log = Log(self.path, self.config)
        assert self.log.recovery.clean_shutdown == untouched
        end = self.log.end_offset
        assert claimed <= end <= self.end and (end == self.end or not untouched), \
            f"recovered end {end} outside {claimed}..{self.end}"
        self.cut(end)
        self.start = min(max(self.start, self.log.segment_bases[0]), end)

    # ------------------------------------------------------------------------------- truncation, retention

    @rule(data=st.data())
    def truncate_to(self, data):
        k = data.draw(st.integers(-3, self.end + 3), label="offset")
        if k < 0:
            with pytest.raises(InvalidArgumentError):   # nothing changes (was: a segment named "-000...3.log")
                self.log.truncate_to(k)
            return
        if k >= self.end:
            self.log.truncate_to(k)                     # at or past the end: nothing happens
            return
        if k < self.start:
            self.log.truncate_to(k)                     # below the log start: emptied, restarts at k
            self.model, self.start, self.end, self.flushed = [], k, k, min(self.flushed, k)
            return
        expected = self.end if k == self.end else batch_bounds(self.log.read(k, 1))[0]
        self.log.truncate_to(k)
        self.cut(expected)
        self.start = min(self.start, expected)          # the batch holding the start offset may go whole

    @rule(data=st.data())
    def truncate_fully_and_start_at(self, data):
        k = data.draw(st.integers(-3, self.end + 50), label="offset")
        if k < 0:
            with pytest.raises(InvalidArgumentError):
                self.log.truncate_fully_and_start_at(k)
            return
        self.log.truncate_fully_and_start_at(k)
        self.model, self.start, self.end, self.flushed = [], k, k, min(self.flushed, k)

    @rule(data=st.data())
    def delete_records_before(self, data):
        k = data.draw(st.integers(self.start, self.end), label="offset")
        assert self.log.delete_records_before(k) == k
        self.start = k

    @rule(now=st.integers(0, 2000))
    def enforce_retention(self, now):
        self.log.flush()                                # seals buffered records so segment sizes are final
        self.flushed = self.end
        cfg, bases = self.config, self.log.segment_bases
        sizes = [os.path.getsize(self.path / ("%020d.log" % b)) for b in bases]
        excess = sum(sizes) - cfg.retention_bytes if cfg.retention_bytes >= 0 else -1
        doomed = 0
        for i, base in enumerate(bases):                # Kafka's rule, over the model's timestamps
            upper = bases[i + 1] if i + 1 < len(bases) else self.end
            if sizes[i] == 0:
                break
            newest = max(r[4] for r in self.model if base <= r[0] < upper)
            if not (upper <= self.start or (cfg.retention_ms >= 0 and newest < now - cfg.retention_ms)
                    or (excess >= 0 and excess - sizes[i] >= 0)):
                break
            doomed += 1
            excess -= sizes[i]
        assert self.log.enforce_retention(now_ms=now) == doomed
        kept = bases[doomed:] or [self.end]
        assert self.log.segment_bases == kept
        self.model = [r for r in self.model if r[0] >= kept[0]]
        self.start = max(self.start, kept[0])

    # -------------------------------------------------------------------------------------------- reads

    @rule(data=st.data(), max_bytes=st.integers(1, 3000))
    def read(self, data, max_bytes):
        if self.end == self.start:
            assert len(self.log.read(self.end)) == 0
            return
        k = data.draw(st.integers(self.start, self.end - 1), label="offset")
        view = self.log.read(k, max_bytes)
        base, last = batch_bounds(view)
        assert base <= k <= last, f"read({k}) starts with batch {base}..{last}"
        infos = _engine.batches(view)                   # whole, CRC-valid batches
        assert len(infos) == 1 or sum(b.size for b in infos) <= max_bytes
        want = [r for r in self.model if k <= r[0] <= infos[-1].last_offset]
        got = [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in _engine.decode_records(view, k)]
        assert got == want
        if self.start > 0:
            try:
                self.log.read(self.start - 1)
                raise AssertionError("read below the start offset did not raise")
            except OffsetOutOfRangeError:
                pass

    @rule(data=st.data())
    def offset_for_timestamp(self, data):
        known = [r[4] for r in self.model]
        ts = data.draw(st.one_of(st.integers(-1, 1001), *([st.sampled_from(known)] if known else [])), label="ts")
        want = next(((r[0], r[4]) for r in self.model if r[0] >= self.start and r[4] >= ts), None)
        assert self.log.offset_for_timestamp(ts) == want

    @invariant()
    def log_matches_the_model(self):
        if self.log is None:
            return
        log = self.log
        assert (log.start_offset, log.end_offset, log.high_watermark) == (self.start, self.end, self.end)
        assert log.recovery_point >= self.flushed
        got = [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in log.records()]
        assert got == [r for r in self.model if r[0] >= self.start]


LogMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=50, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
test_log_model = LogMachine.TestCase


def test_truncating_the_start_batch_keeps_start_below_end(tmp_path):
    with Log(tmp_path / "t-0") as log:
        log.append_batch([b"a", b"b"])                  # one batch: offsets 0..1
        log.delete_records_before(1)
        log.truncate_to(1)                              # removes the batch holding 1, i.e. 0..1
        assert log.start_offset <= log.high_watermark <= log.end_offset == 0
        assert log.append(b"c") == 0
        assert [r.value for r in log.records()] == [b"c"]

"""Log: offsets, buffering, batches, rolls, retention, truncation, timestamps, checkpoints, errors."""

import os
import time

import pytest

from seglog import Log, LogConfig, _engine
from seglog.scheduler import Scheduler, Task
from seglog.errors import (CorruptRecordError, InvalidArgumentError, InvalidRecordError, InvalidTimestampError,
                           LogClosedError, OffsetOutOfRangeError, ReadOnlyLogError, RecordTooLargeError,
                           StorageError)


def values(log, start=None, end=None):
    return [r.value for r in log.records(start, end)]


@pytest.fixture
def log(tmp_path):
    with Log(tmp_path / "events-0", LogConfig(segment_bytes=4096, index_interval_bytes=256)) as lg:
        yield lg


def test_the_readme_example(tmp_path):
    with Log(str(tmp_path / "events-0"), LogConfig(segment_bytes=64 << 20)) as log:
        off = log.append(b"value", key=b"k", headers=[("h", b"v")], timestamp=None)
        first, last = log.append_batch([b"v1", b"v2"], keys=None, compression="lz4")
        base = log.append_raw(bytes(log.read(first, 1 << 20)))
        view = log.read(off, 1 << 20)
        recs = list(log.records(start=0))
        assert (off, first, last, base) == (0, 1, 2, 3)
        assert [(r.offset, r.key, r.value, r.headers) for r in recs] == [
            (0, b"k", b"value", (("h", b"v"),)), (1, None, b"v1", ()), (2, None, b"v2", ()),
            (3, None, b"v1", ()), (4, None, b"v2", ())]
        assert (recs[0].topic, recs[0].partition) == ("events", 0)
        assert isinstance(view, memoryview) and len(view) > 0
        assert log.offset_for_timestamp(0).offset == 0
        assert (log.start_offset, log.end_offset) == (0, 5)
        log.truncate_to(3)
        log.flush()
        assert log.end_offset == 3


def test_appended_records_are_visible_at_once(log):
    for i in range(10):
        assert log.append(b"%d" % i) == i
        assert log.end_offset == i + 1
        assert values(log, i) == [b"%d" % i]            # a read seals the buffered batch


def test_per_record_appends_are_batched(log):
    for i in range(500):
        log.append(b"x" * 20)
    log.flush()
    batches = sum(len(_engine.batches(log.read(b, 1 << 20))) for b in log.segment_bases)
    assert batches < 50


def test_rolls_by_size_and_names_segments(log, tmp_path):
    log.append_batch([b"y" * 200] * 100)
    assert log.segment_count > 3
    names = sorted(n for n in os.listdir(tmp_path / "events-0") if n.endswith(".log"))
    assert names == ["%020d.log" % b for b in log.segment_bases]
    for base in log.segment_bases:
        assert os.path.getsize(tmp_path / "events-0" / ("%020d.log" % base)) <= 4096
    assert values(log) == [b"y" * 200] * 100


def test_rolls_by_age_of_message_timestamps(tmp_path):
    with Log(tmp_path / "t-0", LogConfig(segment_ms=1000)) as log:
        log.append(b"a", timestamp=10_000)
        log.append(b"b", timestamp=10_500)             # one batch (max timestamp 10500) starts the segment
        log.flush()
        log.append(b"c", timestamp=11_500)
        log.flush()
        assert log.segment_count == 1                  # 1000 ms after the first batch: not past segment.ms
        log.append(b"d", timestamp=11_501)
        log.flush()
        assert log.segment_count == 2


def test_segment_jitter_is_drawn_once_per_segment(tmp_path):
    """segment.jitter.ms: a segment rolls segment.ms minus its own random jitter in [0, jitter) after its first
    batch, as Kafka's rollJitterMs (was: segment.ms minus the whole jitter, i.e. a roll at every batch here)."""
    with Log(tmp_path / "j-0", LogConfig(segment_ms=1000, segment_jitter_ms=5000)) as log:
        rolled, t = [], 10_000
        for _ in range(40):                            # each trial starts a new segment with a batch at t
            log.append(b"first", timestamp=t)
            log.flush()
            n = log.segment_count
            log.append(b"+500", timestamp=t + 500)     # rolls iff this segment's jitter exceeds 500
            log.flush()
            rolled.append(log.segment_count > n)
            if not rolled[-1]:
                log.append(b"+500 again", timestamp=t + 500)
                log.flush()
                assert log.segment_count == n, "the jitter changed within a segment"
                log.roll()
            t += 10_000
        assert 5 < sum(rolled) < 35, f"{sum(rolled)} of 40 segments rolled 500 ms after their first batch"


def test_append_batch_is_all_or_nothing_across_chunks(tmp_path, monkeypatch):
    import seglog.log as logmod
    monkeypatch.setattr(logmod, "APPEND_CHUNK_BYTES", 2000)       # several chunks reach the disk first
    with Log(tmp_path / "t-0", LogConfig(segment_bytes=3000)) as log:
        log.append_batch([b"keep"] * 3)
        with pytest.raises(TypeError):
            log.append_batch([b"z" * 100] * 200 + ["not bytes"])
        assert log.end_offset == 3 and values(log) == [b"keep"] * 3
        with pytest.raises(RecordTooLargeError):
            log.append_batch([b"a", b"b" * (2 << 20)])
        assert log.append(b"next") == 3


def test_readers_never_see_part_of_a_failing_append_batch(tmp_path, monkeypatch):
    import threading

    import seglog.log as logmod
    monkeypatch.setattr(logmod, "APPEND_CHUNK_BYTES", 2000)       # ~50 chunks, ~35 rolls before the bad record
    seen, stop = set(), threading.Event()
    with Log(tmp_path / "t-0", LogConfig(segment_bytes=3000)) as log:
        log.append_batch([b"keep"] * 3)

        def read():
            while not stop.is_set():
                seen.add(log.end_offset)
                seen.update(r.offset for r in log.records())
                if log.offset_for_timestamp(0) is not None:
                    seen.add(log.offset_for_timestamp(0).offset)
        reader = threading.Thread(target=read)
        reader.start()
        try:
            with pytest.raises(TypeError):
                log.append_batch([b"z" * 100] * 1000 + ["not bytes"])
        finally:
            stop.set()
            reader.join()
        assert max(seen) <= 3 and log.end_offset == 3


def test_append_batch_of_nothing_is_an_error(log):
    log.append_batch([b"a"])
    for values in ([], ()):
        with pytest.raises(InvalidArgumentError, match="at least one record"):
            log.append_batch(values)                  # was (end, end - 1): a range naming the last record
    assert log.append_batch([b"b"]) == (1, 1)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches(tmp_path, codec):
    with Log(tmp_path / "c-0") as log:
        vals = [os.urandom(40) * 3 for _ in range(2000)]
        keys = [b"k%d" % i for i in range(2000)]
        log.append_batch(vals, keys=keys, compression=codec)
        infos = _engine.batches(log.read(0, 1 << 30))
        assert {i.compression for i in infos} == {codec}
        assert [(r.key, r.value) for r in log.records()] == list(zip(keys, vals))


def test_read_edges_and_errors(log):
    for i in range(0, 50, 5):
        log.append_batch([b"%d" % j for j in range(i, i + 5)])      # batches of 5
    assert len(log.read(log.end_offset)) == 0
    with pytest.raises(OffsetOutOfRangeError) as e:
        log.read(51)
    assert (e.value.start, e.value.end) == (0, 50)
    view = log.read(20, 1)                               # smaller than a batch: still the whole batch
    recs = _engine.decode_records(view)
    assert recs[0].offset <= 20 <= recs[-1].offset
    limited = _engine.decode_records(log.read(0, 1 << 20, max_offset=10))
    assert max(r.offset for r in limited) < 10
    assert values(log, 45) == [b"%d" % i for i in range(45, 50)]
    assert values(log, 10, 12) == [b"10", b"11"]


def test_offset_for_timestamp_across_segments(tmp_path):
    with Log(tmp_path / "t-0", LogConfig(segment_bytes=2000, index_interval_bytes=100)) as log:
        ts = [1000 + 10 * i for i in range(300)]
        log.append_batch([b"v" * 30] * 300, timestamps=ts)
        assert log.segment_count > 3
        for target in (0, 1000, 1001, 1555, 3990):
            want = next(i for i, t in enumerate(ts) if t >= target)
            assert log.offset_for_timestamp(target) == (want, ts[want])
        assert log.offset_for_timestamp(4000) is None


def test_retention_by_time_and_size(tmp_path):
    cfg = LogConfig(segment_bytes=1000, retention_ms=60_000, file_delete_delay_ms=0)
    with Log(tmp_path / "r-0", cfg) as log:
        now = int(time.time() * 1000)
        log.append_batch([b"o" * 80] * 30, timestamps=[now - 3_600_000] * 30)
        old_segments = log.segment_count
        log.roll()
        log.append_batch([b"n" * 80] * 30, timestamps=[now] * 30)
        deleted = log.enforce_retention(now)
        assert deleted == old_segments
        assert log.start_offset == 30 and values(log)[0] == b"n" * 80
        assert not [n for n in os.listdir(tmp_path / "r-0") if n.endswith(".deleted")]
    with Log(tmp_path / "r-0", cfg.replace(retention_ms=-1, retention_bytes=2000)) as log:
        assert log.start_offset == 30                    # the start offset is checkpointed
        log.enforce_retention()
        assert log.size_bytes <= 2000 + 1000
        assert log.end_offset == 60 and values(log)[-1] == b"n" * 80


def test_retention_never_passes_the_high_watermark(tmp_path):
    cfg = LogConfig(segment_bytes=500, retention_ms=1, file_delete_delay_ms=0)
    with Log(tmp_path / "h-0", cfg) as log:
        log.append_batch([b"q" * 100] * 20, timestamps=[1] * 20)
        log.high_watermark = 3
        log.enforce_retention()
        assert log.start_offset <= 3
        assert values(log, log.start_offset, 4)[-1] == b"q" * 100
        log.high_watermark = 20
        log.enforce_retention()                          # everything expired: roll, delete all, keep end
        assert (log.start_offset, log.end_offset, log.segment_count) == (20, 20, 1)
        assert log.append(b"after") == 20


def test_truncate_to_middle_of_the_log(log):
    log.append_batch([b"%050d" % i for i in range(300)])
    segments = log.segment_count
    log.truncate_to(123)
    assert 100 < log.end_offset <= 123 and 1 < log.segment_count < segments
    end = log.end_offset
    assert values(log) == [b"%050d" % i for i in range(end)]
    assert log.append(b"new") == end
    log.truncate_to(10**6)                               # past the end: nothing happens
    assert log.end_offset == end + 1


def test_truncate_fully_and_start_elsewhere(log):
    log.append_batch([b"a"] * 10)
    log.truncate_fully_and_start_at(500)
    assert (log.start_offset, log.end_offset, log.segment_bases) == (500, 500, [500])
    assert log.append(b"b") == 500


@pytest.mark.parametrize("bad", [-1, -3, -(1 << 63), 1 << 63, True, 2.0, "5", None])
def test_truncation_refuses_what_is_not_an_offset(log, bad):
    log.append_batch([b"a", b"b", b"c"])
    for call in (log.truncate_to, log.truncate_fully_and_start_at):
        with pytest.raises(InvalidArgumentError, match="offset"):
            call(bad)
    assert (log.start_offset, log.end_offset, values(log)) == (0, 3, [b"a", b"b", b"c"])
    assert not [n for n in os.listdir(log.path) if n.startswith("-")]      # was: a "-000...0003.log" segment
    assert log.append(b"d") == 3
    log.close()
    with Log(log.path, log.config) as again:
        assert values(again) == [b"a", b"b", b"c", b"d"]


def test_truncation_takes_integer_like_offsets(log):
    numpy = pytest.importorskip("numpy")
    for i in range(10):
        log.append_batch([b"%d" % i])                    # one batch per record
    log.truncate_to(numpy.int64(4))
    assert log.end_offset == 4
    log.truncate_fully_and_start_at(numpy.uint32(7))
    assert (log.start_offset, log.end_offset) == (7, 7)


def test_delete_records_before(log):
    log.append_batch([b"%d" % i for i in range(100)])
    assert log.delete_records_before(40) == 40
    assert log.start_offset == 40 and values(log)[0] == b"40"
    with pytest.raises(OffsetOutOfRangeError):
        log.read(39)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(101)


def test_append_raw_validates_and_stamps(tmp_path):
    with Log(tmp_path / "a-0") as log:
        w = _engine.BatchWriter(next_offset=777, leader_epoch=0)
        w.add_many([b"a", b"b"])
        raw = w.take()
        log.leader_epoch = 5
        assert log.append_raw(raw) == 0
        [info] = _engine.batches(log.read(0))
        assert (info.base_offset, info.leader_epoch) == (0, 5)
        assert bytes(log.read(0))[21:] == raw[21:]          # stored as it came but for offset and epoch
        bad = bytearray(raw)
        bad[-1] ^= 1
        with pytest.raises(CorruptRecordError):
            log.append_raw(bad)
        with pytest.raises(InvalidRecordError):
            log.append_raw(raw + raw)
        assert log.end_offset == 2 and log.leader_epochs == [(5, 0)]


def test_log_append_time_and_timestamp_limits(tmp_path):
    w = _engine.BatchWriter()
    w.add(b"x", None, None, 1000)
    w.finish()
    raw = w.take()
    with Log(tmp_path / "lat-0", LogConfig(message_timestamp_type="LogAppendTime")) as log:
        before = int(time.time() * 1000)
        log.append_raw(raw)
        log.append(b"y", timestamp=5)
        r1, r2 = log.records()
        assert r1.timestamp >= before and r1.timestamp_type == 1 and r2.timestamp_type == 1
    with Log(tmp_path / "lim-0", LogConfig(message_timestamp_before_max_ms=3_600_000)) as log:
        with pytest.raises(InvalidTimestampError):
            log.append_raw(raw)
    with Log(tmp_path / "big-0") as log:                 # past int64: a clear error (was OverflowError)
        with pytest.raises(InvalidTimestampError, match="int64"):
            log.append(b"z", timestamp=1 << 63)
        with pytest.raises(InvalidTimestampError, match="int64"):
            log.append_batch([b"a", b"b"], timestamps=[1, -(1 << 64)])
        assert log.end_offset == 0
        with pytest.raises(InvalidTimestampError, match="int64"):
            log.offset_for_timestamp(1 << 63)


def test_topic_compression_type_recompresses(tmp_path):
    w = _engine.BatchWriter(compression="gzip")
    w.add_many([b"z" * 50] * 10, headers=[[("h", b"1")]] * 10)
    raw = w.take()
    with Log(tmp_path / "z-0", LogConfig(compression_type="lz4")) as log:
        log.append_raw(raw)
        [info] = _engine.batches(log.read(0))
        assert info.compression == "lz4"
        assert [(r.value, r.headers) for r in log.records()] == [(b"z" * 50, (("h", b"1"),))] * 10


def test_append_as_follower_keeps_offsets(tmp_path):
    with Log(tmp_path / "leader-0") as leader, Log(tmp_path / "follower-0") as follower:
        leader.leader_epoch = 3
        leader.append_batch([b"%d" % i for i in range(20)])
        follower.append_as_follower(leader.read(0, 1 << 20))
        assert values(follower) == values(leader) and follower.end_offset == 20
        assert follower.leader_epochs == [(3, 0)]
        assert follower.end_offset_for_epoch(3) == (3, 20)
        with pytest.raises(InvalidRecordError):
            follower.append_as_follower(leader.read(0, 1 << 20))     # offsets must move forward


def test_a_log_that_never_changed_leaders_has_one_epoch(log):
    """A lone broker's partition: epoch 0 from the start, ending at the log end (never (-1, -1), which tells a
    consumer its position diverged)."""
    assert log.end_offset_for_epoch(0) == (0, 0)
    log.append_batch([b"a"] * 5)
    assert log.leader_epochs == []
    assert log.end_offset_for_epoch(0) == (0, 5) and log.end_offset_for_epoch(3) == (0, 5)
    assert log.end_offset_for_epoch(-1) == (-1, -1)


def test_leader_epoch_cache(log):
    log.leader_epoch = 1
    log.append_batch([b"a"] * 5)
    log.leader_epoch = 4
    log.append_batch([b"b"] * 5)
    assert log.leader_epochs == [(1, 0), (4, 5)]
    assert log.end_offset_for_epoch(1) == (1, 5)
    assert log.end_offset_for_epoch(2) == (1, 5)
    assert log.end_offset_for_epoch(4) == (4, 10)
    assert log.end_offset_for_epoch(0) == (-1, -1)
    log.truncate_to(5)
    assert log.leader_epochs == [(1, 0)]


def test_clean_reopen_keeps_everything(tmp_path):
    path = tmp_path / "p-0"
    with Log(path, LogConfig(segment_bytes=3000)) as log:
        log.append_batch([b"%d" % i for i in range(400)], compression="lz4")
        log.append(b"buffered")                          # close() writes the buffered batch
    assert os.path.exists(path / ".clean-shutdown")
    with Log(path, LogConfig(segment_bytes=3000)) as log:
        assert log.recovery.clean_shutdown and log.recovery.segments_scanned == 0
        assert log.end_offset == 401 and values(log)[-1] == b"buffered"
        assert os.path.exists(path / ".clean-shutdown")      # reading changes nothing: the marker stays ...
        assert log.append(b"more") == 401
        assert not os.path.exists(path / ".clean-shutdown")  # ... until the first change


def test_unclean_reopen_recovers_from_the_recovery_point(tmp_path):
    path = tmp_path / "u-0"
    log = Log(path, LogConfig(segment_bytes=3000))
    log.append_batch([b"%d" % i for i in range(400)])
    log.flush()
    rp = log.recovery_point
    log._local.release_dir_lock()                              # "crash": the object is abandoned without close()
    with open(path / ("%020d.log" % log.segment_bases[-1]), "ab") as f:
        f.write(b"\x00" * 30)                            # a torn write
    with Log(path, LogConfig(segment_bytes=3000)) as again:
        assert not again.recovery.clean_shutdown
        assert again.recovery.bytes_truncated == 30
        assert 1 <= again.recovery.segments_scanned < again.segment_count or again.segment_count == 1
        assert again.end_offset == rp == 400 and values(again) == [b"%d" % i for i in range(400)]


def test_flush_messages_policy_moves_the_recovery_point(tmp_path):
    with Log(tmp_path / "f-0", LogConfig(flush_messages=5)) as log:
        for i in range(12):
            log.append(b"x")
        assert log.recovery_point == 10


class IdleScheduler:
    """Takes the log's periodic task and never runs it: the test calls maintain() itself."""

    def schedule(self, fn, delay, period=None, name=""):
        return Task(fn, period, name)


def test_flush_ms_policy_flushes_by_time_in_maintain(tmp_path):
    with Log(tmp_path / "f-0", LogConfig(flush_ms=300), scheduler=IdleScheduler()) as log:
        opened = time.monotonic()
        log.append(b"x")
        log.maintain()                                   # the batch is written, but 300 ms have not passed
        if time.monotonic() - opened < 0.3:
            assert log.recovery_point == 0
        time.sleep(0.35)
        log.maintain()
        assert log.recovery_point == 1                   # fsynced without flush()


def test_flush_ms_policy_runs_on_the_scheduler(tmp_path):
    sched = Scheduler("flush-ms-test")
    try:
        with Log(tmp_path / "f-0", LogConfig(flush_ms=20), scheduler=sched) as log:
            log.append(b"x")
            log.append(b"y")                             # buffered: nothing calls flush(), read or maintain()
            deadline = time.monotonic() + 10
            while log.recovery_point < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert log.recovery_point == 2
    finally:
        sched.shutdown()


def test_errors(tmp_path, log):
    with pytest.raises(InvalidArgumentError):
        Log(tmp_path / "x-0", config={"segment.bytes": 1})
    with pytest.raises(TypeError):
        log.append("str value")
    with pytest.raises(RecordTooLargeError):
        log.append(b"x" * (2 << 20))
    with pytest.raises(StorageError, match="locked"):
        Log(log.path)
    with pytest.raises(StorageError):
        Log(tmp_path / "missing-0", readonly=True)
    log.close()
    for call in (lambda: log.append(b"x"), lambda: log.read(0), lambda: log.flush(),
                 lambda: log.append_batch([b"x"]), lambda: log.truncate_to(0)):
        with pytest.raises(LogClosedError):
            call()
    log.close()                                          # idempotent


def test_read_only_open_sees_a_consistent_prefix(tmp_path):
    path = tmp_path / "ro-0"
    with Log(path, LogConfig(segment_bytes=2000)) as log:
        log.append_batch([b"%d" % i for i in range(100)])
        log.flush()
        ro = Log(path, readonly=True)
        assert ro.end_offset == 100 and values(ro) == [b"%d" % i for i in range(100)]
        log.append_batch([b"more"] * 10)
        log.flush()
        assert ro.end_offset == 100
        ro.refresh()
        assert ro.end_offset == 110 and values(ro, 100) == [b"more"] * 10
        with pytest.raises(ReadOnlyLogError):
            ro.append(b"x")
        ro.close()


def test_config_validation_and_kafka_names():
    cfg = LogConfig.from_kafka({"segment.bytes": "1048576", "cleanup.policy": "compact,delete",
                                "flush.messages": str((1 << 63) - 1)})
    assert cfg.segment_bytes == 1 << 20 and cfg.compact and cfg.delete and cfg.flush_messages is None
    assert LogConfig().to_kafka()["retention.ms"] == "604800000"
    from seglog.errors import InvalidConfigError
    for bad in ({"segment.bytes": "lots"}, {"retention.ms": "-5"}, {"cleanup.policy": "archive"},
                {"no.such.config": "1"}, {"min.insync.replicas": "0"}, {"preallocate": "maybe"}):
        with pytest.raises(InvalidConfigError):
            LogConfig.from_kafka(bad)


def idempotent_batch(pid, epoch, seq, n=2, base_value=b"v"):
    w = _engine.BatchWriter(producer_id=pid, producer_epoch=epoch, next_sequence=seq)
    w.add_many([base_value + b"%d" % (seq + i) for i in range(n)])
    return w.take()


def test_idempotent_producer_duplicates_and_gaps(tmp_path):
    from seglog.errors import InvalidProducerEpochError, OutOfOrderSequenceError
    with Log(tmp_path / "i-0") as log:
        assert log.append_raw(idempotent_batch(7, 0, 0)) == 0
        assert log.append_raw(idempotent_batch(7, 0, 2)) == 2
        assert log.append_raw(idempotent_batch(7, 0, 0)) == 0       # retried: acknowledged, not written twice
        assert log.append_raw(idempotent_batch(7, 0, 2)) == 2
        assert log.end_offset == 4
        with pytest.raises(OutOfOrderSequenceError):
            log.append_raw(idempotent_batch(7, 0, 6))               # a gap
        with pytest.raises(OutOfOrderSequenceError):
            log.append_raw(idempotent_batch(7, 1, 3))               # a new epoch must start at 0
        assert log.append_raw(idempotent_batch(7, 1, 0)) == 4
        with pytest.raises(InvalidProducerEpochError):
            log.append_raw(idempotent_batch(7, 0, 4))               # fenced: older epoch
        assert log.append_raw(idempotent_batch(8, 0, 500)) == 6     # unknown producer: any sequence
        assert log.end_offset == 8
        assert [r.value for r in log.records()] == [b"v0", b"v1", b"v2", b"v3", b"v0", b"v1", b"v500", b"v501"]


@pytest.mark.parametrize("clean", [True, False])
def test_producer_state_survives_reopen(tmp_path, clean):
    path = tmp_path / "s-0"
    log = Log(path, LogConfig(segment_bytes=600))
    for seq in range(0, 40, 2):
        log.append_raw(idempotent_batch(3, 0, seq, base_value=b"x" * 30))
    assert log.segment_count > 2 and any(n.endswith(".snapshot") for n in os.listdir(path))
    if clean:
        log.close()
    else:
        log.flush()
        log._local.release_dir_lock()                                     # crash: no close, no final snapshot
    with Log(path, LogConfig(segment_bytes=600)) as again:
        assert again.append_raw(idempotent_batch(3, 0, 38, base_value=b"x" * 30)) == 38   # still a duplicate
        assert again.end_offset == 40
        from seglog.errors import OutOfOrderSequenceError
        with pytest.raises(OutOfOrderSequenceError):
            again.append_raw(idempotent_batch(3, 0, 44))
        assert again.append_raw(idempotent_batch(3, 0, 40)) == 40


def test_truncation_rewinds_producer_state(tmp_path):
    with Log(tmp_path / "t-0") as log:
        for seq in range(0, 10, 2):
            log.append_raw(idempotent_batch(9, 0, seq))
        log.truncate_to(6)                                          # batches with sequences 6.. are gone
        assert log.end_offset == 6
        assert log.append_raw(idempotent_batch(9, 0, 6)) == 6       # accepted again, not a duplicate


@pytest.mark.parametrize("clean", [True, False])
def test_reopening_with_less_data_than_the_checkpoint_promises_is_reported(tmp_path, caplog, clean):
    """Deleted .log files (or damage cut at recovery) leave fewer offsets than the state checkpoint vouched for:
    Log.recovery says how many are lost and a WARNING names the directory, after a clean shutdown or a crash."""
    cfg = LogConfig(index_interval_bytes=256)
    log = Log(tmp_path / "t-0", cfg)
    for _ in range(20):
        log.append_batch([b"x" * 100] * 10)
    log.high_watermark = 200
    if clean:
        log.close()
    else:
        log.flush()
        log._write_state()                     # the checkpoint as the periodic flush writes it
    for name in os.listdir(tmp_path / "t-0"):
        if name.endswith(".log"):
            os.unlink(tmp_path / "t-0" / name)
    if not clean:
        log._local.release_dir_lock()                # "crash": the object is abandoned without close()
    caplog.set_level("WARNING", logger="seglog.log")
    with Log(tmp_path / "t-0", cfg) as again:
        assert again.end_offset == 0
        assert (again.recovery.promised_end_offset, again.recovery.lost_offsets) == (200, 200)
        for _ in range(20):                                 # the orphaned indexes are gone, not taken up
            again.append_batch([b"y" * 100] * 10)
        assert [r.value for r in again.records()] == [b"y" * 100] * 200
    [warning] = [r for r in caplog.records if "offsets are lost" in r.getMessage()]
    assert warning.levelname == "WARNING" and str(tmp_path / "t-0") in warning.getMessage()


def test_a_complete_log_reports_no_loss(tmp_path):
    with Log(tmp_path / "t-0") as log:
        log.append_batch([b"x"] * 10)
        log.high_watermark = 10
    with Log(tmp_path / "t-0") as again:
        assert (again.recovery.promised_end_offset, again.recovery.lost_offsets) == (10, 0)


def test_reads_check_crcs_after_releasing_the_log_lock(tmp_path):
    """Readers of a partition do not wait for each other's CRC checks: a read takes the Log lock for the
    position and the batches' framing only, and CRC-checks what it returns after releasing it."""
    import threading

    with Log(tmp_path / "c-0") as log:
        log.append_batch([b"x" * 1000] * 2000)
    with Log(tmp_path / "c-0") as log:                      # reopened: nothing verified yet
        seg_verified = []

        class SpyLock:
            def __init__(self):
                self._lock = threading.Lock()

            def __enter__(self):
                self._lock.acquire()

            def __exit__(self, *exc):
                seg_verified.append(log._local.active.verified_end)
                self._lock.release()

        log._lock = SpyLock()
        assert log._local.active.verified_end == 0
        view = log.read(0, 1 << 20)
        assert len(view) > 0
        assert seg_verified[-1] == 0 < log._local.active.verified_end >= len(view)

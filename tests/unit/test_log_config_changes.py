"""Assigning Log.config (a topic's config altered) takes full effect for the next append, on the writers the
Log already holds (append()'s and append_batch()'s) and on its maintenance timer."""

import time

import pytest

from seglog import Log, LogConfig, _engine
from seglog.errors import InvalidTimestampError, RecordTooLargeError
from seglog.scheduler import Scheduler


def batch_sizes(log):
    return [b.size for base in log.segment_bases for b in _engine.batches(log.read(base, 1 << 30))]


def test_max_message_bytes_and_the_batch_budget_follow_the_config(tmp_path):
    with Log(tmp_path / "c-0") as log:
        log.append(b"a")
        log.append_batch([b"b"])                               # both writers exist before the change
        log.config = log.config.replace(max_message_bytes=2048)
        with pytest.raises(RecordTooLargeError, match="2048"):
            log.append(b"x" * 3000)
        with pytest.raises(RecordTooLargeError, match="2048"):
            log.append_batch([b"x" * 3000])
        for _ in range(100):
            log.append(b"y" * 100)
        log.append_batch([b"z" * 100] * 100)
        assert max(batch_sizes(log)) <= 2048                   # was ~16 KiB and ~64 KiB batches
        log.config = log.config.replace(max_message_bytes=1 << 20)
        log.append(b"x" * 3000)                                # the raised limit holds too


def test_timestamp_settings_follow_the_config(tmp_path):
    with Log(tmp_path / "c-0") as log:
        log.append(b"a", timestamp=5)
        log.append_batch([b"b"], timestamps=[5])
        log.config = log.config.replace(message_timestamp_type="LogAppendTime")
        before = int(time.time() * 1000)
        log.append(b"c", timestamp=5)
        log.append_batch([b"d"], timestamps=[5])
        got = [(r.timestamp_type, r.timestamp >= before) for r in log.records()]
        assert got == [(0, False), (0, False), (1, True), (1, True)]
        log.config = log.config.replace(message_timestamp_type="CreateTime", message_timestamp_before_max_ms=1000)
        with pytest.raises(InvalidTimestampError, match="before.max.ms"):
            log.append(b"e", timestamp=5)
        with pytest.raises(InvalidTimestampError, match="before.max.ms"):
            log.append_batch([b"e"], timestamps=[5])


def test_flush_messages_follows_the_config(tmp_path):
    with Log(tmp_path / "c-0") as log:
        log.append(b"a")
        log.config = log.config.replace(flush_messages=1)
        for i in range(3):
            log.append(b"x")
            assert log.recovery_point == log.end_offset        # every record fsynced (was: buffered)


def test_flush_ms_reschedules_maintenance(tmp_path):
    sched = Scheduler("config-change-test")
    try:
        with Log(tmp_path / "c-0", scheduler=sched) as log:    # maintain() every 5 minutes
            log.config = log.config.replace(flush_ms=20)
            log.append(b"x")                                   # buffered: only the timer can flush it
            deadline = time.monotonic() + 10
            while log.recovery_point < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert log.recovery_point == 1
    finally:
        sched.shutdown()


def test_records_buffered_before_a_change_keep_the_old_settings(tmp_path):
    with Log(tmp_path / "c-0") as log:
        log.append(b"x" * 3000)                                # buffered in append()'s open batch
        log.config = LogConfig(max_message_bytes=2048)        # written first, as the batch it was
        assert [r.value for r in log.records()] == [b"x" * 3000]

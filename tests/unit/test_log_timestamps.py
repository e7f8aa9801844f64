"""Record timestamps: one rule for append, append_batch, append_raw and the Producer (ints >= 0 within the
topic's message.timestamp.before/after.max.ms of now for CreateTime; the append time for LogAppendTime)."""

import time

import pytest

import seglog
from seglog import Log, LogConfig, _engine
from seglog.errors import InvalidTimestampError

HOUR = 3_600_000


def client_batch(timestamps):
    w = _engine.BatchWriter(accept_no_timestamp=True)
    for ts in timestamps:
        w.add(b"x", None, None, ts)
    w.finish()
    return w.take()


@pytest.mark.parametrize("ts", [-5, -1, -(1 << 62)])
def test_negative_timestamps_are_refused(tmp_path, ts):
    with Log(tmp_path / "t-0") as log:
        with pytest.raises(InvalidTimestampError, match="negative"):
            log.append(b"x", timestamp=ts)                     # was stored as given
        with pytest.raises(InvalidTimestampError, match="negative"):
            log.append_batch([b"a", b"b"], timestamps=[1000, ts])
        assert log.end_offset == 0 and log.append(b"ok", timestamp=0) == 0
        assert [r.timestamp for r in log.records()] == [0]


@pytest.mark.parametrize("ts", [1.9, 1000.0, True, "1000"])
def test_timestamps_must_be_ints(tmp_path, ts):
    """A float was truncated (1.9 stored as 1): TypeError, as for a value or key of the wrong type."""
    with Log(tmp_path / "t-0") as log:
        with pytest.raises(TypeError, match="timestamp must be an int"):
            log.append(b"x", timestamp=ts)
        with pytest.raises(TypeError, match="timestamp must be an int"):
            log.append_batch([b"a"], timestamps=[ts])
        assert log.end_offset == 0


def test_the_timestamp_window_applies_to_every_append(tmp_path):
    """message.timestamp.before/after.max.ms bounded append_raw only; append and append_batch skipped it."""
    cfg = LogConfig(message_timestamp_before_max_ms=HOUR, message_timestamp_after_max_ms=HOUR)
    now = int(time.time() * 1000)
    with Log(tmp_path / "t-0", cfg) as log:
        for ts, edge in ((now - 2 * HOUR, "before"), (now + 2 * HOUR, "after")):
            with pytest.raises(InvalidTimestampError, match=f"message.timestamp.{edge}.max.ms"):
                log.append(b"x", timestamp=ts)
            with pytest.raises(InvalidTimestampError, match=f"message.timestamp.{edge}.max.ms"):
                log.append_batch([b"a", b"b"], timestamps=[now, ts])
            with pytest.raises(InvalidTimestampError, match=f"message.timestamp.{edge}.max.ms"):
                log.append_raw(client_batch([now, ts]), now_ms=now)
        assert log.end_offset == 0
        log.append(b"x", timestamp=now - HOUR // 2)
        log.append_batch([b"a"], timestamps=[now + HOUR // 2])
        log.append_raw(client_batch([now, -1]), now_ms=now)     # -1 (NO_TIMESTAMP) from a client: not checked
        assert log.end_offset == 4
        with pytest.raises(InvalidTimestampError, match="negative"):
            log.append_raw(client_batch([now, -5]), now_ms=now)


def test_log_append_time_ignores_the_window_and_stamps_the_append_time(tmp_path):
    cfg = LogConfig(message_timestamp_type="LogAppendTime", message_timestamp_before_max_ms=HOUR)
    before = int(time.time() * 1000)
    with Log(tmp_path / "t-0", cfg) as log:
        log.append(b"x", timestamp=5)
        log.append_batch([b"a", b"b"], timestamps=[6, 7])
        log.append_raw(client_batch([8]))
        records = list(log.records())
        assert len(records) == 4
        assert all(r.timestamp_type == 1 and r.timestamp >= before for r in records)
        with pytest.raises(InvalidTimestampError, match="negative"):    # still not a timestamp
            log.append(b"x", timestamp=-5)


def test_check_timestamps_is_the_rule():
    check = _engine.check_timestamps
    check(0, 10, 5)                                             # unbounded by default
    check(10, 0, 5)                                             # nothing to check (every record NO_TIMESTAMP)
    check(4, 6, 5, 1, 1)
    with pytest.raises(InvalidTimestampError, match="before"):
        check(3, 6, 5, 1, 1)
    with pytest.raises(InvalidTimestampError, match="after"):
        check(4, 7, 5, 1, 1)
    with pytest.raises(InvalidTimestampError, match="negative"):
        check(-2, 7, 5)


def test_producer_refuses_bad_timestamps_at_send(tmp_path):
    """Producer.send truncated a float timestamp; a negative one failed only later, in the future."""
    node = seglog.open(tmp_path / "data")
    try:
        node.create_topic("t", 1)
        with seglog.Producer(node, linger_ms=0) as prod:
            with pytest.raises(TypeError, match="timestamp must be an int"):
                prod.send("t", b"x", timestamp=1.9)
            with pytest.raises(InvalidTimestampError, match="negative"):
                prod.send("t", b"x", timestamp=-5)
            assert prod.send("t", b"x", timestamp=7).get().timestamp == 7
        assert [r.timestamp for r in node.partition("t", 0).log.records()] == [7]
    finally:
        node.close()


def test_offset_of_max_timestamp_is_the_first_record_with_the_largest_timestamp(tmp_path):
    now = int(time.time() * 1000)
    with Log(tmp_path / "p", LogConfig(segment_bytes=200)) as log:
        assert log.offset_of_max_timestamp() is None                     # empty: nothing to point at
        for i, ts in enumerate([now - 50, now - 10, now - 30, now - 10, now - 40, now - 20]):
            log.append(b"v%d" % i, timestamp=ts)
            log.flush()                                                    # one batch each
        assert log.segment_count > 1                                       # the maximum is found across segments
        assert log.offset_of_max_timestamp() == (1, now - 10)
        log.append(b"late", timestamp=now)
        assert log.offset_of_max_timestamp() == (6, now)

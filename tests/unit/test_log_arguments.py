"""Arguments of Log's read side and of delete_records_before: clear errors naming the argument, Kafka's
semantics for offsets past the end and for DeleteRecords' -1; state properties read under the lock."""

import threading

import pytest

from seglog import Log, LogConfig
from seglog.errors import InvalidArgumentError, OffsetOutOfRangeError


@pytest.fixture
def log(tmp_path):
    with Log(tmp_path / "a-0", LogConfig(segment_bytes=4096)) as lg:
        lg.append_batch([b"%d" % i for i in range(100)])
        yield lg


@pytest.mark.parametrize("call, name", [
    (lambda lg: lg.read("0"), "read offset"),
    (lambda lg: lg.read(1.0), "read offset"),
    (lambda lg: lg.read(0, "big"), "max_bytes"),
    (lambda lg: lg.read(0, -1), "max_bytes"),                  # was accepted
    (lambda lg: lg.read(0, 100, max_offset=-3), "max_offset"),
    (lambda lg: lg.read_next(None), "read offset"),
    (lambda lg: lg.records(start="a"), "records start"),
    (lambda lg: lg.records(end=2.5), "records end"),
])
def test_bad_read_arguments_name_the_argument(log, call, name):
    with pytest.raises(InvalidArgumentError, match=name):     # was a bare comparison TypeError (or nothing)
        call(log)


def test_offset_for_timestamp_wants_an_int(log):
    with pytest.raises(TypeError, match="timestamp must be an int"):
        log.offset_for_timestamp("x")
    assert log.offset_for_timestamp(0).offset == 0


def test_records_past_the_end_is_out_of_range_at_the_call(log):
    """As a Kafka fetch: past the log end OFFSET_OUT_OF_RANGE (records() returned nothing), at the end empty."""
    with pytest.raises(OffsetOutOfRangeError) as e:
        log.records(start=10 ** 6)                             # raised by the call, not by the first next()
    assert (e.value.start, e.value.end) == (0, 100)
    assert list(log.records(start=100)) == []
    assert [r.offset for r in log.records(98, 10 ** 6)] == [98, 99]    # an end past the log: up to its end
    log.delete_records_before(50)
    with pytest.raises(OffsetOutOfRangeError):
        log.records(start=10)


def test_delete_records_before_minus_one_means_the_high_watermark(log):
    log.high_watermark = 60
    assert log.delete_records_before(-1) == 60                 # Kafka's DeleteRecords: -1 = high watermark
    assert log.start_offset == 60 and [r.offset for r in log.records()][:1] == [60]
    assert log.delete_records_before(10) == 60                 # below the start: nothing changes (as Kafka)
    for bad in (-2, 61):
        with pytest.raises(OffsetOutOfRangeError):
            log.delete_records_before(bad)
    with pytest.raises(InvalidArgumentError, match="delete records offset"):
        log.delete_records_before("5")
    assert log.start_offset == 60


@pytest.mark.parametrize("prop", ["segment_count", "segment_bases", "size_bytes"])
def test_state_properties_wait_for_the_lock(log, prop):
    """They were read without the lock, so they could show an append_batch half done (its segments rolled,
    not yet taken back)."""
    got = []
    with log._lock:                                            # as an append_batch holds it
        reader = threading.Thread(target=lambda: got.append(getattr(log, prop)))
        reader.start()
        reader.join(0.2)
        assert reader.is_alive() and not got
    reader.join(5)
    assert got and got[0] == getattr(log, prop)

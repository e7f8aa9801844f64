"""Segment.append starts the disk writing every few MiB appended (advisory: flush() alone makes data durable);
truncation and later appends keep the .log's bytes exact."""

from seglog import Log


def test_appends_past_the_writeback_step_then_truncation_read_back_exactly(tmp_path):
    values = [b"%07d" % i + b"x" * 993 for i in range(12_000)]          # ~12 MiB: several writeback steps
    with Log(tmp_path / "t-0") as log:
        for s in range(0, len(values), 1000):
            log.append_batch(values[s:s + 1000])
        log.truncate_to(5_000)
        log.append_batch(values[5_000:9_000])
        log.flush()
        assert [r.value for r in log.records()] == values[:9_000]
    with Log(tmp_path / "t-0") as log:
        assert log.end_offset == 9_000
        assert [r.value for r in log.records(8_990)] == values[8_990:9_000]

"""Read-only opens of a log another writer is appending to: what the reader sees is the state of the files at
some moment of its open, and the writer goes on meanwhile. The reader takes the .log's size first and reads the
indexes after it, so they may hold entries of batches past that size (ignored), the newest segment's index
files may not exist yet (empty) or be trimmed by a roll while they are read (a shorter snapshot), and a listing
of the directory taken while the writer rolls may miss a segment created during it but hold a later one."""

import os
import shutil
import struct
import threading
import time

from seglog import Log, LogConfig, _engine

SEGMENT = "00000000000000000000"


def config(**kw) -> LogConfig:
    return LogConfig(index_interval_bytes=64, retention_ms=-1, **kw)


def value(offset: int) -> bytes:
    return b"value-%d" % offset


def append(log: Log, n: int) -> None:
    first = log.end_offset
    log.append_batch([value(o) for o in range(first, first + n)], timestamps=[1000 + o for o in range(first, first + n)])


def index_positions(path) -> list[int]:
    data = open(path, "rb").read()
    return [struct.unpack_from(">ii", data, i)[1] for i in range(0, len(data) - 7, 8) if data[i:i + 8] != bytes(8)]


def snapshot_at(tmp_path, cut: int):
    """A log of 40 single-record batches, copied as a reader taking the .log's size `cut` bytes into the 20th
    batch would see it: the .log cut there, the indexes as the writer left them after all 40."""
    src, dst = tmp_path / "w-0", tmp_path / "r-0"
    with Log(src, config()) as log:
        for _ in range(20):
            append(log, 1)
        size = os.path.getsize(src / f"{SEGMENT}.log")
        for _ in range(20):
            append(log, 1)
    shutil.copytree(src, dst)
    os.truncate(dst / f"{SEGMENT}.log", size + cut)
    assert max(index_positions(dst / f"{SEGMENT}.index")) > size      # entries past what the reader sees
    return dst, size


def test_index_entries_past_the_size_read_are_ignored(tmp_path):
    """Was CorruptIndexError "the last index entry does not point at its batch" at end_offset."""
    path, size = snapshot_at(tmp_path, 0)
    with Log(path, readonly=True) as ro:
        assert ro.end_offset == 20
        assert [r.value for r in ro.records()] == [value(o) for o in range(20)]
        assert ro.offset_for_timestamp(1010).offset == 10
        assert ro.offset_for_timestamp(1020) is None
    seg = _engine.Segment(str(path), 0, writable=False)
    assert seg.scan_tail() == size
    assert seg.next_offset == 20 and seg.largest_timestamp == 1019      # not the time index's later entries
    assert all(pos < size for _, pos in (seg.offset_index.entry(i) for i in range(seg.offset_index.entries)))
    seg.close()


def test_index_entry_of_a_batch_cut_short_is_ignored(tmp_path):
    """The reader's size ends inside a batch the writer has since completed and indexed."""
    path, size = snapshot_at(tmp_path, 30)
    with Log(path, readonly=True) as ro:
        assert ro.end_offset == 20
        assert [r.value for r in ro.records(15)] == [value(o) for o in range(15, 20)]


def test_missing_index_files_of_the_newest_segment_read_as_empty(tmp_path):
    """The writer creates the .log first: a reader may find the newest segment without its indexes."""
    path = tmp_path / "t-0"
    with Log(path, config(segment_bytes=1024)) as log:
        for _ in range(40):
            append(log, 3)
        bases = log.segment_bases
    assert len(bases) > 2
    newest = os.path.join(path, "%020d" % bases[-1])
    for missing in ([".timeindex"], [".index"], [".index", ".timeindex"]):
        saved = {ext: open(newest + ext, "rb").read() for ext in missing}
        for ext in missing:
            os.unlink(newest + ext)
        with Log(path, readonly=True) as ro:
            assert ro.end_offset == 120
            assert [r.value for r in ro.records(bases[-1])] == [value(o) for o in range(bases[-1], 120)]
            assert ro.offset_for_timestamp(1000 + bases[-1] + 1).offset == bases[-1] + 1
            for ext, data in saved.items():          # the writer creates them now: refresh() picks them up
                with open(newest + ext, "wb") as f:
                    f.write(data)
            ro.refresh()
            assert ro.end_offset == 120 and ro.offset_for_timestamp(1119).offset == 119


def test_read_only_opens_while_a_writer_appends_and_rolls(tmp_path):
    """Every open succeeds and reads what was written, whatever the writer was doing at that moment (appending,
    indexing, rolling: creating the next segment's files, trimming the last one's indexes)."""
    path = tmp_path / "t-0"
    writer = Log(path, config(segment_bytes=16384))
    append(writer, 10)
    stop = threading.Event()
    failed = []

    def write():
        try:
            while not stop.is_set():
                append(writer, 3)
        except BaseException as e:          # reported by the main thread
            failed.append(e)

    t = threading.Thread(target=write)
    t.start()
    opens, last_end, deadline = 0, 0, time.monotonic() + 4
    try:
        while time.monotonic() < deadline and not failed:
            with Log(path, readonly=True) as ro:
                end = ro.end_offset
                assert end >= last_end
                first = max(ro.start_offset, end - 40)
                assert [r.value for r in ro.records(first, end)] == [value(o) for o in range(first, end)]
                last_end = end
            opens += 1
    finally:
        stop.set()
        t.join()
        writer.close()
    assert not failed, failed
    assert opens >= 20 and len(os.listdir(path)) > 10           # many opens, across several rolls


def listing_during_two_rolls(monkeypatch, path, writer: Log) -> dict:
    """Patch os.listdir so that the next listing of `path` runs while the writer rolls twice, and returns, as
    readdir in hash order may, the second new segment but not the first (created while it ran, before the
    second). Later listings are whole. Returns {"missed": base, "seen": base} once it ran."""
    real, bases = os.listdir, {}

    def listdir(p=".", *a):
        names = real(p, *a)
        if bases or os.fspath(p) != os.fspath(path):
            return names
        for _ in range(2):
            append(writer, 3)
            writer.roll()
        bases["missed"], bases["seen"] = writer.segment_bases[-2:]
        return names + [f"{bases['seen']:020d}{ext}" for ext in (".log", ".index", ".timeindex")]

    monkeypatch.setattr(os, "listdir", listdir)
    return bases


def check_prefix(ro: Log, writer: Log) -> None:
    """The reader has the writer's log, up to its end, without a gap."""
    end = ro.end_offset
    assert end == writer.end_offset
    assert [r.value for r in ro.records(end - 40, end)] == [value(o) for o in range(end - 40, end)]
    assert [r.offset for r in ro.records()] == list(range(end))
    assert ro.segment_bases == writer.segment_bases


def test_open_while_a_listing_misses_a_segment_rolled_during_it(tmp_path, monkeypatch):
    """Was: the reader took the listed newest (empty) segment's base as its end, past the missed segment: no
    records in [end - 40, end)."""
    path = tmp_path / "t-0"
    with Log(path, config(segment_bytes=1024)) as writer:
        append(writer, 60)
        rolled = listing_during_two_rolls(monkeypatch, path, writer)
        with Log(path, readonly=True) as ro:
            assert rolled["missed"] < rolled["seen"]
            check_prefix(ro, writer)


def test_refresh_while_a_listing_misses_a_segment_rolled_during_it(tmp_path, monkeypatch):
    path = tmp_path / "t-0"
    with Log(path, config(segment_bytes=1024)) as writer:
        append(writer, 60)
        with Log(path, readonly=True) as ro:
            assert ro.end_offset == 60
            rolled = listing_during_two_rolls(monkeypatch, path, writer)
            ro.refresh()
            assert rolled
            check_prefix(ro, writer)

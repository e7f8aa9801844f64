"""Disk-full scenarios, run in their own process so that a SIGBUS or SIGXFSZ shows up as a signal exit
instead of killing the test run. Prints one JSON object of observations; the test asserts on them.

    python disk_full_child.py batches|records DIR      DIR on a small tmpfs: fill it, fail, free, reopen
    python disk_full_child.py sweep DIR                the same with many amounts of space left
    python disk_full_child.py rlimit DIR               RLIMIT_FSIZE instead of a full disk (EFBIG)
"""

import json
import os
import random
import resource
import shutil
import signal
import sys
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from helpers.content import append_many, append_one, check_records     # noqa: E402
from seglog import Log, LogConfig                                     # noqa: E402
from seglog.errors import StorageError                                # noqa: E402

AFTER = 10                       # records appended once space is back


def config(segment_bytes: int) -> LogConfig:
    return LogConfig(segment_bytes=segment_bytes, index_interval_bytes=512, segment_index_bytes=4096,
                     retention_ms=-1)


def problem(fn) -> str | None:
    """None if fn() runs, else the error it raised (type, message, where)."""
    try:
        fn()
        return None
    except Exception as e:                                  # noqa: BLE001 - reported to the test
        return f"{type(e).__name__}: {e} at {traceback.extract_tb(e.__traceback__)[-1].line}"


def fill_filesystem(directory: str, spare: int) -> str:
    """A file taking all but `spare` bytes of the file system holding directory; returns its path."""
    st = os.statvfs(directory)
    filler = os.path.join(directory, "filler")
    with open(filler, "wb") as f:
        f.write(bytes(max(st.f_bavail * st.f_frsize - spare, 0)))
    return filler


def append_until_error(log, per_record: bool, seed: int) -> dict:
    """Append and flush until a StorageError; what was acknowledged and how the log looks right after.
    Acknowledged: flushed, or returned by append() (an offset returned is kept; until there is room again, the
    returned records not yet in a segment are in the append journal only, so what reads back at once is what
    was flushed)."""
    rng, acked = random.Random(seed), log.end_offset
    flushed = acked
    for _ in range(100_000):
        try:
            if per_record:
                for _ in range(rng.randint(1, 40)):
                    append_one(log)
                    acked = log.end_offset
            else:
                append_many(log, rng.randint(1, 200), compression=rng.choice(["lz4", None]))
            log.flush()
            acked = flushed = log.end_offset
        except StorageError as e:
            return {"acked": acked, "errno": e.errno, "error": str(e), "end_after_error": log.end_offset,
                    "read_problem": problem(lambda: check_records(log.records(0, flushed), 0, flushed))}
    return {"acked": acked, "errno": None}


def recover_and_reopen(log, path, segment_bytes, per_record: bool, make_room) -> dict:
    """Free space (make_room), append AFTER more records, then reopen: what worked."""
    make_room()

    def more():
        for _ in range(AFTER):
            append_one(log) if per_record else append_many(log, 1)
        log.flush()
    report = {"after_free_problem": problem(more), "end_after_free": log.end_offset}
    log.close()

    def reopen():
        with Log(path, config(segment_bytes)) as again:
            report["reopen_end"] = again.end_offset
            check_records(again.records(), 0, again.end_offset)
    report["reopen_problem"] = problem(reopen)
    return report


def full_disk(directory: str, per_record: bool, spare: int, segment_bytes: int, seed: int) -> dict:
    path = os.path.join(directory, "t-0")
    log = Log(path, config(segment_bytes))
    filler = fill_filesystem(directory, spare)
    report = append_until_error(log, per_record, seed)
    report.update(recover_and_reopen(log, path, segment_bytes, per_record, lambda: os.unlink(filler)))
    return report


def sweep(directory: str) -> dict:
    """Many amounts of free space, so the failing write is sometimes the .log's and sometimes an index's."""
    runs = []
    for i, spare in enumerate(range(8 << 10, 200 << 10, 4 << 10)):
        sub = os.path.join(directory, f"run-{i}")
        os.mkdir(sub)
        report = full_disk(sub, per_record=False, spare=spare + 1000, segment_bytes=16384, seed=i)
        runs.append(dict(report, spare=spare + 1000))
        shutil.rmtree(sub)
    return {"runs": runs}


def rlimit(directory: str) -> dict:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)               # write() fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, 256 << 10))
    path = os.path.join(directory, "t-0")
    log = Log(path, config(1 << 20))
    report = append_until_error(log, per_record=False, seed=7)
    report.update(recover_and_reopen(log, path, 1 << 20, False, log.roll))    # a new segment has room
    return report


def main() -> None:
    scenario, directory = sys.argv[1], sys.argv[2]
    if scenario in ("batches", "records"):
        report = full_disk(directory, scenario == "records", spare=256 << 10, segment_bytes=64 << 10, seed=1)
    else:
        report = {"sweep": sweep, "rlimit": rlimit}[scenario](directory)
    print(json.dumps(report))


if __name__ == "__main__":
    main()

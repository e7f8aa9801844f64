"""Writer process for the crash tests: opens (recovering) a log and appends until it is killed.

    python crash_writer.py DIR SEED SEGMENT_BYTES [--die-in-roll STAGE ROLLS]

Prints ``ready <end offset>`` once the log is open, then ``<end offset>`` after every flush() returns: each
printed offset is acknowledged. Records are the offset-derived ones of helpers.content, appended one by one
or with append_batch (lz4 or uncompressed). With --die-in-roll the process SIGKILLs itself inside its
ROLLS-th segment roll, at STAGE: ``snapshot`` (old segment sealed, new one not created yet), ``checkpoint``
(new segment created, state checkpoint not written) or ``done`` (right after the roll's checkpoint).
"""

import os
import random
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import seglog.log_loader                                     # noqa: E402
import seglog.producer_state                                 # noqa: E402
from helpers.content import append_many, append_one          # noqa: E402
from seglog import Log, LogConfig                            # noqa: E402


def config(segment_bytes: int) -> LogConfig:
    return LogConfig(segment_bytes=segment_bytes, index_interval_bytes=512, segment_index_bytes=64 * 1024,
                     retention_ms=-1)


def die_in_roll(stage: str, rolls: int) -> None:
    """Patch the roll's steps (each runs once per roll while appending) to SIGKILL at the chosen one."""
    seen = 0

    def wrap(fn, before):
        def wrapper(*args, **kwargs):
            nonlocal seen
            seen += 1
            if before and seen == rolls:
                os.kill(os.getpid(), signal.SIGKILL)
            result = fn(*args, **kwargs)
            if not before and seen == rolls:
                os.kill(os.getpid(), signal.SIGKILL)
            return result
        return wrapper

    if stage == "snapshot":
        cls = seglog.producer_state.ProducerStateManager
        cls.write_snapshot = wrap(cls.write_snapshot, before=True)
    else:
        seglog.log_loader.write_checkpoint = wrap(seglog.log_loader.write_checkpoint, before=stage == "checkpoint")


def main() -> None:
    directory, seed, segment_bytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    log = Log(directory, config(segment_bytes))
    print("ready", log.end_offset, flush=True)
    if "--die-in-roll" in sys.argv:
        i = sys.argv.index("--die-in-roll")
        die_in_roll(sys.argv[i + 1], int(sys.argv[i + 2]))
    while True:
        op = rng.random()
        if op < 0.5:
            append_one(log)
        elif op < 0.75:
            append_many(log, rng.randint(1, 80), compression=rng.choice(["lz4", None]))
        else:
            log.flush()
            print(log.end_offset, flush=True)


if __name__ == "__main__":
    main()

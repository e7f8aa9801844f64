"""Smoke test of an installed seglog wheel: run by cibuildwheel's test-command, wheels/build.sh and
tests/integration/test_packaging.py.

    python smoke.py [WORK_DIR]

Checks that `seglog` is the installed copy (not a source tree), that the compiled core loads and computes
CRC-32C, that every runtime codec dependency works (lz4, snappy and zstd through cramjam), that a log
appends, rolls, survives a crash and reads back, and that the `seglog` command runs (demo and dump-log).
Prints "smoke ok" and exits 0, or fails with an AssertionError / non-zero exit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile


def check_import() -> None:
    import seglog
    from seglog import _engine
    assert os.path.realpath(seglog.__file__).startswith(os.path.realpath(sys.prefix) + os.sep), \
        f"seglog imported from {seglog.__file__}, not from the installed wheel under {sys.prefix}"
    assert _engine.crc32c(b"123456789") == 0xE3069283
    assert _engine.crc32c_table(b"123456789") == 0xE3069283
    print(f"seglog {seglog.__version__} from {os.path.dirname(seglog.__file__)}; "
          f"CRC-32C hardware instruction: {_engine.crc32c_hardware()}")


def check_log(work: str) -> str:
    """Append with every codec, roll segments, simulate a crash, reopen and read back. Returns the log path."""
    from seglog import Log, LogConfig
    path = os.path.join(work, "smoke-0")
    codecs = ("none", "lz4", "snappy", "zstd", "gzip")
    with Log(path, LogConfig(segment_bytes=1 << 16)) as log:
        for codec in codecs:
            log.append_batch([b"%s-%d" % (codec.encode(), i) for i in range(4000)], compression=codec)
        log.append(b"last", key=b"k", headers=[("h", b"v")])
        log.flush()
        assert log.segment_count > 1, log.segment_count
    os.remove(os.path.join(path, ".clean-shutdown"))             # reopen as after a crash
    with Log(path) as log:
        assert not log.recovery.clean_shutdown
        assert log.end_offset == 4000 * len(codecs) + 1, log.end_offset
        values = [r.value for r in log.records()]
        assert values[:2] == [b"none-0", b"none-1"] and values[4000] == b"lz4-0", values[:2]
        assert values[-2:] == [b"gzip-3999", b"last"], values[-2:]
        last = next(log.records(log.end_offset - 1))
        assert (last.key, last.headers) == (b"k", (("h", b"v"),)), last
    fresh = os.path.join(work, "close-0")                        # close() alone persists append()ed records
    with Log(fresh) as log:
        for i in range(100):
            log.append(b"%d" % i)
    with Log(fresh) as log:
        assert log.end_offset == 100, f"records appended then closed without flush() were lost: {log.end_offset}"
    return path


def seglog_command() -> list[str]:
    script = os.path.join(os.path.dirname(sys.executable), "seglog")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "seglog"]


def check_cli(work: str, log_path: str) -> None:
    cmd = seglog_command()
    demo = subprocess.run(cmd + ["demo", "--records", "20000", "--data-dir", os.path.join(work, "demo")],
                          capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "verified: every record read back once" in demo.stdout, demo.stdout
    dump = subprocess.run(cmd + ["dump-log", "--print-payload", os.path.join(log_path, "00000000000000000000.log")],
                          capture_output=True, text=True, timeout=300)
    assert dump.returncode == 0, dump.stdout + dump.stderr
    assert "payload: none-0" in dump.stdout, dump.stdout[:2000]


def main(argv: list[str]) -> int:
    work = argv[1] if len(argv) > 1 else tempfile.mkdtemp(prefix="seglog-smoke-")
    os.makedirs(work, exist_ok=True)
    try:
        check_import()
        check_cli(work, check_log(work))
    finally:
        if len(argv) <= 1:
            shutil.rmtree(work, ignore_errors=True)
    print("smoke ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

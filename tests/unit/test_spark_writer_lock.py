"""The Spark writer's wait for a partition another task is writing (seglog.spark.writer._open_for_append)."""

import pytest

pytest.importorskip("pyspark")

from seglog import Log, LogConfig  # noqa: E402
from seglog.checkpoints import lock_directory  # noqa: E402
from seglog.errors import StorageError  # noqa: E402
from seglog.spark import writer  # noqa: E402


def test_a_lock_released_between_the_refusal_and_the_check_is_taken_again(tmp_path, monkeypatch):
    """Two tasks writing one partition: the other task's close can fall between this task's refused open and
    its look at the lock. The writer then tries again instead of failing the task (seen once in CI)."""
    path = str(tmp_path / "sink-0")
    Log(path, LogConfig(), topic="sink", partition=0).close()
    held = lock_directory(path, "busy")
    checks = []

    def released_just_now(p):
        checks.append(p)
        writer.os.close(held)           # the other writer closes its log at this very moment
        monkeypatch.setattr(writer, "_lock_held", lambda p: False)
        return False

    monkeypatch.setattr(writer, "_lock_held", released_just_now)
    lg = writer._open_for_append(path, LogConfig(), "sink", 0, timeout_s=5)
    try:
        assert checks == [path] and lg.end_offset == 0
    finally:
        lg.close()


def test_a_refusal_that_is_not_a_lock_is_raised(tmp_path):
    """A partition dir that cannot be opened for another reason fails at once, not after the lock timeout."""
    with pytest.raises(StorageError):
        writer._open_for_append(str(tmp_path / "missing-0"), LogConfig(), "missing", 0, timeout_s=30)

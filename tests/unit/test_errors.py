"""The exception hierarchy: explicit classes, one per Kafka code, each buildable from a message alone."""
import ast
import errno
import inspect

import pytest

import seglog
import seglog.errors as errors
from seglog.errors import StorageError
from seglog.client import error_for

CLASSES = [getattr(errors, n) for n in errors.__all__ if isinstance(getattr(errors, n), type)]


def test_every_class_is_written_out_in_the_module_source():
    tree = ast.parse(inspect.getsource(errors))
    written = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    assert {cls.__name__ for cls in CLASSES} == written


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_class_is_built_from_a_message_alone(cls):
    err = cls("broker said no")
    assert str(err) == "broker said no"
    assert isinstance(err, errors.SeglogError)


@pytest.mark.parametrize("cls", [c for c in CLASSES if c.code != -1], ids=lambda c: c.__name__)
def test_wire_codes_round_trip(cls):
    assert errors.code_of(cls("x")) == cls.code
    assert issubclass(cls, errors.for_code(cls.code)) or errors.for_code(cls.code).code == cls.code


def test_errors_from_the_wire_carry_their_data_fields():
    err = error_for(errors.OffsetOutOfRangeError.code, "offset 9 out of range")
    assert isinstance(err, errors.OffsetOutOfRangeError)
    assert (err.offset, err.start, err.end) == (None, None, None)
    err = error_for(errors.RecordTooLargeError.code)
    assert (err.size, err.limit) == (None, None)
    assert "MESSAGE_TOO_LARGE" in str(err)


def test_data_fields_build_the_message():
    err = errors.OffsetOutOfRangeError(offset=12, start=3, end=10, what="t-0")
    assert (err.offset, err.start, err.end) == (12, 3, 10)
    assert "offset 12 is out of range for t-0" in str(err)
    err = errors.RecordTooLargeError(size=2000, limit=1000, what="record", setting="max.request.size")
    assert (err.size, err.limit) == (2000, 1000)
    assert "max.request.size" in str(err)


def test_unknown_codes_give_unknown_server_error():
    assert errors.for_code(31337) is errors.UnknownServerError
    assert errors.code_of(RuntimeError("x")) == -1


@pytest.mark.parametrize("code, fails", [(errno.ENOSPC, True), (errno.EDQUOT, True), (errno.EROFS, True),
                                         (errno.EIO, True), (errno.ENOENT, False), (errno.EACCES, False),
                                         (None, False)])
def test_a_storage_error_names_a_failed_disk_only_for_the_file_systems_own_failures(code, fails):
    assert StorageError("write failed", "/d/t-0", code).disk_failure is fails


def test_a_lone_broker_keeps_serving_after_a_disk_failure(tmp_path):
    with seglog.serve(tmp_path) as b:
        b.broker.log_dir_failed(StorageError("write failed", str(tmp_path), errno.ENOSPC))
        assert b.broker.log_dir_failure is None       # no other replica could lead: it answers KAFKA_STORAGE_ERROR
        assert b.broker.node.log_dir_failure is None
        assert b.broker.node.create_topic("t", 1) is not None


def test_a_cluster_member_takes_no_produce_once_its_disk_failed(tmp_path):
    """Its data directory is offline, as Kafka's: every produce is KAFKA_STORAGE_ERROR until it has stopped."""
    from seglog.broker import RunningBroker
    from seglog.cluster.memory import MemoryCluster, MemoryMetadataStore

    with RunningBroker(tmp_path, broker_id=0, metadata_store=MemoryMetadataStore(MemoryCluster())) as b:
        error = StorageError("write failed", str(tmp_path), errno.ENOSPC)
        b.broker.log_dir_failed(error)
        assert b.broker.log_dir_failure is error and b.broker.node.log_dir_failure is error

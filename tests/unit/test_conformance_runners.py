"""The conformance runners' reading of a suite's JUnit report (tests/conformance/junit.py) and the
confluent-kafka-python runner's checks of its source tree (no network, no broker)."""

from __future__ import annotations

import pytest

from conformance import confluent_kafka_python as ckp
from conformance.junit import file_and_name, parse_junit

REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.integration.admin.test_basic_operations" name="test_basic_operations"/>
<testcase classname="tests.integration.admin.test_incremental_alter_configs" name="test_incremental_alter_configs">
  <failure message="AssertionError: assert [...] == [...]&#10;more">trace</failure></testcase>
<testcase classname="tests.integration.producer.test_transactions" name="test_commit_transaction">
  <error message="failed on setup with &quot;KafkaException&quot;">trace</error></testcase>
<testcase classname="tests.integration.consumer.test_consumer_upgrade_downgrade" name="test_consumer_upgrade_downgrade">
  <skipped message="Skipping test as group protocol consumer is not enabled"/></testcase>
<testcase classname="tests.integration.integration_test" name="test_producer_dr_only_error">
  <skipped message="This test must be run as a standalone script"/></testcase>
</testsuite></testsuites>"""


def test_a_report_is_read_against_the_known_failures(tmp_path):
    report = tmp_path / "junit.xml"
    report.write_text(REPORT)
    results = parse_junit(report, ckp.KNOWN_FAILURES, ckp.integration_id)
    assert [(o.test, o.result) for o in results.outcomes] == [
        ("admin/test_basic_operations.py::test_basic_operations", "passed"),
        ("admin/test_incremental_alter_configs.py::test_incremental_alter_configs", "failed"),
        ("producer/test_transactions.py::test_commit_transaction", "error"),
        ("consumer/test_consumer_upgrade_downgrade.py::test_consumer_upgrade_downgrade", "skipped"),
        ("integration_test.py::test_producer_dr_only_error", "skipped")]
    assert results.outcomes[1].message == "AssertionError: assert [...] == [...]"
    assert [o.test for o in results.unexpected] == ["producer/test_transactions.py::test_commit_transaction"]
    assert results.fixed == []
    rows = results.rows()
    assert any(r.startswith("| `producer/test_transactions.py::test_commit_transaction` | error | NEW: ")
               for r in rows)
    assert any("KIP-966" in r for r in rows)
    assert file_and_name("test.integration.test_admin_integration.TestX", "test_y") == \
        "test_admin_integration.py::TestX::test_y"


def test_a_source_that_is_not_a_checkout_is_refused(tmp_path):
    with pytest.raises(RuntimeError, match="is not a confluent-kafka-python checkout"):
        ckp.source(str(tmp_path))
    (tmp_path / "tests" / "integration").mkdir(parents=True)
    (tmp_path / "tests" / "integration" / "conftest.py").write_text("")
    assert ckp.source(str(tmp_path)) == tmp_path

"""A short seeded chaos schedule (tests/chaos): ZooKeeper + 3 brokers started by the harness, three idempotent
acks=all producers, a consumer group reading and committing, a transactional producer committing and aborting
read back by a read_committed consumer, one fault of each quick kind in a seeded order;
the checker must find no violation (nothing acknowledged lost or duplicated, order kept, no read of a record
later truncated, commits never backwards, replicas byte-identical, the cluster healthy after every fault).

The long schedule is ``python -m tests.chaos --faults 200 --seed S`` (tests/chaos/README.md)."""

import pytest

from chaos.checker import format_report
from chaos.runner import run

pytestmark = [pytest.mark.slow, pytest.mark.zookeeper, pytest.mark.timeout(420)]

CI_KINDS = ["kill_fast", "pause_controller", "partition", "zk_restart", "disk_full", "pause_leader"]


def test_a_short_seeded_chaos_schedule_violates_nothing(zookeeper_installed, tmp_path):
    work = tmp_path / "chaos"
    report = run(work, seed=12, faults=len(CI_KINDS), kinds=CI_KINDS, rate=30.0, groups=1, members=2,
                 recover_timeout=60.0)
    assert report.ok, f"{format_report(report)}\nhistory and logs: {work}"
    assert report.counts["fault_start"] == len(CI_KINDS)
    assert report.counts["ack"] > 1000 and report.counts["read"] > 1000 and report.counts["commit"] > 10
    assert report.counts["txn_end"] >= 10 and report.counts["txn_read"] > 0     # transactions went on throughout
    for w in report.windows:        # every fault ends: the cluster acknowledges writes again
        assert w["recovery_s"] is not None, w

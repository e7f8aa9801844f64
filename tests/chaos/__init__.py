"""A Jepsen-style chaos harness for a seglog cluster (ZooKeeper + 3 brokers): idempotent producers and consumer
groups under a seeded schedule of faults, a recorded history, and a checker that proves nothing acknowledged was
lost, duplicated, reordered or read before it was truncated, that committed offsets never went back, and that
the replicas end byte-identical. See README.md here; ``python -m tests.chaos --help``.

Modules: history (the event log), checker (pure functions over it), workload (producers, group members),
nemesis (the faults), runner (one run). They import tests/cluster_harness.py and tests/faults.py as top-level
modules (pytest puts tests/ on sys.path; ``__main__`` does the same).
"""

"""The `seglog` command's sessions written once and run over both doors (the `cli_door` fixture): a data dir
opened by each command (``--data-dir``) and a broker reached over the wire (``--bootstrap-server``). Each
command runs as users run it, `python -m seglog ...` in a subprocess, and must print the same thing through
either door. What only one door has (a data dir's files, a broker's live partitions, auto-created topics)
stays in test_cli.py and test_cli_broker.py."""

from __future__ import annotations

import os
import re
import time

from test_cli import fails, group_rows, ok, run

from seglog.partitioner import murmur2


def test_a_session_like_the_seeds(cli_door):
    d = cli_door.args
    # kafka-topics.sh --create / --describe / --list
    assert ok("topics", *d, "--create", "--topic", "pet", "--partitions", "3", "--replication-factor", "1",
              "--config", "retention.ms=604800000") == "Created topic pet.\n"
    lines = ok("topics", *d, "--describe", "--topic", "pet").splitlines()
    assert re.fullmatch(r"Topic: pet\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\tReplicationFactor: 1\t"
                        r"Configs: retention\.ms=604800000", lines[0]), lines[0]
    assert "TopicId: AAAAAAAAAAAAAAAAAAAAAA" not in lines[0]              # a real id, through either door
    assert lines[0] == ok("topics", *d, "--describe", "--topic", "pet").splitlines()[0]    # and a lasting one
    assert lines[1:] == [f"\tTopic: pet\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in range(3)]
    assert ok("topics", *d, "--list") == "pet\n"

    # kafka-console-producer.sh with keys, then kafka-console-consumer.sh --from-beginning: Kafka's key
    # placement, in order per partition, none missing
    records = [(f"k{i % 4}", f"value {i}") for i in range(12)]
    r = run("produce", *d, "--topic", "pet", "--property", "parse.key=true", "--property", "key.separator=:",
            input="".join(f"{k}:{v}\n" for k, v in records))
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    r = run("consume", *d, "--topic", "pet", "--from-beginning", "--max-messages", "12", "--property",
            "print.key=true", "--property", "print.partition=true", "--property", "print.offset=true")
    assert r.returncode == 0 and r.stderr == "Processed a total of 12 messages\n", r.stderr
    seen: dict[int, list[tuple[int, str, str]]] = {}
    for line in r.stdout.splitlines():
        part, off, key, value = line.split("\t")
        p = int(part.removeprefix("Partition:"))
        assert p == (murmur2(key.encode()) & 0x7FFFFFFF) % 3
        seen.setdefault(p, []).append((int(off.removeprefix("Offset:")), key, value))
    for p, rows in seen.items():
        assert [o for o, _, _ in rows] == list(range(len(rows)))
        assert [(k, v) for _, k, v in rows] == [kv for kv in records if (murmur2(kv[0].encode()) & 0x7FFFFFFF) % 3 == p]
    assert sum(map(len, seen.values())) == 12

    # a group reads everything and commits: lag 0; 5 more records: lag 5; the group reads exactly those
    values = ok("consume", *d, "--topic", "pet", "--group", "g1", "--from-beginning", "--max-messages", "12")
    assert sorted(values.splitlines()) == sorted(v for _, v in records)
    rows = group_rows(ok("groups", *d, "--describe", "--group", "g1"))
    assert set(rows) == {("pet", p) for p in range(3)}
    assert all(r["LAG"] == "0" and r["CURRENT-OFFSET"] == r["LOG-END-OFFSET"] and r["CONSUMER-ID"] == "-"
               for r in rows.values())
    ok("produce", *d, "--topic", "pet", input="".join(f"more {i}\n" for i in range(5)))
    rows = group_rows(ok("groups", *d, "--describe", "--group", "g1"))
    assert sum(int(r["LAG"]) for r in rows.values()) == 5
    assert all(int(r["LAG"]) == int(r["LOG-END-OFFSET"]) - int(r["CURRENT-OFFSET"]) for r in rows.values())
    assert sorted(ok("consume", *d, "--topic", "pet", "--group", "g1", "--max-messages", "5").splitlines()) == \
        [f"more {i}" for i in range(5)]
    assert all(r["LAG"] == "0" for r in group_rows(ok("groups", *d, "--describe", "--group", "g1")).values())
    assert ok("groups", *d, "--list") == "g1\n"
    assert ok("topics", *d, "--list") == "__consumer_offsets\npet\n"
    assert ok("topics", *d, "--list", "--exclude-internal") == "pet\n"

    # kafka-topics.sh --alter: partitions only grow; configs change whole or not at all
    assert ok("topics", *d, "--alter", "--topic", "pet", "--partitions", "4") == "Adding partitions succeeded!\n"
    fails(1, "Topic currently has 4 partitions", "topics", *d, "--alter", "--topic", "pet", "--partitions", "2")
    assert os.path.isdir(os.path.join(cli_door.path, "pet-3"))
    assert ok("topics", *d, "--alter", "--topic", "pet", "--config", "segment.ms=3600000", "--config",
              "max.message.bytes=2000000") == "Completed updating config for topic pet.\n"
    first = ok("topics", *d, "--describe", "--topic", "pet").splitlines()[0]
    assert first.endswith("Configs: max.message.bytes=2000000,retention.ms=604800000,segment.ms=3600000")
    if cli_door.live:
        assert cli_door.broker.node.partition("pet", 3).log.config.segment_ms == 3_600_000   # live partitions
    fails(1, "Unknown topic config name: retention.bogus", "topics", *d, "--alter", "--topic", "pet",
          "--config", "segment.ms=1", "--config", "retention.bogus=1")
    fails(1, "retention.ms", "topics", *d, "--alter", "--topic", "pet", "--config", "retention.ms=soon")
    fails(1, "Unknown topic config name: nope", "topics", *d, "--alter", "--topic", "pet", "--delete-config", "nope")
    assert ok("topics", *d, "--alter", "--topic", "pet", "--delete-config", "segment.ms,max.message.bytes") == \
        "Completed updating config for topic pet.\n"
    first = ok("topics", *d, "--describe", "--topic", "pet").splitlines()[0]
    assert "PartitionCount: 4\t" in first and first.endswith("Configs: retention.ms=604800000")
    # the offsets topic reports the configs it really has (Kafka creates it compacted, 100 MiB segments)
    first = ok("topics", *d, "--describe", "--topic", "__consumer_offsets").splitlines()[0]
    assert first.endswith("Configs: cleanup.policy=compact,compression.type=producer,segment.bytes=104857600")

    # reset offsets: a dry run changes nothing, --execute does
    before = group_rows(ok("groups", *d, "--describe", "--group", "g1"))
    r = run("groups", *d, "--reset-offsets", "--group", "g1", "--topic", "pet", "--to-earliest")
    assert r.returncode == 0 and "--execute option is missing" in r.stderr
    plan = [line.split() for line in r.stdout.splitlines() if line.strip()]
    assert plan == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]] + [["g1", "pet", str(p), "0"] for p in range(4)]
    assert group_rows(ok("groups", *d, "--describe", "--group", "g1")) == before
    ok("groups", *d, "--reset-offsets", "--group", "g1", "--topic", "pet", "--to-earliest", "--execute")
    rows = group_rows(ok("groups", *d, "--describe", "--group", "g1"))
    assert {tp: r["CURRENT-OFFSET"] for tp, r in rows.items()} == {("pet", p): "0" for p in range(4)}
    assert sum(int(r["LAG"]) for r in rows.values()) == 17
    ok("groups", *d, "--reset-offsets", "--group", "g1", "--topic", "pet:0,2", "--to-offset", "1", "--execute")
    ok("groups", *d, "--reset-offsets", "--group", "g1", "--topic", "pet:2", "--shift-by", "1", "--execute")
    rows = group_rows(ok("groups", *d, "--describe", "--group", "g1"))
    assert [rows[("pet", p)]["CURRENT-OFFSET"] for p in range(4)] == ["1", "0", "2", "0"]
    r = run("groups", *d, "--reset-offsets", "--group", "g1", "--all-topics", "--to-offset", "9999", "--execute")
    assert r.returncode == 0 and "higher than latest offset for topic partition pet-0" in r.stderr
    assert all(r["LAG"] == "0" for r in group_rows(ok("groups", *d, "--describe", "--group", "g1")).values())
    # --to-datetime (Kafka's format): before every record -> the first offset; after all of them -> the end
    ok("groups", *d, "--reset-offsets", "--group", "g1", "--topic", "pet", "--to-datetime",
       "2001-09-09T01:46:40.000", "--execute")
    rows = group_rows(ok("groups", *d, "--describe", "--group", "g1"))
    assert {tp: r["CURRENT-OFFSET"] for tp, r in rows.items()} == {("pet", p): "0" for p in range(4)}
    ok("groups", *d, "--reset-offsets", "--group", "g1", "--topic", "pet", "--to-datetime",
       "2999-01-01T00:00:00.000+01:00", "--execute")
    assert all(r["LAG"] == "0" for r in group_rows(ok("groups", *d, "--describe", "--group", "g1")).values())
    fails(2, "Error parsing timestamp", "groups", *d, "--reset-offsets", "--group", "g1", "--topic", "pet",
          "--to-datetime", "2024-01-31 12:00")
    ok("groups", *d, "--reset-offsets", "--group", "g1", "--topic", "pet:1", "--shift-by", "-2", "--execute")
    assert ok("consume", *d, "--topic", "pet", "--group", "g1", "--timeout-ms", "400").count("\n") == 2
    ok("groups", *d, "--reset-offsets", "--group", "g1", "--topic", "pet", "--to-latest", "--execute")
    assert ok("consume", *d, "--topic", "pet", "--group", "g1", "--timeout-ms", "400") == ""

    # delete groups (per group answers) and the topic
    r = run("groups", *d, "--delete", "--group", "ghost", "--group", "g1")
    assert (r.returncode, r.stdout) == (1, "These consumer groups were deleted successfully: 'g1'\n")
    assert r.stderr.splitlines()[0] == "Deletion of some consumer groups failed:"
    assert r.stderr.splitlines()[1].startswith("* Group 'ghost' could not be deleted due to: ")
    assert ok("groups", *d, "--list") == ""
    assert ok("topics", *d, "--delete", "--topic", "pet") == ""
    assert ok("topics", *d, "--list", "--exclude-internal") == ""
    fails(1, "Topic 'pet' does not exist.", "topics", *d, "--describe", "--topic", "pet")
    fails(1, "The internal topic __consumer_offsets cannot be deleted", "topics", *d, "--delete", "--topic",
          "__consumer_offsets")


def test_error_paths(cli_door):
    """Refusals both doors answer alike, each with one line and its exit status; none changes anything."""
    d = cli_door.args
    ok("topics", *d, "--create", "--topic", "err", "--partitions", "2")
    ok("produce", *d, "--topic", "err", input="a\nb\nc\n")
    cases = [
        (1, "Topic 'nope' does not exist.", ["topics", *d, "--describe", "--topic", "nope"], None),
        (1, "Topic 'nope' does not exist.", ["topics", *d, "--delete", "--topic", "nope"], None),
        (1, "Topic 'nope' does not exist.", ["topics", *d, "--alter", "--topic", "nope", "--partitions", "3"], None),
        (1, "Partition 2 does not exist in topic 'err'", ["produce", *d, "--topic", "err", "--partition", "2"], "x\n"),
        (1, "Topic 'err' already exists.", ["topics", *d, "--create", "--topic", "err"], None),
        (1, "Replication factor: 4 larger than available brokers: 1.",
         ["topics", *d, "--create", "--topic", "pig", "--replication-factor", "4"], None),
        (1, "is illegal", ["topics", *d, "--create", "--topic", "no/slash"], None),
        (1, "retention.ms", ["topics", *d, "--create", "--topic", "q", "--config", "retention.ms=soon"], None),
        (1, "Unknown topic config name: retention", ["topics", *d, "--create", "--topic", "q",
                                                     "--config", "retention=1"], None),
        (1, "Unknown producer config name: nope", ["produce", *d, "--topic", "err", "--producer-property", "nope=1"],
         "x\n"),
        (1, "Unknown consumer config name: nope", ["consume", *d, "--topic", "err", "--consumer-property", "nope=1"],
         None),
        (1, "Consumer group 'ghost' does not exist.", ["groups", *d, "--describe", "--group", "ghost"], None),
        (2, "--from-beginning and --offset cannot be used together",
         ["consume", *d, "--topic", "err", "--from-beginning", "--offset", "0"], None),
    ]
    for status, needle, args, stdin in cases:
        fails(status, needle, *args, input=stdin)
    assert ok("topics", *d, "--list", "--exclude-internal") == "err\n"      # refused creates left nothing
    assert sorted(ok("consume", *d, "--topic", "err", "--from-beginning", "--max-messages", "3").split()) == \
        ["a", "b", "c"]


def test_an_oversized_record_costs_only_itself(cli_door):
    """A line over max.message.bytes is refused with the log's message, exactly as on a data dir; the lines
    around it are written."""
    d = cli_door.args
    ok("topics", *d, "--create", "--topic", "small", "--config", "max.message.bytes=400")
    lines = [f"small {i}" for i in range(20)] + ["x" * 500] + [f"after {i}" for i in range(5)]
    r = run("produce", *d, "--topic", "small", input="\n".join(lines) + "\n")
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "seglog produce: line 21 not written: record batch of 570 bytes is larger than the limit of 400 bytes "
        "(max.message.bytes)", "seglog produce: error: 1 of 26 records were not written"]
    assert ok("consume", *d, "--topic", "small", "--from-beginning", "--max-messages", "25").splitlines() == \
        lines[:20] + lines[21:]


def test_delete_offsets(cli_door):
    """kafka-consumer-groups.sh --delete-offsets: a group without members loses the committed offsets named
    (a whole topic, or some partitions), keeps the others, and the output is Kafka's."""
    d = cli_door.args
    ok("topics", *d, "--create", "--topic", "t", "--partitions", "3")
    ok("produce", *d, "--topic", "t", "--property", "parse.key=true", "--property", "key.separator=:",
       input="".join(f"k{i}:v{i}\n" for i in range(30)))
    ok("consume", *d, "--topic", "t", "--group", "g", "--from-beginning", "--max-messages", "30")
    assert set(group_rows(ok("groups", *d, "--describe", "--group", "g"))) == {("t", 0), ("t", 1), ("t", 2)}

    out = ok("groups", *d, "--delete-offsets", "--group", "g", "--topic", "t:0,2")
    lines = out.splitlines()
    assert lines[0] == "Request succeed for deleting offsets with topic t group g" and lines[1] == ""
    assert [line.split() for line in lines[2:]] == [["TOPIC", "PARTITION", "STATUS"], ["t", "0", "Successful"],
                                                    ["t", "2", "Successful"]]
    assert set(group_rows(ok("groups", *d, "--describe", "--group", "g"))) == {("t", 1)}
    ok("groups", *d, "--delete-offsets", "--group", "g", "--topic", "t")
    fails(1, "'nobody' does not exist.", "groups", *d, "--delete-offsets", "--group", "nobody", "--topic", "t")
    fails(2, "--delete-offsets needs --topic", "groups", *d, "--delete-offsets", "--group", "g")
    fails(2, "--delete-offsets takes exactly one --group", "groups", *d, "--delete-offsets", "--all-groups",
          "--topic", "t")


def test_describe_partition_filters(cli_door):
    """kafka-topics.sh's partition filters: on one broker every partition is fully replicated and exactly at
    min.insync.replicas=1; a filter prints the matching partition lines only, and belongs to --describe."""
    d = cli_door.args
    ok("topics", *d, "--create", "--topic", "f", "--partitions", "2")
    assert ok("topics", *d, "--describe", "--topic", "f", "--under-replicated-partitions") == ""
    assert ok("topics", *d, "--describe", "--unavailable-partitions") == ""
    assert ok("topics", *d, "--describe", "--topic", "f", "--under-min-isr-partitions") == ""
    assert ok("topics", *d, "--describe", "--topic", "f", "--at-min-isr-partitions").splitlines() == \
        [f"\tTopic: f\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in range(2)]
    fails(2, "--under-replicated-partitions cannot be used with --list", "topics", *d, "--list",
          "--under-replicated-partitions")


def test_transactions(cli_door):
    import seglog
    d = cli_door.args
    assert ok("transactions", *d, "--list") == "TransactionalId\tCoordinator\tProducerId\tTransactionState\t\n"
    node = cli_door.broker.node if cli_door.broker else seglog.open(cli_door.path)
    try:
        node.create_topic("out", 2)
        open_txn = seglog.Producer(node, transactional_id="orders-eos")
        open_txn.init_transactions()
        open_txn.begin_transaction()
        open_txn.send("out", b"pending", partition=1)
        open_txn.flush()
        seglog.Producer(node, transactional_id="idle").init_transactions()
        pid = open_txn.producer_id
    finally:
        if cli_door.broker is None:
            node.close()                                 # the transaction stays open in the state log
    lines = ok("transactions", *d, "--list").splitlines()
    assert [line.split() for line in lines] == [
        ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
        ["idle", "0", str(pid + 1), "Empty"], ["orders-eos", "0", str(pid), "Ongoing"]]
    assert all(line.endswith("\t") for line in lines)
    header, row = ok("transactions", *d, "--describe", "--transactional-id", "orders-eos").splitlines()
    assert header.split() == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                              "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                              "TopicPartitions"]
    cells = row.split()
    assert cells[:6] == ["0", "orders-eos", str(pid), "0", "Ongoing", "60000"] and cells[8] == "out-1"
    assert abs(int(cells[6]) + int(cells[7]) - time.time() * 1000) < 60_000
    idle = ok("transactions", *d, "--describe", "--transactional-id", "idle").splitlines()[1].split()
    assert idle[4:8] == ["Empty", "60000", "None", "None"] and len(idle) == 8
    fails(1, "Failed to describe transaction state of transactional-id `nope`:", "transactions", *d, "--describe",
          "--transactional-id", "nope")
    fails(2, "--describe needs --transactional-id", "transactions", *d, "--describe")


def test_leader_election_on_one_replica(cli_door, tmp_path):
    """kafka-leader-election.sh on one broker: its one replica leads every partition, so no election is ever
    needed; an unknown partition is an error line and exit status 1; the options go as Kafka's tool wants."""
    d = cli_door.args
    ok("topics", *d, "--create", "--topic", "e", "--partitions", "2")
    assert ok("leader-election", *d, "--election-type", "PREFERRED", "--topic", "e", "--partition", "1") == \
        "Valid replica already elected for partitions e-1\n"
    assert ok("leader-election", *d, "--election-type", "unclean", "--all-topic-partitions") == ""
    (tmp_path / "p.json").write_text('{"partitions": [{"topic": "e", "partition": 0}, {"topic": "x", "partition": 0}]}')
    r = run("leader-election", *d, "--election-type", "PREFERRED", "--path-to-json-file", tmp_path / "p.json")
    assert (r.returncode, r.stderr) == (1, "seglog leader-election: error: 1 replica(s) could not be elected\n")
    assert r.stdout.splitlines() == [
        "Valid replica already elected for partitions e-0",
        "Error completing leader election (PREFERRED) for partition: x-0: UnknownTopicOrPartitionError: This "
        "server does not host this topic-partition: x-0"]
    fails(2, "One and only one of the following options is required", "leader-election", *d, "--election-type",
          "PREFERRED", "--all-topic-partitions", "--topic", "e", "--partition", "0")
    fails(2, "--topic and --partition go together", "leader-election", *d, "--election-type", "PREFERRED",
          "--topic", "e")

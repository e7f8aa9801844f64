"""`seglog acls` (kafka-acls.sh) against a broker whose PLAINTEXT listener is the administrators' door
(User:ANONYMOUS a super user) and whose SASL_PLAINTEXT listener serves the users the ACLs are for: the ACLs it
adds and removes are the ones a real client then meets; its output is kafka-acls.sh's."""

from __future__ import annotations

import time

import pytest
from test_cli import fails, ok

import seglog

ADMIN_LISTENER_PROPS = {"super.users": "User:ANONYMOUS", "sasl.enabled.mechanisms": "PLAIN"}
ALICE_READ = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
ORDERS = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
BILLING = "ResourcePattern(resourceType=GROUP, name=billing, patternType=LITERAL)"


@pytest.fixture
def broker(tmp_path, free_port):
    sasl_port = free_port()
    props = {**ADMIN_LISTENER_PROPS,
             "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
             "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-pw";'}
    with seglog.serve(tmp_path / "d", props, acls=[], group_initial_rebalance_delay_ms=0) as b:
        b.sasl_bootstrap = f"127.0.0.1:{sasl_port}"
        yield b


def acls(broker, *args, input=None) -> str:
    return ok("acls", "--bootstrap-server", broker.bootstrap_servers, *args, input=input)


def alice_reads(broker, topic: str) -> list[bytes] | str:
    """What kafka-python's consumer, logged in as alice, reads of `topic` in 5 s: nothing while she may not
    describe it (Metadata hides it, so no leader is found), the error's name if a request is refused."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError
    c = KafkaConsumer(bootstrap_servers=broker.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="alice-pw",
                      auto_offset_reset="earliest")
    try:
        c.assign([TopicPartition(topic, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            got += [r.value for records in c.poll(500).values() for r in records]
        return got
    except KafkaError as e:
        return type(e).__name__
    finally:
        c.close()


def test_add_list_and_remove_as_kafka_acls(broker):
    broker.node.create_topic("orders", 1)
    p = seglog.Producer(broker.node)
    p.send("orders", b"o1", partition=0)
    p.close()
    assert alice_reads(broker, "orders") == []
    added = acls(broker, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders",
                 "--group", "billing")
    assert added == (f"Adding ACLs for resource `{ORDERS}`: \n \t{ALICE_READ} \n\n"
                     f"Adding ACLs for resource `{BILLING}`: \n \t{ALICE_READ} \n\n"
                     f"Current ACLs for resource `{ORDERS}`: \n \t{ALICE_READ} \n\n"
                     f"Current ACLs for resource `{BILLING}`: \n \t{ALICE_READ} \n\n")
    assert alice_reads(broker, "orders") == [b"o1"]

    acls(broker, "--add", "--deny-principal", "User:bob", "--operation", "Write", "--operation", "Describe",
         "--topic", "ord", "--resource-pattern-type", "prefixed")
    bob_entries = ("\t(principal=User:bob, host=*, operation=WRITE, permissionType=DENY)\n"
                   "\t(principal=User:bob, host=*, operation=DESCRIBE, permissionType=DENY)")
    assert acls(broker, "--list", "--topic", "orders", "--resource-pattern-type", "match", "--principal",
                "User:bob") == ("ACLs for principal `User:bob`\n"
                                "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=ord, "
                                f"patternType=PREFIXED)`: \n {bob_entries} \n\n")
    assert acls(broker, "--list").count("Current ACLs for resource") == 3

    # --remove asks first: anything but y keeps the ACLs
    kept = acls(broker, "--remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders",
                input="n\n")
    assert kept.startswith(f"Are you sure you want to remove ACLs: \n \t{ALICE_READ} \n from resource filter "
                           f"`{ORDERS}`? (y/n)\n")
    assert f"Current ACLs for resource `{ORDERS}`" in kept
    assert acls(broker, "--remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders",
                input="y\n").endswith("(y/n)\n")                       # nothing left to list
    assert alice_reads(broker, "orders") == []
    # without a principal, every ACL of the resource goes
    assert acls(broker, "--remove", "--force", "--group", "billing") == ""
    assert acls(broker, "--list") == ("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=ord, "
                                      f"patternType=PREFIXED)`: \n {bob_entries} \n\n")


def test_cluster_and_transactional_id_acls(broker):
    acls(broker, "--add", "--allow-principal", "User:alice", "--operation", "IdempotentWrite", "--cluster",
         "--allow-host", "10.0.0.1")
    acls(broker, "--add", "--allow-principal", "User:alice", "--operation", "Describe", "--transactional-id", "tx-1",
         "--allow-host", "10.0.0.1")
    authorizer = broker.broker.authorizer
    from seglog.security.acls import AclOperation, ResourceType
    assert authorizer.authorize("User:alice", "10.0.0.1", AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER,
                                "kafka-cluster")
    assert not authorizer.authorize("User:alice", "10.0.0.2", AclOperation.IDEMPOTENT_WRITE,
                                    ResourceType.CLUSTER, "kafka-cluster")
    assert authorizer.authorize("User:alice", "10.0.0.1", AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                "tx-1")
    listed = acls(broker, "--list", "--transactional-id", "tx-1")
    assert listed.startswith("Current ACLs for resource `ResourcePattern(resourceType=TRANSACTIONAL_ID, "
                             "name=tx-1, patternType=LITERAL)`: \n \t(principal=User:alice, host=10.0.0.1, "
                             "operation=")


def test_usage_and_refusals(broker, start_broker, tmp_path):
    b = ("acls", "--bootstrap-server", broker.bootstrap_servers)
    fails(2, "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.",
          *b, "--add", "--topic", "t")
    fails(2, "You must provide at least one resource", *b, "--add", "--allow-principal", "User:a")
    fails(2, "expected a string in format principalType:principalName but got alice",
          *b, "--add", "--allow-principal", "alice", "--topic", "t")
    fails(2, "ResourceType GROUP only supports operations All, Read, Delete, Describe",
          *b, "--add", "--allow-principal", "User:a", "--operation", "Write", "--group", "g")
    fails(2, "A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls.",
          *b, "--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match")
    fails(2, "Option \"[list]\" can't be used with option \"[allow-principal]\"",
          *b, "--list", "--allow-principal", "User:a")
    fails(2, "Option \"[principal]\" can't be used with option \"[add]\"",
          *b, "--add", "--allow-principal", "User:a", "--topic", "t", "--principal", "User:a")
    fails(2, "Unknown AclOperation name 'Fly'", *b, "--add", "--allow-principal", "User:a", "--operation", "Fly",
          "--topic", "t")
    # the broker refuses a principal that may not alter the cluster, and a broker without an authorizer
    with seglog.serve(tmp_path / "guarded", acls=[]) as guarded:
        fails(1, "Error while executing ACL command: ", "acls", "--bootstrap-server", guarded.bootstrap_servers,
              "--add", "--allow-principal", "User:a", "--topic", "t")
    open_broker = start_broker()
    fails(1, "No Authorizer is configured on the broker", "acls", "--bootstrap-server",
          open_broker.bootstrap_servers, "--list")

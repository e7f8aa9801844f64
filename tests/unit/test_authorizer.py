"""The authorizer's decisions and ACL management, as Kafka's AclAuthorizer: literal, prefixed and wildcard
patterns, deny wins, implied operations, super users, allow.everyone.if.no.acl.found, filters (ANY, MATCH), and
the data dir and metadata stores."""

from __future__ import annotations

import json

import pytest

from seglog.cluster.memory import MemoryCluster, MemoryMetadataStore
from seglog.errors import InvalidConfigError, InvalidRequestError
from seglog.security.acls import (ANY_ACL, AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                  PatternType, ResourcePattern, ResourceType)
from seglog.security.authorizer import Authorizer, FileAclStore, MetadataAclStore, check_authorizer_class, \
    parse_super_users

Op, Res = AclOperation, ResourceType
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


@pytest.fixture
def authorizer(tmp_path):
    return Authorizer(FileAclStore(tmp_path), super_users={"User:admin"})


def allowed(a: Authorizer, op, rtype, name, principal=ALICE, host=HOST) -> bool:
    return a.authorize(principal, host, op, rtype, name)


def test_no_acl_denies_unless_allow_everyone(tmp_path):
    a = Authorizer(FileAclStore(tmp_path))
    assert not allowed(a, Op.READ, Res.TOPIC, "orders")
    assert Authorizer(FileAclStore(tmp_path), allow_everyone_if_no_acl_found=True).authorize(
        ALICE, HOST, Op.READ, Res.TOPIC, "orders")
    # once any ACL names the resource, allow.everyone no longer applies to it
    a.create_acls([AclBinding.allow(BOB, "Read", "Topic", "orders")])
    everyone = Authorizer(FileAclStore(tmp_path), allow_everyone_if_no_acl_found=True)
    assert not everyone.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "orders")
    assert everyone.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "payments")


def test_literal_prefixed_and_wildcard_patterns(authorizer):
    authorizer.create_acls([AclBinding.allow(ALICE, "Read", "Topic", "orders"),
                            AclBinding.allow(ALICE, "Write", "Topic", "pay", pattern_type="Prefixed"),
                            AclBinding.allow(BOB, "Describe", "Topic", "*")])
    assert allowed(authorizer, Op.READ, Res.TOPIC, "orders")
    assert not allowed(authorizer, Op.READ, Res.TOPIC, "orders2")            # literal: exactly that name
    assert allowed(authorizer, Op.WRITE, Res.TOPIC, "payments")
    assert allowed(authorizer, Op.WRITE, Res.TOPIC, "pay")
    assert not allowed(authorizer, Op.WRITE, Res.TOPIC, "pa")
    assert not allowed(authorizer, Op.WRITE, Res.GROUP, "payments")          # another resource type
    assert allowed(authorizer, Op.DESCRIBE, Res.TOPIC, "anything", principal=BOB)
    assert not allowed(authorizer, Op.READ, Res.TOPIC, "anything", principal=BOB)


def test_deny_wins_over_allow(authorizer):
    authorizer.create_acls([AclBinding.allow(ALICE, "All", "Topic", "*"),
                            AclBinding.deny(ALICE, "Write", "Topic", "audit", pattern_type="Prefixed"),
                            AclBinding.deny("User:*", "Read", "Topic", "secret")])
    assert allowed(authorizer, Op.WRITE, Res.TOPIC, "orders")
    assert not allowed(authorizer, Op.WRITE, Res.TOPIC, "audit-log")
    assert allowed(authorizer, Op.READ, Res.TOPIC, "audit-log")              # the deny names Write only
    assert not allowed(authorizer, Op.READ, Res.TOPIC, "secret")             # User:* denies everyone
    assert allowed(authorizer, Op.DESCRIBE, Res.TOPIC, "secret")             # deny Read does not deny Describe


def test_hosts_and_principal_wildcard(authorizer):
    authorizer.create_acls([AclBinding.allow(ALICE, "Read", "Topic", "t", host="10.0.0.2"),
                            AclBinding.allow("User:*", "Read", "Group", "g")])
    assert not allowed(authorizer, Op.READ, Res.TOPIC, "t")
    assert allowed(authorizer, Op.READ, Res.TOPIC, "t", host="10.0.0.2")
    assert allowed(authorizer, Op.READ, Res.GROUP, "g", principal="User:anyone")


def test_implied_operations(authorizer):
    authorizer.create_acls([AclBinding.allow(ALICE, "Read", "Topic", "r"),
                            AclBinding.allow(ALICE, "Write", "Topic", "w"),
                            AclBinding.allow(ALICE, "Delete", "Topic", "d"),
                            AclBinding.allow(ALICE, "Alter", "Topic", "a"),
                            AclBinding.allow(ALICE, "AlterConfigs", "Topic", "c"),
                            AclBinding.allow(ALICE, "Create", "Topic", "n")])
    for name in "rwda":
        assert allowed(authorizer, Op.DESCRIBE, Res.TOPIC, name), name
    assert not allowed(authorizer, Op.DESCRIBE, Res.TOPIC, "n")             # Create does not imply Describe
    assert not allowed(authorizer, Op.DESCRIBE, Res.TOPIC, "c")
    assert allowed(authorizer, Op.DESCRIBE_CONFIGS, Res.TOPIC, "c")
    assert not allowed(authorizer, Op.READ, Res.TOPIC, "w")                 # Write does not imply Read
    assert not allowed(authorizer, Op.DESCRIBE_CONFIGS, Res.TOPIC, "a")


def test_all_operation_and_super_users(authorizer):
    authorizer.create_acls([AclBinding.allow(ALICE, "All", "Cluster")])
    assert allowed(authorizer, Op.CLUSTER_ACTION, Res.CLUSTER, "kafka-cluster")
    assert allowed(authorizer, Op.IDEMPOTENT_WRITE, Res.CLUSTER, "kafka-cluster")
    assert authorizer.authorize("User:admin", HOST, Op.DELETE, Res.TOPIC, "anything")
    assert parse_super_users("User:a; User:b;") == {"User:a", "User:b"}
    with pytest.raises(InvalidConfigError, match="super.users"):
        parse_super_users("alice")


def test_authorize_any_is_kafkas_by_resource_type(authorizer):
    assert not authorizer.authorize_any(ALICE, HOST, Op.WRITE, Res.TOPIC)
    authorizer.create_acls([AclBinding.allow(ALICE, "Write", "Topic", "t1")])
    assert authorizer.authorize_any(ALICE, HOST, Op.WRITE, Res.TOPIC)
    assert not authorizer.authorize_any(BOB, HOST, Op.WRITE, Res.TOPIC)
    authorizer.create_acls([AclBinding.deny(ALICE, "Write", "Topic", "t", pattern_type="Prefixed")])
    assert not authorizer.authorize_any(ALICE, HOST, Op.WRITE, Res.TOPIC)    # the only allow is denied
    authorizer.create_acls([AclBinding.allow(ALICE, "Write", "Topic", "other", pattern_type="Prefixed")])
    assert authorizer.authorize_any(ALICE, HOST, Op.WRITE, Res.TOPIC)
    authorizer.create_acls([AclBinding.deny(ALICE, "Write", "Topic", "*")])
    assert not authorizer.authorize_any(ALICE, HOST, Op.WRITE, Res.TOPIC)


def test_bindings_are_validated_with_kafkas_messages(authorizer):
    bad = [AclBinding.allow(ALICE, "Read", "Cluster", "other"),
           AclBinding.allow("alice", "Read", "Topic", "t"),
           AclBinding.allow(ALICE, "Read", "Topic", "t", pattern_type="Match"),
           AclBinding.allow(ALICE, "Any", "Topic", "t"),
           AclBinding.allow(ALICE, "Read", "Any", "t"),
           AclBinding.allow(ALICE, "Read", "Topic", "")]
    results = authorizer.create_acls(bad + [AclBinding.allow(ALICE, "Read", "Topic", "t")])
    assert [str(e) for e in results[:-1]] == [
        "The only valid name for the CLUSTER resource is kafka-cluster",
        "expected a string in format principalType:principalName but got alice",
        "Invalid patternType MATCH", "Invalid operation ANY", "Invalid resourceType ANY",
        "Resource name should not be empty"]
    assert all(isinstance(e, InvalidRequestError) for e in results[:-1]) and results[-1] is None
    assert authorizer.acls(ANY_ACL) == [AclBinding.allow(ALICE, "Read", "Topic", "t")]


def test_filters_any_match_literal_prefixed(authorizer):
    lit = AclBinding.allow(ALICE, "Read", "Topic", "orders")
    star = AclBinding.allow(ALICE, "Read", "Topic", "*")
    pre = AclBinding.allow(ALICE, "Read", "Topic", "ord", pattern_type="Prefixed")
    other = AclBinding.deny(BOB, "Write", "Group", "orders")
    authorizer.create_acls([lit, star, pre, other])

    def found(**kw):
        return set(authorizer.acls(AclBindingFilter(**kw)))
    assert found() == {lit, star, pre, other}
    assert found(resource_type=Res.TOPIC, name="orders") == {lit}                         # ANY: exact name
    assert found(resource_type=Res.TOPIC, name="orders", pattern_type=PatternType.MATCH) == {lit, star, pre}
    assert found(resource_type=Res.TOPIC, name="ord", pattern_type=PatternType.PREFIXED) == {pre}
    assert found(resource_type=Res.TOPIC, name="ord", pattern_type=PatternType.LITERAL) == set()
    assert found(name="orders") == {lit, other}
    assert found(principal=BOB) == {other}
    assert found(permission=AclPermissionType.DENY, operation=Op.WRITE) == {other}
    assert found(host="10.0.0.9") == set()


def test_delete_acls_reports_each_binding_once(authorizer):
    a, b = AclBinding.allow(ALICE, "Read", "Topic", "t"), AclBinding.allow(BOB, "Read", "Topic", "t")
    authorizer.create_acls([a, b, AclBinding.allow(ALICE, "Read", "Group", "g")])
    results = authorizer.delete_acls([AclBindingFilter(resource_type=Res.TOPIC, principal=ALICE),
                                      AclBindingFilter(resource_type=Res.TOPIC),
                                      AclBindingFilter(resource_type=Res.UNKNOWN)])
    assert results[0] == [a] and results[1] == [b]
    assert isinstance(results[2], InvalidRequestError)
    assert authorizer.acls(ANY_ACL) == [AclBinding.allow(ALICE, "Read", "Group", "g")]


def test_file_store_is_kafkas_json_and_survives_reopen(tmp_path, authorizer):
    authorizer.create_acls([AclBinding.allow(ALICE, "IdempotentWrite", "Cluster"),
                            AclBinding.deny(BOB, "Read", "TransactionalId", "tx", pattern_type="Prefixed")])
    with open(tmp_path / "acls.json") as f:
        stored = json.load(f)
    assert {"resourceType": "Cluster", "patternType": "Literal", "name": "kafka-cluster",
            "acls": [{"principal": ALICE, "permissionType": "Allow", "operation": "IdempotentWrite",
                      "host": "*"}]} in stored
    again = Authorizer(FileAclStore(tmp_path))
    assert again.acls(ANY_ACL) == authorizer.acls(ANY_ACL)
    assert not again.authorize(BOB, HOST, Op.READ, Res.TRANSACTIONAL_ID, "tx-1")


def test_metadata_store_changes_reach_every_authorizer():
    cluster = MemoryCluster()
    stores = [MemoryMetadataStore(cluster) for _ in range(2)]
    try:
        first, second = (Authorizer(MetadataAclStore(s)) for s in stores)
        first.create_acls([AclBinding.allow(ALICE, "Read", "Topic", "t")])
        import time
        deadline = time.monotonic() + 5
        while not second.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "t") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert second.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "t")
        assert stores[1].get_acls() == {("Topic", "Literal", "t"): [
            {"principal": ALICE, "permissionType": "Allow", "operation": "Read", "host": "*"}]}
        second.delete_acls([ANY_ACL])
        while first.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "t") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not first.authorize(ALICE, HOST, Op.READ, Res.TOPIC, "t") and stores[0].get_acls() == {}
    finally:
        for s in stores:
            s.close()


def test_authorizer_class_names():
    assert not check_authorizer_class("")
    assert check_authorizer_class("kafka.security.authorizer.AclAuthorizer")
    assert check_authorizer_class("org.apache.kafka.metadata.authorizer.StandardAuthorizer")
    with pytest.raises(InvalidConfigError, match="authorizer.class.name"):
        check_authorizer_class("com.example.Mine")


def test_names_parse_as_kafka_spells_them():
    assert AclOperation.parse("IdempotentWrite") is AclOperation.parse("IDEMPOTENT_WRITE") is Op.IDEMPOTENT_WRITE
    assert ResourceType.parse("transactional-id") is Res.TRANSACTIONAL_ID
    assert str(ResourcePattern(Res.TOPIC, "t", PatternType.PREFIXED)) == \
        "ResourcePattern(resourceType=TOPIC, name=t, patternType=PREFIXED)"
    assert str(AclBinding.allow(ALICE, "DescribeConfigs", "Topic", "t").entry) == \
        "(principal=User:alice, host=*, operation=DESCRIBE_CONFIGS, permissionType=ALLOW)"
    with pytest.raises(ValueError, match="Unknown AclOperation name 'Reed'"):
        AclOperation.parse("Reed")

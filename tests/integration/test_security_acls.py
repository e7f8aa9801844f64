"""ACL enforcement against real clients over SASL_PLAINTEXT: every API a client uses, once by a user granted exactly
what Kafka requires for it (it works) and once by a user granted nothing (Kafka's authorization error code).
`admin` is a super user and sets the scene; the in-process node is never checked."""

from __future__ import annotations

import time
import uuid

import pytest

import seglog
from seglog.security.acls import AclBinding

USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw", "erin": "erin-pw"}
TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED = 29, 30, 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with seglog.serve(tmp_path_factory.mktemp("acl-broker"), sasl_users=USERS, super_users="User:admin",
                      acls=[], group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=500,
                      transaction_state_log_num_partitions=3) as b:
        yield b
        _ADMINS.clear()                              # closed while the broker still answers


def conf(broker, user: str) -> dict:
    return {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": USERS[user]}


_ADMINS: list = []


def admin(broker, user: str):
    """A new confluent-kafka AdminClient (fresh metadata), kept for the module: a client freed while a call is
    pending fails it."""
    from confluent_kafka.admin import AdminClient
    _ADMINS.append(AdminClient(conf(broker, user)))
    return _ADMINS[-1]


def code_of(call) -> int:
    """0 when `call()` succeeds, else the Kafka error code it failed with."""
    from confluent_kafka import KafkaException
    try:
        call()
        return 0
    except KafkaException as e:
        return e.args[0].code()


def wait(futures) -> object:
    """The result of a confluent admin call's futures (a dict of futures or one future)."""
    if isinstance(futures, dict):
        return {k: f.result(20) for k, f in futures.items()}
    return futures.result(20)


def grant(broker, *bindings: AclBinding) -> None:
    broker.broker.authorizer.create_acls(list(bindings))


def make_topic(broker, partitions: int = 1, records: int = 3) -> str:
    """A new topic with `records` records in partition 0, made through the in-process door (never checked)."""
    from seglog.producer import Producer
    name = "t-" + uuid.uuid4().hex[:10]
    broker.node.create_topic(name, partitions)
    p = Producer(broker.node)
    for i in range(records):
        p.send(name, f"v{i}".encode(), partition=0)
    p.close()
    return name


def produce_as(broker, user: str, topic: str, values: list[bytes], **extra) -> list:
    """The delivery errors (None for a delivered record) of a confluent-kafka producer run as `user`."""
    import confluent_kafka
    errors = []
    p = confluent_kafka.Producer({**conf(broker, user), "message.timeout.ms": 10000, **extra})
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    return errors


def consume_as(broker, user: str, topic: str, group: str, count: int) -> tuple[list[bytes], int]:
    """(values read, the first error code met) of a confluent-kafka group consumer run as `user`."""
    import confluent_kafka
    c = confluent_kafka.Consumer({**conf(broker, user), "group.id": group, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False})
    got, error = [], 0
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 15
        while len(got) < count and not error and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                error = m.error().code()
            else:
                got.append(m.value())
        if got and not error:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return got, error


def allow(user: str, operation: str, resource_type: str, name: str = "kafka-cluster") -> AclBinding:
    return AclBinding.allow(f"User:{user}", operation, resource_type, name)


# -- data APIs ------------------------------------------------------------------------------------------------

def test_produce_needs_write_on_the_topic(broker):
    topic = make_topic(broker)
    grant(broker, allow("alice", "Write", "Topic", topic))
    assert produce_as(broker, "alice", topic, [b"a", b"b"]) == [None, None]
    errors = produce_as(broker, "bob", topic, [b"x"])
    assert [e.code() for e in errors] == [TOPIC_AUTHORIZATION_FAILED]
    assert broker.node.partition(topic, 0).high_watermark == 5               # bob's record never landed


def test_idempotent_producer_needs_idempotent_write_or_write_on_a_topic(broker):
    topic = make_topic(broker)
    grant(broker, allow("alice", "Write", "Topic", topic))
    assert produce_as(broker, "alice", topic, [b"i"], **{"enable.idempotence": True}) == [None]
    errors = produce_as(broker, "bob", topic, [b"i"], **{"enable.idempotence": True})
    assert errors and errors[0] is not None and errors[0].code() in (TOPIC_AUTHORIZATION_FAILED,
                                                                      CLUSTER_AUTHORIZATION_FAILED)


def test_consume_in_a_group_needs_read_on_group_and_topic(broker):
    topic, group = make_topic(broker), "g-" + uuid.uuid4().hex[:8]
    grant(broker, allow("alice", "Read", "Topic", topic), allow("alice", "Read", "Group", group))
    got, error = consume_as(broker, "alice", topic, group, 3)
    assert (sorted(got), error) == ([b"v0", b"v1", b"v2"], 0)
    assert consume_as(broker, "bob", topic, "g-" + uuid.uuid4().hex[:8], 3) == ([], GROUP_AUTHORIZATION_FAILED)
    # Read on a group of its own but not on the topic: the topic is refused
    bobs = "g-" + uuid.uuid4().hex[:8]
    grant(broker, allow("bob", "Read", "Group", bobs))
    assert consume_as(broker, "bob", topic, bobs, 3) == ([], TOPIC_AUTHORIZATION_FAILED)


def test_metadata_hides_topics_the_user_may_not_describe(broker):
    topic, hidden = make_topic(broker), make_topic(broker)
    grant(broker, allow("alice", "Describe", "Topic", topic))
    seen = admin(broker, "alice").list_topics(timeout=10).topics
    assert topic in seen and hidden not in seen and seen[topic].error is None
    assert topic not in admin(broker, "bob").list_topics(timeout=10).topics
    one = admin(broker, "bob").list_topics(topic, timeout=10).topics[topic]
    assert one.error is not None and one.error.code() == TOPIC_AUTHORIZATION_FAILED


def test_auto_creation_needs_create(broker):
    name = "auto-" + uuid.uuid4().hex[:8]
    grant(broker, allow("bob", "Write", "Topic", name))
    errors = produce_as(broker, "bob", name, [b"x"], **{"message.timeout.ms": 3000})
    assert [e.code() for e in errors] == [TOPIC_AUTHORIZATION_FAILED]
    assert name not in broker.node.topics()                                  # Write alone creates nothing
    grant(broker, allow("bob", "Create", "Topic", name))
    assert produce_as(broker, "bob", name, [b"y"]) == [None]
    assert name in broker.node.topics()


def test_list_offsets_and_delete_records(broker):
    from confluent_kafka import KafkaError, TopicPartition
    from confluent_kafka.admin import OffsetSpec
    topic = make_topic(broker)
    tp = TopicPartition(topic, 0)
    # a client that may not describe the topic finds no leader to ask (Metadata hides it)
    assert code_of(lambda: wait(admin(broker, "bob").list_offsets({tp: OffsetSpec.latest()}))) == KafkaError._NOENT
    grant(broker, allow("bob", "Describe", "Topic", topic))
    assert code_of(lambda: wait(admin(broker, "bob").list_offsets({tp: OffsetSpec.latest()}))) == 0
    assert code_of(lambda: wait(admin(broker, "bob").delete_records([TopicPartition(topic, 0, 1)]))) == \
        TOPIC_AUTHORIZATION_FAILED
    grant(broker, allow("alice", "Delete", "Topic", topic))                    # Delete implies Describe
    assert code_of(lambda: wait(admin(broker, "alice").delete_records([TopicPartition(topic, 0, 1)]))) == 0
    assert broker.node.partition(topic, 0).log_start_offset == 1


def test_fetch_by_topic_id_needs_read(broker):
    """librdkafka fetches at v16, naming the topic by the id Metadata gave it: Describe alone shows the topic,
    its records need Read."""
    import confluent_kafka
    topic, group = make_topic(broker), "g-" + uuid.uuid4().hex[:8]
    grant(broker, allow("bob", "Describe", "Topic", topic), allow("bob", "Describe", "Group", group))

    def first_error(user):
        c = confluent_kafka.Consumer({**conf(broker, user), "group.id": group, "enable.auto.commit": False})
        try:
            c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None:
                    return m.error().code() if m.error() else m.value()
            return None
        finally:
            c.close()
    assert first_error("bob") == TOPIC_AUTHORIZATION_FAILED
    grant(broker, allow("bob", "Read", "Topic", topic))
    assert first_error("bob") == b"v0"


# -- transactions ---------------------------------------------------------------------------------------------

def test_transactions_need_write_on_the_transactional_id_and_read_on_the_group(broker):
    """confluent-kafka's transactional producer: InitProducerId needs Write on its transactional id, the
    transaction's partitions Write on their topic, send_offsets_to_transaction Read on the group."""
    import confluent_kafka
    from confluent_kafka import KafkaException
    topic, tid, group = make_topic(broker), "tx-" + uuid.uuid4().hex[:8], "g-" + uuid.uuid4().hex[:8]
    grant(broker, allow("bob", "Write", "Topic", topic), allow("alice", "Write", "Topic", topic))

    def producer(user):
        return confluent_kafka.Producer({**conf(broker, user), "transactional.id": tid})
    bob = producer("bob")
    with pytest.raises(KafkaException) as refused:
        bob.init_transactions(20)
    assert refused.value.args[0].code() == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    grant(broker, allow("alice", "Write", "TransactionalId", tid))
    alice = producer("alice")
    alice.init_transactions(20)
    alice.begin_transaction()
    alice.produce(topic, b"in-txn", partition=0)
    consumer = confluent_kafka.Consumer({**conf(broker, "admin"), "group.id": group})
    offsets = [confluent_kafka.TopicPartition(topic, 0, 1)]
    with pytest.raises(KafkaException) as refused:
        alice.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 20)
    assert refused.value.args[0].code() == GROUP_AUTHORIZATION_FAILED
    consumer.close()
    alice.abort_transaction(20)
    grant(broker, allow("alice", "Read", "Group", group), allow("alice", "Read", "Topic", topic))
    consumer = confluent_kafka.Consumer({**conf(broker, "admin"), "group.id": group})
    alice.begin_transaction()
    alice.produce(topic, b"committed", partition=0)
    alice.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 20)
    alice.commit_transaction(20)
    consumer.close()
    # commit_transaction returns once PrepareCommit is logged (as Kafka's EndTxn); the offset becomes the group's
    # when the coordinator's marker reaches __consumer_offsets, a moment later (seconds on a loaded machine)
    committed = {}
    deadline = time.monotonic() + 20
    while _tp(topic) not in committed and time.monotonic() < deadline:
        committed = broker.node.group_coordinator.fetch_offsets(group, None)
        time.sleep(0.05)
    assert committed[_tp(topic)].offset == 1
    # a transactional id alice may use, a topic she may not write: the transaction cannot take the partition
    other = make_topic(broker)
    alice.begin_transaction()
    delivery = []
    alice.produce(other, b"no", partition=0, on_delivery=lambda err, msg: delivery.append(err))
    with pytest.raises(KafkaException):
        alice.commit_transaction(20)
    assert [e.code() for e in delivery] == [TOPIC_AUTHORIZATION_FAILED]
    assert broker.node.partition(other, 0).high_watermark == 3


def _tp(topic: str):
    from seglog.offsets_format import TopicPartition
    return TopicPartition(topic, 0)


def test_elect_leaders_needs_alter_on_the_cluster(broker):
    from confluent_kafka import ElectionType, TopicPartition
    topic = make_topic(broker)
    grant(broker, allow("erin", "Describe", "Topic", topic))
    election = [TopicPartition(topic, 0)]
    assert code_of(lambda: wait(admin(broker, "erin").elect_leaders(ElectionType.PREFERRED, election))) == \
        CLUSTER_AUTHORIZATION_FAILED
    grant(broker, allow("erin", "Alter", "Cluster"))
    result = wait(admin(broker, "erin").elect_leaders(ElectionType.PREFERRED, election))
    assert result[TopicPartition(topic, 0)].code() == 84                     # ELECTION_NOT_NEEDED: a lone broker


# -- group APIs -----------------------------------------------------------------------------------------------

def _committed_group(broker, topic: str) -> str:
    group = "g-" + uuid.uuid4().hex[:8]
    grant(broker, allow("admin", "Read", "Group", group))
    assert consume_as(broker, "admin", topic, group, 3)[1] == 0
    return group


def test_group_offsets_describe_list_and_delete(broker):
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
    topic = make_topic(broker)
    group = _committed_group(broker, topic)
    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])]

    def offsets(user):
        return wait(admin(broker, user).list_consumer_group_offsets(request))[group].topic_partitions

    assert code_of(lambda: offsets("bob")) == GROUP_AUTHORIZATION_FAILED
    grant(broker, allow("bob", "Describe", "Group", group))
    assert offsets("bob")[0].error.code() == TOPIC_AUTHORIZATION_FAILED        # the topic is not describable
    grant(broker, allow("bob", "Describe", "Topic", topic))
    assert offsets("bob")[0].offset == 3

    commit = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 1)])]

    def commit_error(user) -> int:
        def call():
            [tp] = wait(admin(broker, user).alter_consumer_group_offsets(commit))[group].topic_partitions
            if tp.error is not None:
                raise KafkaException(tp.error)
        return code_of(call)
    assert commit_error("alice") == GROUP_AUTHORIZATION_FAILED
    grant(broker, allow("alice", "Read", "Group", group))
    assert commit_error("alice") == TOPIC_AUTHORIZATION_FAILED
    grant(broker, allow("alice", "Read", "Topic", topic))
    assert commit_error("alice") == 0

    described = wait(admin(broker, "alice").describe_consumer_groups([group]))         # Read implies Describe
    assert described[group].group_id == group
    listed = {g.group_id for g in wait(admin(broker, "alice").list_consumer_groups()).valid}
    assert group in listed
    carol_sees = {g.group_id for g in wait(admin(broker, "bob").list_consumer_groups()).valid}
    assert group in carol_sees                                                # bob may describe it too now
    other = _committed_group(broker, topic)
    assert other not in {g.group_id for g in wait(admin(broker, "alice").list_consumer_groups()).valid}

    assert code_of(lambda: wait(admin(broker, "alice").delete_consumer_groups([group]))) == \
        GROUP_AUTHORIZATION_FAILED
    grant(broker, allow("alice", "Delete", "Group", group))
    assert code_of(lambda: wait(admin(broker, "alice").delete_consumer_groups([group]))) == 0


# -- admin APIs -----------------------------------------------------------------------------------------------

def test_create_delete_and_grow_topics(broker):
    from confluent_kafka.admin import NewPartitions, NewTopic
    name = "new-" + uuid.uuid4().hex[:8]
    assert code_of(lambda: wait(admin(broker, "bob").create_topics([NewTopic(name, 1)]))) == \
        TOPIC_AUTHORIZATION_FAILED
    grant(broker, allow("alice", "Create", "Topic", name))
    assert code_of(lambda: wait(admin(broker, "alice").create_topics([NewTopic(name, 1)]))) == 0
    assert code_of(lambda: wait(admin(broker, "bob").create_partitions([NewPartitions(name, 2)]))) == \
        TOPIC_AUTHORIZATION_FAILED
    grant(broker, allow("alice", "Alter", "Topic", name))
    assert code_of(lambda: wait(admin(broker, "alice").create_partitions([NewPartitions(name, 2)]))) == 0
    assert code_of(lambda: wait(admin(broker, "bob").delete_topics([name]))) == TOPIC_AUTHORIZATION_FAILED
    grant(broker, allow("alice", "Delete", "Topic", name))
    assert code_of(lambda: wait(admin(broker, "alice").delete_topics([name]))) == 0


def test_configs_need_describe_configs_and_alter_configs(broker):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    topic = make_topic(broker)
    resource = ConfigResource(ResourceType.TOPIC, topic)
    assert code_of(lambda: wait(admin(broker, "bob").describe_configs([resource]))) == TOPIC_AUTHORIZATION_FAILED
    grant(broker, allow("alice", "AlterConfigs", "Topic", topic))          # implies DescribeConfigs
    assert code_of(lambda: wait(admin(broker, "alice").describe_configs([resource]))) == 0
    change = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    assert code_of(lambda: wait(admin(broker, "bob").incremental_alter_configs([change]))) == \
        TOPIC_AUTHORIZATION_FAILED
    assert code_of(lambda: wait(admin(broker, "alice").incremental_alter_configs([change]))) == 0
    assert broker.node.partition(topic, 0).log.config.retention_ms == 3_600_000
    brokers = ConfigResource(ResourceType.BROKER, "0")
    assert code_of(lambda: wait(admin(broker, "alice").describe_configs([brokers]))) == \
        CLUSTER_AUTHORIZATION_FAILED
    grant(broker, allow("alice", "DescribeConfigs", "Cluster"))
    assert code_of(lambda: wait(admin(broker, "alice").describe_configs([brokers]))) == 0


def test_acl_apis_need_alter_and_describe_on_the_cluster(broker):
    from confluent_kafka.admin import (AclBinding as CkBinding, AclBindingFilter, AclOperation,
                                       AclPermissionType, ResourcePatternType, ResourceType)
    topic = "acl-" + uuid.uuid4().hex[:8]
    binding = CkBinding(ResourceType.TOPIC, topic, ResourcePatternType.PREFIXED, "User:carol", "*",
                        AclOperation.READ, AclPermissionType.ALLOW)
    everything = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.MATCH, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    assert code_of(lambda: wait(admin(broker, "bob").create_acls([binding]))) == CLUSTER_AUTHORIZATION_FAILED
    grant(broker, allow("alice", "Alter", "Cluster"))
    assert code_of(lambda: wait(admin(broker, "alice").create_acls([binding]))) == 0
    assert wait(admin(broker, "alice").describe_acls(everything)) == [binding]   # Alter implies Describe
    # librdkafka drops DescribeAcls' error code (kafka-python's test below sees CLUSTER_AUTHORIZATION_FAILED),
    # so a refused client sees no ACL where one exists
    assert wait(admin(broker, "bob").describe_acls(everything)) == []
    assert broker.broker.authorizer.authorize("User:carol", "127.0.0.1", AclOperation.READ.value,
                                              ResourceType.TOPIC.value, topic + "-x")
    assert code_of(lambda: wait(admin(broker, "bob").delete_acls([everything]))) == CLUSTER_AUTHORIZATION_FAILED
    assert wait(admin(broker, "alice").delete_acls([everything]))[everything] == [binding]
    assert wait(admin(broker, "admin").describe_acls(everything)) == []


def test_scram_credential_apis_need_the_cluster(broker):
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    from kafka import KafkaAdminClient
    from kafka.errors import ClusterAuthorizationFailedError
    upsert = UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")
    assert code_of(lambda: wait(admin(broker, "bob").alter_user_scram_credentials([upsert]))) == \
        CLUSTER_AUTHORIZATION_FAILED
    # (confluent-kafka 2.16 crashes on a refused DescribeUserScramCredentials: kafka-python asks instead)
    bob = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                           sasl_mechanism="PLAIN", sasl_plain_username="bob", sasl_plain_password=USERS["bob"])
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            bob.describe_user_scram_credentials()
    finally:
        bob.close()
    grant(broker, allow("alice", "Alter", "Cluster"))
    assert code_of(lambda: wait(admin(broker, "alice").alter_user_scram_credentials([upsert]))) == 0
    assert "dave" in wait(admin(broker, "alice").describe_user_scram_credentials())


def test_kafka_python_clients_meet_the_same_rules(broker):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePatternFilter
    from kafka.admin import ResourceType as KResource
    from kafka.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError
    topic = make_topic(broker)

    def opts(user):
        return dict(bootstrap_servers=broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                    sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=user, sasl_plain_password=USERS[user])
    grant(broker, allow("alice", "Write", "Topic", topic), allow("alice", "Read", "Topic", topic))
    p = KafkaProducer(**opts("alice"))
    p.send(topic, b"kp", partition=0).get(10)
    p.close()
    c = KafkaConsumer(**opts("alice"), consumer_timeout_ms=5000, auto_offset_reset="earliest")
    from kafka import TopicPartition
    c.assign([TopicPartition(topic, 0)])
    assert [r.value for r in c][-1] == b"kp"
    c.close()
    p = KafkaProducer(**opts("bob"), max_block_ms=5000, retries=0)
    with pytest.raises(Exception) as raised:
        p.send(topic, b"no", partition=0).get(10)
    p.close()
    assert isinstance(raised.value, TopicAuthorizationFailedError) or "TopicAuthorizationFailed" in repr(raised.value)
    acl_filter = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                           permission_type=ACLPermissionType.ANY,
                           resource_pattern=ResourcePatternFilter(KResource.TOPIC, topic,
                                                                        ACLResourcePatternType.MATCH))
    bob = KafkaAdminClient(**opts("bob"))
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            bob.describe_acls(acl_filter)
    finally:
        bob.close()
    alice = KafkaAdminClient(**opts("alice"))
    grant(broker, allow("alice", "Describe", "Cluster"))
    try:
        acls, error = alice.describe_acls(acl_filter)
        assert {(a.principal, a.operation.name) for a in acls} == {("User:alice", "WRITE"), ("User:alice", "READ")}
    finally:
        alice.close()

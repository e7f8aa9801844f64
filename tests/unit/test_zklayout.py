"""Reading a topic's node (/brokers/topics/<topic>) defensively: anything that is not the JSON Kafka writes there
is refused with MalformedTopicError naming the node and what is wrong (so the topic is left out), never with
whatever the JSON library or a dict lookup raises, and never accepted half-read."""

from __future__ import annotations

import json
import uuid

import pytest

from seglog.cluster import zklayout as layout
from seglog.cluster.metastore import MalformedTopicError, TopicAssignment
from seglog.errors import UnknownTopicOrPartitionError

TOPIC_ID = layout.encode_topic_id(uuid.UUID(int=7))


def node(**fields) -> bytes:
    value = {"version": 3, "topic_id": TOPIC_ID, "partitions": {"0": [0, 1, 2], "1": [1, 2, 0]},
             "adding_replicas": {}, "removing_replicas": {}}
    value.update(fields)
    return json.dumps({k: v for k, v in value.items() if v is not ...}).encode()


def test_what_kafka_writes_is_read_back():
    a = TopicAssignment("t", {0: (0, 1, 2), 1: (1, 2, 0), 2: (3, 2, 1, 0)}, uuid.uuid4(), {2: (3,)}, {2: (0,)})
    assert layout.decode_topic("t", layout.encode_topic(a)) == a
    # written by Kafka's tools: no adding/removing fields
    assert layout.decode_topic("t", node(adding_replicas=..., removing_replicas=...)).partitions == \
        {0: (0, 1, 2), 1: (1, 2, 0)}


HOSTILE = {
    "empty": b"",
    "garbage": b"{not json",
    "not utf-8": b"\xff\xfe\x00garbage\x80",
    "nested too deeply": b"[" * 200_000,
    "a list": b"[1, 2, 3]",
    "a number": b"12345678901234567890123456789",
    "null": b"null",
    "no partitions": node(partitions=...),
    "partitions not an object": node(partitions=[[0, 1, 2]]),
    "no partition at all": node(partitions={}),
    "replicas not a list": node(partitions={"0": 1}),
    "replicas a string": node(partitions={"0": "0,1,2"}),
    "an empty replica list": node(partitions={"0": []}),
    "a negative broker id": node(partitions={"0": [0, -1]}),
    "a broker id past int32": node(partitions={"0": [2 ** 31]}),
    "a huge broker id": node(partitions={"0": [10 ** 400]}),
    "a float broker id": node(partitions={"0": [1.0]}),
    "an infinite broker id": node(partitions={"0": [1e400]}),
    "a boolean broker id": node(partitions={"0": [True]}),
    "a string broker id": node(partitions={"0": ["1"]}),
    "duplicate replicas": node(partitions={"0": [1, 1]}),
    "a partition key not a number": node(partitions={"zero": [0]}),
    "a negative partition": node(partitions={"-1": [0], "0": [1]}),
    "a padded partition key": node(partitions={" 0": [0]}),
    "an underscored partition key": node(partitions={"0": [0], "1_0": [1]}),
    "a huge partition key": node(partitions={"0": [0], "9" * 5000: [1]}),
    "a gap in the partitions": node(partitions={"0": [0], "2": [1]}),
    "no topic id": node(topic_id=...),
    "a topic id not a string": node(topic_id=42),
    "a topic id not base64 of 16 bytes": node(topic_id="xyz"),
    "adding replicas not an object": node(adding_replicas=[1]),
    "adding to a partition the topic lacks": node(adding_replicas={"5": [1]}),
    "removing every target replica": node(removing_replicas={"0": [0, 1, 2]}),
    "adding and removing the same replica": node(adding_replicas={"0": [1]}, removing_replicas={"0": [1]}),
    "removing a replica not assigned": node(removing_replicas={"0": [7]}),
}


@pytest.mark.parametrize("data", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_node_is_refused_naming_the_node(data):
    with pytest.raises(MalformedTopicError, match=r"^Topic node /brokers/topics/orders cannot be read \(.+\)") as e:
        layout.decode_topic("orders", data)
    assert isinstance(e.value, UnknownTopicOrPartitionError)      # the topic is left out, as a missing one
    assert len(str(e.value)) < 400                                # the reason is summed up, not the whole node

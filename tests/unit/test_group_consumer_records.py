"""KIP-848 consumer groups written to __consumer_offsets in Kafka's format (group_consumer_records): the
records round-trip, bytes laid out by Kafka's schemas decode, tombstones remove members and deleted groups in
Kafka's order, a compacted partition replays to the same group, records of seglog's earlier format are
loaded and rewritten, and a coordinator that loads them gives members their epochs and assignments back with
fresh sessions."""

import struct
import uuid

import pytest

from seglog.errors import GroupIdNotFoundError, InvalidRequestError, UnknownMemberIdError
from seglog.group import GroupConfig, GroupCoordinator
from seglog.group_consumer_records import RecordType, changes, decode_value, group_records, restore_group
from seglog.group_consumer_state import ConsumerGroupState, MemberState
from seglog.offsets_format import ConsumerGroupKey, Writer, decode_key, encode_consumer_key

T0 = 1_700_000_000_000
TOPICS = {"a": 6, "b": 3}
TOPIC_IDS = {"a": uuid.UUID("6f1a4e9c-1b7d-4c4e-9a51-0e3b2a7c5d10"),
             "b": uuid.UUID("0b5e2c7a-8d3f-4f21-b6a9-3c1d7e9f2a44")}
NAMES = {i: t for t, i in TOPIC_IDS.items()}
CONFIG = dict(consumer_session_timeout_ms=10_000, consumer_min_session_timeout_ms=1000, initial_rebalance_delay_ms=0)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def coordinator(store, clock):
    return GroupCoordinator(store=store, config=GroupConfig(**CONFIG), clock=clock, timer=False,
                            topics=lambda: dict(TOPICS), topic_ids=lambda: dict(TOPIC_IDS))


def parts(assignment):
    return {(t, p) for t, ps in (assignment or {}).items() for p in ps}


def form_group(coord, n=3, topics=("a", "b")):
    """n members joined and reconciled: {member id: (last heartbeat result, partitions held)}."""
    members = {}
    for i in range(n):
        r = coord.consumer_group_heartbeat("g", "", 0, subscribed_topic_names=list(topics),
                                           rebalance_timeout_ms=30_000, instance_id="s0" if i == 0 else None)
        members[r.member_id] = (r, r.assignment or {})
    for _ in range(6):
        for mid, (r, held) in list(members.items()):
            r2 = coord.consumer_group_heartbeat("g", mid, r.member_epoch, owned=held)
            members[mid] = (r2, held if r2.assignment is None else r2.assignment)
    return members


def snapshot(coord):
    [d] = coord.describe_consumer_groups(["g"])
    return (d.group_epoch, d.assignment_epoch, d.assignor, d.state,
            {m.member_id: (m.member_epoch, m.instance_id, m.subscribed_topic_names, m.assignment, m.target_assignment)
             for m in d.members})


@pytest.fixture
def node(tmp_path):
    from seglog.node import Node
    props = {"offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "4096"}
    with Node(tmp_path / "data", props) as n:
        yield n


def key_types(keys):
    return [decode_key(k).record_type for k in keys]


def test_keys_and_records_round_trip():
    from seglog.offsets_store import InMemoryOffsetStore
    coord = coordinator(InMemoryOffsetStore(), Clock())
    form_group(coord)
    group = coord._consumer_groups["g"]
    records = group_records(group, TOPIC_IDS)
    assert decode_key(encode_consumer_key(3, "g")) == ConsumerGroupKey(3, "g")
    assert decode_key(encode_consumer_key(8, "g", "m")) == ConsumerGroupKey(8, "g", "m")
    with pytest.raises(ValueError):
        encode_consumer_key(5, "g")
    with pytest.raises(ValueError):
        encode_consumer_key(2, "g")
    assert key_types(records) == [5, 5, 5, 4, 3, 7, 7, 7, 6, 8, 8, 8]       # Kafka's write order
    assert records == coord.store.consumer_records("g")
    back = restore_group("g", records, NAMES)
    assert group_records(back, TOPIC_IDS) == records
    assert back.static_members == group.static_members and back.state is ConsumerGroupState.STABLE
    assert sorted(back.members) == sorted(group.members)
    assert all(back.members[m].assigned == group.members[m].assigned for m in group.members)
    group_key = encode_consumer_key(3, "g")
    assert restore_group("g", {k: v for k, v in records.items() if k != group_key}, NAMES) is None
    with pytest.raises(InvalidRequestError):
        restore_group("g", {group_key: records[group_key][:5]}, NAMES)
    with pytest.raises(InvalidRequestError):
        restore_group("g", {group_key: records[group_key] + b"\0"}, NAMES)
    with pytest.raises(InvalidRequestError):
        restore_group("other", records, NAMES)
    b_gone = restore_group("g", records, {TOPIC_IDS["a"]: "a"})            # topic b was deleted since
    assert all(set(m.assigned) <= {"a"} for m in b_gone.members.values()) and set(b_gone.subscribed_metadata) == {"a"}
    coord.close()


def uvarint(n):
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7f | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def cstr(s):
    return b"\0" if s is None else uvarint(len(s.encode()) + 1) + s.encode()


def carray(items):
    return uvarint(len(items) + 1) + b"".join(items)


def i8(v):
    return struct.pack(">b", v)


def i32(v):
    return struct.pack(">i", v)


def topic_partitions(assignment):
    """[TopicPartitions]: topic id, compact []int32, no tagged fields."""
    return carray([TOPIC_IDS[t].bytes + carray([i32(p) for p in ps]) + b"\0" for t, ps in assignment.items()])


def kafka_key(version, *strings):
    return struct.pack(">h", version) + b"".join(struct.pack(">h", len(s)) + s.encode() for s in strings)


def test_records_laid_out_by_kafkas_schemas_decode():
    """Bytes built here from Kafka's ConsumerGroup*Key/Value schemas (value version 0, flexible: compact
    strings and arrays, a tagged-field section per struct) load; a tagged field unknown here (the metadata hash
    Kafka 4.1 adds to the group epoch record) is skipped; seglog writes the same bytes back."""
    no_tags = b"\0"
    member = (struct.pack(">h", 0) + cstr("i1") + cstr(None) + cstr("client-1") + cstr("/10.0.0.1")
              + carray([cstr("a"), cstr("b")]) + cstr(None) + i32(30_000) + cstr("range") + no_tags)
    records = {
        kafka_key(5, "kg", "m1"): member,
        kafka_key(4, "kg"): struct.pack(">h", 0) + carray([TOPIC_IDS[t].bytes + cstr(t) + i32(n) + carray([]) + no_tags
                                                           for t, n in sorted(TOPICS.items())]) + no_tags,
        kafka_key(3, "kg"): (struct.pack(">h", 0) + i32(7)
                             + uvarint(1) + uvarint(0) + uvarint(8) + struct.pack(">q", -5)),   # tag 0, 8 bytes
        kafka_key(7, "kg", "m1"): struct.pack(">h", 0) + topic_partitions({"a": [0, 1, 2], "b": [0]}) + no_tags,
        kafka_key(6, "kg"): struct.pack(">h", 0) + i32(7) + no_tags,
        kafka_key(8, "kg", "m1"): (struct.pack(">h", 0) + i32(7) + i32(6) + i8(2) + topic_partitions({"a": [0, 1]})
                                   + topic_partitions({}) + no_tags),
    }
    group = restore_group("kg", records, NAMES)
    assert (group.group_epoch, group.target_epoch, group.subscribed_metadata) == (7, 7, TOPICS)
    [m] = group.members.values()
    assert (m.member_id, m.instance_id, m.rack_id, m.client_id, m.client_host, m.subscribed_names,
            m.subscribed_regex, m.rebalance_timeout_ms, m.server_assignor) == (
        "m1", "i1", None, "client-1", "/10.0.0.1", ("a", "b"), None, 30_000, "range")
    assert (m.member_epoch, m.previous_epoch, m.state) == (7, 6, MemberState.UNRELEASED_PARTITIONS)
    assert m.assigned == {"a": frozenset({0, 1})} and m.revoking == {}
    assert group.target == {"m1": {"a": frozenset({0, 1, 2}), "b": frozenset({0})}}
    assert group.static_members == {"i1": "m1"} and group.state is ConsumerGroupState.RECONCILING
    written = group_records(group, TOPIC_IDS)
    assert {k: v for k, v in written.items() if k != kafka_key(3, "kg")} == {
        k: v for k, v in records.items() if k != kafka_key(3, "kg")}
    assert decode_value(RecordType.GROUP_EPOCH, written[kafka_key(3, "kg")]) == {"epoch": 7}
    with pytest.raises(InvalidRequestError):                        # a member state Kafka does not define
        restore_group("kg", {**records, kafka_key(8, "kg", "m1"): records[kafka_key(8, "kg", "m1")]
                             .replace(i32(6) + i8(2), i32(6) + i8(9))}, NAMES)


def test_a_classic_members_metadata_is_kafkas_tagged_classic_member_metadata():
    """A member using the classic protocol keeps its session timeout and protocols in tagged field 0 of its
    member record (Kafka's ClassicMemberMetadata: a nullable struct, size + 1, a 1 marker, the struct)."""
    body = i32(10_000) + carray([cstr("range") + uvarint(4) + b"abc" + b"\0"]) + b"\0"
    member = (struct.pack(">h", 0) + cstr(None) + cstr(None) + cstr("c") + cstr("/h") + carray([cstr("a")])
              + cstr(None) + i32(30_000) + cstr(None) + uvarint(1) + uvarint(0) + uvarint(len(body) + 1) + b"\1"
              + body)
    records = {kafka_key(5, "kg", "m1"): member, kafka_key(3, "kg"): struct.pack(">h", 0) + i32(4) + b"\0"}
    group = restore_group("kg", records, NAMES)
    [m] = group.members.values()
    assert (m.classic.session_timeout_ms, m.classic.protocols) == (10_000, (("range", b"abc"),))
    assert group_records(group, TOPIC_IDS)[kafka_key(5, "kg", "m1")] == member


class RecordingStore:
    """An InMemoryOffsetStore that keeps each consumer record write (one list per batch)."""

    def __new__(cls):
        from seglog.offsets_store import InMemoryOffsetStore

        class Store(InMemoryOffsetStore):
            def __init__(self):
                super().__init__()
                self.batches = []

            def start_consumer_records(self, group, records, **conversion):
                self.batches.append(list(records))
                return super().start_consumer_records(group, records, **conversion)
        return Store()


def test_tombstones_as_kafka_writes_them():
    """A member that leaves: tombstones of its current assignment, target and subscription (8, 7, 5) before the
    group's new epoch; a deleted group: every record, 8s, 7s, 6, 5s, 4, 3 (Kafka's createGroupTombstoneRecords)."""
    store = RecordingStore()
    coord = coordinator(store, Clock())
    members = form_group(coord, n=2)
    (gone, (r, _)), (kept, (k, held)) = members.items()
    store.batches.clear()
    coord.consumer_group_heartbeat("g", gone, -1)
    [batch] = store.batches
    dead = [(decode_key(key).record_type, decode_key(key).member) for key, v in batch if v is None]
    assert dead == [(8, gone), (7, gone), (5, gone)] and batch[:3] == [(key, None) for key, v in batch[:3]]
    assert 3 in key_types(key for key, v in batch if v is not None)
    coord.consumer_group_heartbeat("g", kept, -1)
    store.batches.clear()
    assert coord.delete_groups(["g"]) == {"g": None}
    tombstones = [(key, v) for batch in store.batches for key, v in batch]
    assert all(v is None for _, v in tombstones)
    assert key_types(key for key, _ in tombstones) == [6, 4, 3]            # no members left: group records only
    assert store.consumer_records("g") == {}
    coord.close()
    coord = coordinator(RecordingStore(), Clock())
    form_group(coord, n=2)
    records = group_records(coord._consumer_groups["g"], TOPIC_IDS)
    assert key_types(k for k, _ in changes(records, {})) == [8, 8, 7, 7, 6, 5, 5, 4, 3]
    coord.close()


def legacy_records(group_id):
    """A group as seglog's first KIP-848 format wrote it (key versions 1000/1001), laid out by hand."""
    def assignment(w, a):
        w.int32(len(a))
        for t, ps in sorted(a.items()):
            w.string(t).int32(len(ps))
            for p in ps:
                w.int32(p)
    group = Writer().int16(0).int32(4).int32(4).string("uniform").int32(1).string("a").int32(6)
    out = {bytes(Writer().int16(1000).string(group_id)): bytes(group)}
    for mid, ps in (("m1", [0, 1, 2]), ("m2", [3, 4, 5])):
        w = (Writer().int16(0).string(None).string(None).string("c").string("/h").int32(30_000).int32(1).string("a")
             .string(None).string(None).int32(4).int32(3).string("stable"))
        for _ in range(3):                                     # assigned, revoking (none), target
            assignment(w, {"a": ps} if _ != 1 else {})
        out[bytes(Writer().int16(1001).string(group_id).string(mid))] = bytes(w)
    return out


def test_records_of_the_earlier_format_are_loaded_once_and_rewritten():
    store = RecordingStore()
    store.start_consumer_records("g", list(legacy_records("g").items()))
    coord = coordinator(store, Clock())
    epoch, target_epoch, assignor, state, members = snapshot(coord)
    assert (epoch, target_epoch, assignor, state) == (4, 4, "uniform", ConsumerGroupState.STABLE)
    assert {m: parts(d[3]) for m, d in members.items()} == {"m1": {("a", p) for p in (0, 1, 2)},
                                                           "m2": {("a", p) for p in (3, 4, 5)}}
    stored = store.consumer_records("g")                       # rewritten at the load, old keys tombstoned
    assert set(key_types(stored)) == {3, 4, 5, 6, 7, 8}
    assert key_types(k for k, v in store.batches[-1] if v is None) == [1001, 1001, 1000]
    r = coord.consumer_group_heartbeat("g", "m1", 4, owned={"a": [0, 1, 2]})
    assert r.member_epoch == 4
    coord.close()
    coord = coordinator(store, Clock())
    assert snapshot(coord)[:4] == (4, 4, "uniform", ConsumerGroupState.STABLE)
    coord.close()


def test_a_restarted_coordinator_reloads_members_with_epochs_and_fresh_sessions(node):
    from seglog.offsets_store import LogOffsetStore
    clock = Clock()
    coord = coordinator(LogOffsetStore(node), clock)
    members = form_group(coord)
    before = snapshot(coord)
    assert before[3] is ConsumerGroupState.STABLE and sum(len(parts(m[3])) for m in before[4].values()) == 9
    coord.close()

    clock.now = 100_000.0                      # long past every session: they restart at the load
    coord = coordinator(LogOffsetStore(node), clock)
    assert snapshot(coord) == before
    clock.now += 9_000
    for mid, (r, held) in members.items():     # no rejoin: the same epoch goes on being accepted
        r2 = coord.consumer_group_heartbeat("g", mid, r.member_epoch, owned=held)
        assert r2.member_epoch == r.member_epoch and parts(r2.assignment or held) == parts(held)
    quiet = next(iter(members))
    clock.now += 9_000
    for mid, (r, held) in members.items():
        if mid != quiet:
            coord.consumer_group_heartbeat("g", mid, r.member_epoch, owned=held)
    clock.now += 2_000
    coord.tick()                               # the quiet member's session (started at its last beat) ends
    assert quiet not in snapshot(coord)[4]
    coord.close()

    coord = coordinator(LogOffsetStore(node), clock)           # its removal was written (a tombstone)
    assert quiet not in snapshot(coord)[4] and len(snapshot(coord)[4]) == 2
    with pytest.raises(UnknownMemberIdError):
        coord.consumer_group_heartbeat("g", quiet, members[quiet][0].member_epoch)
    coord.close()


def test_a_compacted_partition_replays_to_the_same_group(node):
    from seglog.offsets_store import LogOffsetStore
    clock = Clock()
    coord = coordinator(LogOffsetStore(node), clock)
    form_group(coord, n=2)
    for i in range(60):                        # members come and go: many records, most superseded
        r = coord.consumer_group_heartbeat("g", f"t{i}", 0, subscribed_topic_names=["b"], rebalance_timeout_ms=1)
        coord.consumer_group_heartbeat("g", r.member_id, -1)
    form = snapshot(coord)
    coord.close()
    [part] = node.partitions("__consumer_offsets")
    before = len(list(part.log.records()))
    assert part.log.segment_count > 2
    assert part.log.compact(now_ms=T0).aborted is None
    assert len(list(part.log.records())) < before
    coord = coordinator(LogOffsetStore(node), clock)
    assert snapshot(coord) == form and len(form[4]) == 2
    coord.close()


def test_a_deleted_group_and_a_takeover_of_a_loaded_group(node):
    from seglog.offsets_store import LogOffsetStore
    clock = Clock()
    coord = coordinator(LogOffsetStore(node), clock)
    members = form_group(coord, n=2)
    coord.load_groups(*coord.store.load_partition(0), taken_over=lambda g: True)
    for mid, (r, held) in members.items():     # loaded: no hold, the assignment stays
        r2 = coord.consumer_group_heartbeat("g", mid, r.member_epoch, owned=held)
        assert parts(r2.assignment or held) == parts(held) and held
    for mid, (r, _) in members.items():
        coord.consumer_group_heartbeat("g", mid, -1)
    assert coord.delete_groups(["g"]) == {"g": None}
    coord.close()
    coord = coordinator(LogOffsetStore(node), clock)
    assert isinstance(coord.describe_consumer_groups(["g"])[0], GroupIdNotFoundError)
    assert coord.store.consumer_records("g") == {}
    coord.close()


def test_a_failed_write_is_written_again_with_the_next_change():
    from seglog.errors import NotEnoughReplicasError
    from seglog.offsets_store import InMemoryOffsetStore

    class FlakyStore(InMemoryOffsetStore):
        fail = False

        def start_consumer_records(self, group, records, **conversion):
            if self.fail:
                raise NotEnoughReplicasError("disk gone")
            return super().start_consumer_records(group, records, **conversion)

    store = FlakyStore()
    coord = coordinator(store, Clock())
    members = form_group(coord, n=2)
    store.fail = True
    (gone, (r, _)), (kept, (k, held)) = members.items()
    with pytest.raises(NotEnoughReplicasError):
        coord.consumer_group_heartbeat("g", gone, -1)          # left, but its tombstone was not written
    store.fail = False
    coord.consumer_group_heartbeat("g", kept, k.member_epoch, owned=held)
    assert store.consumer_records("g") == group_records(coord._consumer_groups["g"], TOPIC_IDS)
    assert encode_consumer_key(5, "g", gone) not in store.consumer_records("g")
    coord.close()


def test_dump_log_offsets_decoder_shows_the_records(node, capsys):
    """`seglog dump-log --offsets-decoder` prints __consumer_offsets records as kafka-dump-log.sh does: the
    consumer group records with Kafka's JSON names, tombstones as <DELETE>, offset commits, and seglog's
    earlier record types as unknown."""
    import base64
    import json
    import pathlib

    from seglog.cli import main
    from seglog.offsets_format import OffsetAndMetadata
    from seglog.offsets_store import LogOffsetStore
    store = LogOffsetStore(node)
    store.start_consumer_records("old", list(legacy_records("old").items()))()
    coord = coordinator(store, Clock())
    members = form_group(coord, n=2)
    gone, (r, _) = next(iter(members.items()))
    node.create_topic("a", 6)
    assert coord.commit_offsets("g", {("a", 0): OffsetAndMetadata(5, metadata="m")}, generation_id=r.member_epoch,
                                member_id=gone) == {("a", 0): None}
    coord.consumer_group_heartbeat("g", gone, -1)
    coord.close()
    [part] = node.partitions("__consumer_offsets")
    capsys.readouterr()
    segments = sorted(str(p) for p in pathlib.Path(part.log.path).glob("*.log"))
    assert main(["dump-log", "--offsets-decoder", *segments]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| offset:")]
    shown = [(line.split(" key: ")[1].split(" payload: ") + [None])[:2] for line in lines]
    assert shown[0] == ["Unknown record type 1000 at offset 0, skipping.", None]
    decoded = [(json.loads(k), None if v is None or v == "<DELETE>" else json.loads(v), v == "<DELETE>")
               for k, v in shown if k.startswith("{")]
    by_type = {}
    for key, value, tombstone in decoded:
        by_type.setdefault(key["type"], []).append((key["data"], value, tombstone))
    assert set(by_type) >= {"1", "3", "4", "5", "6", "7", "8"}
    [(key, value, tombstone)] = by_type["1"]
    assert (key, value["version"], tombstone) == ({"group": "g", "topic": "a", "partition": 0}, "3", False)
    assert list(value["data"].items())[:3] == [("offset", 5), ("leaderEpoch", -1), ("metadata", "m")]
    assert list(value["data"]) == ["offset", "leaderEpoch", "metadata", "commitTimestamp"]
    member = next(v for k, v, _ in by_type["5"] if k["memberId"] == gone)["data"]
    assert member["subscribedTopicNames"] == ["a", "b"] and member["rebalanceTimeoutMs"] == 30_000
    assert "classicMemberMetadata" not in member                  # a tagged field at its default: left out
    assigned = next(v for k, v, t in by_type["8"] if k["memberId"] == gone and not t)["data"]["assignedPartitions"]
    assert {base64.urlsafe_b64decode(t["topicId"] + "==") for t in assigned} <= {i.bytes for i in TOPIC_IDS.values()}
    assert [(k["memberId"], t) for k, _, t in by_type["8"] if t] == [(gone, True)]       # its tombstone
    assert by_type["3"][-1][1]["version"] == "0" and by_type["3"][-1][1]["data"]["epoch"] >= 3

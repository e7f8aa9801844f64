"""KIP-848 consumer groups written to __consumer_offsets (group_consumer_records): the records round-trip,
tombstones remove members and deleted groups, a compacted partition replays to the same group, and a
coordinator that loads them gives members their epochs and assignments back with fresh sessions."""

import pytest

from seglog.errors import GroupIdNotFoundError, InvalidRequestError, UnknownMemberIdError
from seglog.group import GroupConfig, GroupCoordinator
from seglog.group_consumer_records import group_records, restore_group
from seglog.group_consumer_state import ConsumerGroupState
from seglog.offsets_format import ConsumerGroupKey, decode_key, encode_consumer_key

T0 = 1_700_000_000_000
TOPICS = {"a": 6, "b": 3}
CONFIG = dict(consumer_session_timeout_ms=10_000, initial_rebalance_delay_ms=0)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def coordinator(store, clock):
    return GroupCoordinator(store=store, config=GroupConfig(**CONFIG), clock=clock, timer=False,
                            topics=lambda: dict(TOPICS))


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


def test_keys_and_records_round_trip():
    from seglog.offsets_store import InMemoryOffsetStore
    coord = coordinator(InMemoryOffsetStore(), Clock())
    form_group(coord)
    group = coord._consumer_groups["g"]
    records = group_records(group)
    assert decode_key(encode_consumer_key("g")) == ConsumerGroupKey("g")
    assert decode_key(encode_consumer_key("g", "m")) == ConsumerGroupKey("g", "m")
    assert len(records) == 4 and records == coord.store.consumer_records("g")
    back = restore_group("g", records)
    assert group_records(back) == records
    assert back.static_members == group.static_members and back.state is ConsumerGroupState.STABLE
    assert sorted(back.members) == sorted(group.members)
    assert all(back.members[m].assigned == group.members[m].assigned for m in group.members)
    assert restore_group("g", {k: v for k, v in records.items() if k != encode_consumer_key("g")}) is None
    with pytest.raises(InvalidRequestError):
        restore_group("g", {encode_consumer_key("g"): records[encode_consumer_key("g")][:5]})
    with pytest.raises(InvalidRequestError):
        restore_group("other", records)
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

        def start_consumer_records(self, group, records):
            if self.fail:
                raise NotEnoughReplicasError("disk gone")
            return super().start_consumer_records(group, records)

    store = FlakyStore()
    coord = coordinator(store, Clock())
    members = form_group(coord, n=2)
    store.fail = True
    (gone, (r, _)), (kept, (k, held)) = members.items()
    with pytest.raises(NotEnoughReplicasError):
        coord.consumer_group_heartbeat("g", gone, -1)          # left, but its tombstone was not written
    store.fail = False
    coord.consumer_group_heartbeat("g", kept, k.member_epoch, owned=held)
    assert store.consumer_records("g") == group_records(coord._consumer_groups["g"])
    assert encode_consumer_key("g", gone) not in store.consumer_records("g")
    coord.close()

"""Client quotas: Kafka's sampled rate and throttle time under a deterministic clock, entity precedence and
metric tags, AlterClientQuotas validation, DescribeClientQuotas filters, the data dir and metadata stores."""

import pytest

from seglog.cluster.memory import MemoryCluster, MemoryMetadataStore
from seglog.errors import InvalidRequestError, ThrottlingQuotaExceededError, UnsupportedVersionError
from seglog.quotas.entities import (DEFAULT, FETCH, MUTATION, PRODUCE, REQUEST, QuotaEntity, check_value, entity_from_wire,
                                    entity_path, entity_to_wire, parse_entity_path, resolve)
from seglog.quotas.manager import MATCH_ANY, MATCH_DEFAULT, MATCH_EXACT, ClientQuotas
from seglog.quotas.rate import SampledRate, TokenBucket, throttle_time_ms
from seglog.quotas.store import FileQuotaStore, MetadataQuotaStore
from seglog.sanitizer import desanitize, sanitize
from seglog.security.credentials import user_entity_path


# -- rate and throttle arithmetic ---------------------------------------------------------------------------------

def test_rate_counts_at_least_samples_minus_one_windows():
    rate = SampledRate(11, 1000, now_ms=0)
    rate.record(1000, 0)
    assert rate.window(0) == 10_000                       # 0 ms elapsed, padded to 10 whole windows
    assert rate.measure(0) == 100.0
    assert rate.window(2500) == 12_500 - 2000             # 2 full windows elapsed: padded by 8
    assert rate.measure(2500) == pytest.approx(1000 / 10.5)


def test_rate_rolls_samples_and_purges_expired_ones():
    rate = SampledRate(11, 1000, now_ms=0)
    for t in range(0, 11_000, 1000):                     # 11 samples of 100, starting at 0, 1000, ... 10000
        rate.record(100, t)
    assert rate.measure(10_000) == pytest.approx(110.0)  # 1100 over 10 s
    rate.record(100, 11_000)                             # reuses the oldest sample (started at 0)
    assert rate.measure(11_000) == pytest.approx(110.0)  # 1100 over 10 s since the sample at 1000
    # at 12500 the sample started at 1000 is 11.5 s old (>= 11 windows): empty, as if started now
    assert rate.measure(12_500) == pytest.approx(1000 / 10.5)
    # long quiet: every sample expires
    assert rate.measure(60_000) == 0.0


def test_rate_window_never_zero():
    rate = SampledRate(2, 1000, now_ms=0)
    rate.record(5, 0)
    assert rate.window(0) == 1000
    rate.record(5, 1000)                                 # second sample
    rate.record(5, 2000)                                 # back to the first, reset at 2000
    assert rate.window(2000) == 1000                     # oldest started at 1000


def test_one_sample_is_not_padded():
    rate = SampledRate(1, 1000, now_ms=0)
    rate.record(500, 0)
    assert rate.window(0) == 1 and rate.measure(0) == 500_000.0     # at least 1 ms
    assert rate.measure(500) == 1000.0
    rate.record(100, 1000)                               # the sample restarts
    assert rate.measure(1500) == 200.0
    assert rate.measure(2000) == 0.0                     # expired


def test_throttle_time_as_kafka_quota_utils():
    # Kafka's QuotaUtilsTest: quota 50, observed 100 over 3 samples of 1 s (a 2 s window) -> 2000 ms
    assert throttle_time_ms(100.0, 50.0, 2000) == 2000
    assert throttle_time_ms(18.2, 18.2, 2000) == 0       # at the quota: not throttled
    assert throttle_time_ms(16.5, 20.4, 2000) == 0
    assert throttle_time_ms(100.0, 50.0, 2000, cap_ms=1000) == 1000
    assert throttle_time_ms(50.25, 50.0, 1000) == 5      # Math.round: 5.0 -> 5
    assert throttle_time_ms(64.03125, 64.0, 1024) == 1   # exactly 0.5 rounds up


def test_recorded_throttle_and_expiry():
    now = [0]
    quotas = ClientQuotas(_Store({QuotaEntity(None, "c1"): {PRODUCE: 1000.0}}), clock=lambda: now[0])
    # 20 000 bytes at once over the padded 10 s window: 2000 B/s, twice the quota -> a whole window more
    assert quotas.throttle_ms(PRODUCE, "ANONYMOUS", "c1", 20_000) == 10_000
    # Kafka's arithmetic: the window stays padded to 10 s while the sample is younger, so the rate holds ...
    now[0] = 10_000
    assert quotas.throttle_ms(PRODUCE, "ANONYMOUS", "c1", 0) == 10_000
    now[0] = 11_000                                    # ... until the sample is 11 windows old and expires
    assert quotas.throttle_ms(PRODUCE, "ANONYMOUS", "c1", 0) == 0
    assert quotas.throttle_ms(PRODUCE, "ANONYMOUS", "other", 1e9) == 0      # no quota for that client id
    assert quotas.throttle_ms(FETCH, "ANONYMOUS", "c1", 1e9) == 0           # nor for fetches


def test_request_quota_capped_at_one_window_and_unrecord():
    quotas = ClientQuotas(_Store({QuotaEntity(DEFAULT, None): {REQUEST: 10.0, FETCH: 100.0}}), clock=lambda: 0)
    assert quotas.throttle_ms(REQUEST, "alice", "c", 10_000.0) == 1000    # would be 99 s: capped at 1 window
    assert quotas.throttle_ms(FETCH, "alice", "c", 2000) == 10_000         # 200 B/s over 10 s: not capped
    quotas.unrecord(FETCH, "alice", "c", 2000)
    assert quotas.throttle_ms(FETCH, "alice", "c", 0) == 0
    assert quotas.max_value_in_window(FETCH, "alice", "c") == 1000.0       # 100 B/s x 10 windows of 1 s
    assert quotas.max_value_in_window(PRODUCE, "alice", "c") is None


def test_token_bucket_as_kafkas():
    bucket = TokenBucket(now_ms=0)
    quota, burst = 2.0, 22.0                                # 11 samples of 1 s at 2 per second
    assert bucket.measure(quota, burst, 0) == 22.0          # full at first
    bucket.record(30, quota, burst, 0)                      # may go below zero
    assert bucket.tokens == -8.0 and TokenBucket.throttle_time_ms(bucket.tokens, quota) == 4000
    assert bucket.measure(quota, burst, 1500) == -5.0       # refilled at 2 per second
    assert bucket.measure(quota, burst, 100_000) == 22.0    # never above the burst
    assert TokenBucket.throttle_time_ms(0.0, quota) == 0


def test_controller_mutations_strict_and_permissive():
    now = [0]
    quotas = ClientQuotas(_Store({QuotaEntity(None, "admin"): {MUTATION: 1.0}}), samples=2, clock=lambda: now[0])
    quotas.check_mutations("u", "admin")                    # 2 tokens
    assert quotas.record_mutations("u", "admin", 5) == 3000  # -3: a permissive request is told to wait 3 s
    with pytest.raises(ThrottlingQuotaExceededError) as e:
        quotas.check_mutations("u", "admin")                # a strict one is refused meanwhile
    assert e.value.throttle_ms == 3000 and e.value.code == 89
    now[0] = 3000
    quotas.check_mutations("u", "admin")                    # back at zero
    assert quotas.record_mutations("u", "other", 100) == 0  # no quota


# -- precedence and sharing -----------------------------------------------------------------------------------------

LEVELS = [
    (QuotaEntity("alice", "c1"), ("alice", "c1")),
    (QuotaEntity("alice", DEFAULT), ("alice", "c1")),
    (QuotaEntity("alice", None), ("alice", "")),
    (QuotaEntity(DEFAULT, "c1"), ("alice", "c1")),
    (QuotaEntity(DEFAULT, DEFAULT), ("alice", "c1")),
    (QuotaEntity(DEFAULT, None), ("alice", "")),
    (QuotaEntity(None, "c1"), ("", "c1")),
    (QuotaEntity(None, DEFAULT), ("", "c1")),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_precedence_picks_the_most_specific_entity_with_the_key(level):
    quotas = {entity: {PRODUCE: float(i + 1)} for i, (entity, _) in enumerate(LEVELS[level:], start=level)}
    quotas[QuotaEntity("bob", None)] = {PRODUCE: 99.0}            # another user's: never applies to alice
    quotas.setdefault(LEVELS[0][0], {})[FETCH] = 7.0              # another key on the top entity: ignored
    tags, value = resolve(quotas, PRODUCE, "alice", "c1")
    assert (tags, value) == (LEVELS[level][1], float(level + 1))


def test_no_quota_resolves_to_none():
    assert resolve({QuotaEntity("bob", None): {PRODUCE: 1.0}}, PRODUCE, "alice", "c1") == (("", ""), None)


def test_a_user_quota_is_shared_by_the_users_client_ids():
    quotas = ClientQuotas(_Store({QuotaEntity("alice", None): {PRODUCE: 1000.0}}), clock=lambda: 0)
    assert quotas.throttle_ms(PRODUCE, "alice", "a", 10_000) == 0      # 1000 B/s over 10 s: at the quota
    assert quotas.throttle_ms(PRODUCE, "alice", "b", 10_000) == 10_000  # same rate: now twice the quota
    assert quotas.throttle_ms(PRODUCE, "bob", "b", 10_000) == 0        # no quota for bob


def test_a_default_client_quota_is_one_rate_per_client_id():
    quotas = ClientQuotas(_Store({QuotaEntity(None, DEFAULT): {PRODUCE: 1000.0}}), clock=lambda: 0)
    assert quotas.throttle_ms(PRODUCE, "alice", "a", 10_000) == 0
    assert quotas.throttle_ms(PRODUCE, "alice", "b", 10_000) == 0      # its own rate
    assert quotas.throttle_ms(PRODUCE, "bob", "a", 1) > 0               # client id a shared across users


# -- entities, validation -------------------------------------------------------------------------------------------

def test_entity_paths_are_kafkas_sanitized_zookeeper_paths():
    cases = {QuotaEntity("alice", None): "users/alice",
             QuotaEntity("CN=a b,O=x*", "c/1"): "users/CN%3Da%20b%2CO%3Dx%2A/clients/c%2F1",
             QuotaEntity(DEFAULT, DEFAULT): "users/<default>/clients/<default>",
             QuotaEntity(None, "my-client_1.~"): "clients/my-client_1.%7E"}
    for entity, path in cases.items():
        assert entity_path(entity) == path
        assert parse_entity_path(path) == entity
    with pytest.raises(ValueError):
        parse_entity_path("topics/t")


@pytest.mark.parametrize("name, node", [("my-client_1.~", "my-client_1.%7E"), ("a b*+c", "a%20b%2A%2Bc"),
                                        ("\u00e4/\u00df", "%C3%A4%2F%C3%9F"), ("User:CN=x,O=y", "User%3ACN%3Dx%2CO%3Dy"),
                                        ("<default>", "%3Cdefault%3E"), ("'\"!()", "%27%22%21%28%29")])
def test_names_are_sanitized_as_kafkas_sanitizer(name, node):
    """Java's URLEncoder (only letters, digits and .-_ kept; '~' encoded) with '*' as %2A and ' ' as %20;
    read back with Java's URLDecoder, which also takes '+' for a space."""
    assert sanitize(name) == node and desanitize(node) == name
    assert user_entity_path(name) == "users/" + node


def test_desanitize_reads_a_plus_as_a_space_as_kafka():
    assert desanitize("x+y%41") == "x yA"
    assert parse_entity_path("clients/a+b") == QuotaEntity(None, "a b")


def test_wire_entities():
    wire = [{"entity_type": "user", "entity_name": None}, {"entity_type": "client-id", "entity_name": "c1"}]
    assert entity_from_wire(wire) == QuotaEntity(DEFAULT, "c1")
    assert entity_to_wire(QuotaEntity(DEFAULT, "c1")) == wire
    for bad, message in (([], "Invalid empty client quota entity"),
                         ([{"entity_type": "group", "entity_name": "g"}], "Unhandled client quota entity type: group"),
                         ([{"entity_type": "user", "entity_name": ""}], "Empty user not supported"),
                         ([{"entity_type": "user", "entity_name": "a"}, {"entity_type": "user", "entity_name": "b"}],
                          "Duplicate user entity type")):
        with pytest.raises(InvalidRequestError, match=message):
            entity_from_wire(bad)


def test_quota_values_checked_as_kafka():
    assert check_value(PRODUCE, 1024.0) == 1024.0
    assert check_value(REQUEST, 12.5) == 12.5
    assert check_value(MUTATION, 0.5) == 0.5
    for key, value, message in ((PRODUCE, 1.5, "must be a LONG value"), ("foo", 1.0, "Invalid configuration key foo"),
                                (FETCH, 0.0, "must be greater than 0"), (REQUEST, -1.0, "must be greater than 0"),
                                (PRODUCE, float("nan"), "must be a LONG value"), (MUTATION, 0.0, "greater than 0")):
        with pytest.raises(InvalidRequestError, match=message):
            check_value(key, value)


# -- stores, alter and describe ---------------------------------------------------------------------------------------

class _Store:
    """A store over a dict (what FileQuotaStore and MetadataQuotaStore offer)."""

    def __init__(self, quotas):
        self.quotas = dict(quotas)

    def load(self):
        return {e: dict(v) for e, v in self.quotas.items()}

    def watch(self, callback):
        return None


def test_file_store_keeps_kafkas_json_and_other_keys(tmp_path):
    store = FileQuotaStore(tmp_path)
    quotas = ClientQuotas(store)
    quotas.alter(QuotaEntity("alice", "c1"), [(PRODUCE, 1024.0, False), (REQUEST, 50.0, False)], False)
    assert quotas.enabled and quotas.quota(PRODUCE, "alice", "c1") == (("alice", "c1"), 1024.0)
    import json
    raw = json.loads((tmp_path / "client-quotas.json").read_text())
    assert raw == {"users/alice/clients/c1": {"version": 1, "config": {"producer_byte_rate": "1024",
                                                                       "request_percentage": "50.0"}}}
    store.update(QuotaEntity("alice", "c1"), lambda c: {**c, "SCRAM-SHA-256": "salt=..."})
    quotas.alter(QuotaEntity("alice", "c1"), [(PRODUCE, 0.0, True), (REQUEST, 0.0, True)], False)
    assert not quotas.enabled                                    # the SCRAM key is no quota ...
    assert FileQuotaStore(tmp_path)._raw() == {"users/alice/clients/c1": {"SCRAM-SHA-256": "salt=..."}}  # ... kept
    quotas.alter(QuotaEntity(None, "c2"), [(FETCH, 5.0, False)], True)           # validate only
    assert FileQuotaStore(tmp_path).load() == {}
    with pytest.raises(InvalidRequestError, match="Duplicate quota key"):
        quotas.alter(QuotaEntity(None, "c2"), [(FETCH, 5.0, False), (FETCH, 0.0, True)], False)


def test_metadata_store_changes_reach_every_broker():
    cluster = MemoryCluster()
    a, b = MemoryMetadataStore(cluster), MemoryMetadataStore(cluster)
    try:
        on_a, on_b = ClientQuotas(MetadataQuotaStore(a)), ClientQuotas(MetadataQuotaStore(b))
        on_a.alter(QuotaEntity(None, DEFAULT), [(FETCH, 2048.0, False)], False)
        assert cluster.entity_configs == {"clients/<default>": {"consumer_byte_rate": "2048"}}
        _wait(lambda: on_b.quota(FETCH, "u", "x")[1] == 2048.0)
        on_b.alter(QuotaEntity(None, DEFAULT), [(FETCH, 0.0, True)], False)
        _wait(lambda: not on_a.enabled)
        on_a.close()
        on_b.close()
    finally:
        a.close()
        b.close()


def _wait(condition, timeout=10.0):
    import time
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the watch never delivered the change"
        time.sleep(0.01)


def _describe_store():
    return ClientQuotas(_Store({QuotaEntity("alice", None): {PRODUCE: 1.0},
                                QuotaEntity("alice", "c1"): {PRODUCE: 2.0},
                                QuotaEntity(DEFAULT, None): {FETCH: 3.0},
                                QuotaEntity(None, "c1"): {REQUEST: 4.0},
                                QuotaEntity(None, DEFAULT): {PRODUCE: 5.0}}))


@pytest.mark.parametrize("components,strict,expected", [
    ([("user", MATCH_EXACT, "alice")], True, [QuotaEntity("alice", None)]),
    ([("user", MATCH_EXACT, "alice")], False, [QuotaEntity("alice", None), QuotaEntity("alice", "c1")]),
    ([("user", MATCH_ANY, None)], True, [QuotaEntity("alice", None), QuotaEntity(DEFAULT, None)]),
    ([("user", MATCH_DEFAULT, None)], True, [QuotaEntity(DEFAULT, None)]),
    ([("client-id", MATCH_ANY, None)], True, [QuotaEntity(None, "c1"), QuotaEntity(None, DEFAULT)]),
    ([("client-id", MATCH_EXACT, "c1")], False, [QuotaEntity("alice", "c1"), QuotaEntity(None, "c1")]),
    ([("user", MATCH_ANY, None), ("client-id", MATCH_ANY, None)], True, [QuotaEntity("alice", "c1")]),
    ([], False, None),                                              # everything
    ([], True, []),
    ([("ip", MATCH_ANY, None)], True, []),
])
def test_describe_filters_as_kafka(components, strict, expected):
    quotas = _describe_store()
    found = quotas.describe(components, strict)
    assert list(found) == (sorted(quotas.store.quotas, key=entity_path) if expected is None else
                           sorted(expected, key=entity_path))


def test_describe_refuses_bad_filters():
    quotas = _describe_store()
    with pytest.raises(InvalidRequestError, match="Duplicate user filter"):
        quotas.describe([("user", MATCH_ANY, None), ("user", MATCH_DEFAULT, None)], True)
    with pytest.raises(UnsupportedVersionError, match="Custom entity type 'group' not supported"):
        quotas.describe([("group", MATCH_ANY, None)], True)
    with pytest.raises(InvalidRequestError, match="IP filter component"):
        quotas.describe([("ip", MATCH_ANY, None), ("user", MATCH_ANY, None)], True)
    with pytest.raises(InvalidRequestError, match="MATCH_EXACT"):
        quotas.describe([("user", MATCH_EXACT, None)], True)

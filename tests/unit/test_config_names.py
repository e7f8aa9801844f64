"""Unknown config names are InvalidConfigError, whichever way they are spelled (the README's promise), and
still the TypeError Python raises for an unexpected keyword argument."""

import pytest

from seglog import LogConfig
from seglog.errors import InvalidConfigError, UnknownConfigError


@pytest.mark.parametrize("make", [
    lambda: LogConfig(segmnt_bytes=5),                          # was a bare TypeError from the dataclass
    lambda: LogConfig().replace(segmnt_bytes=5),
    lambda: LogConfig.from_kafka({"segmnt.bytes": 5}),
    lambda: LogConfig().with_kafka({"segmnt.bytes": 5}),
])
def test_unknown_topic_config_names(make):
    with pytest.raises(UnknownConfigError, match="Unknown topic config name: segmnt.bytes.*did you mean segment.bytes"):
        make()
    with pytest.raises(InvalidConfigError):
        make()
    with pytest.raises(TypeError):
        make()


def test_known_names_still_work():
    assert LogConfig(segment_bytes=1 << 20).segment_bytes == 1 << 20
    assert LogConfig(1 << 20).segment_bytes == 1 << 20             # positional, as a dataclass takes it
    assert LogConfig().replace(retention_ms=5).retention_ms == 5


def test_connection_limit_overrides_are_parsed_and_resolved_as_kafka_reads_them():
    from seglog.config import BrokerConfig

    config = BrokerConfig(max_connections_per_ip_overrides=" 127.0.0.5:3, ::1:0,localhost:7 ")
    limits = config.connection_limit_overrides()
    assert limits["127.0.0.5"] == 3 and limits["::1"] in (0, 7) and limits["127.0.0.1"] == 7
    assert BrokerConfig(max_connections_per_ip=0, max_connections_per_ip_overrides="10.0.0.1:5")
    for bad in ("127.0.0.1", "127.0.0.1:-1", "127.0.0.1:x", ":4", "127.0.0.1:99999999999",
                "no-such-host.invalid:3"):
        with pytest.raises(InvalidConfigError, match="max.connections.per.ip.overrides"):
            BrokerConfig(max_connections_per_ip_overrides=bad)
    with pytest.raises(InvalidConfigError, match="can be set to zero only if max.connections.per.ip.overrides"):
        BrokerConfig(max_connections_per_ip=0)
    with pytest.raises(InvalidConfigError, match="max.connections.per.ip"):
        BrokerConfig(max_connections_per_ip=-1)

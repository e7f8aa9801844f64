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

"""Seed inputs of each target: valid inputs (so mutations start deep inside the format), per target's layout."""

import os
import random
import sys

from seglog import _engine

CODECS = (None, "gzip", "snappy", "lz4", "zstd")


def _batches() -> list[bytes]:
    out = []
    for codec in CODECS:
        w = _engine.BatchWriter(compression=codec, batch_bytes=300)
        w.add(b"value", b"key", [("h", b"1"), ("empty", None)], 1000)
        w.add(None, None, None, 1001)
        w.add(b"", b"k2", [(b"bk", b"")], 999)
        w.add_many([b"x" * 40, b"y" * 200, None])
        out.append(bytes(w.take()))
        w = _engine.BatchWriter(compression=codec, producer_id=7, producer_epoch=1, next_sequence=3)
        w.add(b"one", None, None, 5)
        w.finish()
        out.append(bytes(w.take()))
    return out


def batch() -> list[bytes]:
    return [bytes([mode]) + b for b in _batches() for mode in (0, 1)]


def records() -> list[bytes]:
    out = []
    for b in _batches():
        info = _engine.batches(b)[0]
        if info.compression == "none":
            section = b[61:info.size]
            for codec in range(5):
                out.append(bytes([codec | (8 if codec else 0), info.records_count]) + section)
    return out


def codecs() -> list[bytes]:
    out = []
    for b in _batches():
        info = _engine.batches(b)[0]
        if info.codec:
            section = b[61:info.size]
            out.append(bytes([(info.codec - 1) | (info.records_count - 1) << 4]) + section)
            if info.codec == 2:                  # xerial framing: the target adds the 16-byte prefix back
                out.append(bytes([1 | 4 | (info.records_count - 1) << 4]) + section[16:])
    return out


def frame() -> list[bytes]:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "unit"))
    from test_protocol import ALL_VERSIONS, request_frame, sample_struct, schema
    rng = random.Random(11)
    return [request_frame(k, v, sample_struct(schema(k, False), v, rng), correlation_id=i)
            for i, (k, v) in enumerate(ALL_VERSIONS)]


def sasl() -> list[bytes]:
    """Per mode (see targets.sasl): PLAIN messages, SCRAM client-first and client-final messages, both hashes."""
    plain = [b"\0alice\0alice-secret", b"alice\0alice\0alice-secret", b"\0alice\0wrong", b"\0bob\0pw",
             b"\0\0", "\0\u00e9l\u00e8ve\0p\u00e4ss".encode()]
    first = [b"n,,n=alice,r=abc", b"y,,n=alice,r=abc", b"n,a=alice,n=alice,r=abc", b"n,,n=a=2Cb=3Dc,r=abc",
             b"n,,n=alice,r=abc,e=ext", b"p=tls-unique,,n=alice,r=abc"]
    final = [b"c=biws,r=@N,p=" + b"A" * 44, b"c=biws,r=@N,p=" + b"A" * 88, b"c=biws,r=xyz@N,p=AAAA",
             b"c=eSws,r=@N,p=" + b"A" * 44]
    without_proof = [b"c=biws,r=@N", b"c=biws,r=client@N", b"c=biws,r=@N,x=extension"]
    return ([bytes([0]) + t for t in plain] +
            [bytes([mode | sha]) + t for sha in (0, 4)
             for mode, tokens in ((1, first), (2, final), (3, without_proof)) for t in tokens])


SEEDS = {"batch": batch, "records": records, "codecs": codecs, "frame": frame, "sasl": sasl}

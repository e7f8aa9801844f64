"""Argument checks shared by the partition log's modules (log.py and its log_* parts)."""

from __future__ import annotations

import operator

from .errors import InvalidArgumentError
from .local_log import INT64_MAX

__all__ = ["int_arg"]


def int_arg(value, what: str) -> int:
    """`value` as an offset or size: an int (or integer-like, e.g. numpy.int64) in 0..2**63-1. bool and float
    are refused rather than truncated. Raises InvalidArgumentError naming the argument (`what`)."""
    if type(value) is not int:
        if isinstance(value, bool) or not hasattr(type(value), "__index__"):
            raise InvalidArgumentError(f"{what} must be an int, not {type(value).__name__} {value!r}")
        value = operator.index(value)
    if not 0 <= value <= INT64_MAX:
        raise InvalidArgumentError(f"{what} must be in 0..{INT64_MAX}, not {value}")
    return value

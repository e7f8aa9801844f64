"""Kafka's rule for topic names, checked in one place by the data dir, the broker and the cluster store."""

from __future__ import annotations

import re

from .errors import InvalidTopicError

__all__ = ["MAX_TOPIC_NAME", "validate_topic_name"]

MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> None:
    """1-249 characters of ASCII letters, digits, '.', '_', '-', and not '.' or '..' (Kafka's ``Topic.validate``,
    with its messages). Raises InvalidTopicError."""
    if not isinstance(name, str) or not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError("Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopicError(f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters, "
                                f"topic name: {name}")
    if not _LEGAL.fullmatch(name):
        raise InvalidTopicError(f"Topic name \"{name}\" is illegal, it contains a character other than ASCII "
                                f"alphanumerics, '.', '_' and '-'")

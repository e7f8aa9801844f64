"""User and client-id names as ZooKeeper node names, exactly as Kafka's ``Sanitizer`` writes and reads them, so
a /config/users or /config/clients node seglog writes is the one Kafka would (and the reverse).

``sanitize`` is Java's ``URLEncoder`` (UTF-8; letters, digits and ``.-_`` kept, every other byte ``%XX`` in
upper case) with ``*`` as ``%2A`` and a space as ``%20``; ``desanitize`` is Java's ``URLDecoder`` (``%XX`` and
``+`` for a space). Python's ``quote`` keeps ``~``, which Java encodes, hence the one replacement.
"""

from __future__ import annotations

from urllib.parse import quote, unquote_plus

__all__ = ["sanitize", "desanitize"]


def sanitize(name: str) -> str:
    return quote(name, safe="").replace("~", "%7E")


def desanitize(node_name: str) -> str:
    return unquote_plus(node_name)

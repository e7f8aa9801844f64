"""Topic names by topic id, for the requests that name topics by id (Metadata v10+, Fetch v13+)."""

from __future__ import annotations

import uuid
from typing import Callable, Iterable

from .errors import UnknownTopicIdError

__all__ = ["TopicIds"]


class TopicIds:
    """The name of a topic id, over a view's ``names()`` and ``id_of(name)`` (None: no such topic). The index is
    kept between requests and checked on every hit (a topic deleted and created again has a new id); a miss
    rebuilds it once. Thread-safe: the index is replaced whole, never changed in place."""

    def __init__(self, names: Callable[[], Iterable[str]], id_of: Callable[[str], uuid.UUID | None]):
        self._names_of = names
        self._id_of = id_of
        self._index: dict[uuid.UUID, str] = {}

    def name(self, topic_id: uuid.UUID) -> str:
        """The topic's name; UnknownTopicIdError for an id no topic has (the zero id included)."""
        name = self._index.get(topic_id)
        if name is None or self._id_of(name) != topic_id:
            index = {}
            for n in self._names_of():
                i = self._id_of(n)
                if i is not None:
                    index[i] = n
            self._index = index
            name = index.get(topic_id)
            if name is None:
                raise UnknownTopicIdError("This server does not host this topic ID.")
        return name

"""The declarative message schema: fields with Kafka types and version ranges.

A message is a tuple of fields in wire order, built with :func:`field`, :func:`array` and :func:`struct`.
Field names are Kafka's message-JSON names in snake_case; version ranges use Kafka's notation ("3+", "0-2", "8").

Types (Kafka's names): ``bool int8 int16 uint16 int32 uint32 int64 float64 uuid string bytes records``, arrays of
them written ``"[]int32"``, arrays of structs (:func:`array`) and single structs (:func:`struct`). The encoding of a
type depends on whether the message version is *flexible*: then strings, bytes, records and arrays use the
compact forms (unsigned-varint length + 1, 0 meaning null) and every struct ends with a tagged-field section.
A field with ``tag`` lives only in that section (flexible versions only).

Defaults (what an encoder writes for a missing key, and what a decoder reports for a field the version lacks):
the explicit ``default`` if given, else ``None`` for fields nullable in some version, else the type's zero
(0, False, "", b"", the nil UUID, an empty list, a struct of defaults).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

__all__ = ["Api", "Field", "field", "array", "struct", "FIXED_FORMATS"]

# struct-module format of each fixed-width type (big-endian); uuid travels as 16 raw bytes
FIXED_FORMATS = {"bool": "?", "int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
                 "int64": "q", "float64": "d", "uuid": "16s"}
VARIABLE_TYPES = ("string", "bytes", "records")
MAX_VERSION = 0x7FFF
NIL_UUID = uuid.UUID(int=0)
_ZERO = {"bool": False, "float64": 0.0, "uuid": NIL_UUID, "string": "", "bytes": b"", "records": None}
_AUTO = object()


def parse_versions(text: str) -> tuple[int, int]:
    """``"3+"`` -> (3, 32767), ``"0-2"`` -> (0, 2), ``"8"`` -> (8, 8)."""
    if text.endswith("+"):
        return int(text[:-1]), MAX_VERSION
    lo, _, hi = text.partition("-")
    return int(lo), int(hi or lo)


@dataclass(frozen=True)
class Field:
    """One field. ``type`` is a primitive name, ``"[]<primitive>"``, ``"[]"`` (struct array) or ``"{}"`` (struct)."""

    name: str
    type: str
    versions: tuple[int, int]
    nullable: tuple[int, int] | None
    tag: int | None
    default: object
    fields: tuple["Field", ...] = ()

    def present(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def nullable_at(self, version: int) -> bool:
        return self.nullable is not None and self.nullable[0] <= version <= self.nullable[1]

    @property
    def element(self) -> str:
        """The element type of an array (``"[]"`` for a struct array)."""
        return self.type[2:] or "[]"

    def default_value(self):
        """A fresh default (lists and struct dicts are new objects on every call)."""
        if self.type == "{}" and self.nullable is None:
            return {f.name: f.default_value() for f in self.fields}
        if self.type.startswith("[]") and self.default is not None:
            return []
        return self.default


def _make(name, type_, versions, nullable, tag, default, fields=()) -> Field:
    element = type_[2:] if type_.startswith("[]") else type_
    if element not in FIXED_FORMATS and element not in VARIABLE_TYPES and type_ not in ("[]", "{}"):
        raise ValueError(f"field {name}: unknown type {type_!r}")
    if nullable is not None and type_ in FIXED_FORMATS:
        raise ValueError(f"field {name}: type {type_} cannot be nullable")
    if type_ == "[]records" or (tag is not None and type_ == "records"):
        raise ValueError(f"field {name}: records cannot be tagged or in an array")
    if type_.startswith("[]") and default not in (_AUTO, None):
        raise ValueError(f"field {name}: an array defaults to empty (or None)")
    if default is _AUTO:
        if nullable is not None:
            default = None
        elif type_.startswith("[]"):
            default = ()
        elif type_ == "{}":
            default = None               # default_value() builds the struct of defaults
        else:
            default = _ZERO.get(type_, 0)
    return Field(name, type_, parse_versions(versions), None if nullable is None else parse_versions(nullable),
                 tag, default, tuple(fields))


def field(name: str, type_: str, versions: str = "0+", *, nullable: str | None = None, tag: int | None = None,
          default=_AUTO) -> Field:
    """A primitive field or an array of primitives (``"[]int32"``)."""
    return _make(name, type_, versions, nullable, tag, default)


def array(name: str, *fields: Field, versions: str = "0+", nullable: str | None = None,
          tag: int | None = None) -> Field:
    """An array of structs with the given fields."""
    return _make(name, "[]", versions, nullable, tag, _AUTO, fields)


def struct(name: str, *fields: Field, versions: str = "0+", nullable: str | None = None,
           tag: int | None = None) -> Field:
    """A single struct with the given fields. A nullable one (Kafka's nullable struct) travels as an int8
    marker, -1 for null or 1 followed by the struct; its default is None."""
    return _make(name, "{}", versions, nullable, tag, _AUTO, fields)


NEVER_FLEXIBLE = 1 << 15
"""``Api.flexible`` of an API whose every version uses the classic encoding (Kafka's "flexibleVersions": "none")."""


@dataclass(frozen=True)
class Api:
    """One API: its key, the versions seglog supports, the first flexible version (NEVER_FLEXIBLE for an API
    that has none, as OffsetDelete), and both message schemas."""

    key: int
    name: str
    versions: tuple[int, int]
    flexible: int
    request: tuple[Field, ...]
    response: tuple[Field, ...]

    def supports(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

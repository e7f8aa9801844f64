"""Compile one message schema at one version into straight-line Python decode and encode functions.

``compile_message(fields, version, flexible, name)`` returns a :class:`Codec`:

``decode(buf, pos) -> (body, pos)``
    ``buf`` is a 1-D unsigned-byte memoryview holding the whole frame. ``body`` is a dict with every schema
    field as a key (fields this version lacks hold their defaults); strings are ``str``, bytes ``bytes``,
    uuids ``uuid.UUID``, records zero-copy ``memoryview`` slices of ``buf``. Unknown tagged fields are skipped.
    Nested arrays become nested loops in one function: no recursion, and every length is checked against the
    bytes left before anything is allocated (see :mod:`.wire`). Consecutive fixed-width fields, plus the
    int16/int32 length prefix after them, are read by one ``struct`` call.

``encode(body, out) -> bool``
    Appends the encoding of the mapping ``body`` to the list ``out`` (bytes pieces, plus external records
    chunks as given) and returns whether it appended an external chunk. Missing keys take their defaults,
    unknown keys are ignored, tagged fields equal to their default are not written.

The generated source is registered with :mod:`linecache`, so tracebacks through it show the real lines.
"""

from __future__ import annotations

import linecache
import struct
import uuid
from contextlib import contextmanager
from typing import Callable, NamedTuple

from ..errors import InvalidRequestError
from . import wire
from .schema import FIXED_FORMATS, VARIABLE_TYPES, Field

__all__ = ["Codec", "compile_message", "min_size"]


class Codec(NamedTuple):
    decode: Callable
    encode: Callable
    flexible: bool


_RUNTIME = {
    "check_length": wire.check_length, "check_count": wire.check_count, "compact_length": wire.compact_length,
    "compact_array_length": wire.compact_array_length,
    "read_uvarint": wire.read_uvarint, "read_tag": wire.read_tag, "uvarint": wire.uvarint,
    "tagged_field": wire.tagged_field, "fixed_array": wire.fixed_array, "records_part": wire.records_part,
    "InvalidRequestError": InvalidRequestError, "UUID": uuid.UUID, "unpack_from": struct.unpack_from,
    "pack16": struct.Struct(">h").pack, "pack32": struct.Struct(">i").pack,
}


def min_size(f: Field, version: int, flexible: bool) -> int:
    """The fewest bytes one value of ``f`` (one element, for arrays) takes on the wire; at least 1."""
    t = f.element if f.type.startswith("[]") else f.type
    if t in FIXED_FORMATS:
        return struct.calcsize(">" + FIXED_FORMATS[t])
    if t in VARIABLE_TYPES:
        return 1 if flexible else (2 if t == "string" else 4)
    if t == "{}" and f.nullable is not None:
        return 1                                             # the null marker
    if t == "{}" or t == "[]":
        size = sum(_wire_size(g, version, flexible) for g in f.fields if g.present(version) and g.tag is None)
        return max(1, size + flexible)
    raise AssertionError(t)


def _wire_size(f: Field, version: int, flexible: bool) -> int:
    if f.type.startswith("[]"):
        return 1 if flexible else 4
    return min_size(f, version, flexible)


class _Source:
    """Lines of one generated function plus the constants it refers to."""

    def __init__(self):
        self.lines: list[str] = []
        self.depth = 1
        self.namespace = dict(_RUNTIME)
        self._consts: dict[object, str] = {}
        self._n = 0

    def emit(self, text: str):
        self.lines.append("    " * self.depth + text)

    def var(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def const(self, key, value) -> str:
        name = self._consts.get(key)
        if name is None:
            name = self._consts[key] = self.var("_k")
            self.namespace[name] = value
        return name

    @contextmanager
    def block(self, header: str):
        self.emit(header)
        self.depth += 1
        yield
        self.depth -= 1

    @contextmanager
    def unless_null(self, nullable: bool, null_test: str, on_null: str):
        """The code of a value that may be null: ``if <null_test>: <on_null>``, then the body under ``else:``;
        a value that is never null gets the body alone."""
        if not nullable:
            yield
            return
        with self.block(f"if {null_test}:"):
            self.emit(on_null)
        with self.block("else:"):
            yield

    def build(self, signature: str, filename: str) -> Callable:
        text = f"def {signature}:\n" + "\n".join(self.lines) + "\n"
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        exec(compile(text, filename, "exec"), self.namespace)
        return self.namespace[signature.partition("(")[0]]

    def unpacker(self, fmt: str) -> str:
        return self.const(("unpack", fmt), struct.Struct(fmt).unpack_from)

    def packer(self, fmt: str) -> str:
        return self.const(("pack", fmt), struct.Struct(fmt).pack)

    def default(self, f: Field) -> str:
        """An expression for a fresh default value of ``f``."""
        if f.type == "{}" and f.nullable is None:
            return "{" + ", ".join(f"{g.name!r}: {self.default(g)}" for g in f.fields) + "}"
        value = f.default_value()
        if isinstance(value, list):
            return "[]"
        if value is None or isinstance(value, (bool, int, float, str, bytes)):
            return repr(value)
        return self.const(("default", id(f)), value)


def _wire_and_tagged(fields, version):
    present = [f for f in fields if f.present(version)]
    return [f for f in present if f.tag is None], sorted((f for f in present if f.tag is not None), key=lambda f: f.tag)


def _prefix_code(f: Field) -> str:
    """struct code of what ``f`` puts in a fixed-width run: its value, or (non-flexible) its length prefix."""
    return FIXED_FORMATS.get(f.type) or ("h" if f.type == "string" else "i")


class _Decoder:
    """Emits decoding code. Consecutive fixed-width values, and the int16/int32 length prefix that follows
    them in non-flexible versions, are read with one ``struct`` call; lengths are then checked inline."""

    def __init__(self, src: _Source, version: int, flexible: bool):
        self.src, self.version, self.flexible = src, version, flexible

    def struct(self, fields) -> str:
        """Emit code decoding a struct; returns the variable holding its dict."""
        src = self.src
        wire_fields, tagged = _wire_and_tagged(fields, self.version)
        values: dict[str, str] = {}
        run: list[Field] = []
        for f in wire_fields:
            if f.type in FIXED_FORMATS:
                run.append(f)
            elif self.flexible or f.type == "{}":
                self.run(run, values)
                run = []
                values[f.name] = self.value(f)
            else:
                length = self.run(run + [f], values)
                run = []
                values[f.name] = self.value(f, length)
        self.run(run, values)
        if self.flexible:
            self.tagged(tagged, values)
        d = src.var("_d")
        src.emit(f"{d} = {{" + ", ".join(f"{f.name!r}: {values.get(f.name) or src.default(f)}" for f in fields) + "}")
        return d

    def run(self, run: list[Field], values: dict[str, str]) -> str | None:
        """Read a run of fixed-width fields (the last may be a length prefix); returns the last variable."""
        if not run:
            return None
        names = self.unpack([_prefix_code(f) for f in run])
        for name, f in zip(names, run):
            if f.type in FIXED_FORMATS:
                values[f.name] = name
                if f.type == "uuid":
                    self.src.emit(f"{name} = UUID(bytes={name})")
        return names[-1]

    def unpack(self, codes: list[str]) -> list[str]:
        src = self.src
        fmt = ">" + "".join(codes)
        names = [src.var("_f") for _ in codes]
        src.emit(f"{', '.join(names)}, = {src.unpacker(fmt)}(buf, pos)")
        src.emit(f"pos += {struct.calcsize(fmt)}")
        return names

    def value(self, f: Field, length: str | None = None) -> str:
        if f.type in FIXED_FORMATS:
            return self.run([f], {})
        if f.type in VARIABLE_TYPES:
            return self.variable(f.type, f.nullable_at(self.version), length)
        if f.type == "{}":
            if not f.nullable_at(self.version):
                return self.struct(f.fields)
            marker, d = self.unpack(["b"])[0], self.src.var("_s")
            with self.src.unless_null(True, f"{marker} < 0", f"{d} = None"):
                self.src.emit(f"{d} = {self.struct(f.fields)}")
            return d
        return self.array(f, length)

    def _uuid(self) -> str:
        name = self.unpack(["16s"])[0]
        self.src.emit(f"{name} = UUID(bytes={name})")
        return name

    def length(self, code: str, nullable: bool, min_item_size: int | None, n: str | None) -> str:
        """Emit (if ``n`` is None) the read of a length or count, and its bounds check; returns its variable."""
        src = self.src
        if self.flexible:
            n = src.var("_n")
            if min_item_size is None:
                src.emit(f"{n}, pos = compact_length(buf, pos, {nullable})")
            else:
                src.emit(f"{n}, pos = compact_array_length(buf, pos, {nullable}, {min_item_size})")
            return n
        if n is None:
            n = self.unpack([code])[0]
        if min_item_size is None:
            with src.block(f"if {n} < 0 or {n} > end - pos:"):
                src.emit(f"{n} = check_length({n}, pos, end, {nullable})")
        else:
            size = f"{n} * {min_item_size}" if min_item_size > 1 else n
            with src.block(f"if {n} < 0 or {size} > end - pos:"):
                src.emit(f"{n} = check_count({n}, pos, end, {nullable}, {min_item_size})")
        return n

    def variable(self, t: str, nullable: bool, n: str | None = None) -> str:
        src = self.src
        n = self.length("h" if t == "string" else "i", nullable, None, n)
        out = src.var("_v")
        convert = {"string": "str(buf[pos:pos + {n}], 'utf-8')", "bytes": "bytes(buf[pos:pos + {n}])",
                   "records": "buf[pos:pos + {n}]"}[t].format(n=n)
        with src.unless_null(nullable, f"{n} < 0", f"{out} = None"):
            src.emit(f"{out} = {convert}")
            src.emit(f"pos += {n}")
        return out

    def array(self, f: Field, n: str | None = None) -> str:
        src = self.src
        nullable = f.nullable_at(self.version)
        n = self.length("i", nullable, min_size(f, self.version, self.flexible), n)
        out = src.var("_a")
        el = f.element
        with src.unless_null(nullable, f"{n} < 0", f"{out} = None"):
            if el in FIXED_FORMATS and el != "uuid":
                code = FIXED_FORMATS[el]
                src.emit(f"{out} = list(unpack_from('>%d{code}' % {n}, buf, pos))")
                src.emit(f"pos += {struct.calcsize(code)} * {n}")
            else:
                src.emit(f"{out} = []")
                with src.block(f"for _ in range({n}):"):
                    if el == "[]":
                        item = self.struct(f.fields)
                    elif el == "uuid":
                        item = self._uuid()
                    else:
                        item = self.variable(el, False)
                    src.emit(f"{out}.append({item})")
        return out

    def tagged(self, tagged: list[Field], values: dict[str, str]):
        src = self.src
        for f in tagged:
            values[f.name] = src.var("_t")
            src.emit(f"{values[f.name]} = {src.default(f)}")
        count, tag, start, end = src.var("_n"), src.var("_tag"), src.var("_s"), src.var("_e")
        src.emit(f"{count}, pos = read_uvarint(buf, pos)")
        with src.block(f"for _ in range({count}):"):
            src.emit(f"{tag}, {start}, {end} = read_tag(buf, pos)")
            for i, f in enumerate(tagged):
                with src.block(f"{'elif' if i else 'if'} {tag} == {f.tag}:"):
                    src.emit(f"pos = {start}")
                    src.emit(f"{values[f.name]} = {self.value(f)}")
                    with src.block(f"if pos != {end}:"):
                        src.emit(f"raise InvalidRequestError('tagged field {f.name} does not match its size')")
            src.emit(f"pos = {end}")


class _Encoder:
    """Emits encoding code. Consecutive fixed-width values, and in non-flexible versions the length prefix of
    the variable-size field after them, are written with one ``struct`` pack."""

    def __init__(self, src: _Source, version: int, flexible: bool):
        self.src, self.version, self.flexible = src, version, flexible

    def get(self, f: Field, mapping: str) -> str:
        default = f.default_value()
        if default is None:
            return f"{mapping}.get({f.name!r})"
        if isinstance(default, (bool, int, float, str, bytes)):
            return f"{mapping}.get({f.name!r}, {default!r})"
        return f"{mapping}.get({f.name!r}, {self.src.const(('encode-default', id(f)), default)})"

    def struct(self, fields, mapping: str, out: str):
        """Emit code appending the encoding of the struct held in variable ``mapping`` to list ``out``."""
        src = self.src
        wire_fields, tagged = _wire_and_tagged(fields, self.version)
        codes: list[str] = []
        args: list[str] = []
        for f in wire_fields:
            if f.type in FIXED_FORMATS:
                codes.append(FIXED_FORMATS[f.type])
                args.append(self.get(f, mapping) + (".bytes" if f.type == "uuid" else ""))
                continue
            v = src.var("_v")
            src.emit(f"{v} = {self.get(f, mapping)}")
            if self.flexible or f.type == "{}":
                self.pack(codes, args, out)
                self.value(f, v, out)
            else:
                payload = self.prefixed(f, v, out)
                codes.append(_prefix_code(f))
                args.append(payload.prefix)
                self.pack(codes, args, out)
                payload.emit()
            codes, args = [], []
        self.pack(codes, args, out)
        if self.flexible:
            self.tagged(tagged, mapping, out)

    def pack(self, codes: list[str], args: list[str], out: str):
        if codes:
            self.src.emit(f"{out}.append({self.src.packer('>' + ''.join(codes))}({', '.join(args)}))")

    def prefixed(self, f: Field, v: str, out: str) -> "_Payload":
        """Non-flexible variable-size field: emit what its length needs; return the prefix and payload code."""
        src = self.src
        nullable = f.nullable_at(self.version)
        guard = f"if {v} is not None:" if nullable else None
        if f.type == "string":
            b = src.var("_b")
            src.emit(f"{b} = None if {v} is None else {v}.encode()" if nullable else f"{b} = {v}.encode()")
            return _Payload(src, f"-1 if {b} is None else len({b})" if nullable else f"len({b})", guard,
                            lambda: src.emit(f"{out}.append({b})"))
        if f.type == "bytes":
            return _Payload(src, f"-1 if {v} is None else len({v})" if nullable else f"len({v})", guard,
                            lambda: src.emit(f"{out}.append({v})"))
        if f.type == "records":
            n, part, external = src.var("_n"), src.var("_p"), src.var("_x")
            with src.unless_null(nullable, f"{v} is None", f"{n} = -1"):
                src.emit(f"{n}, {part}, {external} = records_part({v})")
                src.emit(f"ext = ext or {external}")
            return _Payload(src, n, guard, lambda: src.emit(f"{out}.append({part})"))
        el = f.element
        if el in FIXED_FORMATS and el != "uuid":
            body = lambda: src.emit(f"{out}.append(fixed_array({FIXED_FORMATS[el]!r}, {v}))")
        else:
            body = lambda: self.elements(f, v, out)
        return _Payload(src, f"-1 if {v} is None else len({v})" if nullable else f"len({v})", guard, body)

    def value(self, f: Field, v: str, out: str):
        """Emit the encoding of variable ``v`` as field ``f``, with flexible (compact) length prefixes."""
        src = self.src
        nullable = f.nullable_at(self.version)
        if f.type in FIXED_FORMATS:
            arg = f"{v}.bytes" if f.type == "uuid" else v
            src.emit(f"{out}.append({src.packer('>' + FIXED_FORMATS[f.type])}({arg}))")
        elif f.type == "{}":
            with src.unless_null(nullable, f"{v} is None", f"{out}.append(b'\\xff')"):
                if nullable:
                    src.emit(f"{out}.append(b'\\x01')")
                self.struct(f.fields, v, out)
        elif f.type in VARIABLE_TYPES:
            self.compact(f.type, nullable, v, out)
        else:
            with self._null(nullable, v, out):
                src.emit(f"{out}.append(uvarint(len({v}) + 1))")
                el = f.element
                if el in FIXED_FORMATS and el != "uuid":
                    src.emit(f"{out}.append(fixed_array({FIXED_FORMATS[el]!r}, {v}))")
                else:
                    self.elements(f, v, out)

    def _null(self, nullable: bool, v: str, out: str):
        """Flexible null: emit ``if v is None: <0 length>``; return the context for the non-null code."""
        if not nullable:
            return _nothing()
        with self.src.block(f"if {v} is None:"):
            self.src.emit(f"{out}.append(b'\\x00')")
        return self.src.block("else:")

    def compact(self, t: str, nullable: bool, v: str, out: str):
        src = self.src
        with self._null(nullable, v, out):
            if t == "string":
                b = src.var("_b")
                src.emit(f"{b} = {v}.encode()")
                src.emit(f"{out}.append(uvarint(len({b}) + 1))")
                src.emit(f"{out}.append({b})")
            elif t == "bytes":
                src.emit(f"{out}.append(uvarint(len({v}) + 1))")
                src.emit(f"{out}.append({v})")
            else:
                n, part, external = src.var("_n"), src.var("_p"), src.var("_x")
                src.emit(f"{n}, {part}, {external} = records_part({v})")
                src.emit(f"{out}.append(uvarint({n} + 1))")
                src.emit(f"{out}.append({part})")
                src.emit(f"ext = ext or {external}")

    def elements(self, f: Field, v: str, out: str):
        """Emit the loop over the elements of an array (its count already written)."""
        src = self.src
        e = src.var("_e")
        el = f.element
        with src.block(f"for {e} in {v}:"):
            if el == "[]":
                self.struct(f.fields, e, out)
            elif el == "uuid":
                src.emit(f"{out}.append({e}.bytes)")
            elif self.flexible:
                self.compact(el, False, e, out)
            elif el == "string":
                b = src.var("_b")
                src.emit(f"{b} = {e}.encode()")
                src.emit(f"{out}.append(pack16(len({b})))")
                src.emit(f"{out}.append({b})")
            else:
                src.emit(f"{out}.append(pack32(len({e})))")
                src.emit(f"{out}.append({e})")

    def tagged(self, tagged: list[Field], mapping: str, out: str):
        src = self.src
        if not tagged:
            src.emit(out + ".append(b'\\x00')")
            return
        tags = src.var("_tags")
        src.emit(f"{tags} = []")
        for f in tagged:
            v, parts = src.var("_v"), src.var("_o")
            src.emit(f"{v} = {self.get(f, mapping)}")
            with src.block(f"if {v} != {src.const(('tag-default', id(f)), f.default_value())}:"):
                src.emit(f"{parts} = []")
                self.value(f, v, parts)
                src.emit(f"{tags}.append(tagged_field({f.tag}, {parts}))")
        src.emit(f"{out}.append(uvarint(len({tags})))")
        src.emit(f"{out}.extend({tags})")


class _Payload:
    """The length-prefix expression of a non-flexible variable-size field and the code writing its data."""

    def __init__(self, src: _Source, prefix: str, guard: str | None, body: Callable[[], None]):
        self.src, self.prefix, self.guard, self.body = src, prefix, guard, body

    def emit(self):
        with self.src.block(self.guard) if self.guard else _nothing():
            self.body()


@contextmanager
def _nothing():
    yield


def compile_message(fields: tuple[Field, ...], version: int, flexible: bool, name: str) -> Codec:
    """Generate and compile the codec of ``fields`` at ``version``; ``name`` labels the generated source."""
    dec = _Source()
    dec.emit("end = len(buf)")
    body = _Decoder(dec, version, flexible).struct(fields)
    dec.emit(f"return {body}, pos")
    decode = dec.build("decode(buf, pos)", f"<seglog.protocol {name} v{version} decode>")

    enc = _Source()
    enc.emit("ext = False")
    _Encoder(enc, version, flexible).struct(fields, "body", "out")
    enc.emit("return ext")
    encode = enc.build("encode(body, out)", f"<seglog.protocol {name} v{version} encode>")
    return Codec(decode, encode, flexible)

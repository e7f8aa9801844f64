"""A user-specified schema as a projection: ``spark.read.format("seglog").schema("value binary")``.

pyspark's Python Data Source API has no column pruning: every column a reader yields is sent from the Python
worker to the JVM as Arrow even when the query uses one of them, and that transfer dominates a scan. Spark
hands a user-specified schema to ``reader(schema)`` / ``streamReader(schema)``, so seglog accepts a subset
of its columns there and builds only those (Spark's own Kafka source refuses a user schema).

Rules (:func:`project`): every field is one of the source's columns (spark_schema(True)), named
case-insensitively, with exactly its type, at most once, in any order; a field may be declared NOT NULL only
where the source column is non-nullable (none is: every column may be null in Spark's Kafka schema).
Naming ``headers`` means includeHeaders=true. Anything else, or an empty schema, raises SourceOptionError
listing the columns and their types.
"""

from __future__ import annotations

from pyspark.sql.types import StructType

from .arrow_reader import spark_schema
from .errors import SourceOptionError

__all__ = ["project"]


def _available() -> str:
    return ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in spark_schema(True).fields)


def project(schema: StructType) -> tuple[str, ...]:
    """The names of `schema`'s fields (as spelled there, in its order) after checking them against the source's
    columns (see the module docstring); SourceOptionError if a field does not fit."""
    if not schema.fields:
        raise SourceOptionError(f"the schema given to the seglog source names no column; name some of: "
                                f"{_available()}")
    source = {f.name.lower(): f for f in spark_schema(True).fields}
    seen: set[str] = set()
    for f in schema.fields:
        key = f.name.lower()
        col = source.get(key)
        if col is None:
            raise SourceOptionError(f"the schema names column {f.name!r}, which the seglog source does not have; "
                                    f"its columns are: {_available()}")
        if key in seen:
            raise SourceOptionError(f"the schema names column {col.name!r} twice")
        seen.add(key)
        if f.dataType != col.dataType:
            raise SourceOptionError(f"column {col.name!r} has type {col.dataType.simpleString()}, the schema "
                                    f"declares {f.dataType.simpleString()} (nullability included); the columns "
                                    f"are: {_available()}")
        if col.nullable and not f.nullable:
            raise SourceOptionError(f"column {col.name!r} may be null: declare it without NOT NULL")
    return tuple(f.name for f in schema.fields)

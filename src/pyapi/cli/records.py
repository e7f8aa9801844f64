"""`seglog delete-records`: delete the records of partitions up to an offset, shaped like
kafka-delete-records.sh (the same JSON file, the same output lines).

    seglog delete-records --bootstrap-server localhost:9092 --offset-json-file offsets.json

where offsets.json is ``{"partitions": [{"topic": "pet", "partition": 0, "offset": 3}], "version": 1}`` (offset
-1: every record below the high watermark).
"""

from __future__ import annotations

from ..offsets_format import TopicPartition
from .common import add_target, json_partitions, out
from .connect import connect


def register(sub) -> None:
    p = sub.add_parser("delete-records", help="delete records up to an offset (kafka-delete-records.sh)",
                       description="Raise partitions' log start offsets, like kafka-delete-records.sh: the records "
                                   "below each offset are gone for consumers; their segments go with retention.")
    add_target(p)
    p.add_argument("--offset-json-file", required=True, metavar="FILE",
                   help='{"partitions": [{"topic": "t", "partition": 0, "offset": 3}], "version": 1}; '
                        "offset -1 deletes up to the high watermark")
    p.set_defaults(func=cmd_delete_records)


def read_offsets(path: str) -> dict[TopicPartition, int]:
    """The partitions and offsets of a kafka-delete-records.sh JSON file; CliError for anything else."""
    return {TopicPartition(t, p): offset for t, p, offset in json_partitions(path, ("partition", "offset"))}


def cmd_delete_records(args) -> int:
    offsets = read_offsets(args.offset_json_file)
    with connect(args) as admin:
        out("Executing records delete operation")
        results = admin.delete_records(offsets)
        out("Records delete operation completed:")
        for tp in offsets:                     # as Kafka's tool: a partition's error is a line, not the exit status
            result = results[tp]
            if isinstance(result, int):
                out(f"partition: {tp.topic}-{tp.partition}\tlow_watermark: {result}")
            else:
                out(f"partition: {tp.topic}-{tp.partition}\terror: {type(result).__name__}: {result}")
    return 0

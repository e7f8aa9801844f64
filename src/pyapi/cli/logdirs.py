"""`seglog log-dirs`: the log directories of brokers and the partitions in them, shaped like kafka-log-dirs.sh
(the same options and JSON line).

    seglog log-dirs --bootstrap-server localhost:9092 --describe --topic-list pet,orders
"""

from __future__ import annotations

import json

from .common import UsageError, add_target, out
from .connect import connect


def register(sub) -> None:
    p = sub.add_parser("log-dirs", help="describe brokers' log directories (kafka-log-dirs.sh)",
                       description="Describe the log directories of brokers, like kafka-log-dirs.sh: one JSON line "
                                   "with each partition's size and offset lag.")
    add_target(p)
    p.add_argument("--describe", action="store_true", required=True, help="describe the log directories")
    p.add_argument("--topic-list", metavar="T1,T2", default="",
                   help="only these topics (comma-separated; default all)")
    p.add_argument("--broker-list", metavar="B1,B2", default="",
                   help="only these brokers (comma-separated ids; default all)")
    p.set_defaults(func=cmd_log_dirs)


def cmd_log_dirs(args) -> int:
    topics = {t.strip() for t in args.topic_list.split(",") if t.strip()}
    try:
        brokers = [int(b) for b in args.broker_list.split(",") if b.strip()] or None
    except ValueError:
        raise UsageError(f"--broker-list must be comma-separated broker ids, not {args.broker_list!r}") from None
    with connect(args) as admin:
        out("Querying brokers for log directories information")
        found = admin.log_dirs(brokers)
        out(f"Received log directory information from brokers {','.join(map(str, sorted(found)))}")
        doc = {"version": 1, "brokers": [
            {"broker": b, "logDirs": [
                {"logDir": d["logDir"], "error": d["error"],
                 "partitions": [{"partition": f"{p['topic']}-{p['partition']}", "size": p["size"],
                                 "offsetLag": p["offsetLag"], "isFuture": p["isFuture"]}
                                for p in d["partitions"] if not topics or p["topic"] in topics]}
                for d in found[b]]}
            for b in sorted(found)]}
        out(json.dumps(doc, separators=(",", ":")))
    return 0

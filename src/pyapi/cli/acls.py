"""`seglog acls`: add, remove and list ACLs through a broker, shaped like kafka-acls.sh (its options, prompts and
output).

    seglog acls --bootstrap-server localhost:9092 --add --allow-principal User:alice --operation Read \\
                --topic orders --group billing
    seglog acls --bootstrap-server localhost:9092 --list --topic orders
    seglog acls --bootstrap-server localhost:9092 --remove --force --allow-principal User:alice --operation Read \\
                --topic orders

Each resource (--topic, --group, --transactional-id, repeatable, and --cluster) with --resource-pattern-type
(LITERAL by default; PREFIXED; for --list and --remove also ANY or MATCH) gets one ACL per principal, host and
--operation (All by default). --add prints ``Adding ACLs for resource `ResourcePattern(...)`:`` and its
entries, --remove asks before deleting unless --force (without a principal it deletes every ACL of the
resource), and both end with the resources' current ACLs as --list prints them. The requests are
CreateAcls / DescribeAcls / DeleteAcls: the broker's principal for this connection (User:ANONYMOUS on a
PLAINTEXT listener; the SASL user or certificate's principal of --command-config's settings on a secured one)
needs Alter on the cluster to change ACLs, Describe to list them.
"""

from __future__ import annotations

import sys

from ..errors import SeglogError
from ..security.acls import (CLUSTER_NAME, SUPPORTED_OPERATIONS, WILDCARD, AccessControlEntry, AclBinding,
                             AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourcePattern,
                             ResourceType, parse_principal)
from .common import CliError, UsageError, add_command_config, out
from .connect import connect

__all__ = ["register"]


def register(sub) -> None:
    p = sub.add_parser("acls", help="add, remove and list ACLs (kafka-acls.sh)",
                       description="Add, remove and list the ACLs a broker's authorizer enforces, like "
                                   "kafka-acls.sh.")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="a broker")
    add_command_config(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs (of the resources named, else all)")
    p.add_argument("--topic", action="append", default=[], help="a topic (* for every topic); repeatable")
    p.add_argument("--group", action="append", default=[], help="a consumer group (* for every group); repeatable")
    p.add_argument("--transactional-id", action="append", default=[], metavar="ID",
                   help="a transactional id (* for every one); repeatable")
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument("--resource-pattern-type", default="LITERAL", metavar="TYPE",
                   help="LITERAL (default) or PREFIXED; for --list and --remove also ANY or MATCH")
    p.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL",
                   help="Type:name, e.g. User:alice (User:* is every user); repeatable")
    p.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL",
                   help="Type:name: denied, which wins over any allow; repeatable")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                   help="host the --allow-principal ACLs apply to (default *)")
    p.add_argument("--deny-host", action="append", default=[], metavar="HOST",
                   help="host the --deny-principal ACLs apply to (default *)")
    p.add_argument("--operation", action="append", default=[], metavar="OPERATION",
                   help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                        "AlterConfigs, IdempotentWrite or All (default); repeatable")
    p.add_argument("--principal", action="append", default=[],
                   help="--list: only the ACLs of this principal; repeatable")
    p.add_argument("--force", action="store_true", help="--remove: do not ask for confirmation")
    p.set_defaults(func=cmd_acls)


def _pattern_type(text: str, adding: bool) -> PatternType:
    try:
        pattern_type = PatternType.parse(text)
    except ValueError:
        pattern_type = PatternType.UNKNOWN
    if pattern_type is PatternType.UNKNOWN:
        raise UsageError(f"--resource-pattern-type: {text!r} is not one of LITERAL, PREFIXED, ANY, MATCH")
    if adding and pattern_type in (PatternType.ANY, PatternType.MATCH):
        raise UsageError(f"A '--resource-pattern-type' value of '{pattern_type.kafka_name}' is not valid when "
                         f"adding acls.")
    return pattern_type


def _resources(args, pattern_type: PatternType) -> list[ResourcePattern]:
    """The resource patterns (or pattern filters) the arguments name, in kafka-acls.sh's order; --cluster only
    with a LITERAL pattern (the cluster has one name)."""
    found = [ResourcePattern(ResourceType.TOPIC, t.strip(), pattern_type) for t in args.topic]
    if args.cluster and pattern_type is PatternType.LITERAL:
        found.append(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, pattern_type))
    found += [ResourcePattern(ResourceType.GROUP, g.strip(), pattern_type) for g in args.group]
    found += [ResourcePattern(ResourceType.TRANSACTIONAL_ID, t, pattern_type) for t in args.transactional_id]
    return list(dict.fromkeys(found))


def _principals(texts: list[str]) -> list[str]:
    try:
        return list(dict.fromkeys(parse_principal(t.strip()) for t in texts))
    except SeglogError as e:
        raise UsageError(str(e)) from None


def _entries(args) -> list[AccessControlEntry]:
    """One entry per principal, host and operation of the arguments (hosts default to * once a principal is
    given); UsageError for an operation the resource types named do not support."""
    try:
        operations = list(dict.fromkeys(AclOperation.parse(o) for o in args.operation or ["All"]))
    except ValueError as e:
        raise UsageError(str(e)) from None
    entries = []
    for permission, principals, hosts in ((AclPermissionType.ALLOW, args.allow_principal, args.allow_host),
                                          (AclPermissionType.DENY, args.deny_principal, args.deny_host)):
        hosts = list(dict.fromkeys(h.strip() for h in hosts)) or [WILDCARD]
        entries += [AccessControlEntry(p, h, o, permission)
                    for p in _principals(principals) for o in operations for h in hosts]
    return entries


def _check_operations(resources: list[ResourcePattern], entries: list[AccessControlEntry]) -> None:
    for r in resources:
        valid = SUPPORTED_OPERATIONS[r.resource_type] | {AclOperation.ALL}
        if any(e.operation not in valid for e in entries):
            raise UsageError(f"ResourceType {r.resource_type.kafka_name} only supports operations "
                             f"{', '.join(o.pascal for o in sorted(valid))}")


def _entry_lines(entries) -> str:
    return "\n".join("\t" + str(e) for e in entries)


def _print_acls(bindings: list[AclBinding]) -> None:
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in bindings:
        by_pattern.setdefault(b.pattern, []).append(b.entry)
    for pattern, entries in by_pattern.items():
        out(f"Current ACLs for resource `{pattern}`: \n {_entry_lines(sorted(set(entries)))} \n")


def _list(admin, resources: list[ResourcePattern], principals: list[str]) -> None:
    """kafka-acls.sh --list: the ACLs of each resource filter (all ACLs without one), per --principal if any."""
    if not resources:
        bindings = admin.describe_acls(AclBindingFilter())
    else:
        bindings = [b for r in resources
                    for b in admin.describe_acls(AclBindingFilter(r.resource_type, r.name, r.pattern_type))]
    if not principals:
        _print_acls(bindings)
        return
    for principal in principals:
        out(f"ACLs for principal `{principal}`")
        _print_acls([b for b in bindings if b.entry.principal == principal])


def _confirm(args, question: str) -> bool:
    if args.force:
        return True
    out(question)
    sys.stdout.flush()
    return sys.stdin.readline().strip().lower() == "y"


def cmd_acls(args) -> int:
    if args.list:
        for name in ("allow_principal", "deny_principal", "allow_host", "deny_host"):
            if getattr(args, name):
                raise UsageError(f'Option "[list]" can\'t be used with option "[{name.replace("_", "-")}]"')
    elif args.principal:
        raise UsageError(f'Option "[principal]" can\'t be used with option "[{"add" if args.add else "remove"}]"')
    pattern_type = _pattern_type(args.resource_pattern_type, args.add)
    resources = _resources(args, pattern_type)
    entries = [] if args.list else _entries(args)
    if not args.list:
        if not resources:
            raise UsageError("You must provide at least one resource: --topic <topic> or --cluster or "
                             "--group <group> or --transactional-id <id>")
        _check_operations(resources, entries)
    if args.add and not entries:
        raise UsageError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    principals = _principals(args.principal)
    with connect(args) as admin:
        try:
            if args.add:
                for r in resources:
                    out(f"Adding ACLs for resource `{r}`: \n {_entry_lines(entries)} \n")
                    admin.create_acls([AclBinding(r, e) for e in entries])
            elif args.remove:
                for r in resources:
                    if not entries:
                        question = f"Are you sure you want to delete all ACLs for resource filter `{r}`? (y/n)"
                        filters = [AclBindingFilter(r.resource_type, r.name, r.pattern_type)]
                    else:
                        question = (f"Are you sure you want to remove ACLs: \n {_entry_lines(entries)} \n from "
                                    f"resource filter `{r}`? (y/n)")
                        filters = [AclBindingFilter(r.resource_type, r.name, r.pattern_type, e.principal, e.host,
                                                    e.operation, e.permission) for e in entries]
                    if _confirm(args, question):
                        admin.delete_acls(filters)
            _list(admin, resources, principals)
        except SeglogError as e:
            raise CliError(f"Error while executing ACL command: {e}") from None
    return 0

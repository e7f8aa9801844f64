"""`seglog configs`: describe and alter client quotas through a broker, shaped like kafka-configs.sh.

    seglog configs --bootstrap-server localhost:9092 --alter --entity-type clients --entity-name c1 \\
                   --add-config 'producer_byte_rate=1024,consumer_byte_rate=2048'
    seglog configs --bootstrap-server localhost:9092 --alter --entity-type users --entity-default \\
                   --add-config request_percentage=50
    seglog configs --bootstrap-server localhost:9092 --alter --entity-type users --entity-name alice \\
                   --entity-type clients --entity-name c1 --delete-config producer_byte_rate
    seglog configs --bootstrap-server localhost:9092 --describe --entity-type clients

Each --entity-type (users, clients; both for a user's client id) takes the --entity-name or --entity-default
that follows in order; --describe without a name shows every entity of the type (without the other type
unless it is named too), as kafka-configs.sh. --alter prints "Completed updating config for client c1.",
--describe one line per entity: "Quota configs for client-id 'c1' are producer_byte_rate=1024.0". The requests
are AlterClientQuotas / DescribeClientQuotas: the principal of this connection (User:ANONYMOUS on a PLAINTEXT
listener) needs AlterConfigs / DescribeConfigs on the cluster. Topic configs: `seglog topics --alter --config`.
"""

from __future__ import annotations

import argparse

from ..errors import SeglogError
from ..quotas.entities import DEFAULT, QuotaEntity
from ..quotas.manager import MATCH_ANY, MATCH_DEFAULT, MATCH_EXACT
from .common import CliError, UsageError, add_command_config, out, split_config_list
from .connect import connect

__all__ = ["register"]

ENTITY_TYPES = {"users": "user", "clients": "client-id"}       # kafka-configs.sh's names -> the wire's


class _Entity(argparse.Action):
    """--entity-name NAME / --entity-default, appended in order to ``entities`` (DEFAULT for the default)."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.entities = [*(namespace.entities or []), values if isinstance(values, str) else DEFAULT]


def register(sub) -> None:
    p = sub.add_parser("configs", help="describe and alter client quotas (kafka-configs.sh)",
                       description="Describe and alter the client quotas of users and client ids, like "
                                   "kafka-configs.sh.")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="a broker")
    add_command_config(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="list the quotas of the entities named")
    action.add_argument("--alter", action="store_true", help="add or delete quotas of the entity named")
    p.add_argument("--entity-type", action="append", default=[], choices=sorted(ENTITY_TYPES),
                   help="users or clients; both (users first) for a user's client id")
    p.add_argument("--entity-name", action=_Entity, dest="entities", metavar="NAME",
                   help="the name of the --entity-type before it")
    p.add_argument("--entity-default", action=_Entity, dest="entities", nargs=0,
                   help="the default entity of the --entity-type before it")
    p.add_argument("--add-config", metavar="K=V,...",
                   help="quotas to set: producer_byte_rate, consumer_byte_rate, request_percentage")
    p.add_argument("--delete-config", metavar="K,...", help="quotas to remove")
    p.set_defaults(func=cmd_configs, entities=[])


def _entity(types: list[str], names: list[str]) -> QuotaEntity:
    found = dict(zip((ENTITY_TYPES[t] for t in types), names))
    return QuotaEntity(found.get("user"), found.get("client-id"))


def _changes(args) -> dict[str, float | None]:
    changes: dict[str, float | None] = {}
    for item in split_config_list(args.add_config or ""):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"Invalid entity config: all configs to be added must be in the format \"key=val\" "
                             f"({item!r})")
        try:
            changes[key.strip()] = float(value)
        except ValueError:
            raise UsageError(f"Cannot parse quota configuration value for {key.strip()}: {value}") from None
    for key in (k.strip() for k in (args.delete_config or "").split(",")):
        if key:
            changes[key] = None
    return changes


def _describe_line(entity: QuotaEntity, values: dict[str, float]) -> str:
    parts = [f"the default {label}" if name == DEFAULT else f"{label} '{name}'"
             for label, name in (("user-principal", entity.user), ("client-id", entity.client_id))
             if name is not None]
    return f"Quota configs for {', '.join(parts)} are {', '.join(f'{k}={v}' for k, v in values.items())}"


def cmd_configs(args) -> int:
    types, names = args.entity_type, args.entities
    if not types:
        raise UsageError("--entity-type must be specified (users or clients)")
    if len(set(types)) != len(types):
        raise UsageError(f"Duplicate entity type(s) specified: {', '.join(types)}")
    if len(names) > len(types):
        raise UsageError("--entity-name or --entity-default must follow the --entity-type it names")
    if len(types) == 2 and types[0] != "users":
        raise UsageError("--entity-type users must come before --entity-type clients")
    if args.alter:
        if len(names) != len(types):
            raise UsageError("--entity-name or --entity-default must be specified with each --entity-type for "
                             "--alter")
        changes = _changes(args)
        if not changes:
            raise UsageError("At least one of --add-config or --delete-config must be specified with --alter")
    elif args.add_config or args.delete_config:
        raise UsageError("--add-config and --delete-config go with --alter")
    with connect(args) as admin:
        try:
            if args.alter:
                admin.alter_client_quotas(_entity(types, names), changes)
                if names[0] == DEFAULT:
                    out(f"Completed updating default config for {types[0]} in the cluster.")
                else:
                    out(f"Completed updating config for {types[0][:-1]} {names[0]}.")
                return 0
            components = []
            for i, kind in enumerate(types):
                name = names[i] if i < len(names) else None
                match_type = MATCH_ANY if name is None else MATCH_DEFAULT if name == DEFAULT else MATCH_EXACT
                components.append((ENTITY_TYPES[kind], match_type, name if match_type == MATCH_EXACT else None))
            for entity, values in admin.describe_client_quotas(components, strict=True):
                out(_describe_line(entity, values))
        except SeglogError as e:
            raise CliError(f"Error while executing config command: {e}") from None
    return 0

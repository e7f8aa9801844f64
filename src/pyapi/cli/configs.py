"""`seglog configs`: describe and alter client quotas, SCRAM credentials and dynamic broker configs, shaped like
kafka-configs.sh.

    seglog configs --bootstrap-server localhost:9092 --alter --entity-type clients --entity-name c1 \\
                   --add-config 'producer_byte_rate=1024,consumer_byte_rate=2048'
    seglog configs --bootstrap-server localhost:9092 --alter --entity-type users --entity-default \\
                   --add-config request_percentage=50
    seglog configs --bootstrap-server localhost:9092 --alter --entity-type users --entity-name alice \\
                   --entity-type clients --entity-name c1 --delete-config producer_byte_rate
    seglog configs --bootstrap-server localhost:9092 --describe --entity-type clients
    seglog configs --bootstrap-server localhost:9092 --alter --entity-type users --entity-name alice \\
                   --add-config 'SCRAM-SHA-512=[password=secret],SCRAM-SHA-256=[iterations=8192,password=pw]'
    seglog configs --zookeeper localhost:2181/seglog --alter --entity-type users --entity-name broker \\
                   --add-config 'SCRAM-SHA-512=[password=broker-secret]'

Each --entity-type (users, clients; both for a user's client id) takes the --entity-name or --entity-default
that follows in order; --describe without a name shows every entity of the type (without the other type
unless it is named too), as kafka-configs.sh. --alter prints "Completed updating config for client c1.",
--describe one line per entity: "Quota configs for client-id 'c1' are producer_byte_rate=1024.0" and, for
users, "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=4096".

A SCRAM-SHA-256/512 config (a named user only; iterations default to 4096) is salted here: the password never
leaves this process, AlterUserScramCredentials carries the salt and the salted password, as kafka-configs.sh
sends them. One --add-config may mix quotas and credentials; --delete-config SCRAM-SHA-512 removes one.
The requests are AlterClientQuotas / DescribeClientQuotas / AlterUserScramCredentials /
DescribeUserScramCredentials: the principal of this connection (User:ANONYMOUS on a PLAINTEXT listener) needs
AlterConfigs / DescribeConfigs (quotas), Alter / Describe (credentials) on the cluster.

Dynamic broker configs (kafka-configs.sh --entity-type brokers): --entity-name N for broker N, --entity-default
for every broker's default; --alter sets (--add-config, IncrementalAlterConfigs SET) and removes (--delete-config,
each must be set now, as kafka-configs.sh checks) and prints "Completed updating config for broker 0." or
"Completed updating default config for brokers in the cluster."; --describe prints, per broker (every live one and
the default when no name is given), "Dynamic configs for broker 0 are:" then one line per config set at that
level (all configs with --all: "All configs for broker 0 are:"), "  name=value sensitive=false
synonyms={DYNAMIC_BROKER_CONFIG:name=value, ...}". A value holding commas goes in brackets:
``--add-config 'advertised.listeners=[PLAINTEXT://h:9092,SSL://h:9093]'``.

    seglog configs --bootstrap-server localhost:9092 --alter --entity-type brokers --entity-default \
                   --add-config log.retention.ms=3600000,min.insync.replicas=2
    seglog configs --bootstrap-server localhost:9092 --describe --entity-type brokers --entity-name 0 --all

--zookeeper HOST:PORT[/chroot] writes and reads users' SCRAM credentials in the cluster's ZooKeeper directly,
no broker needed (kafka-configs.sh --zookeeper): how the inter-broker user's credential is made before the
brokers that authenticate with it start. Running brokers see the change at once (its /config/changes
notification). Topic configs: `seglog topics --alter --config`.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field

from ..dynamic_config import SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT
from ..errors import ResourceNotFoundError, SeglogError
from ..quotas.entities import DEFAULT, QuotaEntity
from ..quotas.manager import MATCH_ANY, MATCH_DEFAULT, MATCH_EXACT
from ..security.scram import DEFAULT_ITERATIONS, HASHES, check_iterations, credential_from_salted, salted_password
from .common import CliError, UsageError, add_command_config, out, split_config_list
from .connect import connect

__all__ = ["register"]

ENTITY_TYPES = {"users": "user", "clients": "client-id"}       # kafka-configs.sh's names -> the wire's
BROKERS = "brokers"
SOURCE_NAMES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
                4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG"}
"""Kafka's ConfigEntry.ConfigSource names of DescribeConfigs' config_source ids."""
SALT_BYTES = 32


class _Entity(argparse.Action):
    """--entity-name NAME / --entity-default, appended in order to ``entities`` (DEFAULT for the default)."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.entities = [*(namespace.entities or []), values if isinstance(values, str) else DEFAULT]


def register(sub) -> None:
    p = sub.add_parser("configs", help="describe and alter client quotas, SCRAM credentials and dynamic broker "
                                       "configs (kafka-configs.sh)",
                       description="Describe and alter the client quotas of users and client ids, the SCRAM "
                                   "credentials of users and the dynamic configs of brokers, like kafka-configs.sh.")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--bootstrap-server", metavar="HOST:PORT", help="a broker")
    target.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]",
                        help="the cluster's ZooKeeper: SCRAM credentials of users only, no broker needed")
    add_command_config(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="list the configs of the entities named")
    action.add_argument("--alter", action="store_true", help="add or delete configs of the entity named")
    p.add_argument("--entity-type", action="append", default=[], choices=sorted([*ENTITY_TYPES, BROKERS]),
                   help="users or clients; both (users first) for a user's client id; or brokers")
    p.add_argument("--entity-name", action=_Entity, dest="entities", metavar="NAME",
                   help="the name of the --entity-type before it")
    p.add_argument("--entity-default", action=_Entity, dest="entities", nargs=0,
                   help="the default entity of the --entity-type before it")
    p.add_argument("--add-config", metavar="K=V,...",
                   help="configs to set: producer_byte_rate, consumer_byte_rate, request_percentage, "
                        "controller_mutation_rate; for a user also SCRAM-SHA-256=[iterations=N,password=P] and "
                        "SCRAM-SHA-512=[...]")
    p.add_argument("--delete-config", metavar="K,...", help="configs to remove (a SCRAM mechanism's name removes "
                                                             "that credential)")
    p.add_argument("--all", action="store_true", help="with --describe of brokers: every config, not only the "
                                                      "dynamic ones")
    p.set_defaults(func=cmd_configs, entities=[])


def _entity(types: list[str], names: list[str]) -> QuotaEntity:
    found = dict(zip((ENTITY_TYPES[t] for t in types), names))
    return QuotaEntity(found.get("user"), found.get("client-id"))


@dataclass
class _Changes:
    """What --add-config / --delete-config ask: quotas (None: remove), SCRAM upserts {mechanism: (iterations,
    password)} and SCRAM deletions."""

    quotas: dict[str, float | None] = field(default_factory=dict)
    scram: dict[str, tuple[int, str]] = field(default_factory=dict)
    scram_deletions: list[str] = field(default_factory=list)


def _scram(mechanism: str, value: str) -> tuple[int, str]:
    """(iterations, password) of ``iterations=N,password=P`` (the brackets already gone)."""
    settings = {}
    for item in value.split(","):
        key, sep, v = item.partition("=")
        if not sep or key.strip() not in ("iterations", "password"):
            raise UsageError(f"Invalid {mechanism} config {value!r}: expected [iterations=N,password=P] "
                             f"(iterations optional, {DEFAULT_ITERATIONS} by default)")
        settings[key.strip()] = v
    if not settings.get("password"):
        raise UsageError(f"{mechanism} needs a password: {mechanism}=[password=P]")
    try:
        iterations = int(settings.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise UsageError(f"Invalid {mechanism} iterations: {settings['iterations']}") from None
    try:
        check_iterations(iterations)                 # before salting: PBKDF2 runs that many rounds here
    except SeglogError as e:
        raise UsageError(f"Invalid {mechanism} config: {e}") from None
    return iterations, settings["password"]


def _changes(args) -> _Changes:
    changes = _Changes()
    for item in split_config_list(args.add_config or ""):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"Invalid entity config: all configs to be added must be in the format \"key=val\" "
                             f"({item!r})")
        if key in HASHES:
            changes.scram[key] = _scram(key, value)
            continue
        try:
            changes.quotas[key] = float(value)
        except ValueError:
            raise UsageError(f"Cannot parse quota configuration value for {key}: {value}") from None
    for key in (k.strip() for k in (args.delete_config or "").split(",")):
        if key in HASHES:
            if key in changes.scram:
                raise UsageError(f"{key} cannot be both added and deleted")
            changes.scram_deletions.append(key)
        elif key:
            changes.quotas[key] = None
    return changes


def _describe_line(entity: QuotaEntity, values: dict[str, float]) -> str:
    parts = [f"the default {label}" if name == DEFAULT else f"{label} '{name}'"
             for label, name in (("user-principal", entity.user), ("client-id", entity.client_id))
             if name is not None]
    return f"Quota configs for {', '.join(parts)} are {', '.join(f'{k}={v}' for k, v in values.items())}"


def _scram_line(user: str, mechanisms: dict[str, int]) -> str:
    infos = ", ".join(f"{m}=iterations={i}" for m, i in sorted(mechanisms.items()))
    return f"SCRAM credential configs for user-principal '{user}' are {infos}"


def _salted(user: str, scram: dict[str, tuple[int, str]]) -> list[tuple[str, str, int, bytes, bytes]]:
    """(user, mechanism, iterations, salt, salted password) per upsert: what AlterUserScramCredentials sends."""
    upserts = []
    for mechanism, (iterations, password) in scram.items():
        salt = os.urandom(SALT_BYTES)
        upserts.append((user, mechanism, iterations, salt,
                        salted_password(mechanism, password.encode(), salt, iterations)))
    return upserts


def _check(args, types: list[str], names: list[str]) -> _Changes | None:
    """The usage checks of kafka-configs.sh; the changes of an --alter."""
    if not types:
        raise UsageError("--entity-type must be specified (users or clients)")
    if len(set(types)) != len(types):
        raise UsageError(f"Duplicate entity type(s) specified: {', '.join(types)}")
    if len(names) > len(types):
        raise UsageError("--entity-name or --entity-default must follow the --entity-type it names")
    if len(types) == 2 and types[0] != "users":
        raise UsageError("--entity-type users must come before --entity-type clients")
    user_only = types == ["users"] and DEFAULT not in names
    if args.zookeeper and args.command_config:
        raise UsageError("--command-config goes with --bootstrap-server, not --zookeeper")
    if args.zookeeper and not user_only:
        raise UsageError("--zookeeper reads and writes the SCRAM credentials of users only "
                         "(--entity-type users [--entity-name NAME]); quotas go through --bootstrap-server")
    if not args.alter:
        if args.add_config or args.delete_config:
            raise UsageError("--add-config and --delete-config go with --alter")
        return None
    if len(names) != len(types):
        raise UsageError("--entity-name or --entity-default must be specified with each --entity-type for --alter")
    changes = _changes(args)
    if not (changes.quotas or changes.scram or changes.scram_deletions):
        raise UsageError("At least one of --add-config or --delete-config must be specified with --alter")
    if (changes.scram or changes.scram_deletions) and not user_only:
        raise UsageError("SCRAM credentials belong to a named user alone: --entity-type users --entity-name NAME")
    if args.zookeeper and changes.quotas:
        raise UsageError(f"--zookeeper writes SCRAM credentials only, not {', '.join(changes.quotas)}: "
                         f"set quotas through --bootstrap-server")
    return changes


def cmd_configs(args) -> int:
    types, names = args.entity_type, args.entities
    if BROKERS in types:
        return _brokers(args, types, names)
    if args.all:
        raise UsageError("--all goes with --describe --entity-type brokers")
    changes = _check(args, types, names)
    try:
        if args.zookeeper:
            return _on_zookeeper(args.zookeeper, names[0] if names else None, changes)
        with connect(args) as admin:
            if changes is not None:
                if changes.quotas:
                    admin.alter_client_quotas(_entity(types, names), changes.quotas)
                if changes.scram or changes.scram_deletions:
                    admin.alter_user_scram_credentials(_salted(names[0], changes.scram),
                                                       [(names[0], m) for m in changes.scram_deletions])
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
            if types == ["users"] and DEFAULT not in names:      # kafka-configs.sh: SCRAM of users alone
                for user, found in admin.describe_user_scram_credentials(names or None).items():
                    if isinstance(found, ResourceNotFoundError):
                        continue
                    if isinstance(found, SeglogError):
                        out(f"Error retrieving SCRAM credential configs for user-principal '{user}': "
                            f"{type(found).__name__}: {found}")
                    else:
                        out(_scram_line(user, found))
    except SeglogError as e:
        raise CliError(f"Error while executing config command: {e}") from None
    return 0


def _on_zookeeper(connect_string: str, user: str | None, changes: _Changes | None) -> int:
    """--zookeeper: a user's SCRAM credentials written (or every user's / one user's described) in ZooKeeper."""
    from ..cluster.zk import ZooKeeperMetadataStore
    from ..security.credentials import MetadataCredentialStore
    with ZooKeeperMetadataStore(connect_string) as zk:
        credentials = MetadataCredentialStore(zk, watch=False)
        if changes is None:
            for name, found in sorted(credentials.describe().items()):
                if user is None or name == user:
                    out(_scram_line(name, found))
            return 0
        credentials.alter([(u, m, credential_from_salted(m, salted, salt, i))
                           for u, m, i, salt, salted in _salted(user, changes.scram)],
                          [(user, m) for m in changes.scram_deletions])
    out(f"Completed updating config for entity: user-principal '{user}'.")
    return 0


def _text(value: str | None) -> str:
    return "null" if value is None else value            # as kafka-configs.sh prints a null value


def _broker_id(name: str) -> int | None:
    """The broker id an --entity-name names (None: --entity-default), checked as kafka-configs.sh checks it."""
    if name == DEFAULT:
        return None
    try:
        return int(name)
    except ValueError:
        raise UsageError(f"The entity name for brokers must be a valid integer broker id, found: {name}") from None


def _broker_changes(args) -> tuple[dict[str, str], list[str]]:
    """(configs to set, configs to delete) of --add-config / --delete-config."""
    added = {}
    for item in split_config_list(args.add_config or ""):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"Invalid entity config: all configs to be added must be in the format \"key=val\" "
                             f"({item!r})")
        added[key.strip()] = value.strip()
    deleted = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
    if not added and not deleted:
        raise UsageError("At least one of --add-config or --delete-config must be specified with --alter")
    return added, deleted


def _brokers(args, types: list[str], names: list[str]) -> int:
    """--entity-type brokers: dynamic broker configs through IncrementalAlterConfigs / DescribeConfigs."""
    if types != [BROKERS]:
        raise UsageError("--entity-type brokers goes alone")
    if args.zookeeper:
        raise UsageError("dynamic broker configs go through --bootstrap-server, not --zookeeper")
    if len(names) > 1:
        raise UsageError("--entity-name or --entity-default names one broker")
    if args.alter:
        if not names:
            raise UsageError("--entity-name or --entity-default must be specified with --alter of brokers")
        if args.all:
            raise UsageError("--all goes with --describe")
        added, deleted = _broker_changes(args)
    elif args.add_config or args.delete_config:
        raise UsageError("--add-config and --delete-config go with --alter")
    try:
        with connect(args) as admin:
            if args.alter:
                broker = _broker_id(names[0])
                level = SOURCE_DYNAMIC_DEFAULT if broker is None else SOURCE_DYNAMIC_BROKER
                current = {c["name"] for c in admin.describe_broker_configs(broker) if c["config_source"] == level}
                missing = [k for k in deleted if k not in current]
                if missing:
                    raise CliError(f"Invalid config(s): {','.join(missing)}")
                admin.alter_broker_config(broker, added, deleted)
                out("Completed updating default config for brokers in the cluster." if broker is None else
                    f"Completed updating config for broker {broker}.")
                return 0
            brokers = [_broker_id(names[0])] if names else [*admin.cluster.broker_ids(), None]
            for broker in brokers:
                entries = admin.describe_broker_configs(broker)
                if broker is None:
                    out("Default configs for brokers in the cluster are:")
                else:
                    out(f"{'All' if args.all else 'Dynamic'} configs for broker {broker} are:")
                level = SOURCE_DYNAMIC_DEFAULT if broker is None else SOURCE_DYNAMIC_BROKER
                for c in sorted(entries, key=lambda c: c["name"]):
                    if args.all or c["config_source"] == level:
                        synonyms = ", ".join(f"{SOURCE_NAMES.get(s['source'], 'UNKNOWN')}:{s['name']}="
                                             f"{_text(s['value'])}" for s in c["synonyms"])
                        out(f"  {c['name']}={_text(c['value'])} sensitive={str(c['is_sensitive']).lower()} "
                            f"synonyms={{{synonyms}}}")
    except SeglogError as e:
        raise CliError(f"Error while executing config command: {e}") from None
    return 0

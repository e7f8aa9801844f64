"""The authorizer: Kafka's AclAuthorizer decisions over ACLs kept in a data dir or in ZooKeeper.

Decisions (``authorize``), as Kafka's: a super user (``super.users``, ``User:a;User:b``) may do anything. For
anyone else the ACLs that apply to a resource are those of its literal name, of the literal wildcard ``*`` and of
every prefixed pattern its name starts with; an entry applies to a principal when it names it or ``User:*``,
to a host when it names its address or ``*``, to an operation when it names it or All. A deny that applies
wins; else an allow that applies grants (Read, Write, Delete and Alter grant Describe too; AlterConfigs grants
DescribeConfigs); with no ACL at all on the resource, ``allow.everyone.if.no.acl.found`` decides (false by
default). ``authorize_any`` is Kafka's authorizeByResourceType: may the principal do the operation on at least
one resource of a type (an idempotent producer with Write on some topic needs no IdempotentWrite).

Stores: :class:`FileAclStore` (``acls.json`` in a lone broker's data dir) and :class:`MetadataAclStore` (the
cluster's metadata store: ZooKeeper's ``/kafka-acl``). The authorizer keeps every binding in memory, replaced
whole (one reference swap) when the store reports a change, so decisions take no lock and see one consistent
set; a change made through any broker reaches every broker through the store's watch.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Callable, Iterable, Mapping

from ..checkpoints import replace_file
from ..errors import InvalidConfigError, SeglogError
from .acls import (CLUSTER_NAME, IMPLIED_BY, WILDCARD, WILDCARD_PRINCIPAL, AccessControlEntry, AclBinding,
                   AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourcePattern, ResourceType,
                   parse_principal)

log = logging.getLogger("seglog.authorizer")

AUTHORIZER_CLASS_NAMES = frozenset({
    "kafka.security.authorizer.AclAuthorizer",                 # ZooKeeper mode
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",  # KRaft
    "kafka.security.auth.SimpleAclAuthorizer",                 # before Kafka 2.4
})
"""``authorizer.class.name`` values that turn authorization on (Kafka's names; the empty default: off)."""

FILE_NAME = "acls.json"
Acls = Mapping[ResourcePattern, frozenset[AccessControlEntry]]


def check_authorizer_class(name: str) -> bool:
    """Whether authorizer.class.name turns authorization on; InvalidConfigError for a class seglog has not."""
    if not name:
        return False
    if name not in AUTHORIZER_CLASS_NAMES:
        raise InvalidConfigError(f"Invalid value {name} for configuration authorizer.class.name: seglog's "
                                 f"authorizer answers to {', '.join(sorted(AUTHORIZER_CLASS_NAMES))}")
    return True


def parse_super_users(text: str) -> frozenset[str]:
    """super.users: principals separated by ';' (InvalidConfigError for one that is not Type:name)."""
    out = set()
    for item in (text or "").split(";"):
        if item.strip():
            try:
                out.add(parse_principal(item.strip()))
            except SeglogError as e:
                raise InvalidConfigError(f"Invalid value {text} for configuration super.users: {e}") from None
    return frozenset(out)


def _encode(acls: Acls) -> list[dict]:
    return [{"resourceType": p.resource_type.pascal, "patternType": p.pattern_type.pascal, "name": p.name,
             "acls": [e.to_json() for e in sorted(entries)]} for p, entries in sorted(acls.items()) if entries]


def _decode_pattern(resource_type: str, pattern_type: str, name: str) -> ResourcePattern:
    return ResourcePattern(ResourceType.parse(resource_type), name, PatternType.parse(pattern_type))


class FileAclStore:
    """A lone broker's ACLs in ``acls.json`` in its data dir (a list of {resourceType, patternType, name, acls},
    each ``acls`` as ZooKeeper's /kafka-acl JSON), replaced atomically (write, fsync, rename). Only the process
    holding the data dir writes it; ``update`` takes the store's lock."""

    def __init__(self, data_dir):
        self.path = os.path.join(os.fspath(data_dir), FILE_NAME)
        self._lock = threading.Lock()

    def load(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        if not os.path.exists(self.path):
            return {}
        with open(self.path) as f:
            return {_decode_pattern(r["resourceType"], r["patternType"], r["name"]):
                    frozenset(AccessControlEntry.from_json(e) for e in r["acls"]) for r in json.load(f)}

    def update(self, changes: Mapping[ResourcePattern, Callable[[frozenset], frozenset]]) -> None:
        """Apply each change (current entries -> new entries) and persist them together."""
        with self._lock:
            acls = self.load()
            for pattern, change in changes.items():
                acls[pattern] = frozenset(change(acls.get(pattern, frozenset())))
            replace_file(self.path, json.dumps(_encode(acls)).encode(), "cannot write ACLs")

    def watch(self, callback: Callable[[], None]):
        """Nothing else writes a lone broker's file: the authorizer reloads after its own updates."""
        return None


class MetadataAclStore:
    """A cluster's ACLs in its metadata store (ZooKeeper: Kafka's /kafka-acl and /kafka-acl-extended/prefixed
    nodes, one per resource pattern, written conditionally on their version; changes announced under
    /kafka-acl-changes and /kafka-acl-extended-changes, which every broker watches)."""

    def __init__(self, metadata_store):
        self.store = metadata_store

    def load(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        return {_decode_pattern(*key): frozenset(AccessControlEntry.from_json(e) for e in entries)
                for key, entries in self.store.get_acls().items()}

    def update(self, changes: Mapping[ResourcePattern, Callable[[frozenset], frozenset]]) -> None:
        for pattern, change in changes.items():
            def apply(entries: list[dict], change=change) -> list[dict]:
                now = change(frozenset(AccessControlEntry.from_json(e) for e in entries))
                return [e.to_json() for e in sorted(now)]
            self.store.update_acls((pattern.resource_type.pascal, pattern.pattern_type.pascal, pattern.name), apply)

    def watch(self, callback: Callable[[], None]):
        return self.store.watch_acls(lambda _acls: callback())


class Authorizer:
    """ACL decisions and ACL management over one store (see the module docstring). Thread-safe: decisions read
    the current snapshot; changes go through the store and then reload the snapshot."""

    def __init__(self, store, *, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False):
        self.store = store
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: Acls = {}
        self._reload_lock = threading.Lock()
        self.reload()
        self._watch = store.watch(self.reload)

    @classmethod
    def from_config(cls, config, store) -> "Authorizer | None":
        """The authorizer a broker config asks for (authorizer.class.name), or None when it asks for none."""
        if not check_authorizer_class(config.authorizer_class_name):
            return None
        return cls(store, super_users=parse_super_users(config.super_users),
                   allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found)

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()

    def reload(self) -> None:
        """Read every binding from the store and swap the snapshot."""
        with self._reload_lock:
            self._acls = {p: frozenset(e) for p, e in self.store.load().items() if e}

    # -- decisions ----------------------------------------------------------------------------------------------

    def _applying(self, acls: Acls, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        found = []
        for pattern in (ResourcePattern(resource_type, WILDCARD), ResourcePattern(resource_type, name)):
            found.extend(acls.get(pattern, ()))
        for i in range(len(name) + 1):
            found.extend(acls.get(ResourcePattern(resource_type, name[:i], PatternType.PREFIXED), ()))
        return found

    @staticmethod
    def _entry_applies(e: AccessControlEntry, principal: str, host: str, operations) -> bool:
        return ((e.principal == principal or e.principal == WILDCARD_PRINCIPAL)
                and (e.host == host or e.host == WILDCARD)
                and (e.operation in operations or e.operation is AclOperation.ALL))

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str = CLUSTER_NAME) -> bool:
        """May `principal` connecting from `host` (an IP address) do `operation` on the named resource?"""
        if principal in self.super_users:
            return True
        acls = self._applying(self._acls, resource_type, name)
        if not acls:
            return self.allow_everyone_if_no_acl_found
        if any(e.permission is AclPermissionType.DENY and self._entry_applies(e, principal, host, (operation,))
               for e in acls):
            return False
        granting = IMPLIED_BY.get(operation, (operation,))
        return any(e.permission is AclPermissionType.ALLOW and self._entry_applies(e, principal, host, granting)
                   for e in acls)

    def authorize_any(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType: may the principal do `operation` on some resource of the type? An
        allow counts unless a deny covers it (a literal deny of the same name, a prefixed deny of a prefix of
        it, or a literal deny of ``*`` which denies every resource)."""
        if principal in self.super_users:
            return True
        ops = (operation,)
        deny_literal, deny_prefix, allow_literal, allow_prefix = set(), set(), set(), set()
        for pattern, entries in self._acls.items():
            if pattern.resource_type != resource_type:
                continue
            for e in entries:
                if not self._entry_applies(e, principal, host, ops):
                    continue
                literal = pattern.pattern_type is PatternType.LITERAL
                if e.permission is AclPermissionType.DENY:
                    (deny_literal if literal else deny_prefix).add(pattern.name)
                else:
                    (allow_literal if literal else allow_prefix).add(pattern.name)
        if WILDCARD in deny_literal:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True

        def denied_by_prefix(name: str) -> bool:
            return any(name[:i] in deny_prefix for i in range(len(name) + 1))
        return (any(not denied_by_prefix(p) for p in allow_prefix)
                or any(n == WILDCARD or (n not in deny_literal and not denied_by_prefix(n)) for n in allow_literal))

    # -- management ---------------------------------------------------------------------------------------------

    def acls(self, selection: AclBindingFilter) -> list[AclBinding]:
        """Every binding the filter matches, sorted by pattern then entry."""
        return [AclBinding(p, e) for p, entries in sorted(self._acls.items()) for e in sorted(entries)
                if selection.matches_pattern(p) and selection.matches_entry(e)]

    def create_acls(self, bindings: list[AclBinding]) -> list[SeglogError | None]:
        """Store the valid bindings (one store update); per binding None or why it was refused."""
        results: list[SeglogError | None] = []
        adds: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for b in bindings:
            try:
                b.validate()
            except SeglogError as e:
                results.append(e)
                continue
            adds.setdefault(b.pattern, set()).add(b.entry)
            results.append(None)
        if adds:
            self.store.update({p: (lambda cur, new=frozenset(es): cur | new) for p, es in adds.items()})
            self.reload()
        return results

    def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding] | SeglogError]:
        """Delete what each filter matches; per filter the bindings it deleted (a binding matched by several
        filters is reported for the first), or why the filter was refused."""
        results: list[list[AclBinding] | SeglogError] = []
        valid = []
        for f in filters:
            try:
                f.validate()
                valid.append(f)
                results.append([])
            except SeglogError as e:
                results.append(e)
        if not valid:
            return results
        patterns = set(self._acls)
        patterns.update(p for p in (f.exact_pattern() for f in valid) if p is not None)
        touched = [p for p in sorted(patterns) if any(f.matches_pattern(p) for f in valid)]
        deleted: dict[AclBinding, int] = {}

        def change(pattern: ResourcePattern):
            def remove(current: frozenset) -> frozenset:
                keep = set(current)
                for e in sorted(current):
                    for i, f in enumerate(filters):
                        if not isinstance(results[i], SeglogError) and f.matches_pattern(pattern) \
                                and f.matches_entry(e):
                            deleted.setdefault(AclBinding(pattern, e), i)
                            keep.discard(e)
                return frozenset(keep)
            return remove
        if touched:
            self.store.update({p: change(p) for p in touched})
            self.reload()
        for binding, i in sorted(deleted.items()):
            results[i].append(binding)
        return results

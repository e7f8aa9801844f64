"""The ACL APIs' wire fields (CreateAcls, DescribeAcls, DeleteAcls) to and from seglog.security.acls: the one
translation the broker's handlers and the admin client share. A code no enum member has becomes UNKNOWN (0),
which validation refuses; before v1 of these APIs every pattern is LITERAL."""

from __future__ import annotations

from .acls import (AccessControlEntry, AclBinding, AclBindingFilter, AclOperation, AclPermissionType, PatternType,
                   ResourcePattern, ResourceType)


def member(kind, code: int):
    """The enum member of a wire code, UNKNOWN for a code Kafka does not define."""
    try:
        return kind(code)
    except ValueError:
        return kind(0)


def filter_to_wire(f: AclBindingFilter) -> dict:
    """A DescribeAcls request's fields, a DeleteAcls request's filter."""
    return {"resource_type_filter": f.resource_type, "resource_name_filter": f.name,
            "pattern_type_filter": f.pattern_type, "principal_filter": f.principal, "host_filter": f.host,
            "operation": f.operation, "permission_type": f.permission}


def filter_from_wire(fields: dict, version: int) -> AclBindingFilter:
    return AclBindingFilter(member(ResourceType, fields["resource_type_filter"]), fields["resource_name_filter"],
                            member(PatternType, fields["pattern_type_filter"]) if version >= 1
                            else PatternType.LITERAL,
                            fields["principal_filter"], fields["host_filter"],
                            member(AclOperation, fields["operation"]),
                            member(AclPermissionType, fields["permission_type"]))


def binding_to_wire(b: AclBinding, pattern_key: str = "pattern_type") -> dict:
    """A binding's fields: a DeleteAcls matching ACL; a CreateAcls creation with
    ``pattern_key="resource_pattern_type"``."""
    return {"resource_type": b.pattern.resource_type, "resource_name": b.pattern.name,
            pattern_key: b.pattern.pattern_type, "principal": b.entry.principal, "host": b.entry.host,
            "operation": b.entry.operation, "permission_type": b.entry.permission}


def binding_from_wire(fields: dict, version: int, pattern_key: str = "pattern_type") -> AclBinding:
    """The inverse of binding_to_wire (a DescribeAcls resource's fields merged with one of its ACLs fit too)."""
    pattern_type = member(PatternType, fields[pattern_key]) if version >= 1 else PatternType.LITERAL
    return AclBinding(ResourcePattern(member(ResourceType, fields["resource_type"]), fields["resource_name"],
                                      pattern_type),
                      AccessControlEntry(fields["principal"], fields["host"],
                                         member(AclOperation, fields["operation"]),
                                         member(AclPermissionType, fields["permission_type"])))

"""ACLs as Kafka models them: resource patterns, access control entries, binding filters.

Enum values are Kafka's wire/record byte codes (ResourceType, PatternType, AclOperation,
AclPermissionType). `AclsImage` is the immutable set of ACLs in a metadata image, indexed for
the authorizer on first use: an image that never changes ACLs pays nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum
from functools import cached_property
from types import MappingProxyType

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _enum(cls: type[IntEnum], value: int) -> IntEnum:
    try:
        return cls(value)
    except ValueError:
        return cls(0)  # UNKNOWN, as Kafka's fromCode


def resource_type(v: int) -> ResourceType:
    return ResourceType(_enum(ResourceType, v))


def pattern_type(v: int) -> PatternType:
    return PatternType(_enum(PatternType, v))


def operation(v: int) -> AclOperation:
    return AclOperation(_enum(AclOperation, v))


def permission(v: int) -> AclPermissionType:
    return AclPermissionType(_enum(AclPermissionType, v))


# AclEntry.supportedOperations: what each resource type's authorized-operations bit field covers
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (
        AclOperation.READ,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


@dataclass(frozen=True)
class StandardAcl:
    """One ACL binding: a resource pattern and an access control entry."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str  # "User:alice", "User:*"
    host: str  # an IP address or "*"
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission_type.name}) on "
            f"{self.resource_type.name}:{self.pattern_type.name}:{self.resource_name}"
        )


@dataclass(frozen=True)
class AclBindingFilter:
    """DescribeAcls / DeleteAcls filter; None and ANY match anything (Kafka's AclBindingFilter)."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def is_unknown(self) -> bool:
        return (
            self.resource_type == ResourceType.UNKNOWN
            or self.pattern_type == PatternType.UNKNOWN
            or self.operation == AclOperation.UNKNOWN
            or self.permission_type == AclPermissionType.UNKNOWN
        )

    def matches(self, acl: StandardAcl) -> bool:
        return self._matches_pattern(acl) and self._matches_entry(acl)

    def _matches_pattern(self, acl: StandardAcl) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != acl.pattern_type:
            return False
        if self.resource_name is None:
            return True
        if pt in (PatternType.ANY, acl.pattern_type):
            return self.resource_name == acl.resource_name
        # MATCH: the ACLs that would apply to a resource of this literal name
        if acl.pattern_type == PatternType.LITERAL:
            return self.resource_name == acl.resource_name or acl.resource_name == WILDCARD
        if acl.pattern_type == PatternType.PREFIXED:
            return self.resource_name.startswith(acl.resource_name)
        return False

    def _matches_entry(self, acl: StandardAcl) -> bool:
        return (
            (self.principal is None or self.principal == acl.principal)
            and (self.host is None or self.host == acl.host)
            and (self.operation == AclOperation.ANY or self.operation == acl.operation)
            and (self.permission_type == AclPermissionType.ANY or self.permission_type == acl.permission_type)
        )


class AclsImage:
    """The ACLs of one metadata image (id -> ACL), with lookup indexes built on first use."""

    def __init__(self, by_id: Mapping[str, StandardAcl] | None = None) -> None:
        self.by_id: Mapping[str, StandardAcl] = MappingProxyType(dict(by_id or {}))

    def __len__(self) -> int:
        return len(self.by_id)

    def __iter__(self) -> Iterator[StandardAcl]:
        return iter(self.by_id.values())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AclsImage) and dict(self.by_id) == dict(other.by_id)

    def __hash__(self) -> int:
        return hash(frozenset(self.by_id))

    @cached_property
    def literal(self) -> dict[tuple[ResourceType, str], tuple[StandardAcl, ...]]:
        return _group(a for a in self.by_id.values() if a.pattern_type == PatternType.LITERAL)

    @cached_property
    def prefixed(self) -> dict[tuple[ResourceType, str], tuple[StandardAcl, ...]]:
        return _group(a for a in self.by_id.values() if a.pattern_type == PatternType.PREFIXED)

    @cached_property
    def prefix_lengths(self) -> dict[ResourceType, tuple[int, ...]]:
        """Per resource type, the lengths of its prefixed names: a lookup tries only those."""
        out: dict[ResourceType, set[int]] = {}
        for rtype, name in self.prefixed:
            out.setdefault(rtype, set()).add(len(name))
        return {k: tuple(sorted(v)) for k, v in out.items()}

    def matching(self, rtype: ResourceType, name: str) -> Iterator[StandardAcl]:
        """Every ACL whose pattern covers the literal resource `name` (literal, `*`, prefixes)."""
        yield from self.literal.get((rtype, name), ())
        if name != WILDCARD:
            yield from self.literal.get((rtype, WILDCARD), ())
        for n in self.prefix_lengths.get(rtype, ()):
            if n > len(name):
                break
            yield from self.prefixed.get((rtype, name[:n]), ())

    def of_type(self, rtype: ResourceType) -> Iterator[StandardAcl]:
        return (a for a in self.by_id.values() if a.resource_type == rtype)


def _group(acls: Iterable[StandardAcl]) -> dict[tuple[ResourceType, str], tuple[StandardAcl, ...]]:
    out: dict[tuple[ResourceType, str], list[StandardAcl]] = {}
    for a in acls:
        out.setdefault((a.resource_type, a.resource_name), []).append(a)
    return {k: tuple(v) for k, v in out.items()}


EMPTY_ACLS = AclsImage()

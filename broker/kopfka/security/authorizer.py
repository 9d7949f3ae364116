"""Kafka's StandardAuthorizer over the ACLs of the metadata image.

Rules (StandardAuthorizerData): a super user (`super.users`) may do anything. Otherwise the
ACLs whose pattern covers the resource (its literal name, the `*` wildcard, and every prefixed
pattern the name starts with) and whose principal (or `User:*`) and host (or `*`) match decide:
any matching DENY wins; else any matching ALLOW allows; an ALLOW of READ, WRITE, DELETE or ALTER
also allows DESCRIBE, and ALTER_CONFIGS allows DESCRIBE_CONFIGS (never so for DENY). With no
ACL at all on the resource, `allow.everyone.if.no.acl.found` decides; with ACLs but none
matching, the answer is no.

Decisions are cached per ACL image (the image is immutable; a new one starts a new cache).
Denials of explicitly requested resources are logged at INFO on `kopfka.authorizer`, as
Kafka's `kafka.authorizer.logger` does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kopfka.config.definitions import ConfigError
from kopfka.security.acls import (
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclOperation,
    AclPermissionType,
    AclsImage,
    PatternType,
    ResourceType,
)
from kopfka.security.principal import KafkaPrincipal

audit = logging.getLogger("kopfka.authorizer")

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
IMPLIES_DESCRIBE = frozenset(
    {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
)
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})
CACHE_LIMIT = 100_000


def parse_super_users(text: str) -> frozenset[str]:
    """`super.users`: principals separated by semicolons (User:admin;User:CN=broker,O=x)."""
    out = set()
    for item in (text or "").split(";"):
        item = item.strip()
        if not item:
            continue
        try:
            KafkaPrincipal.parse(item)
        except ValueError as exc:
            raise ConfigError("super.users", text, str(exc)) from None
        out.add(item)
    return frozenset(out)


class StandardAuthorizer:
    def __init__(
        self, acls: Callable[[], AclsImage], super_users: frozenset[str] = frozenset(), allow_if_no_acl: bool = False
    ) -> None:
        self._acls = acls
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._cache_for: AclsImage | None = None
        self._cache: dict[tuple[str, str, AclOperation, ResourceType, str], bool] = {}

    @classmethod
    def from_config(cls, values: dict[str, object], acls: Callable[[], AclsImage]) -> StandardAuthorizer | None:
        """None when `authorizer.class.name` is empty (no authorization, as Kafka)."""
        name = str(values.get("authorizer.class.name") or "").strip()
        if not name:
            return None
        if name not in (STANDARD_AUTHORIZER, "kafka.security.authorizer.AclAuthorizer"):
            raise ConfigError("authorizer.class.name", name, f"kopfka provides {STANDARD_AUTHORIZER} only")
        if name != STANDARD_AUTHORIZER:
            raise ConfigError(
                "authorizer.class.name", name, f"AclAuthorizer needs ZooKeeper: use {STANDARD_AUTHORIZER}"
            )
        return cls(
            acls,
            parse_super_users(str(values.get("super.users") or "")),
            bool(values.get("allow.everyone.if.no.acl.found")),
        )

    def is_super_user(self, principal: KafkaPrincipal) -> bool:
        return str(principal) in self.super_users

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        op: AclOperation,
        rtype: ResourceType,
        name: str,
        *,
        log_denied: bool = True,
    ) -> bool:
        if self.is_super_user(principal):
            return True
        acls = self._acls()
        if acls is not self._cache_for or len(self._cache) > CACHE_LIMIT:
            self._cache_for, self._cache = acls, {}
        key = (str(principal), host, op, rtype, name)
        allowed = self._cache.get(key)
        if allowed is None:
            allowed = self._cache[key] = self._decide(acls, key[0], host, op, rtype, name)
        if not allowed and log_denied:
            audit.info(
                "Principal = %s is Denied operation = %s from host = %s on resource = %s:LITERAL:%s",
                principal,
                op.name,
                host,
                rtype.name,
                name,
            )
        return allowed

    def _decide(
        self, acls: AclsImage, principal: str, host: str, op: AclOperation, rtype: ResourceType, name: str
    ) -> bool:
        allow = has_acls = False
        for acl in acls.matching(rtype, name):
            has_acls = True
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.host != WILDCARD and acl.host != host:
                continue
            if acl.operation != AclOperation.ALL:
                if acl.permission_type == AclPermissionType.ALLOW:
                    if op == AclOperation.DESCRIBE:
                        if acl.operation not in IMPLIES_DESCRIBE:
                            continue
                    elif op == AclOperation.DESCRIBE_CONFIGS:
                        if acl.operation not in IMPLIES_DESCRIBE_CONFIGS:
                            continue
                    elif acl.operation != op:
                        continue
                elif acl.operation != op:
                    continue
            if acl.permission_type == AclPermissionType.DENY:
                return False
            if acl.permission_type == AclPermissionType.ALLOW:
                allow = True
        if allow:
            return True
        return self.allow_if_no_acl if not has_acls else False

    def authorize_by_resource_type(
        self, principal: KafkaPrincipal, host: str, op: AclOperation, rtype: ResourceType
    ) -> bool:
        """May the principal do `op` on at least one resource of the type (Kafka's Authorizer
        default): e.g. an idempotent producer with WRITE on any topic may InitProducerId."""
        if self.authorize(principal, host, op, rtype, "hardcode", log_denied=False):
            return True
        pstr = str(principal)
        deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        wildcard_allow = False
        for acl in self._acls().of_type(rtype):
            if acl.host != host and acl.host != WILDCARD:
                continue
            if acl.principal != pstr and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.operation != op and acl.operation != AclOperation.ALL:
                continue
            if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
                continue
            if acl.permission_type == AclPermissionType.DENY:
                if acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD:
                    return False
                deny[acl.pattern_type].add(acl.resource_name)
            elif acl.permission_type == AclPermissionType.ALLOW:
                if acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD:
                    wildcard_allow = True  # a wildcard DENY later in the loop still wins
                    continue
                allow[acl.pattern_type].add(acl.resource_name)
        if wildcard_allow:
            return True
        for ptype, names in allow.items():
            for name in names:
                if ptype == PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                    continue
                if not any(name[:i] in deny[PatternType.PREFIXED] for i in range(1, len(name) + 1)):
                    return True
        return False

    def authorized_operations(self, principal: KafkaPrincipal, host: str, rtype: ResourceType, name: str) -> int:
        """The 32-bit field of operations allowed on the resource (bit n = operation code n)."""
        bits = 0
        for op in SUPPORTED_OPERATIONS[rtype]:
            if self.authorize(principal, host, op, rtype, name, log_denied=False):
                bits |= 1 << int(op)
        return bits


def all_operations_bits(rtype: ResourceType) -> int:
    """What authorized_operations reports without an authorizer: every supported operation."""
    bits = 0
    for op in SUPPORTED_OPERATIONS[rtype]:
        bits |= 1 << int(op)
    return bits

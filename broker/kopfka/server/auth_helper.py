"""What request handlers ask the authorizer (Kafka's AuthHelper), for the request's principal
and client address. Without `authorizer.class.name` every check passes, as in Kafka."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kopfka.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from kopfka.security.authorizer import StandardAuthorizer, all_operations_bits

__all__ = [
    "CLUSTER_NAME",
    "AclOperation",
    "ResourceType",
    "authorize",
    "authorize_by_resource_type",
    "authorize_cluster",
    "authorized_names",
    "authorized_operations",
    "authorizer_of",
]


def authorizer_of(ctx: Any) -> StandardAuthorizer | None:
    return getattr(ctx.services, "authorizer", None)


def authorize(ctx: Any, op: AclOperation, rtype: ResourceType, name: str, *, log_denied: bool = True) -> bool:
    authz = authorizer_of(ctx)
    return authz is None or authz.authorize(ctx.principal, ctx.client_host, op, rtype, name, log_denied=log_denied)


def authorize_cluster(ctx: Any, op: AclOperation, *, log_denied: bool = True) -> bool:
    return authorize(ctx, op, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=log_denied)


def authorized_names(
    ctx: Any, op: AclOperation, rtype: ResourceType, names: Iterable[str], *, log_denied: bool = True
) -> set[str]:
    """The names (each checked once) the principal may `op`."""
    authz = authorizer_of(ctx)
    unique = set(names)
    if authz is None:
        return unique
    return {n for n in unique if authz.authorize(ctx.principal, ctx.client_host, op, rtype, n, log_denied=log_denied)}


def authorize_by_resource_type(ctx: Any, op: AclOperation, rtype: ResourceType) -> bool:
    authz = authorizer_of(ctx)
    return authz is None or authz.authorize_by_resource_type(ctx.principal, ctx.client_host, op, rtype)


def authorized_operations(ctx: Any, rtype: ResourceType, name: str) -> int:
    authz = authorizer_of(ctx)
    if authz is None:
        return all_operations_bits(rtype)
    return authz.authorized_operations(ctx.principal, ctx.client_host, rtype, name)

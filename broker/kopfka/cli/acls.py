"""`kopfka acls` (kafka-acls): --add, --remove and --list ACLs.

kopfka acls --bootstrap-server H:P --add --allow-principal User:alice --operation Read --topic t --group g
kopfka acls --bootstrap-server H:P --add --allow-principal User:app --producer --topic orders- \\
    --resource-pattern-type prefixed
kopfka acls --bootstrap-server H:P --list [--topic t] [--principal User:alice]
kopfka acls --bootstrap-server H:P --remove --allow-principal User:alice --operation Read --topic t
"""

from __future__ import annotations

import argparse

from kopfka.cli.common import add_bootstrap, connect_admin, run_admin
from kopfka.client.acls import create_acls, delete_acls, describe_acls
from kopfka.security.acls import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAcl,
)
from kopfka.security.principal import KafkaPrincipal

# kafka-acls' operation names (Read, Write, ClusterAction, ...) → AclOperation
OPERATIONS = {op.name.replace("_", "").lower(): op for op in AclOperation if op not in (AclOperation.UNKNOWN,)}


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap(p)
    act = p.add_mutually_exclusive_group(required=True)
    act.add_argument("--add", action="store_true")
    act.add_argument("--remove", action="store_true")
    act.add_argument("--list", action="store_true")
    p.add_argument("--topic", action="append", default=[])
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--transactional-id", action="append", default=[])
    p.add_argument("--cluster", action="store_true")
    p.add_argument(
        "--resource-pattern-type",
        default=None,
        type=str.upper,
        choices=["ANY", "MATCH", "LITERAL", "PREFIXED"],
        help="LITERAL by default; --list: ANY",
    )
    p.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--principal", action="append", default=[], metavar="TYPE:NAME", help="--list: only these")
    p.add_argument("--allow-host", action="append", default=[])
    p.add_argument("--deny-host", action="append", default=[])
    p.add_argument(
        "--operation",
        action="append",
        default=[],
        help="Read, Write, Create, Delete, Alter, Describe, "
        "ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All",
    )
    p.add_argument("--producer", action="store_true", help="Write, Describe, Create on the topics")
    p.add_argument("--consumer", action="store_true", help="Read, Describe on the topics; Read on the group")
    p.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite on the cluster")
    p.add_argument("--force", action="store_true", help="accepted for kafka-acls compatibility (never prompts)")


def _resources(args: argparse.Namespace, pattern: PatternType) -> list[tuple[ResourceType, str, PatternType]]:
    out = [(ResourceType.TOPIC, t, pattern) for t in args.topic]
    out += [(ResourceType.GROUP, g, pattern) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, t, pattern) for t in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    return out


def _operation(name: str) -> AclOperation:
    op = OPERATIONS.get(name.replace("-", "").replace("_", "").lower())
    if op is None or op == AclOperation.ANY:
        raise ValueError(f"--operation {name}: unknown operation")
    return op


def _principals(values: list[str], flag: str) -> list[str]:
    for v in values:
        try:
            KafkaPrincipal.parse(v)
        except ValueError as exc:
            raise ValueError(f"{flag} {v}: {exc}") from None
    return values


def _bindings(args: argparse.Namespace) -> list[StandardAcl]:
    pattern = PatternType[args.resource_pattern_type or "LITERAL"]
    if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise ValueError("--add/--remove need --resource-pattern-type LITERAL or PREFIXED")
    per_resource: dict[tuple[ResourceType, str, PatternType], set[AclOperation]] = {}
    ops = {_operation(o) for o in args.operation}
    for res in _resources(args, pattern):
        per_resource[res] = set(ops)
    if args.producer:
        if not args.topic:
            raise ValueError("--producer needs --topic")
        for t in args.topic:
            per_resource.setdefault((ResourceType.TOPIC, t, pattern), set()).update(
                {AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE}
            )
        for tid in args.transactional_id:
            per_resource.setdefault((ResourceType.TRANSACTIONAL_ID, tid, pattern), set()).update(
                {AclOperation.WRITE, AclOperation.DESCRIBE}
            )
        if args.idempotent:
            per_resource.setdefault((ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL), set()).add(
                AclOperation.IDEMPOTENT_WRITE
            )
    if args.consumer:
        if not args.topic or not args.group:
            raise ValueError("--consumer needs --topic and --group")
        for t in args.topic:
            per_resource.setdefault((ResourceType.TOPIC, t, pattern), set()).update(
                {AclOperation.READ, AclOperation.DESCRIBE}
            )
        for g in args.group:
            per_resource.setdefault((ResourceType.GROUP, g, pattern), set()).add(AclOperation.READ)
    if not per_resource:
        raise ValueError("name a resource: --topic, --group, --transactional-id or --cluster")
    allow = _principals(args.allow_principal, "--allow-principal")
    deny = _principals(args.deny_principal, "--deny-principal")
    if not allow and not deny:
        raise ValueError("--add/--remove need --allow-principal or --deny-principal")
    out = []
    for (rtype, name, ptype), res_ops in per_resource.items():
        res_ops = res_ops or {AclOperation.ALL}
        bad = {o for o in res_ops if o != AclOperation.ALL and o not in SUPPORTED_OPERATIONS[rtype]}
        if bad:
            supported = ", ".join(o.name for o in SUPPORTED_OPERATIONS[rtype])
            raise ValueError(
                f"ResourceType {rtype.name} only supports operations {supported}, not {', '.join(o.name for o in bad)}"
            )
        for perm, principals, hosts in (
            (AclPermissionType.ALLOW, allow, args.allow_host or [WILDCARD]),
            (AclPermissionType.DENY, deny, args.deny_host or [WILDCARD]),
        ):
            for principal in principals:
                for host in hosts:
                    for op in sorted(res_ops):
                        out.append(StandardAcl(rtype, name, ptype, principal, host, op, perm))
    return out


def _pattern(acl: StandardAcl) -> str:
    return (
        f"ResourcePattern(resourceType={acl.resource_type.name}, name={acl.resource_name}, "
        f"patternType={acl.pattern_type.name})"
    )


def _entry(acl: StandardAcl) -> str:
    return (
        f"(principal={acl.principal}, host={acl.host}, operation={acl.operation.name}, "
        f"permissionType={acl.permission_type.name})"
    )


def _print_grouped(title: str, acls: list[StandardAcl]) -> None:
    grouped: dict[str, list[StandardAcl]] = {}
    for acl in acls:
        grouped.setdefault(_pattern(acl), []).append(acl)
    for pattern, entries in grouped.items():
        print(f"{title} `{pattern}`: ")
        for acl in entries:
            print(f" \t{_entry(acl)} ")
        print()


async def _run(args: argparse.Namespace) -> int:
    admin = await connect_admin(args)
    try:
        if args.list:
            pattern = PatternType[args.resource_pattern_type or "ANY"]
            filters = [AclBindingFilter(rtype, name, ptype) for rtype, name, ptype in _resources(args, pattern)] or [
                AclBindingFilter()
            ]
            principals: list[str | None] = [*_principals(args.principal, "--principal")] or [None]
            found: list[StandardAcl] = []
            for f in filters:
                for principal in principals:
                    pf = AclBindingFilter(f.resource_type, f.resource_name, f.pattern_type, principal)
                    found.extend(a for a in await describe_acls(admin, pf) if a not in found)
            _print_grouped("Current ACLs for resource", found)
            return 0
        if args.remove and not (args.allow_principal or args.deny_principal or args.producer or args.consumer):
            # as kafka-acls: no principal named → every ACL of the named resources
            pattern = PatternType[args.resource_pattern_type or "LITERAL"]
            resources = _resources(args, pattern)
            if not resources:
                raise ValueError("name a resource: --topic, --group, --transactional-id or --cluster")
            removed = await delete_acls(admin, [AclBindingFilter(r, n, p) for r, n, p in resources])
            _print_grouped("Removed ACLs for resource", removed)
            return 0
        bindings = _bindings(args)
        if args.add:
            _print_grouped("Adding ACLs for resource", bindings)
            await create_acls(admin, bindings)
            return 0
        removed = await delete_acls(
            admin,
            [
                AclBindingFilter(
                    b.resource_type,
                    b.resource_name,
                    b.pattern_type,
                    b.principal,
                    b.host,
                    b.operation,
                    b.permission_type,
                )
                for b in bindings
            ],
        )
        _print_grouped("Removed ACLs for resource", removed)
        return 0
    finally:
        await admin.close()


def run(args: argparse.Namespace) -> int:
    return run_admin("acls", _run, args)

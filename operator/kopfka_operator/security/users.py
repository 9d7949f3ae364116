"""User resources reconciled into Kafka: SCRAM credentials and ACLs, many users per batch.

A User named `alice` is the principal `User:alice`, whether it authenticates with SCRAM (a
credential the operator sets with AlterUserScramCredentials, from a password it keeps in the
Secret `alice`) or with a certificate from the clients CA (subject `CN=alice`, mapped to the
same principal by the listener's ssl.principal.mapping.rules).

ACLs: the resource lists the ACLs of its principal it wants; the operator creates those that
are missing and deletes those it created before (status.acls) and that the spec no longer
lists. ACLs of the same principal created by someone else are left alone. A batch reads every
ACL once (DescribeAcls), and sends one CreateAcls and one DeleteAcls for all of its users; a
credential or ACL that went missing while the resource was in sync is drift, put back and
reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kopfka.client.acls import create_acls_each, delete_acls_each, describe_acls
from kopfka.client.admin import Admin, AdminError
from kopfka.client.user_scram import alter_user_scram_credentials_each, describe_user_scram_credentials
from kopfka.protocol.errors import ErrorCode
from kopfka.security.acls import (
    CLUSTER_NAME,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAcl,
)

from ..kafka_pool import Outcome, reason_of

# spec vocabulary (as Strimzi's KafkaUser) -> Kafka's
RESOURCE_TYPES = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "cluster": ResourceType.CLUSTER,
    "transactionalId": ResourceType.TRANSACTIONAL_ID,
}
PATTERN_TYPES = {"literal": PatternType.LITERAL, "prefix": PatternType.PREFIXED}
OPERATIONS = {
    "Read": AclOperation.READ,
    "Write": AclOperation.WRITE,
    "Create": AclOperation.CREATE,
    "Delete": AclOperation.DELETE,
    "Alter": AclOperation.ALTER,
    "Describe": AclOperation.DESCRIBE,
    "ClusterAction": AclOperation.CLUSTER_ACTION,
    "DescribeConfigs": AclOperation.DESCRIBE_CONFIGS,
    "AlterConfigs": AclOperation.ALTER_CONFIGS,
    "IdempotentWrite": AclOperation.IDEMPOTENT_WRITE,
    "All": AclOperation.ALL,
}
PERMISSIONS = {"allow": AclPermissionType.ALLOW, "deny": AclPermissionType.DENY}
SCRAM_MECHANISMS = {"scram-sha-512": "SCRAM-SHA-512", "scram-sha-256": "SCRAM-SHA-256"}
AUTHENTICATION_TYPES = (*SCRAM_MECHANISMS, "tls")
SCRAM_ITERATIONS = 4096  # Kafka's minimum for SCRAM-SHA-512 and -256
# Kafka errors no retry can fix: the spec (or the cluster's spec.authorization) must change.
REFUSALS = frozenset({ErrorCode.invalid_request, ErrorCode.security_disabled, ErrorCode.unsupported_version})


class UserSpecError(ValueError):
    """A spec the schema should have refused (a cluster without the CRD's validation)."""


def principal_of(username: str) -> str:
    return f"User:{username}"


def mechanism_of(spec: Mapping[str, Any]) -> str | None:
    """The SCRAM mechanism the spec asks for (None: tls or no authentication)."""
    kind = (spec.get("authentication") or {}).get("type")
    if kind is not None and kind not in AUTHENTICATION_TYPES:
        raise UserSpecError(f"spec.authentication.type must be one of {', '.join(AUTHENTICATION_TYPES)}")
    return SCRAM_MECHANISMS.get(kind) if kind else None


def desired_acls(spec: Mapping[str, Any], principal: str) -> frozenset[StandardAcl]:
    authz = spec.get("authorization") or {}
    if authz and authz.get("type", "simple") != "simple":
        raise UserSpecError("spec.authorization.type must be simple")
    out = set()
    for i, rule in enumerate(authz.get("acls") or []):
        where = f"spec.authorization.acls[{i}]"
        resource = rule.get("resource") or {}
        rtype = RESOURCE_TYPES.get(str(resource.get("type")))
        if rtype is None:
            raise UserSpecError(f"{where}.resource.type must be one of {', '.join(RESOURCE_TYPES)}")
        if rtype == ResourceType.CLUSTER:
            name, pattern = CLUSTER_NAME, PatternType.LITERAL
        else:
            given = resource.get("name")
            pattern = PATTERN_TYPES.get(resource.get("patternType", "literal"))  # type: ignore[assignment]
            if not isinstance(given, str) or not given:
                raise UserSpecError(f"{where}.resource.name is required for a {resource.get('type')}")
            name = given
            if pattern is None:
                raise UserSpecError(f"{where}.resource.patternType must be literal or prefix")
        permission = PERMISSIONS.get(rule.get("type", "allow"))
        if permission is None:
            raise UserSpecError(f"{where}.type must be allow or deny")
        operations = rule.get("operations") or []
        if not operations or any(op not in OPERATIONS for op in operations):
            raise UserSpecError(f"{where}.operations must name some of {', '.join(OPERATIONS)}")
        host = str(rule.get("host") or "*")
        for op in operations:
            out.add(StandardAcl(rtype, name, pattern, principal, host, OPERATIONS[op], permission))
    return frozenset(out)


_RESOURCE_NAMES = {v: k for k, v in RESOURCE_TYPES.items()}
_PATTERN_NAMES = {v: k for k, v in PATTERN_TYPES.items()}
_OPERATION_NAMES = {v: k for k, v in OPERATIONS.items()}
_PERMISSION_NAMES = {v: k for k, v in PERMISSIONS.items()}


def acl_to_status(acl: StandardAcl) -> dict[str, str]:
    """An ACL as status.acls records it (the spec's vocabulary)."""
    return {
        "resourceType": _RESOURCE_NAMES[acl.resource_type],
        "name": acl.resource_name,
        "patternType": _PATTERN_NAMES[acl.pattern_type],
        "operation": _OPERATION_NAMES[acl.operation],
        "type": _PERMISSION_NAMES[acl.permission_type],
        "host": acl.host,
    }


def acl_from_status(raw: Mapping[str, Any], principal: str) -> StandardAcl | None:
    try:
        return StandardAcl(
            RESOURCE_TYPES[raw["resourceType"]],
            str(raw["name"]),
            PATTERN_TYPES[raw["patternType"]],
            principal,
            str(raw.get("host") or "*"),
            OPERATIONS[raw["operation"]],
            PERMISSIONS[raw["type"]],
        )
    except (KeyError, TypeError):
        return None


def acl_text(acl: StandardAcl) -> str:
    status = acl_to_status(acl)
    pattern = "" if acl.pattern_type == PatternType.LITERAL else " (prefix)"
    return f"{status['type']} {status['operation']} on {status['resourceType']} {acl.resource_name}{pattern}"


def _key(acl: StandardAcl) -> str:
    return str(acl)


@dataclass(frozen=True)
class UserWork:
    resource: tuple[str, str]
    username: str
    mechanism: str | None = None  # SCRAM mechanism to hold a credential for
    password: str | None = None
    set_password: bool = False  # upsert even if a credential exists (a new or changed password)
    acls: frozenset[StandardAcl] = frozenset()  # wanted
    owned: frozenset[StandardAcl] = frozenset()  # created by this resource before (status.acls)
    remove_mechanisms: tuple[str, ...] = ()  # credentials to delete (authentication changed)
    in_sync: bool = False
    delete: bool = False

    @property
    def principal(self) -> str:
        return principal_of(self.username)


@dataclass
class UserOutcome(Outcome):
    owned: list[StandardAcl] = field(default_factory=list)  # the ACLs this resource now owns

    def fail(self, error: AdminError, what: str, retry_seconds: float) -> None:
        if not self.ready:
            return  # the first failure is the one reported
        self.ready, self.reason, self.message = False, reason_of(error.code), f"{what}: {error}"
        if error.code == ErrorCode.security_disabled:
            self.message = f"{what}: the cluster has no authorizer (set spec.authorization on the KafkaCluster)"
        if error.code in REFUSALS:
            self.refused = True
            self.events.append(("Warning", self.reason, self.message))
        else:
            self.retry_after = retry_seconds


async def _credentials(admin: Admin, users: list[str]) -> dict[str, set[str]]:
    if not users:
        return {}
    found = await describe_user_scram_credentials(admin, users)
    return {user: {mech for mech, _ in infos} for user, infos in found.items()}


async def reconcile_batch(
    admin: Admin, items: Sequence[UserWork], retry_seconds: float = 5.0
) -> list[UserOutcome | BaseException]:
    outcomes = [UserOutcome() for _ in items]
    scram_users = sorted({w.username for w in items if w.mechanism or w.remove_mechanisms or w.delete})
    have = await _credentials(admin, scram_users)

    # SCRAM: deletions first, then upserts (a user may be named once per request)
    deletions: list[tuple[int, str, str]] = []
    for i, w in enumerate(items):
        gone = set(w.remove_mechanisms)
        if w.mechanism:
            (gone.add if w.delete else gone.discard)(w.mechanism)
        deletions += [(i, w.username, m) for m in sorted(gone) if m in have.get(w.username, set())]
    results = await alter_user_scram_credentials_each(admin, delete=[(u, m) for _, u, m in deletions])
    for i, user, mech in deletions:
        error = results.get(user)
        if error is not None:
            outcomes[i].fail(error, f"deleting the {mech} credential", retry_seconds)
    upserts: list[tuple[int, str, str, str]] = []
    for i, w in enumerate(items):
        if w.delete or not w.mechanism or w.password is None:
            continue
        absent = w.mechanism not in have.get(w.username, set())
        if absent or w.set_password:
            upserts.append((i, w.username, w.mechanism, w.password))
            if absent and w.in_sync:
                outcomes[i].drift.append(f"{w.mechanism} credential missing")
    results = await alter_user_scram_credentials_each(
        admin, upsert=[(u, m, p, SCRAM_ITERATIONS) for _, u, m, p in upserts]
    )
    for i, user, mech, _ in upserts:
        error = results.get(user)
        if error is not None:
            outcomes[i].fail(error, f"setting the {mech} credential", retry_seconds)

    # ACLs of the batch's principals: one DescribeAcls, one CreateAcls, one DeleteAcls
    acl_items = [i for i, w in enumerate(items) if w.acls or w.owned]
    if not acl_items:
        return list(outcomes)
    try:
        every = await describe_acls(admin, AclBindingFilter())
    except AdminError as exc:
        if exc.code not in REFUSALS:
            raise
        for i in acl_items:
            outcomes[i].fail(exc, "reading the ACLs", retry_seconds)
            outcomes[i].owned = sorted(items[i].owned, key=_key)
        return list(outcomes)
    existing: dict[str, set[StandardAcl]] = {}
    for acl in every:
        existing.setdefault(acl.principal, set()).add(acl)
    creates: list[tuple[int, StandardAcl]] = []
    deletes: list[tuple[int, StandardAcl]] = []
    for i in acl_items:
        w = items[i]
        present = existing.get(w.principal, set())
        want = set() if w.delete else set(w.acls)
        missing = want - present
        if w.in_sync and not w.delete:
            outcomes[i].drift += [f"ACL missing: {acl_text(a)}" for a in sorted(missing, key=_key)]
        creates += [(i, a) for a in sorted(missing, key=_key)]
        stale = (set(w.owned) | set(w.acls)) - want if w.delete else set(w.owned) - want
        deletes += [(i, a) for a in sorted(stale & present, key=_key)]
        outcomes[i].owned = sorted(want & present, key=_key)
    for (i, acl), error in zip(creates, await create_acls_each(admin, [a for _, a in creates]), strict=True):
        if error is None:
            outcomes[i].owned.append(acl)
        else:
            outcomes[i].fail(error, f"creating the ACL {acl_text(acl)}", retry_seconds)
    exact = [
        AclBindingFilter(
            a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation, a.permission_type
        )
        for _, a in deletes
    ]
    for (i, acl), result in zip(deletes, await delete_acls_each(admin, exact), strict=True):
        if isinstance(result, AdminError):
            outcomes[i].owned.append(acl)  # still ours: deleted next time
            outcomes[i].fail(result, f"deleting the ACL {acl_text(acl)}", retry_seconds)
    for outcome in outcomes:
        outcome.owned = sorted(set(outcome.owned), key=_key)
    return list(outcomes)

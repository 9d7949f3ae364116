"""ACLs as cluster metadata (Kafka's AclControlManager and AclApis' request checks).

CreateAcls: each binding is validated alone (a bad one fails with INVALID_REQUEST, the others
are written); an ACL that already exists succeeds without a record. DeleteAcls: every ACL a
filter matches is removed with a RemoveAccessControlEntryRecord; the results list what each
filter matched.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kopfka import uuids
from kopfka.metadata import records as mr
from kopfka.metadata.image import acl_record
from kopfka.protocol.errors import ErrorCode
from kopfka.security.acls import (
    CLUSTER_NAME,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclsImage,
    PatternType,
    ResourceType,
    StandardAcl,
)
from kopfka.security.principal import KafkaPrincipal

MAX_RECORDS_PER_USER_OP = 10_000  # Kafka's bound on one ACL operation


@dataclass
class AclResult:
    """One CreateAcls binding's or DeleteAcls filter's outcome; `matched`: the ACLs the filter removed."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None
    matched: list[StandardAcl] = field(default_factory=list)  # DeleteAcls: what the filter removed


def validate_new_acl(acl: StandardAcl) -> str | None:
    """Why an ACL cannot be created (INVALID_REQUEST), or None."""
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {acl.resource_type.name}"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {acl.pattern_type.name}"
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {acl.operation.name}"
    if acl.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return f"Invalid permissionType {acl.permission_type.name}"
    if not acl.resource_name:
        return "Resource name should not be empty"
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    try:
        KafkaPrincipal.parse(acl.principal)
    except ValueError as exc:
        return str(exc)
    if not acl.host:
        return "Invalid empty host"
    return None


def plan_create(acls: AclsImage, new: list[StandardAcl]) -> tuple[list[AclResult], list[mr.MetadataRecord]]:
    existing = set(acls)
    results: list[AclResult] = []
    records: list[mr.MetadataRecord] = []
    for acl in new:
        problem = validate_new_acl(acl)
        if problem is not None:
            results.append(AclResult(ErrorCode.invalid_request, problem))
            continue
        if acl not in existing:
            existing.add(acl)
            records.append(acl_record(uuids.to_str(uuids.random_uuid()), acl))
        results.append(AclResult())
    return results, records


def validate_filter(f: AclBindingFilter) -> str | None:
    if f.resource_type == ResourceType.UNKNOWN or f.pattern_type == PatternType.UNKNOWN:
        return "Unknown patternFilter."
    if f.operation == AclOperation.UNKNOWN or f.permission_type == AclPermissionType.UNKNOWN:
        return "Unknown entryFilter."
    return None


def plan_delete(acls: AclsImage, filters: list[AclBindingFilter]) -> tuple[list[AclResult], list[mr.MetadataRecord]]:
    removed: dict[str, mr.MetadataRecord] = {}
    results: list[AclResult] = []
    for f in filters:
        problem = validate_filter(f)
        if problem is not None:
            results.append(AclResult(ErrorCode.invalid_request, problem))
            continue
        matched = [(acl_id, acl) for acl_id, acl in acls.by_id.items() if f.matches(acl)]
        if len(removed) + len(matched) > MAX_RECORDS_PER_USER_OP:
            results.append(
                AclResult(
                    ErrorCode.invalid_request,
                    f"Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls in a single delete operation.",
                )
            )
            continue
        for acl_id, _ in matched:
            removed.setdefault(acl_id, mr.RemoveAccessControlEntryRecord(acl_id))
        results.append(AclResult(matched=[acl for _, acl in matched]))
    return results, list(removed.values())

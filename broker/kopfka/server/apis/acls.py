"""DescribeAcls (from the local image), CreateAcls and DeleteAcls (written by the controller).

As Kafka's AclApis: each needs the authorizer configured (else SECURITY_DISABLED), DescribeAcls
needs DESCRIBE on the cluster and the others ALTER (else CLUSTER_AUTHORIZATION_FAILED).
The wire conversions here are shared with the controller listener and the forwarding channel.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kopfka.protocol.api_versions import EXTRA_APIS
from kopfka.protocol.errors import ErrorCode
from kopfka.security import acls as a
from kopfka.server.apis.registry import api
from kopfka.server.auth_helper import authorize_cluster, authorizer_of
from kopfka.server.request_context import RequestContext

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
EXTRA_APIS[DESCRIBE_ACLS] = (1, 3)
EXTRA_APIS[CREATE_ACLS] = (1, 3)
EXTRA_APIS[DELETE_ACLS] = (1, 3)
NO_AUTHORIZER = "No Authorizer is configured on the broker"


def acl_from_creation(c: Any) -> a.StandardAcl:
    return a.StandardAcl(
        a.resource_type(int(c.resource_type)),
        c.resource_name,
        a.pattern_type(int(c.resource_pattern_type)),
        c.principal,
        c.host,
        a.operation(int(c.operation)),
        a.permission(int(c.permission_type)),
    )


def creation_dict(acl: a.StandardAcl) -> dict[str, Any]:
    return {
        "resource_type": int(acl.resource_type),
        "resource_name": acl.resource_name,
        "resource_pattern_type": int(acl.pattern_type),
        "principal": acl.principal,
        "host": acl.host,
        "operation": int(acl.operation),
        "permission_type": int(acl.permission_type),
    }


def filter_from_wire(f: Any) -> a.AclBindingFilter:
    return a.AclBindingFilter(
        a.resource_type(int(f.resource_type_filter)),
        f.resource_name_filter,
        a.pattern_type(int(f.pattern_type_filter)),
        f.principal_filter,
        f.host_filter,
        a.operation(int(f.operation)),
        a.permission(int(f.permission_type)),
    )


def filter_dict(f: a.AclBindingFilter) -> dict[str, Any]:
    return {
        "resource_type_filter": int(f.resource_type),
        "resource_name_filter": f.resource_name,
        "pattern_type_filter": int(f.pattern_type),
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": int(f.operation),
        "permission_type": int(f.permission_type),
    }


def matching_acl_dict(acl: a.StandardAcl) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "error_message": None,
        "resource_type": int(acl.resource_type),
        "resource_name": acl.resource_name,
        "pattern_type": int(acl.pattern_type),
        "principal": acl.principal,
        "host": acl.host,
        "operation": int(acl.operation),
        "permission_type": int(acl.permission_type),
    }


def acl_from_matching(m: Any) -> a.StandardAcl:
    return a.StandardAcl(
        a.resource_type(int(m.resource_type)),
        m.resource_name,
        a.pattern_type(int(m.pattern_type)),
        m.principal,
        m.host,
        a.operation(int(m.operation)),
        a.permission(int(m.permission_type)),
    )


def describe_resources(acls: Iterable[a.StandardAcl]) -> list[dict[str, Any]]:
    """DescribeAclsResponse.resources: ACLs grouped by resource pattern, in a stable order."""
    grouped: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for acl in sorted(
        acls,
        key=lambda x: (
            x.resource_type,
            x.resource_name,
            x.pattern_type,
            x.principal,
            x.host,
            x.operation,
            x.permission_type,
        ),
    ):
        grouped.setdefault((int(acl.resource_type), acl.resource_name, int(acl.pattern_type)), []).append(
            {
                "principal": acl.principal,
                "host": acl.host,
                "operation": int(acl.operation),
                "permission_type": int(acl.permission_type),
            }
        )
    return [
        {"resource_type": rt, "resource_name": rn, "pattern_type": pt, "acls": entries}
        for (rt, rn, pt), entries in grouped.items()
    ]


def describe_filter_problem(f: a.AclBindingFilter) -> str | None:
    if f.is_unknown():
        return "The request contains an unknown ACL filter element"
    return None


@api(DESCRIBE_ACLS)
async def handle_describe_acls(ctx: RequestContext, req: Any) -> dict[str, Any]:
    def error(code: ErrorCode, message: str | None) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code, "error_message": message, "resources": []}

    if not authorize_cluster(ctx, a.AclOperation.DESCRIBE):
        return error(ErrorCode.cluster_authorization_failed, None)
    if authorizer_of(ctx) is None:
        return error(ErrorCode.security_disabled, NO_AUTHORIZER)
    f = filter_from_wire(req)
    problem = describe_filter_problem(f)
    if problem is not None:
        return error(ErrorCode.invalid_request, problem)
    found = [acl for acl in ctx.image.acls if f.matches(acl)]
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "resources": describe_resources(found),
    }


@api(CREATE_ACLS)
async def handle_create_acls(ctx: RequestContext, req: Any) -> dict[str, Any]:
    def all_fail(code: ErrorCode, message: str | None) -> dict[str, Any]:
        return {"throttle_time": 0, "results": [{"error_code": code, "error_message": message} for _ in req.creations]}

    if not authorize_cluster(ctx, a.AclOperation.ALTER):
        return all_fail(ErrorCode.cluster_authorization_failed, None)
    if authorizer_of(ctx) is None:
        return all_fail(ErrorCode.security_disabled, "No Authorizer is configured.")
    results = await ctx.services.controller.create_acls([acl_from_creation(c) for c in req.creations])
    return {"throttle_time": 0, "results": [{"error_code": r.error, "error_message": r.message} for r in results]}


@api(DELETE_ACLS)
async def handle_delete_acls(ctx: RequestContext, req: Any) -> dict[str, Any]:
    def all_fail(code: ErrorCode, message: str | None) -> dict[str, Any]:
        return {
            "throttle_time": 0,
            "filter_results": [
                {"error_code": code, "error_message": message, "matching_acls": []} for _ in req.filters
            ],
        }

    if not authorize_cluster(ctx, a.AclOperation.ALTER):
        return all_fail(ErrorCode.cluster_authorization_failed, None)
    if authorizer_of(ctx) is None:
        return all_fail(ErrorCode.security_disabled, "No Authorizer is configured.")
    results = await ctx.services.controller.delete_acls([filter_from_wire(f) for f in req.filters])
    return {
        "throttle_time": 0,
        "filter_results": [
            {
                "error_code": r.error,
                "error_message": r.message,
                "matching_acls": [matching_acl_dict(m) for m in r.matched],
            }
            for r in results
        ],
    }

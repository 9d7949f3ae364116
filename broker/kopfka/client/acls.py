"""ACL admin calls (CreateAcls / DescribeAcls / DeleteAcls) over an Admin connection."""

from __future__ import annotations

from kopfka.client.admin import Admin, AdminError, _check, _error
from kopfka.security import acls as a
from kopfka.security.acls import AclBindingFilter, StandardAcl
from kopfka.server.apis.acls import acl_from_matching, creation_dict, filter_dict


async def create_acls(admin: Admin, acls: list[StandardAcl]) -> None:
    for error in await create_acls_each(admin, acls):
        if error is not None:
            raise error


async def create_acls_each(admin: Admin, acls: list[StandardAcl]) -> list[AdminError | None]:
    """One CreateAcls request; each creation's own outcome, in order."""
    if not acls:
        return []
    resp = await admin.conn.request(30, 3, {"creations": [creation_dict(a) for a in acls]})
    return [_error(r.error_code, r.error_message) for r in resp.results]


async def describe_acls(admin: Admin, f: AclBindingFilter) -> list[StandardAcl]:
    resp = await admin.conn.request(29, 3, filter_dict(f))
    _check(resp.error_code, resp.error_message)
    return [
        StandardAcl(
            a.resource_type(int(res.resource_type)),
            res.resource_name,
            a.pattern_type(int(res.pattern_type)),
            d.principal,
            d.host,
            a.operation(int(d.operation)),
            a.permission(int(d.permission_type)),
        )
        for res in resp.resources
        for d in res.acls
    ]


async def delete_acls(admin: Admin, filters: list[AclBindingFilter]) -> list[StandardAcl]:
    removed: list[StandardAcl] = []
    for result in await delete_acls_each(admin, filters):
        if isinstance(result, AdminError):
            raise result
        removed.extend(result)
    return removed


async def delete_acls_each(admin: Admin, filters: list[AclBindingFilter]) -> list[AdminError | list[StandardAcl]]:
    """One DeleteAcls request; per filter the ACLs it removed, or its error."""
    if not filters:
        return []
    resp = await admin.conn.request(31, 3, {"filters": [filter_dict(f) for f in filters]})
    return [
        _error(r.error_code, r.error_message) or [acl_from_matching(m) for m in r.matching_acls]
        for r in resp.filter_results
    ]

"""DescribeUserScramCredentials (from the local image: mechanisms and iterations, never keys)
and AlterUserScramCredentials (forwarded to the controller, which writes the records).
DESCRIBE resp. ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED (Kafka's KafkaApis)."""

from __future__ import annotations

from typing import Any

from kopfka.controller.scram_control import Deletion, Upsertion, describe
from kopfka.protocol.api_versions import EXTRA_APIS
from kopfka.protocol.errors import ErrorCode
from kopfka.security.acls import AclOperation
from kopfka.server.apis.registry import api
from kopfka.server.auth_helper import authorize_cluster
from kopfka.server.request_context import RequestContext

DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51
EXTRA_APIS[DESCRIBE_USER_SCRAM_CREDENTIALS] = (0, 0)
EXTRA_APIS[ALTER_USER_SCRAM_CREDENTIALS] = (0, 0)


@api(DESCRIBE_USER_SCRAM_CREDENTIALS)
async def handle_describe(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.cluster_authorization_failed,
            "error_message": None,
            "results": [],
        }
    users = None if req.users is None else [u.name for u in req.users]
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "results": [
            {
                "user": user,
                "error_code": code,
                "error_message": msg,
                "credential_infos": [{"mechanism": m, "iterations": i} for m, i in infos],
            }
            for user, code, msg, infos in describe(ctx.image.scram, users)
        ],
    }


def deletions_of(req: Any) -> list[Deletion]:
    return [Deletion(d.name, int(d.mechanism)) for d in req.deletions]


def upsertions_of(req: Any) -> list[Upsertion]:
    return [
        Upsertion(u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password))
        for u in req.upsertions
    ]


@api(ALTER_USER_SCRAM_CREDENTIALS)
async def handle_alter(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not authorize_cluster(ctx, AclOperation.ALTER):
        users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
        return {
            "throttle_time": 0,
            "results": [
                {"user": u, "error_code": ErrorCode.cluster_authorization_failed, "error_message": None} for u in users
            ],
        }
    results = await ctx.services.controller.alter_user_scram_credentials(deletions_of(req), upsertions_of(req))
    return {
        "throttle_time": 0,
        "results": [{"user": r.user, "error_code": r.error, "error_message": r.message} for r in results],
    }

"""DescribeClientQuotas (answered from the local metadata image) and AlterClientQuotas
(forwarded to the controller, which validates and writes ClientQuotaRecords)."""

from __future__ import annotations

from typing import Any

from kopfka.controller.client_quota_control import QuotaAlteration, QuotaResult, describe
from kopfka.protocol.api_versions import EXTRA_APIS
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.apis.registry import api
from kopfka.server.auth_helper import AclOperation, authorize_cluster
from kopfka.server.request_context import RequestContext

DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
EXTRA_APIS[DESCRIBE_CLIENT_QUOTAS] = (0, 1)
EXTRA_APIS[ALTER_CLIENT_QUOTAS] = (0, 1)


@api(DESCRIBE_CLIENT_QUOTAS)
async def handle_describe_client_quotas(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed, "error_message": None,
                "entries": None}
    filters = [(c.entity_type, int(c.match_type), c.match) for c in req.components]
    try:
        found = describe(ctx.image.client_quotas, filters, bool(req.strict))
    except KafkaError as exc:
        return {"throttle_time": 0, "error_code": exc.code, "error_message": exc.message, "entries": None}
    entries = [
        {
            "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
            "values": [{"key": k, "value": float(v)} for k, v in sorted(values.items())],
        }
        for entity, values in found
    ]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "entries": entries}


@api(ALTER_CLIENT_QUOTAS)
async def handle_alter_client_quotas(ctx: RequestContext, req: Any) -> dict[str, Any]:
    alterations = [
        QuotaAlteration(
            tuple((e.entity_type, e.entity_name) for e in entry.entity),
            [(op.key, None if op.remove else float(op.value)) for op in entry.ops],
        )
        for entry in req.entries
    ]
    if not authorize_cluster(ctx, AclOperation.ALTER_CONFIGS):
        results = [QuotaResult(a.entity, ErrorCode.cluster_authorization_failed) for a in alterations]
    else:
        results = await ctx.services.controller.alter_client_quotas(alterations, bool(req.validate_only))
    return alter_client_quotas_response(results)


def alter_client_quotas_response(results: list[Any]) -> dict[str, Any]:
    """The AlterClientQuotas response for QuotaResults (brokers and controllers answer alike)."""
    return {
        "throttle_time": 0,
        "entries": [
            {
                "error_code": r.error,
                "error_message": r.message,
                "entity": [{"entity_type": t, "entity_name": n} for t, n in r.entity],
            }
            for r in results
        ],
    }

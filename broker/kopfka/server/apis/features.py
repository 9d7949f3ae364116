"""UpdateFeatures (KIP-584) on brokers: forwarded to the controller, which finalizes feature
levels (metadata.version upgrades and safe downgrades). The levels clients then see come back
in ApiVersions (admin clients' describeFeatures), from the same table (kopfka.metadata.features)."""

from __future__ import annotations

from typing import Any

from kopfka.protocol.api_versions import EXTRA_APIS
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.apis.registry import api
from kopfka.server.auth_helper import AclOperation, authorize_cluster
from kopfka.server.request_context import RequestContext

UPDATE_FEATURES = 57
EXTRA_APIS[UPDATE_FEATURES] = (0, 2)
UPGRADE, SAFE_DOWNGRADE = 1, 2


def feature_updates(req: Any, version: int) -> list[tuple[str, int, int]]:
    """(feature, level, upgrade type); v0 said allow_downgrade, which is a safe downgrade."""
    out = []
    for u in req.feature_updates:
        if version == 0:
            kind = SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE
        else:
            kind = int(u.upgrade_type)
        out.append((u.feature, int(u.max_version_level), kind))
    return out


def update_features_response(names: list[str], code: ErrorCode, message: str | None) -> dict[str, Any]:
    """Kafka's shape: per-feature results (v0-v1) only when the update succeeded."""
    results = [{"feature": n, "error_code": code, "error_message": message} for n in names] if code == 0 else []
    return {"throttle_time": 0, "error_code": code, "error_message": message, "results": results}


@api(UPDATE_FEATURES)
async def handle_update_features(ctx: RequestContext, req: Any) -> dict[str, Any]:
    updates = feature_updates(req, ctx.api_version)
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return update_features_response([u[0] for u in updates], ErrorCode.cluster_authorization_failed, None)
    try:
        validate_only = bool(getattr(req, "validate_only", False))  # v1+
        code, message = await ctx.services.controller.update_features(updates, validate_only=validate_only)
    except KafkaError as exc:
        code, message = exc.code, str(exc)
    return update_features_response([u[0] for u in updates], code, message)

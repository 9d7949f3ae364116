"""ApiVersions (KIP-511): always answerable, even for versions we don't support."""

from __future__ import annotations

from typing import Any

from kopfka.metadata.features import supported_features_list
from kopfka.protocol.api_versions import API_VERSIONS_KEY, advertised_apis
from kopfka.protocol.errors import ErrorCode
from kopfka.server.apis.registry import api
from kopfka.server.request_context import RequestContext


def api_keys() -> list[dict[str, int]]:
    return [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in advertised_apis().items()]


@api(18)
async def handle_api_versions(ctx: RequestContext, req: Any) -> dict[str, Any]:
    error = ErrorCode.none
    if req is not None and ctx.api_version >= 3:
        name = req.client_software_name or ""
        version = req.client_software_version or ""
        valid = lambda s: bool(s) and all(c.isalnum() or c in ".-" for c in s) and s[0].isalnum() and s[-1].isalnum()  # noqa: E731
        if not (valid(name) and valid(version)):
            error = ErrorCode.invalid_request
        else:  # kept on the connection by the network layer
            ctx.client_software_name, ctx.client_software_version = name, version
    image = ctx.image
    return {
        "error_code": error,
        "api_keys": api_keys(),
        "throttle_time": 0,
        # before v4, features whose minimum is 0 are left out: older clients reject a 0 minimum (as Kafka)
        "supported_features": [
            f for f in supported_features_list() if ctx.api_version >= 4 or f["min_version"] != 0
        ],
        "finalized_features_epoch": image.provenance.last_offset,
        "finalized_features": [
            {"name": n, "max_version_level": v, "min_version_level": v} for n, v in image.features.items()
        ],
        "zk_migration_ready": False,
    }


def unsupported_version_response() -> dict[str, Any]:
    """KIP-511: an ApiVersions version we don't know is answered in v0 with only ApiVersions' own
    range, so the client can retry at a version both know (as Kafka's getErrorResponse)."""
    own = [k for k in api_keys() if k["api_key"] == API_VERSIONS_KEY]
    return {"error_code": ErrorCode.unsupported_version, "api_keys": own, "throttle_time": 0}

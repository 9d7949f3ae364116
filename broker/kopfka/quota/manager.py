"""QuotaManagers: the broker's quota managers in one place, fed from the metadata image.

Installed as a metadata publisher: client-quota records (user / client-id / ip entities) are
applied when a delta touches them, so a quota change takes effect for connected clients on their
next request. The connection limits (max.connections and friends) are dynamic broker configs:
kopfka.server.dynamic_config applies them to `connections`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kopfka.metadata.image import MetadataDelta, MetadataImage
from kopfka.quota.client_quota_manager import (
    IP,
    QUOTA_KEYS,
    ClientFetchQuotaManager,
    ClientQuotaManager,
    ClientRequestQuotaManager,
    ControllerMutationQuotaManager,
    Entity,
    QuotaType,
)
from kopfka.quota.connection_quotas import CONNECTION_CREATION_RATE, ConnectionQuotas, parse_overrides
from kopfka.quota.stats import MetricConfig

ANONYMOUS = "ANONYMOUS"

# first request version answered strictly (THROTTLING_QUOTA_EXCEEDED) per mutating API
STRICT_SINCE = {19: 6, 20: 5, 37: 3}


def user_of(ctx: Any) -> str:
    """The principal's name for quota entities; without SASL every client is User:ANONYMOUS."""
    principal = getattr(ctx, "principal", None)
    if not principal:
        return ANONYMOUS
    name = str(principal)
    return name.split(":", 1)[1] if name.startswith("User:") else name


class QuotaManagers:
    name = "QuotaManagers"

    def __init__(
        self, values: Mapping[str, Any], *, node_id: int | None = None, protected_listener: str | None = None
    ) -> None:
        self.node_id = node_id
        cfg = MetricConfig(
            int(values.get("quota.window.num", 11)), int(values.get("quota.window.size.seconds", 1)) * 1000
        )
        ctl = MetricConfig(
            int(values.get("controller.quota.window.num", 11)),
            int(values.get("controller.quota.window.size.seconds", 1)) * 1000,
        )
        self.produce = ClientQuotaManager(QuotaType.PRODUCE, cfg)
        self.fetch = ClientFetchQuotaManager(cfg)
        self.request = ClientRequestQuotaManager(cfg)
        self.controller_mutation = ControllerMutationQuotaManager(ctl)
        self.connections = ConnectionQuotas(
            cfg,
            max_connections=int(values.get("max.connections", 2**31 - 1)),
            max_per_ip=int(values.get("max.connections.per.ip", 2**31 - 1)),
            per_ip_overrides=parse_overrides(str(values.get("max.connections.per.ip.overrides") or "")),
            max_creation_rate=int(values.get("max.connection.creation.rate", 2**31 - 1)),
            protected_listener=protected_listener,
        )

    @property
    def client_managers(self) -> tuple[ClientQuotaManager, ...]:
        return (self.produce, self.fetch, self.request, self.controller_mutation)

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        if delta.changed_quotas or delta.finished_snapshot:
            self.apply_client_quotas(image.client_quotas)

    def apply_client_quotas(self, quotas: Mapping[Entity, Mapping[str, float]]) -> None:
        per_type: dict[str, dict[Entity, float]] = {k: {} for k in QUOTA_KEYS.values()}
        ip_rates: dict[str | None, float] = {}
        for entity, values in quotas.items():
            if entity and entity[0][0] == IP:
                if CONNECTION_CREATION_RATE in values:
                    ip_rates[entity[0][1]] = float(values[CONNECTION_CREATION_RATE])
                continue
            for key, value in values.items():
                if key in per_type:
                    per_type[key][entity] = float(value)
        for mgr in self.client_managers:
            mgr.update_quotas(per_type[mgr.key])
        self.connections.update_ip_quotas(ip_rates)

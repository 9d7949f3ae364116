"""QuotaManagers: the broker's quota managers in one place, fed from the metadata image.

Installed as a metadata publisher: client-quota records (user / client-id / ip entities) and
dynamic broker configs (max.connections and friends) are applied when a delta touches them,
so a quota change takes effect for connected clients on their next request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kopfka.metadata.image import BROKER_RESOURCE, MetadataDelta, MetadataImage
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
CONNECTION_KEYS = (
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "max.connection.creation.rate",
)

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
        self.static_values = dict(values)

    @property
    def client_managers(self) -> tuple[ClientQuotaManager, ...]:
        return (self.produce, self.fetch, self.request, self.controller_mutation)

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        if delta.changed_quotas or delta.finished_snapshot:
            self.apply_client_quotas(image.client_quotas)
        if any(rtype == BROKER_RESOURCE for rtype, _ in delta.changed_configs):
            self.apply_broker_config(image.broker_config(self.node_id))

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

    def apply_broker_config(self, dynamic: Mapping[str, str]) -> None:
        """Dynamic cluster-default broker configs over the static ones (connection limits)."""

        def value(key: str) -> Any:
            return dynamic.get(key, self.static_values.get(key))

        try:
            self.connections.update_limits(
                max_connections=int(value("max.connections") or 2**31 - 1),
                max_per_ip=int(value("max.connections.per.ip") or 2**31 - 1),
                per_ip_overrides=parse_overrides(str(value("max.connections.per.ip.overrides") or "")),
                max_creation_rate=int(value("max.connection.creation.rate") or 2**31 - 1),
            )
        except ValueError:
            pass

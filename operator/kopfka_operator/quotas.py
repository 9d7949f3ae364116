"""Quota resources reconciled into Kafka's client quotas, many resources of a cluster per batch.

A Quota names one entity (user, client id, both, or an IP address; or the default of each) and
some of the five keys. Each (entity, key) has one owner: the oldest Quota of the cluster that
names it; a newer one naming the same key reports the conflict and leaves that key alone, so
two resources never fight over a value. A batch reads every quota of the cluster with one
DescribeClientQuotas and writes all changes with one AlterClientQuotas; a value changed by
another admin client while the resource was in sync is drift, put back and reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kopfka.client.admin import Admin
from kopfka.client.quotas import alter_client_quotas_many, describe_client_quotas

from .crds import QUOTA_KEYS
from .kafka_pool import Outcome, reason_of
from .topics import REFUSALS

Entity = tuple[tuple[str, str | None], ...]  # sorted (Kafka entity type, name or None = <default>)
ENTITY_TYPES = {"user": "user", "clientId": "client-id", "ip": "ip"}  # spec.entity key -> Kafka
KAFKA_KEY = {key: kafka for key, (kafka, _) in QUOTA_KEYS.items()}  # spec key -> Kafka key
SPEC_KEY = {kafka: key for key, kafka in KAFKA_KEY.items()}


class QuotaSpecError(ValueError):
    """A spec the schema should have refused (a cluster without the CRD's validation)."""


def entity_of(spec: Mapping[str, Any]) -> Entity:
    entity = spec.get("entity") or {}
    parts: list[tuple[str, str | None]] = []
    for key, kafka_type in ENTITY_TYPES.items():
        ref = entity.get(key)
        if ref is None:
            continue
        if ref.get("default") is True and "name" not in ref:
            parts.append((kafka_type, None))
        elif isinstance(ref.get("name"), str) and ref["name"] and "default" not in ref:
            parts.append((kafka_type, ref["name"]))
        else:
            raise QuotaSpecError(f"spec.entity.{key} needs either a name or default: true")
    if not parts:
        raise QuotaSpecError("spec.entity names no user, clientId or ip")
    return tuple(sorted(parts))


def entity_text(entity: Entity) -> str:
    return ",".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


def values_of(spec: Mapping[str, Any]) -> dict[str, float]:
    """spec key -> value of the keys the spec sets."""
    return {key: float(spec[key]) for key in QUOTA_KEYS if spec.get(key) is not None}


@dataclass(frozen=True)
class QuotaWork:
    resource: tuple[str, str]
    entity: Entity
    values: Mapping[str, float] = field(default_factory=dict)  # spec key -> value, keys it owns
    release: frozenset[str] = frozenset()  # spec keys it applied before and gives up now
    in_sync: bool = False
    delete: bool = False


@dataclass
class QuotaOutcome(Outcome):
    applied: dict[str, float] = field(default_factory=dict)  # spec key -> value in Kafka


async def reconcile_batch(
    admin: Admin, items: Sequence[QuotaWork], retry_seconds: float = 5.0
) -> list[QuotaOutcome | BaseException]:
    current = {tuple(sorted(entity)): values for entity, values in await describe_client_quotas(admin)}
    # Several resources may share an entity (different keys): one entry per entity.
    changes: dict[Entity, tuple[dict[str, float], set[str]]] = {}
    outcomes: list[QuotaOutcome] = []
    for w in items:
        have = current.get(w.entity, {})
        outcome = QuotaOutcome()
        set_values, remove = changes.setdefault(w.entity, ({}, set()))
        if not w.delete:
            for key, value in sorted(w.values.items()):
                kafka = KAFKA_KEY[key]
                if have.get(kafka) != value:
                    set_values[kafka] = value
                    old = have.get(kafka)
                    outcome.drift.append(f"{key} {'missing' if old is None else _num(old)} (spec {_num(value)})")
                outcome.applied[key] = value
        for key in sorted(w.release):
            if KAFKA_KEY[key] in have:
                remove.add(KAFKA_KEY[key])
        if not w.in_sync or w.delete:
            outcome.drift = []
        outcomes.append(outcome)
    todo = [(e, s, sorted(r - set(s))) for e, (s, r) in changes.items() if s or r]
    results = dict(zip([e for e, _, _ in todo], await alter_client_quotas_many(admin, todo), strict=True))
    for w, outcome in zip(items, outcomes, strict=True):
        err = results.get(w.entity)
        if err is None:
            if w.delete:
                outcome.message = f"removed {', '.join(sorted(w.release)) or 'nothing'} of {entity_text(w.entity)}"
            continue
        outcome.ready, outcome.drift = False, []
        outcome.reason, outcome.message = reason_of(err.code), str(err)
        have = current.get(w.entity, {})
        outcome.applied = {key: have[KAFKA_KEY[key]] for key in w.values if KAFKA_KEY[key] in have}
        if err.code in REFUSALS:
            outcome.refused = True
            outcome.events.append(("Warning", outcome.reason, outcome.message))
        else:
            outcome.retry_after = retry_seconds
    return list(outcomes)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)

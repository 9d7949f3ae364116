"""Client quotas as cluster metadata: validating AlterClientQuotas and building its records.

Pure functions over a MetadataImage, used by the controller (writes) and by brokers
(DescribeClientQuotas answers from the local image). Entities are user and/or client-id, or
ip alone; a None name is the `<default>` entity of that type.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kopfka.metadata import records as mr
from kopfka.protocol.errors import ErrorCode, KafkaError

USER, CLIENT_ID, IP = "user", "client-id", "ip"
Entity = tuple[tuple[str, str | None], ...]

# key -> whether it must be a whole number
CLIENT_KEYS = {
    "producer_byte_rate": True,
    "consumer_byte_rate": True,
    "request_percentage": False,
    "controller_mutation_rate": False,
}
IP_KEYS = {"connection_creation_rate": True}

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


@dataclass
class QuotaAlteration:
    """One entity of AlterClientQuotas with its (key, value) changes; a None value removes the key."""

    entity: Entity
    ops: list[tuple[str, float | None]]  # (key, value) ; None removes


@dataclass
class QuotaResult:
    """One entity's AlterClientQuotas outcome."""

    entity: Entity
    error: ErrorCode = ErrorCode.none
    message: str | None = None


def normalize_entity(components: Iterable[tuple[str, str | None]]) -> Entity:
    comps = list(components)
    types = [t for t, _ in comps]
    if not comps:
        raise KafkaError(ErrorCode.invalid_request, "Invalid empty client quota entity")
    if len(set(types)) != len(types):
        raise KafkaError(ErrorCode.invalid_request, f"Duplicate entity type in client quota entity {comps}")
    for t, name in comps:
        if t not in (USER, CLIENT_ID, IP):
            raise KafkaError(ErrorCode.invalid_request, f"Unhandled client quota entity type: {t}")
        if name == "":
            raise KafkaError(ErrorCode.invalid_request, f"Empty {t} is not allowed in a client quota entity")
    if IP in types:
        if len(types) != 1:
            raise KafkaError(
                ErrorCode.invalid_request,
                "Invalid quota entity combination: ip cannot be combined with user or client-id",
            )
        name = comps[0][1]
        if name is not None:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                raise KafkaError(ErrorCode.invalid_request, f"{name} is not a valid IP address") from None
    return tuple(sorted(comps, key=lambda c: c[0]))


def validate_value(entity: Entity, key: str, value: float | None) -> None:
    keys = IP_KEYS if entity[0][0] == IP else CLIENT_KEYS
    if key not in keys:
        kind = "ip" if keys is IP_KEYS else "user/client-id"
        raise KafkaError(ErrorCode.invalid_request, f"Invalid configuration key {key} for {kind} entity")
    if value is None:
        return
    if value != value or value in (float("inf"), float("-inf")):
        raise KafkaError(ErrorCode.invalid_request, f"Invalid value {value} for {key}")
    if value <= 0:
        raise KafkaError(ErrorCode.invalid_request, f"Quota {key} must be greater than 0, got {value}")
    if keys[key] and value != int(value):
        raise KafkaError(ErrorCode.invalid_request, f"Quota {key} must be a whole number, got {value}")


def plan_alterations(alterations: list[QuotaAlteration]) -> tuple[list[QuotaResult], list[mr.MetadataRecord]]:
    """Validate each entity independently; a bad entity fails alone, the others are written."""
    results: list[QuotaResult] = []
    records: list[mr.MetadataRecord] = []
    for alt in alterations:
        try:
            entity = normalize_entity(alt.entity)
            res = QuotaResult(entity)
            seen: set[str] = set()
            recs = []
            for key, value in alt.ops:
                if key in seen:
                    raise KafkaError(ErrorCode.invalid_request, f"Duplicate quota key {key} for entity")
                seen.add(key)
                validate_value(entity, key, value)
                recs.append(mr.ClientQuotaRecord(entity, key, value))
            records.extend(recs)
        except KafkaError as exc:
            res = QuotaResult(tuple(alt.entity), exc.code, exc.message)
        results.append(res)
    return results, records


def describe(
    quotas: Mapping[Entity, Mapping[str, float]], filters: list[tuple[str, int, str | None]], strict: bool
) -> list[tuple[Entity, dict[str, float]]]:
    """Entities matching every (type, match_type, name) filter; strict = no other types."""
    wanted = {t for t, _, _ in filters}
    if len(wanted) != len(filters):
        raise KafkaError(ErrorCode.invalid_request, "Duplicate entity type in DescribeClientQuotas filter")
    for t, mtype, _ in filters:
        if t not in (USER, CLIENT_ID, IP):
            raise KafkaError(ErrorCode.invalid_request, f"Unhandled client quota entity type: {t}")
        if mtype not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise KafkaError(ErrorCode.invalid_request, f"Unknown match type {mtype}")
    if IP in wanted and len(wanted) > 1:
        raise KafkaError(
            ErrorCode.invalid_request, "Invalid entity filter component combination: ip with user or client-id"
        )
    out = []
    for entity, values in quotas.items():
        comps = dict(entity)
        if strict and set(comps) != wanted:
            continue
        if IP in comps and IP not in wanted and wanted:
            continue
        if not wanted and strict:
            continue
        ok = True
        for t, mtype, name in filters:
            if t not in comps:
                ok = False
            elif mtype == MATCH_EXACT:
                ok = comps[t] == name
            elif mtype == MATCH_DEFAULT:
                ok = comps[t] is None
            else:
                ok = comps[t] is not None
            if not ok:
                break
        if ok and values:
            out.append((entity, dict(values)))
    return sorted(out, key=lambda e: [(t, n or "") for t, n in e[0]])

"""Client-quota admin calls (DescribeClientQuotas / AlterClientQuotas) over an Admin connection."""

from __future__ import annotations

from collections.abc import Sequence

from kopfka.client.admin import Admin, AdminError, _check, _error

Entity = list[tuple[str, str | None]]  # (entity type, name or None for <default>)
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


async def describe_client_quotas(
    admin: Admin, filters: list[tuple[str, int, str | None]] | None = None, strict: bool = False
) -> list[tuple[Entity, dict[str, float]]]:
    resp = await admin.conn.request(
        48,
        1,
        {
            "components": [{"entity_type": t, "match_type": m, "match": n} for t, m, n in (filters or [])],
            "strict": strict,
        },
    )
    _check(resp.error_code, resp.error_message)
    return [
        ([(e.entity_type, e.entity_name) for e in entry.entity], {v.key: v.value for v in entry.values})
        for entry in resp.entries or ()
    ]


async def alter_client_quotas(
    admin: Admin,
    entity: Entity,
    set_values: dict[str, float] | None = None,
    remove: list[str] | None = None,
    validate_only: bool = False,
) -> None:
    ops = [{"key": k, "value": float(v), "remove": False} for k, v in (set_values or {}).items()]
    ops += [{"key": k, "value": 0.0, "remove": True} for k in (remove or [])]
    resp = await admin.conn.request(
        49,
        1,
        {
            "entries": [{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity], "ops": ops}],
            "validate_only": validate_only,
        },
    )
    for e in resp.entries:
        _check(e.error_code, e.error_message)


async def alter_client_quotas_many(
    admin: Admin,
    changes: Sequence[tuple[Sequence[tuple[str, str | None]], dict[str, float], list[str]]],
    validate_only: bool = False,
) -> list[AdminError | None]:
    """Several entities in one AlterClientQuotas: (entity, values to set, keys to remove) each;
    one result per entity, in order (each entity is applied whole or not at all)."""
    if not changes:
        return []
    entries = []
    for entity, set_values, remove in changes:
        ops = [{"key": k, "value": float(v), "remove": False} for k, v in set_values.items()]
        ops += [{"key": k, "value": 0.0, "remove": True} for k in remove]
        entries.append({"entity": [{"entity_type": t, "entity_name": n} for t, n in entity], "ops": ops})
    resp = await admin.conn.request(49, 1, {"entries": entries, "validate_only": validate_only})
    by_entity = {
        tuple(sorted((e.entity_type, e.entity_name) for e in r.entity)): _error(r.error_code, r.error_message)
        for r in resp.entries
    }
    return [by_entity.get(tuple(sorted(entity))) for entity, _, _ in changes]

"""Client-quota admin calls (DescribeClientQuotas / AlterClientQuotas) over an Admin connection."""

from __future__ import annotations

from kopfka.client.admin import Admin, _check

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

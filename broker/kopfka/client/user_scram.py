"""SCRAM credential admin calls (AlterUserScramCredentials / DescribeUserScramCredentials).

As Kafka's admin client and kafka-configs: the client salts and hashes the password
(PBKDF2 with a random salt); only the salted password travels, and the controller keeps
StoredKey/ServerKey."""

from __future__ import annotations

import secrets

from kopfka.client.admin import Admin, AdminError, _check, _error
from kopfka.protocol.errors import ErrorCode
from kopfka.security import scram


async def alter_user_scram_credentials(
    admin: Admin,
    upsert: list[tuple[str, str, str, int]] | None = None,  # (user, mechanism, password, iterations)
    delete: list[tuple[str, str]] | None = None,  # (user, mechanism)
) -> None:
    for error in (await alter_user_scram_credentials_each(admin, upsert, delete)).values():
        if error is not None:
            raise error


async def alter_user_scram_credentials_each(
    admin: Admin,
    upsert: list[tuple[str, str, str, int]] | None = None,
    delete: list[tuple[str, str]] | None = None,
) -> dict[str, AdminError | None]:
    """One AlterUserScramCredentials request; each user's own outcome (a user may be named once
    per request, as Kafka's controller requires)."""
    upsertions = []
    for user, mech, password, iterations in upsert or []:
        salt = secrets.token_bytes(32)
        upsertions.append(
            {
                "name": user,
                "mechanism": scram.MECHANISMS[mech.upper()][0],
                "iterations": iterations,
                "salt": salt,
                "salted_password": scram.salted_password(mech, password, salt, iterations),
            }
        )
    deletions = [{"name": u, "mechanism": scram.MECHANISMS[m.upper()][0]} for u, m in delete or []]
    if not upsertions and not deletions:
        return {}
    resp = await admin.conn.request(51, 0, {"deletions": deletions, "upsertions": upsertions})
    return {
        r.user: _error(r.error_code, f"user {r.user}: {r.error_message}" if r.error_message else f"user {r.user}")
        for r in resp.results
    }


async def describe_user_scram_credentials(
    admin: Admin, users: list[str] | None = None
) -> dict[str, list[tuple[str, int]]]:
    """user -> [(mechanism name, iterations)]; a named user without credentials is an AdminError."""
    resp = await admin.conn.request(50, 0, {"users": None if not users else [{"name": u} for u in users]})
    _check(resp.error_code, resp.error_message)
    out: dict[str, list[tuple[str, int]]] = {}
    for r in resp.results:
        code = ErrorCode(int(r.error_code))
        if code == ErrorCode.resource_not_found:
            out[r.user] = []
            continue
        if code != ErrorCode.none:
            raise AdminError(code, r.error_message)
        out[r.user] = [
            (scram.MECHANISM_BY_TYPE.get(int(c.mechanism), str(c.mechanism)), int(c.iterations))
            for c in r.credential_infos
        ]
    return out

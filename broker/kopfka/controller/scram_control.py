"""SCRAM credentials as cluster metadata (Kafka's ScramControlManager and ScramImage.describe).

AlterUserScramCredentials carries the salt and salted password the client computed; the
controller keeps only StoredKey/ServerKey (UserScramCredentialRecord). A user may appear once
per request; a bad entry fails alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kopfka.metadata import records as mr
from kopfka.protocol.errors import ErrorCode
from kopfka.security import scram

MECHANISM_NAMES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}


@dataclass(frozen=True)
class Upsertion:
    """An AlterUserScramCredentials upsertion: user, mechanism, iterations, salt and the client's salted password."""

    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True)
class Deletion:
    """An AlterUserScramCredentials deletion: a user's credential for one mechanism."""

    name: str
    mechanism: int


@dataclass
class UserResult:
    """One user's AlterUserScramCredentials outcome."""

    user: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None


def _check_name_and_mechanism(name: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in MECHANISM_NAMES:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


def plan_alterations(
    existing: Mapping[tuple[str, int], scram.ScramCredential], deletions: list[Deletion], upsertions: list[Upsertion]
) -> tuple[list[UserResult], list[mr.MetadataRecord]]:
    errors: dict[str, tuple[ErrorCode, str]] = {}
    to_delete: dict[str, Deletion] = {}
    to_upsert: dict[str, Upsertion] = {}
    twice = (ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request")
    for d in deletions:
        if d.name in errors:
            continue
        if to_delete.pop(d.name, None) is not None:
            errors[d.name] = twice
            continue
        problem = _check_name_and_mechanism(d.name, d.mechanism)
        if problem is None and (d.name, d.mechanism) not in existing:
            problem = (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")
        if problem is not None:
            errors[d.name] = problem
        else:
            to_delete[d.name] = d
    for u in upsertions:
        if u.name in errors:
            continue
        if to_delete.pop(u.name, None) is not None or to_upsert.pop(u.name, None) is not None:
            errors[u.name] = twice
            continue
        problem = _check_name_and_mechanism(u.name, u.mechanism)
        if problem is None and u.iterations < scram.MIN_ITERATIONS:
            problem = (ErrorCode.unacceptable_credential, "Too few iterations")
        elif problem is None and u.iterations > scram.MAX_ITERATIONS:
            problem = (ErrorCode.unacceptable_credential, "Too many iterations")
        if problem is not None:
            errors[u.name] = problem
        else:
            to_upsert[u.name] = u
    results: list[UserResult] = []
    records: list[mr.MetadataRecord] = []
    for d in to_delete.values():
        records.append(mr.RemoveUserScramCredentialRecord(d.name, d.mechanism))
        results.append(UserResult(d.name))
    for u in to_upsert.values():
        cred = scram.credential_from_salted(MECHANISM_NAMES[u.mechanism], u.salted_password, u.salt, u.iterations)
        records.append(
            mr.UserScramCredentialRecord(u.name, u.mechanism, u.salt, cred.stored_key, cred.server_key, u.iterations)
        )
        results.append(UserResult(u.name))
    results.extend(UserResult(name, code, msg) for name, (code, msg) in errors.items())
    return results, records


def describe(
    credentials: Mapping[tuple[str, int], scram.ScramCredential], users: list[str] | None
) -> list[tuple[str, ErrorCode, str | None, list[tuple[int, int]]]]:
    """(user, error, message, [(mechanism, iterations)]) per user; all users when `users` is empty."""
    by_user: dict[str, list[tuple[int, int]]] = {}
    for (user, mech), cred in sorted(credentials.items()):
        by_user.setdefault(user, []).append((mech, cred.iterations))
    if not users:
        return [(u, ErrorCode.none, None, infos) for u, infos in by_user.items()]
    seen: dict[str, bool] = {}
    for u in users:
        seen[u] = u in seen
    out: list[tuple[str, ErrorCode, str | None, list[tuple[int, int]]]] = []
    for u, duplicated in seen.items():
        if duplicated:
            msg = f"Cannot describe SCRAM credentials for the same user twice in a single request: {u}"
            out.append((u, ErrorCode.duplicate_resource, msg, []))
        elif u not in by_user:
            out.append(
                (u, ErrorCode.resource_not_found, f"Attempt to describe a user credential that does not exist: {u}", [])
            )
        else:
            out.append((u, ErrorCode.none, None, by_user[u]))
    return out

"""StandardAuthorizer semantics (Kafka's StandardAuthorizerData / Authorizer defaults), pure:
literal, wildcard and prefixed patterns, deny wins, implied DESCRIBE / DESCRIBE_CONFIGS (for
ALLOW only), principal and host wildcards, super users, allow.everyone.if.no.acl.found,
authorize-by-resource-type, authorized-operation bit fields, binding filters, and the
controller's CreateAcls/DeleteAcls planning."""

from __future__ import annotations

import pytest
from kopfka.config.definitions import ConfigError
from kopfka.controller.acl_control import plan_create, plan_delete
from kopfka.metadata import records as mr
from kopfka.metadata.image import replay
from kopfka.security.acls import (
    WILDCARD,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclsImage,
    PatternType,
    ResourceType,
    StandardAcl,
)
from kopfka.security.authorizer import STANDARD_AUTHORIZER, StandardAuthorizer, parse_super_users
from kopfka.security.principal import KafkaPrincipal

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
HOST = "127.0.0.1"
R, W, D, A, DC, AC, ALL = (
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.DESCRIBE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.ALL,
)
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


def acl(
    name: str,
    op: AclOperation,
    perm: AclPermissionType = ALLOW,
    *,
    pattern: PatternType = LIT,
    principal: str = "User:alice",
    host: str = WILDCARD,
    rtype: ResourceType = TOPIC,
) -> StandardAcl:
    return StandardAcl(rtype, name, pattern, principal, host, op, perm)


def authz(*acls: StandardAcl, supers: str = "", allow_if_none: bool = False) -> StandardAuthorizer:
    image = AclsImage({str(i): a for i, a in enumerate(acls)})
    return StandardAuthorizer(lambda: image, parse_super_users(supers), allow_if_none)


def ok(
    a: StandardAuthorizer,
    op: AclOperation,
    name: str,
    who: KafkaPrincipal = ALICE,
    host: str = HOST,
    rtype: ResourceType = TOPIC,
) -> bool:
    return a.authorize(who, host, op, rtype, name, log_denied=False)


def test_literal_wildcard_and_prefixed_patterns() -> None:
    a = authz(acl("orders", R), acl("logs-", W, pattern=PRE), acl(WILDCARD, D, rtype=GROUP))
    assert ok(a, R, "orders") and not ok(a, R, "orders2") and not ok(a, R, "order")
    assert ok(a, W, "logs-app") and ok(a, W, "logs-") and not ok(a, W, "logs")
    assert ok(a, D, "any-group", rtype=GROUP) and ok(a, D, WILDCARD, rtype=GROUP)
    assert not ok(a, R, "orders", who=BOB)


def test_deny_wins_over_any_allow() -> None:
    a = authz(acl("p", R, pattern=PRE), acl("p-secret", R, DENY), acl(WILDCARD, R, principal="User:*"))
    assert ok(a, R, "p-ok") and not ok(a, R, "p-secret")
    b = authz(acl("x", ALL), acl("x", W, DENY, principal="User:*"))
    assert ok(b, R, "x") and not ok(b, W, "x")
    c = authz(acl("team-", R, DENY, pattern=PRE), acl("team-a", R))
    assert not ok(c, R, "team-a")


def test_implied_describe_only_for_allow() -> None:
    for op in (R, W, AclOperation.DELETE, A):
        assert ok(authz(acl("t", op)), D, "t"), op
    assert not ok(authz(acl("t", AclOperation.CREATE)), D, "t")
    assert ok(authz(acl("t", AC)), DC, "t") and not ok(authz(acl("t", DC)), AC, "t")
    # a DENY of READ does not deny DESCRIBE; a DENY of DESCRIBE does
    assert ok(authz(acl("t", ALL), acl("t", R, DENY)), D, "t")
    assert not ok(authz(acl("t", ALL), acl("t", D, DENY)), D, "t")


def test_hosts_and_principal_wildcard() -> None:
    a = authz(acl("t", R, host="10.0.0.1"), acl("u", R, principal="User:*", host=HOST))
    assert ok(a, R, "t", host="10.0.0.1") and not ok(a, R, "t")
    assert ok(a, R, "u", who=BOB) and not ok(a, R, "u", who=BOB, host="10.0.0.2")


def test_no_acl_defaults_and_super_users() -> None:
    a = authz(acl("t", R))
    assert not ok(a, R, "other")  # no ACL on it: default deny
    b = authz(acl("t", R), allow_if_none=True)
    assert ok(b, W, "other") and not ok(b, W, "t")  # t has ACLs (none matching): no
    s = authz(acl("t", R, DENY, principal="User:*"), supers="User:admin; User:CN=b,O=k")
    assert ok(s, R, "t", who=KafkaPrincipal("User", "admin"))
    assert ok(s, AclOperation.CLUSTER_ACTION, "kafka-cluster", who=KafkaPrincipal("User", "CN=b,O=k"), rtype=CLUSTER)
    with pytest.raises(ConfigError, match=r"super\.users"):
        parse_super_users("admin")


def test_from_config() -> None:
    assert StandardAuthorizer.from_config({"authorizer.class.name": ""}, lambda: AclsImage()) is None
    with pytest.raises(ConfigError, match="AclAuthorizer"):
        StandardAuthorizer.from_config(
            {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}, lambda: AclsImage()
        )
    with pytest.raises(ConfigError, match="provides"):
        StandardAuthorizer.from_config({"authorizer.class.name": "com.example.Mine"}, lambda: AclsImage())
    a = StandardAuthorizer.from_config(
        {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:x", "allow.everyone.if.no.acl.found": True},
        lambda: AclsImage(),
    )
    assert a is not None and a.allow_if_no_acl and a.super_users == {"User:x"}


def test_authorize_by_resource_type() -> None:
    """KIP-679: WRITE on any topic lets an idempotent producer start."""
    assert authz(acl("a", W)).authorize_by_resource_type(ALICE, HOST, W, TOPIC)
    assert authz(acl("a-", W, pattern=PRE)).authorize_by_resource_type(ALICE, HOST, W, TOPIC)
    assert not authz(acl("a", W), acl("a", W, DENY)).authorize_by_resource_type(ALICE, HOST, W, TOPIC)
    assert not authz(acl("ab", W), acl("a", W, DENY, pattern=PRE)).authorize_by_resource_type(ALICE, HOST, W, TOPIC)
    assert not authz(acl(WILDCARD, W), acl(WILDCARD, W, DENY)).authorize_by_resource_type(ALICE, HOST, W, TOPIC)
    assert authz(acl(WILDCARD, ALL)).authorize_by_resource_type(ALICE, HOST, W, TOPIC)
    assert not authz(acl("a", R)).authorize_by_resource_type(ALICE, HOST, W, TOPIC)
    assert authz(supers="User:alice").authorize_by_resource_type(ALICE, HOST, W, TOPIC)


def test_authorized_operations_bits() -> None:
    bits = authz(acl("t", R), acl("t", AC)).authorized_operations(ALICE, HOST, TOPIC, "t")
    want = {R, D, DC, AC}
    assert bits == sum(1 << int(o) for o in want)


def test_filters_match_as_kafka() -> None:
    lit, pre, wild = acl("foo", R), acl("fo", R, pattern=PRE), acl(WILDCARD, R)
    m = AclBindingFilter(TOPIC, "foo", PatternType.MATCH)
    assert m.matches(lit) and m.matches(pre) and m.matches(wild)
    assert not AclBindingFilter(TOPIC, "bar", PatternType.MATCH).matches(pre)
    assert AclBindingFilter(TOPIC, "fo", PatternType.ANY).matches(pre) and not AclBindingFilter(
        TOPIC, "foo", PatternType.ANY
    ).matches(pre)
    assert AclBindingFilter(ResourceType.ANY).matches(lit)
    assert not AclBindingFilter(principal="User:bob").matches(lit)
    assert AclBindingFilter(operation=R, permission_type=ALLOW).matches(lit)
    assert AclBindingFilter(resource_type=ResourceType.UNKNOWN).is_unknown()


def test_controller_plans_create_and_delete() -> None:
    image = AclsImage()
    results, records = plan_create(
        image,
        [
            acl("t", R),
            acl("t", R),
            acl("", R),
            acl("kafka", A, rtype=CLUSTER),
            acl("t", ResourceType.ANY),
            StandardAcl(TOPIC, "t", PatternType.MATCH, "User:a", "*", R, ALLOW),
            acl("t", R, principal="alice"),
        ],
    )
    codes = [r.error.name for r in results]
    assert codes == [
        "none",
        "none",
        "invalid_request",
        "invalid_request",
        "invalid_request",
        "invalid_request",
        "invalid_request",
    ]
    assert len(records) == 1  # the same ACL twice is written once
    img = replay(records)
    assert list(img.acls) == [acl("t", R)]
    again, more = plan_create(img.acls, [acl("t", R)])
    assert again[0].error.name == "none" and not more  # already there: success, no record
    res, recs = plan_delete(
        img.acls,
        [
            AclBindingFilter(TOPIC, "t"),
            AclBindingFilter(TOPIC, "zzz"),
            AclBindingFilter(operation=AclOperation.UNKNOWN),
        ],
    )
    assert [len(r.matched) for r in res[:2]] == [1, 0] and res[2].error.name == "invalid_request"
    assert isinstance(recs[0], mr.RemoveAccessControlEntryRecord)
    assert len(replay(recs, img).acls) == 0


def test_acls_and_scram_survive_encoding_and_snapshots() -> None:
    """The records encode and decode (bytes fields included) and an image's to_records (what a
    snapshot holds) rebuilds the same ACLs and SCRAM credentials."""
    from kopfka.metadata.image import acl_record
    from kopfka.security import scram
    from kopfka.uuids import random_uuid, to_str

    cred = scram.new_credential("SCRAM-SHA-512", "pw")
    first, second = to_str(random_uuid()), to_str(random_uuid())  # an ACL's id is a Kafka uuid on disk
    recs: list[mr.MetadataRecord] = [
        acl_record(first, acl("t", R)),
        acl_record(second, acl("p-", W, DENY, pattern=PRE, host="10.0.0.1")),
        mr.UserScramCredentialRecord("alice", 2, cred.salt, cred.stored_key, cred.server_key, cred.iterations),
    ]
    for rec in recs:
        assert mr.decode(mr.encode(rec)) == rec
    img = replay(recs)
    again = replay(list(img.to_records()))
    assert again.acls == img.acls and dict(again.scram) == dict(img.scram)
    assert again.scram[("alice", 2)].stored_key == cred.stored_key
    gone = replay([mr.RemoveAccessControlEntryRecord(first), mr.RemoveUserScramCredentialRecord("alice", 2)], img)
    assert list(gone.acls) == [acl("p-", W, DENY, pattern=PRE, host="10.0.0.1")] and not gone.scram

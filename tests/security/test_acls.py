"""The ACL matrix on a real broker with the StandardAuthorizer: for each API, a principal
without the ACL gets Kafka's *_AUTHORIZATION_FAILED code (and learns nothing about resources it
may not describe) and with it succeeds; prefixed and deny ACLs; super users; Metadata hiding;
real clients refused and then allowed; an mTLS principal from ssl.principal.mapping.rules;
`kopfka acls` as kafka-acls."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from clients import Security, produce_body, roundtrip
from conftest import PASSWORD, Pki
from kopfka.client.admin import Admin
from kopfka.client.connection import KafkaConnection
from kopfka.client.transactions import parse_describe_transactions
from kopfka.protocol.errors import ErrorCode
from kopfka.security.client import ClientSecurity
from kopfka_process import KopfkaProcess, free_port, sasl_controller_listener
from request_bodies import consumer_fetch_body

# dave is only ever granted ALTER and DESCRIBE on the cluster, by test_cluster_alter_apis: no other
# test may rely on a principal without them (alice gets both in test_cluster_apis, carol must not
# get ALTER, which lets WriteTxnMarkers through)
USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw", "dave": "dave-pw"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)
TAF, GAF, CAF = (
    ErrorCode.topic_authorization_failed,
    ErrorCode.group_authorization_failed,
    ErrorCode.cluster_authorization_failed,
)


@dataclass
class Cluster:
    proc: KopfkaProcess
    sasl: int
    mtls: int
    controller: int

    @property
    def sasl_addr(self) -> str:
        return f"127.0.0.1:{self.sasl}"


@pytest.fixture(scope="module")
def authz(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    plain, sasl, mtls, controller = free_port(), free_port(), free_port(), free_port()
    listeners = (
        f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},MTLS://127.0.0.1:{mtls},"
        f"CONTROLLER://127.0.0.1:{controller}"
    )
    overrides = {
        "listeners": listeners,
        "advertised.listeners": listeners.rsplit(",", 1)[0],
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,MTLS:SSL,"
        "CONTROLLER:SASL_PLAINTEXT",
        "controller.quorum.voters": f"1@127.0.0.1:{controller}",
        # alice and bob authenticate there too: a principal without ClusterAction on the controller
        **sasl_controller_listener("admin", USERS["admin"], others=USERS),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(pki.server_p12),
        "ssl.keystore.password": PASSWORD,
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": str(pki.ca_pem),
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),OU=eng,.*$/$1/L,DEFAULT",
        "group.initial.rebalance.delay.ms": "0",
    }
    proc = KopfkaProcess(tmp_path_factory.mktemp("acls") / "data", port=plain, overrides=overrides).start()
    try:
        yield Cluster(proc, sasl, mtls, controller)
    finally:
        proc.kill()


def sec(user: str) -> ClientSecurity:
    return ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", user, USERS[user])


async def call(c: Cluster, user: str, api_key: int, version: int, body: dict[str, Any]) -> Any:
    conn = await KafkaConnection.open(c.sasl_addr, security=sec(user))
    try:
        return await conn.request(api_key, version, body)
    finally:
        await conn.close()


def run(c: Cluster, user: str, api_key: int, version: int, body: dict[str, Any]) -> Any:
    return asyncio.run(call(c, user, api_key, version, body))


def kacls(c: Cluster, *args: str, user: str = "admin", tmp: Any = None) -> subprocess.CompletedProcess[str]:
    """`kopfka acls` through the SASL listener as `user` (a --command-config file, as kafka-acls)."""
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".properties", delete=False) as f:
        f.write(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{user}" password="{USERS[user]}";\n'
        )
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kopfka.cli.main",
            "acls",
            "--bootstrap-server",
            c.sasl_addr,
            "--command-config",
            f.name,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def allow(c: Cluster, *args: str) -> None:
    out = kacls(c, "--add", "--allow-principal", "User:alice", *args)
    assert out.returncode == 0, out.stderr


def create_topic(c: Cluster, name: str, partitions: int = 1) -> None:
    async def go() -> None:
        admin = await Admin.connect(c.sasl_addr, security=sec("admin"))
        try:
            await admin.create_topic(name, partitions, 1)
        finally:
            await admin.close()

    asyncio.run(go())


def metadata_body(*topics: str) -> dict[str, Any]:
    return {
        "topics": [{"name": t, "topic_id": None} for t in topics] if topics else None,
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": True,
    }


# --------------------------------------------------------------- topic APIs, one row per ACL


def _pcode(resp: Any) -> ErrorCode:
    return ErrorCode(resp.responses[0].partition_responses[0].error_code)


@dataclass
class Row:
    api: str
    grant: tuple[str, ...]  # kopfka acls arguments (resource and operation) that allow it
    request: Any  # (topic) -> (api key, version, body)
    code: Any  # response -> ErrorCode of the checked item
    refused: ErrorCode
    setup_topic: bool = True


def _fetch_code(resp: Any) -> ErrorCode:
    return ErrorCode(resp.responses[0].partitions[0].error_code)


ROWS = [
    Row("produce", ("--operation", "Write"), lambda t: (0, 9, produce_body(t)), _pcode, TAF),
    Row("fetch", ("--operation", "Read"), lambda t: (1, 12, consumer_fetch_body(t)), _fetch_code, TAF),
    Row(
        "list-offsets",
        ("--operation", "Describe"),
        lambda t: (
            2,
            7,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {"name": t, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}
                ],
            },
        ),
        lambda r: ErrorCode(r.topics[0].partitions[0].error_code),
        TAF,
    ),
    Row(
        "offset-for-leader-epoch",
        ("--operation", "Describe"),
        lambda t: (
            23,
            4,
            {
                "replica_id": -1,
                "topics": [
                    {"topic": t, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}
                ],
            },
        ),
        lambda r: ErrorCode(r.topics[0].partitions[0].error_code),
        TAF,
    ),
    Row(
        "create-topics",
        ("--operation", "Create"),
        lambda t: (
            19,
            7,
            {
                "topics": [{"name": t, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
                "timeout": 10000,
                "validate_only": False,
            },
        ),
        lambda r: ErrorCode(r.topics[0].error_code),
        TAF,
        setup_topic=False,
    ),
    Row(
        "delete-topics",
        ("--operation", "Delete"),
        lambda t: (20, 6, {"topics": [{"name": t, "topic_id": uuid.UUID(int=0)}], "timeout": 10000}),
        lambda r: ErrorCode(r.responses[0].error_code),
        TAF,
    ),
    Row(
        "create-partitions",
        ("--operation", "Alter"),
        lambda t: (
            37,
            3,
            {"topics": [{"name": t, "count": 2, "assignments": None}], "timeout": 10000, "validate_only": False},
        ),
        lambda r: ErrorCode(r.results[0].error_code),
        TAF,
    ),
    Row(
        "delete-records",
        ("--operation", "Delete"),
        lambda t: (
            21,
            2,
            {"topics": [{"name": t, "partitions": [{"partition_index": 0, "offset": 0}]}], "timeout": 10000},
        ),
        lambda r: ErrorCode(r.topics[0].partitions[0].error_code),
        TAF,
    ),
    Row(
        "describe-configs",
        ("--operation", "DescribeConfigs"),
        lambda t: (
            32,
            4,
            {
                "resources": [{"resource_type": 2, "resource_name": t, "configuration_keys": None}],
                "include_synonyms": False,
                "include_documentation": False,
            },
        ),
        lambda r: ErrorCode(r.results[0].error_code),
        TAF,
    ),
    Row(
        "incremental-alter-configs",
        ("--operation", "AlterConfigs"),
        lambda t: (
            44,
            1,
            {
                "resources": [
                    {
                        "resource_type": 2,
                        "resource_name": t,
                        "configs": [{"name": "retention.ms", "config_operation": 0, "value": "100000"}],
                    }
                ],
                "validate_only": False,
            },
        ),
        lambda r: ErrorCode(r.responses[0].error_code),
        TAF,
    ),
    Row(
        "alter-configs",
        ("--operation", "AlterConfigs"),
        lambda t: (
            33,
            2,
            {
                "resources": [
                    {"resource_type": 2, "resource_name": t, "configs": [{"name": "retention.ms", "value": "100000"}]}
                ],
                "validate_only": False,
            },
        ),
        lambda r: ErrorCode(r.responses[0].error_code),
        TAF,
    ),
]


ROWS += [
    Row(
        "describe-producers",
        ("--operation", "Read"),
        lambda t: (61, 0, {"topics": [{"name": t, "partition_indexes": [0]}]}),
        lambda r: ErrorCode(r.topics[0].partitions[0].error_code),
        TAF,
    ),
    Row(
        "describe-topic-partitions",
        ("--operation", "Describe"),
        lambda t: (75, 0, {"topics": [{"name": t}], "response_partition_limit": 100, "cursor": None}),
        lambda r: ErrorCode(r.topics[0].error_code),
        TAF,
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.api for r in ROWS])
def test_topic_api_needs_its_acl(authz: Cluster, row: Row) -> None:
    topic = f"m-{row.api}"
    if row.setup_topic:
        create_topic(authz, topic)
    key, version, body = row.request(topic)
    assert row.code(run(authz, "alice", key, version, body)) == row.refused
    if row.api == "create-topics":
        # refused before the controller: the topic was not created
        assert asyncio.run(_exists(authz, topic)) is False
    allow(authz, "--topic", topic, *row.grant)
    assert row.code(run(authz, "alice", key, version, body)) == ErrorCode.none
    assert row.code(run(authz, "bob", key, version, body)) in (row.refused, ErrorCode.unknown_topic_or_partition)


async def _exists(c: Cluster, topic: str) -> bool:
    admin = await Admin.connect(c.sasl_addr, security=sec("admin"))
    try:
        _, infos, _ = await admin.metadata()
        return any(t.name == topic for t in infos)
    finally:
        await admin.close()


def test_metadata_hides_undescribable_topics(authz: Cluster) -> None:
    for t in ("vis-a", "vis-b", "hidden"):
        create_topic(authz, t)
    allow(authz, "--topic", "vis-", "--resource-pattern-type", "prefixed", "--operation", "Read")
    listing = run(authz, "alice", 3, 12, metadata_body())
    names = {t.name for t in listing.topics}
    assert {"vis-a", "vis-b"} <= names and "hidden" not in names
    ops = {t.name: t.topic_authorized_operations for t in listing.topics}
    assert ops["vis-a"] == (1 << 3) | (1 << 8)  # READ and the DESCRIBE it implies
    # named: the same answer for a hidden topic and one that does not exist
    named = run(authz, "alice", 3, 12, metadata_body("hidden", "no-such-topic", "vis-a"))
    by = {t.name: ErrorCode(t.error_code) for t in named.topics}
    assert by == {"hidden": TAF, "no-such-topic": TAF, "vis-a": ErrorCode.none}
    assert all(t.topic_id in (None, uuid.UUID(int=0)) for t in named.topics if t.name != "vis-a"), named.topics
    admin_view = run(authz, "admin", 3, 12, metadata_body())
    assert "hidden" in {t.name for t in admin_view.topics}


def test_auto_create_needs_create(authz: Cluster) -> None:
    allow(authz, "--topic", "auto-", "--resource-pattern-type", "prefixed", "--operation", "Describe")
    body = {**metadata_body("auto-x"), "allow_auto_topic_creation": True}
    assert ErrorCode(run(authz, "alice", 3, 12, body).topics[0].error_code) == TAF
    allow(authz, "--topic", "auto-", "--resource-pattern-type", "prefixed", "--operation", "Create")
    resp = run(authz, "alice", 3, 12, body)
    assert ErrorCode(resp.topics[0].error_code) in (ErrorCode.none, ErrorCode.leader_not_available)


def test_prefixed_allow_and_literal_deny(authz: Cluster) -> None:
    for t in ("team-a", "team-secret", "other"):
        create_topic(authz, t)
    allow(authz, "--topic", "team-", "--resource-pattern-type", "prefixed", "--operation", "Write")
    out = kacls(authz, "--add", "--deny-principal", "User:alice", "--topic", "team-secret", "--operation", "Write")
    assert out.returncode == 0, out.stderr
    codes = {t: _pcode(run(authz, "alice", 0, 9, produce_body(t))) for t in ("team-a", "team-secret", "other")}
    assert codes == {"team-a": ErrorCode.none, "team-secret": TAF, "other": TAF}
    assert _pcode(run(authz, "admin", 0, 9, produce_body("team-secret"))) == ErrorCode.none  # super user


def test_group_apis(authz: Cluster) -> None:
    create_topic(authz, "gt")
    group = "g1"
    find = (10, 4, {"key_type": 0, "coordinator_keys": [group]})
    assert ErrorCode(run(authz, "alice", *find).coordinators[0].error_code) == GAF
    join = (
        11,
        9,
        {
            "group_id": group,
            "session_timeout": 10000,
            "rebalance_timeout": 10000,
            "member_id": "",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
            "reason": None,
        },
    )
    assert ErrorCode(run(authz, "alice", *join).error_code) == GAF
    commit = (
        8,
        9,
        {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": "gt",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 0,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        },
    )
    fetch = (
        9,
        9,
        {
            "groups": [
                {
                    "group_id": group,
                    "member_id": None,
                    "member_epoch": -1,
                    "topics": [{"name": "gt", "partition_indexes": [0]}],
                }
            ],
            "require_stable": False,
        },
    )
    describe = (15, 5, {"groups": [group], "include_authorized_operations": True})
    delete = (42, 2, {"groups_names": [group]})

    def commit_code() -> ErrorCode:
        return ErrorCode(run(authz, "alice", *commit).topics[0].partitions[0].error_code)

    assert commit_code() == GAF
    assert ErrorCode(run(authz, "alice", *fetch).groups[0].error_code) == GAF
    assert ErrorCode(run(authz, "alice", *describe).groups[0].error_code) == GAF
    assert ErrorCode(run(authz, "alice", *delete).results[0].error_code) == GAF
    allow(authz, "--group", group, "--operation", "Read")
    deadline = time.monotonic() + 30  # the first FindCoordinator creates __consumer_offsets
    while (code := ErrorCode(run(authz, "alice", *find).coordinators[0].error_code)) in (
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
    ) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert code == ErrorCode.none  # READ implies DESCRIBE
    assert commit_code() == TAF  # the group is fine now, the topic is not
    allow(authz, "--topic", "gt", "--operation", "Read")
    assert commit_code() == ErrorCode.none
    f = run(authz, "alice", *fetch)
    assert ErrorCode(f.groups[0].error_code) == ErrorCode.none
    assert f.groups[0].topics[0].partitions[0].committed_offset == 0
    listed = run(authz, "alice", 16, 5, {"states_filter": [], "types_filter": []})
    assert group in {g.group_id for g in listed.groups}
    assert group not in {g.group_id for g in run(authz, "bob", 16, 5, {"states_filter": [], "types_filter": []}).groups}
    d = run(authz, "alice", *describe).groups[0]
    assert ErrorCode(d.error_code) == ErrorCode.none and d.authorized_operations == (1 << 3) | (1 << 8)
    assert ErrorCode(run(authz, "alice", *delete).results[0].error_code) == GAF
    allow(authz, "--group", group, "--operation", "Delete")
    assert ErrorCode(run(authz, "alice", *delete).results[0].error_code) == ErrorCode.none


def test_cluster_apis(authz: Cluster) -> None:
    rows = [
        ((35, 4, {"topics": None}), lambda r: r.error_code, "Describe"),
        ((46, 0, {"timeout": 5000, "topics": None}), lambda r: r.error_code, "Describe"),
        ((45, 0, {"timeout": 5000, "topics": []}), lambda r: r.error_code, "Alter"),
        ((48, 1, {"components": [], "strict": False}), lambda r: r.error_code, "DescribeConfigs"),
        ((50, 0, {"users": None}), lambda r: r.error_code, "Describe"),
        (
            (
                29,
                3,
                {
                    "resource_type_filter": 1,
                    "resource_name_filter": None,
                    "pattern_type_filter": 1,
                    "principal_filter": None,
                    "host_filter": None,
                    "operation": 1,
                    "permission_type": 1,
                },
            ),
            lambda r: r.error_code,
            "Describe",
        ),
        (
            (
                32,
                4,
                {
                    "resources": [{"resource_type": 4, "resource_name": "", "configuration_keys": ["num.io.threads"]}],
                    "include_synonyms": False,
                    "include_documentation": False,
                },
            ),
            lambda r: r.results[0].error_code,
            "DescribeConfigs",
        ),
        (
            (
                44,
                1,
                {
                    "resources": [
                        {
                            "resource_type": 4,
                            "resource_name": "",
                            "configs": [{"name": "log.cleaner.threads", "config_operation": 0, "value": "1"}],
                        }
                    ],
                    "validate_only": True,
                },
            ),
            lambda r: r.responses[0].error_code,
            "AlterConfigs",
        ),
        (
            (
                49,
                1,
                {
                    "entries": [
                        {
                            "entity": [{"entity_type": "user", "entity_name": "x"}],
                            "ops": [{"key": "producer_byte_rate", "value": 1e6, "remove": False}],
                        }
                    ],
                    "validate_only": True,
                },
            ),
            lambda r: r.entries[0].error_code,
            "AlterConfigs",
        ),
        (
            (
                30,
                3,
                {
                    "creations": [
                        {
                            "resource_type": 2,
                            "resource_name": "x",
                            "resource_pattern_type": 3,
                            "principal": "User:bob",
                            "host": "*",
                            "operation": 3,
                            "permission_type": 3,
                        }
                    ]
                },
            ),
            lambda r: r.results[0].error_code,
            "Alter",
        ),
    ]
    granted: set[str] = set()
    for (key, version, body), code, op in rows:
        assert ErrorCode(code(run(authz, "bob", key, version, body))) == CAF, key  # bob never gets cluster ACLs
        if op not in granted:
            assert ErrorCode(code(run(authz, "alice", key, version, body))) == CAF, key
            allow(authz, "--cluster", "--operation", op)
            granted.add(op)
        assert ErrorCode(code(run(authz, "alice", key, version, body))) == ErrorCode.none, key
    # SCRAM credential changes need ALTER on the cluster: granted above with the CreateAcls row
    up = {
        "deletions": [],
        "upsertions": [
            {"name": "zed", "mechanism": 1, "iterations": 4096, "salt": b"s" * 16, "salted_password": b"p" * 32}
        ],
    }
    assert ErrorCode(run(authz, "bob", 51, 0, up).results[0].error_code) == CAF
    assert ErrorCode(run(authz, "alice", 51, 0, up).results[0].error_code) == ErrorCode.none


def test_controller_answers_a_principal_without_cluster_action(authz: Cluster) -> None:
    """On the controller listener, bob (no ClusterAction) gets each request's own error response,
    as Kafka's ControllerApis answers with getErrorResponse: CLUSTER_AUTHORIZATION_FAILED on every
    requested topic or resource, or at the top level where the response has no items. The
    connection stays open (the controller used to close it), nothing is created, and the refusal
    is logged once per principal and API, not per request."""
    zero = uuid.UUID(int=0)
    create = {
        "topics": [
            {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
            for n in ("ctl-denied-a", "ctl-denied-b")
        ],
        "timeout": 5000,
        "validate_only": False,
    }
    alter_configs = {
        "resources": [
            {
                "resource_type": 2,
                "resource_name": "ctl-denied-a",
                "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1000"}],
            },
            {
                "resource_type": 4,
                "resource_name": "1",
                "configs": [{"name": "log.cleaner.threads", "config_operation": 0, "value": "2"}],
            },
        ],
        "validate_only": False,
    }
    vote = {  # a pre-vote at epoch 0: harmless even if it were let through
        "cluster_id": None,
        "voter_id": 1,
        "topics": [
            {
                "topic_name": "__cluster_metadata",
                "partitions": [
                    {
                        "partition_index": 0,
                        "replica_epoch": 0,
                        "replica_id": 7,
                        "replica_directory_id": zero,
                        "voter_directory_id": zero,
                        "last_offset_epoch": 0,
                        "last_offset": 0,
                        "pre_vote": True,
                    }
                ],
            }
        ],
    }
    alter_partition = {
        "broker_id": 1,
        "broker_epoch": 0,
        "topics": [
            {
                "topic_id": uuid.uuid4(),
                "partitions": [
                    {
                        "partition_index": 0,
                        "leader_epoch": 0,
                        "new_isr_with_epochs": [{"broker_id": 1, "broker_epoch": 0}],
                        "leader_recovery_state": 0,
                        "partition_epoch": 0,
                    }
                ],
            }
        ],
    }

    async def session() -> list[Any]:
        conn = await KafkaConnection.open(f"127.0.0.1:{authz.controller}", security=sec("bob"))
        try:
            return [
                await conn.request(19, 7, create),
                await conn.request(19, 7, create),  # again: answered again, logged once
                await conn.request(44, 1, alter_configs),
                await conn.request(52, 2, vote),
                await conn.request(56, 3, alter_partition),
                await conn.request(67, 0, {"broker_id": 1, "broker_epoch": 0}),
                await conn.request(18, 3, {"client_software_name": "t", "client_software_version": "1"}),
            ]
        finally:
            await conn.close()

    created, again, configs, voted, isr, pids, versions = asyncio.run(session())
    for r in (created, again):
        assert [(t.name, ErrorCode(t.error_code)) for t in r.topics] == [("ctl-denied-a", CAF), ("ctl-denied-b", CAF)]
        assert all(t.num_partitions == -1 and "not authorized" in (t.error_message or "") for t in r.topics)
    assert [(c.resource_type, c.resource_name, ErrorCode(c.error_code)) for c in configs.responses] == [
        (2, "ctl-denied-a", CAF),
        (4, "1", CAF),
    ]
    assert ErrorCode(voted.error_code) == CAF and voted.topics == ()
    assert ErrorCode(isr.error_code) == CAF and isr.topics == ()
    assert ErrorCode(pids.error_code) == CAF
    assert ErrorCode(versions.error_code) == ErrorCode.none and any(k.api_key == 52 for k in versions.api_keys)
    # refused, not done: the topics do not exist
    meta = run(authz, "admin", 3, 12, metadata_body("ctl-denied-a", "ctl-denied-b"))
    assert [ErrorCode(t.error_code) for t in meta.topics] == [ErrorCode.unknown_topic_or_partition] * 2
    log = authz.proc.log_text()
    assert log.count("User:bob may not send CreateTopicsRequest") == 1, log[-3000:]
    assert "User:bob may not send VoteRequest" in log
    assert authz.proc.alive


def test_idempotent_producer_with_write_on_any_topic(authz: Cluster) -> None:
    """KIP-679: bob has no IdempotentWrite, but WRITE on a topic lets InitProducerId through."""
    body = {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1}
    assert ErrorCode(run(authz, "bob", 22, 4, body).error_code) == CAF
    out = kacls(
        authz,
        "--add",
        "--allow-principal",
        "User:bob",
        "--topic",
        "bob-",
        "--resource-pattern-type",
        "prefixed",
        "--operation",
        "Write",
    )
    assert out.returncode == 0, out.stderr
    assert ErrorCode(run(authz, "bob", 22, 4, body).error_code) == ErrorCode.none


def test_real_clients_refused_then_allowed(authz: Cluster) -> None:
    from confluent_kafka import KafkaError, Producer

    create_topic(authz, "rc")
    errors: list[KafkaError] = []
    p = Producer(
        {
            "bootstrap.servers": authz.sasl_addr,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "bob",
            "sasl.password": "bob-pw",
            "enable.idempotence": False,
            "message.timeout.ms": 5000,
        }
    )
    p.produce("rc", b"x", on_delivery=lambda err, _m: errors.append(err))
    p.flush(10)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    out = kacls(
        authz,
        "--add",
        "--allow-principal",
        "User:bob",
        "--producer",
        "--consumer",
        "--topic",
        "rc-",
        "--resource-pattern-type",
        "prefixed",
        "--group",
        "rc-group",
        "--group",
        "g-rc-",
    )
    assert out.returncode == 0, out.stderr
    for client in ("kafka-python", "aiokafka", "confluent", "kcat"):
        roundtrip(
            client,
            authz.sasl_addr,
            f"rc-{client}",
            Security("SASL_PLAINTEXT", mechanism="PLAIN", username="bob", password="bob-pw"),
            n=4,
        )


def test_mtls_principal_from_mapping_rules(authz: Cluster, pki: Pki) -> None:
    """CN=alice,OU=eng,O=kopfka,C=US maps to User:alice by the rule; her ACLs apply over mTLS."""
    create_topic(authz, "mtls-acl")
    sec_tls = Security("SSL", ca=str(pki.ca_pem), cert=str(pki.alice_cert), key=str(pki.alice_key))
    with pytest.raises(AssertionError):
        roundtrip("confluent", f"127.0.0.1:{authz.mtls}", "mtls-acl", sec_tls, n=2, timeout=8)
    allow(authz, "--topic", "mtls-acl", "--operation", "Write", "--operation", "Read")
    roundtrip("kafka-python", f"127.0.0.1:{authz.mtls}", "mtls-acl", sec_tls, n=2)


def test_kopfka_acls_cli(authz: Cluster) -> None:
    out = kacls(
        authz,
        "--add",
        "--allow-principal",
        "User:bob",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--operation",
        "Describe",
        "--topic",
        "cli-t",
        "--group",
        "cli-g",
    )
    assert out.returncode == 0, out.stderr
    assert (
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=cli-t, patternType=LITERAL)`" in out.stdout
    )
    listed = kacls(authz, "--list", "--topic", "cli-t")
    assert listed.returncode == 0
    assert "(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)" in listed.stdout
    assert "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)" in listed.stdout
    only_bob = kacls(authz, "--list", "--principal", "User:bob", "--topic", "cli-t")
    assert "User:alice" not in only_bob.stdout and "User:bob" in only_bob.stdout
    removed = kacls(authz, "--remove", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "cli-t")
    assert removed.returncode == 0 and "operation=READ" in removed.stdout
    gone = kacls(authz, "--list", "--topic", "cli-t")
    assert "principal=User:bob, host=*, operation=READ" not in gone.stdout
    assert kacls(authz, "--remove", "--topic", "cli-t").returncode == 0  # every ACL of the topic
    assert "cli-t" not in kacls(authz, "--list", "--topic", "cli-t").stdout
    refused = kacls(authz, "--list", user="bob")
    assert refused.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr
    bad = kacls(authz, "--add", "--allow-principal", "User:bob", "--operation", "IdempotentWrite", "--topic", "x")
    assert bad.returncode == 1 and "only supports operations" in bad.stderr
    bad = kacls(authz, "--add", "--allow-principal", "bob", "--operation", "Read", "--topic", "x")
    assert bad.returncode == 1 and "Type:name" in bad.stderr


def test_transactions_need_transactional_id_acls(authz: Cluster) -> None:
    """A transactional producer needs WRITE on its transactional id (InitProducerId, EndTxn, ...),
    WRITE on the topic and, for its offsets, READ on the group; then it commits as usual."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    create_topic(authz, "tx-t")
    conf = {
        "bootstrap.servers": authz.sasl_addr,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "bob",
        "sasl.password": "bob-pw",
    }
    init = (
        22,
        4,
        {"transactional_id": "tx-bob", "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1},
    )
    assert ErrorCode(run(authz, "bob", *init).error_code) == ErrorCode.transactional_id_authorization_failed
    end = (26, 4, {"transactional_id": "tx-bob", "producer_id": 1, "producer_epoch": 0, "committed": True})
    assert ErrorCode(run(authz, "bob", *end).error_code) == ErrorCode.transactional_id_authorization_failed
    p = Producer({**conf, "transactional.id": "tx-bob", "transaction.timeout.ms": 60000})
    with pytest.raises(KafkaException) as info:
        p.init_transactions(10)
    assert info.value.args[0].code() == ErrorCode.transactional_id_authorization_failed.value
    for args in (
        ("--transactional-id", "tx-bob", "--operation", "Write"),
        ("--topic", "tx-t", "--operation", "Write"),
        ("--topic", "tx-t", "--operation", "Read"),
    ):
        out = kacls(authz, "--add", "--allow-principal", "User:bob", *args)
        assert out.returncode == 0, out.stderr
    p = Producer({**conf, "transactional.id": "tx-bob", "transaction.timeout.ms": 60000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(3):
        p.produce("tx-t", b"%d" % i)
    p.commit_transaction(30)
    c = Consumer({**conf, "group.id": "unused", "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition("tx-t", 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == [b"0", b"1", b"2"]


def test_write_txn_markers_need_cluster_action(authz: Cluster) -> None:
    """kafka-transactions abort (Admin.abortTransaction) sends WriteTxnMarkers from an admin
    client: as in Kafka, it needs ALTER or CLUSTER_ACTION on the cluster; without, each partition
    is refused with CLUSTER_AUTHORIZATION_FAILED and no marker is written."""
    create_topic(authz, "markers-t")
    marker = {"producer_id": 4242, "producer_epoch": 0, "coordinator_epoch": 0, "transaction_result": False}
    body = {"markers": [{**marker, "topics": [{"name": "markers-t", "partition_indexes": [0]}]}]}
    latest = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": "markers-t", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }

    def code(user: str) -> ErrorCode:
        (m,) = run(authz, user, 27, 1, body).markers
        assert m.producer_id == 4242 and [t.name for t in m.topics] == ["markers-t"]
        return ErrorCode(m.topics[0].partitions[0].error_code)

    def end_offset() -> int:
        return int(run(authz, "admin", 2, 7, latest).topics[0].partitions[0].offset)

    assert code("carol") == CAF and end_offset() == 0
    out = kacls(authz, "--add", "--allow-principal", "User:carol", "--cluster", "--operation", "ClusterAction")
    assert out.returncode == 0, out.stderr
    assert code("carol") == ErrorCode.none and end_offset() == 1  # the ABORT marker


def test_share_group_apis(authz: Cluster) -> None:
    """Share groups (KIP-932) as Kafka checks them: group READ to be a member or fetch, topic
    DESCRIBE to subscribe, topic READ to fetch and acknowledge; the share coordinator's RPCs and
    FindCoordinator(SHARE) need CLUSTER_ACTION."""
    create_topic(authz, "shared-t")
    tid = run(authz, "admin", 3, 12, metadata_body("shared-t")).topics[0].topic_id
    group, member = "sg1", "share-member-1"
    heartbeat = (
        76,
        1,
        {"group_id": group, "member_id": member, "member_epoch": 0, "rack_id": None,
         "subscribed_topic_names": ["shared-t"]},
    )  # fmt: skip
    share_fetch = (
        78,
        2,
        {"group_id": group, "member_id": member, "share_session_epoch": 0, "max_wait": 0, "min_bytes": 1,
         "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10,
         "topics": [{"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}],
         "forgotten_topics_data": []},
    )  # fmt: skip
    assert ErrorCode(run(authz, "alice", *heartbeat).error_code) == GAF
    assert ErrorCode(run(authz, "alice", *share_fetch).error_code) == GAF
    allow(authz, "--group", group, "--operation", "Read")
    assert ErrorCode(run(authz, "alice", *heartbeat).error_code) == TAF  # may not describe the topic
    allow(authz, "--topic", "shared-t", "--operation", "Describe")
    deadline = time.monotonic() + 30
    find = (10, 4, {"key_type": 0, "coordinator_keys": [group]})
    while run(authz, "alice", *find).coordinators[0].error_code != ErrorCode.none and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ErrorCode(run(authz, "alice", *heartbeat).error_code) == ErrorCode.none
    fetched = run(authz, "alice", *share_fetch)
    assert ErrorCode(fetched.responses[0].partitions[0].error_code) == TAF  # no READ on the topic
    allow(authz, "--topic", "shared-t", "--operation", "Read")
    fetched = run(authz, "alice", *share_fetch)
    assert ErrorCode(fetched.error_code) == ErrorCode.none and fetched.responses == ()  # nothing to deliver yet
    state = (83, 0, {"group_id": group, "topics": [{"topic_id": tid, "partitions": [
        {"partition": 0, "state_epoch": 0, "start_offset": 0}]}]})  # fmt: skip
    assert ErrorCode(run(authz, "alice", *state).results[0].partitions[0].error_code) == CAF
    share_key = (10, 6, {"key_type": 2, "coordinator_keys": [f"{group}:AAAAAAAAAAAAAAAAAAAAAA:0"]})
    assert ErrorCode(run(authz, "alice", *share_key).coordinators[0].error_code) == CAF


# ---------------------------------------- the rest of the matrix (issue 17), as Kafka 4.3 checks it


def grant(c: Cluster, principal: str, *args: str) -> None:
    out = kacls(c, "--add", "--allow-principal", f"User:{principal}", *args)
    assert out.returncode == 0, out.stderr


def wait_for_coordinator(c: Cluster, user: str, key_type: int, key: str) -> None:
    """FindCoordinator until the coordinator's internal topic is there and loaded."""
    find = (10, 4, {"key_type": key_type, "coordinator_keys": [key]})
    deadline = time.monotonic() + 30
    while (code := ErrorCode(run(c, user, *find).coordinators[0].error_code)) in (
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
    ) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert code == ErrorCode.none


def test_cluster_alter_apis(authz: Cluster) -> None:
    """ElectLeaders, AlterReplicaLogDirs and UpdateFeatures need ALTER on the cluster: without,
    CLUSTER_AUTHORIZATION_FAILED at the top and on each partition (ElectLeadersRequest's error
    response), on each partition (AlterReplicaLogDirs) or at the top with no results
    (UpdateFeatures). DescribeCluster on a broker needs no ACL: DESCRIBE only decides the
    authorized-operations bits (0 without). On a controller (KIP-919) it needs ALTER, as Kafka's
    ControllerApis.handleDescribeCluster: DESCRIBE is not enough."""
    create_topic(authz, "elect-t")
    log_dir = run(authz, "admin", 35, 4, {"topics": None}).results[0].log_dir
    versions = run(authz, "admin", 18, 3, {"client_software_name": "t", "client_software_version": "1"})
    mv = next(f.max_version_level for f in versions.finalized_features if f.name == "metadata.version")
    elect = (
        43,
        2,
        {"election_type": 0, "topic_partitions": [{"topic": "elect-t", "partitions": [0]}], "timeout": 10000},
    )
    move = (34, 2, {"dirs": [{"path": log_dir, "topics": [{"name": "elect-t", "partitions": [0]}]}]})
    features = (
        57,
        1,
        {
            "timeout": 10000,
            "validate_only": True,
            "feature_updates": [{"feature": "metadata.version", "max_version_level": mv, "upgrade_type": 1}],
        },
    )
    describe = (60, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1})

    def elected() -> tuple[ErrorCode, list[tuple[str, int, ErrorCode]]]:
        r = run(authz, "dave", *elect)
        parts = [
            (t.topic, p.partition_id, ErrorCode(p.error_code))
            for t in r.replica_election_results
            for p in t.partition_result
        ]
        return ErrorCode(r.error_code), parts

    def moved() -> list[tuple[str, int, ErrorCode]]:
        r = run(authz, "dave", *move)
        return [(t.topic_name, p.partition_index, ErrorCode(p.error_code)) for t in r.results for p in t.partitions]

    def controllers() -> Any:
        async def go() -> Any:
            conn = await KafkaConnection.open(f"127.0.0.1:{authz.controller}", security=sec("dave"))
            try:
                return await conn.request(60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 2})
            finally:
                await conn.close()

        return asyncio.run(go())

    assert elected() == (CAF, [("elect-t", 0, CAF)])
    assert moved() == [("elect-t", 0, CAF)]
    refused = run(authz, "dave", *features)
    assert (ErrorCode(refused.error_code), refused.results) == (CAF, ())
    d = run(authz, "dave", *describe)
    assert ErrorCode(d.error_code) == ErrorCode.none and d.cluster_authorized_operations == 0
    assert [b.broker_id for b in d.brokers] == [1]
    assert ErrorCode(controllers().error_code) == CAF

    grant(authz, "dave", "--cluster", "--operation", "Describe")
    assert run(authz, "dave", *describe).cluster_authorized_operations == 1 << 8
    assert ErrorCode(controllers().error_code) == CAF  # the controller wants ALTER
    assert elected() == (CAF, [("elect-t", 0, CAF)])

    grant(authz, "dave", "--cluster", "--operation", "Alter")
    assert elected() == (ErrorCode.none, [("elect-t", 0, ErrorCode.election_not_needed)])  # the leader is preferred
    assert moved() == [("elect-t", 0, ErrorCode.none)]  # already in that dir
    ok = run(authz, "dave", *features)
    assert ErrorCode(ok.error_code) == ErrorCode.none
    assert [(f.feature, ErrorCode(f.error_code)) for f in ok.results] == [("metadata.version", ErrorCode.none)]
    assert run(authz, "dave", *describe).cluster_authorized_operations == (1 << 7) | (1 << 8)  # ALTER implies DESCRIBE
    voters = controllers()
    assert ErrorCode(voters.error_code) == ErrorCode.none and [b.port for b in voters.brokers] == [authz.controller]


def test_offset_delete_needs_group_delete_and_topic_read(authz: Cluster) -> None:
    """OffsetDelete: without DELETE on the group, GROUP_AUTHORIZATION_FAILED for the request and no
    topics (OffsetDeleteRequest's error response); then TOPIC_AUTHORIZATION_FAILED on each
    partition of a topic without READ; with both, the committed offset is gone."""
    create_topic(authz, "od-t")
    wait_for_coordinator(authz, "admin", 0, "od-g")
    commit = {
        "group_id": "od-g",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": "od-t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 5,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }
    assert ErrorCode(run(authz, "admin", 8, 9, commit).topics[0].partitions[0].error_code) == ErrorCode.none
    fetch = {
        "groups": [
            {
                "group_id": "od-g",
                "member_id": None,
                "member_epoch": -1,
                "topics": [{"name": "od-t", "partition_indexes": [0]}],
            }
        ],
        "require_stable": False,
    }

    def committed() -> int:
        return int(run(authz, "admin", 9, 9, fetch).groups[0].topics[0].partitions[0].committed_offset)

    delete = (47, 0, {"group_id": "od-g", "topics": [{"name": "od-t", "partitions": [{"partition_index": 0}]}]})

    def deleted() -> tuple[ErrorCode, list[tuple[str, int, ErrorCode]]]:
        r = run(authz, "alice", *delete)
        parts = [(t.name, p.partition_index, ErrorCode(p.error_code)) for t in r.topics for p in t.partitions]
        return ErrorCode(r.error_code), parts

    assert deleted() == (GAF, [])
    allow(authz, "--group", "od-g", "--operation", "Delete")
    assert deleted() == (ErrorCode.none, [("od-t", 0, TAF)])
    assert committed() == 5
    allow(authz, "--topic", "od-t", "--operation", "Read")
    assert deleted() == (ErrorCode.none, [("od-t", 0, ErrorCode.none)])
    assert committed() == -1


def test_transaction_admin_apis_need_transactional_id_describe(authz: Cluster) -> None:
    """DescribeTransactions answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED for each id the principal
    may not DESCRIBE and leaves out the topics it may not DESCRIBE; ListTransactions answers no
    error but lists only the ids it may DESCRIBE."""
    create_topic(authz, "dtx-t")
    wait_for_coordinator(authz, "admin", 1, "dtx-a")
    pids = {}
    for tid in ("dtx-a", "dtx-b"):
        init = {"transactional_id": tid, "transaction_timeout": 600000, "producer_id": -1, "producer_epoch": -1}
        r = run(authz, "admin", 22, 4, init)
        assert ErrorCode(r.error_code) == ErrorCode.none
        pids[tid] = (r.producer_id, r.producer_epoch)
    pid, epoch = pids["dtx-a"]
    add = {
        "v3_and_below_transactional_id": "dtx-a",
        "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": "dtx-t", "partitions": [0]}],
    }
    added = run(authz, "admin", 24, 3, add).results_by_topic_v3_and_below[0].results_by_partition[0]
    assert ErrorCode(added.partition_error_code) == ErrorCode.none
    describe = (65, 0, {"transactional_ids": ["dtx-a", "dtx-b"]})
    listing = (66, 1, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1})

    def described() -> list[tuple[str, ErrorCode, str, list[str]]]:
        async def go() -> bytes:  # read by hand: kio refuses the -1 start time of a refused id
            conn = await KafkaConnection.open(authz.sasl_addr, security=sec("alice"))
            try:
                return await conn.request_frame(*describe)
            finally:
                await conn.close()

        return [
            (d.transactional_id, d.error, d.state, sorted({t for t, _ in d.partitions}))
            for d in parse_describe_transactions(asyncio.run(go()))
        ]

    def listed(user: str) -> set[str]:
        r = run(authz, user, *listing)
        assert ErrorCode(r.error_code) == ErrorCode.none
        return {s.transactional_id for s in r.transaction_states if s.transactional_id.startswith("dtx-")}

    TIAF = ErrorCode.transactional_id_authorization_failed
    try:
        assert described() == [("dtx-a", TIAF, "", []), ("dtx-b", TIAF, "", [])]
        assert listed("alice") == set() and listed("admin") == {"dtx-a", "dtx-b"}
        allow(authz, "--transactional-id", "dtx-a", "--operation", "Describe")
        assert described() == [("dtx-a", ErrorCode.none, "Ongoing", []), ("dtx-b", TIAF, "", [])]
        assert listed("alice") == {"dtx-a"}
        allow(authz, "--topic", "dtx-t", "--operation", "Describe")
        assert described()[0] == ("dtx-a", ErrorCode.none, "Ongoing", ["dtx-t"])
    finally:
        abort = {"transactional_id": "dtx-a", "producer_id": pid, "producer_epoch": epoch, "committed": False}
        assert ErrorCode(run(authz, "admin", 26, 4, abort).error_code) == ErrorCode.none


def test_consumer_group_heartbeat_and_describe(authz: Cluster) -> None:
    """KIP-848 groups: ConsumerGroupHeartbeat needs READ on the group (GROUP_AUTHORIZATION_FAILED)
    and DESCRIBE on every subscribed topic (TOPIC_AUTHORIZATION_FAILED); ConsumerGroupDescribe
    needs DESCRIBE on the group, answers TOPIC_AUTHORIZATION_FAILED (and no members) for a group
    whose assignments name a topic the principal may not describe, and fills in the group's
    authorized operations when asked."""
    create_topic(authz, "cg848-t")
    group = "cg848"
    hb = (
        68,
        1,
        {
            "group_id": group,
            "member_id": "m-alice",
            "member_epoch": 0,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": 5000,
            "subscribed_topic_names": ["cg848-t"],
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": [],
        },
    )
    describe = (69, 1, {"group_ids": [group], "include_authorized_operations": True})

    def heartbeat() -> Any:
        return run(authz, "alice", *hb)

    def described(user: str) -> Any:
        (g,) = run(authz, user, *describe).groups
        assert g.group_id == group
        return g

    assert ErrorCode(heartbeat().error_code) == GAF
    assert ErrorCode(described("alice").error_code) == GAF
    allow(authz, "--group", group, "--operation", "Read")
    assert ErrorCode(heartbeat().error_code) == TAF  # may not describe the subscribed topic
    allow(authz, "--topic", "cg848-t", "--operation", "Describe")
    wait_for_coordinator(authz, "alice", 0, group)
    joined = heartbeat()
    assert (ErrorCode(joined.error_code), joined.member_epoch) == (ErrorCode.none, 1)
    assert [list(t.partitions) for t in joined.assignment.topic_partitions] == [[0]]
    g = described("alice")
    assert ErrorCode(g.error_code) == ErrorCode.none and [m.member_id for m in g.members] == ["m-alice"]
    assert [t.topic_name for t in g.members[0].assignment.topic_partitions] == ["cg848-t"]
    assert g.authorized_operations == (1 << 3) | (1 << 8)  # READ and the DESCRIBE it implies
    assert ErrorCode(described("bob").error_code) == GAF
    grant(authz, "bob", "--group", group, "--operation", "Describe")
    g = described("bob")  # the group, but not the topic its member is assigned
    assert (ErrorCode(g.error_code), g.members) == (TAF, ())
    assert g.error_message == "The group has described topic(s) that the client is not authorized to describe."

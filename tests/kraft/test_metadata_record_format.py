"""The __cluster_metadata records in Apache Kafka's binary format (MetadataRecordSerde, KRaft
control records), held against bytes Kafka 4.3.1 itself wrote (tests/kraft/data/kafka-4.3.1):
kopfka reads them to the values Kafka wrote and writes them back byte for byte; every record
type round-trips; kopfka's older JSON records are still read; garbage is a clear error."""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path

import pytest
from kopfka.metadata import bootstrap, serde
from kopfka.metadata import records as mr
from kopfka.metadata.image import MetadataDelta, MetadataImage
from kopfka.metadata.record_batches import decode_all, encode_snapshot
from kopfka.protocol.record_codec import decode_records, encode_control_key
from kopfka.protocol.records import iter_batches
from kopfka.raft.metadata_log import check_metadata_files

KAFKA = Path(__file__).parent / "data" / "kafka-4.3.1"
INC = "c4787710-cc36-44e4-94f7-72d87fda82ba"
DIR = "gwjbXcZFINo7o5NmruCHgQ"
TOPIC_ID = "z1TAVH-qQR69d6OzogSCSw"


def kafka_records(name: str) -> list[tuple[bool, bytes | None, bytes]]:
    """(in a control batch, key, value) of every record in one of Kafka's files."""
    data = (KAFKA / name).read_bytes()
    return [(h.is_control, r.key, r.value or b"") for h in iter_batches(data) for r in decode_records(data, h)]


@pytest.mark.parametrize(
    "name", ["bootstrap.checkpoint", "standalone-0-0.checkpoint", "static-quorum.log", "standalone.log"]
)
def test_kafka_written_records_decode_and_reencode_byte_for_byte(name: str) -> None:
    kept = 0
    for control, key, value in kafka_records(name):
        if control:
            rec = mr.decode_control(key, value)
            if rec is None:  # snapshot header / footer: framing
                assert serde.read_control(key, value)[0] in (serde.SNAPSHOT_HEADER, serde.SNAPSHOT_FOOTER)
                continue
            assert mr.encode_control(rec) == (key, value), rec
        else:
            assert key is None
            rec = mr.decode(value)
            assert mr.encode(rec) == value, rec
        kept += 1
    assert kept > 0


def test_kafka_values_are_read_as_kafka_wrote_them() -> None:
    recs = decode_all((KAFKA / "static-quorum.log").read_bytes())
    assert isinstance(recs[0], mr.LeaderChangeRecord) and recs[0].leader_id == 1
    assert mr.FeatureLevelRecord("metadata.version", 30) in recs
    assert mr.TopicRecord("golden", TOPIC_ID) in recs
    assert mr.ConfigRecord(2, "golden", "cleanup.policy", "compact") in recs
    parts = [r for r in recs if isinstance(r, mr.PartitionRecord)]
    assert [(p.partition_id, p.topic_id, p.replicas, p.isr, p.leader, p.directories) for p in parts] == [
        (0, TOPIC_ID, (1,), (1,), 1, (DIR,)),
        (1, TOPIC_ID, (1,), (1,), 1, (DIR,)),
    ]
    (broker,) = [r for r in recs if isinstance(r, mr.RegisterBrokerRecord)]
    assert (broker.broker_id, broker.incarnation_id, broker.broker_epoch, broker.log_dirs) == (1, INC, 12, (DIR,))
    assert broker.endpoints[0].security_protocol == "PLAINTEXT" and broker.fenced
    assert ("metadata.version", 7, 30) in broker.features
    assert mr.ClientQuotaRecord((("client-id", "c1"),), "producer_byte_rate", 1024.0) in recs
    changes = [r for r in recs if isinstance(r, mr.BrokerRegistrationChangeRecord)]
    assert [(c.fenced, c.in_controlled_shutdown) for c in changes if c.cordoned_log_dirs is None] == [
        (False, None),  # unfenced
        (None, True),  # controlled shutdown
        (True, None),  # fenced at the stop
    ]

    # the whole log replays (Kafka's controller registration, transactions and control records included)
    delta = MetadataDelta(MetadataImage())
    delta.replay_all(r for r in recs if not isinstance(r, mr.BeginTransactionRecord | mr.EndTransactionRecord))
    image = delta.apply(MetadataImage().provenance)
    assert image.topics_by_name["golden"].topic_id == TOPIC_ID and len(image.topics_by_name["golden"].partitions) == 2

    boot = decode_all((KAFKA / "standalone-0-0.checkpoint").read_bytes())
    assert boot[0] == mr.KRaftVersionRecord(1)
    assert isinstance(boot[1], mr.VotersRecord) and boot[1].listener_name == "CONTROLLER"
    ((voter_id, _dir, host, _port),) = boot[1].voters
    assert (voter_id, host) == (1, "127.0.0.1")

    more = decode_all((KAFKA / "standalone.log").read_bytes())
    kinds = {type(r) for r in more}
    assert {mr.UserScramCredentialRecord, mr.RemoveUserScramCredentialRecord, mr.AccessControlEntryRecord} <= kinds
    assert {mr.RemoveAccessControlEntryRecord, mr.RemoveTopicRecord, mr.VotersRecord, mr.KRaftVersionRecord} <= kinds
    assert mr.ClientQuotaRecord((("client-id", "c1"), ("user", "alice")), "consumer_byte_rate", None) in more
    assert mr.ClientQuotaRecord((("client-id", None),), "request_percentage", 50.0) in more


def test_bootstrap_checkpoint_is_written_in_kafkas_layout(tmp_path: Path) -> None:
    """kopfka's bootstrap.checkpoint for a static quorum has the records Kafka's has (Kafka 4.3 also
    finalizes streams.version, which kopfka does not support), framed as Kafka frames it: the
    header control batch is Kafka's byte for byte but for the timestamp."""
    kafka = (KAFKA / "bootstrap.checkpoint").read_bytes()
    bootstrap.write_bootstrap(tmp_path, bootstrap.bootstrap_records())
    ours = (tmp_path / bootstrap.BOOTSTRAP_CHECKPOINT).read_bytes()
    expected = [r for r in decode_all(kafka) if r != mr.FeatureLevelRecord("streams.version", 1)]
    assert decode_all(ours) == expected
    kafka_batches = [
        (h.base_offset, h.last_offset, h.is_control, h.partition_leader_epoch) for h in iter_batches(kafka)
    ]
    our_batches = [(h.base_offset, h.last_offset, h.is_control, h.partition_leader_epoch) for h in iter_batches(ours)]
    assert our_batches == [(0, 0, True, 0), (1, 5, False, 0), (6, 6, True, 0)]
    assert kafka_batches == [(0, 0, True, 0), (1, 6, False, 0), (7, 7, True, 0)]
    header = next(iter_batches(kafka))
    rebuilt = encode_snapshot(decode_all(kafka), timestamp=header.max_timestamp, last_contained_log_timestamp=0)
    assert rebuilt[: header.size] == kafka[: header.size]
    assert bootstrap.read_bootstrap(tmp_path) == expected


def test_a_dynamic_quorum_gets_its_voters_in_the_first_snapshot(tmp_path: Path) -> None:
    """--standalone: the voter set and kraft.version 1 go in __cluster_metadata-0's 0-0 snapshot, as
    Kafka's format writes them (its header batch is Kafka's layout: header, kraft.version, voters)."""
    voters = ((1, "DQySl1EqTWC6bba7Mw91WQ", "127.0.0.1", 9093),)
    bootstrap.write_bootstrap(tmp_path, bootstrap.bootstrap_records(kraft_version=1, voters=voters))
    assert not any(
        isinstance(r, mr.ControlRecord) for r in decode_all((tmp_path / "bootstrap.checkpoint").read_bytes())
    )
    first = (tmp_path / "__cluster_metadata-0" / bootstrap.BOOTSTRAP_SNAPSHOT).read_bytes()
    assert decode_all(first) == [mr.KRaftVersionRecord(1), mr.VotersRecord(voters)]
    assert [(h.base_offset, h.last_offset, h.is_control) for h in iter_batches(first)] == [(0, 2, True), (3, 3, True)]
    read = bootstrap.read_bootstrap(tmp_path)
    assert read is not None and read[-1] == mr.VotersRecord(voters)


DIR_B = "DQySl1EqTWC6bba7Mw91WQ"
SAMPLES: list[mr.MetadataRecord] = [
    mr.RegisterBrokerRecord(
        3,
        INC,
        42,
        (mr.Endpoint("PLAINTEXT", "h", 9092), mr.Endpoint("SECURE", "h", 9093, "SASL_SSL")),
        "rack-a",
        False,
        True,
        (DIR, DIR_B),
        (("metadata.version", 7, 30),),
        (DIR_B,),
    ),
    mr.UnregisterBrokerRecord(3, 42),
    mr.TopicRecord("t", TOPIC_ID),
    mr.PartitionRecord(2, TOPIC_ID, (1, 2, 3), (1, 2), 1, 5, 6, (3,), (4,), (DIR, DIR_B, DIR), 1, (3,), (2,)),
    mr.ConfigRecord(2, "t", "retention.ms", None),
    mr.PartitionChangeRecord(2, TOPIC_ID, isr=(1,), leader=-1, directories=(DIR,), eligible_leader_replicas=()),
    mr.PartitionChangeRecord(
        2, TOPIC_ID, replicas=(1, 2), removing_replicas=(), adding_replicas=(2,), leader_recovery_state=1
    ),
    mr.FenceBrokerRecord(3, 42),
    mr.UnfenceBrokerRecord(3, 42),
    mr.RemoveTopicRecord(TOPIC_ID),
    mr.DelegationTokenRecord("User:a", "User:b", ("User:c",), 1, 2, 3, "tok"),
    mr.UserScramCredentialRecord("alice", 1, b"salt", b"s" * 32, b"k" * 32, 4096),
    mr.FeatureLevelRecord("group.version", 1),
    mr.ClientQuotaRecord((("user", "alice"), ("client-id", None)), "producer_byte_rate", 1.5),
    mr.ClientQuotaRecord((("user", "alice"),), "producer_byte_rate", None),
    mr.ProducerIdsRecord(3, 42, 5000),
    mr.BrokerRegistrationChangeRecord(3, 42, fenced=False),
    mr.BrokerRegistrationChangeRecord(3, 42, fenced=True, in_controlled_shutdown=True),
    mr.BrokerRegistrationChangeRecord(3, 42, log_dirs=(DIR,)),
    mr.BrokerRegistrationChangeRecord(3, 42, cordoned_log_dirs=()),
    mr.AccessControlEntryRecord(TOPIC_ID, 2, "t", 3, "User:a", "*", 3, 3),
    mr.RemoveAccessControlEntryRecord(TOPIC_ID),
    mr.NoOpRecord(),
    mr.ZkMigrationStateRecord(0),
    mr.RemoveUserScramCredentialRecord("alice", 1),
    mr.BeginTransactionRecord("bulk"),
    mr.BeginTransactionRecord(),
    mr.EndTransactionRecord(),
    mr.AbortTransactionRecord("gone"),
    mr.RemoveDelegationTokenRecord("tok"),
    mr.RegisterControllerRecord(1, INC, False, (mr.Endpoint("CONTROLLER", "h", 9093),), (("kraft.version", 0, 1),)),
    mr.ClearElrRecord("t"),
    mr.ClearElrRecord(""),
]
CONTROL_SAMPLES: list[mr.ControlRecord] = [
    mr.VotersRecord(((1, DIR, "h1", 9093), (2, DIR_B, "h2", 9093)), "CONTROLLER"),
    mr.KRaftVersionRecord(1),
    mr.LeaderChangeRecord(2, ((1, DIR), (2, DIR_B)), ((2, DIR_B),)),  # version 1: directory ids
    mr.LeaderChangeRecord(2, ((1, ""), (2, "")), ((2, ""),)),  # version 0: a static quorum
]


def test_every_record_type_round_trips() -> None:
    covered = {type(r).TYPE for r in SAMPLES}
    assert covered == set(serde.METADATA_SCHEMAS), "a sample of every metadata record type"
    for rec in SAMPLES:
        assert mr.decode(mr.encode(rec)) == rec, rec
    for crec in CONTROL_SAMPLES:
        key, value = mr.encode_control(crec)
        back = mr.decode_control(key, value)
        assert back is not None
        if isinstance(crec, mr.LeaderChangeRecord) and not crec.voters[0][1]:
            assert back == mr.LeaderChangeRecord(
                2, ((1, "AAAAAAAAAAAAAAAAAAAAAA"), (2, "AAAAAAAAAAAAAAAAAAAAAA")), ((2, "AAAAAAAAAAAAAAAAAAAAAA"),)
            )
            assert value[:2] == b"\x00\x00"
        else:
            assert back == crec


def test_record_versions_follow_the_metadata_version() -> None:
    """What Kafka 4.3 writes: the latest at 4.3-IV0 with ELR; older ones at older levels."""
    reg = SAMPLES[0]
    part = SAMPLES[3]
    latest = {"metadata.version": 30, "eligible.leader.replicas.version": 1}
    assert (mr.record_version(reg, latest), mr.record_version(part, latest)) == (4, 2)
    assert (mr.record_version(reg, {"metadata.version": 21}), mr.record_version(part, {"metadata.version": 21})) == (
        3,
        1,
    )
    assert (mr.record_version(reg, {"metadata.version": 14}), mr.record_version(part, {"metadata.version": 14})) == (
        2,
        0,
    )
    old = mr.decode(mr.encode(part, {"metadata.version": 14}))
    assert isinstance(old, mr.PartitionRecord) and old.directories == () and old.eligible_leader_replicas == ()


def _json_value(rec: mr.MetadataRecord, type_: int | None = None) -> bytes:
    """A record as kopfka wrote it before (`type:u8 version:u8` + compact sorted JSON)."""

    def plain(v: object) -> object:
        if isinstance(v, bytes):
            return base64.b64encode(v).decode()
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return [plain(getattr(v, f.name)) for f in dataclasses.fields(v)]
        if isinstance(v, tuple | list):
            return [plain(x) for x in v]
        return v

    body = {f.name: plain(getattr(rec, f.name)) for f in dataclasses.fields(rec)}
    return (
        bytes((type_ if type_ is not None else rec.TYPE, 0))
        + json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
    )


def test_kopfkas_older_json_records_are_still_read() -> None:
    old_types = [
        r
        for r in SAMPLES
        if not isinstance(
            r,
            mr.FenceBrokerRecord
            | mr.UnfenceBrokerRecord
            | mr.RegisterControllerRecord
            | mr.DelegationTokenRecord
            | mr.RemoveDelegationTokenRecord
            | mr.ZkMigrationStateRecord,
        )
    ]
    for rec in old_types:
        if isinstance(rec, mr.RegisterBrokerRecord):
            rec = dataclasses.replace(rec, cordoned_log_dirs=None)
        assert mr.decode(_json_value(rec)) == rec, rec
    voters = mr.VotersRecord(((1, DIR, "h", 9093),))
    body = json.dumps({"voters": [[1, DIR, "h", 9093]]}, separators=(",", ":")).encode()
    assert mr.decode(bytes((100, 0)) + body) == voters  # the voter set was metadata record type 100


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"", "truncated"),
        (b"\x01\x02", "truncated"),
        (b"\x02\x02\x00", "frame version 2"),
        (b"\x01\x63\x00\x00", "unknown metadata record type 99"),
        (b"\x01\x02\x07\x00", "TopicRecord version 7 is newer than this binary's 0"),
        (mr.encode(mr.TopicRecord("t", TOPIC_ID)) + b"xx", "2 byte(s) of garbage after TopicRecord"),
        (b"\x01\x02\x00\x03\xff\xfe" + bytes(16) + b"\x00", "not UTF-8"),
        (b"\x01\x03\x02\x00\x00\x00\x00" + bytes(16) + b"\xff\xff\xff\xff\x07", "array of"),
        (b"\x01\x02\x00\x00" + bytes(16) + b"\x00", "null in a non-nullable string"),
    ],
)
def test_garbage_metadata_bytes_are_a_clear_error(value: bytes, message: str) -> None:
    with pytest.raises(mr.MetadataRecordError) as err:
        mr.decode(value)
    assert message in str(err.value)


def test_garbage_control_record_is_a_clear_error() -> None:
    key = encode_control_key(serde.KRAFT_VOTERS)
    with pytest.raises(mr.MetadataRecordError, match="bad control record"):
        mr.decode_control(key, b"\x00\x00\xff\xff\xff\xff\x0f")  # 2^32 voters in 7 bytes


def test_unreadable_metadata_files_are_named_with_the_offset(tmp_path: Path) -> None:
    from kopfka.protocol.record_codec import Record, encode_batch

    good = encode_batch([Record(0, 0, None, mr.encode(mr.NoOpRecord()))], partition_leader_epoch=1)
    bad = encode_batch([Record(0, 0, None, b"\x01\x02\x00garbage")], base_offset=1, partition_leader_epoch=1)
    (tmp_path / "00000000000000000000.log").write_bytes(good + bad)
    with pytest.raises(mr.MetadataRecordError, match=r"00000000000000000000.log \(offset 1\): bad metadata record"):
        check_metadata_files(tmp_path)


def test_standalone_format_names_the_voter_endpoint_after_the_controller_listener(tmp_path: Path) -> None:
    """`kopfka storage format --standalone`: the KRaftVoters endpoint carries the configured
    controller listener's name (Kafka's tools show it), here CTRL."""
    import subprocess
    import sys

    cfg = tmp_path / "server.properties"
    cfg.write_text(
        "process.roles=controller\nnode.id=1\ncontroller.listener.names=CTRL\n"
        "listeners=CTRL://127.0.0.1:19093\ncontroller.quorum.bootstrap.servers=127.0.0.1:19093\n"
        f"log.dirs={tmp_path / 'logs'}\n"
    )
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "kopfka.cli.main",
            "storage",
            "format",
            "-t",
            "MkU3OEVBNTcwNTJENDM2Qg",
            "-c",
            str(cfg),
            "-s",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    first = tmp_path / "logs" / "__cluster_metadata-0" / bootstrap.BOOTSTRAP_SNAPSHOT
    kraft, voters = decode_all(first.read_bytes())
    assert kraft == mr.KRaftVersionRecord(1)
    assert isinstance(voters, mr.VotersRecord) and voters.listener_name == "CTRL"
    assert [(v[0], v[2], v[3]) for v in voters.voters] == [(1, "127.0.0.1", 19093)]

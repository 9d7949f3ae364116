"""kopfka's __cluster_metadata in Kafka's format, checked with Kafka 4.3's own tools and schemas:

- the record schemas kopfka encodes with are the ones in Kafka's jar (metadata/*.json): every
  record's api key, latest version, fields, types, versions, tags, nullability and defaults;
- `kafka-dump-log --cluster-metadata-decoder` prints kopfka's metadata log segment and snapshot
  without errors, with the topics (names and ids) kopfka created and its control records;
- `kafka-metadata-shell --snapshot` browses a kopfka snapshot: the topic, its partitions, features.
"""

from __future__ import annotations

import json
import re
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka_ref import run_tool
from kopfka.metadata import serde
from kopfka.raft import snapshots
from kopfka_process import KopfkaProcess

from tests.log.helpers import create_topic, produce


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _since(versions: str) -> int:
    return int(versions.split("-")[0].rstrip("+"))


def _kafka_type(field: dict[str, Any], structs: dict[str, list[dict[str, Any]]]) -> object:
    t = field["type"]
    if t.startswith("[]"):
        inner = t[2:]
        if "fields" in field or inner in structs:
            return ("[]", _kafka_fields(field.get("fields") or structs[inner], structs))
        return ("[]", inner)
    if "fields" in field:
        return _kafka_fields(field["fields"], structs)
    return t


def _kafka_fields(fields: list[dict[str, Any]], structs: dict[str, list[dict[str, Any]]]) -> tuple[object, ...]:
    out = []
    for f in fields:
        tagged = "tag" in f
        default = f.get("default")
        if default is None:  # the implicit default (Kafka's generator): null, empty, 0, false
            default = "null" if "nullableVersions" in f else () if f["type"].startswith("[]") else "0"
        if isinstance(default, str):
            default = {"null": None, "true": True, "false": False}.get(default, default)
            default = int(default) if isinstance(default, str) and re.fullmatch(r"-?\d+", default) else default
        out.append(
            (
                _snake(f["name"]),
                _kafka_type(f, structs),
                _since(f["versions"]),
                f.get("tag"),
                "nullableVersions" in f,
                default if tagged else None,
            )
        )
    return tuple(out)


def _ours(fields: tuple[serde.F, ...]) -> tuple[object, ...]:
    def typ(t: object) -> object:
        if isinstance(t, tuple) and t[:1] == ("[]",):
            return ("[]", typ(t[1]))
        if isinstance(t, tuple):
            return _ours(t)  # type: ignore[arg-type]
        return t

    return tuple(
        (f.name, typ(f.type), f.since, f.tag, f.nullable, f.tag_default() if f.tag is not None else None)
        for f in fields
    )


def test_record_schemas_are_kafkas(kafka_libs: Path) -> None:
    jar = next((kafka_libs / "libs").glob("kafka-metadata-*.jar"))
    kafka: dict[int, dict[str, Any]] = {}
    with zipfile.ZipFile(jar) as z:
        for name in z.namelist():
            if name.startswith("common/metadata/") and name.endswith(".json"):
                text = re.sub(r"^\s*//.*$", "", z.read(name).decode(), flags=re.M)
                schema = json.loads(text)
                kafka[schema["apiKey"]] = schema
    assert set(kafka) == set(serde.METADATA_SCHEMAS)
    for key, ks in kafka.items():
        ours = serde.METADATA_SCHEMAS[key]
        assert ours.name == ks["name"]
        assert ours.max_version == int(str(ks["validVersions"]).split("-")[-1]), ks["name"]
        structs = {s["name"]: s["fields"] for s in ks.get("commonStructs", [])}
        assert _ours(ours.fields) == _kafka_fields(ks["fields"], structs), ks["name"]


@pytest.fixture(scope="module")
def kopfka_metadata(kafka_libs: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A kopfka that created two topics and wrote a metadata snapshot, cleanly stopped: its
    __cluster_metadata-0 dir and {topic: id}."""
    data = tmp_path_factory.mktemp("kopfka-meta") / "data"
    k = KopfkaProcess(data, overrides={"metadata.log.max.snapshot.interval.ms": "500"}).start()
    try:
        create_topic(k.bootstrap, "meta-a", 3)
        create_topic(k.bootstrap, "meta-b", 1, **{"cleanup.policy": "compact"})
        assert produce(k.bootstrap, "meta-a", [(None, b"x")]) == [0]
        described = run_tool("kafka-topics", "--bootstrap-server", k.bootstrap, "--describe").stdout
        ids = dict(re.findall(r"^Topic: (meta-\S+)\s+TopicId: (\S+)", described, re.M))
        assert set(ids) == {"meta-a", "meta-b"}, described
        log_dir = next(data.rglob("__cluster_metadata-0"))
        deadline = time.monotonic() + 30
        while not [s for s in snapshots.list_snapshots(log_dir) if s.end_offset > 0] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert k.stop() == 0
    finally:
        k.kill()
    return log_dir, ids


def test_kafka_dump_log_decodes_kopfkas_metadata_log(kopfka_metadata: tuple[Path, dict[str, str]]) -> None:
    log_dir, ids = kopfka_metadata
    (segment,) = sorted(log_dir.glob("*.log"))
    out = run_tool("kafka-dump-log", "--cluster-metadata-decoder", "--files", str(segment))
    text = out.stdout + out.stderr
    assert out.returncode == 0 and "Exception" not in text and "error" not in out.stderr.lower(), text[-3000:]
    payloads = [json.loads(m) for m in re.findall(r"payload: (\{.*\})$", out.stdout, re.M)]
    topics = {p["data"]["name"]: p["data"]["topicId"] for p in payloads if p["type"] == "TOPIC_RECORD"}
    assert topics == ids
    parts = [p for p in payloads if p["type"] == "PARTITION_RECORD"]
    assert sorted((p["data"]["topicId"], p["data"]["partitionId"]) for p in parts) == sorted(
        [(ids["meta-a"], i) for i in range(3)] + [(ids["meta-b"], 0)]
    )
    assert any(p["type"] == "REGISTER_BROKER_RECORD" for p in payloads)
    assert {"name": "metadata.version", "featureLevel": 30} in [
        p["data"] for p in payloads if p["type"] == "FEATURE_LEVEL_RECORD"
    ]
    assert "LeaderChange" in out.stdout  # each epoch starts with Kafka's leader change control record


def test_kafka_tools_read_a_kopfka_snapshot(kopfka_metadata: tuple[Path, dict[str, str]]) -> None:
    log_dir, ids = kopfka_metadata
    snap = snapshots.latest_snapshot(log_dir)
    assert snap is not None and snap.end_offset > 0, "kopfka wrote no snapshot"
    path = log_dir / snap.file_name
    out = run_tool("kafka-dump-log", "--cluster-metadata-decoder", "--files", str(path))
    assert out.returncode == 0 and "Exception" not in out.stdout + out.stderr, (out.stdout + out.stderr)[-3000:]
    assert f"Snapshot end offset: {snap.end_offset}, epoch: {snap.epoch}" in out.stdout
    assert "SnapshotHeader" in out.stdout and "SnapshotFooter" in out.stdout
    for name, topic_id in ids.items():
        assert f'"name":"{name}","topicId":"{topic_id}"' in out.stdout

    assert set(_shell(path, "ls", "/image/topics/byName", ok=lambda o: set(o.split()) >= set(ids)).split()) >= set(ids)
    assert ids["meta-a"] in _shell(path, "cat", "/image/topics/byName/meta-a/id", ok=lambda o: ids["meta-a"] in o)
    for pid in range(3):
        assert "replicas=[1]" in _shell(
            path, "cat", f"/image/topics/byName/meta-a/{pid}", ok=lambda o: "replicas=[1]" in o
        )
    assert "4.3-IV0" in _shell(path, "cat", "/image/features/metadataVersion", ok=lambda o: "4.3-IV0" in o)
    assert _shell(path, "ls", "/image/cluster/brokers", ok=lambda o: o.split() == ["1"]).split() == ["1"]


def _shell(snapshot: Path, *command: str, ok: Callable[[str], bool]) -> str:
    """kafka-metadata-shell's answer to one command on a snapshot. The shell answers while its
    loader may still be publishing the image (seen on this very file: `ls` empty, `cat`
    Optional.empty, then the full answer a run later; more often under load): asked up to five
    times before the last answer is judged."""
    for _ in range(5):
        shell = run_tool("kafka-metadata-shell", "--snapshot", str(snapshot), *command)
        assert shell.returncode == 0, (shell.stdout + shell.stderr)[-3000:]
        if ok(shell.stdout):
            break
    return shell.stdout

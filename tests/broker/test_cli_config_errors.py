"""Bad configuration and bad storage state fail fast with a message naming the problem."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kopfka.config.definitions import ConfigError
from kopfka.config.server_config import KafkaConfig, read_properties


def kopfka(*args: str, cwd: Path | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kopfka.cli.main", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )


def props(path: Path, **extra: str) -> Path:
    base = {
        "node.id": "1",
        "process.roles": "broker,controller",
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "log.dirs": str(path.parent / "logs"),
    }
    base.update({k.replace("_", "."): v for k, v in extra.items()})
    path.write_text("\n".join(f"{k}={v}" for k, v in base.items()) + "\n")
    return path


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num.partitions", "zero"),
        ("num.partitions", "0"),
        ("auto.create.topics.enable", "maybe"),
        ("log.segment.bytes", "1000"),
        ("listeners", "nonsense"),
    ],
)
def test_invalid_value_names_the_key(tmp_path: Path, key: str, value: str) -> None:
    cfg = props(tmp_path / "server.properties", **{key: value})
    res = kopfka("serve", "--config", str(cfg))
    assert res.returncode != 0
    assert key in res.stderr


def test_unknown_key_warns_but_starts_parsing() -> None:
    cfg = KafkaConfig.from_properties(
        {
            "node.id": "1",
            "process.roles": "broker,controller",
            "controller.listener.names": "CONTROLLER",
            "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
            "controller.quorum.voters": "1@localhost:9093",
            "no.such.key": "1",
        }
    )
    assert cfg.unknown_keys == ["no.such.key"]


def test_required_keys() -> None:
    with pytest.raises(ConfigError, match=r"process\.roles"):
        KafkaConfig.from_properties({"node.id": "1"})
    with pytest.raises(ConfigError, match=r"node\.id"):
        KafkaConfig.from_properties({"process.roles": "broker"})


def test_properties_parsing_and_env_interpolation(tmp_path: Path) -> None:
    p = tmp_path / "a.properties"
    p.write_text("# comment\n! also comment\nnode.id = ${env:NODE_ID}\nlog.dirs: /a,\\\n  /b\n")
    raw = read_properties(p)
    assert raw == {"node.id": "${env:NODE_ID}", "log.dirs": "/a,/b"}
    from kopfka.config.server_config import interpolate

    assert interpolate(raw["node.id"], {"NODE_ID": "7"}) == "7"
    with pytest.raises(ConfigError, match="NODE_ID"):
        interpolate(raw["node.id"], {})


def test_unformatted_dir_refused(tmp_path: Path) -> None:
    cfg = props(tmp_path / "server.properties")
    res = kopfka("serve", "--config", str(cfg))
    assert res.returncode == 1
    assert "meta.properties" in res.stderr and "storage format" in res.stderr


def test_format_is_idempotent_and_detects_other_cluster_and_node(tmp_path: Path) -> None:
    cfg = props(tmp_path / "server.properties")
    cid = kopfka("storage", "random-uuid").stdout.strip()
    assert len(cid) == 22
    assert kopfka("storage", "format", "--cluster-id", cid, "--config", str(cfg)).returncode == 0
    meta = (tmp_path / "logs" / "meta.properties").read_text()
    assert f"cluster.id={cid}" in meta and "node.id=1" in meta and "version=1" in meta and "directory.id=" in meta
    assert (tmp_path / "logs" / "bootstrap.checkpoint").exists()
    again = kopfka("storage", "format", "--cluster-id", cid, "--config", str(cfg))
    assert again.returncode == 1 and "already formatted" in again.stderr
    assert kopfka("storage", "format", "--cluster-id", cid, "--config", str(cfg), "--ignore-formatted").returncode == 0
    other = kopfka("storage", "random-uuid").stdout.strip()
    res = kopfka("storage", "format", "--cluster-id", other, "--config", str(cfg), "--ignore-formatted")
    assert res.returncode == 1 and str(tmp_path / "logs") in res.stderr and "another cluster" in res.stderr
    res = kopfka(
        "storage", "format", "--cluster-id", cid, "--config", str(cfg), "--ignore-formatted", "--override", "node.id=2"
    )
    assert res.returncode == 1 and "node 1" in res.stderr
    res = kopfka(
        "serve",
        "--config",
        str(cfg),
        "--override",
        "node.id=2",
        "--override",
        "controller.quorum.voters=2@127.0.0.1:9093",
    )
    assert res.returncode == 1 and "node" in res.stderr and str(tmp_path / "logs") in res.stderr
    res = kopfka(
        "storage",
        "format",
        "--cluster-id",
        "not-a-uuid",
        "--config",
        str(props(tmp_path / "b.properties", log_dirs=str(tmp_path / "x"))),
    )
    assert res.returncode == 1 and "UUID" in res.stderr
    info = kopfka("storage", "info", "--config", str(cfg))
    assert info.returncode == 0 and cid in info.stdout


def test_second_process_on_same_dir_is_refused(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from kopfka_process import KopfkaProcess

    first = KopfkaProcess(tmp_path / "data").start()
    try:
        second = KopfkaProcess(tmp_path / "data")
        with pytest.raises(RuntimeError, match="lock"):
            second.start(timeout=20)
    finally:
        first.kill()


def _config(**extra: str) -> dict[str, str]:
    base = {
        "node.id": "1",
        "process.roles": "broker,controller",
        "controller.listener.names": "CONTROLLER",
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "controller.quorum.voters": "1@localhost:9093",
    }
    base.update({k.replace("_", "."): v for k, v in extra.items()})
    return base


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"listeners": "SSL://:9094,CONTROLLER://:9093"}, "SSL"),  # default map: SSL:SSL
        ({"listeners": "PLAINTEXT://:9092,SASL_SSL://:9094,CONTROLLER://:9093"}, "SASL_SSL"),
        (
            {
                "listeners": "EXTERNAL://:9094,CONTROLLER://:9093",
                "listener.security.protocol.map": "EXTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            },
            "EXTERNAL",
        ),
        (
            {
                "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
            },
            "CONTROLLER",
        ),
    ],
)
def test_listener_mapped_to_ssl_or_sasl_parses(extra: dict[str, str], named: str) -> None:
    """SSL/SASL listeners are served (issue 17); what they need is checked when the node starts
    (tests/security/test_security_units.py)."""
    from kopfka.security.listeners import listener_protocol

    cfg = KafkaConfig.from_properties(_config(**extra))
    assert listener_protocol(cfg, named) != "PLAINTEXT"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"listeners": "CLIENT://:9092,CONTROLLER://:9093"},
            "no security protocol defined for listener CLIENT",
        ),
        ({"listener.security.protocol.map": "PLAINTEXT:TLS,CONTROLLER:PLAINTEXT"}, "invalid security protocol 'TLS'"),
        ({"listener.security.protocol.map": "PLAINTEXT"}, "expected LISTENER_NAME:SECURITY_PROTOCOL"),
    ],
)
def test_listener_security_protocol_map_is_read(extra: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        KafkaConfig.from_properties(_config(**extra))


def test_plaintext_listeners_with_explicit_map_start_parsing() -> None:
    cfg = KafkaConfig.from_properties(
        _config(
            listeners="CLIENT://:9092,CTL://:9093",
            controller_listener_names="CTL",
            listener_security_protocol_map="CLIENT:PLAINTEXT,CTL:PLAINTEXT",
        )
    )
    assert [lst.name for lst in cfg.broker_listeners] == ["CLIENT"]
    # without an explicit map, a controller listener of any name is PLAINTEXT (as in Kafka)
    KafkaConfig.from_properties(_config(listeners="PLAINTEXT://:9092,CTL://:9093", controller_listener_names="CTL"))


def test_serve_refuses_an_ssl_listener_without_a_keystore(tmp_path: Path) -> None:
    """An SSL listener is never served as plaintext: without a keystore the node does not start."""
    cfg = props(tmp_path / "server.properties", listeners="SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0")
    res = kopfka("serve", "--config", str(cfg))
    assert res.returncode == 1
    assert "ssl.keystore.location" in res.stderr and "a TLS listener needs a keystore" in res.stderr


def _truncated_metadata_file() -> bytes:
    """A metadata file laid out as Kafka's (snapshot header, records, footer) whose one record is a
    FeatureLevelRecord cut short after its name: valid batches, CRCs and all, holding garbage."""
    import struct

    from kopfka.protocol.record_codec import Record, encode_batch

    header = Record(0, 0, struct.pack(">hh", 0, 3), struct.pack(">hq", 0, 0) + b"\x00")
    name = b"metadata.version"
    truncated = bytes([1, 12, 0, len(name) + 1]) + name
    footer = Record(0, 0, struct.pack(">hh", 0, 4), struct.pack(">h", 0) + b"\x00")
    return (
        encode_batch([header], control=True)
        + encode_batch([Record(0, 0, None, truncated)], base_offset=1)
        + encode_batch([footer], base_offset=2, control=True)
    )


@pytest.mark.parametrize("damaged", ["bootstrap.checkpoint", "__cluster_metadata-0/00000000000000000000.log"])
def test_unreadable_metadata_records_are_refused_in_one_line(tmp_path: Path, damaged: str) -> None:
    """Metadata records that do not parse, in bootstrap.checkpoint or in the metadata log: `kopfka
    serve` names the file (and the offset) and exits 1, instead of a MetadataRecordError traceback
    (for bootstrap.checkpoint) or a raft client retrying the log forever (for the log)."""
    cfg = props(tmp_path / "server.properties")
    cid = kopfka("storage", "random-uuid").stdout.strip()
    assert kopfka("storage", "format", "--cluster-id", cid, "--config", str(cfg)).returncode == 0
    path = tmp_path / "logs" / damaged
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(_truncated_metadata_file())
    res = kopfka("serve", "--config", str(cfg), timeout=60)
    assert res.returncode == 1, res.stderr[-2000:]
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    where = f"{path} cannot be read" if damaged == "bootstrap.checkpoint" else f"{path} (offset 1)"
    assert f"kopfka serve: {where}: bad metadata record: truncated" in res.stderr, res.stderr[-2000:]

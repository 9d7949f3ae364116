"""Kafka's own Java admin client (kafka-clients 4.3) as a test peer.

`tests/java/AdminProbe.java` (and `SharePeer.java`, Kafka's share consumer) is compiled once per
session against Kafka's jars as `scripts/get-kafka` installs them (tests/kafkaref); each call runs
one JVM that performs a list of operations and prints one JSON object per operation.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "kafkaref"))
from kafka_ref import TOOL_JVM

SOURCE = Path(__file__).parent / "java" / "AdminProbe.java"
LOG_CONFIG = Path(__file__).parent / "kafkaref" / "log4j2-tools.properties"


def kafka_libs_classpath() -> str:
    """Kafka's jars as installed by scripts/get-kafka (tests/kafkaref), or skip with the reason."""
    from kafka_ref import KafkaUnavailable, kafka_home

    if shutil.which("javac") is None:
        pytest.skip("needs a JDK (javac) to compile the admin probe")
    try:
        return str(kafka_home() / "libs" / "*")
    except KafkaUnavailable as exc:
        pytest.skip(f"Apache Kafka unavailable: {exc}")


class JavaAdmin:
    def __init__(self, classes: Path, libs: str, main: str = "AdminProbe") -> None:
        self.classpath = os.pathsep.join([str(classes), libs])
        self.main = main

    def run(
        self, bootstrap: str, *commands: list[str], timeout_ms: int = 30000, request_timeout_ms: int = 15000
    ) -> list[dict[str, Any]]:
        """Run the commands in one admin client; one {"ok": ...} or {"error": ...} per command."""
        args: list[str] = []
        for cmd in commands:
            args += [*(["--"] if args else []), *cmd]
        res = subprocess.run(
            [
                "java",
                *TOOL_JVM,
                f"-Dlog4j2.configurationFile={LOG_CONFIG}",
                f"-Dapi.timeout.ms={timeout_ms}",
                f"-Drequest.timeout.ms={min(request_timeout_ms, timeout_ms)}",
                "-cp",
                self.classpath,
                self.main,
                bootstrap,
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=timeout_ms / 1000 * len(commands) + 60,
        )
        lines = [line for line in res.stdout.splitlines() if line.startswith("{")]
        assert res.returncode == 0 and len(lines) == len(commands), res.stdout + res.stderr
        return [json.loads(line) for line in lines]


@pytest.fixture(scope="session")
def java_admin(tmp_path_factory: pytest.TempPathFactory) -> JavaAdmin:
    libs = kafka_libs_classpath()
    classes = tmp_path_factory.mktemp("admin-probe")
    subprocess.run(
        ["javac", "-nowarn", "-d", str(classes), "-cp", libs, str(SOURCE)], check=True, capture_output=True, timeout=300
    )
    return JavaAdmin(classes, libs)


@pytest.fixture(scope="session")
def share_peer(tmp_path_factory: pytest.TempPathFactory) -> JavaAdmin:
    """tests/java/SharePeer.java: Kafka's KafkaShareConsumer driven through scenarios, one JVM per run."""
    libs = kafka_libs_classpath()
    classes = tmp_path_factory.mktemp("share-peer")
    subprocess.run(
        ["javac", "-nowarn", "-d", str(classes), "-cp", libs, str(SOURCE), str(SOURCE.parent / "SharePeer.java")],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return JavaAdmin(classes, libs, "SharePeer")

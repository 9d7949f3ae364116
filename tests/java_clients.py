"""Kafka's own Java admin client (kafka-clients 4.3 from Maven Central) as a test peer.

`tests/java/AdminProbe.java` is compiled once per session against the jars in the local Maven
repository (fetched with `mvn dependency:get` on first use); each call runs one JVM that
performs a list of admin operations and prints one JSON object per operation.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

KAFKA_CLIENTS = "org.apache.kafka:kafka-clients:4.3.0"
_JARS = [
    "org/apache/kafka/kafka-clients/4.3.0/kafka-clients-4.3.0.jar",
    "org/slf4j/slf4j-api/1.7.36/slf4j-api-1.7.36.jar",
]
SOURCE = Path(__file__).parent / "java" / "AdminProbe.java"


def _m2() -> Path:
    return Path(os.environ.get("MAVEN_REPOSITORY", Path.home() / ".m2" / "repository"))


def kafka_clients_classpath() -> list[Path]:
    """The jars, fetched into the local Maven repository if absent; skips the test without Java/Maven."""
    if shutil.which("java") is None or shutil.which("javac") is None:
        pytest.skip("needs a JDK (java, javac)")
    jars = [_m2() / j for j in _JARS]
    if not all(j.exists() for j in jars):
        if shutil.which("mvn") is None:
            pytest.skip(f"needs {KAFKA_CLIENTS} in {_m2()} or Maven to fetch it")
        subprocess.run(
            ["mvn", "-q", "-B", "dependency:get", f"-Dartifact={KAFKA_CLIENTS}"],
            check=True,
            capture_output=True,
            timeout=600,
        )
    return jars


class JavaAdmin:
    def __init__(self, classes: Path, jars: list[Path]) -> None:
        self.classpath = os.pathsep.join([str(classes), *map(str, jars)])

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
                f"-Dapi.timeout.ms={timeout_ms}",
                f"-Drequest.timeout.ms={min(request_timeout_ms, timeout_ms)}",
                "-cp",
                self.classpath,
                "AdminProbe",
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
    jars = kafka_clients_classpath()
    classes = tmp_path_factory.mktemp("admin-probe")
    subprocess.run(
        ["javac", "-nowarn", "-d", str(classes), "-cp", os.pathsep.join(map(str, jars)), str(SOURCE)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return JavaAdmin(classes, jars)

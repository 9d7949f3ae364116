"""Fixtures for the operator tests (helpers live in operator_testlib.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import kmock
import pytest
from kopfka_operator import GROUP, VERSION
from operator_testlib import Emulator, load_crd, to_jsonschema


@pytest.fixture(scope="session")
def crd_schemas() -> dict[str, Any]:
    """Kind -> JSON Schema of the whole object."""
    result = {}
    for plural in ("kafkaclusters", "topics", "quotas", "users"):
        crd = load_crd(plural)
        version = crd["spec"]["versions"][0]
        result[crd["spec"]["names"]["kind"]] = to_jsonschema(version["schema"]["openAPIV3Schema"])
    return result


@pytest.fixture
async def k8s() -> AsyncIterator[Emulator]:
    async with Emulator() as emulator, kmock.Server(emulator) as server:
        emulator.resources.load_bundled()
        for plural, kind in (
            ("kafkaclusters", "KafkaCluster"),
            ("topics", "Topic"),
            ("quotas", "Quota"),
            ("users", "User"),
        ):
            emulator.resources[f"{GROUP}/{VERSION}/{plural}"] = kmock.ResourceInfo(
                kind=kind,
                namespaced=True,
                verbs=["list", "watch", "get", "create", "patch", "update", "delete"],
                subresources=["status"],
            )
        emulator.server_url = str(server.url)
        yield emulator
        await asyncio.sleep(0)

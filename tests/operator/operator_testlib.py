"""Helpers for the operator tests: CRD schemas as jsonschema, and a kmock API server that
behaves enough like a real one for kopf (see ../../../shared/ENVIRONMENT.md).

`Emulator` adds what kmock 0.8 leaves out and kopf relies on: uid / resourceVersion /
generation / creationTimestamp on every write, 422 for a failed JSON-patch test, 409 for a
stale resourceVersion precondition, status-subresource isolation, label selectors, a watch
that subscribes before its snapshot and honours ?resourceVersion=, and typed list responses.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import os
import pathlib
import subprocess
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import aiohttp.web
import attrs
import jsonpatch
import kmock
import kopf
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
CRD_DIR = REPO / "crds"


# ---------------------------------------------------------------------------------------------
# CRD schemas for jsonschema


def to_jsonschema(schema: Any) -> Any:
    """An openAPIV3Schema as plain JSON Schema, strict like `kubectl apply --validate=strict`:
    unknown fields are errors, int-or-string means either."""
    if isinstance(schema, list):
        return [to_jsonschema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: to_jsonschema(v) for k, v in schema.items() if not k.startswith("x-kubernetes")}
    if schema.get("x-kubernetes-int-or-string"):
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if (
        schema.get("type") == "object"
        and "properties" in schema
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
        and set(schema["properties"]) != {"apiVersion", "kind", "metadata", "spec", "status"}
    ):
        out["additionalProperties"] = False
    return out


def load_crd(plural: str) -> dict[str, Any]:
    return yaml.safe_load((CRD_DIR / f"kopfka.io_{plural}.yaml").read_text())


# ---------------------------------------------------------------------------------------------
# A kmock emulator good enough for kopf


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def selector_matches(selector: str | None, labels: Mapping[str, str]) -> bool:
    for term in filter(None, (selector or "").split(",")):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _rv(raw: Mapping[str, Any]) -> int:
    return int((raw.get("metadata") or {}).get("resourceVersion") or 0)


@attrs.define(kw_only=True)
class Emulator(kmock.KubernetesEmulator):
    _rv_counter: int = attrs.field(default=0, init=False)
    writes: list[tuple[str, str, str | None, str | None]] = attrs.field(factory=list, init=False)
    server_url: str = attrs.field(default="", init=False)

    def _next_rv(self) -> str:
        self._rv_counter += 1
        return str(self._rv_counter)

    def _info(self, resource: Any) -> Any:
        try:
            return self.resources[resource]
        except KeyError as exc:
            raise kmock.KubernetesResourceNotFoundError() from exc

    async def _handle(self, request: Any) -> aiohttp.web.StreamResponse:
        mutating = (kmock.action.CREATE, kmock.action.UPDATE, kmock.action.DELETE)
        if request.resource is None or request.action not in mutating:
            return await super()._handle(request)
        self.writes.append((request.action.value, request.resource.plural, request.name, request.subresource))
        try:
            async with self._lock:
                event, raw, status = self._mutate(request)
                if event:
                    await self._buses[request.resource].put({"type": event, "object": raw})
        except kmock.KubernetesError as exc:
            return await self._render_error(exc)
        return aiohttp.web.json_response(raw, status=status)

    def _mutate(self, request: Any) -> tuple[str | None, dict[str, Any], int]:
        info = self._info(request.resource)
        if request.action == kmock.action.CREATE:
            data = copy.deepcopy(request.data)
            meta = data.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):  # kopf's events
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            ns = request.namespace or meta.get("namespace")
            key = (request.resource, ns, meta["name"])
            if key in self._objects and not self._objects[key].deleted:
                raise kmock.KubernetesError(409, "AlreadyExists", f"{meta['name']} already exists")
            meta.update(
                namespace=ns,
                uid=str(uuid.uuid4()),
                resourceVersion=self._next_rv(),
                generation=1,
                creationTimestamp=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            )
            if "status" in info.subresources:
                data.pop("status", None)
            if key in self._objects:
                self._objects[key].create(data)
            else:
                self._objects[key] = data
            return "ADDED", data, 201

        key = (request.resource, request.namespace, request.name)
        if key not in self._objects or self._objects[key].deleted:
            raise kmock.KubernetesObjectNotFoundError()
        obj = self._objects[key]
        current = copy.deepcopy(obj.raw)
        meta = current["metadata"]

        if request.action == kmock.action.DELETE:
            if meta.get("finalizers"):
                if meta.get("deletionTimestamp"):
                    return None, current, 200
                meta["deletionTimestamp"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                meta["resourceVersion"] = self._next_rv()
                obj.history.append(current)
                return "MODIFIED", current, 200
            meta["resourceVersion"] = self._next_rv()
            obj.history.append(current)
            obj.delete()
            return "DELETED", current, 200

        patch = request.data
        if isinstance(patch, list):
            try:
                new = jsonpatch.apply_patch(current, patch, in_place=False)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                raise kmock.KubernetesError(422, "Invalid", f"patch failed: {exc}") from exc
        else:
            wanted_rv = (patch.get("metadata") or {}).get("resourceVersion")
            if wanted_rv and wanted_rv != meta.get("resourceVersion"):
                raise kmock.KubernetesError(409, "Conflict", "the object has been modified")
            if request.subresource == "status":
                patch = {"status": patch.get("status")}
            elif "status" in info.subresources:
                patch = {k: v for k, v in patch.items() if k != "status"}
            new = merge_patch(current, patch)
        new_meta = new.setdefault("metadata", {})
        if new.get("spec") != current.get("spec"):
            new_meta["generation"] = int(meta.get("generation") or 1) + 1
        if new == current:
            return None, current, 200
        new_meta["resourceVersion"] = self._next_rv()
        obj.history.append(new)
        if new_meta.get("deletionTimestamp") and not new_meta.get("finalizers"):
            obj.delete()
            return "DELETED", new, 200
        return "MODIFIED", new, 200

    def _matching(self, request: Any) -> list[dict[str, Any]]:
        selector = request.params.get("labelSelector")
        items = []
        for (resource, ns, _), obj in self._objects.items():
            if resource != request.resource or obj.deleted:
                continue
            if request.namespace is not None and ns != request.namespace:
                continue
            raw = obj.raw
            if selector_matches(selector, (raw.get("metadata") or {}).get("labels") or {}):
                items.append(raw)
        return items

    async def _serve_list(self, request: Any) -> Any:
        info = self._info(request.resource)
        async with self._lock:
            items = self._matching(request)
            rv = str(self._rv_counter)
        group, version = request.resource.group, request.resource.version
        return {
            "apiVersion": f"{group}/{version}" if group else version,
            "kind": f"{info.kind}List",
            "metadata": {"resourceVersion": rv},
            "items": items,
        }

    async def _serve_watch(self, request: Any) -> AsyncIterator[Any]:
        yield b""
        raw_since = request.params.get("resourceVersion") or "0"
        since = int(raw_since) if raw_since.isdigit() else 0
        selector = request.params.get("labelSelector")
        bus = self._buses[request.resource]
        mark = await bus.mark()  # subscribe first: nothing falls between snapshot and stream
        try:
            async with self._lock:
                snapshot = self._matching(request)
            last: dict[tuple[Any, Any], int] = {}
            for raw in snapshot:
                meta = raw["metadata"]
                last[(meta.get("namespace"), meta["name"])] = _rv(raw)
                if _rv(raw) > since:
                    yield {"type": "ADDED", "object": raw}
            async for event in bus.stream(since=mark):
                raw = event["object"]
                meta = raw.get("metadata") or {}
                if request.namespace is not None and meta.get("namespace") != request.namespace:
                    continue
                if not selector_matches(selector, meta.get("labels") or {}):
                    continue
                ident = (meta.get("namespace"), meta.get("name"))
                if _rv(raw) <= last.get(ident, since):
                    continue
                last[ident] = _rv(raw)
                yield event
        finally:
            await bus.unmark(mark)


@contextlib.asynccontextmanager
async def running_kopf(
    registry: kopf.OperatorRegistry, settings: kopf.OperatorSettings, namespaces: list[str]
) -> AsyncIterator[None]:
    """kopf in its own thread and loop: on shutdown kopf cancels every task of its loop that
    it did not find at startup, which would include the test's own teardown."""
    settings.peering.standalone = True
    settings.scanning.disabled = True
    stop, ready = threading.Event(), threading.Event()
    operator = kopf.operator(
        registry=registry, settings=settings, standalone=True, namespaces=namespaces, stop_flag=stop, ready_flag=ready
    )
    thread = threading.Thread(target=asyncio.run, args=(operator,), daemon=True)
    thread.start()
    loop = asyncio.get_running_loop()
    assert await loop.run_in_executor(None, ready.wait, 10), "kopf did not start"
    try:
        yield
    finally:
        stop.set()
        await loop.run_in_executor(None, thread.join, 20)
        assert not thread.is_alive(), "kopf did not stop"


async def eventually(probe: Callable[[], Any], timeout: float = 30.0, interval: float = 0.05) -> Any:
    """Poll an async probe until it returns something truthy (its last error is re-raised)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            result = await probe()
            if result:
                return result
            error: Exception | None = None
        except (AssertionError, KeyError, TypeError) as exc:
            error = exc
        if asyncio.get_running_loop().time() > deadline:
            if error:
                raise error
            raise AssertionError(f"timed out waiting for {probe}")
        await asyncio.sleep(interval)


def run_script(
    tmp_path: pathlib.Path, script: str, pod: str, formed: pathlib.Path | None = None, **extra_env: str
) -> list[str]:
    """Run a rendered container script with a fake `kopfka` that prints its arguments."""
    fake = tmp_path / "kopfka"
    fake.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    fake.chmod(0o755)
    env = {"PATH": f"{tmp_path}:{os.environ['PATH']}", "POD_NAME": pod, "POD_NAMESPACE": "ns"}
    # The quorum-formed mark: absent unless given (never the host's /etc/kopfka).
    env["KOPFKA_QUORUM_FORMED_FILE"] = str(formed or tmp_path / "no-such-mark")
    env.update(extra_env)
    proc = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True, check=True)
    return proc.stdout.splitlines()

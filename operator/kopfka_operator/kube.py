"""A deliberately small async Kubernetes API client for the children the operator manages.

kopf gives handlers a patch object for their own resource only; children need get / list /
create / merge-patch / delete. The official client is synchronous and heavy, so this uses the
same aiohttp and the same credentials (kopf.ConnectionInfo from the login handler) as kopf.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp
import kopf

from . import API_VERSION


@dataclass(frozen=True)
class Kind:
    api_version: str
    plural: str

    def path(self, namespace: str, name: str | None = None, subresource: str | None = None) -> str:
        prefix = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        path = f"{prefix}/namespaces/{quote(namespace)}/{self.plural}"
        if name:
            path += f"/{quote(name)}"
        if subresource:
            path += f"/{subresource}"
        return path


KINDS: dict[str, Kind] = {
    "ConfigMap": Kind("v1", "configmaps"),
    "Service": Kind("v1", "services"),
    "ServiceAccount": Kind("v1", "serviceaccounts"),
    "PersistentVolumeClaim": Kind("v1", "persistentvolumeclaims"),
    "Pod": Kind("v1", "pods"),
    "StatefulSet": Kind("apps/v1", "statefulsets"),
    "PodDisruptionBudget": Kind("policy/v1", "poddisruptionbudgets"),
    "KafkaCluster": Kind(API_VERSION, "kafkaclusters"),
}


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class KubeApi:
    """One aiohttp session against one API server; created lazily inside the running loop."""

    def __init__(self, info: kopf.ConnectionInfo) -> None:
        self.info = info
        self._session: aiohttp.ClientSession | None = None

    def _ssl(self) -> ssl.SSLContext | bool:
        if not self.info.server.startswith("https"):
            return False
        if self.info.insecure:
            return False
        return self.info.as_ssl_context()

    async def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                base_url=self.info.server.rstrip("/"),
                headers=self.info.as_http_headers(),
                connector=aiohttp.TCPConnector(ssl=self._ssl()),
                timeout=aiohttp.ClientTimeout(total=60),
            )
        data = json.dumps(body) if body is not None else None
        headers = {"Content-Type": content_type} if data is not None else {}
        async with self._session.request(
            method, path, data=data, params=params, headers=headers
        ) as resp:
            text = await resp.text()
            if resp.status >= 400:
                try:
                    message = json.loads(text).get("message", text)
                except (ValueError, AttributeError):
                    message = text
                raise ApiError(resp.status, str(message))
            return json.loads(text) if text else None

    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = await self._request("GET", KINDS[kind].path(namespace, name))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return result

    async def list(self, kind: str, namespace: str, selector: str) -> list[dict[str, Any]]:
        result = await self._request(
            "GET", KINDS[kind].path(namespace), params={"labelSelector": selector}
        )
        return list(result.get("items") or [])

    async def create(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self._request(
            "POST", KINDS[body["kind"]].path(namespace), body
        )
        return result

    async def patch(
        self,
        kind: str,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386): dicts merge, lists and scalars replace, None deletes."""
        result: dict[str, Any] = await self._request(
            "PATCH",
            KINDS[kind].path(namespace, name, subresource),
            patch,
            content_type="application/merge-patch+json",
        )
        return result

    async def apply(
        self, kind: str, namespace: str, name: str, body: Mapping[str, Any], field_manager: str
    ) -> dict[str, Any]:
        """Server-side apply of a whole object: fields this manager stopped sending are removed."""
        result: dict[str, Any] = await self._request(
            "PATCH",
            KINDS[kind].path(namespace, name),
            body,
            params={"fieldManager": field_manager, "force": "true"},
            content_type="application/apply-patch+yaml",
        )
        return result

    async def delete(self, kind: str, namespace: str, name: str) -> None:
        try:
            await self._request("DELETE", KINDS[kind].path(namespace, name))
        except ApiError as exc:
            if exc.status != 404:
                raise

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

"""The operator's Kubernetes API client: kubernetes_asyncio's typed APIs behind a small facade.

kopf gives handlers a patch object for their own resource only; children (StatefulSets, pods,
ConfigMaps, ...) and events need get / list / create / merge-patch / server-side apply / delete.
Those go through the maintained asyncio client (its transport, auth and serialization), built
from the same credentials kopf logged in with (kopf.ConnectionInfo). Objects travel as plain
dicts in the API's JSON shape, so the manifests and status code stay free of client models.
"""

from __future__ import annotations

import base64
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from . import GROUP, VERSION

MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


@dataclass(frozen=True)
class Kind:
    api: str  # kubernetes_asyncio API class name
    noun: str  # the suffix of its methods: read_namespaced_<noun>, ...


KINDS: dict[str, Kind] = {
    "ConfigMap": Kind("CoreV1Api", "config_map"),
    "Secret": Kind("CoreV1Api", "secret"),
    "Service": Kind("CoreV1Api", "service"),
    "ServiceAccount": Kind("CoreV1Api", "service_account"),
    "PersistentVolumeClaim": Kind("CoreV1Api", "persistent_volume_claim"),
    "Pod": Kind("CoreV1Api", "pod"),
    "Event": Kind("CoreV1Api", "event"),
    "StatefulSet": Kind("AppsV1Api", "stateful_set"),
    "PodDisruptionBudget": Kind("PolicyV1Api", "pod_disruption_budget"),
    "Ingress": Kind("NetworkingV1Api", "ingress"),
}
CUSTOM_PLURALS = {"KafkaCluster": "kafkaclusters", "Topic": "topics", "Quota": "quotas", "User": "users"}


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


def _error(exc: ApiException) -> ApiError:
    import json

    message = exc.reason or ""
    if exc.body:
        try:
            message = json.loads(exc.body).get("message", message)
        except (ValueError, AttributeError):
            message = str(exc.body)
    return ApiError(int(exc.status or 0), str(message))


def configuration(info: kopf.ConnectionInfo) -> k8s.Configuration:
    """A kubernetes_asyncio Configuration holding the credentials kopf logged in with."""
    cfg = k8s.Configuration(host=info.server.rstrip("/"))
    cfg.verify_ssl = not info.insecure
    cfg.client_side_validation = False  # the API server is the authority on its own objects

    def file_of(path: Any, data: bytes | str | None) -> str | None:
        if path:
            return str(path)
        if not data:
            return None
        raw = data.encode() if isinstance(data, str) else data
        if not raw.lstrip().startswith(b"-----"):
            raw = base64.b64decode(raw)
        handle = tempfile.NamedTemporaryFile(prefix="kopfka-kube-", delete=False)
        handle.write(raw)
        handle.close()
        return handle.name

    cfg.ssl_ca_cert = file_of(info.ca_path, info.ca_data)
    cfg.cert_file = file_of(info.certificate_path, info.certificate_data)
    cfg.key_file = file_of(info.private_key_path, info.private_key_data)
    if info.token:
        cfg.api_key = {"BearerToken": f"{info.scheme or 'Bearer'} {info.token}"}
    elif info.username and info.password:
        cfg.username, cfg.password = info.username, info.password
    return cfg


class KubeApi:
    """One kubernetes_asyncio ApiClient per login; created lazily inside the running loop."""

    def __init__(self, info: kopf.ConnectionInfo) -> None:
        self.info = info
        self._client: k8s.ApiClient | None = None
        self._apis: dict[str, Any] = {}

    def _api(self, name: str) -> Any:
        if self._client is None:
            self._client = k8s.ApiClient(configuration(self.info))
            self._apis = {}
        if name not in self._apis:
            self._apis[name] = getattr(k8s, name)(self._client)
        return self._apis[name]

    def _plain(self, obj: Any) -> Any:
        assert self._client is not None
        return self._client.sanitize_for_serialization(obj)

    async def _call(self, kind: str, verb: str, *args: Any, **kwargs: Any) -> Any:
        try:
            if kind in CUSTOM_PLURALS:
                api = self._api("CustomObjectsApi")
                method = getattr(api, f"{verb}_namespaced_custom_object" + kwargs.pop("_suffix", ""))
                return await method(GROUP, VERSION, *args[:1], CUSTOM_PLURALS[kind], *args[1:], **kwargs)
            spec = KINDS[kind]
            api = self._api(spec.api)
            method = getattr(api, f"{verb}_namespaced_{spec.noun}" + kwargs.pop("_suffix", ""))
            return self._plain(await method(*args, **kwargs))
        except ApiException as exc:
            raise _error(exc) from exc

    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            if kind in CUSTOM_PLURALS:
                result: dict[str, Any] = await self._call(kind, "get", namespace, name)
            else:
                result = await self._call(kind, "read", name, namespace)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return result

    async def list(self, kind: str, namespace: str, selector: str) -> list[dict[str, Any]]:
        result = await self._call(kind, "list", namespace, label_selector=selector)
        return list(result.get("items") or [])

    async def create(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        kind = body["kind"]
        if kind in CUSTOM_PLURALS:
            result: dict[str, Any] = await self._call(kind, "create", namespace, dict(body))
        else:
            result = await self._call(kind, "create", namespace, dict(body))
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
        suffix = f"_{subresource}" if subresource else ""
        if kind in CUSTOM_PLURALS:
            result: dict[str, Any] = await self._call(
                kind, "patch", namespace, name, dict(patch), _suffix=suffix, _content_type=MERGE_PATCH
            )
        else:
            result = await self._call(
                kind, "patch", name, namespace, dict(patch), _suffix=suffix, _content_type=MERGE_PATCH
            )
        return result

    async def apply(
        self, kind: str, namespace: str, name: str, body: Mapping[str, Any], field_manager: str
    ) -> dict[str, Any]:
        """Server-side apply of a whole object: fields this manager stopped sending are removed."""
        result: dict[str, Any] = await self._call(
            kind,
            "patch",
            name,
            namespace,
            dict(body),
            field_manager=field_manager,
            force=True,
            _content_type=APPLY_PATCH,
        )
        return result

    async def delete(
        self,
        kind: str,
        namespace: str,
        name: str,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
    ) -> None:
        """Delete; a 404 is success. A grace period overrides the pod's own (a broker leading
        many partitions needs longer to hand leadership over than its template says);
        propagation "Orphan" keeps a StatefulSet's pods running while the set is replaced."""
        options = k8s.V1DeleteOptions(grace_period_seconds=grace_period_seconds, propagation_policy=propagation_policy)
        try:
            if kind in CUSTOM_PLURALS:
                await self._call(kind, "delete", namespace, name)
            else:
                await self._call(kind, "delete", name, namespace, body=options)
        except ApiError as exc:
            if exc.status != 404:
                raise

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
            self._apis = {}

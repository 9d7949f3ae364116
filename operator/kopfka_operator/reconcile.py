"""Make the children match the rendered manifests, and keep the status in step.

Idempotence: every child carries a hash of what the operator last applied; a child whose hash
matches and whose fields still contain the desired ones is left alone, so a reconcile that has
nothing to do sends no writes at all. Changes are sent as server-side apply (the API server then
also drops fields the operator stopped rendering); where that verb is unknown (test servers),
creation falls back to POST.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .ids import initial_controllers, new_kafka_uuid
from .kube import ApiError, KubeApi
from .manifests import Cluster, Manifest, build_children, config_map
from .manifests.common import Assigned
from .manifests.config import CLUSTER_ID_KEY, INITIAL_CONTROLLERS_KEY
from .manifests.external import advertised_entries, external_children
from .manifests.statefulset import DELETE_CLAIMS_ANNOTATION, METADATA_VOLUME_ANNOTATION
from .naming import (
    ADVERTISED_PREFIX,
    LABEL_CLUSTER,
    LABEL_CONFIG_REVISION,
    LABEL_LISTENER,
    LABEL_ROLE,
    LABEL_VOLUME,
    MANAGED_BY,
    QUORUM_FORMED_KEY,
    advertised_key,
    config_map_name,
    pool_name,
)
from .roll.plan import MANUAL_ROLL_ANNOTATION
from .scale.replicas import rendered_replicas
from .security.certificates import CertificateError, ensure_certificates
from .spec import ClusterSpec, Pool, SpecError, Volume, parse_spec
from .status import Observed, build_status

HASH_ANNOTATION = "kopfka.io/applied-hash"
FIELD_MANAGER = MANAGED_BY

log = logging.getLogger(__name__)


def manifest_hash(manifest: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:20]


def contains(actual: Any, desired: Any) -> bool:
    """Whether `actual` holds every field of `desired` (server-side defaults may add more)."""
    if isinstance(desired, Mapping):
        return isinstance(actual, Mapping) and all(
            key in actual and contains(actual[key], value) for key, value in desired.items()
        )
    if isinstance(desired, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(desired)
            and all(contains(a, d) for a, d in zip(actual, desired, strict=True))
        )
    return bool(actual == desired)


def _claims(sts: Mapping[str, Any]) -> dict[str, tuple[str, str | None]]:
    """Claim template name -> (size, storage class)."""
    return {
        (vct.get("metadata") or {}).get("name", ""): (
            str(((vct.get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage")),
            (vct.get("spec") or {}).get("storageClassName"),
        )
        for vct in (sts.get("spec") or {}).get("volumeClaimTemplates") or []
    }


@dataclass(frozen=True)
class StorageChange:
    """How a StatefulSet's JBOD volumes differ between what runs and what the spec wants."""

    name: str
    added: tuple[str, ...]
    removed: tuple[str, ...]
    resized: tuple[str, ...]
    metadata_moved: bool

    @property
    def safe(self) -> bool:
        """Volumes added, or removed once emptied (the rendering keeps a volume that is to go
        until the scaler has moved its replicas away): the set is re-created, pods kept."""
        return bool(self.added or self.removed) and not (self.resized or self.metadata_moved)

    def refusal(self) -> str:
        parts = []
        if self.resized:
            parts.append(f"{', '.join(self.resized)} changed size or storage class (claims are immutable)")
        if self.metadata_moved:
            parts.append("kraftMetadata moved to another volume (the metadata log would be left behind)")
        return f"StatefulSet {self.name}: storage change refused as a whole: " + "; ".join(parts)


def storage_change(desired: Mapping[str, Any], existing: Mapping[str, Any]) -> StorageChange | None:
    want, have = _claims(desired), _claims(existing)
    want_meta = ((desired.get("metadata") or {}).get("annotations") or {}).get(METADATA_VOLUME_ANNOTATION)
    have_meta = ((existing.get("metadata") or {}).get("annotations") or {}).get(METADATA_VOLUME_ANNOTATION)
    change = StorageChange(
        desired["metadata"]["name"],
        tuple(sorted(set(want) - set(have))),
        tuple(sorted(set(have) - set(want))),
        tuple(sorted(n for n in set(want) & set(have) if want[n] != have[n])),
        have_meta is not None and want_meta != have_meta,
    )
    if change.added or change.removed or change.resized or change.metadata_moved:
        return change
    return None


async def _recreate_orphaning_pods(api: KubeApi, body: Manifest) -> None:
    """A StatefulSet's claim templates are immutable: delete the set but not its pods (Orphan),
    create it again with the new templates; the running pods are adopted, stale against the new
    template, and the roller restarts them one at a time, each getting its new claim."""
    meta = body["metadata"]
    await api.delete("StatefulSet", meta["namespace"], meta["name"], propagation_policy="Orphan")
    for _ in range(300):
        if await api.get("StatefulSet", meta["namespace"], meta["name"]) is None:
            break
        await asyncio.sleep(0.1)
    await api.create(meta["namespace"], body)


# ConfigMap keys no render takes back once written: a reconcile that read the cluster just before
# the status handler marked the quorum formed renders the voters' ConfigMap without the mark, and
# server-side apply would drop it (a wiped disk would then format with --initial-controllers).
PERMANENT_KEYS = frozenset({QUORUM_FORMED_KEY})


async def apply_child(api: KubeApi, desired: Manifest, attempts: int = 3) -> tuple[str, str | None]:
    """Create or update one child; returns (what happened, warning or None)."""
    meta = desired["metadata"]
    kind, ns, name = desired["kind"], meta["namespace"], meta["name"]
    body = copy.deepcopy(desired)
    existing = await api.get(kind, ns, name)
    guarded = kind == "ConfigMap" and existing is not None
    if guarded:
        live = (existing or {}).get("data") or {}
        data = body.setdefault("data", {})
        data.update({k: live[k] for k in PERMANENT_KEYS if k in live and k not in data})
    digest = manifest_hash(body)
    body["metadata"].setdefault("annotations", {})[HASH_ANNOTATION] = digest
    if existing is None:
        await api.create(ns, body)
        return "created", None
    if kind == "StatefulSet":
        change = storage_change(desired, existing)
        if change is not None and change.safe:
            await _recreate_orphaning_pods(api, body)
            what = [f"+{n}" for n in change.added] + [f"-{n}" for n in change.removed]
            return f"recreated with volume change(s) {', '.join(what)} (pods kept)", None
        if change is not None:
            return "unchanged", change.refusal()  # never half-applied
    annotations = (existing.get("metadata") or {}).get("annotations") or {}
    if annotations.get(HASH_ANNOTATION) == digest and contains(existing, body):
        return "unchanged", None
    if guarded:  # written over what was read, or not at all: a mark written meanwhile is kept
        body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
    try:
        await api.apply(kind, ns, name, body, FIELD_MANAGER)
    except ApiError as exc:
        if guarded and exc.status == 409 and attempts > 1:
            return await apply_child(api, desired, attempts - 1)
        raise
    return "updated", None


async def ensure_ids(api: KubeApi, body: Mapping[str, Any], spec: ClusterSpec) -> tuple[str, str]:
    """The cluster id and initial voter set: from the status, else from a ConfigMap the
    operator wrote earlier (status lost in a restore), else new. Never regenerated once used:
    formatted disks carry the cluster id."""
    status = body.get("status") or {}
    meta = body["metadata"]
    if not status.get("clusterId"):
        # The body may predate another handler's first reconcile (a timer and the create
        # handler race on a new cluster): the live object decides before a new id is made.
        live = await api.get("KafkaCluster", meta["namespace"], meta["name"])
        status = (live or {}).get("status") or {}
    cluster_id, voters = status.get("clusterId"), status.get("initialControllers")
    if not cluster_id or voters is None:
        cm = await api.get("ConfigMap", meta["namespace"], config_map_name(meta["name"], spec.voters.role))
        data = (cm or {}).get("data") or {}
        cluster_id = cluster_id or data.get(CLUSTER_ID_KEY)
        voters = voters if voters is not None else data.get(INITIAL_CONTROLLERS_KEY)
    if not cluster_id:
        cluster_id = new_kafka_uuid()
        voters = initial_controllers(meta["name"], meta["namespace"], spec.voters)
    return cluster_id, voters or ""


async def _running_replicas(api: KubeApi, namespace: str, name: str, spec: ClusterSpec) -> dict[str, int]:
    """Role -> the replicas its StatefulSet has now (pods a shrink has yet to remove still need
    their certificates)."""
    out: dict[str, int] = {}
    for pool in spec.pools:
        sts = await api.get("StatefulSet", namespace, pool_name(name, pool.role))
        out[pool.role] = int(((sts or {}).get("spec") or {}).get("replicas") or 0)
    return out


async def _with_safe_replicas(api: KubeApi, body: Mapping[str, Any], spec: ClusterSpec) -> ClusterSpec:
    """The spec with each pool's replica count as the scaler allows it now (scale/replicas.py):
    a shrink waits until the nodes going away are empty and out of the quorum, voters grow one
    at a time."""
    meta = body["metadata"]
    scale = (body.get("status") or {}).get("scale") or {}
    pools = {}
    for pool in spec.pools:
        sts = await api.get("StatefulSet", meta["namespace"], pool_name(meta["name"], pool.role))
        running = ((sts or {}).get("spec") or {}).get("replicas")
        count = rendered_replicas(pool.role, pool.replicas, running, scale.get(pool.role) or {})
        pools[pool.role] = dataclasses.replace(pool, replicas=count)
    if spec.controllers is None:
        return dataclasses.replace(spec, brokers=pools[spec.brokers.role])
    return dataclasses.replace(spec, brokers=pools["broker"], controllers=pools["controller"])


def removed_volumes(pool: Pool, sts: Mapping[str, Any] | None) -> list[Volume]:
    """Volumes the StatefulSet has and the spec no longer lists, as the set has them (size,
    class, and deleteClaim from the set's annotation)."""
    if sts is None:
        return []
    wanted = {v.id for v in pool.volumes}
    annotations = (sts.get("metadata") or {}).get("annotations") or {}
    delete = {int(i) for i in (annotations.get(DELETE_CLAIMS_ANNOTATION) or "").split(",") if i.isdigit()}
    out = []
    for name, (size, storage_class) in _claims(sts).items():
        if name.startswith("data-") and name[5:].isdigit() and int(name[5:]) not in wanted:
            vid = int(name[5:])
            out.append(Volume(vid, size, storage_class, delete_claim=vid in delete))
    return sorted(out, key=lambda v: v.id)


async def _with_retained_volumes(api: KubeApi, body: Mapping[str, Any], spec: ClusterSpec) -> ClusterSpec:
    """The spec with each volume that is to be removed still in place until the scaler has
    emptied it (status.scale.<role>.volumesEvacuated): its disk stays mounted and in log.dirs
    while AlterReplicaLogDirs moves the replicas to the other disks."""
    meta = body["metadata"]
    scale = (body.get("status") or {}).get("scale") or {}
    pools = {}
    for pool in spec.pools:
        sts = await api.get("StatefulSet", meta["namespace"], pool_name(meta["name"], pool.role))
        evacuated = set((scale.get(pool.role) or {}).get("volumesEvacuated") or [])
        keep = [v for v in removed_volumes(pool, sts) if v.id not in evacuated]
        vols = tuple(sorted((*pool.volumes, *keep), key=lambda v: v.id))
        pools[pool.role] = dataclasses.replace(pool, volumes=vols)
    if spec.controllers is None:
        return dataclasses.replace(spec, brokers=pools[spec.brokers.role])
    return dataclasses.replace(spec, brokers=pools["broker"], controllers=pools["controller"])


async def _formed_in_config(api: KubeApi, namespace: str, name: str, spec: ClusterSpec) -> bool:
    """The voters' ConfigMap keeps the quorum-formed mark too (a lost status must not re-arm
    --initial-controllers for a wiped disk)."""
    cm = await api.get("ConfigMap", namespace, config_map_name(name, spec.voters.role))
    return bool(((cm or {}).get("data") or {}).get(QUORUM_FORMED_KEY))


async def mark_quorum_formed(api: KubeApi, body: Mapping[str, Any], spec: ClusterSpec) -> None:
    """Render the voters' ConfigMap with the mark the moment the status first says so, without
    waiting for the next full reconcile (which renders the very same object)."""
    status, meta = body.get("status") or {}, body["metadata"]
    if not status.get("clusterId"):
        return
    cluster = Cluster(
        meta["name"],
        meta["namespace"],
        meta.get("uid", ""),
        status["clusterId"],
        status.get("initialControllers", ""),
        spec,
        quorum_formed=True,
    )
    manifest = config_map(cluster, spec.voters)
    if spec.voters.is_broker:  # keep the brokers' advertised addresses the last reconcile wrote
        live = await api.get("ConfigMap", meta["namespace"], manifest["metadata"]["name"])
        data = (live or {}).get("data") or {}
        kept = {k: v for k, v in data.items() if k.startswith(ADVERTISED_PREFIX)}
        manifest["data"] = {k: v for k, v in manifest["data"].items() if not k.startswith(ADVERTISED_PREFIX)} | kept
    await apply_child(api, manifest)


async def observe(api: KubeApi, namespace: str, name: str) -> Observed:
    selector = f"{LABEL_CLUSTER}={name}"
    sets = await api.list("StatefulSet", namespace, selector)
    pods = await api.list("Pod", namespace, selector)
    services = await api.list("Service", namespace, f"{selector},{LABEL_LISTENER}")
    return Observed({s["metadata"]["name"]: s for s in sets}, pods, services)


def _without_times(status: Mapping[str, Any]) -> dict[str, Any]:
    clean = dict(status)
    clean["conditions"] = [
        {k: v for k, v in c.items() if k != "lastTransitionTime"} for c in status.get("conditions", [])
    ]
    return clean


async def refresh_status(
    api: KubeApi,
    namespace: str,
    name: str,
    default_image: str | None,
    *,
    applied_generation: int | None = None,
    warnings: list[tuple[str, str]] | None = None,
) -> dict[str, Any] | None:
    """Recompute the whole status from a fresh read of the object and its children, and write
    it if it changed. The write carries the resourceVersion read, so two handlers racing cannot
    put an older picture over a newer one: the loser re-reads and recomputes."""
    for _attempt in range(5):
        body = await api.get("KafkaCluster", namespace, name)
        if body is None:
            return None
        meta = body["metadata"]
        spec: ClusterSpec | SpecError
        try:
            spec = parse_spec(body.get("spec") or {}, default_image)
        except SpecError as exc:
            spec = exc
        observed = await observe(api, namespace, name)
        found = warnings
        if found is None and not isinstance(spec, SpecError):
            found = storage_warnings(body, spec, observed)
        status = build_status(
            name,
            namespace,
            int(meta.get("generation") or 0),
            body.get("status") or {},
            spec,
            observed,
            applied_generation=applied_generation,
            warnings=found or (),
        )
        if _without_times(status) == _without_times(body.get("status") or {}):
            return status
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": status}
        try:
            await api.patch("KafkaCluster", namespace, name, patch, subresource="status")
        except ApiError as exc:
            if exc.status == 409:
                continue
            raise
        if status.get("quorumFormed") and not (body.get("status") or {}).get("quorumFormed"):
            if not isinstance(spec, SpecError):
                await mark_quorum_formed(api, body, spec)
        return status
    raise ApiError(409, f"KafkaCluster {namespace}/{name}: status kept changing under the operator")


def storage_warnings(body: Mapping[str, Any], spec: ClusterSpec, observed: Observed) -> list[tuple[str, str]]:
    """Storage drift seen from an event handler (it does not render or apply anything)."""
    status = body.get("status") or {}
    if not status.get("clusterId"):
        return []
    meta = body["metadata"]
    cluster = Cluster(
        meta["name"],
        meta["namespace"],
        meta.get("uid", ""),
        status["clusterId"],
        status.get("initialControllers", ""),
        spec,
    )
    warnings = []
    for child in build_children(cluster):
        if child["kind"] == "StatefulSet" and child["metadata"]["name"] in observed.stateful_sets:
            change = storage_change(child, observed.stateful_sets[child["metadata"]["name"]])
            if change is not None and not change.safe:
                warnings.append(("StorageChangeRefused", change.refusal()))
    return warnings


async def reconcile(api: KubeApi, body: Mapping[str, Any], default_image: str | None) -> dict[str, Any] | None:
    """Render the spec and apply every child; an invalid spec only updates the status."""
    meta = body["metadata"]
    try:
        spec = parse_spec(body.get("spec") or {}, default_image)
    except SpecError as exc:
        log.warning("KafkaCluster %s/%s: %s", meta["namespace"], meta["name"], exc.message)
        return await refresh_status(api, meta["namespace"], meta["name"], default_image)
    cluster_id, voters = await ensure_ids(api, body, spec)
    ids = {"clusterId": cluster_id, "initialControllers": voters}
    if any((body.get("status") or {}).get(k) != v for k, v in ids.items()):
        # Recorded before any child uses them, so a crash cannot lead to a second id; the first
        # time only if nobody recorded others meanwhile (two reconciles of a new cluster, e.g.
        # the create handler and the roll timer, would each generate one).
        patch: dict[str, Any] = {"status": ids}
        if not (body.get("status") or {}).get("clusterId"):
            patch["metadata"] = {"resourceVersion": meta.get("resourceVersion")}
        try:
            await api.patch("KafkaCluster", meta["namespace"], meta["name"], patch, "status")
        except ApiError as exc:
            if exc.status != 409:
                raise
            fresh = await api.get("KafkaCluster", meta["namespace"], meta["name"])
            return None if fresh is None else await reconcile(api, fresh, default_image)
    formed = bool((body.get("status") or {}).get("quorumFormed")) or await _formed_in_config(
        api, meta["namespace"], meta["name"], spec
    )
    running = await _running_replicas(api, meta["namespace"], meta["name"], spec)
    spec = await _with_safe_replicas(api, body, spec)
    spec = await _with_retained_volumes(api, body, spec)
    cluster = Cluster(meta["name"], meta["namespace"], meta["uid"], cluster_id, voters, spec, formed)
    counts: dict[str, int] = {p.role: max(p.replicas, running.get(p.role, 0)) for p in spec.pools}
    cluster = await apply_external(api, cluster, counts[spec.brokers.role])
    try:
        certs = await ensure_certificates(api, cluster, counts)
    except CertificateError as exc:
        log.warning("KafkaCluster %s/%s: %s", meta["namespace"], meta["name"], exc.message)
        return await refresh_status(
            api, meta["namespace"], meta["name"], default_image, warnings=[(exc.reason, exc.message)]
        )
    cluster = dataclasses.replace(cluster, certs_versions=certs.versions)
    warnings = list(certs.warnings)
    for child in build_children(cluster):
        outcome, warning = await apply_child(api, child)
        if outcome != "unchanged":
            log.info("%s %s/%s %s", child["kind"], meta["namespace"], child["metadata"]["name"], outcome)
        if warning:
            warnings.append(("StorageChangeRefused", warning))
    await prune_config_revisions(api, meta["namespace"], meta["name"])
    return await refresh_status(
        api,
        meta["namespace"],
        meta["name"],
        default_image,
        applied_generation=int(meta.get("generation") or 0),
        warnings=warnings,
    )


async def apply_external(api: KubeApi, cluster: Cluster, count: int) -> Cluster:
    """The external listeners' Services and Ingresses for brokers 0..count-1 (others, and those
    of removed listeners, deleted), and the cluster with what Kubernetes assigned them (node
    ports, load balancer addresses), from which the brokers' advertised addresses and
    certificate names follow. A running broker whose address changed (a load balancer address
    appeared) is marked for a restart: it reads its address only when it starts. The mark goes
    on first, so an operator crash in between restarts it once too often, never too rarely."""
    ns, name = cluster.namespace, cluster.name
    desired = external_children(cluster, count)
    selector = f"{LABEL_CLUSTER}={name},{LABEL_LISTENER}"
    for child in desired:
        outcome, _ = await apply_child(api, child)
        if outcome != "unchanged":
            log.info("%s %s/%s %s", child["kind"], ns, child["metadata"]["name"], outcome)
    wanted = {(c["kind"], c["metadata"]["name"]) for c in desired}
    # one list after applying them: it holds what the API server assigned (node ports at once)
    services = await api.list("Service", ns, selector)
    assigned = {s["metadata"]["name"]: Assigned.of(s) for s in services if ("Service", s["metadata"]["name"]) in wanted}
    kinds = ["Service"]
    if any(lst.type == "ingress" for lst in cluster.spec.listeners) or any(
        (s.get("spec") or {}).get("type") == "ClusterIP" for s in services
    ):
        kinds.append("Ingress")  # only then: a cluster without ingress listeners needs no RBAC for them
    for kind in kinds:
        for obj in services if kind == "Service" else await api.list(kind, ns, selector):
            if (kind, obj["metadata"]["name"]) not in wanted:
                await api.delete(kind, ns, obj["metadata"]["name"])
                log.info("%s %s/%s deleted", kind, ns, obj["metadata"]["name"])
    cluster = dataclasses.replace(cluster, assigned=assigned, broker_count=count)
    pool = cluster.spec.brokers
    cm = await api.get("ConfigMap", ns, config_map_name(name, pool.role))
    lines = (cm or {}).get("data") or {}
    for ordinal in range(cluster.advertised_count):
        before = lines.get(advertised_key(ordinal))
        if before is not None and before != advertised_entries(cluster, pool, ordinal):
            pod = f"{pool_name(name, pool.role)}-{ordinal}"
            if await api.get("Pod", ns, pod) is not None:
                patch = {"metadata": {"annotations": {MANUAL_ROLL_ANNOTATION: "true"}}}
                await api.patch("Pod", ns, pod, patch)
                log.info("Pod %s/%s: advertised address changed, marked for a restart", ns, pod)
    return cluster


async def prune_config_revisions(api: KubeApi, namespace: str, name: str) -> list[str]:
    """Delete server.properties revisions that neither a StatefulSet template nor a pod mounts
    (a pod keeps the revision it was created with until the roller restarts it)."""
    selector = f"{LABEL_CLUSTER}={name},{LABEL_CONFIG_REVISION}"
    revisions = await api.list("ConfigMap", namespace, selector)
    if not revisions:
        return []
    in_use: set[str] = set()
    specs = [s["spec"]["template"]["spec"] for s in await api.list("StatefulSet", namespace, f"{LABEL_CLUSTER}={name}")]
    specs += [p.get("spec") or {} for p in await api.list("Pod", namespace, f"{LABEL_CLUSTER}={name}")]
    for spec in specs:
        for volume in spec.get("volumes") or []:
            if (volume.get("configMap") or {}).get("name"):
                in_use.add(volume["configMap"]["name"])
    pruned = []
    for cm in revisions:
        if cm["metadata"]["name"] not in in_use:
            await api.delete("ConfigMap", namespace, cm["metadata"]["name"])
            pruned.append(cm["metadata"]["name"])
    return pruned


def delete_claim_volumes(spec: Mapping[str, Any]) -> dict[str, set[int]]:
    """Role -> ids of volumes whose PVCs go with the cluster. Lenient: also used for a spec
    that no longer validates, since the user still expects those claims gone."""
    combined = spec.get("mode") == "combined"
    result: dict[str, set[int]] = {}
    for key, role in (
        ("controllers", "controller"),
        ("brokers", "combined" if combined else "broker"),
    ):
        volumes = ((spec.get(key) or {}).get("storage") or {}).get("volumes") or []
        ids = {v.get("id") for v in volumes if isinstance(v, Mapping) and v.get("deleteClaim")}
        result[role] = {i for i in ids if isinstance(i, int)}
    return result


async def delete_claims(api: KubeApi, body: Mapping[str, Any]) -> list[str]:
    """Delete the PVCs of `deleteClaim` volumes; every other claim is kept (data outlives the
    cluster unless the user said otherwise). Other children go by their owner references."""
    meta = body["metadata"]
    wanted = delete_claim_volumes(body.get("spec") or {})
    deleted = []
    for pvc in await api.list("PersistentVolumeClaim", meta["namespace"], f"{LABEL_CLUSTER}={meta['name']}"):
        labels = pvc["metadata"].get("labels") or {}
        try:
            volume = int(labels.get(LABEL_VOLUME, "-1"))
        except ValueError:
            continue
        if volume in wanted.get(labels.get(LABEL_ROLE, ""), set()):
            await api.delete("PersistentVolumeClaim", meta["namespace"], pvc["metadata"]["name"])
            deleted.append(pvc["metadata"]["name"])
    return deleted


__all__ = ["ApiError", "delete_claims", "reconcile", "refresh_status"]

"""Which pods a rolling restart must restart, and in which order: pure functions over the pods
the API server reports and the desired template hash of each pool.

A pod is *stale* when the desired-state hash it carries (stamped on the pod template, so every
pod a StatefulSet creates has the hash of the template it was created from) differs from its
pool's current one, or when a manual roll asked for it (a pod annotation, or a cluster-level
request older than the pod). Restarting a pod = deleting it: the StatefulSet (OnDelete) creates
it again from the current template, so a restarted pod is never stale again and an operator
restart mid-roll resumes without restarting anything twice.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..naming import LABEL_ROLE, node_id_base
from .gates import QuorumSnapshot, controller_order

POD_HASH_ANNOTATION = "kopfka.io/pod-hash"
MANUAL_ROLL_ANNOTATION = "kopfka.io/manual-rolling-update"
STUCK_REASONS = frozenset(
    {"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError", "RunContainerError"}
)


def _timestamp(text: str | None) -> float:
    if not text:
        return 0.0
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True)
class PodView:
    name: str
    role: str
    node_id: int
    uid: str
    pod_hash: str
    created: float
    ready: bool
    deleting: bool
    stuck: str  # why the pod serves nothing ("" when it is fine or merely starting)
    manual: bool

    @property
    def is_voter(self) -> bool:
        return self.role in ("controller", "combined")

    @property
    def is_broker(self) -> bool:
        return self.role in ("broker", "combined")


def pod_view(pod: Mapping[str, Any]) -> PodView:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    annotations = meta.get("annotations") or {}
    role = (meta.get("labels") or {}).get(LABEL_ROLE, "")
    name = meta.get("name", "")
    ordinal = int(name.rsplit("-", 1)[1]) if name.rsplit("-", 1)[-1].isdigit() else 0
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    ready = (conditions.get("Ready") or {}).get("status") == "True"
    stuck = ""
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        reason = ((cs.get("state") or {}).get("waiting") or {}).get("reason", "")
        if reason in STUCK_REASONS:
            stuck = reason
    scheduled = conditions.get("PodScheduled") or {}
    if status.get("phase") == "Pending" and scheduled.get("status") == "False":
        stuck = stuck or f"Unschedulable: {scheduled.get('message', '')}".strip()
    return PodView(
        name=name,
        role=role,
        node_id=node_id_base(role) + ordinal if role else ordinal,  # type: ignore[arg-type]
        uid=meta.get("uid", ""),
        pod_hash=annotations.get(POD_HASH_ANNOTATION, ""),
        created=_timestamp(meta.get("creationTimestamp")),
        ready=ready,
        deleting=bool(meta.get("deletionTimestamp")),
        stuck=stuck,
        manual=annotations.get(MANUAL_ROLL_ANNOTATION) == "true",
    )


@dataclass(frozen=True)
class Desired:
    """The current pod-template hash of each role, and a cluster-wide manual roll request."""

    pod_hash: Mapping[str, str]
    manual_since: float | None = None


def stale_reason(pod: PodView, desired: Desired) -> str | None:
    want = desired.pod_hash.get(pod.role)
    if want is None:
        return None  # a role the spec no longer has: scaling removes it, not the roller
    if pod.pod_hash != want:
        return "the pod spec changed"
    if pod.manual:
        return "manual rolling update (pod annotation)"
    if desired.manual_since is not None and pod.created < desired.manual_since:
        return "manual rolling update (KafkaCluster annotation)"
    return None


def stale_pods(pods: Iterable[PodView], desired: Desired) -> list[PodView]:
    return [p for p in pods if not p.deleting and stale_reason(p, desired) is not None]


def order(pods: Sequence[PodView], quorum: QuorumSnapshot | None) -> list[PodView]:
    """Stuck pods first (they serve nothing; waiting on them would deadlock the roll), then
    controllers (followers, the most lagging first, the active controller last), combined
    nodes the same way, then brokers by node id."""
    by_id = {p.node_id: p for p in pods}
    stuck = sorted((p for p in pods if p.stuck), key=lambda p: p.node_id)
    rest = [p for p in pods if not p.stuck]
    result = list(stuck)
    for role in ("controller", "combined"):
        ids = [p.node_id for p in rest if p.role == role]
        result += [by_id[n] for n in controller_order(quorum, ids)]
    result += sorted((p for p in rest if p.role == "broker"), key=lambda p: p.node_id)
    return result

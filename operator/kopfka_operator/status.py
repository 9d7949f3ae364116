"""KafkaCluster status as a pure function of the spec and the observed children.

Both the spec handlers and the StatefulSet/Pod event handlers compute the *whole* status from
what they read, so whichever writes last writes a consistent picture and no handler has to
remember what another one said.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .log_dir_health import warning_text
from .manifests.common import Assigned, Cluster
from .manifests.external import external_bootstrap
from .manifests.services import bootstrap_servers
from .manifests.statefulset import INIT_CONTAINER
from .naming import LABEL_ROLE, bootstrap_service_name, label_selector, node_id_base, pool_name, selector_labels
from .roll.plan import POD_HASH_ANNOTATION, Desired, PodView, pod_view, stale_pods
from .spec import ClusterSpec, Pool, SpecError

READY = "Ready"
ROLL_BLOCKED = "RollBlocked"
RECONCILING = "Reconciling"
WARNING = "Warning"
MESSAGE_LIMIT = 1000


@dataclass(frozen=True)
class Observed:
    """What the handlers read back from the API: the cluster's StatefulSets and pods."""

    stateful_sets: Mapping[str, Mapping[str, Any]]  # by name
    pods: Sequence[Mapping[str, Any]]
    services: Sequence[Mapping[str, Any]] = ()  # the external listeners' Services


def listeners_status(name: str, namespace: str, spec: ClusterSpec, observed: Observed) -> list[dict[str, Any]]:
    """status.listeners: per listener what a client puts in bootstrap.servers: in the cluster
    the bootstrap Service, outside it the external address (absent until Kubernetes assigned
    it). A nodeport listener's address is the nodes the brokers run on, at the bootstrap
    Service's node port."""
    assigned = {s["metadata"]["name"]: Assigned.of(s) for s in observed.services}
    cluster = Cluster(name, namespace, "", "", "", spec, assigned=assigned)
    prefix = f"{pool_name(name, spec.brokers.role)}-"
    nodes: dict[int, str] = {}
    for pod in observed.pods:
        pod_name = (pod.get("metadata") or {}).get("name", "")
        host_ip = (pod.get("status") or {}).get("hostIP")
        if pod_name.startswith(prefix) and pod_name[len(prefix) :].isdigit() and host_ip:
            nodes[int(pod_name[len(prefix) :])] = host_ip
    out = []
    for lst in spec.listeners:
        entry: dict[str, Any] = {"name": lst.name, "type": lst.type}
        if lst.is_external:
            address = external_bootstrap(cluster, lst, nodes, spec.brokers.replicas)
        else:
            address = f"{bootstrap_service_name(name)}.{namespace}.svc:{lst.port}"
        if address:
            entry["bootstrapServers"] = address
        out.append(entry)
    return out


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(
    type_: str,
    status: bool,
    reason: str,
    message: str,
    generation: int,
    previous: Iterable[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """A condition whose lastTransitionTime only moves when its status flips."""
    value = "True" if status else "False"
    old = next((c for c in previous if c.get("type") == type_), None)
    since = old["lastTransitionTime"] if old and old.get("status") == value else now()
    return {
        "type": type_,
        "status": value,
        "reason": reason,
        "message": message[:MESSAGE_LIMIT],
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }


def pool_status(pool: Pool, sts: Mapping[str, Any] | None) -> dict[str, Any]:
    sts_status = (sts or {}).get("status") or {}
    base = node_id_base(pool.role)
    return {
        "replicas": pool.replicas,
        "readyReplicas": int(sts_status.get("readyReplicas") or 0),
        "nodeIds": [base + i for i in range(pool.replicas)],
    }


def _sts_observed(sts: Mapping[str, Any]) -> bool:
    """Whether the StatefulSet controller has seen the set's latest spec."""
    observed = (sts.get("status") or {}).get("observedGeneration")
    generation = (sts.get("metadata") or {}).get("generation")
    return observed is None or generation is None or observed >= generation


def _sts_settled(pool: Pool, sts: Mapping[str, Any] | None) -> bool:
    if sts is None or not _sts_observed(sts):
        return False
    return int((sts.get("status") or {}).get("readyReplicas") or 0) >= pool.replicas


def format_failures(pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """Messages of format-storage init containers that exited non-zero (now or last time)."""
    failures = []
    for pod in pods:
        name = (pod.get("metadata") or {}).get("name", "?")
        for cs in (pod.get("status") or {}).get("initContainerStatuses") or []:
            if cs.get("name") != INIT_CONTAINER:
                continue
            for state in (cs.get("state") or {}, cs.get("lastState") or {}):
                term = state.get("terminated") or {}
                if term and term.get("exitCode", 0) != 0:
                    text = (term.get("message") or term.get("reason") or "failed").strip()
                    failures.append(f"pod {name}: {INIT_CONTAINER} exited {term['exitCode']}: {text}")
                    break
    return failures


def _role_views(spec: ClusterSpec) -> dict[str, Pool]:
    """status.controllers / status.brokers -> the pool shown there (one pool in combined mode)."""
    return {"controllers": spec.voters, "brokers": spec.brokers}


def build_status(
    name: str,
    namespace: str,
    generation: int,
    previous: Mapping[str, Any],
    spec: ClusterSpec | SpecError,
    observed: Observed,
    applied_generation: int | None = None,
    warnings: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    """The complete new status. `applied_generation` is set when this pass rendered the spec."""
    conditions_before = previous.get("conditions") or []
    status: dict[str, Any] = {
        key: previous[key]
        for key in (
            "clusterId",
            "initialControllers",
            "observedGeneration",
            "bootstrapServers",
            "listeners",
            "quorumFormed",
            "roll",  # written by the roller (roll/roller.py)
            "scale",  # written by the scaler (scale/scaler.py)
            "config",  # the dynamic config applied live (roller)
            "metadataVersion",
            "logDirs",  # failed disks, written by the roll timer (log_dir_health.py)
        )
        if key in previous
    }
    if applied_generation is not None:
        status["observedGeneration"] = applied_generation
    all_warnings = list(warnings)
    if isinstance(spec, SpecError):
        all_warnings.insert(0, (spec.reason, f"spec not applied: {spec.message}"))
        ready = bool(previous.get("conditions")) and any(
            c.get("type") == READY and c.get("status") == "True" for c in conditions_before
        )
        reconciling = (False, spec.reason, "waiting for a valid spec; children left unchanged")
        ready_cond = (ready, "SpecInvalid", "the last valid spec keeps running")
        for key in ("controllers", "brokers"):
            if key in previous:
                status[key] = previous[key]
    else:
        status["bootstrapServers"] = bootstrap_servers(name, namespace, spec)
        status["listeners"] = listeners_status(name, namespace, spec, observed)
        progress = []
        settled = True
        for key, pool in _role_views(spec).items():
            sts = observed.stateful_sets.get(pool_name(name, pool.role))
            status[key] = pool_status(pool, sts)
            if key == "brokers":
                status[key]["selector"] = label_selector(selector_labels(name, pool.role))
            settled = settled and _sts_settled(pool, sts)
            if key == "controllers" and status[key]["readyReplicas"] > 0:
                # A Ready controller is in a quorum with a leader: the quorum exists (sticky).
                status["quorumFormed"] = True
            note = "" if sts is None or _sts_observed(sts) else " (StatefulSet update not observed yet)"
            progress.append(f"{key} {status[key]['readyReplicas']}/{pool.replicas} ready{note}")
        summary = ", ".join(progress)
        applied = status.get("observedGeneration") == generation
        stale = outdated_pods(observed, previous.get("roll") or {})
        ready_cond = (settled, "AllNodesReady" if settled else "NodesNotReady", summary)
        if settled and stale:
            ready_cond = (False, "RollingUpdate", roll_summary(stale, previous.get("roll") or {}))
        if not applied:
            reconciling = (True, "SpecNotApplied", "the current spec is not applied yet")
        elif not settled:
            reconciling = (True, "Progressing", summary)
        elif stale:
            reconciling = (True, "RollingUpdate", roll_summary(stale, previous.get("roll") or {}))
        else:
            reconciling = (False, "Reconciled", "every pod runs the current spec and is ready")
        for role_state in (previous.get("scale") or {}).values():
            if isinstance(role_state, Mapping) and role_state.get("refused"):
                all_warnings.append(("ScaleRefused", str(role_state["refused"])))
        pods = [p for p in observed.pods if (p.get("metadata") or {}).get("labels", {}).get(LABEL_ROLE)]
        all_warnings += [("FormatStorageFailed", text) for text in format_failures(pods)]
        offline = (previous.get("logDirs") or {}).get("offline") or []
        if offline:
            all_warnings.append(("LogDirOffline", warning_text(offline)))
    if all_warnings:
        warning = (True, all_warnings[0][0], "; ".join(text for _, text in all_warnings))
    else:
        warning = (False, "NoWarnings", "")
    blocked = (status.get("roll") or {}).get("blocked") or {}
    if blocked.get("reported"):
        roll_blocked = (True, "GateClosed", str(blocked.get("waitingFor", "")))
    else:
        roll_blocked = (False, "NotBlocked", "")
    status["conditions"] = [
        condition(READY, *ready_cond, generation, conditions_before),
        condition(RECONCILING, *reconciling, generation, conditions_before),
        condition(WARNING, *warning, generation, conditions_before),
        condition(ROLL_BLOCKED, *roll_blocked, generation, conditions_before),
    ]
    return status


def desired_state(observed: Observed, roll: Mapping[str, Any]) -> Desired:
    """Each role's pod-template hash as its StatefulSet holds it, and a manual roll request."""
    hashes = {}
    for sts in observed.stateful_sets.values():
        template = (sts.get("spec") or {}).get("template") or {}
        role = ((template.get("metadata") or {}).get("labels") or {}).get(LABEL_ROLE)
        want = ((template.get("metadata") or {}).get("annotations") or {}).get(POD_HASH_ANNOTATION)
        if role and want:
            hashes[role] = want
    return Desired(hashes, roll.get("manualSince"))


def outdated_pods(observed: Observed, roll: Mapping[str, Any]) -> list[PodView]:
    views = [pod_view(p) for p in observed.pods if (p.get("metadata") or {}).get("labels", {}).get(LABEL_ROLE)]
    return stale_pods(views, desired_state(observed, roll))


def roll_summary(stale: Sequence[PodView], roll: Mapping[str, Any]) -> str:
    names = ", ".join(sorted(p.name for p in stale))
    text = f"{len(stale)} pod(s) run an outdated spec: {names}"
    if roll.get("pod"):
        text += f"; restarting {roll['pod']}"
    if roll.get("waitingFor"):
        text += f"; waiting for {roll['waitingFor']}"
    return text

"""What the simulated controllers decide, as pure functions: the pods a Deployment or a
LeaderWorkerSet wants, their statuses, where a pod fits (node selector, taints, DRA devices), the
kube-scheduler-style message when it fits nowhere, and pod states over their lifetime.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure: JSON-like
dicts in, dicts out; CEL through ``modelfleet.scheduling.cel``. No I/O, no asyncio, no store
access; :mod:`modelfleet.sim.workloads` does the writing and the timing.

Simplifications (deliberate, documented so nobody mistakes them for Kubernetes behaviour):
- Deployments own their pods directly (no ReplicaSets); a template change surges a full new set
  of pods and deletes the old ones once the new ones are all ready. Pod CPU/memory requests are
  not accounted; only DRA devices are.
- LeaderWorkerSet pods are owned by the LWS (no StatefulSets); a template change recreates the
  stale pods in place. Group restart policies and ``startupPolicy: LeaderReady`` are not
  modelled: workers are created with their leader (``LeaderCreated``).
- Device allocation is first-fit over nodes in name order and devices in index order; a claim's
  first ``matchAttribute`` constraint is honoured by trying one attribute value at a time.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from modelfleet.cel.compiler import CelCompileError
from modelfleet.cel.device import DeviceFacts
from modelfleet.cel.evaluator import SelectorEvaluator

__all__ = [
    "LWS_GROUP_INDEX",
    "LWS_NAME",
    "LWS_REVISION",
    "LWS_WORKER_INDEX",
    "POD_TEMPLATE_HASH",
    "ClaimRequest",
    "NodeState",
    "SimDevice",
    "allocate_on_node",
    "condition",
    "deployment_status",
    "fit_failure",
    "lws_pod",
    "lws_pod_names",
    "lws_status",
    "merge_conditions",
    "node_states",
    "pod_for_deployment",
    "pod_is_ready",
    "template_hash",
    "unschedulable_message",
]

POD_TEMPLATE_HASH = "pod-template-hash"
LWS_PREFIX = "leaderworkerset.sigs.k8s.io"
LWS_NAME = f"{LWS_PREFIX}/name"
LWS_GROUP_INDEX = f"{LWS_PREFIX}/group-index"
LWS_WORKER_INDEX = f"{LWS_PREFIX}/worker-index"
LWS_GROUP_KEY = f"{LWS_PREFIX}/group-key"
LWS_REVISION = f"{LWS_PREFIX}/template-revision-hash"
LWS_SIZE_ANNOTATION = f"{LWS_PREFIX}/size"
LWS_LEADER_ANNOTATION = f"{LWS_PREFIX}/leader-name"
CONTROLLER_MANAGER = "kube-controller-manager"

# kube-scheduler's wording, so that messages read like the real thing.
MSG_SELECTOR = "node(s) didn't match Pod's node affinity/selector"
MSG_UNSCHEDULABLE = "node(s) were unschedulable"
MSG_NOT_READY = "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
MSG_CANNOT_ALLOCATE = "cannot allocate all claims"

_EVALUATOR = SelectorEvaluator()


def template_hash(template: Any) -> str:
    """A stable short hash of a template (what Kubernetes calls the pod-template-hash)."""
    text = json.dumps(template, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def condition(type_: str, status: bool, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
    }


def merge_conditions(
    old: Sequence[Mapping[str, Any]] | None, new: Sequence[dict[str, Any]], now: str
) -> list[dict[str, Any]]:
    """``new`` with transition times carried over from ``old`` where the status did not change,
    so that rewriting an unchanged status is a no-op."""
    previous = {c.get("type"): c for c in old or [] if isinstance(c, Mapping)}
    out = []
    for cond in new:
        before = previous.get(cond["type"])
        merged = dict(cond)
        if before is not None and before.get("status") == cond["status"]:
            merged["lastTransitionTime"] = before.get("lastTransitionTime", now)
            same = before.get("reason") == cond.get("reason") and before.get("message") == cond.get(
                "message"
            )
            if "lastUpdateTime" in before or "lastUpdateTime" in cond:
                merged["lastUpdateTime"] = before.get("lastUpdateTime", now) if same else now
        else:
            merged["lastTransitionTime"] = now
        out.append(merged)
    return out


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _pod_from_template(
    template: Mapping[str, Any], owner: Mapping[str, Any], labels: Mapping[str, str]
) -> dict[str, Any]:
    tmeta = template.get("metadata") or {}
    spec = copy.deepcopy(dict(template.get("spec") or {}))
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    metadata: dict[str, Any] = {
        "namespace": owner["metadata"].get("namespace", "default"),
        "labels": {**(tmeta.get("labels") or {}), **labels},
        "ownerReferences": [owner_reference(owner)],
    }
    if tmeta.get("annotations"):
        metadata["annotations"] = dict(tmeta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def pod_for_deployment(deployment: Mapping[str, Any], hash_: str) -> dict[str, Any]:
    """A new pod of ``deployment`` (named by the store from ``generateName``)."""
    template = (deployment.get("spec") or {}).get("template") or {}
    pod = _pod_from_template(template, deployment, {POD_TEMPLATE_HASH: hash_})
    pod["metadata"]["generateName"] = f"{deployment['metadata']['name']}-{hash_}-"
    return pod


def lws_pod_names(name: str, replicas: int, size: int) -> list[tuple[str, int, int]]:
    """(pod name, group, worker index) of every pod an LWS wants; worker 0 is the leader."""
    out = []
    for group in range(replicas):
        for worker in range(size):
            pod = f"{name}-{group}" if worker == 0 else f"{name}-{group}-{worker}"
            out.append((pod, group, worker))
    return out


def _prepend_env(containers: list[dict[str, Any]], env: list[dict[str, str]]) -> None:
    for container in containers:
        own = [
            e for e in container.get("env") or [] if e.get("name") not in {x["name"] for x in env}
        ]
        container["env"] = [*env, *own]


def lws_pod(lws: Mapping[str, Any], group: int, worker: int, revision: str) -> dict[str, Any]:
    """Pod ``worker`` of group ``group`` of a LeaderWorkerSet, as the LWS controller makes it."""
    name = lws["metadata"]["name"]
    namespace = lws["metadata"].get("namespace", "default")
    lwt = (lws.get("spec") or {}).get("leaderWorkerTemplate") or {}
    size = int(lwt.get("size") or 1)
    worker_template = lwt.get("workerTemplate") or {}
    template = (lwt.get("leaderTemplate") or worker_template) if worker == 0 else worker_template
    group_key = hashlib.sha1(f"{namespace}/{name}-{group}".encode()).hexdigest()
    labels = {
        LWS_NAME: name,
        LWS_GROUP_INDEX: str(group),
        LWS_WORKER_INDEX: str(worker),
        LWS_GROUP_KEY: group_key,
        LWS_REVISION: revision,
    }
    pod = _pod_from_template(template, lws, labels)
    leader = f"{name}-{group}"
    pod_name = leader if worker == 0 else f"{leader}-{worker}"
    pod["metadata"]["name"] = pod_name
    annotations = pod["metadata"].setdefault("annotations", {})
    annotations[LWS_SIZE_ANNOTATION] = str(size)
    if worker:
        annotations[LWS_LEADER_ANNOTATION] = leader
    spec = pod["spec"]
    spec["hostname"] = pod_name
    spec["subdomain"] = name
    env = [
        {"name": "LWS_LEADER_ADDRESS", "value": f"{leader}.{name}.{namespace}"},
        {"name": "LWS_GROUP_SIZE", "value": str(size)},
        {"name": "LWS_WORKER_INDEX", "value": str(worker)},
    ]
    _prepend_env(spec.get("containers") or [], env)
    return pod


def pod_is_ready(pod: Mapping[str, Any]) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def _int_or_percent(value: Any, total: int, *, round_up: bool) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.endswith("%"):
        pct = float(text[:-1]) / 100.0 * total
        return int(-(-pct // 1)) if round_up else int(pct // 1)
    return int(text)


def deployment_status(
    deployment: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    current_hash: str,
    now: str,
) -> dict[str, Any]:
    """The status the Deployment controller would report for these pods."""
    spec = deployment.get("spec") or {}
    meta = deployment["metadata"]
    desired = int(spec.get("replicas", 1))
    strategy = spec.get("strategy") or {}
    if strategy.get("type") == "Recreate":
        max_unavailable = 0
    else:
        rolling = strategy.get("rollingUpdate") or {}
        max_unavailable = _int_or_percent(
            rolling.get("maxUnavailable", "25%"), desired, round_up=False
        )
    updated = [
        p for p in pods if p["metadata"].get("labels", {}).get(POD_TEMPLATE_HASH) == current_hash
    ]
    ready = sum(1 for p in pods if pod_is_ready(p))
    available = ready
    minimum = max(0, desired - max_unavailable)
    is_available = available >= minimum
    rs_name = f"{meta['name']}-{current_hash}"
    complete = len(updated) == desired and len(pods) == desired and available >= desired
    conditions = [
        condition(
            "Available",
            is_available,
            "MinimumReplicasAvailable" if is_available else "MinimumReplicasUnavailable",
            "Deployment has minimum availability."
            if is_available
            else "Deployment does not have minimum availability.",
        ),
        condition(
            "Progressing",
            True,
            "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
            f'ReplicaSet "{rs_name}" has successfully progressed.'
            if complete
            else f'ReplicaSet "{rs_name}" is progressing.',
        ),
    ]
    old_conditions = (deployment.get("status") or {}).get("conditions")
    status: dict[str, Any] = {
        "observedGeneration": meta.get("generation", 1),
        "replicas": len(pods),
        "updatedReplicas": len(updated),
        "readyReplicas": ready,
        "availableReplicas": available,
        "conditions": merge_conditions(old_conditions, conditions, now),
    }
    # None removes the field through the merge patch; Kubernetes omits it when zero.
    status["unavailableReplicas"] = max(0, desired - available) or None
    return status


def lws_status(
    lws: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    revision: str,
    now: str,
) -> dict[str, Any]:
    """The status the LWS controller would report: a group is ready when all its pods are."""
    spec = lws.get("spec") or {}
    meta = lws["metadata"]
    replicas = int(spec.get("replicas", 1))
    size = int((spec.get("leaderWorkerTemplate") or {}).get("size") or 1)
    groups: dict[int, list[Mapping[str, Any]]] = {}
    for pod in pods:
        try:
            group = int(pod["metadata"].get("labels", {}).get(LWS_GROUP_INDEX, "-1"))
        except ValueError:
            continue
        groups.setdefault(group, []).append(pod)
    ready_groups = sum(
        1
        for g in range(replicas)
        if len(groups.get(g, [])) == size and all(pod_is_ready(p) for p in groups[g])
    )
    updated_groups = sum(
        1
        for g in range(replicas)
        if len(groups.get(g, [])) == size
        and all(p["metadata"].get("labels", {}).get(LWS_REVISION) == revision for p in groups[g])
    )
    available = ready_groups >= replicas
    conditions = [
        condition(
            "Available",
            available,
            "AllGroupsReady" if available else "GroupsNotReady",
            "All replicas are ready"
            if available
            else f"{ready_groups}/{replicas} groups are ready",
        ),
        condition(
            "Progressing",
            not available,
            "GroupsProgressing" if not available else "AllGroupsReady",
            "Replicas are progressing" if not available else "All replicas are ready",
        ),
    ]
    old_conditions = (lws.get("status") or {}).get("conditions")
    name = meta["name"]
    return {
        "observedGeneration": meta.get("generation", 1),
        "replicas": len([g for g in groups if g < replicas]),
        "readyReplicas": ready_groups,
        "updatedReplicas": updated_groups,
        "hpaPodSelector": f"{LWS_NAME}={name},{LWS_WORKER_INDEX}=0",
        "conditions": merge_conditions(old_conditions, conditions, now),
    }


# ------------------------------------------------------------------------------- scheduling


@dataclass(frozen=True)
class SimDevice:
    driver: str
    pool: str
    name: str
    facts: DeviceFacts
    # The raw slice attributes, keyed by their qualified name, for matchAttribute constraints.
    attributes: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.name)


@dataclass
class NodeState:
    name: str
    labels: dict[str, str]
    taints: list[dict[str, Any]]
    ready: bool
    unschedulable: bool
    devices: list[SimDevice]


_KINDS = ("string", "version", "bool", "int")
_NATURAL = re.compile(r"(\d+)")


def _natural_key(text: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in _NATURAL.split(text))


def _device_from_slice(driver: str, pool: str, raw: Mapping[str, Any]) -> SimDevice | None:
    name = raw.get("name")
    if not isinstance(name, str):
        return None
    attributes: dict[str, tuple[Any, Any]] = {}
    qualified: dict[str, Any] = {}
    for attr, value in (raw.get("attributes") or {}).items():
        if not isinstance(value, Mapping):
            continue
        for kind in _KINDS:
            if kind in value:
                attributes[attr] = (kind, value[kind])
                full = attr if "/" in attr else f"{driver}/{attr}"
                qualified[full] = {kind: value[kind]}
                break
    capacity = {
        cap: str(v.get("value"))
        for cap, v in (raw.get("capacity") or {}).items()
        if isinstance(v, Mapping) and v.get("value") is not None
    }
    try:
        facts = DeviceFacts.build(driver, attributes, capacity)
    except (TypeError, ValueError):
        return None  # a malformed device is simply unusable, as a real allocator would treat it
    return SimDevice(driver, pool, name, facts, qualified)


def node_states(
    nodes: Iterable[Mapping[str, Any]], slices: Iterable[Mapping[str, Any]]
) -> list[NodeState]:
    """Nodes in name order with the devices their ResourceSlices publish."""
    by_node: dict[str, list[SimDevice]] = {}
    for slc in slices:
        spec = slc.get("spec") or {}
        node = spec.get("nodeName")
        driver = spec.get("driver")
        pool = (spec.get("pool") or {}).get("name") or node
        if not isinstance(node, str) or not isinstance(driver, str):
            continue
        for raw in spec.get("devices") or []:
            device = _device_from_slice(driver, str(pool), raw)
            if device is not None:
                by_node.setdefault(node, []).append(device)
    out = []
    for node in nodes:
        meta = node.get("metadata") or {}
        name = str(meta.get("name", ""))
        spec = node.get("spec") or {}
        conditions = (node.get("status") or {}).get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        devices = sorted(by_node.get(name, []), key=lambda d: (d.driver, _natural_key(d.name)))
        out.append(
            NodeState(
                name=name,
                labels=dict(meta.get("labels") or {}),
                taints=list(spec.get("taints") or []),
                ready=ready,
                unschedulable=bool(spec.get("unschedulable")),
                devices=devices,
            )
        )
    return sorted(out, key=lambda n: _natural_key(n.name))


def _tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for tol in tolerations:
        effect = tol.get("effect") or ""
        if effect and effect != taint.get("effect"):
            continue
        key = tol.get("key") or ""
        operator = tol.get("operator") or "Equal"
        if operator == "Exists":
            if not key or key == taint.get("key"):
                return True
        elif key == taint.get("key") and (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _taint_text(taint: Mapping[str, Any]) -> str:
    return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"


def _selector_matches(pod_spec: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    selector = pod_spec.get("nodeSelector") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    affinity = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not affinity:
        return True
    terms = affinity.get("nodeSelectorTerms") or []
    return any(_term_matches(term, labels) for term in terms)


def _term_matches(term: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    for expr in term.get("matchExpressions") or []:
        key, op = expr.get("key"), expr.get("operator")
        values = [str(v) for v in expr.get("values") or []]
        have = labels.get(str(key))
        ok = {
            "In": have is not None and have in values,
            "NotIn": have is None or have not in values,
            "Exists": have is not None,
            "DoesNotExist": have is None,
        }.get(str(op), False)
        if not ok:
            return False
    return True


@dataclass(frozen=True)
class ClaimRequest:
    """One device request of a pod's claim, with its alternatives (``firstAvailable``)."""

    claim: str  # the pod's name for the claim (``spec.resourceClaims[].name``)
    name: str
    alternatives: tuple[tuple[str, str, int, bool, tuple[str, ...]], ...]
    # each: (subrequest name or "", deviceClassName, count, all devices, CEL selectors)


def claim_requests(claim: str, claim_spec: Mapping[str, Any]) -> list[ClaimRequest]:
    out = []
    for req in (claim_spec.get("devices") or {}).get("requests") or []:
        name = str(req.get("name", ""))
        alternatives = []
        options = (
            [("", req["exactly"])]
            if isinstance(req.get("exactly"), Mapping)
            else [(str(s.get("name", "")), s) for s in req.get("firstAvailable") or []]
        )
        for sub, body in options:
            selectors = tuple(
                str((s.get("cel") or {}).get("expression", ""))
                for s in body.get("selectors") or []
                if (s.get("cel") or {}).get("expression")
            )
            all_mode = body.get("allocationMode") == "All"
            alternatives.append(
                (
                    sub,
                    str(body.get("deviceClassName", "")),
                    int(body.get("count") or 1),
                    all_mode,
                    selectors,
                )
            )
        out.append(ClaimRequest(claim, name, tuple(alternatives)))
    return out


def match_attribute(claim_spec: Mapping[str, Any]) -> str | None:
    for constraint in (claim_spec.get("devices") or {}).get("constraints") or []:
        attr = constraint.get("matchAttribute")
        if isinstance(attr, str):
            return attr
    return None


def _matches(device: SimDevice, expressions: Sequence[str]) -> bool:
    try:
        return _EVALUATOR.matches_all(expressions, device.facts)
    except CelCompileError:
        return False  # an invalid selector allocates nothing, as on a real cluster


@dataclass
class Allocation:
    """Devices chosen for one pod on one node: (claim, request[/sub], device)."""

    results: list[tuple[str, str, SimDevice]]


def allocate_on_node(
    node: NodeState,
    claims: Sequence[tuple[Sequence[ClaimRequest], str | None]],
    taken: set[tuple[str, str, str]],
    device_classes: Mapping[str, Sequence[str]],
) -> tuple[Allocation | None, str | None]:
    """Try to allocate every claim of a pod on ``node``.

    ``claims`` holds each claim's requests and its matchAttribute constraint. Returns the
    allocation, or None and the scheduler reason (``Insufficient <class>`` when matching devices
    exist but too few are free, ``cannot allocate all claims`` when none match at all).
    """
    used = set(taken)
    results: list[tuple[str, str, SimDevice]] = []
    for requests, attribute in claims:
        outcome, reason = _allocate_claim(node, requests, attribute, used, device_classes)
        if outcome is None:
            return None, reason
        results.extend(outcome)
        used.update(d.key for _, _, d in outcome)
    return Allocation(results), None


def _allocate_claim(
    node: NodeState,
    requests: Sequence[ClaimRequest],
    attribute: str | None,
    used: set[tuple[str, str, str]],
    device_classes: Mapping[str, Sequence[str]],
) -> tuple[list[tuple[str, str, SimDevice]] | None, str | None]:
    if attribute is None:
        return _allocate_requests(node.devices, requests, used, device_classes)
    values: list[str] = []
    for device in node.devices:
        value = device.attributes.get(attribute)
        key = json.dumps(value, sort_keys=True) if value is not None else None
        if key is not None and key not in values:
            values.append(key)
    reason: str | None = MSG_CANNOT_ALLOCATE
    for value in values:
        subset = [
            d
            for d in node.devices
            if json.dumps(d.attributes.get(attribute), sort_keys=True) == value
        ]
        outcome, why = _allocate_requests(subset, requests, used, device_classes)
        if outcome is not None:
            return outcome, None
        reason = why
    return None, reason


def _allocate_requests(
    devices: Sequence[SimDevice],
    requests: Sequence[ClaimRequest],
    used: set[tuple[str, str, str]],
    device_classes: Mapping[str, Sequence[str]],
) -> tuple[list[tuple[str, str, SimDevice]] | None, str | None]:
    chosen: list[tuple[str, str, SimDevice]] = []
    local = set(used)
    for request in requests:
        picked: list[SimDevice] | None = None
        reason = MSG_CANNOT_ALLOCATE
        label = request.name
        for sub, class_name, count, all_mode, selectors in request.alternatives:
            if class_name not in device_classes:
                reason = f'device class "{class_name}" not found'
                continue
            expressions = [*device_classes[class_name], *selectors]
            matching = [d for d in devices if _matches(d, expressions)]
            free = [d for d in matching if d.key not in local]
            need = len(matching) if all_mode else count
            if matching and len(free) >= need and (not all_mode or len(free) == len(matching)):
                picked = free[:need]
                label = f"{request.name}/{sub}" if sub else request.name
                break
            if matching:
                reason = f"Insufficient {class_name}"
        if picked is None:
            return None, reason
        for device in picked:
            local.add(device.key)
            chosen.append((request.claim, label, device))
    return chosen, None


def fit_failure(
    pod_spec: Mapping[str, Any],
    node: NodeState,
) -> str | None:
    """Why the pod cannot go to ``node`` before devices are considered, or None."""
    if node.unschedulable:
        return MSG_UNSCHEDULABLE
    if not node.ready:
        return MSG_NOT_READY
    tolerations = pod_spec.get("tolerations") or []
    for taint in node.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(
            tolerations, taint
        ):
            return _taint_text(taint)
    if not _selector_matches(pod_spec, node.labels):
        return MSG_SELECTOR
    return None


def unschedulable_message(total: int, reasons: Mapping[str, int]) -> str:
    """``0/4 nodes are available: 2 Insufficient gpu.nvidia.com, 2 node(s) didn't match ...``"""
    if total == 0:
        return "no nodes available to schedule pods"
    parts = [f"{count} {reason}" for reason, count in sorted(reasons.items())]
    return f"0/{total} nodes are available: {', '.join(parts)}."

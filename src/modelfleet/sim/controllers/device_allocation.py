"""Where a pod fits in a simulated cluster, as pure functions: the scheduler's view of nodes and
their DRA devices (from Nodes and ResourceSlices), node selector, affinity and taint checks,
first-fit device allocation for a pod's ResourceClaims (DeviceClass and claim CEL selectors,
``matchAttribute``), and the kube-scheduler-style message when a pod fits nowhere.

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure: JSON-like
dicts in, values out; CEL through the simulator's own oracle (:mod:`.dra_cel`), never the
product's ``modelfleet.cel``, so that end-to-end tests check the product's selectors against an
independent answer. No I/O, no asyncio, no store access; :mod:`.scheduler` does the binding.

Simplifications (deliberate): pod CPU/memory requests are not accounted, only DRA devices are.
Allocation is first-fit over nodes in name order and devices in index order; a claim's first
``matchAttribute`` constraint is honoured by trying one attribute value at a time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from modelfleet.sim.controllers.dra_cel import DraDevice, SelectorOracle

__all__ = [
    "Allocation",
    "ClaimRequest",
    "NodeState",
    "SimDevice",
    "allocate_on_node",
    "claim_requests",
    "fit_failure",
    "match_attribute",
    "node_states",
    "unschedulable_message",
]

# kube-scheduler's wording, so that messages read like the real thing.
MSG_SELECTOR = "node(s) didn't match Pod's node affinity/selector"
MSG_UNSCHEDULABLE = "node(s) were unschedulable"
MSG_NOT_READY = "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
MSG_CANNOT_ALLOCATE = "cannot allocate all claims"

_ORACLE = SelectorOracle()


@dataclass(frozen=True)
class SimDevice:
    driver: str
    pool: str
    name: str
    facts: DraDevice
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
    attributes: dict[str, tuple[str, object]] = {}
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
        facts = DraDevice.build(driver, attributes, capacity)
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
    # An invalid selector, like one that fails on this device, allocates nothing.
    return _ORACLE.matches_all(expressions, device.facts)


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

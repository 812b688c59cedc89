"""Server-side tables (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``): the columns
``kubectl get`` shows for pods, nodes, deployments, ReplicaSets, LeaderWorkerSets, events and
services, a custom resource's ``additionalPrinterColumns`` (:mod:`.crd_columns`), and the
NAME/AGE default for every other kind, with the cell formats of the real
server's printers (ages as ``duration.HumanDuration``, ``<none>`` for absent values).

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure: objects in,
Table dicts out; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from modelfleet.sim.apiserver import crd_columns
from modelfleet.sim.apiserver.registry import ResourceType

__all__ = ["human_duration", "object_table", "wants_table"]

Obj = Mapping[str, Any]
# (name, type, priority, description); priority 1 columns show only with ``-o wide``.
Column = tuple[str, str, int, str]
Row = Callable[[Obj, datetime], list[Any]]
NONE = "<none>"


def wants_table(accept: str) -> bool:
    """True when the client asks for a meta.k8s.io/v1 Table (kubectl get does, JSON after it)."""
    for part in accept.split(","):
        params = {
            k.strip(): v.strip() for k, _, v in (p.partition("=") for p in part.split(";")[1:])
        }
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io":
            return params.get("v") in ("v1", "v1beta1")
    return False


def human_duration(seconds: float) -> str:
    """``k8s.io/apimachinery/pkg/util/duration.HumanDuration``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m" if s % 60 == 0 else f"{m}m{s % 60}s"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h" if m % 60 == 0 else f"{h}h{m % 60}m"
    if h < 48:
        return f"{h}h"
    if h < 24 * 8:
        return f"{h // 24}d" if h % 24 == 0 else f"{h // 24}d{h % 24}h"
    if h < 24 * 365 * 2:
        return f"{h // 24}d"
    if h < 24 * 365 * 8:
        return f"{h // 24 // 365}y{(h // 24) % 365}d"
    return f"{h // 24 // 365}y"


def _since(stamp: Any, now: datetime) -> str:
    if not isinstance(stamp, str) or not stamp:
        return "<unknown>"
    try:
        then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    return human_duration((now - then).total_seconds())


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _get(obj: Any, path: str, default: Any = None) -> Any:
    for part in path.split("."):
        if not isinstance(obj, Mapping):
            return default
        obj = obj.get(part)
    return default if obj is None else obj


def _age(obj: Obj, now: datetime) -> str:
    return _since(_meta(obj).get("creationTimestamp"), now)


def _selector(sel: Any) -> str:
    labels = (sel or {}).get("matchLabels") or {} if isinstance(sel, Mapping) else {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or NONE


def _containers(template_spec: Any) -> tuple[str, str]:
    containers = (template_spec or {}).get("containers") or []
    names = ",".join(str(c.get("name", "")) for c in containers)
    images = ",".join(str(c.get("image", "")) for c in containers)
    return names or NONE, images or NONE


# -- pods --------------------------------------------------------------------------------------


def pod_status_reason(pod: Obj) -> str:
    """The STATUS column: the printer's walk over phase, container states and deletion."""
    status = pod.get("status") or {}
    reason = str(status.get("reason") or status.get("phase") or "Unknown")
    init = False
    for i, cs in enumerate(status.get("initContainerStatuses") or []):
        state = cs.get("state") or {}
        term = state.get("terminated")
        if term and term.get("exitCode") == 0:
            continue
        init = True
        if term:
            reason = "Init:" + str(term.get("reason") or f"ExitCode:{term.get('exitCode')}")
        elif (state.get("waiting") or {}).get("reason") not in (None, "", "PodInitializing"):
            reason = "Init:" + str(state["waiting"]["reason"])
        else:
            total = len((pod.get("spec") or {}).get("initContainers") or [])
            reason = f"Init:{i}/{total}"
        break
    if not init:
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            state = cs.get("state") or {}
            waiting, term = state.get("waiting"), state.get("terminated")
            if waiting and waiting.get("reason"):
                reason = str(waiting["reason"])
            elif term and term.get("reason"):
                reason = str(term["reason"])
            elif term:
                reason = f"ExitCode:{term.get('exitCode')}"
            elif state.get("running") and cs.get("ready"):
                has_running = True
        if reason == "Completed" and has_running:
            reason = "Running"
    if _meta(pod).get("deletionTimestamp"):
        reason = "Terminating"
    return reason


def _pod_row(pod: Obj, now: datetime) -> list[Any]:
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    statuses = status.get("containerStatuses") or []
    total = len(spec.get("containers") or [])
    ready = sum(1 for cs in statuses if cs.get("ready"))
    restarts = sum(int(cs.get("restartCount") or 0) for cs in statuses)
    last = [
        ((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt")
        for cs in statuses
        if int(cs.get("restartCount") or 0)
    ]
    restart_cell = str(restarts)
    stamps = [s for s in last if s]
    if stamps:
        restart_cell = f"{restarts} ({_since(max(stamps), now)} ago)"
    gates = spec.get("readinessGates") or []
    return [
        _meta(pod).get("name", ""),
        f"{ready}/{total}",
        pod_status_reason(pod),
        restart_cell,
        _age(pod, now),
        status.get("podIP") or NONE,
        spec.get("nodeName") or NONE,
        status.get("nominatedNodeName") or NONE,
        f"0/{len(gates)}" if gates else NONE,
    ]


_POD_COLUMNS: list[Column] = [
    ("Name", "string", 0, "Name must be unique within a namespace."),
    ("Ready", "string", 0, "The aggregate readiness state of this pod for accepting traffic."),
    ("Status", "string", 0, "The aggregate status of the containers in this pod."),
    (
        "Restarts",
        "string",
        0,
        "Restarts of the pod's containers, and when the last one restarted.",
    ),
    ("Age", "string", 0, "CreationTimestamp of the pod."),
    ("IP", "string", 1, "IP address allocated to the pod."),
    ("Node", "string", 1, "Name of the node the pod is assigned to."),
    ("Nominated Node", "string", 1, "Name of the node nominated by the scheduler."),
    ("Readiness Gates", "string", 1, "The readiness gates of the pod."),
]

# -- nodes -------------------------------------------------------------------------------------


def _node_row(node: Obj, now: datetime) -> list[Any]:
    status = node.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    state = (
        "Unknown"
        if ready is None or ready.get("status") == "Unknown"
        else ("Ready" if ready.get("status") == "True" else "NotReady")
    )
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    roles = sorted(
        k.split("/", 1)[1]
        for k in (_meta(node).get("labels") or {})
        if k.startswith("node-role.kubernetes.io/") and k.split("/", 1)[1]
    )
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    info = status.get("nodeInfo") or {}
    return [
        _meta(node).get("name", ""),
        state,
        ",".join(roles) or NONE,
        _age(node, now),
        info.get("kubeletVersion", ""),
        addresses.get("InternalIP") or NONE,
        addresses.get("ExternalIP") or NONE,
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


_NODE_COLUMNS: list[Column] = [
    ("Name", "string", 0, "Name must be unique."),
    ("Status", "string", 0, "The status of the node"),
    ("Roles", "string", 0, "The roles of the node"),
    ("Age", "string", 0, "CreationTimestamp of the node."),
    ("Version", "string", 0, "Kubelet Version reported by the node."),
    ("Internal-IP", "string", 1, "List of internal IPs."),
    ("External-IP", "string", 1, "List of external IPs."),
    ("OS-Image", "string", 1, "OS Image reported by the node."),
    ("Kernel-Version", "string", 1, "Kernel Version reported by the node."),
    ("Container-Runtime", "string", 1, "Container Runtime Version reported by the node."),
]

# -- workloads ---------------------------------------------------------------------------------


def _deployment_row(obj: Obj, now: datetime) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    names, images = _containers(_get(spec, "template.spec"))
    return [
        _meta(obj).get("name", ""),
        f"{int(status.get('readyReplicas') or 0)}/{int(spec.get('replicas') or 0)}",
        int(status.get("updatedReplicas") or 0),
        int(status.get("availableReplicas") or 0),
        _age(obj, now),
        names,
        images,
        _selector(spec.get("selector")),
    ]


_DEPLOYMENT_COLUMNS: list[Column] = [
    ("Name", "string", 0, "Name must be unique within a namespace."),
    ("Ready", "string", 0, "Number of the pod with ready state"),
    (
        "Up-to-date",
        "string",
        0,
        "Non-terminated pods with the desired template spec.",
    ),
    (
        "Available",
        "string",
        0,
        "Pods ready for at least minReadySeconds.",
    ),
    ("Age", "string", 0, "CreationTimestamp of the deployment."),
    ("Containers", "string", 1, "Names of each container in the template."),
    ("Images", "string", 1, "Images referenced by each container in the template."),
    ("Selector", "string", 1, "Label selector for pods."),
]


def _replicaset_row(obj: Obj, now: datetime) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    names, images = _containers(_get(spec, "template.spec"))
    return [
        _meta(obj).get("name", ""),
        int(spec.get("replicas") or 0),
        int(status.get("replicas") or 0),
        int(status.get("readyReplicas") or 0),
        _age(obj, now),
        names,
        images,
        _selector(spec.get("selector")),
    ]


_REPLICASET_COLUMNS: list[Column] = [
    ("Name", "string", 0, "Name must be unique within a namespace."),
    ("Desired", "integer", 0, "Number of desired pods."),
    ("Current", "integer", 0, "Number of actual replicas."),
    ("Ready", "integer", 0, "Number of ready replicas."),
    ("Age", "string", 0, "CreationTimestamp of the replica set."),
    ("Containers", "string", 1, "Names of each container in the template."),
    ("Images", "string", 1, "Images referenced by each container in the template."),
    ("Selector", "string", 1, "Label selector for pods."),
]


def _lws_row(obj: Obj, now: datetime) -> list[Any]:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return [
        _meta(obj).get("name", ""),
        f"{int(status.get('readyReplicas') or 0)}/{int(spec.get('replicas') or 0)}",
        int(_get(spec, "leaderWorkerTemplate.size", 1)),
        int(status.get("updatedReplicas") or 0),
        _age(obj, now),
    ]


_LWS_COLUMNS: list[Column] = [
    ("Name", "string", 0, "Name must be unique within a namespace."),
    ("Ready", "string", 0, "Ready groups of the desired replicas."),
    ("Size", "integer", 0, "Pods per group (the leader and its workers)."),
    ("Up-to-date", "integer", 0, "Groups on the current template."),
    ("Age", "string", 0, "CreationTimestamp of the LeaderWorkerSet."),
]


def _event_row(obj: Obj, now: datetime) -> list[Any]:
    involved = obj.get("involvedObject") or obj.get("regarding") or {}
    last = (
        obj.get("lastTimestamp")
        or (obj.get("series") or {}).get("lastObservedTime")
        or obj.get("eventTime")
        or _meta(obj).get("creationTimestamp")
    )
    source = obj.get("source") or {}
    return [
        _since(last, now),
        obj.get("type", ""),
        obj.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        involved.get("fieldPath", ""),
        source.get("component") or obj.get("reportingController") or "",
        obj.get("message") or obj.get("note") or "",
        _since(obj.get("firstTimestamp") or obj.get("eventTime"), now),
        int(obj.get("count") or 1),
        _meta(obj).get("name", ""),
    ]


_EVENT_COLUMNS: list[Column] = [
    ("Last Seen", "string", 0, "Time of the last occurrence."),
    ("Type", "string", 0, "Type of this event (Normal, Warning)."),
    ("Reason", "string", 0, "Why the action was taken."),
    ("Object", "string", 0, "The object this event is about."),
    ("Subobject", "string", 1, "The part of the object this event is about."),
    ("Source", "string", 1, "The component reporting this event."),
    ("Message", "string", 0, "A human-readable description of the status of this operation."),
    ("First Seen", "string", 1, "Time of the first occurrence."),
    ("Count", "string", 1, "The number of times this event has occurred."),
    ("Name", "string", 1, "Name of the event."),
]


def _service_row(obj: Obj, now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    ports = ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or [])
    ingress = (_get(obj, "status.loadBalancer.ingress") or []) if spec else []
    external = ",".join(str(i.get("ip") or i.get("hostname")) for i in ingress)
    return [
        _meta(obj).get("name", ""),
        spec.get("type", "ClusterIP"),
        spec.get("clusterIP") or NONE,
        external or NONE,
        ports or NONE,
        _age(obj, now),
        ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items())) or NONE,
    ]


_SERVICE_COLUMNS: list[Column] = [
    ("Name", "string", 0, "Name must be unique within a namespace."),
    ("Type", "string", 0, "The type of service."),
    ("Cluster-IP", "string", 0, "The cluster IP of the service."),
    ("External-IP", "string", 0, "The external IP of the service."),
    ("Port(s)", "string", 0, "The ports of the service."),
    ("Age", "string", 0, "CreationTimestamp of the service."),
    ("Selector", "string", 1, "The selector of the service."),
]


def _resource_slice_row(obj: Obj, now: datetime) -> list[Any]:
    spec = obj.get("spec") or {}
    return [
        _meta(obj).get("name", ""),
        spec.get("nodeName") or "",
        spec.get("driver", ""),
        _get(spec, "pool.name", ""),
        _age(obj, now),
    ]


# As the real server prints them (kubectl get resourceslices: NAME NODE DRIVER POOL AGE).
_RESOURCE_SLICE_COLUMNS: list[Column] = [
    ("Name", "string", 0, "Name must be unique within a namespace."),
    (
        "Node",
        "string",
        0,
        "NodeName identifies the node which provides the resources in this pool.",
    ),
    ("Driver", "string", 0, "Driver identifies the DRA driver providing the capacity information."),
    ("Pool", "string", 0, "Name is used to identify the pool."),
    ("Age", "string", 0, "CreationTimestamp of the object."),
]


def _default_row(obj: Obj, now: datetime) -> list[Any]:
    return [_meta(obj).get("name", ""), _age(obj, now)]


_DEFAULT_COLUMNS: list[Column] = [
    ("Name", "string", 0, "Name must be unique within a namespace."),
    ("Age", "string", 0, "CreationTimestamp of the object."),
]

_PRINTERS: dict[str, tuple[list[Column], Row]] = {
    "pods": (_POD_COLUMNS, _pod_row),
    "nodes": (_NODE_COLUMNS, _node_row),
    "deployments.apps": (_DEPLOYMENT_COLUMNS, _deployment_row),
    "replicasets.apps": (_REPLICASET_COLUMNS, _replicaset_row),
    "leaderworkersets.leaderworkerset.x-k8s.io": (_LWS_COLUMNS, _lws_row),
    "events": (_EVENT_COLUMNS, _event_row),
    "events.events.k8s.io": (_EVENT_COLUMNS, _event_row),
    "services": (_SERVICE_COLUMNS, _service_row),
    "resourceslices.resource.k8s.io": (_RESOURCE_SLICE_COLUMNS, _resource_slice_row),
}


def _row_object(obj: Obj, rt: ResourceType, include: str) -> dict[str, Any] | None:
    if include == "None":
        return None
    if include == "Object":
        return dict(obj)
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": dict(_meta(obj)),
    }


def object_table(
    rt: ResourceType,
    items: Sequence[Obj],
    *,
    list_meta: Mapping[str, Any],
    include_object: str = "Metadata",
    now: datetime | None = None,
) -> dict[str, Any]:
    """A ``meta.k8s.io/v1`` Table of ``items`` with ``rt``'s printer columns."""
    at = now or datetime.now(UTC)
    if rt.printer_columns:
        columns, row = crd_columns.printer(rt.printer_columns, _since)
    else:
        columns, row = _PRINTERS.get(rt.key, (_DEFAULT_COLUMNS, _default_row))
    rows: list[dict[str, Any]] = []
    for obj in items:
        entry: dict[str, Any] = {"cells": row(obj, at)}
        embedded = _row_object(obj, rt, include_object)
        if embedded is not None:
            entry["object"] = embedded
        rows.append(entry)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": dict(list_meta),
        "columnDefinitions": [
            {
                "name": name,
                "type": kind,
                "format": "name" if name == "Name" else "",
                "description": description,
                "priority": priority,
            }
            for name, kind, priority, description in columns
        ],
        "rows": rows,
    }

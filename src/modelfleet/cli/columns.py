"""The table columns of ``get`` per kind (normal and ``-o wide``), read from the same manifest
``-o yaml`` prints, so the two views never disagree. Pure."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.markup import escape

from modelfleet.cli import cluster_view
from modelfleet.cli.manifests import NOT_ACTED_UPON, Fetched
from modelfleet.cli.output import human_age
from modelfleet.cli.targets import ACCEPTED_KINDS

# Columns that shrink first (with an ellipsis) when a terminal is narrow.
FLEXIBLE = ("MESSAGE", "REASON", "POOLS", "DEVICES", "LABELS", "METRICS", "URL", "STEP", "FREE")
NAMESPACED_KINDS = (
    "ModelDeployment",
    "ModelReplica",
    "ModelService",
    "ModelEndpoint",
    "ModelAutoscaler",
    "ModelCache",
    *ACCEPTED_KINDS,
)


# Per kind: the columns, and those ``-o wide`` adds.
_COLUMNS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "ModelDeployment": (("NAME", "READY", "UP-TO-DATE", "PHASE", "AGE"), ("CLUSTERS", "MESSAGE")),
    "ModelReplica": (("NAME", "DEPLOYMENT", "CLUSTER", "PHASE", "AGE"), ("POOLS",)),
    "InferenceCluster": (cluster_view.HEADER, cluster_view.WIDE),
    "ModelService": (("NAME", "PHASE", "ADDRESS", "IN-ROTATION", "AGE"), ("GATEWAY", "MESSAGE")),
    "ModelEndpoint": (("NAME", "SOURCE", "URL", "AGE"), ("LABELS",)),
    "InferenceGateway": (("NAME", "CLUSTER", "GATEWAY", "ADDRESSES", "AGE"), ()),
    "ModelAutoscaler": (
        ("NAME", "TARGET", "MIN", "MAX", "METRICS", "REPLICAS", "DESIRED", "AGE"),
        ("REASON",),
    ),
    "InferenceClass": (("NAME", "PROVIDER", "DEVICES", "AGE"), ("USED-BY",)),
    "ModelCache": (
        ("NAME", "SOURCE", "READY", "PHASE", "CLUSTERS", "AGE"),
        ("REVISION", "SIZE", "MESSAGE"),
    ),
}
_ACCEPTED_COLUMNS: tuple[tuple[str, ...], tuple[str, ...]] = (
    ("NAME", "STATUS", "REASON", "AGE"),
    (),
)


def header(kind: str, *, wide: bool, all_namespaces: bool) -> list[str]:
    default = _ACCEPTED_COLUMNS if kind in ACCEPTED_KINDS else _COLUMNS["InferenceClass"]
    base, wide_only = _COLUMNS.get(kind, default)
    cols = [*base, *wide_only] if wide else list(base)
    if all_namespaces and kind in NAMESPACED_KINDS:
        cols = ["NAMESPACE", *cols]
    return cols


def row(
    item: Fetched, *, wide: bool, all_namespaces: bool, now: datetime | None = None
) -> list[str]:
    age = human_age(item.created, now)
    spec: dict[str, Any] = item.manifest.get("spec") or {}
    status = item.status
    cells: list[str]
    if item.kind == "ModelDeployment":
        cells = [
            item.name,
            f"{status.get('ready', 0)}/{status.get('desired', 0)}",
            str(status.get("updated", 0)),
            _coloured_phase(str(status.get("phase", ""))),
            age,
        ]
        if wide:
            clusters = sorted({r.get("cluster", "") for r in status.get("replicas", [])})
            cells += [", ".join(clusters) or "-", escape(deployment_message(status))]
    elif item.kind == "ModelReplica":
        cells = [
            item.name,
            str(spec.get("deployment", "")),
            str(spec.get("clusterName", "")),
            _coloured_phase(str(status.get("phase", ""))),
            age,
        ]
        if wide:
            engines = spec.get("engines", [])
            cells.append(
                ", ".join(f"{e['name']}:{e['members'][0]['nodePoolName']}" for e in engines)
            )
    elif item.kind == "InferenceCluster":
        cells = cluster_view.cells(item, age, wide)
    elif item.kind in ACCEPTED_KINDS:
        cells = [item.name, NOT_ACTED_UPON, escape(str(status.get("reason", ""))), age]
    elif item.kind in _OTHER_ROWS:
        main, extra = _OTHER_ROWS[item.kind](item, spec, status)
        cells = [*main, age, *(extra if wide else [])]
    else:
        provisioning = spec.get("provisioning") or {}
        cells = [
            item.name,
            str(provisioning.get("provider", "BYO")),
            ", ".join(f"{d['name']} x{d.get('count', 1)}" for d in spec.get("devices", [])),
            age,
        ]
        if wide:
            cells.append(", ".join(status.get("usedBy", [])) or "-")
    if all_namespaces and item.kind in NAMESPACED_KINDS:
        cells = [item.namespace, *cells]
    return cells


Cells = tuple[list[str], list[str]]  # the columns before AGE, and the -o wide ones after it


def _service(item: Fetched, spec: dict[str, Any], status: dict[str, Any]) -> Cells:
    endpoints = status.get("endpoints", [])
    false = [c for c in status.get("conditions", []) if c.get("status") == "False"]
    message = f"{false[0]['type']}: {false[0].get('message', '')}" if false else ""
    return [
        item.name,
        _coloured_phase(str(status.get("phase", ""))),
        status.get("address") or "-",
        f"{sum(1 for e in endpoints if e.get('weight'))}/{len(endpoints)}",
    ], [status.get("gatewayCluster") or "-", escape(message)]


def _endpoint(item: Fetched, spec: dict[str, Any], status: dict[str, Any]) -> Cells:
    labels = ", ".join(f"{k}={v}" for k, v in sorted(item.labels.items())) or "-"
    return [item.name, str(status.get("source", "")), str(spec.get("url", ""))], [labels]


def _gateway(item: Fetched, spec: dict[str, Any], status: dict[str, Any]) -> Cells:
    if status.get("phase") == NOT_ACTED_UPON:  # Modelplane's Traefik gateway, kept only
        return [item.name, "-", "-", NOT_ACTED_UPON], []
    return [
        item.name,
        str(spec.get("cluster", "")),
        f"{spec.get('gatewayNamespace', '')}/{spec.get('gatewayName', '')}",
        ", ".join(spec.get("addresses", [])) or "-",
    ], []


def _autoscaler(item: Fetched, spec: dict[str, Any], status: dict[str, Any]) -> Cells:
    last = status.get("lastDecision") or {}
    current = status.get("current")
    target = spec.get("scaleTargetRef") or {}
    return [
        item.name,
        f"{target.get('kind', 'ModelDeployment')}/{target.get('name', '')}",
        str(status.get("minReplicas", "")),
        str(status.get("maxReplicas", "")),
        autoscaler_metrics(spec, last),
        "-" if current is None else str(current),
        str(last["desired"]) if "desired" in last else "-",
    ], [escape(status.get("problem") or last.get("reason", "")) or "-"]


def _cache(item: Fetched, spec: dict[str, Any], status: dict[str, Any]) -> Cells:
    hf = spec.get("huggingFace") or {}
    clusters = ", ".join(
        f"{c.get('cluster')}: {cache_summary(c)}" for c in status.get("clusters") or []
    )
    main = [
        item.name,
        f"{spec.get('source', '')}:{hf.get('repo', '')}",
        f"{status.get('ready', 0)}/{status.get('total', 0)}",
        _coloured_phase(str(status.get("phase", ""))),
        escape(clusters or "-"),
    ]
    messages = "; ".join(
        f"{c.get('cluster')}: {c.get('message')}"
        for c in status.get("clusters") or []
        if c.get("message") and c.get("phase") != "Ready"
    )
    wide = [
        str(hf.get("revision") or "-"),
        f"{hf.get('sizeGiB', '?')}Gi",
        escape(messages or str(status.get("reason") or "-")),
    ]
    return main, wide


def cache_summary(cluster: dict[str, Any]) -> str:
    """``Ready``, ``Hydrating 40%``, ``Pending``, ``Failed`` for one cluster of a cache."""
    phase = str(cluster.get("phase", ""))
    if phase == "Hydrating":
        total = int(cluster.get("bytesTotal") or 0)
        done = int(cluster.get("bytesDone") or 0)
        return f"Hydrating {min(100, done * 100 // total) if total else 0}%"
    return phase


def autoscaler_metrics(spec: dict[str, Any], last: dict[str, Any]) -> str:
    """``metric current/target`` per metric of the spec, as the last decision read it (``?``
    when not read yet): kubectl's ``get hpa`` TARGETS column."""
    readings = {r.get("metric"): r.get("value") for r in last.get("metrics", [])}
    parts = []
    for metric in spec.get("metrics", []):
        source = metric.get("engine") or metric.get("prometheus") or {}
        label = source["name"] if "name" in source else f"promql:{source.get('query', '')}"
        value = readings.get(label)
        shown = "?" if value is None else f"{value:.3g}"
        parts.append(f"{label} {shown}/{(source.get('target') or {}).get('averageValue', 0):g}")
    return ", ".join(parts) or "-"


_OTHER_ROWS = {
    "ModelService": _service,
    "ModelEndpoint": _endpoint,
    "InferenceGateway": _gateway,
    "ModelAutoscaler": _autoscaler,
    "ModelCache": _cache,
}


def deployment_message(status: dict[str, Any]) -> str:
    """What a person should know: the scheduler's summary, else the first False condition."""
    if status.get("summary"):
        return str(status["summary"])
    for c in status.get("conditions", []):
        if c.get("status") == "False" and c.get("message") and int(status.get("desired", 0)):
            return f"{c['type']}: {c['message']}"
    return ""


_COLOURS = {
    "Ready": "green",
    "Failed": "red",
    "Degraded": "yellow",
    "NotReady": "red",
    "Pending": "yellow",
    "Paused": "yellow",
}


def _coloured_phase(phase: str) -> str:
    colour = _COLOURS.get(phase)
    return f"[{colour}]{phase}[/]" if colour else phase

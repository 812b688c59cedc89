"""The table columns of ``get`` per kind (normal and ``-o wide``), read from the same manifest
``-o yaml`` prints, so the two views never disagree. Pure."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from rich.markup import escape

from modelfleet.cli.manifests import NOT_ACTED_UPON, Fetched
from modelfleet.cli.output import human_age

# Columns that shrink first (with an ellipsis) when a terminal is narrow.
FLEXIBLE = ("MESSAGE", "REASON", "POOLS", "DEVICES", "LABELS", "METRICS", "URL", "STEP", "FREE")


def header(kind: str, *, wide: bool, all_namespaces: bool) -> list[str]:
    """The table header of ``kind`` (its registry columns; NAMESPACE first with ``-A``)."""
    from modelfleet.cli.kinds import spec_of  # the registry imports this module's rows

    spec = spec_of(kind)
    cols = [*spec.columns, *spec.wide_columns] if wide else list(spec.columns)
    if all_namespaces and spec.namespaced:
        cols = ["NAMESPACE", *cols]
    return cols


def row(
    item: Fetched, *, wide: bool, all_namespaces: bool, now: datetime | None = None
) -> list[str]:
    """One table row of ``item``, in the order of ``header``."""
    from modelfleet.cli.kinds import spec_of

    spec = spec_of(item.kind)
    cells = spec.row(item, human_age(item.created, now), wide)
    if all_namespaces and spec.namespaced:
        cells = [item.namespace, *cells]
    return cells


Cells = tuple[list[str], list[str]]  # the columns before AGE, and the -o wide ones after it
Row = Callable[[Fetched, str, bool], list[str]]  # item, AGE, wide: the cells without NAMESPACE


def deployment_row(item: Fetched, age: str, wide: bool) -> list[str]:
    status = item.status
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
    return cells


def replica_row(item: Fetched, age: str, wide: bool) -> list[str]:
    spec: dict[str, Any] = item.manifest.get("spec") or {}
    cells = [
        item.name,
        str(spec.get("deployment", "")),
        str(spec.get("clusterName", "")),
        _coloured_phase(str(item.status.get("phase", ""))),
        age,
    ]
    if wide:
        engines = spec.get("engines", [])
        cells.append(", ".join(f"{e['name']}:{e['members'][0]['nodePoolName']}" for e in engines))
    return cells


def class_row(item: Fetched, age: str, wide: bool) -> list[str]:
    spec: dict[str, Any] = item.manifest.get("spec") or {}
    provisioning = spec.get("provisioning") or {}
    cells = [
        item.name,
        str(provisioning.get("provider", "BYO")),
        ", ".join(f"{d['name']} x{d.get('count', 1)}" for d in spec.get("devices", [])),
        age,
    ]
    if wide:
        cells.append(", ".join(item.status.get("usedBy", [])) or "-")
    return cells


ACCEPTED_COLUMNS: tuple[tuple[str, ...], tuple[str, ...]] = (
    ("NAME", "STATUS", "REASON", "AGE"),
    (),
)


def accepted_row(item: Fetched, age: str, wide: bool) -> list[str]:
    return [item.name, NOT_ACTED_UPON, escape(str(item.status.get("reason", ""))), age]


def split_row(cells: Callable[[Fetched, dict[str, Any], dict[str, Any]], Cells]) -> Row:
    """A row from the columns before AGE and the ``-o wide`` ones after it."""

    def build(item: Fetched, age: str, wide: bool) -> list[str]:
        spec: dict[str, Any] = item.manifest.get("spec") or {}
        main, extra = cells(item, spec, item.status)
        return [*main, age, *(extra if wide else [])]

    return build


def service_cells(item: Fetched, spec: dict[str, Any], status: dict[str, Any]) -> Cells:
    endpoints = status.get("endpoints", [])
    false = [c for c in status.get("conditions", []) if c.get("status") == "False"]
    message = f"{false[0]['type']}: {false[0].get('message', '')}" if false else ""
    phase = str(status.get("phase", ""))
    # While Pending, say why, as kubectl's STATUS shows a pod's reason (ContainerCreating).
    reason = str(false[0].get("reason") or "") if false else ""
    return [
        item.name,
        _coloured_phase(phase) + (f" ({escape(reason)})" if phase == "Pending" and reason else ""),
        status.get("address") or "-",
        f"{sum(1 for e in endpoints if e.get('weight'))}/{len(endpoints)}",
        front_doors_cell(status.get("frontDoors") or []),
    ], [status.get("gatewayCluster") or "-", escape(message)]


def front_doors_cell(doors: list[dict[str, Any]]) -> str:
    """Each front door and its state (``l4-dev Serving, h200-west Out``)."""
    return ", ".join(f"{d.get('cluster')} {d.get('state')}" for d in doors) or "-"


def endpoint_cells(item: Fetched, spec: dict[str, Any], status: dict[str, Any]) -> Cells:
    labels = ", ".join(f"{k}={v}" for k, v in sorted(item.labels.items())) or "-"
    return [item.name, str(status.get("source", "")), str(spec.get("url", ""))], [labels]


def gateway_cells(item: Fetched, spec: dict[str, Any], status: dict[str, Any]) -> Cells:
    if status.get("phase") == NOT_ACTED_UPON:  # Modelplane's Traefik gateway, kept only
        return [item.name, "-", "-", NOT_ACTED_UPON], []
    return [
        item.name,
        str(spec.get("cluster", "")),
        f"{spec.get('gatewayNamespace', '')}/{spec.get('gatewayName', '')}",
        ", ".join(spec.get("addresses", [])) or "-",
    ], [
        ", ".join(spec.get("additionalClusters", [])) or "-",
        str((spec.get("globalAddress") or {}).get("zone") or "-"),
    ]


def autoscaler_cells(item: Fetched, spec: dict[str, Any], status: dict[str, Any]) -> Cells:
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


def cache_cells(item: Fetched, spec: dict[str, Any], status: dict[str, Any]) -> Cells:
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
    "Unknown": "yellow",
    "NotReady": "red",
    "Pending": "yellow",
    "Paused": "yellow",
}


def _coloured_phase(phase: str) -> str:
    colour = _COLOURS.get(phase)
    return f"[{colour}]{phase}[/]" if colour else phase


def labels_cell(labels: dict[str, str]) -> str:
    """``--show-labels``: kubectl's ``k=v,k2=v2`` in key order, ``<none>`` without labels."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "<none>"

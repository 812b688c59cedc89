"""The table columns of ``get`` per kind (normal and ``-o wide``), read from the same manifest
``-o yaml`` prints, so the two views never disagree. Pure."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.markup import escape

from modelfleet.cli.manifests import Fetched
from modelfleet.cli.output import human_age

# Columns that shrink first (with an ellipsis) when a terminal is narrow.
FLEXIBLE = ("MESSAGE", "REASON", "POOLS", "DEVICES")


def header(kind: str, *, wide: bool, all_namespaces: bool) -> list[str]:
    cols: list[str]
    if kind == "ModelDeployment":
        cols = ["NAME", "READY", "UP-TO-DATE", "PHASE", "AGE"]
        if wide:
            cols += ["CLUSTERS", "MESSAGE"]
    elif kind == "ModelReplica":
        cols = ["NAME", "DEPLOYMENT", "CLUSTER", "PHASE", "AGE"]
        if wide:
            cols += ["POOLS"]
    elif kind == "InferenceCluster":
        cols = ["NAME", "SOURCE", "STATUS", "POOLS", "AGE"]
        if wide:
            cols += ["GATEWAY", "REASON"]
    else:  # InferenceClass
        cols = ["NAME", "PROVIDER", "DEVICES", "AGE"]
        if wide:
            cols += ["USED-BY"]
    if all_namespaces and kind in ("ModelDeployment", "ModelReplica"):
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
        source = (spec.get("cluster") or {}).get("source", "")
        cells = [
            item.name,
            str(source),
            _coloured_phase(str(status.get("phase", ""))),
            ", ".join(_pool(p) for p in status.get("pools", [])),
            age,
        ]
        if wide:
            cells += [status.get("gatewayAddress") or "-", escape(str(status.get("reason", "")))]
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
    if all_namespaces and item.kind in ("ModelDeployment", "ModelReplica"):
        cells = [item.namespace, *cells]
    return cells


def deployment_message(status: dict[str, Any]) -> str:
    """What a person should know: the scheduler's summary, else the first False condition."""
    if status.get("summary"):
        return str(status["summary"])
    for c in status.get("conditions", []):
        if c.get("status") == "False" and c.get("message") and int(status.get("desired", 0)):
            return f"{c['type']}: {c['message']}"
    return ""


def _pool(p: dict[str, Any]) -> str:
    ready = p.get("readyNodes")
    nodes = p.get("nodes")
    counts = f"{ready}/{nodes}" if ready is not None else f"x{nodes}"
    return f"{p['name']}({p['className']} {counts})"


_COLOURS = {
    "Ready": "green",
    "Failed": "red",
    "Degraded": "yellow",
    "NotReady": "red",
    "Pending": "yellow",
}


def _coloured_phase(phase: str) -> str:
    colour = _COLOURS.get(phase)
    return f"[{colour}]{phase}[/]" if colour else phase

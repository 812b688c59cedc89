"""How an InferenceCluster is shown: its ``get`` row and its ``describe`` page, both read from
the manifest :mod:`modelfleet.cli.clusters` builds (so ``-o yaml``, the table and ``describe``
never disagree), and the step lines ``rollout status cluster/NAME`` prints as they happen.

Printing only; no client, no I/O beyond the console.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.markup import escape

from modelfleet.cli.manifests import Fetched
from modelfleet.cli.output import console, print_table

HEADER = ("NAME", "SOURCE", "PHASE", "STEP", "POOLS", "FREE", "AGE")
WIDE = ("GATEWAY", "REASON")
# A cell nobody could read now, as kubectl prints one.
UNKNOWN = "<unknown>"
# The columns only the Fleet's record and the cluster workflow's answer hold.
_FLEET_ONLY = ("SOURCE", "STEP", "POOLS", "FREE", *WIDE)
PHASE_COLOURS = {
    "Ready": "green",
    "Failed": "red",
    "NotReady": "red",
    "Provisioning": "yellow",
    "Draining": "yellow",
    "Deleting": "yellow",
}


def fleet_silent(reason: str) -> str:
    """The one line ``get clusters`` prints when the Fleet did not answer: what the rows are
    and which of their columns nobody could read."""
    return (
        f"the Fleet workflow did not answer: {reason}; each row is what its cluster workflow "
        f"published (NAME, PHASE, AGE), and {', '.join(_FLEET_ONLY)} are {UNKNOWN}"
    )


def cells(item: Fetched, age: str, wide: bool) -> list[str]:
    status = item.status
    if item.source_error:  # visibility alone: the name, the published phase and the age
        phase = coloured(str(status.get("phase") or UNKNOWN))
        return [item.name, UNKNOWN, phase, UNKNOWN, UNKNOWN, UNKNOWN, age] + (
            [UNKNOWN, UNKNOWN] if wide else []
        )
    out = [
        item.name,
        str(status.get("source", "")),
        coloured(str(status.get("phase", ""))),
        escape(step_cell(status)),
        ", ".join(pool_cell(p, status.get("reachable")) for p in status.get("pools", [])) or "-",
        free_cell(status.get("pools", []), status.get("reachable")),
        age,
    ]
    if wide:
        out += [status.get("gatewayAddress") or "-", escape(str(status.get("reason", "")))]
    return out


def step_cell(status: dict[str, Any]) -> str:
    """The step running now; for a failed cluster, the step that failed."""
    if status.get("step"):
        return str(status["step"])
    if status.get("phase") == "Failed":
        failed = [s for s in status.get("steps") or [] if s.get("error")]
        if failed:
            return f"{failed[0]['name']} (failed)"
    return "-"


def coloured(phase: str) -> str:
    colour = PHASE_COLOURS.get(phase)
    return f"[{colour}]{phase}[/]" if colour else phase


def pool_cell(pool: dict[str, Any], reachable: bool | None = None) -> str:
    """``<pool> <ready>/<nodes>``: nodes as last observed, else as declared. While the cluster
    does not answer its probes (``reachable`` False) nobody knows how many are ready: ``?/N``."""
    ready = pool.get("readyNodes")
    nodes = pool.get("nodes")
    total = nodes if nodes is not None else pool.get("declaredNodes", 0)
    shown = "?" if reachable is False else str(ready or 0)
    return f"{pool['name']} {shown}/{total}"


def free_cell(pools: list[dict[str, Any]], reachable: bool | None = None) -> str:
    """``<free>/<total> <device>`` per device kind, summed over the pools; ``-`` before the
    cluster has reported any nodes; ``?/<total>`` while it does not answer its probes."""
    totals: dict[str, list[int]] = {}
    for pool in pools:
        for d in pool.get("devices", []):
            acc = totals.setdefault(d["name"], [0, 0])
            acc[0] += int(d["free"])
            acc[1] += int(d["total"])
    return (
        ", ".join(
            f"{'?' if reachable is False else free}/{total} {name}"
            for name, (free, total) in totals.items()
        )
        or "-"
    )


def duration(started: datetime, finished: datetime | None, now: datetime) -> str:
    seconds = ((finished or now) - started).total_seconds()
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def step_rows(steps: list[dict[str, Any]], now: datetime) -> list[list[str]]:
    rows = []
    for step in steps:
        started = datetime.fromisoformat(step["started"])
        finished = datetime.fromisoformat(step["finished"]) if step.get("finished") else None
        if step.get("error"):
            result = f"[red]failed[/]: {escape(step['error'])}"
        elif finished is None:
            result = "[yellow]running[/]"
        else:
            result = "[green]done[/]"
        rows.append(
            [
                escape(step["name"]),
                started.astimezone().strftime("%H:%M:%S"),
                duration(started, finished, now),
                result,
            ]
        )
    return rows


def describe_cluster(item: Fetched, workflow_url: str, now: datetime) -> None:
    status = item.status
    spec = item.manifest.get("spec") or {}
    console.print(
        f"[bold]InferenceCluster {item.name}[/]  {coloured(str(status.get('phase', '')))}: "
        f"{escape(str(status.get('reason', '')))}"
    )
    console.print(f"Source: {_source(spec)}")
    console.print(f"Workflow: {workflow_url}", soft_wrap=True)
    last = status.get("lastProbe")
    probed = f"{datetime.fromisoformat(last).astimezone():%H:%M:%S}" if last else "-"
    console.print(
        f"Gateway: {status.get('gatewayAddress') or '-'}   failed probes: "
        f"{status.get('failedProbes', 0)}   last probe: {probed}"
    )
    queue = status.get("queue")
    if queue:
        console.print(f"Gang scheduler: {escape(queue_line(queue))}")
    console.print("\n[bold]Steps[/]")
    steps = status.get("steps") or []
    if steps:
        print_table(["STEP", "STARTED", "DURATION", "RESULT"], step_rows(steps, now))
    else:
        console.print("  none recorded")
    console.print(
        "\n[bold]Pools[/] (declared by the manifest and its classes; published: "
        "what the cluster reports and placement counts)"
    )
    reachable = status.get("reachable")
    if reachable is False:
        console.print(
            "  [yellow]the cluster does not answer its probes: node readiness is unknown; "
            "the counts below are the last ones seen[/]"
        )
    print_table(
        ["POOL", "CLASS", "DECLARED", "PUBLISHED", "FREE"],
        [_pool_row(p, reachable) for p in status.get("pools", [])],
        flexible=("DECLARED", "PUBLISHED"),
    )
    differences = [
        f"{p['name']}: {line}" for p in status.get("pools", []) for line in p.get("differences", [])
    ]
    if differences:
        console.print(
            "\n[bold]Hardware differs from the class[/] (placement matches what the hardware "
            "publishes)"
        )
        for line in differences:
            console.print(f"  {escape(line)}", soft_wrap=True)
    stack = status.get("stack") or []
    if stack:
        console.print("\n[bold]Serving stack[/]")
        print_table(
            ["COMPONENT", "VERSION", "API", "SERVED"],
            [
                [
                    escape(p["name"]),
                    p["version"],
                    p["apiVersion"],
                    _served(p),
                ]
                for p in stack
            ],
        )
    console.print("\n[bold]Conditions[/]")
    for c in status.get("conditions", []):
        console.print(f"  {c['type']}={c['status']} ({c['reason']}) {escape(c['message'])}")


def describe_published_cluster(item: Fetched, workflow_url: str) -> None:
    """A cluster as visibility holds it (the Fleet did not answer): its published phase, its
    creation time and where to look; the caller says why the rest is missing."""
    phase = str(item.status.get("phase") or UNKNOWN)
    console.print(f"[bold]InferenceCluster {item.name}[/]  {coloured(phase)} (as last published)")
    created = item.manifest.get("metadata", {}).get("creationTimestamp") or UNKNOWN
    console.print(f"Created: {created}")
    console.print(f"Workflow: {workflow_url}", soft_wrap=True)


def queue_line(queue: dict[str, Any]) -> str:
    """``KAI queue team-a: 4 of 16 GPUs free`` from a published queue (status JSON)."""
    head = f"{queue.get('scheduler')} queue {queue.get('name')}"
    if queue.get("problem"):
        return f"{head}: {queue['problem']} (admits nothing)"
    total = queue.get("totalGpus")
    used = int(queue.get("usedGpus") or 0)
    if total is None:
        return f"{head}: no GPU limit, {used} in use"
    return f"{head}: {max(0, int(total) - used)} of {total} GPUs free"


def _source(spec: dict[str, Any]) -> str:
    access = spec.get("cluster") or {}
    source = str(access.get("source", ""))
    if source == "GKE":
        gke = access.get("gke") or {}
        return f"GKE (project {gke.get('project')}, region {gke.get('region')})"
    if source == "EKS":
        return f"EKS (region {(access.get('eks') or {}).get('region')})"
    existing = (access.get("existing") or {}).get("secretRef") or {}
    if existing:
        return f"Existing (kubeconfig from secret {existing.get('name')})"
    return source


def _capacity(capacity: dict[str, Any] | None) -> str:
    """``(memory 81559Mi)`` from a capacity map (values may be ``{"value": ...}``)."""
    if not capacity:
        return ""
    parts = [f"{k} {v.get('value', '') if isinstance(v, dict) else v}" for k, v in capacity.items()]
    return f" ({', '.join(parts)})"


def _nodes(n: int) -> str:
    return f"{n} node" if n == 1 else f"{n} nodes"


def _pool_row(pool: dict[str, Any], reachable: bool | None = None) -> list[str]:
    devices = pool.get("declaredDevices")
    per_node = (
        ", ".join(f"{d['name']} x{d['count']}{_capacity(d.get('capacity'))}" for d in devices)
        if devices
        else "class missing"
    )
    declared = f"{_nodes(int(pool.get('declaredNodes', 0)))}, {per_node} per node"
    nodes = pool.get("nodes")
    if nodes is None:
        published = "nothing reported yet"
    else:
        ready = "?" if reachable is False else pool.get("readyNodes", 0)
        published = f"{ready}/{_nodes(int(nodes))} ready"
        slices = pool.get("publishedDevices")
        if slices:
            # What the ResourceSlices say per node, which placement matches selectors against.
            shown = ", ".join(
                f"{d.get('driver', '')} x{d.get('count', 0)}{_capacity(d.get('capacity'))}"
                for d in slices
            )
            published += f", {shown} per node"
        totals = ", ".join(f"{d['total']} {d['name']}" for d in pool.get("devices", []))
        if totals:
            published += f"; counted: {totals}"
    free = ", ".join(f"{d['free']}/{d['total']} {d['name']}" for d in pool.get("devices", []))
    return [pool["name"], pool.get("className", ""), declared, published, free or "-"]


def _served(piece: dict[str, Any]) -> str:
    served = piece.get("served")
    if served is None:
        return "not checked yet"
    if served:
        return "[green]yes[/]"
    problem = piece.get("problem")
    return "[red]missing[/]" + (f": {escape(problem)}" if problem else "")

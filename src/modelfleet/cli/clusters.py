"""InferenceClusters as ``get``/``describe``/``delete`` read them: the Fleet's record (spec,
published observation, draining) joined with the cluster workflow's own status (phase, the step
running now, every step with its times, the serving stack) and the free devices placement would
see, in one manifest shape (``-o yaml`` prints it; the table columns are read from it).

Touches only the Temporal client (queries and visibility); the free devices come from the pure
:mod:`modelfleet.scheduling.capacity`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.service import RPCError

from modelfleet.api.classes import InferenceClass
from modelfleet.api.deployments import ModelReplica
from modelfleet.api.meta import API_VERSION
from modelfleet.applying.deleting import still_runs
from modelfleet.cli.cluster_view import fleet_silent
from modelfleet.cli.errors import CliError, NotFoundError
from modelfleet.cli.manifests import Fetched, _with_server_fields, unanswered_reason
from modelfleet.cli.output import console
from modelfleet.cli.resources import (
    ROW_READS,
    cluster_status,
    fleet_state,
    is_running,
    placed_replicas,
    running,
)
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts import search
from modelfleet.contracts.ids import cluster_id
from modelfleet.contracts.status import ClusterRecord, ClusterStatus, StackPiece
from modelfleet.scheduling.capacity import DeviceCount, free_devices
from modelfleet.scheduling.observed_devices import device_differences, published_devices


async def _status_or_none(client: Client, name: str) -> ClusterStatus | str | None:
    """The workflow's status; None when it has just ended (deleted between list and query);
    why not, when it did not answer now (its row is then the Fleet's record alone)."""
    try:
        return await cluster_status(client, name)
    except NotFoundError:
        return None
    except (CliError, RPCError, WorkflowQueryFailedError) as exc:
        return unanswered_reason(exc)


async def fetch_clusters(client: Client, wanted: set[str]) -> list[Fetched]:
    """Every cluster the Fleet holds (or the ``wanted`` ones), with its workflow's status. A
    cluster workflow that cannot answer now (busy worker, failing task) does not fail the
    list: its row is the Fleet's record with the phase the workflow last published (search
    attribute) and the reason, and ``get`` exits 1 after printing every row. The Fleet not
    answering (each of its queries is bounded) does not fail it either: the rows are then
    what visibility holds (``published_clusters``)."""
    try:
        view, classes = await fleet_state(client)
    except NotFoundError:
        raise
    except (CliError, RPCError, WorkflowQueryFailedError) as exc:
        return await published_clusters(client, wanted, unanswered_reason(exc))
    records = [r for r in view.clusters if not wanted or r.spec.name in wanted]
    if not records:
        return []
    runs = {w.id: w for w in await running(client, "InferenceCluster")}
    gate = asyncio.Semaphore(ROW_READS)

    async def ask(name: str) -> ClusterStatus | str | None:
        async with gate:
            return await _status_or_none(client, name)

    answers = await asyncio.gather(*(ask(r.spec.name) for r in records))
    free = _free(classes, view.clusters, view.replicas)
    out = []
    for record, answer in zip(records, answers, strict=True):
        run = runs.get(cluster_id(record.spec.name))
        status = answer if isinstance(answer, ClusterStatus) else None
        # The workflow keeps the cluster's creation time across continue-as-new.
        created = status.created if status is not None and status.created else None
        if created is None and run is not None:
            created = run.typed_search_attributes.get(search.CREATED) or run.start_time
        item = cluster_resource(record, status, free.get(record.spec.name), classes, created)
        if isinstance(answer, str):
            published = run.typed_search_attributes.get(search.PHASE) if run else None
            if published:
                item.status["phase"] = published
            item.error = answer
        out.append(item)
    return out


async def published_clusters(client: Client, wanted: set[str], reason: str) -> list[Fetched]:
    """The running cluster workflows as visibility holds them (a named one: its own record,
    which needs no workflow task either), each a row of its name, published phase and creation
    time carrying why the Fleet did not answer. None running: the Fleet's silence is the
    answer (an error), not an empty list."""
    if wanted:
        found = [await is_running(client, cluster_id(n)) for n in sorted(wanted)]
        runs = [w for w in found if w is not None]
    else:
        runs = await running(client, "InferenceCluster")
    if not runs:
        raise CliError(
            f"the Fleet workflow did not answer: {reason}; and no cluster workflow runs that "
            "visibility could list instead"
        )
    return [published_cluster(w, fleet_silent(reason)) for w in runs]


def published_cluster(run: Any, why: str) -> Fetched:
    """One cluster from visibility alone: nothing the Fleet or the workflow would say is
    guessed (no spec, no pools: ``-o json|yaml`` leave it out, the table shows them unknown)."""
    attrs = run.typed_search_attributes
    name = attrs.get(search.NAME) or run.id.split("/", 1)[1]
    # Published at the run's start and kept across continue-as-new; older workers did not.
    created = attrs.get(search.CREATED) or run.start_time
    manifest = _with_server_fields(
        {"apiVersion": API_VERSION, "kind": "InferenceCluster", "metadata": {"name": name}},
        created,
        {"phase": attrs.get(search.PHASE) or ""},
    )
    return Fetched("InferenceCluster", name, "", manifest, created, {}, source_error=why)


def _free(
    classes: dict[str, InferenceClass],
    records: Sequence[ClusterRecord],
    replicas: Sequence[ModelReplica],
) -> dict[str, dict[str, list[DeviceCount]]]:
    # Only clusters that reported nodes: before its first observation a cluster's capacity is
    # what it declares, which is not yet free for anyone.
    observed = {r.spec.name: r.observed() for r in records if r.observed_pools}
    return free_devices(classes, observed, replicas) if observed else {}


def cluster_resource(
    record: ClusterRecord,
    status: ClusterStatus | None,
    free: dict[str, list[DeviceCount]] | None,
    classes: dict[str, InferenceClass],
    created: datetime | None,
) -> Fetched:
    """The manifest of one cluster with a ``status`` that ``get``, ``describe`` and ``-o yaml``
    share. ``status`` None (its workflow is gone): the Fleet's record alone."""
    spec = record.spec
    observed = status.observed_pools if status is not None else record.observed_pools
    pools = []
    for pool in spec.spec.node_pools:
        seen = observed.get(pool.name)
        klass = classes.get(pool.class_name)
        # What the pool's ResourceSlices publish per node, when the worker reports it.
        published = seen.model_dump(mode="json", by_alias=True).get("devices") if seen else None
        # Where the hardware differs from the class (80Gi declared, 81559Mi on the slices):
        # placement matches selectors against the hardware, so the difference is shown.
        differences = (
            device_differences(
                klass.spec.devices, published_devices(klass.spec.devices, seen.devices)
            )
            if klass is not None and seen is not None and seen.devices is not None
            else []
        )
        pools.append(
            {
                "name": pool.name,
                "className": pool.class_name,
                "declaredNodes": pool.node_count,
                "nodes": seen.nodes if seen else None,
                "readyNodes": seen.ready_nodes if seen else None,
                "declaredDevices": (
                    [
                        {
                            "name": d.name,
                            "driver": d.driver,
                            "count": d.count,
                            "capacity": {k: c.value for k, c in d.capacity.items()},
                        }
                        for d in klass.spec.devices
                    ]
                    if klass is not None
                    else None
                ),
                "publishedDevices": published,
                "differences": differences,
                "devices": [
                    {"name": c.device, "free": c.free, "total": c.total}
                    for c in (free or {}).get(pool.name, [])
                ],
            }
        )
    body: dict[str, Any] = {
        "source": spec.spec.cluster.source.value,
        # False when the last probe failed: the node counts are then the last ones seen.
        "reachable": _reachable(status),
        "phase": status.phase if status is not None else _record_phase(record),
        "ready": record.ready if status is None else status.ready,
        "reason": record.reason if status is None else status.reason,
        "step": status.step if status is not None else "",
        "gatewayAddress": record.gateway_address,
        "draining": record.draining,
        "pools": pools,
        "conditions": conditions(record, status),
    }
    # What the gang scheduler's queue can still admit, as placement counts it.
    queue = status.queue if status is not None else record.queue
    if queue is not None:
        body["queue"] = queue.model_dump(mode="json", by_alias=True)
    if status is not None:
        dumped = status.model_dump(mode="json", by_alias=True, include={"steps", "stack"})
        body["steps"] = dumped["steps"]
        body["stack"] = dumped["stack"]
        body["failedProbes"] = status.failed_probes
        body["lastProbe"] = dumped_time(status.last_probe)
    manifest = _with_server_fields(spec.to_wire(), created, body)
    return Fetched("InferenceCluster", spec.name, "", manifest, created, dict(spec.metadata.labels))


def _reachable(status: ClusterStatus | None) -> bool | None:
    """The Reachable condition as a bool; None before any probe (or from an older worker)."""
    if status is None:
        return None
    for c in status.conditions:
        if c.type == "Reachable":
            return c.status == "True"
    return None


def dumped_time(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def _record_phase(record: ClusterRecord) -> str:
    if record.draining:
        return "Draining"
    return "Ready" if record.ready else "NotReady"


def conditions(record: ClusterRecord, status: ClusterStatus | None) -> list[dict[str, str]]:
    """Ready (from the last probe), then the workflow's own typed conditions when it reports
    them, else ServingStack (from the last check) and Provisioned for GKE/EKS clusters (from
    the step log), each with a reason a person can act on."""
    ready = record.ready if status is None else status.ready
    reason = record.reason if status is None else status.reason
    out = [
        {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": "Probed" if ready else (status.phase if status else "NotReady"),
            "message": reason,
        }
    ]
    if status is None:
        return out
    # Workers that keep typed conditions in the status say it best (older ones do not).
    typed = status.model_dump(mode="json", by_alias=True).get("conditions")
    if typed:
        return out + [
            {k: str(c.get(k, "")) for k in ("type", "status", "reason", "message")} for c in typed
        ]
    if status.stack and any(p.served is not None for p in status.stack):
        missing = [p for p in status.stack if p.served is False]
        out.append(
            {
                "type": "ServingStack",
                "status": "False" if missing else "True",
                "reason": "ComponentsMissing" if missing else "Served",
                "message": "; ".join(_missing(p) for p in missing)
                or "every pinned component is served",
            }
        )
    source = record.spec.spec.cluster.source.value
    if source != "Existing" and status.steps:
        failed = [s for s in status.steps if s.error]
        if status.phase == "Failed" and failed:
            first = failed[0]
            out.append(
                {
                    "type": "Provisioned",
                    "status": "False",
                    "reason": "ProvisioningFailed",
                    "message": f"{first.name}: {first.error}",
                }
            )
        elif status.phase == "Provisioning":
            out.append(
                {
                    "type": "Provisioned",
                    "status": "False",
                    "reason": "Provisioning",
                    "message": status.step or status.reason,
                }
            )
        else:
            out.append(
                {
                    "type": "Provisioned",
                    "status": "True",
                    "reason": "Created",
                    "message": f"{source} cluster and its pools were created",
                }
            )
    return out


def _missing(piece: StackPiece) -> str:
    what = f"{piece.name} {piece.version} ({piece.api_version})"
    return f"{what}: {piece.problem}" if piece.problem else what


async def replicas_on(client: Client, name: str) -> list[ModelReplica]:
    """The replicas the Fleet has placed on cluster ``name``."""
    return await placed_replicas(client, cluster=name)


async def guard_delete(client: Client, name: str, *, force: bool) -> list[ModelReplica]:
    """Refuse to delete a cluster replicas run on unless ``force``; with ``force``, the
    replicas the drain will move (deployments re-place them elsewhere before teardown)."""
    on = await replicas_on(client, name)
    refused = still_runs(name, on)
    if refused and not force:
        raise CliError(
            f"{refused}, or pass --force to drain the cluster "
            "(its replicas are re-placed on other clusters, then it is torn down)"
        )
    return on


# How often a waiting ``delete`` reads the cluster's progress (a person watches it).
DELETE_POLL_SECONDS = 1.0


async def delete_cluster(client: Client, name: str, *, force: bool, wait: bool) -> None:
    """Delete cluster ``name`` (refused while replicas run on it, unless ``force``: then the
    workflow drains it first). With ``wait``, follow the drain and the teardown until the
    workflow has ended, printing each new stage; a teardown that left cloud resources behind
    is an error naming them."""
    moving = await guard_delete(client, name, force=force)
    if moving:
        names = ", ".join(f"{r.namespace}/{r.name}" for r in moving)
        console.print(f"draining {name}: {len(moving)} replica(s) will be re-placed: {names}")
    handle = client.get_workflow_handle(cluster_id(name), result_type=ClusterStatus)
    await handle.execute_update(ClusterWorkflow.delete)
    if not wait:
        return
    last = ""
    while (await handle.describe()).status is WorkflowExecutionStatus.RUNNING:
        status = await _status_or_none(client, name)  # not answering now: asked again
        if isinstance(status, ClusterStatus) and status.reason != last:
            last = status.reason
            console.print(f"  {name}: {last}", soft_wrap=True, markup=False)
        await asyncio.sleep(DELETE_POLL_SECONDS)
    final: ClusterStatus = await handle.result()
    if final.reason != "deleted":
        raise CliError(f"inferencecluster.modelfleet.dev/{name}: {final.reason}")

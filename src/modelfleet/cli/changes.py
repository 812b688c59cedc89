"""What an ``apply`` would change against the live fleet: created / configured / unchanged per
document, a unified diff of the spec, which replicas a template change would roll, and the
placement the scheduler would make (the Fleet's own function on a snapshot of the live fleet).
Used by ``apply`` (verdicts), ``apply --dry-run`` and ``diff``; reads only, changes nothing.
"""

from __future__ import annotations

import asyncio
import difflib
from dataclasses import dataclass, field
from typing import Any

import yaml
from temporalio.client import Client

from modelfleet.api.autoscalers import ModelAutoscaler
from modelfleet.api.caches import ModelCache
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.kinds import parse_resource
from modelfleet.api.meta import Resource
from modelfleet.api.services import InferenceGateway, ModelEndpoint, ModelService
from modelfleet.api.support import held_without_action
from modelfleet.cli.accepted_reads import accepted_statuses
from modelfleet.cli.errors import NotFoundError
from modelfleet.cli.manifests import PUBLISHED_BY
from modelfleet.cli.resources import (
    deployment_spec,
    deployment_status,
    directory_gateway,
    fetch,
    fleet_state,
    is_running,
)
from modelfleet.cluster.failure import PROVISIONING_FAILED
from modelfleet.contracts.ids import deployment_id
from modelfleet.contracts.status import FleetView
from modelfleet.deployment.state import template_hash
from modelfleet.scheduling.fleet_placement import live_snapshot
from modelfleet.scheduling.placement import Placement, place

CREATED, CONFIGURED, UNCHANGED = "created", "configured", "unchanged"
# A cluster whose provisioning failed is provisioned again by applying it, even unchanged.
RETRIED = "retried"


@dataclass
class LiveFleet:
    """The live state an apply is compared with, read once."""

    view: FleetView
    classes: dict[str, InferenceClass]
    deployments: dict[tuple[str, str], ModelDeployment] = field(default_factory=dict)
    rolling: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    # The serving kinds and autoscalers named in the apply, as the fleet holds them.
    others: dict[tuple[str, str, str], Resource] = field(default_factory=dict)
    # Endpoints a replica published (read-only): namespace/name -> replica.
    published: dict[tuple[str, str], str] = field(default_factory=dict)
    # Documents held without action (the AcceptedResource workflow), named in the apply.
    accepted: dict[tuple[str, str, str], Resource] = field(default_factory=dict)


# Deployments read at once: a directory of thousands is read in parallel, never all at once.
READ_AT_ONCE = 16


async def read_live(
    client: Client, resources: list[Resource], *, rolling: bool = True
) -> LiveFleet:
    """The live state of what ``resources`` name. ``rolling``: also which replicas each
    deployment runs (``apply --dry-run`` and ``diff`` say which would roll; ``apply`` only
    needs the specs)."""
    try:
        view, classes = await fleet_state(client)
    except NotFoundError:  # nothing was ever applied: the Fleet workflow does not exist yet
        view, classes = FleetView(classes=[], clusters=[], replicas=[]), {}
    live = LiveFleet(view, classes)
    gate = asyncio.Semaphore(READ_AT_ONCE)

    async def read(r: ModelDeployment) -> None:
        async with gate:
            if not await is_running(client, deployment_id(r.namespace, r.name)):
                return
            key = (r.namespace, r.name)
            live.deployments[key] = await deployment_spec(client, r.namespace, r.name)
            if rolling:
                status = await deployment_status(client, r.namespace, r.name)
                live.rolling[key] = [s.name for s in status.replicas]

    await asyncio.gather(*(read(r) for r in resources if isinstance(r, ModelDeployment)))
    await _read_others(client, live, resources)
    return live


async def _read_others(client: Client, live: LiveFleet, resources: list[Resource]) -> None:
    kinds = {r.KIND for r in resources}
    if "ModelEndpoint" in kinds:
        for f in await fetch(client, "ModelEndpoint", None):
            if f.status.get("replica"):
                live.published[(f.namespace, f.name)] = str(f.status["replica"])
            else:
                live.others[("ModelEndpoint", f.namespace, f.name)] = _spec_of(
                    f.manifest, ModelEndpoint
                )
    if "InferenceGateway" in kinds:
        gateway = await directory_gateway(client)
        if gateway is not None:
            live.others[("InferenceGateway", "", gateway.name)] = gateway
    for r in resources:
        if held_without_action(r):
            for held in await accepted_statuses(client, r.KIND, r.namespace, [r.name]):
                live.accepted[(r.KIND, r.namespace, r.name)] = parse_resource(held.document)
        elif isinstance(r, ModelService | ModelAutoscaler | ModelCache):
            for f in await fetch(client, r.KIND, r.namespace, [r.name]):
                live.others[(r.KIND, r.namespace, r.name)] = _spec_of(f.manifest, type(r))


def _spec_of(manifest: dict[str, Any], cls: type[Resource]) -> Resource:
    """The applied manifest back from what ``get`` prints (server fields dropped)."""
    doc = {k: v for k, v in manifest.items() if k != "status"}
    metadata = dict(doc.get("metadata") or {})
    for server_field in ("creationTimestamp", "generation"):
        metadata.pop(server_field, None)
    doc["metadata"] = metadata
    return cls.model_validate(doc)


def current(live: LiveFleet, resource: Resource) -> Resource | None:
    """What the fleet holds now under the resource's name, if anything."""
    if held_without_action(resource):
        return live.accepted.get((resource.KIND, resource.namespace, resource.name))
    if isinstance(resource, InferenceClass):
        return live.classes.get(resource.name)
    if isinstance(resource, InferenceCluster):
        for record in live.view.clusters:
            if record.spec.name == resource.name:
                return record.spec
        return None
    if isinstance(resource, ModelDeployment):
        return live.deployments.get((resource.namespace, resource.name))
    if isinstance(resource, InferenceGateway):
        return live.others.get((resource.KIND, "", resource.name))
    return live.others.get((resource.KIND, resource.namespace, resource.name))


def verdict(live: LiveFleet, resource: Resource) -> str:
    before = current(live, resource)
    if before is None:
        return CREATED
    if _comparable(before) != _comparable(resource):
        return CONFIGURED
    return RETRIED if _failed_cluster(live, resource) else UNCHANGED


def _failed_cluster(live: LiveFleet, resource: Resource) -> bool:
    if not isinstance(resource, InferenceCluster):
        return False
    return any(
        r.spec.name == resource.name and r.reason.startswith(PROVISIONING_FAILED)
        for r in live.view.clusters
    )


def _comparable(resource: Resource) -> dict[str, Any]:
    wire = resource.to_wire()
    if isinstance(resource, ModelEndpoint):
        # The endpoint directory keeps labels and spec, not annotations: compare what it keeps.
        wire["metadata"].pop("annotations", None)
    return wire


def read_only(live: LiveFleet, resource: Resource) -> str | None:
    """Why ``apply`` must leave this document alone, if it must."""
    if resource.KIND == "ModelReplica":
        return "replicas are made by their deployment (read-only)"
    if isinstance(resource, ModelEndpoint):
        replica = live.published.get((resource.namespace, resource.name))
        marked = resource.metadata.annotations.get(PUBLISHED_BY)
        if replica or marked:
            return f"published by {marked or 'modelreplica/' + str(replica)} (read-only)"
    return None


def unified_diff(live: LiveFleet, resource: Resource) -> list[str]:
    """``diff -u`` of the live manifest and the applied one (empty when equal)."""
    before = current(live, resource)
    old = _dump(before.to_wire()) if before is not None else []
    new = _dump(resource.to_wire())
    label = f"{resource.KIND.lower()}/{resource.name}"
    return list(difflib.unified_diff(old, new, fromfile=f"live/{label}", tofile=f"applied/{label}"))


def _dump(wire: dict[str, Any]) -> list[str]:
    return yaml.safe_dump(wire, sort_keys=False).splitlines(keepends=True)


def consequences(
    live: LiveFleet, resource: Resource, placement: Placement | None = None
) -> list[str]:
    """What the workflow holding the resource would do about the change, in words; with the
    dry run's ``placement`` of a new deployment, how many of its replicas could start now."""
    if isinstance(resource, ModelAutoscaler):
        return _autoscaler_consequences(live, resource)
    if not isinstance(resource, ModelDeployment):
        return []
    key = (resource.namespace, resource.name)
    before = live.deployments.get(key)
    if before is None:
        wanted = resource.spec.replicas
        if placement is None or placement.scheduled >= wanted:
            return [f"would start {wanted} replica(s)"]
        return [
            f"would start {placement.scheduled} of {wanted} replica(s) now; "
            f"{wanted - placement.scheduled} would wait Pending until a cluster fits (see below)"
        ]
    out = []
    if template_hash(before) != template_hash(resource):
        replicas = live.rolling.get(key, [])
        names = ", ".join(replicas) or "none running"
        out.append(
            f"template changed: would roll {len(replicas)} replica(s) one at a time "
            f"(surge {resource.spec.strategy.max_surge}): {names}"
        )
    if before.spec.replicas != resource.spec.replicas:
        out.append(f"would scale from {before.spec.replicas} to {resource.spec.replicas} replicas")
    if before.spec.strategy != resource.spec.strategy and not out:
        out.append("strategy changed: applies to the next rollout")
    return out


def _autoscaler_consequences(live: LiveFleet, resource: ModelAutoscaler) -> list[str]:
    spec = resource.spec
    target = spec.scale_target_ref.name
    out = [
        f"would keep ModelDeployment {resource.namespace}/{target} between "
        f"{spec.min_replicas} and {spec.max_replicas} replicas"
    ]
    before = current(live, resource)
    if isinstance(before, ModelAutoscaler) and before.spec.scale_target_ref.name != target:
        out.append(
            f"target changes from {before.spec.scale_target_ref.name}: its history starts afresh"
        )
    return out


def live_plan(live: LiveFleet, deployment: ModelDeployment, extra: list[Resource]) -> Placement:
    """Where the Fleet would place ``deployment`` now: its placement function on the live
    classes and clusters (plus classes in the same apply), with every live replica counted."""
    classes = dict(live.classes)
    classes.update({r.name: r for r in extra if isinstance(r, InferenceClass)})
    clusters = {c.spec.name: c.observed() for c in live.view.clusters}
    return place(deployment, live_snapshot(classes, clusters), live.view.replicas)

"""What ``modelfleet describe`` prints per kind: conditions, per-replica steps, placement
reasons and recent decisions of a deployment; probes of a cluster; devices of a class;
placement of a replica; services, endpoints, the gateway and autoscalers (printed by
cli/serving_inspect). The kind registry (cli/kinds) names one of these per kind."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import yaml
from rich.markup import escape
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.service import RPCError

from modelfleet.admission.state import SlotsView
from modelfleet.admission.workflow import RolloutSlotsWorkflow
from modelfleet.autoscaler.records import Decision as AutoscalerDecision
from modelfleet.autoscaler.workflow import AutoscalerWorkflow, autoscaler_id
from modelfleet.cli.cluster_view import describe_cluster, describe_published_cluster
from modelfleet.cli.columns import cache_summary
from modelfleet.cli.errors import CliError, NotFoundError
from modelfleet.cli.manifests import NOT_ACTED_UPON, Fetched, unanswered_reason
from modelfleet.cli.output import console, print_table
from modelfleet.cli.resources import autoscaler_status, deployment_status, query, service_status
from modelfleet.cli.rollout import REPLICA_HEADER, replica_rows
from modelfleet.cli.serving_inspect import (
    describe_autoscaler,
    describe_endpoint,
    describe_gateway,
    describe_service,
)
from modelfleet.cli.targets import Namespace
from modelfleet.contracts.cache_payloads import cache_id
from modelfleet.contracts.ids import ROLLOUT_SLOTS_ID, cluster_id, deployment_id, replica_id
from modelfleet.deployment.decisions import LogEntry
from modelfleet.deployment.workflow import DeploymentWorkflow
from modelfleet.worker.settings import TemporalSettings

RECENT_DECISIONS = 10


@dataclass(frozen=True)
class Described:
    """The one resource ``describe`` shows, as ``get`` read it, and where to ask for more."""

    client: Client
    s: TemporalSettings
    ns: Namespace
    name: str
    item: Fetched


async def deployment(d: Described) -> None:
    ns, name = d.ns, d.name
    try:
        status, decisions = await asyncio.gather(
            deployment_status(d.client, ns.name, name),
            query(
                d.client.get_workflow_handle(deployment_id(ns.name, name)),
                DeploymentWorkflow.decisions,
                what=f"ModelDeployment {ns.name}/{name}",
            ),
        )
    except NotFoundError:
        raise
    except (CliError, RPCError, WorkflowQueryFailedError) as exc:
        # Its workflow is busy or failing: what its own record holds, and why no more.
        for line in published_deployment(d.item, d.s.workflow_url(deployment_id(ns.name, name))):
            console.print(line, soft_wrap=True, markup=False)
        raise CliError(
            f"modeldeployment.modelfleet.dev/{name} in namespace {ns.name} did not answer: "
            f"{unanswered_reason(exc)}; shown above is what it last published (no "
            "conditions, replicas or decisions)"
        ) from None
    _deployment(d.s, ns, name, status, decisions[-RECENT_DECISIONS:])
    if status.phase == "Waiting":
        await _slot_line(d.client, deployment_id(ns.name, name))


async def _slot_line(client: Client, workflow_id: str) -> None:
    """Where a waiting deployment stands in the rollout queue now (its condition says where it
    stood when it queued)."""
    try:
        view: SlotsView = await query(
            client.get_workflow_handle(ROLLOUT_SLOTS_ID),
            RolloutSlotsWorkflow.view,
            what="the RolloutSlots workflow",
        )
    except (CliError, RPCError):
        return  # the condition above still says it waits
    if workflow_id in view.queue:
        ahead = view.queue.index(workflow_id)
        console.print(
            f"\n[bold]Waiting[/]: {ahead} rollout{'' if ahead == 1 else 's'} ahead "
            f"({len(view.holders)} of {view.slots} rollout slots in use)"
        )


async def cluster(d: Described) -> None:
    url = d.s.workflow_url(cluster_id(d.name))
    if d.item.source_error:  # the Fleet did not answer: what visibility holds, and why
        describe_published_cluster(d.item, url)
        raise CliError(d.item.source_error)
    describe_cluster(d.item, url, datetime.now(UTC))


async def inference_class(d: Described) -> None:
    _class(d.item)


async def service(d: Described) -> None:
    describe_service(d.s, await service_status(d.client, d.ns.name, d.name))


async def autoscaler(d: Described) -> None:
    handle = d.client.get_workflow_handle(autoscaler_id(d.ns.name, d.name))
    what = f"ModelAutoscaler {d.ns.name}/{d.name}"
    recent: list[AutoscalerDecision] = await query(
        handle, AutoscalerWorkflow.decisions, 10, what=what
    )
    scaler = await autoscaler_status(d.client, d.ns.name, d.name)
    describe_autoscaler(d.s, d.item, scaler, recent)


async def endpoint(d: Described) -> None:
    describe_endpoint(d.item)


async def gateway(d: Described) -> None:
    describe_gateway(d.item)


async def cache(d: Described) -> None:
    _cache(d.s, d.item)


async def replica(d: Described) -> None:
    _replica(d.s, d.item)


async def accepted(d: Described) -> None:
    describe_accepted(d.item)


def published_deployment(item: Fetched, workflow_url: str) -> list[str]:
    """A deployment's describe page from what it publishes (visibility, its own record):
    phase, counts, clusters and creation time; ``?`` for what it never published."""
    status = item.status
    clusters = status.get("clusters")
    created = item.manifest.get("metadata", {}).get("creationTimestamp")
    return [
        f"ModelDeployment {item.namespace}/{item.name}  phase {status.get('phase') or 'Unknown'}, "
        f"{status.get('ready', '?')}/{status.get('desired', '?')} ready, "
        f"{status.get('updated', '?')} up to date (as last published)",
        f"Workflow: {workflow_url}",
        f"Clusters: {', '.join(clusters) if clusters else ('-' if clusters == [] else '?')}",
        f"Created: {created or '?'}",
    ]


def _deployment(
    s: TemporalSettings, ns: Namespace, name: str, status: Any, decisions: list[LogEntry]
) -> None:
    console.print(
        f"[bold]ModelDeployment {ns.name}/{name}[/]  phase {status.phase}, "
        f"{status.ready}/{status.desired} ready, generation {status.generation}"
        + (", rollout paused" if status.paused else "")
    )
    console.print(f"Workflow: {s.workflow_url(deployment_id(ns.name, name))}")
    console.print("\n[bold]Conditions[/]")
    for c in status.conditions:
        console.print(f"  {c.type}={c.status} ({c.reason}) {escape(c.message)}")
    console.print("\n[bold]Replicas[/]")
    if status.replicas:
        print_table(REPLICA_HEADER, replica_rows(status), flexible=("REASON",))
    else:
        console.print("  none")
    borrowed = [r for r in status.replicas if r.borrowed]
    if borrowed:
        # strategy.borrow: Fleet surged these outside home; a later surge brings them back.
        console.print("\n[bold]Borrowed[/]  (returning home when room appears there)")
        for r in borrowed:
            console.print(f"  {r.name} on {r.cluster}: {escape(r.borrowed)}")
    if status.rejections or status.summary:
        console.print("\n[bold]Placement[/]  " + escape(status.summary))
        for cluster, reason in sorted(status.rejections.items()):
            console.print(f"  {cluster}: {escape(reason)}")
    console.print("\n[bold]Recent decisions[/]")
    # Only what changed something: placements, removals (with why), verdicts, pauses.
    for d in decisions:
        console.print(f"  {d.at:%H:%M:%S} {escape(d.message)}")
    if not decisions:
        console.print("  none")


def _class(item: Fetched) -> None:
    spec = item.manifest.get("spec") or {}
    provisioning = spec.get("provisioning") or {}
    console.print(
        f"[bold]InferenceClass {item.name}[/]  provider {provisioning.get('provider', 'BYO')}"
    )
    console.print("\n[bold]Devices[/]")
    for d in spec.get("devices", []):
        attributes = ", ".join(
            f"{k}={next(iter(v.values()), '')}" for k, v in (d.get("attributes") or {}).items()
        )
        console.print(
            f"  {d['name']} x{d.get('count', 1)} ({d.get('deviceClassName', '-')}, "
            f"claim {d.get('claim', '-')})" + (f": {escape(attributes)}" if attributes else "")
        )
    console.print(f"\nUsed by: {', '.join(item.status.get('usedBy', [])) or '-'}")


def describe_accepted(item: Fetched) -> None:
    """A document held without action: what it says and why nothing acts on it."""
    where = f"{item.namespace}/{item.name}" if item.namespace else item.name
    console.print(f"[bold]{item.kind} {where}[/]  {NOT_ACTED_UPON}")
    console.print(f"Reason: {escape(str(item.status.get('reason', '')))}")
    spec = yaml.safe_dump(item.manifest.get("spec") or {}, sort_keys=False).rstrip()
    console.print("\n[bold]Spec[/]\n" + escape(spec))


def _cache(s: TemporalSettings, item: Fetched) -> None:
    """A ModelCache: its source and, per cluster, how staging stands and why."""
    spec = item.manifest.get("spec") or {}
    hf = spec.get("huggingFace") or {}
    status = item.status
    console.print(
        f"[bold]ModelCache {item.namespace}/{item.name}[/]  {status.get('phase', '')}, "
        f"{status.get('ready', 0)}/{status.get('total', 0)} clusters Ready"
    )
    revision = hf.get("revision") or "main"
    console.print(f"Source: {hf.get('repo', '')} at {revision}, {hf.get('sizeGiB', '?')} GiB")
    console.print(f"Workflow: {s.workflow_url(cache_id(item.namespace, item.name))}")
    if status.get("reason"):
        console.print(f"Reason: {escape(str(status['reason']))}")
    rows = [
        [
            str(c.get("cluster", "")),
            cache_summary(c),
            str(c.get("attempts", 0)),
            escape(str(c.get("message", "")) or "-"),
        ]
        for c in status.get("clusters") or []
    ]
    console.print()
    print_table(["CLUSTER", "STATE", "FAILED-ATTEMPTS", "MESSAGE"], rows, flexible=("MESSAGE",))


def _replica(s: TemporalSettings, item: Fetched) -> None:
    spec = item.manifest.get("spec") or {}
    console.print(
        f"[bold]ModelReplica {item.namespace}/{item.name}[/]  phase "
        f"{item.status.get('phase', 'Unknown')}, deployment {spec.get('deployment')}, "
        f"cluster {spec.get('clusterName')}"
    )
    console.print(f"Workflow: {s.workflow_url(replica_id(item.namespace, item.name))}")
    rows = []
    for engine in spec.get("engines", []):
        for member in engine.get("members", []):
            devices = " + ".join(
                f"{r.get('count', 1)} {r['name']}" for r in member.get("deviceRequests") or []
            )
            rows.append(
                [
                    engine["name"],
                    str(member.get("role", "")),
                    str(member.get("nodePoolName", "")),
                    devices or "nothing",
                ]
            )
    console.print()
    print_table(["ENGINE", "ROLE", "POOL", "DEVICES/POD"], rows)

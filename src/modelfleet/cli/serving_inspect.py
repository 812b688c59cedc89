"""``describe`` of the serving kinds and of autoscalers: a ModelService (address, conditions, its
endpoints with weights and health, the route's backends), a ModelEndpoint, the InferenceGateway
and a ModelAutoscaler (target, bounds, the metric against its target, recent decisions). The
statuses are read by the caller (cli/resources.py); this module only prints.

Side effects: console output only, plus ``service_status`` (one query) for ``demo``.
"""

from __future__ import annotations

from rich.markup import escape
from temporalio.client import Client

from modelfleet.autoscaler.records import AutoscalerStatus, Decision
from modelfleet.autoscaler.workflow import autoscaler_id
from modelfleet.cli.autoscaler import HISTORY_HEADER, history_rows
from modelfleet.cli.columns import autoscaler_metrics
from modelfleet.cli.manifests import Fetched
from modelfleet.cli.output import console, print_table
from modelfleet.contracts.ids import service_id
from modelfleet.contracts.serving_payloads import ServiceStatus
from modelfleet.service.workflow import ServiceWorkflow
from modelfleet.worker.settings import TemporalSettings

ENDPOINT_HEADER = ["ENDPOINT", "ENTRY", "WEIGHT", "HEALTH", "URL", "REASON"]
DOOR_HEADER = ["CLUSTER", "STATE", "ADDRESS", "REASON"]
_DOOR_COLOURS = {"Serving": "[green]{}[/]", "Out": "[red]{}[/]", "Disabled": "[yellow]{}[/]"}


async def service_status(client: Client, namespace: str, name: str) -> ServiceStatus:
    status: ServiceStatus = await client.get_workflow_handle(service_id(namespace, name)).query(
        ServiceWorkflow.status
    )
    return status


def describe_service(s: TemporalSettings, status: ServiceStatus) -> None:
    ns, name = status.namespace, status.name
    console.print(f"[bold]ModelService {ns}/{name}[/]  phase {status.phase}")
    console.print(f"Workflow: {s.workflow_url(service_id(ns, name))}", soft_wrap=True)
    console.print(f"Address:  {status.address or '-'}", soft_wrap=True)
    console.print(f"Gateway:  {status.gateway_cluster or '-'}")
    console.print(f"API keys: {'required' if status.auth else 'not required'}")
    if status.containment:
        console.print(f"Failures: {escape(status.containment)}", soft_wrap=True)
    if status.front_doors:
        console.print("\n[bold]Front doors[/]")
        print_table(
            DOOR_HEADER,
            [
                [
                    d.cluster,
                    _DOOR_COLOURS.get(d.state, "{}").format(d.state),
                    d.address or "-",
                    escape(d.reason),
                ]
                for d in status.front_doors
            ],
            flexible=("REASON",),
        )
    console.print("\n[bold]Conditions[/]")
    for c in status.conditions:
        console.print(f"  {c.type}={c.status} ({c.reason}) {escape(c.message)}")
    console.print("\n[bold]Endpoints[/]")
    rows = [
        [
            e.name,
            str(e.entry),
            str(e.weight),
            "[green]healthy[/]" if e.healthy else "[red]unhealthy[/]",
            e.url,
            escape(e.reason),
        ]
        for e in status.endpoints
    ]
    if rows:
        print_table(ENDPOINT_HEADER, rows, flexible=("REASON",))
    else:
        console.print("  none selected")
    console.print("\n[bold]Route backends[/]")
    for backend, weight in sorted(status.backends.items()):
        console.print(f"  {backend}  weight {weight}")
    if not status.backends:
        console.print("  (none: nothing in rotation)")


def describe_endpoint(item: Fetched) -> None:
    spec = item.manifest.get("spec") or {}
    status = item.status
    replica = status.get("replica")
    source = f"published by modelreplica/{replica}" if replica else "external"
    console.print(f"[bold]ModelEndpoint {item.namespace}/{item.name}[/]  {source}")
    console.print(f"URL:          {spec.get('url', '')}", soft_wrap=True)
    console.print(f"Rewrite path: {spec.get('rewritePath', '/')}")
    secret = (spec.get("authSecretRef") or {}).get("name")
    console.print(f"Provider key: {'secret ' + secret if secret else 'none'}")
    labels = ", ".join(f"{k}={v}" for k, v in sorted(item.labels.items()))
    console.print(f"Labels:       {labels or '-'}", soft_wrap=True)


def describe_gateway(item: Fetched) -> None:
    spec = item.manifest.get("spec") or {}
    more = spec.get("additionalClusters") or []
    console.print(
        f"[bold]InferenceGateway {item.name}[/]  on cluster {spec.get('cluster', '')}"
        + (f" (and {', '.join(more)})" if more else "")
    )
    console.print(f"Gateway:   {spec.get('gatewayNamespace', '')}/{spec.get('gatewayName', '')}")
    listeners = ", ".join(
        f"{li.get('name')} {li.get('protocol')}:{li.get('port')}"
        for li in spec.get("listeners", [])
    )
    console.print(f"Listeners: {listeners or '-'}")
    addresses = ", ".join(spec.get("addresses", []))
    console.print(f"Addresses: {addresses or 'as the cluster Gateway reports'}", soft_wrap=True)
    front = spec.get("globalAddress")
    if front:
        check = front.get("healthCheck") or {}
        console.print(
            f"Global:    {front.get('provider', 'cloudflare')} load balancer per service,"
            f" <service>.<namespace>.{front.get('zone', '')}, steering"
            f" {front.get('steering', 'random')}, checks every {check.get('intervalSeconds', 5)} s",
            soft_wrap=True,
        )


def describe_autoscaler(
    s: TemporalSettings, item: Fetched, status: AutoscalerStatus, decisions: list[Decision]
) -> None:
    ns, name = status.namespace, status.name
    console.print(
        f"[bold]ModelAutoscaler {ns}/{name}[/] -> ModelDeployment {status.target}  "
        f"replicas {status.current if status.current is not None else '?'} "
        f"(min {status.min_replicas}, max {status.max_replicas}), generation {status.generation}"
    )
    console.print(f"Workflow: {s.workflow_url(autoscaler_id(ns, name))}", soft_wrap=True)
    last = item.status.get("lastDecision") or {}
    spec = item.manifest.get("spec") or {}
    console.print(f"Metrics:  {autoscaler_metrics(spec, last)}  (current/target per replica)")
    if status.problem:
        console.print(f"[red]Problem[/]:  {escape(status.problem)}")
    if status.deleting:
        console.print("[yellow]Being deleted[/]")
    console.print("\n[bold]Recent decisions[/]")
    if decisions:
        print_table(HISTORY_HEADER, history_rows(decisions), flexible=("REASON",))
    else:
        console.print("  none yet")

"""``get services|endpoints|gateways`` and ``describe service``: services from their workflows'
``status`` queries (found through search attributes), endpoints and the gateway from the
endpoint directory's queries.

Side effects: Temporal client calls and console output only.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from modelfleet.api.services import InferenceGateway
from modelfleet.cli.output import console
from modelfleet.contracts.serving_payloads import ENDPOINTS_ID, ServiceStatus
from modelfleet.rendering.front_door import EndpointRecord
from modelfleet.worker.settings import TemporalSettings
from modelfleet.workflows.ids import service_id
from modelfleet.workflows.service import ServiceWorkflow

Listing = tuple[list[str], list[list[str]], Any]


async def service_status(client: Client, namespace: str, name: str) -> ServiceStatus:
    status: ServiceStatus = await client.get_workflow_handle(service_id(namespace, name)).query(
        ServiceWorkflow.status
    )
    return status


async def _directory(client: Client, query: str, arg: Any, result_type: type) -> Any:
    try:
        return await client.get_workflow_handle(ENDPOINTS_ID).query(
            query, arg, result_type=result_type
        )
    except RPCError as exc:
        if exc.status is RPCStatusCode.NOT_FOUND:
            return None  # nothing published yet
        raise


async def list_endpoints(client: Client, namespace: str) -> list[EndpointRecord]:
    found = await _directory(client, "list_endpoints", namespace, list[EndpointRecord])
    return list(found or [])


async def get_serving(client: Client, kind: str, namespace: str, ids: list[str]) -> Listing:
    """``ids``: the running ModelService workflow IDs (for ``get services``)."""
    if kind == "ModelService":
        statuses = []
        for wid in ids:
            _, ns, name = wid.split("/", 2)
            statuses.append(await service_status(client, ns, name))
        rows = [
            [
                s.namespace,
                s.name,
                s.phase,
                s.address or "-",
                f"{sum(1 for e in s.endpoints if e.weight)}/{len(s.endpoints)}",
            ]
            for s in statuses
        ]
        header = ["NAMESPACE", "NAME", "PHASE", "ADDRESS", "IN ROTATION"]
        return header, rows, [s.model_dump(mode="json", by_alias=True) for s in statuses]
    if kind == "ModelEndpoint":
        records = await list_endpoints(client, namespace)
        rows = [
            [e.namespace, e.name, e.url, "replica" if e.replica else "external"] for e in records
        ]
        header = ["NAMESPACE", "NAME", "URL", "SOURCE"]
        return header, rows, [e.model_dump(mode="json", by_alias=True) for e in records]
    if kind == "InferenceGateway":
        gateway = await _directory(client, "gateway", None, InferenceGateway)
        gateways = [gateway] if isinstance(gateway, InferenceGateway) else []
        rows = [[g.name, g.spec.cluster, ", ".join(g.spec.addresses) or "-"] for g in gateways]
        return ["NAME", "CLUSTER", "ADDRESSES"], rows, [g.to_wire() for g in gateways]
    raise ValueError(f"get {kind} is not supported yet")


async def describe_service(
    client: Client, s: TemporalSettings, namespace: str, name: str
) -> ServiceStatus:
    status = await service_status(client, namespace, name)
    console.print(f"[bold]ModelService {namespace}/{name}[/]  phase {status.phase}")
    console.print(f"Workflow: {s.workflow_url(service_id(namespace, name))}")
    console.print(f"Address:  {status.address or '-'}")
    console.print(f"Gateway:  {status.gateway_cluster or '-'}")
    console.print(f"API keys: {'required' if status.auth else 'not required'}")
    console.print("\n[bold]Conditions[/]")
    for c in status.conditions:
        console.print(f"  {c.type}={c.status} ({c.reason}) {c.message}")
    console.print("\n[bold]Endpoints[/]")
    table = Table(box=None, header_style="bold")
    for h in ("ENDPOINT", "ENTRY", "WEIGHT", "HEALTH", "URL", "REASON"):
        table.add_column(h)
    for e in status.endpoints:
        health = "[green]healthy[/]" if e.healthy else "[red]unhealthy[/]"
        table.add_row(e.name, str(e.entry), str(e.weight), health, e.url, e.reason)
    console.print(table)
    console.print("\n[bold]Route backends[/]")
    for backend, weight in sorted(status.backends.items()):
        console.print(f"  {backend}  weight {weight}")
    if not status.backends:
        console.print("  (none: nothing in rotation)")
    return status

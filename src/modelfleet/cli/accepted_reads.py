"""Reads of the kinds modelfleet accepts but does not act upon (Modelplane's ServingStack and
per-cloud cluster kinds): what each AcceptedResource workflow holds and why, as rows for
``get`` and ``describe``.

May touch: the Temporal client (visibility and workflow queries, through ``cli.resources``).
"""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.client import Client, WorkflowExecution

from modelfleet.accepted.workflow import AcceptedResourceWorkflow
from modelfleet.cli import resources
from modelfleet.cli.manifests import Fetched, accepted_resource
from modelfleet.cli.resources import is_running, query, running
from modelfleet.cli.targets import is_namespaced
from modelfleet.contracts.accepted import AcceptedStatus
from modelfleet.contracts.ids import accepted_id


async def accepted_statuses(
    client: Client, kind: str, namespace: str | None, names: Sequence[str] = ()
) -> list[AcceptedStatus]:
    """What the AcceptedResource workflows of ``kind`` hold (in ``namespace``, or all when
    None), each with why it is not acted upon; named ones are asked of the workflow."""
    return [status for status, _ in await _accepted_runs(client, kind, namespace, set(names))]


async def _accepted_runs(
    client: Client, kind: str, namespace: str | None, wanted: set[str]
) -> list[tuple[AcceptedStatus, WorkflowExecution]]:
    if wanted and (namespace or not is_namespaced(kind)):
        found = [
            await is_running(client, accepted_id(kind, namespace or "", n)) for n in sorted(wanted)
        ]
        runs = [w for w in found if w is not None]
    else:
        runs = [
            w
            for w in await running(client, kind, namespace)
            if w.id.startswith("accepted/") and (not wanted or w.id.split("/", 3)[3] in wanted)
        ]
    out = []
    for w in runs:
        status: AcceptedStatus = await query(
            client.get_workflow_handle(w.id),
            AcceptedResourceWorkflow.status,
            what=f"{kind} {w.id.split('/', 2)[2]}",
        )
        out.append((status, w))
    return out


async def fetch_accepted(
    client: Client, kind: str, namespace: str | None, wanted: set[str]
) -> list[Fetched]:
    runs = await _accepted_runs(client, kind, namespace, wanted)
    return [accepted_resource(status, status.created or w.start_time) for status, w in runs]


async def fetch_gateways(client: Client, namespace: str | None, wanted: set[str]) -> list[Fetched]:
    """The fleet's InferenceGateway and, kept beside that front door but not acted upon,
    Modelplane's Traefik InferenceGateway."""
    own = await resources.fetch_gateways(client, namespace, wanted)
    return own + await fetch_accepted(client, "InferenceGateway", None, wanted)


__all__ = ["accepted_statuses", "fetch_accepted", "fetch_gateways"]

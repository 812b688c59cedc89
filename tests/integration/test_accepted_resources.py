"""Documents accepted for Modelplane parity but not acted upon (ServingStack, the per-cloud
cluster kinds) are applied, listed by ``get`` with the reason, updated and deleted like
any other resource: never silently dropped (issue 14 item 4)."""

from __future__ import annotations

from pathlib import Path

from integration_support import Stack, wait_for

from modelfleet.accepted.workflow import AcceptedResourceWorkflow
from modelfleet.api.kinds import parse_resource
from modelfleet.api.loading import load_paths
from modelfleet.api.meta import Resource
from modelfleet.cli.accepted_reads import accepted_statuses
from modelfleet.cli.apply import apply_all, apply_resource
from modelfleet.contracts.accepted import AcceptedStatus

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "modelplane" / "valid"


def _docs(name: str) -> list[Resource]:
    result = load_paths([str(CORPUS / name)])
    assert result.errors == []
    return result.resources


async def _listed(stack: Stack, kind: str, namespace: str, count: int) -> list[AcceptedStatus]:
    async def probe() -> list[AcceptedStatus] | None:
        found = await accepted_statuses(stack.client, kind, namespace)
        return found if len(found) == count else None

    return await wait_for(probe, 30, f"{count} {kind} in {namespace} to be listed")


async def test_unacted_kinds_are_applied_listed_updated_and_deleted(stack: Stack) -> None:
    infrastructure = _docs("infrastructure.yaml")
    failures = await apply_all(stack.client, stack.env.settings, infrastructure)
    assert failures == 0

    stacks = await _listed(stack, "ServingStack", "modelplane-system", 2)
    assert {s.name for s in stacks} == {"gke-us-central-serving-stack", "byo-serving-stack"}
    assert all(s.reason.startswith("NotActedUpon: ") for s in stacks)
    (gke,) = await _listed(stack, "GKECluster", "modelplane-system", 1)
    assert "InferenceCluster.spec.cluster" in gke.reason
    # Re-applying a changed document replaces what is held.
    byo = next(r for r in infrastructure if r.name == "byo-serving-stack")
    changed = byo.to_wire()
    changed["spec"]["nvidiaDriverRoot"] = "/opt/nvidia"
    wid = await apply_resource(stack.client, parse_resource(changed))
    handle = stack.client.get_workflow_handle_for(AcceptedResourceWorkflow.run, wid)
    held: AcceptedStatus = await handle.query(AcceptedResourceWorkflow.status)
    assert held.document["spec"]["nvidiaDriverRoot"] == "/opt/nvidia"

    final = await handle.execute_update(AcceptedResourceWorkflow.delete)
    assert final.deleting
    result = await handle.result()
    assert result.name == "byo-serving-stack"
    (left,) = await _listed(stack, "ServingStack", "modelplane-system", 1)
    assert left.name == "gke-us-central-serving-stack"


async def test_a_modelplane_traefik_gateway_is_kept_beside_the_serving_front_door(
    stack: Stack,
) -> None:
    (traefik,) = _docs("gateway.yaml")
    wid = await apply_resource(stack.client, traefik)
    assert wid == "accepted/InferenceGateway/-/default"
    handle = stack.client.get_workflow_handle_for(AcceptedResourceWorkflow.run, wid)
    held = await handle.query(AcceptedResourceWorkflow.status)
    assert held.reason.startswith("NotActedUpon: ")
    assert held.document["spec"]["traefik"]["metallb"]["addressPool"].startswith("172.18.")
    await handle.execute_update(AcceptedResourceWorkflow.delete)
    assert (await handle.result()).deleting

"""A ModelAutoscaler on the real dev server and worker, against a real ModelDeployment on the
simulated quickstart fleet: ``apply`` starts it, it reads the deployment through its workflow and
its engines' metrics through the simulated API server's proxy, scales it through the ``scale``
Update, and notices a manual scale. (Scaling on load end to end: test_autoscaling_e2e.py.)"""

from __future__ import annotations

from integration_support import Stack, delete_deployment, deployment, wait_for

from modelfleet.api.autoscalers import ModelAutoscaler
from modelfleet.api.kinds import parse_resource
from modelfleet.autoscaler.records import AutoscalerStatus, Decision
from modelfleet.autoscaler.workflow import AutoscalerWorkflow, autoscaler_id
from modelfleet.cli.apply import apply_resource
from modelfleet.contracts.ids import deployment_id
from modelfleet.contracts.status import ReplicaPhase
from modelfleet.deployment.workflow import DeploymentWorkflow, ScaleRequest

NS = "autoscale-a"


def autoscaler(min_replicas: int, max_replicas: int) -> ModelAutoscaler:
    resource = parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelAutoscaler",
            "metadata": {"name": "qwen", "namespace": NS},
            "spec": {
                "scaleTargetRef": {"name": "qwen"},
                "minReplicas": min_replicas,
                "maxReplicas": max_replicas,
                "intervalSeconds": 5,
                "metrics": [
                    {
                        "type": "Engine",
                        "engine": {
                            "name": "vllm:num_requests_waiting",
                            "target": {"averageValue": 4},
                        },
                    }
                ],
            },
        }
    )
    assert isinstance(resource, ModelAutoscaler)
    return resource


async def test_autoscaler_drives_a_real_deployment(stack: Stack) -> None:
    await apply_resource(stack.client, deployment("qwen", NS, replicas=1))
    await stack.wait_status(NS, "qwen", lambda s: s.ready == 1)

    wid = await apply_resource(stack.client, autoscaler(2, 3))
    assert wid == autoscaler_id(NS, "qwen")
    handle = stack.client.get_workflow_handle(wid)

    # Below minReplicas: the autoscaler scales the deployment up through its Update.
    status = await stack.wait_status(
        NS,
        "qwen",
        lambda s: (
            s.desired == 2
            and s.ready == 2
            and all(r.phase is ReplicaPhase.READY for r in s.replicas)
        ),
    )
    assert len({r.name for r in status.replicas}) == 2

    async def decisions() -> list[Decision]:
        result: list[Decision] = await handle.query(AutoscalerWorkflow.decisions, 50)
        return result

    log = await decisions()
    assert log[0].reason == "below minReplicas: 1 -> 2"
    assert log[0].outcome == "scaled to 2"

    # Then it reads both Ready replicas every interval and, without load to go on, holds.
    async def two_reads() -> list[Decision] | None:
        later = [d for d in await decisions() if d.current == 2 and d.ready == 2]
        return later if len(later) >= 2 else None

    later = await wait_for(two_reads, 30, "two decisions over two Ready replicas")
    assert all(d.applied == 2 for d in later)
    names = {r.name for r in status.replicas}
    for d in later:
        # Each Ready replica was read by name: it either reported load or says why not.
        assert set(d.errors) <= names
        assert d.metrics[0].value is not None or set(d.errors) == names

    # A manual scale while attached is noticed and reported as overridden.
    await stack.client.get_workflow_handle(deployment_id(NS, "qwen")).execute_update(
        DeploymentWorkflow.scale, ScaleRequest(replicas=3)
    )

    async def overridden() -> Decision | None:
        return next((d for d in await decisions() if d.outcome.startswith("overridden")), None)

    noticed = await wait_for(overridden, 30, "the manual scale to be noticed")
    assert "scaled to 3 outside the autoscaler (it had set 2)" in noticed.outcome
    assert noticed.current == 3

    final: AutoscalerStatus = await handle.execute_update(AutoscalerWorkflow.delete)
    assert final.deleting
    ended = AutoscalerStatus.model_validate(await handle.result())
    # The autoscaler wins after an override: with no load its window holds only lower asks, so
    # it may already have scaled back to 2. Deleting it leaves the deployment where it last was.
    assert ended.current in (2, 3)
    after = await stack.status(NS, "qwen")
    assert after.desired == ended.current
    await delete_deployment(stack, NS, "qwen")

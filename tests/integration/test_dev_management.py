"""``modelfleet dev``'s management cluster: the CRDs installed and the controller running, so
``kubectl apply -f examples/quickstart/`` rolls the quickstart out as ``modelfleet apply`` does
(Ready 2/2), and ``kubectl get`` shows the status the workflows report."""

from __future__ import annotations

import pytest
from integration_support import QUICKSTART, STACK_TUNING, wait_for
from management_support import Kubectl

from modelfleet.cli.devenv import dev_environment
from modelfleet.contracts.ids import deployment_id
from modelfleet.contracts.status import DeploymentStatus
from modelfleet.deployment.workflow import DeploymentWorkflow


async def test_kubectl_apply_of_the_quickstart_rolls_out(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    state_dir = tmp_path_factory.mktemp("dev-management")
    async with dev_environment(
        state_dir,
        [str(QUICKSTART)],  # as `modelfleet dev` loads it
        ui=False,
        startup_seconds=0.3,
        tuning=STACK_TUNING,
        management=True,
    ) as env:
        assert env.management_kubeconfig == state_dir / "sim" / "kubeconfigs" / "management.yaml"
        home = state_dir / "home"
        home.mkdir()
        kubectl = Kubectl(env.management_kubeconfig, home)
        _, out, _ = await kubectl.kubectl("apply", "-f", str(QUICKSTART))
        assert "modeldeployment.modelfleet.dev/qwen3-8b created" in out
        await kubectl.kubectl(
            "wait",
            "--for=condition=Ready",
            "-n",
            "ml-team",
            "modeldeployment/qwen3-8b",
            "--timeout=180s",
        )
        handle = env.client.get_workflow_handle(deployment_id("ml-team", "qwen3-8b"))

        async def ready() -> DeploymentStatus | None:
            status: DeploymentStatus = await handle.query(DeploymentWorkflow.status)
            return status if status.ready == 2 else None

        live = await wait_for(ready, 60, "qwen3-8b 2/2 Ready")
        obj = await kubectl.get_json("-n", "ml-team", "modeldeployment", "qwen3-8b")
        assert obj["status"]["readyReplicas"] == live.ready == 2
        _, out, _ = await kubectl.kubectl("get", "modeldeployments", "-A")
        assert "qwen3-8b" in out
        # The classes and clusters dev applied from the CLI are unchanged by the same manifests.
        listed = await kubectl.get_json("inferenceclusters")
        assert sorted(i["metadata"]["name"] for i in listed["items"]) == [
            "h100-east",
            "h200-west",
            "l4-dev",
        ]
        await kubectl.kubectl(
            "delete", "-n", "ml-team", "modeldeployment/qwen3-8b", "--timeout=120s"
        )

"""The cluster verbs as a user runs them (the ``modelfleet`` command in a subprocess, stdout a
pipe) against the real dev server, a worker and the simulated clouds: ``rollout status
cluster/NAME`` follows a GKE provisioning step by step to Ready, ``get clusters`` shows it, a
stockout injected with ``sim faults --cloud`` makes the next one fail and roll back (exit 1, the
reason printed), applying it again or ``rollout restart cluster/NAME`` provisions it again, and
``delete cluster`` removes them from the cloud; a cluster a replica runs on is only deleted with
``--force``, which drains it first."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
import yaml
from cloud_support import CLUSTERS, CloudStack, cloud_environment, renamed
from integration_support import deployment, wait_for
from test_cli_kubectl import run

from modelfleet.cli.apply import apply_resource
from modelfleet.cli.sim import write_state
from modelfleet.contracts.ids import deployment_id
from modelfleet.contracts.status import DeploymentStatus
from modelfleet.deployment.workflow import DeploymentWorkflow


@pytest_asyncio.fixture(scope="module")
async def cloud_stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CloudStack]:
    async with cloud_environment(tmp_path_factory.mktemp("cluster-cli")) as stack:
        yield stack


async def test_rollout_status_follows_a_gke_cluster_and_get_clusters_shows_it(
    cloud_stack: CloudStack,
) -> None:
    address = cloud_stack.client.service_client.config.target_host
    await apply_resource(cloud_stack.client, renamed(CLUSTERS["gke-central"], "gke-cli"))
    code, out, err = await run(address, "rollout", "status", "cluster/gke-cli", "--timeout", "90")
    assert code == 0, out + err
    assert "workflows/cluster%2Fgke-cli" in out
    done = [line.split("(")[0].split() for line in out.splitlines() if "done" in line]
    assert done == [
        ["done", "create", "cluster", "gke-cli"],
        ["done", "create", "node", "pool", "gpu-h100"],
        ["done", "write", "kubeconfig", "on", "the", "worker"],
        ["done", "verify", "the", "serving", "stack"],
    ]
    assert out.rstrip().endswith("cluster gke-cli is Ready: probe ok")

    code, out, err = await run(address, "get", "clusters", "gke-cli")
    assert code == 0, err
    header, row = (line.split() for line in out.splitlines())
    assert header == ["NAME", "SOURCE", "PHASE", "STEP", "POOLS", "FREE", "AGE"]
    assert row[:8] == ["gke-cli", "GKE", "Ready", "-", "gpu-h100", "1/1", "8/8", "gpu"]

    # A stockout on the next pool creation, injected as a user would into this fleet's clouds.
    state = cloud_stack.state_dir / "sim-state"
    write_state(cloud_stack.fleet, state / "sim.json", cloud_stack.clouds)
    code, out, err = await run(
        address, "sim", "faults", "--state-dir", str(state), "--cloud", "gke", "--fail", "stockout"
    )
    assert code == 0, err
    await apply_resource(cloud_stack.client, renamed(CLUSTERS["gke-central"], "gke-cli-out"))
    code, out, err = await run(address, "rollout", "status", "cluster/gke-cli-out")
    assert code == 1, out + err
    assert "failed  create node pool gpu-h100" in out
    assert "ZONE_RESOURCE_POOL_EXHAUSTED" in out
    assert "done    delete cluster gke-cli-out" in out
    assert "provisioning failed and was rolled back" in out
    assert "gke-cli-out" not in cloud_stack.clouds.gke.cluster_names()
    # A stockout is not a quota, and the reason names no exception class.
    assert "Stockout" in out
    assert "quota increase will not help" in out
    assert "QuotaExceeded" not in out
    assert "Error" not in out
    code, out, _ = await run(address, "get", "clusters", "gke-cli-out", "-o", "wide")
    assert "create node pool gpu-h100 (failed)" in out
    # Applying the same manifest again is the retry (not `unchanged`): a second stockout.
    code, out, err = await run(
        address, "sim", "faults", "--state-dir", str(state), "--cloud", "gke", "--fail", "stockout"
    )
    assert code == 0, err
    manifest = cloud_stack.state_dir / "gke-cli-out.yaml"
    manifest.write_text(yaml.safe_dump(renamed(CLUSTERS["gke-central"], "gke-cli-out").to_wire()))
    code, out, err = await run(address, "apply", "-f", str(manifest))
    assert code == 0, out + err
    assert "inferencecluster.modelfleet.dev/gke-cli-out retried" in out
    code, out, err = await run(address, "rollout", "status", "cluster/gke-cli-out")
    assert code == 1, out + err
    assert out.count("failed  create node pool gpu-h100") == 2
    # The stockout is over (the fault was for one creation): restarting provisions it again.
    code, out, err = await run(address, "rollout", "restart", "cluster/gke-cli-out")
    assert code == 0, out + err
    assert "inferencecluster.modelfleet.dev/gke-cli-out restarted" in out
    code, out, err = await run(
        address, "rollout", "status", "cluster/gke-cli-out", "--timeout", "90"
    )
    assert code == 0, out + err
    assert out.rstrip().endswith("cluster gke-cli-out is Ready: probe ok")
    # A cluster that has not failed is not restarted.
    code, out, err = await run(address, "rollout", "restart", "cluster/gke-cli-out")
    assert code == 1
    assert "is Ready, not Failed" in out + err

    code, out, err = await run(address, "delete", "cluster", "gke-cli", "gke-cli-out")
    assert code == 0, out + err
    assert "gke-cli" not in cloud_stack.clouds.gke.cluster_names()
    code, out, err = await run(address, "get", "clusters")
    assert "gke-cli" not in out


async def test_delete_cluster_refuses_while_replicas_run_and_force_drains_it(
    cloud_stack: CloudStack,
) -> None:
    address = cloud_stack.client.service_client.config.target_host
    await apply_resource(cloud_stack.client, renamed(CLUSTERS["gke-central"], "gke-busy"))
    code, out, err = await run(address, "rollout", "status", "cluster/gke-busy", "--timeout", "90")
    assert code == 0, out + err
    await apply_resource(cloud_stack.client, deployment("on-busy", "busy-team", memory="70Gi"))
    handle = cloud_stack.client.get_workflow_handle(deployment_id("busy-team", "on-busy"))

    async def placed() -> str | None:
        status: DeploymentStatus = await handle.query(DeploymentWorkflow.status)
        return status.replicas[0].name if status.ready == 1 else None

    replica = await wait_for(placed, 90, "busy-team/on-busy to be Ready on gke-busy")
    code, out, err = await run(address, "get", "clusters", "gke-busy")
    assert "7/8 gpu" in out

    code, out, err = await run(address, "delete", "cluster", "gke-busy")
    assert code == 1, out + err
    assert f"still runs 1 replica(s): busy-team/{replica}" in err
    assert "--force" in err
    assert "gke-busy" in cloud_stack.clouds.gke.cluster_names()

    # Nowhere else to go: the drain removes the replica, then the cluster is torn down.
    code, out, err = await run(address, "delete", "cluster", "gke-busy", "--force")
    assert code == 0, out + err
    assert f"draining gke-busy: 1 replica(s) will be re-placed: busy-team/{replica}" in out
    assert "inferencecluster.modelfleet.dev/gke-busy deleted" in out
    assert "gke-busy" not in cloud_stack.clouds.gke.cluster_names()
    after: DeploymentStatus = await handle.query(DeploymentWorkflow.status)
    assert all(r.cluster != "gke-busy" for r in after.replicas)
    await handle.execute_update(DeploymentWorkflow.delete)

"""modelfleet's kinds as a Kubernetes API: the real kubectl against a simulated management
cluster, the controller handing objects to the same workflows as ``modelfleet apply`` on the
shared stack. apply, get, wait for Ready, scale (kubectl and the official client's /scale
patch), delete through the finalizer (replicas torn down first), invalid objects reported
as a condition, a cluster with replicas on it not deleted.

Waits are kubectl's own ``wait`` or bounded condition waits, never sleeps.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from integration_support import Stack, deployment, wait_for
from management_support import Management, management_cluster
from temporalio.client import WorkflowExecutionStatus

from modelfleet.applying.deleting import replicas_on
from modelfleet.contracts.ids import deployment_id

NS = "ctl-team"
QUICKSTART_CLUSTERS = Path(__file__).resolve().parents[2] / "examples/quickstart/clusters.yaml"
QUICKSTART_CLASSES = QUICKSTART_CLUSTERS.with_name("classes.yaml")


@pytest_asyncio.fixture(scope="module")
async def mgmt(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Management]:
    async with management_cluster(stack, "mgmt-a", tmp_path_factory.mktemp("mgmt")) as found:
        found.start_controller()
        await found.kubectl("create", "namespace", NS)
        yield found


def manifest(name: str, replicas: int = 1) -> str:
    return yaml.safe_dump(deployment(name, NS, replicas=replicas).to_wire())


async def workflow_status(stack: Stack, name: str) -> WorkflowExecutionStatus | None:
    described = await stack.client.get_workflow_handle(deployment_id(NS, name)).describe()
    return described.status


async def test_kubectl_apply_wait_scale_and_delete_through_the_finalizer(
    mgmt: Management, stack: Stack
) -> None:
    await mgmt.kubectl("apply", "-f", "-", stdin=manifest("ctl-apply"))
    await mgmt.kubectl(
        "wait", "--for=condition=Ready", "-n", NS, "modeldeployment/ctl-apply", "--timeout=120s"
    )
    obj = await mgmt.get_json("-n", NS, "modeldeployment", "ctl-apply")
    assert obj["metadata"]["finalizers"] == ["modelfleet.dev/teardown"]
    status = obj["status"]
    assert status["observedGeneration"] == obj["metadata"]["generation"]
    assert (status["replicas"], status["readyReplicas"]) == (1, 1)
    live = await stack.status(NS, "ctl-apply")
    assert (live.desired, live.ready) == (1, 1)

    # kubectl scale writes /scale: the deployment's scale Update takes it.
    await mgmt.kubectl("scale", "-n", NS, "modeldeployment/ctl-apply", "--replicas", "2")
    await stack.wait_status(NS, "ctl-apply", lambda s: s.desired == 2 and s.ready == 2, 120)

    async def counted() -> bool | None:
        got = await mgmt.get_json("-n", NS, "modeldeployment", "ctl-apply")
        return True if got["status"].get("readyReplicas") == 2 else None

    await wait_for(counted, 30, "status.readyReplicas 2")
    # The scale subresource reads what the controller wrote (what an HPA or KEDA reads).
    _, raw, _ = await mgmt.kubectl(
        "get",
        "--raw",
        f"/apis/modelfleet.dev/v1alpha1/namespaces/{NS}/modeldeployments/ctl-apply/scale",
    )
    scale = json.loads(raw)
    assert scale["spec"]["replicas"] == 2
    assert scale["status"]["replicas"] == 2
    assert "modelfleet.dev/deployment=ctl-apply" in scale["status"]["selector"]

    # The official client's patch of /scale (what an HPA or KEDA sends).
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    api = k8s.CustomObjectsApi(k8s_config.new_client_from_config(str(mgmt.kubeconfig)))
    await asyncio.to_thread(
        api.patch_namespaced_custom_object_scale,
        "modelfleet.dev",
        "v1alpha1",
        NS,
        "modeldeployments",
        "ctl-apply",
        {"spec": {"replicas": 1}},
    )
    await stack.wait_status(NS, "ctl-apply", lambda s: s.desired == 1 and s.scheduled == 1, 120)

    assert await placed(stack, "ctl-apply") == 1
    # Deleted with kubectl: the object stays (finalizer) until the replicas are torn down.
    await mgmt.kubectl("delete", "-n", NS, "modeldeployment/ctl-apply", "--wait=false")
    await mgmt.kubectl(
        "wait", "--for=delete", "-n", NS, "modeldeployment/ctl-apply", "--timeout=120s"
    )
    assert await workflow_status(stack, "ctl-apply") is WorkflowExecutionStatus.COMPLETED
    assert await placed(stack, "ctl-apply") == 0


async def placed(stack: Stack, name: str) -> int:
    """How many replicas of deployment ``name`` the Fleet has placed (capacity held)."""
    view = await stack.fleet_view()
    count = 0
    for cluster in view.clusters:
        for r in await replicas_on(stack.client, cluster.spec.name):
            count += r.namespace == NS and r.spec.deployment == name
    return count


async def test_an_invalid_object_gets_a_condition_and_nothing_runs(mgmt: Management) -> None:
    # The classes the selector is judged against (the stack's own: handing them over again
    # changes nothing). They go with the management cluster at the end of the module, after its
    # controller has stopped: deleting them here would remove them from the shared Fleet.
    await mgmt.kubectl("apply", "-f", str(QUICKSTART_CLASSES))
    await mgmt.kubectl("wait", "--for=condition=Ready", "inferenceclass/l4", "--timeout=60s")
    doc = deployment("ctl-invalid", NS).to_wire()
    member = doc["spec"]["template"]["spec"]["engines"][0]["members"][0]
    # Admitted (CEL the schema cannot judge), but no declared class can evaluate it.
    member["nodeSelector"]["devices"][0]["selectors"][0]["cel"] = (
        'device.attributes["gpu.nvidia.com"].nosuch == 3'
    )
    await mgmt.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(doc))

    async def reported() -> dict[str, Any] | None:
        obj = await mgmt.get_json("-n", NS, "modeldeployment", "ctl-invalid")
        ready = [c for c in obj.get("status", {}).get("conditions", []) if c["type"] == "Ready"]
        return ready[0] if ready else None

    ready = await wait_for(reported, 30, "the Invalid condition")
    assert ready["status"] == "False"
    assert ready["reason"] == "Invalid"
    field = "spec.template.spec.engines[0].members[0].nodeSelector.devices[0].selectors[0].cel"
    assert ready["message"].startswith(f"{field}: ")
    assert "cannot evaluate on any declared InferenceClass" in ready["message"]
    with pytest.raises(Exception, match="not found"):
        await workflow_status(mgmt.stack, "ctl-invalid")  # type: ignore[arg-type]
    await mgmt.kubectl("delete", "-n", NS, "modeldeployment/ctl-invalid", "--timeout=60s")


async def test_a_cluster_with_replicas_on_it_is_not_deleted(mgmt: Management, stack: Stack) -> None:
    await mgmt.kubectl("apply", "-f", "-", stdin=manifest("ctl-pinned"))
    await mgmt.kubectl(
        "wait", "--for=condition=Ready", "-n", NS, "modeldeployment/ctl-pinned", "--timeout=120s"
    )
    live = await stack.status(NS, "ctl-pinned")
    cluster = live.replicas[0].cluster
    doc = next(
        d
        for d in yaml.safe_load_all(QUICKSTART_CLUSTERS.read_text())
        if d["metadata"]["name"] == cluster
    )
    await mgmt.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(doc))
    await mgmt.kubectl(
        "wait", "--for=condition=Ready", f"inferencecluster/{cluster}", "--timeout=60s"
    )
    await mgmt.kubectl("delete", f"inferencecluster/{cluster}", "--wait=false")

    async def refused() -> dict[str, Any] | None:
        obj = await mgmt.get_json("inferencecluster", cluster)
        ready = [c for c in obj.get("status", {}).get("conditions", []) if c["type"] == "Ready"]
        return ready[0] if ready and ready[0]["reason"] == "DeleteRefused" else None

    condition = await wait_for(refused, 30, "the DeleteRefused condition")
    assert f"still runs 1 replica(s): {NS}/" in condition["message"]
    obj = await mgmt.get_json("inferencecluster", cluster)
    assert obj["metadata"]["finalizers"] == ["modelfleet.dev/teardown"]
    # The cluster still runs and is Ready in the Fleet.
    view = await stack.fleet_view()
    assert [c.ready for c in view.clusters if c.spec.name == cluster] == [True]
    # Let the object go without tearing the shared cluster down: drop the finalizer by hand.
    await mgmt.kubectl(
        "patch",
        f"inferencecluster/{cluster}",
        "--type=merge",
        "-p",
        '{"metadata":{"finalizers":null}}',
    )
    await mgmt.kubectl("wait", "--for=delete", f"inferencecluster/{cluster}", "--timeout=60s")
    await mgmt.kubectl("delete", "-n", NS, "modeldeployment/ctl-pinned", "--timeout=120s")
    view = await stack.fleet_view()
    assert [c.ready for c in view.clusters if c.spec.name == cluster] == [True]


async def test_a_gitops_loop_loses_nothing_and_duplicates_nothing(
    mgmt: Management, stack: Stack, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.yaml").write_text(manifest("git-a", replicas=1))
    (repo / "b.yaml").write_text(manifest("git-b", replicas=0))
    endpoint = {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "ModelEndpoint",
        "metadata": {"name": "git-c", "namespace": NS, "labels": {"from": "git"}},
        "spec": {"url": "http://127.0.0.1:9/v1"},
    }
    (repo / "c.yaml").write_text(yaml.safe_dump(endpoint))
    await mgmt.kubectl("apply", "-f", str(repo))
    for ref in ("modeldeployment/git-a", "modeldeployment/git-b", "modelendpoint/git-c"):
        await mgmt.kubectl("wait", "--for=condition=Ready", "-n", NS, ref, "--timeout=120s")
    first_a = await stack.status(NS, "git-a")

    # Change one file, apply the directory again: only that deployment changes.
    (repo / "b.yaml").write_text(manifest("git-b", replicas=1))
    _, out, _ = await mgmt.kubectl("apply", "-f", str(repo))
    assert "modeldeployment.modelfleet.dev/git-a unchanged" in out
    assert "modeldeployment.modelfleet.dev/git-b configured" in out
    await stack.wait_status(NS, "git-b", lambda s: s.desired == 1 and s.ready == 1, 120)
    again_a = await stack.status(NS, "git-a")
    assert again_a.generation == first_a.generation
    assert (again_a.desired, again_a.ready) == (1, 1)

    # Delete one file's object: it goes, the others stay as they are.
    await mgmt.kubectl("delete", "-f", str(repo / "a.yaml"), "--timeout=120s")
    (repo / "a.yaml").unlink()
    assert await workflow_status(stack, "git-a") is WorkflowExecutionStatus.COMPLETED
    assert await placed(stack, "git-a") == 0
    assert await placed(stack, "git-b") == 1
    from modelfleet.cli.resources import directory_endpoints

    endpoints = [e.name for e in await directory_endpoints(stack.client, NS)]
    assert endpoints.count("git-c") == 1
    _, out, _ = await mgmt.kubectl("apply", "-f", str(repo))
    assert "created" not in out
    listed = await mgmt.get_json("-n", NS, "modeldeployments")
    assert sorted(
        i["metadata"]["name"] for i in listed["items"] if i["metadata"]["name"].startswith("git-")
    ) == ["git-b"]
    await mgmt.kubectl("delete", "-f", str(repo), "--timeout=120s")
    assert await placed(stack, "git-b") == 0
    assert "git-c" not in [e.name for e in await directory_endpoints(stack.client, NS)]


async def cli(stack: Stack, *args: str, env: dict[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "modelfleet.cli",
        *args,
        env={**os.environ, "MODELFLEET_TEMPORAL_ADDRESS": stack.env.settings.address, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert "Traceback" not in err.decode(), err.decode()
    return proc.returncode or 0, out.decode(), err.decode()


async def test_the_cli_writes_to_the_management_cluster_and_both_doors_agree(
    mgmt: Management, stack: Stack, tmp_path: Path
) -> None:
    managed = {"MODELFLEET_MANAGEMENT_KUBECONFIG": str(mgmt.kubeconfig)}
    path = tmp_path / "door.yaml"
    path.write_text(manifest("ctl-door", replicas=1))
    code, out, err = await cli(stack, "apply", "-f", str(path), env=managed)
    assert code == 0, err
    assert "modeldeployment.modelfleet.dev/ctl-door created (management cluster" in out
    await mgmt.kubectl(
        "wait", "--for=condition=Ready", "-n", NS, "modeldeployment/ctl-door", "--timeout=120s"
    )
    code, out, err = await cli(stack, "apply", "-f", str(path), env=managed)
    assert "ctl-door unchanged" in out
    # modelfleet get (the workflow) and kubectl get (the object's status) agree.
    code, out, err = await cli(stack, "get", "md", "ctl-door", "-n", NS, "-o", "json", env={})
    assert code == 0, err
    live = json.loads(out)
    obj = await mgmt.get_json("-n", NS, "modeldeployment", "ctl-door")
    assert live["spec"]["replicas"] == obj["spec"]["replicas"] == 1
    assert live["status"]["ready"] == obj["status"]["readyReplicas"] == 1
    assert live["status"]["phase"] == obj["status"]["phase"] == "Ready"
    # Deleting or scaling past the management cluster is refused in one line.
    code, out, err = await cli(stack, "delete", "md", "ctl-door", "-n", NS, env=managed)
    assert code != 0
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1
    assert "driven from its management cluster" in lines[0]
    assert await workflow_status(stack, "ctl-door") is WorkflowExecutionStatus.RUNNING
    await mgmt.kubectl("delete", "-n", NS, "modeldeployment/ctl-door", "--timeout=120s")
    assert await workflow_status(stack, "ctl-door") is WorkflowExecutionStatus.COMPLETED


async def test_a_model_autoscaler_beside_an_external_scaler_is_refused(
    mgmt: Management, stack: Stack
) -> None:
    await mgmt.kubectl("apply", "-f", "-", stdin=manifest("ctl-scaled", replicas=0))
    await mgmt.kubectl(
        "wait", "--for=condition=Ready", "-n", NS, "modeldeployment/ctl-scaled", "--timeout=120s"
    )
    # An external scaler (here kubectl, as an HPA or KEDA would) writes /scale.
    await mgmt.kubectl("scale", "-n", NS, "modeldeployment/ctl-scaled", "--replicas", "1")
    await stack.wait_status(NS, "ctl-scaled", lambda s: s.desired == 1, 60)
    autoscaler = {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "ModelAutoscaler",
        "metadata": {"name": "ctl-scaler", "namespace": NS},
        "spec": {
            "scaleTargetRef": {"kind": "ModelDeployment", "name": "ctl-scaled"},
            "minReplicas": 1,
            "maxReplicas": 3,
            "metrics": [
                {
                    "type": "Engine",
                    "engine": {"name": "vllm:num_requests_waiting", "target": {"averageValue": 4}},
                }
            ],
        },
    }
    await mgmt.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(autoscaler))

    async def conflict(ref: str) -> dict[str, Any] | None:
        obj = await mgmt.get_json("-n", NS, ref)
        ready = [c for c in obj.get("status", {}).get("conditions", []) if c["type"] == "Ready"]
        return ready[0] if ready and ready[0]["reason"] == "ScalerConflict" else None

    on_deployment = await wait_for(
        lambda: conflict("modeldeployment/ctl-scaled"), 30, "the conflict on the deployment"
    )
    on_autoscaler = await wait_for(
        lambda: conflict("modelautoscaler/ctl-scaler"), 30, "the conflict on the autoscaler"
    )
    for condition in (on_deployment, on_autoscaler):
        assert "ModelAutoscaler ctl-scaler and an external scaler" in condition["message"]
    # Neither acted: no autoscaler workflow, the deployment left at what /scale said.
    from modelfleet.autoscaler.workflow import autoscaler_id

    with pytest.raises(Exception, match="not found"):
        await stack.client.get_workflow_handle(autoscaler_id(NS, "ctl-scaler")).describe()
    assert (await stack.status(NS, "ctl-scaled")).desired == 1
    await mgmt.kubectl("delete", "-n", NS, "modelautoscaler/ctl-scaler", "--timeout=60s")
    await mgmt.kubectl("delete", "-n", NS, "modeldeployment/ctl-scaled", "--timeout=120s")


async def test_a_cluster_naming_a_class_nobody_holds_is_invalid(mgmt: Management) -> None:
    doc = {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": "ctl-orphan"},
        "spec": {
            "cluster": {"source": "Existing"},
            "nodePools": [{"name": "gpu", "className": "no-such-class", "nodeCount": 1}],
        },
    }
    await mgmt.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(doc))

    async def reported() -> dict[str, Any] | None:
        obj = await mgmt.get_json("inferencecluster", "ctl-orphan")
        ready = [c for c in obj.get("status", {}).get("conditions", []) if c["type"] == "Ready"]
        return ready[0] if ready and ready[0]["reason"] == "Invalid" else None

    ready = await wait_for(reported, 30, "the Invalid condition")
    assert "InferenceClass 'no-such-class' not found" in ready["message"]
    from modelfleet.contracts.ids import cluster_id

    with pytest.raises(Exception, match="not found"):
        await mgmt.stack.client.get_workflow_handle(cluster_id("ctl-orphan")).describe()  # type: ignore[union-attr]
    await mgmt.kubectl("delete", "inferencecluster/ctl-orphan", "--timeout=60s")

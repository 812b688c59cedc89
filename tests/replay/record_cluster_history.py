"""Record the golden histories of the InferenceCluster provisioning paths (a script, not a test).

    .venv/bin/python tests/replay/record_cloud_histories.py [--out DIR]

It starts the cloud provisioning environment of the integration tests (a Temporal dev server,
the simulated GKE and EKS clouds, a worker) and drives the scenarios below, replays what it
fetched against the current workflow code, and only then writes the histories and adds them to
``index.json`` (leaving the other goldens, recorded by ``record_histories.py``, untouched):

* provisioned: gke-central provisioned to Ready, then deleted (drain, withdraw, deprovision);
* rolled back: a two-pool cluster whose second pool hits a quota error, compensated in reverse,
  then deleted;
* access reviewed: an Existing cluster whose credentials lack some RBAC (NotReady, named), then
  granted (Ready), then deleted (review-cluster-access patch);
* pools changed: a GKE cluster given a new pool and resized bounds, then the new pool removed,
  then deleted (reconcile-node-pools patch).

Only goldens not yet on disk are written, unless named with ``--only``: an existing golden was
recorded by older workflow code and keeps guarding the branch that code took.

When to run it: as for ``record_histories.py``, only after an intentional, patched change to the
provisioning path of the InferenceCluster workflow.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster, NodePool
from modelfleet.api.loading import load_paths
from modelfleet.cli.apply import apply_resource
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts.ids import cluster_id
from modelfleet.contracts.status import ClusterStatus
from modelfleet.sim.clouds.faults import CloudFault, ErrorKind, FaultStage
from modelfleet.worker.runner import WORKFLOWS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from cloud_support import CLUSTERS, CloudStack, cloud_environment, renamed
from integration_support import QUICKSTART, wait_for

DEFAULT_OUT = Path(__file__).resolve().parent / "histories"
GOLDENS = (
    "provisioned-cluster-gke.json",
    "rolled-back-cluster-gke.json",
    "access-reviewed-cluster.json",
    "pools-changed-cluster-gke.json",
)


async def finish(stack: CloudStack, name: str) -> WorkflowHistory:
    handle = stack.client.get_workflow_handle(cluster_id(name), result_type=ClusterStatus)
    await handle.execute_update(ClusterWorkflow.delete)
    await asyncio.wait_for(handle.result(), 120)
    return await handle.fetch_history()


async def access_reviewed(stack: CloudStack) -> WorkflowHistory:
    loaded = load_paths([str(QUICKSTART / "classes.yaml"), str(QUICKSTART / "clusters.yaml")])
    classes = {r.name: r for r in loaded.resources if isinstance(r, InferenceClass)}
    l4 = next(r for r in loaded.resources if r.name == "l4-dev")
    assert isinstance(l4, InferenceCluster)
    cluster = renamed(l4, "rbac-adopted")
    await stack.fleet.add_cluster(
        cluster, classes, faults={"deny_access": ["delete deployments.apps"]}
    )
    (stack.credentials / "rbac-adopted.yaml").write_bytes(
        stack.fleet.kubeconfig("rbac-adopted").read_bytes()
    )
    await apply_resource(stack.client, cluster)

    async def denied() -> ClusterStatus | None:
        status = await stack.cluster("rbac-adopted")
        return status if status.reason.startswith("AccessDenied") else None

    await wait_for(denied, 60, "the missing RBAC to be reported")
    stack.fleet.server.set_faults("rbac-adopted", {})
    await stack.wait_phase("rbac-adopted", "Ready")
    return await finish(stack, "rbac-adopted")


async def pools_changed(stack: CloudStack) -> WorkflowHistory:
    spec = renamed(CLUSTERS["gke-central"], "gke-pools")
    first = spec.spec.node_pools[0]

    def with_pools(*pools: NodePool) -> InferenceCluster:
        return spec.model_copy(
            update={"spec": spec.spec.model_copy(update={"node_pools": list(pools)})}
        )

    async def pools_match(message: str) -> ClusterStatus | None:
        status = await stack.cluster("gke-pools")
        found = [c for c in status.conditions if c.type == "NodePools"]
        return status if found and found[0].message == message else None

    await apply_resource(stack.client, spec)
    await stack.wait_phase("gke-pools", "Ready")
    wider = first.model_copy(update={"min_node_count": 1, "max_node_count": 6})
    extra = first.model_copy(
        update={"name": "gpu-extra", "min_node_count": None, "max_node_count": None}
    )
    await apply_resource(stack.client, with_pools(wider, extra))
    await wait_for(lambda: pools_match("created gpu-extra; resized gpu-h100"), 90, "pools")
    await apply_resource(stack.client, with_pools(wider))
    await wait_for(lambda: pools_match("deleted gpu-extra"), 90, "gpu-extra deleted")
    return await finish(stack, "gke-pools")


async def record_all(only: set[str]) -> dict[str, tuple[str, str, WorkflowHistory]]:
    out: dict[str, tuple[str, str, WorkflowHistory]] = {}
    with tempfile.TemporaryDirectory(prefix="modelfleet-record-clouds-") as tmp:
        async with cloud_environment(Path(tmp)) as stack:
            if "access-reviewed-cluster.json" in only:
                out["access-reviewed-cluster.json"] = (
                    cluster_id("rbac-adopted"),
                    "an Existing cluster lacking RBAC (NotReady, named), then granted, deleted",
                    await access_reviewed(stack),
                )
            if "pools-changed-cluster-gke.json" in only:
                out["pools-changed-cluster-gke.json"] = (
                    cluster_id("gke-pools"),
                    "a GKE cluster given a pool and new bounds, the pool removed, then deleted",
                    await pools_changed(stack),
                )
            if not only & {"provisioned-cluster-gke.json", "rolled-back-cluster-gke.json"}:
                return await _replayed(out)
            await apply_resource(stack.client, CLUSTERS["gke-central"])
            await stack.wait_phase("gke-central", "Ready")
            out["provisioned-cluster-gke.json"] = (
                cluster_id("gke-central"),
                "gke-central provisioned to Ready, then deleted and deprovisioned",
                await finish(stack, "gke-central"),
            )
            spec = renamed(CLUSTERS["gke-central"], "gke-quota")
            first = spec.spec.node_pools[0]
            pools = [first, first.model_copy(update={"name": "gpu-more"})]
            spec = spec.model_copy(
                update={"spec": spec.spec.model_copy(update={"node_pools": pools})}
            )
            stack.clouds.gke.faults.add(
                CloudFault(
                    operation="createNodePool",
                    target="gpu-more",
                    error=ErrorKind.QUOTA,
                    stage=FaultStage.OPERATION,
                )
            )
            await apply_resource(stack.client, spec)
            await stack.wait_phase("gke-quota", "Failed")
            out["rolled-back-cluster-gke.json"] = (
                cluster_id("gke-quota"),
                "quota on the second GKE node pool, compensated in reverse, then deleted",
                await finish(stack, "gke-quota"),
            )
    return await _replayed(
        {k: v for k, v in out.items() if k in only},
    )


async def _replayed(
    out: dict[str, tuple[str, str, WorkflowHistory]],
) -> dict[str, tuple[str, str, WorkflowHistory]]:
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    for filename, (_, _, history) in out.items():
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        if result.replay_failure is not None:
            raise SystemExit(f"{filename} does not replay: {result.replay_failure!r}")
    return out


def write(recorded: dict[str, tuple[str, str, WorkflowHistory]], out: Path) -> None:
    index_path = out / "index.json"
    index = json.loads(index_path.read_text())
    for filename, (workflow_id, scenario, history) in recorded.items():
        document = json.loads(history.to_json())
        (out / filename).write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
        index[filename] = {
            "scenario": scenario,
            "type": "InferenceCluster",
            "workflow_id": workflow_id,
        }
        print(f"  {filename}: {workflow_id} ({len(history.events)} events)")
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--only", nargs="*", help="goldens to (re)write; default: the missing")
    args = parser.parse_args()
    only = set(args.only) if args.only else {n for n in GOLDENS if not (args.out / n).exists()}
    if not only:
        print("every golden exists; name one with --only to re-record it")
        return
    write(asyncio.run(record_all(only)), args.out)


if __name__ == "__main__":
    main()

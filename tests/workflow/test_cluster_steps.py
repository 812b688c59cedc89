"""The InferenceCluster workflow's step log and serving-stack report in its status (what
``describe cluster`` and ``rollout status cluster/NAME`` print), on the time-skipping server with
the recording cloud doubles of test_cluster_provisioning."""

from __future__ import annotations

import uuid

from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from test_cluster_provisioning import FakeCloud, _run, _two_pools

from modelfleet.cluster.state import ClusterInput
from modelfleet.cluster.workflow import ClusterWorkflow
from modelfleet.contracts import search
from modelfleet.contracts.stack_payloads import DEFAULT_STACK
from modelfleet.contracts.status import ClusterStatus


async def test_a_provisioned_cluster_reports_each_step_with_its_times(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    settled, final = await _run(time_skipping_env, FakeCloud(), _two_pools("gke-central"))
    assert settled.phase == "Ready"
    assert [s.name for s in settled.steps] == [
        "create cluster gke-central",
        "create node pool gpu-h100",
        "create node pool gpu-h100-b",
        "write kubeconfig on the worker",
        "verify the serving stack",
    ]
    assert all(s.finished is not None and s.finished >= s.started for s in settled.steps)
    assert not any(s.error for s in settled.steps)
    assert settled.step == ""
    # Each step starts when the one before it ended.
    for before, after in zip(settled.steps, settled.steps[1:], strict=False):
        assert before.finished is not None
        assert after.started >= before.finished
    assert [(p.name, p.version, p.served) for p in settled.stack] == [
        (c.name, c.version, True) for c in DEFAULT_STACK
    ]
    # The delete's deprovisioning steps are logged after them, newest pool first.
    assert [s.name for s in final.steps[5:]] == [
        "delete node pool gpu-h100-b",
        "delete node pool gpu-h100",
        "delete cluster gke-central",
    ]


async def test_a_failed_step_keeps_its_error_and_the_compensation_follows(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    settled, _ = await _run(
        time_skipping_env, FakeCloud(fail_pool="gpu-h200-b"), _two_pools("eks-east")
    )
    assert settled.phase == "Failed"
    by_name = {s.name: s for s in settled.steps}
    failed = by_name["create node group gpu-h200-b"]
    assert failed.finished is not None
    assert failed.error.startswith("CloudQuotaExceeded")
    assert by_name["create node group gpu-h200"].error == ""
    assert [s.name for s in settled.steps][-3:] == [
        "delete node group gpu-h200-b",
        "delete node group gpu-h200",
        "delete cluster eks-east",
    ]
    assert all(s.finished is not None for s in settled.steps)
    # The stack was never checked: the cluster never became reachable.
    assert all(p.served is None for p in settled.stack)


async def test_a_cluster_publishes_its_creation_time_for_reads_without_the_fleet(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    """``get clusters`` shows AGE from visibility when the Fleet does not answer: the workflow
    publishes the creation time its status reports, with its phase."""
    env, cloud = time_skipping_env, FakeCloud()
    spec = _two_pools("gke-central")
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(
        env.client, task_queue=queue, workflows=[ClusterWorkflow], activities=cloud.activities()
    ):
        handle = await env.client.start_workflow(
            ClusterWorkflow.run,
            ClusterInput.of(spec),
            id=f"cluster/{spec.name}-{uuid.uuid4()}",
            task_queue=queue,
            result_type=ClusterStatus,
        )
        await cloud.settle()
        settled = await handle.query(ClusterWorkflow.status)
        published = (await handle.describe()).typed_search_attributes
        await handle.execute_update(ClusterWorkflow.delete)
        await handle.result()
    assert settled.created is not None
    assert published.get(search.CREATED) == settled.created
    assert published.get(search.PHASE) == settled.phase == "Ready"

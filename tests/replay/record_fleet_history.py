"""Record the golden history of the Fleet's compact-state path (a script, not a test).

    .venv/bin/python tests/replay/record_fleet_history.py

The main recorder (``record_histories.py``) drives whole scenarios through a dev server; this one
records only the Fleet run that writes the compact state (``fleet-compact-state`` patch): on the
time-skipping test server, with a real worker, it starts a Fleet with low history limits, puts
the quickstart classes and clusters, reports one cluster Ready, places a deployment twice (the
second time with the same request ID, answered from memory), releases one replica, and lets
the Fleet continue-as-new on its history limit. The first run's history is replayed against the
current code and only then written as ``compact-fleet.json`` with its ``index.json`` entry.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import EventType, IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.loading import load_paths
from modelfleet.contracts.fleet_payloads import ClusterReport, PlaceRequest, ReleaseRequest
from modelfleet.contracts.kube_payloads import PoolObservation
from modelfleet.contracts.workflow_inputs import FleetInput, FleetLimits
from modelfleet.fleet.workflow import FleetWorkflow
from modelfleet.worker.devserver import SEARCH_ATTRIBUTES
from modelfleet.worker.runner import WORKFLOWS

ROOT = Path(__file__).resolve().parents[2]
HISTORIES = Path(__file__).resolve().parent / "histories"
FILENAME = "compact-fleet.json"
TEST_SERVER = Path(sys.executable).parent / "temporal-test-server"


async def record() -> WorkflowHistory:
    loaded = load_paths([str(ROOT / "examples" / "quickstart")])
    loaded.raise_for_errors()
    resources = loaded.resources
    classes = [r for r in resources if isinstance(r, InferenceClass)]
    clusters = [r for r in resources if isinstance(r, InferenceCluster)]
    deployment = next(r for r in resources if isinstance(r, ModelDeployment))
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(TEST_SERVER), data_converter=pydantic_data_converter
    )
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace="default",
            search_attributes={
                name: IndexedValueType.Value(f"INDEXED_VALUE_TYPE_{kind.upper()}")
                if kind != "KeywordList"
                else IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST
                for name, kind in SEARCH_ATTRIBUTES.items()
            },
        )
    )
    queue = f"record-{uuid.uuid4()}"
    try:
        async with Worker(env.client, task_queue=queue, workflows=[FleetWorkflow]):
            handle = await env.client.start_workflow(
                FleetWorkflow.run,
                FleetInput(limits=FleetLimits(max_history_events=40)),
                id="fleet",
                task_queue=queue,
            )
            first_run = handle.result_run_id
            for cls in classes:
                await handle.execute_update(FleetWorkflow.put_class, cls)
            for cluster in clusters:
                await handle.execute_update(FleetWorkflow.put_cluster, cluster)
            target = clusters[0]
            await handle.execute_update(
                FleetWorkflow.report_cluster,
                ClusterReport(
                    name=target.name,
                    ready=True,
                    reason="probed",
                    gateway_address=f"gateway.{target.name}.invalid",
                    observed_pools={
                        p.name: PoolObservation(
                            nodes=p.capacity_nodes, ready_nodes=p.capacity_nodes
                        )
                        for p in target.spec.node_pools
                    },
                ),
            )
            request = PlaceRequest(request_id="golden-1", deployment=deployment, desired=1)
            placed = await handle.execute_update(FleetWorkflow.place, request)
            again = await handle.execute_update(FleetWorkflow.place, request)
            assert [r.name for r in again.placed] == [r.name for r in placed.placed]
            await handle.execute_update(
                FleetWorkflow.release,
                ReleaseRequest(
                    namespace=deployment.namespace, replicas=[r.name for r in placed.placed]
                ),
            )
            # Reports until the history limit makes the Fleet continue-as-new.
            for i in range(20):
                await handle.execute_update(
                    FleetWorkflow.report_cluster,
                    ClusterReport(name=target.name, ready=True, reason=f"probe {i}"),
                )
            history = await env.client.get_workflow_handle(
                "fleet", run_id=first_run
            ).fetch_history()
            last = history.events[-1].event_type
            assert last == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW, last
            await env.client.get_workflow_handle("fleet").terminate()
            return history
    finally:
        await env.shutdown()


async def main() -> None:
    history = await record()
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    await replayer.replay_workflow(history)
    (HISTORIES / FILENAME).write_text(history.to_json())
    index_path = HISTORIES / "index.json"
    index = json.loads(index_path.read_text())
    index[FILENAME] = {
        "scenario": "the Fleet's compact-state path (fleet-compact-state patch): classes, "
        "clusters, a report, a placement answered twice, a release, continue-as-new on the "
        "history limit",
        "type": "Fleet",
        "workflow_id": "fleet",
    }
    index_path.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    print(f"wrote {FILENAME}: {len(history.events)} events")


if __name__ == "__main__":
    asyncio.run(main())

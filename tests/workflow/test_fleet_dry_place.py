"""The Fleet's ``dry_place`` Update: where a template would go, booking nothing, and a CEL
selector that fails at evaluation named per cluster and pool when nothing fits."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from fleet_placing import placer
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from placement_builders import DRIVER, deployment, gpu, standalone

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.contracts.fleet_payloads import (
    ClusterReport,
    DryPlaceRequest,
    PlaceRequest,
    PlaceResponse,
)
from modelfleet.contracts.status import FleetView
from modelfleet.contracts.workflow_inputs import FleetInput
from modelfleet.fleet.workflow import FleetWorkflow


def cluster(name: str) -> InferenceCluster:
    return InferenceCluster.model_validate(
        {
            "kind": "InferenceCluster",
            "metadata": {"name": name},
            "spec": {
                "cluster": {"source": "Existing"},
                "nodePools": [{"name": "big", "className": "h100", "nodeCount": 1}],
            },
        }
    )


async def test_dry_place_books_nothing_and_names_cel_evaluation_failures(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    client = time_skipping_env.client
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[FleetWorkflow]):
        fleet = await client.start_workflow(
            FleetWorkflow.run, FleetInput(), id=f"fleet-{uuid.uuid4()}", task_queue=queue
        )
        try:
            await fleet.execute_update(
                FleetWorkflow.put_class,
                InferenceClass.model_validate(
                    {
                        "kind": "InferenceClass",
                        "metadata": {"name": "h100"},
                        "spec": {"devices": [gpu()]},
                    }
                ),
            )
            for name in ("east", "west"):
                await fleet.execute_update(FleetWorkflow.put_cluster, cluster(name))
                await fleet.execute_update(
                    FleetWorkflow.report_cluster,
                    ClusterReport(name=name, ready=True, gateway_address="10.0.0.1"),
                )
            good = deployment(standalone(1), replicas=2)
            dry: PlaceResponse = await placer(fleet).dry_place(
                DryPlaceRequest(request_id="d1", deployment=good, desired=2),
            )
            assert sorted(r.spec.cluster_name for r in dry.placed) == ["east", "west"]
            view: FleetView = await fleet.query(FleetWorkflow.view)
            assert view.replicas == []  # nothing booked

            placed: PlaceResponse = await placer(fleet).place(
                PlaceRequest(request_id="p1", deployment=good, desired=2)
            )
            assert len(placed.placed) == 2
            # Full now, unless the named replica is not counted.
            full = await placer(fleet).dry_place(
                DryPlaceRequest(request_id="d2", deployment=good, desired=3),
            )
            assert full.placed == []
            freed = await placer(fleet).dry_place(
                DryPlaceRequest(
                    request_id="d3",
                    deployment=good,
                    desired=2,
                    without=[placed.placed[0].name],
                ),
            )
            assert [r.spec.cluster_name for r in freed.placed] == [
                placed.placed[0].spec.cluster_name
            ]

            bad = deployment(
                standalone(1, f'device.attributes["{DRIVER}"].productName > 5'), replicas=2
            )
            answer = await placer(fleet).dry_place(
                DryPlaceRequest(
                    request_id="d4",
                    deployment=bad,
                    desired=2,
                    without=[r.name for r in placed.placed],
                ),
            )
            assert answer.placed == []
            assert sorted(answer.rejections) == ["east", "west"]
            assert "fails to evaluate (type error" in answer.rejections["east"]
            assert "pool 'big'" in answer.rejections["east"]
            view = await fleet.query(FleetWorkflow.view)
            assert len(view.replicas) == 2  # still only the two real placements
        finally:
            await fleet.terminate()


async def test_dry_place_without_a_replica_frees_its_cluster_and_leaves_the_fleet_cache_alone(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    """The Fleet keeps each cluster's charged pools between placements. A dry placement that
    leaves out this deployment's only replica on a cluster must charge that cluster without it
    (not from the cache), and must not write that what-if into the cache a real placement
    reads next."""
    client = time_skipping_env.client
    queue = f"tq-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[FleetWorkflow]):
        fleet = await client.start_workflow(
            FleetWorkflow.run, FleetInput(), id=f"fleet-{uuid.uuid4()}", task_queue=queue
        )
        try:
            await fleet.execute_update(
                FleetWorkflow.put_class,
                InferenceClass.model_validate(
                    {
                        "kind": "InferenceClass",
                        "metadata": {"name": "h100"},
                        "spec": {"devices": [gpu()]},
                    }
                ),
            )
            await fleet.execute_update(FleetWorkflow.put_cluster, cluster("east"))
            await fleet.execute_update(
                FleetWorkflow.report_cluster,
                ClusterReport(name="east", ready=True, gateway_address="10.0.0.1"),
            )
            first = deployment(standalone(1), name="first")
            placed: PlaceResponse = await placer(fleet).place(
                PlaceRequest(request_id="p1", deployment=first, desired=1)
            )
            assert [r.spec.cluster_name for r in placed.placed] == ["east"]
            # Another deployment finds east full; east's charged pools are now cached.
            other: PlaceResponse = await placer(fleet).place(
                PlaceRequest(
                    request_id="p2", deployment=deployment(standalone(1), name="b"), desired=1
                ),
            )
            assert other.placed == []

            freed: PlaceResponse = await placer(fleet).dry_place(
                DryPlaceRequest(
                    request_id="d1",
                    deployment=first,
                    desired=1,
                    without=[placed.placed[0].name],
                ),
            )
            assert [r.spec.cluster_name for r in freed.placed] == ["east"]

            # The what-if did not leak: east is still full for a real placement.
            after: PlaceResponse = await placer(fleet).place(
                PlaceRequest(
                    request_id="p3", deployment=deployment(standalone(1), name="c"), desired=1
                ),
            )
            assert after.placed == []
            view: FleetView = await fleet.query(FleetWorkflow.view)
            assert [r.name for r in view.replicas] == [placed.placed[0].name]
        finally:
            await fleet.terminate()

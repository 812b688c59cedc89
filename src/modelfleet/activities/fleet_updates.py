"""Fleet activities: the bridge from deployment and cluster workflows to the Fleet workflow's
Updates (workflows cannot send Updates to each other). Each call carries a deterministic update
ID, so a retried activity is answered from the first result instead of placing twice.

An Update the server refuses for its in-flight limit is asked again after a pause
(``adapters.temporal_updates``): the per-process bound below keeps one worker under the limit,
several workers together are not.

Side effects: Temporal client calls only. No Kubernetes, no cloud SDKs.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowHandle

from modelfleet.adapters.temporal_updates import asked_again_when_refused
from modelfleet.contracts.activity_names import (
    FLEET_DRY_PLACE,
    FLEET_PLACE,
    FLEET_PLACEMENT_CURRENT,
    FLEET_PUBLISH_CLUSTER,
    FLEET_RELEASE,
    FLEET_REPLICAS_BY_POOL,
    FLEET_REPLICAS_ON,
    FLEET_SWEEP_PENDING,
)
from modelfleet.contracts.fleet_payloads import (
    DryPlaceRequest,
    PlacementCheck,
    PlaceRequest,
    PlaceResponse,
    PublishRequest,
    ReleaseRequest,
)
from modelfleet.contracts.status import ClusterStatus

FLEET_WORKFLOW_ID = "fleet"
# The server admits a bounded number of in-flight Updates per workflow (10 by default); past it,
# Updates are aborted and the Fleet's workflow tasks rejected, so a burst of placements collapses
# instead of queueing. Each worker keeps its own Updates to the Fleet under that bound.
MAX_FLEET_UPDATES_IN_FLIGHT = 6


class FleetActivities:
    def __init__(self, client: Client, *, max_in_flight: int = MAX_FLEET_UPDATES_IN_FLIGHT) -> None:
        self._client = client
        self._slots = asyncio.Semaphore(max_in_flight)

    async def _update(
        self, name: str, arg: Any, *, result_type: type | None = None, update_id: str | None = None
    ) -> Any:
        async with self._slots:
            return await asked_again_when_refused(
                lambda: self._fleet().execute_update(
                    name, arg, id=update_id, result_type=result_type
                )
            )

    async def _query(self, name: str, arg: Any, *, result_type: type) -> Any:
        # Queries of the one Fleet meet the server's buffer of queries per workflow when many
        # deployments resync at once; refused ones are asked again, as refused Updates are.
        return await asked_again_when_refused(
            lambda: self._fleet().query(name, arg, result_type=result_type)
        )

    def _fleet(self) -> WorkflowHandle[Any, Any]:
        return self._client.get_workflow_handle(FLEET_WORKFLOW_ID)

    @activity.defn(name=FLEET_PLACE)
    async def place(self, request: PlaceRequest) -> PlaceResponse:
        result: PlaceResponse = await self._update(
            "place", request, update_id=request.request_id, result_type=PlaceResponse
        )
        return result

    @activity.defn(name=FLEET_DRY_PLACE)
    async def dry_place(self, request: DryPlaceRequest) -> PlaceResponse:
        # Read-only, so no update ID: a retry simply asks again.
        result: PlaceResponse = await self._update("dry_place", request, result_type=PlaceResponse)
        return result

    @activity.defn(name=FLEET_RELEASE)
    async def release(self, request: ReleaseRequest) -> int:
        released: int = await self._update("release", request, result_type=int)
        return released

    @activity.defn(name=FLEET_PUBLISH_CLUSTER)
    async def publish_cluster(self, request: PublishRequest) -> None:
        if request.remove is not None:
            await self._update("remove_cluster", request.remove, result_type=list[str])
            return
        if request.spec is not None:
            await self._update("put_cluster", request.spec)
        if request.report is not None:
            await self._update("report_cluster", request.report)

    @activity.defn(name=FLEET_REPLICAS_ON)
    async def replicas_on(self, cluster: str) -> list[str]:
        names: list[str] = await self._query("replicas_on", cluster, result_type=list[str])
        return names

    @activity.defn(name=FLEET_REPLICAS_BY_POOL)
    async def replicas_by_pool(self, cluster: str) -> dict[str, list[str]]:
        """Per node pool of ``cluster``, the replicas on it (a query: no Fleet history)."""
        found: dict[str, list[str]] = await self._query(
            "replicas_by_pool", cluster, result_type=dict[str, list[str]]
        )
        return found

    @activity.defn(name=FLEET_PLACEMENT_CURRENT)
    async def placement_current(self, check: PlacementCheck) -> bool:
        """Whether a deployment's last placement is still current (a query: no Fleet history,
        no Update slot). A deployment whose own spec is unchanged skips ``fleet.place`` when
        this says True."""
        current: bool = await self._query("placement_current", check, result_type=bool)
        return current

    @activity.defn(name=FLEET_SWEEP_PENDING)
    async def sweep_pending(self, cluster_workflow_id: str) -> bool:
        """Whether the cluster workflow ``cluster_workflow_id`` will sweep its cluster of moved
        replicas' objects when it is Ready again (a query: no history)."""
        handle = self._client.get_workflow_handle(cluster_workflow_id)
        status: ClusterStatus = await handle.query("status", result_type=ClusterStatus)
        return status.sweep_pending

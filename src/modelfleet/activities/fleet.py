"""Fleet activities: the bridge from deployment and cluster workflows to the Fleet workflow's
Updates (workflows cannot send Updates to each other). Each call carries a deterministic update
ID, so a retried activity is answered from the first result instead of placing twice.

Side effects: Temporal client calls only. No Kubernetes, no cloud SDKs.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowHandle

from modelfleet.activities.contracts import (
    FLEET_PLACE,
    FLEET_PUBLISH_CLUSTER,
    FLEET_RELEASE,
    FLEET_REPLICAS_ON,
    PlaceRequest,
    PlaceResponse,
    PublishRequest,
    ReleaseRequest,
)

FLEET_WORKFLOW_ID = "fleet"


class FleetActivities:
    def __init__(self, client: Client) -> None:
        self._client = client

    def _fleet(self) -> WorkflowHandle[Any, Any]:
        return self._client.get_workflow_handle(FLEET_WORKFLOW_ID)

    @activity.defn(name=FLEET_PLACE)
    async def place(self, request: PlaceRequest) -> PlaceResponse:
        result: PlaceResponse = await self._fleet().execute_update(
            "place", request, id=request.request_id, result_type=PlaceResponse
        )
        return result

    @activity.defn(name=FLEET_RELEASE)
    async def release(self, request: ReleaseRequest) -> int:
        released: int = await self._fleet().execute_update("release", request, result_type=int)
        return released

    @activity.defn(name=FLEET_PUBLISH_CLUSTER)
    async def publish_cluster(self, request: PublishRequest) -> None:
        fleet = self._fleet()
        if request.remove is not None:
            await fleet.execute_update("remove_cluster", request.remove, result_type=list[str])
            return
        if request.spec is not None:
            await fleet.execute_update("put_cluster", request.spec)
        if request.report is not None:
            await fleet.execute_update("report_cluster", request.report)

    @activity.defn(name=FLEET_REPLICAS_ON)
    async def replicas_on(self, cluster: str) -> list[str]:
        names: list[str] = await self._fleet().query("replicas_on", cluster, result_type=list[str])
        return names

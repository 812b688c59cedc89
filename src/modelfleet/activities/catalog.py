"""The class catalog as an activity: the InferenceCluster workflow reads the classes its pools
name from the Fleet workflow (a query; workflows cannot query each other).

Side effects: one Temporal client call. No Kubernetes, no cloud SDKs.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.client import Client

from modelfleet.api.classes import InferenceClass
from modelfleet.contracts.cloud_payloads import FLEET_CLASSES

FLEET_WORKFLOW_ID = "fleet"


class CatalogActivities:
    def __init__(self, client: Client) -> None:
        self._client = client

    @activity.defn(name=FLEET_CLASSES)
    async def classes(self, names: list[str]) -> list[InferenceClass]:
        handle = self._client.get_workflow_handle(FLEET_WORKFLOW_ID)
        found: list[InferenceClass] = await handle.query(
            "classes_named", names, result_type=list[InferenceClass]
        )
        return found

"""Fleet activities: the bridge from deployment and cluster workflows to the Fleet workflow's
Updates (workflows cannot send Updates to each other).

Placement runs here, not in the Fleet (issue 22): ``fleet.place`` brings this process's copy of
the fleet (``FleetCopy``, the Fleet's own placement function on a copy kept current through the
Fleet's ``changes`` query) up to date, computes the placement on it and sends the proposal to the
Fleet's ``commit`` Update, which books it only if nothing it touches changed since the copy's
version; if something did, it is recomputed on the newer copy. The proposal is compact (the new
replicas as the Fleet's rows, the others by name) and the Update answers a verdict and a
version: the activity returns the answer it computed, so no replica travels through the Fleet's
history whole. The request's deterministic ID
makes a retried activity answered from the first booking instead of placing twice.
``fleet.dry_place`` only computes. One placement at a time per process: two computed on one
copy would mostly want the same free pools, and one of them would be refused.

Each process keeps its Updates to the Fleet under its share of the server's in-flight limit
(``adapters.temporal_updates.UpdateShare``: divided among the worker processes polling); one
the server refuses all the same is asked again after a pause.

Side effects: Temporal client calls only. No Kubernetes, no cloud SDKs.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import ApplicationError

from modelfleet.adapters.temporal_updates import UpdateShare, asked_again_when_refused
from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.manifest_errors import InvalidResourceError
from modelfleet.api.rules import validate
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
from modelfleet.contracts.fleet_copy import (
    ChangesRequest,
    CommitAnswer,
    FleetChanges,
    SnapshotPage,
    SnapshotPageRequest,
    proposal_of,
)
from modelfleet.contracts.fleet_payloads import (
    DryPlaceRequest,
    PlacementCheck,
    PlaceRequest,
    PlaceResponse,
    PublishRequest,
    ReleaseRequest,
)
from modelfleet.contracts.fleet_state import answer_from_compact
from modelfleet.contracts.status import ClusterStatus

FLEET_WORKFLOW_ID = "fleet"
# The server admits a bounded number of in-flight Updates per workflow (10 by default); past it,
# Updates are aborted and the Fleet's workflow tasks rejected, so a burst of placements collapses
# instead of queueing. A process alone keeps its Updates to the Fleet under this; several share
# the limit (``UpdateShare`` with a process count, as ``run_worker`` sets up).
MAX_FLEET_UPDATES_IN_FLIGHT = 6
# Proposals refused in a row before the activity gives up this attempt (its retry policy then
# tries again): each refusal means another placement was booked on a touched cluster meanwhile.
MAX_PROPOSALS = 20


class FleetCopy(Protocol):
    """A copy of the Fleet the placement is computed on (``fleet.mirror.FleetMirror``)."""

    epoch: str
    version: int

    def apply(self, changes: FleetChanges) -> None: ...
    def start_reading(self, page: SnapshotPage) -> None: ...
    def read(self, page: SnapshotPage) -> None: ...
    def resolve(self, request: PlaceRequest) -> ModelDeployment | None: ...
    def propose(self, request: PlaceRequest, deployment: ModelDeployment) -> PlaceResponse: ...
    def dry_place(self, request: DryPlaceRequest, deployment: ModelDeployment) -> PlaceResponse: ...


class FleetActivities:
    def __init__(
        self,
        client: Client,
        *,
        copy: FleetCopy | None = None,
        max_in_flight: int = MAX_FLEET_UPDATES_IN_FLIGHT,
        share: UpdateShare | None = None,
        fleet_id: str = FLEET_WORKFLOW_ID,
    ) -> None:
        self._client = client
        self._share = share or UpdateShare(max_in_flight)
        self._copy = copy
        self._fleet_id = fleet_id
        self._placing = asyncio.Lock()
        # Per process, for ``bench/fleet.py``: proposals sent, refused, whole reads.
        self.proposals = 0
        self.refused = 0
        self.whole_reads = 0

    async def _update(
        self, name: str, arg: Any, *, result_type: type | None = None, update_id: str | None = None
    ) -> Any:
        async with self._share.slot():
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
        return self._client.get_workflow_handle(self._fleet_id)

    @staticmethod
    def _check(request: PlaceRequest) -> None:
        """A deployment sent whole breaks no rule (named ones were checked when sent whole)."""
        if request.deployment is None:
            return
        errors = validate(request.deployment)
        if errors:
            message = str(InvalidResourceError(request.deployment.ref, errors))
            raise ApplicationError(message, type="InvalidResource", non_retryable=True)

    def _fleet_copy(self) -> FleetCopy:
        if self._copy is None:
            raise ApplicationError("this worker keeps no copy of the fleet to place on")
        return self._copy

    async def _changes(self, copy: FleetCopy) -> FleetChanges:
        """What changed in the fleet since ``copy``'s version (or that it is too old to say)."""
        changes: FleetChanges = await self._query(
            "changes",
            ChangesRequest(epoch=copy.epoch, since=copy.version),
            result_type=FleetChanges,
        )
        return changes

    async def _refresh(self, copy: FleetCopy) -> None:
        """Bring ``copy`` up to the Fleet's version: what changed since its own, or (another
        Fleet, or older than the Fleet's change log reaches) the whole fleet in pages."""
        changes = await self._changes(copy)
        if not changes.too_old:
            copy.apply(changes)
            return
        self.whole_reads += 1
        first = True
        for part in ("clusters", "replicas"):
            after = ""
            while True:
                page: SnapshotPage = await self._query(
                    "snapshot_page",
                    SnapshotPageRequest(part=part, after=after),
                    result_type=SnapshotPage,
                )
                if first:
                    copy.start_reading(page)
                    first = False
                else:
                    copy.read(page)
                after = page.next_after
                if not after:
                    break
        since = await self._changes(copy)
        if since.too_old:
            # The fleet changed faster than its log keeps while it was read: start over.
            copy.version = -1
            raise ApplicationError("the fleet changed too much while it was read; reading again")
        copy.apply(since)

    @activity.defn(name=FLEET_PLACE)
    async def place(self, request: PlaceRequest) -> PlaceResponse:
        self._check(request)
        copy = self._fleet_copy()
        last = ""
        async with self._placing:
            for _ in range(MAX_PROPOSALS):
                await self._refresh(copy)
                deployment = copy.resolve(request)
                if deployment is None:
                    # Named by a template this process does not hold: nothing decided; the
                    # sender resends it whole under a new request ID.
                    return PlaceResponse(unknown_template=True, version=copy.version)
                base, epoch = copy.version, copy.epoch
                response = await asyncio.to_thread(copy.propose, request, deployment)
                proposal = proposal_of(
                    response,
                    request_id=request.request_id,
                    epoch=epoch,
                    base=base,
                    namespace=deployment.namespace,
                    deployment=deployment.name,
                    desired=request.desired,
                )
                self.proposals += 1
                answer: CommitAnswer = await self._update(
                    "commit", proposal, result_type=CommitAnswer
                )
                if answer.committed:
                    if answer.remembered is not None:
                        # Booked before (a retried activity): that booking's answer.
                        return answer_from_compact(answer.remembered)
                    # The Fleet answers a verdict; the answer is what was proposed.
                    return response.model_copy(update={"version": answer.version})
                self.refused += 1
                last = answer.conflict
        raise ApplicationError(f"{MAX_PROPOSALS} proposals in a row were refused; last: {last}")

    @activity.defn(name=FLEET_DRY_PLACE)
    async def dry_place(self, request: DryPlaceRequest) -> PlaceResponse:
        # Read-only: computed on the copy once it is current (so after every placement and
        # release the caller sent before), nothing sent to the Fleet.
        self._check(request)
        copy = self._fleet_copy()
        async with self._placing:
            await self._refresh(copy)
            deployment = copy.resolve(request)
            if deployment is None:
                return PlaceResponse(unknown_template=True, version=copy.version)
            answer: PlaceResponse = await asyncio.to_thread(copy.dry_place, request, deployment)
            return answer

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

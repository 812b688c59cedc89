"""The activities the ModelDeployment workflow runs, one function each: placing replicas on the
Fleet (with the template sent by key once a worker holds it), the dry placement that gates a
roll, asking whether the last placement is current, releasing replicas, and reading a
replacement's engines (its 5xx share while it proves itself, a canary step's figures).

Each function schedules its activity with the timeouts, retries and summary it has always had
and turns an activity that fails into what the decisions expect (nothing read, "not current")
where a failure is no verdict; what the answers mean is decided in ``deployment.decisions``.
These are plain functions of what they are given, not methods, and hold no state: the
workflow passes its namespace, requests and the template keys it knows.

Workflow code: runs only inside the ModelDeployment workflow (``deployment.workflow``), so it
may use ``temporalio.workflow`` and the activity contracts, and nothing that does I/O itself.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from modelfleet.contracts.activity_names import (
    ENGINE_ERRORS,
    ENGINE_FIGURES,
    FLEET_DRY_PLACE,
    FLEET_PLACE,
    FLEET_PLACEMENT_CURRENT,
    FLEET_RELEASE,
)
from modelfleet.contracts.autoscaler_payloads import EngineErrors, EngineErrorsRequest
from modelfleet.contracts.canary_payloads import FiguresReading, FiguresRequest, WindowFigures
from modelfleet.contracts.fleet_payloads import (
    PlacementCheck,
    PlaceRequest,
    PlaceResponse,
    ReleaseRequest,
    template_key,
)
from modelfleet.deployment.actions import CheckErrors, ReadFigures

FLEET_TIMEOUT = timedelta(seconds=30)
# A replacement's engines' metrics: a few quick reads at most, then the roll goes on without.
ENGINE_ERRORS_TIMEOUT = timedelta(seconds=15)
ENGINE_ERRORS_TOTAL = timedelta(seconds=40)
FLEET_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=10))
# A placement that has not been answered in this long fails with the last error, instead of
# retrying forever; the pass ends saying why and the next resync asks again.
FLEET_TOTAL = timedelta(minutes=3)
# Template keys this run's Fleet answers kept (memory only: a new run sends the first whole).
MAX_KNOWN_TEMPLATES = 8


def cause(exc: ActivityError) -> str:
    """What made an activity fail, in its own words."""
    failure = exc.__cause__ or exc
    return str(failure) or type(failure).__name__


async def place(request: PlaceRequest, desired: int, known: dict[str, None]) -> PlaceResponse:
    """Place ``desired`` replicas. A template the Fleet's workers hold (``known``, updated here)
    is sent by key; an ``unknown_template`` answer (a worker that does not hold it) sends it
    whole again. Raises ``ActivityError`` when the Fleet does not answer in time."""
    assert request.deployment is not None
    key = template_key(request.deployment)
    if key in known:
        named = request.model_copy(update={"deployment": None, "template": key})
        response = await _fleet_place(named, desired)
        if not response.unknown_template:
            return response
        del known[key]
        # A new update ID: the server answers a repeated one from the first.
        request = request.model_copy(update={"request_id": f"{request.request_id}/w"})
    response = await _fleet_place(request, desired)
    known[key] = None
    while len(known) > MAX_KNOWN_TEMPLATES:
        del known[next(iter(known))]
    return response


async def _fleet_place(request: PlaceRequest, desired: int) -> PlaceResponse:
    response: PlaceResponse = await workflow.execute_activity(
        FLEET_PLACE,
        request,
        result_type=PlaceResponse,
        summary=f"place {desired} replica(s)",
        start_to_close_timeout=FLEET_TIMEOUT,
        schedule_to_close_timeout=FLEET_TOTAL,
        retry_policy=FLEET_RETRY,
    )
    return response


async def dry_place(request: PlaceRequest, desired: int) -> PlaceResponse:
    """Where ``desired`` replicas of the new template would go (nothing reserved). Raises
    ``ActivityError`` when the Fleet does not answer: unknown is not "fits"."""
    response: PlaceResponse = await workflow.execute_activity(
        FLEET_DRY_PLACE,
        request,
        result_type=PlaceResponse,
        summary=f"check where {desired} replica(s) of the new template would go",
        start_to_close_timeout=FLEET_TIMEOUT,
        schedule_to_close_timeout=FLEET_TOTAL,
        retry_policy=FLEET_RETRY,
    )
    return response


async def placement_current(namespace: str, deployment: str, version: int) -> bool:
    """Whether the Fleet's placement of the deployment at ``version`` still stands; an
    unanswered question reads as "changed" (place as before)."""
    try:
        current: bool = await workflow.execute_activity(
            FLEET_PLACEMENT_CURRENT,
            PlacementCheck(namespace=namespace, deployment=deployment, version=version),
            result_type=bool,
            summary="is the placement current",
            start_to_close_timeout=FLEET_TIMEOUT,
            schedule_to_close_timeout=FLEET_TOTAL,
            retry_policy=FLEET_RETRY,
        )
    except ActivityError:
        return False
    return current


async def release(namespace: str, names: list[str]) -> None:
    """Free the Fleet's capacity held by ``names``."""
    await workflow.execute_activity(
        FLEET_RELEASE,
        ReleaseRequest(namespace=namespace, replicas=names),
        result_type=int,
        summary=f"release {', '.join(names)}",
        start_to_close_timeout=FLEET_TIMEOUT,
        retry_policy=FLEET_RETRY,
    )


async def read_errors(namespace: str, action: CheckErrors) -> EngineErrors:
    """One read of the replacement's engines' answers; unreadable is no verdict (``error``)."""
    try:
        answered: EngineErrors = await workflow.execute_activity(
            ENGINE_ERRORS,
            EngineErrorsRequest(cluster=action.cluster, namespace=namespace, replica=action.name),
            result_type=EngineErrors,
            summary=f"read what {action.name}'s engines answered while proving itself",
            start_to_close_timeout=ENGINE_ERRORS_TIMEOUT,
            schedule_to_close_timeout=ENGINE_ERRORS_TOTAL,
            retry_policy=FLEET_RETRY,
        )
    except ActivityError as exc:
        workflow.logger.warning("errors of %s not read: %s", action.name, exc)
        return EngineErrors(error=str(exc))
    return answered


async def read_figures(namespace: str, action: ReadFigures) -> FiguresReading:
    """A canary step's reading; engines that cannot be read are data (``errors``), and an
    activity that fails altogether reads as nothing read (the verdict waits)."""
    what = "the window's figures" if action.baseline is not None else "the baseline"
    try:
        reading: FiguresReading = await workflow.execute_activity(
            ENGINE_FIGURES,
            FiguresRequest(
                namespace=namespace,
                replicas=action.replicas,
                baseline=action.baseline,
                canary=action.canary,
                stable=action.stable,
            ),
            result_type=FiguresReading,
            summary=f"canary: read {what} of {len(action.replicas)} replicas' engines",
            start_to_close_timeout=ENGINE_ERRORS_TIMEOUT,
            schedule_to_close_timeout=ENGINE_ERRORS_TOTAL,
            retry_policy=FLEET_RETRY,
        )
    except ActivityError as exc:
        reason = cause(exc)
        reading = FiguresReading(errors={n: reason for n in action.replicas})
        if action.baseline is not None:
            reading.figures = WindowFigures(unread=sorted(action.replicas))
    return reading

"""The ModelService workflow's whole state, carried whole across continue-as-new, and its input:
settings beside the state.

A run that continues-as-new hands the next run everything it knows: the spec, the endpoint
directory's answer (revision, endpoints, gateway), the doors and what each carries
(``service.route.DoorBook``), the global address and the settings it was put in place with, and
what the status reports. So the next run neither watches again (the directory signals the same
workflow ID), nor re-applies a door whose route is unchanged, nor forgets a door or an address a
later delete must remove; a delete or a spec change that arrived while the run was ending is
carried too.

Pure: pydantic models only. Bounded: the endpoints by the directory's (what the service's
selectors match), the doors by the gateway's front-door clusters.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from modelfleet.api.meta import Condition
from modelfleet.api.services import GlobalAddress, InferenceGateway, ModelService
from modelfleet.contracts.serving_payloads import EndpointHealth, GlobalAddressResult
from modelfleet.contracts.wire import WireModel
from modelfleet.rendering.front_door import EndpointRecord
from modelfleet.service.route import DoorBook


class ServiceState(WireModel):
    """Everything the service workflow knows that outlives a run (a first run's sets only
    ``spec``)."""

    spec: ModelService
    # When the resource was created: the first run's start (None until that run sets it).
    created: datetime | None = None
    # The endpoint directory's answer: its revision (-1: none yet, so the run watches), the
    # endpoints the selectors match, and the InferenceGateway (None: none applied).
    revision: int = -1
    endpoints: list[EndpointRecord] = []
    gateway: InferenceGateway | None = None
    # The spec changed since the directory was last asked (its selectors are watched again).
    spec_changed: bool = False
    deleting: bool = False
    # The last probe's verdict per endpoint key, and the weights the route carries.
    health: dict[str, EndpointHealth] = {}
    weights: dict[str, int] = {}
    # The endpoints the applied route carries (entry index and record), so the status still
    # lists one the directory withdrew until a route without it is applied.
    routed: dict[str, tuple[int, EndpointRecord]] = {}
    backends: dict[str, int] = {}
    # What each front door carries (objects, digest, address, last error).
    doors: DoorBook = Field(default_factory=DoorBook)
    # The global load balancer's answer (address, each door's health), when there is one; the
    # settings it was put in place with (what to remove it with when the gateway drops or
    # moves it, or the service goes); why the last sync failed.
    global_result: GlobalAddressResult | None = None
    global_settings: GlobalAddress | None = None
    global_error: str = ""
    # What the status reports.
    address: str | None = None
    conditions: list[Condition] = []
    phase: str = "Pending"


class ServiceInput(WireModel):
    state: ServiceState
    # Settings, passed on unchanged to the next run.
    probe_interval_seconds: float = 10.0
    probe_timeout_seconds: float = 3.0
    # The longest a health watch runs when nothing changes (then the workflow reconciles with
    # its answer and starts the next): what an idle service costs, about six history events
    # per bound.
    watch_bound_seconds: float = Field(default=600.0, gt=0)
    # Continue-as-new after this many reconciles in a run even if the server does not suggest
    # it (0: only when it does). Tests set it to exercise what a continue-as-new carries.
    reconciles_per_run: int = Field(default=0, ge=0)

    @classmethod
    def of(cls, spec: ModelService, **settings: float) -> ServiceInput:
        """A first run's input."""
        return cls(state=ServiceState(spec=spec), **settings)

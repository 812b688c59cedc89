"""The contract of the serving activities and workflows: names and payloads for publishing
endpoints, the endpoint directory, probing and the front door's keys. Pure: payload models on
:class:`~modelfleet.contracts.wire.WireModel` (unknown fields ignored across worker versions).

Payloads name secrets, never carry them: the worker resolves a secret by name inside the
activity that needs it.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from modelfleet.api.meta import Condition
from modelfleet.api.services import GlobalAddress, InferenceGateway, ServiceEndpoint
from modelfleet.contracts.wire import WireModel
from modelfleet.rendering.front_door import EndpointRecord

ENDPOINTS_ID = "endpoints"
ENDPOINT_DIRECTORY_WORKFLOW = "EndpointDirectory"
SERVICE_WORKFLOW = "ModelService"

ENDPOINTS_PUBLISH_REPLICA = "endpoints.publish_replica"
ENDPOINTS_WITHDRAW = "endpoints.withdraw"
ENDPOINTS_WATCH = "endpoints.watch"
ENDPOINTS_UNWATCH = "endpoints.unwatch"
SERVING_GATEWAY_ADDRESS = "serving.gateway_address"
SERVING_SYNC_KEYS = "serving.sync_api_keys"
SERVING_SYNC_PROVIDER_TOKENS = "serving.sync_provider_tokens"
SERVING_REMOVE_GLOBAL_ADDRESS = "serving.remove_global_address"
SERVING_ROUTES_CARRYING = "serving.routes_carrying"
SERVING_CHECK_MODELS = "serving.check_models"

LABEL_REGION = "region"


class ReplicaEndpointRequest(WireModel):
    """A Ready replica's endpoint, to be published (the activity adds URL and region)."""

    namespace: str
    replica: str
    deployment: str
    cluster: str
    labels: dict[str, str] = Field(default_factory=dict)


class EndpointKey(WireModel):
    namespace: str
    name: str


class RoutesRequest(WireModel):
    """Which front-door routes still carry a withdrawn endpoint (a replica's teardown asks)."""

    namespace: str
    endpoint: str


class RoutesCarrying(WireModel):
    """What the front-door clusters report: ``cluster/route`` of each HTTPRoute that still
    sends ``endpoint`` traffic (or whose gateway has not yet accepted the change that dropped
    it), and ``cluster: why`` of each front door that could not be read."""

    carrying: list[str] = Field(default_factory=list)
    unread: list[str] = Field(default_factory=list)


class ModelCheckRequest(WireModel):
    """A replica about to join: what it serves, and what the services that would select it
    expect."""

    namespace: str
    replica: str
    deployment: str
    cluster: str
    labels: dict[str, str] = Field(default_factory=dict)
    probe_timeout_seconds: float = 3.0


class ServiceModels(WireModel):
    """One service's expectation: the model names each of its healthy endpoints in the entries
    that select the replica serves (one list per endpoint)."""

    service: str
    served: list[list[str]] = Field(default_factory=list)


class ModelCheck(WireModel):
    expected: list[ServiceModels] = Field(default_factory=list)
    # What the replica's ``GET /v1/models`` lists (empty when nothing was expected: not asked).
    served: list[str] = Field(default_factory=list)


class WatchMatch(WireModel):
    """A service watching the directory whose entries (by index) select given labels."""

    watcher: str
    entries: list[int]


class WatchRequest(WireModel):
    """A service asking to be signalled (``endpoints_changed``) when its endpoints change."""

    watcher: str
    namespace: str
    entries: list[ServiceEndpoint]


class WatchResult(WireModel):
    endpoints: list[EndpointRecord] = Field(default_factory=list)
    gateway: InferenceGateway | None = None
    # The directory's revision this answer was computed at (see ``EndpointsChanged``).
    revision: int = 0


class EndpointsChanged(WireModel):
    endpoints: list[EndpointRecord] = Field(default_factory=list)
    gateway: InferenceGateway | None = None
    # The directory's revision (one more per change of its endpoints or gateway): a watch's
    # answer and the signals after it reach a service in either order, and the service keeps
    # the newest (a change signalled while its watch was in flight must not be overwritten by
    # the watch's older answer).
    revision: int = 0


class ProbeTarget(WireModel):
    key: str
    url: str
    auth_secret: str | None = None


class EndpointHealth(WireModel):
    key: str
    healthy: bool
    reason: str = ""
    models: list[str] = Field(default_factory=list)


class GatewayAddressRequest(WireModel):
    cluster: str


class SyncKeysRequest(WireModel):
    """Write the SHA-256 hashes of the keys in ``source_secret`` to ``secret`` on the cluster."""

    cluster: str
    namespace: str
    secret: str
    source_secret: str
    service: str


class ProviderTokensRequest(WireModel):
    """Fill each Secret (object name -> worker-side secret name) with a provider's key."""

    cluster: str
    namespace: str
    service: str
    tokens: dict[str, str]


class GlobalAddressRequest(WireModel):
    """Put a service's one address in front of its front doors on ``clusters`` (the activity
    looks up each cluster's gateway address and readiness) and report each one's health."""

    namespace: str
    service: str
    clusters: list[str]
    settings: GlobalAddress
    auth: bool = False


class FrontDoorHealth(WireModel):
    cluster: str
    # In the address: enabled (its cluster is Ready) and its health checks pass.
    healthy: bool = False
    enabled: bool = True
    reason: str = ""


class GlobalAddressResult(WireModel):
    address: str
    doors: list[FrontDoorHealth] = Field(default_factory=list)


class GlobalAddressRemoval(WireModel):
    namespace: str
    service: str
    settings: GlobalAddress


class DirectoryStart(WireModel):
    """The endpoint directory's first input as a starter that knows nothing of its state sends
    it (the publishing activities start it on first use): no state. The workflow reads it as its
    own input (``endpoints.state.EndpointsInput``) with an empty state."""


class ServiceEndpointStatus(WireModel):
    name: str
    url: str
    # Index of the spec.endpoints entry that selected it.
    entry: int
    weight: int = 0
    healthy: bool = False
    reason: str = ""
    # The model names its last probe's ``GET /v1/models`` listed.
    models: list[str] = Field(default_factory=list)


class FrontDoorStatus(WireModel):
    """One gateway cluster carrying the service's route."""

    cluster: str
    address: str | None = None
    # ``Serving`` (route applied; in the global address when there is one), ``Out`` (its
    # health checks fail: out of the global address), ``Disabled`` (its cluster is not Ready:
    # withdrawn from the global address), ``Configuring`` (the route is not applied yet).
    state: str = "Configuring"
    reason: str = ""


class ServiceStatus(WireModel):
    name: str
    namespace: str
    phase: str
    address: str | None = None
    gateway_cluster: str | None = None
    endpoints: list[ServiceEndpointStatus] = Field(default_factory=list)
    # The route's backends as applied: backend Service name -> weight.
    backends: dict[str, int] = Field(default_factory=dict)
    conditions: list[Condition] = Field(default_factory=list)
    auth: bool = False
    # When the service was created (kept across the workflow's continue-as-new).
    created: datetime | None = None
    # How the front door contains a failing endpoint (ejection and retries), in words.
    containment: str = ""
    # Every front door (gateway cluster) of the service, ``gateway_cluster`` first.
    front_doors: list[FrontDoorStatus] = Field(default_factory=list)
    # The one stable address in front of them (the InferenceGateway's ``globalAddress``);
    # ``address`` is this when set.
    global_address: str | None = None

"""The payloads between the ModelAutoscaler workflow and its activities (``autoscaler.target``,
``autoscaler.read_metrics``, ``autoscaler.scale``; names in ``activity_names``).

Payloads stay small (replica names, clusters and a few numbers per replica) and name clusters,
never credentials. Layer rule: pure pydantic on the wire base model.
"""

from __future__ import annotations

from pydantic import Field

from modelfleet.contracts.wire import WireModel


class ReplicaLoad(WireModel):
    """One replica of the target as the metrics reader saw it."""

    name: str
    # Only Ready replicas report load; the others count as HPA counts not-yet-ready pods.
    ready: bool
    # Metric name -> this replica's value; a metric absent here is missing for this replica.
    values: dict[str, float] = Field(default_factory=dict)
    # Why a Ready replica's metrics could not be read (kept for the decision's reason).
    error: str = ""


class TargetRequest(WireModel):
    # The deployment's workflow (IDs belong to the workflows layer, so the caller names it).
    workflow_id: str
    namespace: str
    name: str


class TargetReplica(WireModel):
    name: str
    cluster: str
    ready: bool


class TargetState(WireModel):
    """The target deployment as its workflow reports it (its ``status`` query)."""

    found: bool
    # spec.replicas: what the deployment is asked to run (HPA's current replicas).
    desired: int = 0
    # Replicas the Fleet placed; fewer than desired is a capacity shortfall.
    scheduled: int = 0
    # Live replicas (not terminating or failed), Ready or still starting.
    replicas: list[TargetReplica] = Field(default_factory=list)
    summary: str = ""


class PromQuery(WireModel):
    label: str
    url: str
    query: str


class ReadMetricsRequest(WireModel):
    # The deployment's namespace (the workload namespace on each cluster derives from it).
    namespace: str
    replicas: list[TargetReplica]
    metrics: list[str]
    queries: list[PromQuery] = Field(default_factory=list)


class ReadMetricsResult(WireModel):
    replicas: list[ReplicaLoad] = Field(default_factory=list)
    totals: dict[str, float | None] = Field(default_factory=dict)


class ScaleTargetRequest(WireModel):
    # Deterministic per decision, so a retried activity does not scale twice.
    request_id: str
    workflow_id: str
    namespace: str
    name: str
    replicas: int


class ScaleTargetResult(WireModel):
    accepted: bool
    desired: int = 0
    reason: str = ""


class GatewayWaitingRequest(WireModel):
    """Ask how many requests wait at the fleet's gateway for the ModelServices that would
    route to the target deployment (scale from zero)."""

    namespace: str
    deployment: str
    # The deployment's workflow (its ``spec`` query gives the labels its endpoints will carry).
    deployment_workflow_id: str
    # A visibility query for the namespace's running ModelService workflows (search attribute
    # names belong to the workflows layer, so the caller writes it).
    services_query: str


class GatewayWaitingResult(WireModel):
    # Requests held at the gateway for those services; None when it could not be told.
    waiting: float | None = None
    # The ModelServices whose selectors would take the deployment's replicas.
    services: list[str] = Field(default_factory=list)
    # Why ``waiting`` is None, or where it was read.
    note: str = ""


class EngineErrorsRequest(WireModel):
    """One replica's engines, on its cluster: what they answered so far."""

    cluster: str
    # The deployment's namespace (the workload namespace on the cluster derives from it).
    namespace: str
    replica: str


class EngineErrors(WireModel):
    """Inference requests a replica's engines answered since they started, and how many of
    those were 5xx (their ``http_requests_total``); ``error`` when they could not be read."""

    requests: int = 0
    errors: int = 0
    error: str = ""

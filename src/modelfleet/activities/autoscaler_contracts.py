"""The contract between the ModelAutoscaler workflow and its activities: activity names and the
payloads they exchange. Pure (no SDK, no I/O), so the workflow may import it.

Payloads stay small (replica names, clusters and a few numbers per replica) and name clusters,
never credentials. Unknown fields are ignored so old and new workers interoperate during a
rolling upgrade.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field

from modelfleet.api.meta import Model
from modelfleet.autoscaling.records import ReplicaLoad

AUTOSCALER_TARGET = "autoscaler.target"
AUTOSCALER_READ_METRICS = "autoscaler.read_metrics"
AUTOSCALER_SCALE = "autoscaler.scale"


class Contract(Model):
    model_config = ConfigDict(extra="ignore")


class TargetRequest(Contract):
    namespace: str
    name: str


class TargetReplica(Contract):
    name: str
    cluster: str
    ready: bool


class TargetState(Contract):
    """The target deployment as its workflow reports it (its ``status`` query)."""

    found: bool
    # spec.replicas: what the deployment is asked to run (HPA's current replicas).
    desired: int = 0
    # Replicas the Fleet placed; fewer than desired is a capacity shortfall.
    scheduled: int = 0
    # Live replicas (not terminating or failed), Ready or still starting.
    replicas: list[TargetReplica] = Field(default_factory=list)
    summary: str = ""


class PromQuery(Contract):
    label: str
    url: str
    query: str


class ReadMetricsRequest(Contract):
    # The deployment's namespace (the workload namespace on each cluster derives from it).
    namespace: str
    replicas: list[TargetReplica]
    metrics: list[str]
    queries: list[PromQuery] = Field(default_factory=list)


class ReadMetricsResult(Contract):
    replicas: list[ReplicaLoad] = Field(default_factory=list)
    totals: dict[str, float | None] = Field(default_factory=dict)


class ScaleTargetRequest(Contract):
    # Deterministic per decision, so a retried activity does not scale twice.
    request_id: str
    namespace: str
    name: str
    replicas: int


class ScaleTargetResult(Contract):
    accepted: bool
    desired: int = 0
    reason: str = ""

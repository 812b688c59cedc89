"""What the workflows report: replica phases and steps, deployment and cluster status, fleet
views and decisions. Pure pydantic models shared by workflows (signals, query and Update
results) and the CLI.

Every model is a :class:`~modelfleet.contracts.wire.WireModel`, so a CLI or worker of another
version reads them (see there); every field added later needs a default.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from pydantic import Field

from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelReplica
from modelfleet.api.meta import Condition
from modelfleet.contracts.cloud_payloads import ClusterStep
from modelfleet.contracts.kube_payloads import PoolObservation
from modelfleet.contracts.wire import WireModel
from modelfleet.scheduling.snapshot import QueueCapacity

if TYPE_CHECKING:
    from modelfleet.scheduling.fleet_placement import ObservedCluster


class ReplicaPhase(StrEnum):
    PENDING = "Pending"
    PROGRESSING = "Progressing"
    READY = "Ready"
    DEGRADED = "Degraded"
    # Its cluster's API does not answer: it may still serve, nobody can tell (issue 29).
    UNKNOWN = "Unknown"
    FAILED = "Failed"
    TERMINATING = "Terminating"
    TERMINATED = "Terminated"


class ReplicaStep(StrEnum):
    PLACED = "placed"
    MODEL_CACHE = "wait-model-cache"
    NAMESPACE = "ensure-namespace"
    CLAIMS = "stage-claims"
    WORKLOADS = "create-gangs"
    LEADER_READY = "wait-leader-ready"
    ROUTING = "wire-routing"
    ROUTING_READY = "wait-routing-ready"
    CHECK_MODELS = "check-models"
    SERVING = "serving"
    COMPENSATING = "compensating"
    TEARDOWN = "teardown"
    DONE = "done"


class ReplicaProgress(WireModel):
    """A replica workflow's report to its deployment (signal payload)."""

    name: str
    phase: ReplicaPhase
    step: ReplicaStep
    reason: str = ""
    at: datetime | None = None
    # Container restarts the replica's engines showed when it last left Ready (0: none seen).
    restarts: int = 0
    # Failed because its cluster could not be reached (every attempt of a step hung or got a
    # retryable API error), not because of what it runs: the deployment retries elsewhere.
    infrastructure: bool = False


class ReplicaStatus(WireModel):
    name: str
    cluster: str
    index: int
    phase: ReplicaPhase
    step: ReplicaStep
    reason: str = ""
    template_hash: str = ""
    pools: dict[str, str] = Field(default_factory=dict)  # engine -> pool
    updated: datetime | None = None
    # When it last became Ready (kept when it leaves Ready, for how long it lasted).
    ready_since: datetime | None = None
    restarts: int = 0
    # Its rollout failed because its cluster could not be reached (see ``ReplicaProgress``).
    infrastructure: bool = False
    # Placed outside the deployment's home clusters (``strategy.borrow: Fleet``), and why
    # ("" at home): a later surge brings it home when room appears there.
    borrowed: str = ""


class DeploymentStatus(WireModel):
    namespace: str
    name: str
    generation: int
    desired: int
    scheduled: int
    ready: int
    updated: int
    phase: str
    conditions: list[Condition] = Field(default_factory=list)
    replicas: list[ReplicaStatus] = Field(default_factory=list)
    rejections: dict[str, str] = Field(default_factory=dict)
    summary: str = ""
    deleting: bool = False
    # ``rollout pause``d: no new template is rolled out until resumed.
    paused: bool = False
    # When the deployment was created (kept across the workflow's continue-as-new).
    created: datetime | None = None
    # The generation the last finished reconcile pass (and the scheduler's answer in the
    # conditions, rejections and summary) was for.
    observed_generation: int = 0


class ClusterRecord(WireModel):
    """The Fleet's view of one cluster: its spec and what its workflow last observed."""

    spec: InferenceCluster
    ready: bool = False
    reason: str = "not yet probed"
    gateway_address: str | None = None
    observed_pools: dict[str, PoolObservation] = Field(default_factory=dict)
    # The gang scheduler's queue as last probed (None: no gang scheduler).
    queue: QueueCapacity | None = None
    not_ready_since: datetime | None = None
    # When its probes started failing (None: its last probe answered): no new replicas go there,
    # even while it still counts as Ready.
    unreachable_since: datetime | None = None
    draining: bool = False
    # ModelCaches by ``<namespace>/<name>``: how each stands here (``Ready``, ``Hydrating 40%``,
    # ``Failed: ...``), as its ModelCache workflow last reported. Absent: not staged here.
    caches: dict[str, str] = Field(default_factory=dict)

    def observed(self) -> ObservedCluster:
        """The record as placement sees it (the Fleet and `apply --dry-run` alike)."""
        # Imported here: the placement module loads the CEL runtime, which touches the locale at
        # import; status models are imported inside workflow sandboxes that must not do that.
        from modelfleet.scheduling.fleet_placement import ObservedCluster

        return ObservedCluster(
            spec=self.spec,
            ready=self.ready,
            reachable=self.unreachable_since is None,
            gateway_address=self.gateway_address,
            ready_nodes={pool: seen.ready_nodes for pool, seen in self.observed_pools.items()},
            draining=self.draining,
            devices={
                pool: seen.devices
                for pool, seen in self.observed_pools.items()
                if seen.devices is not None
            },
            caches=dict(self.caches),
            queue=self.queue,
        )


class Decision(WireModel):
    """One placement decision, kept (bounded) for ``describe``."""

    at: datetime
    namespace: str
    deployment: str
    desired: int
    placed: list[str] = Field(default_factory=list)
    victims: list[str] = Field(default_factory=list)
    summary: str = ""
    rejections: dict[str, str] = Field(default_factory=dict)


class FleetView(WireModel):
    classes: list[str]
    clusters: list[ClusterRecord]
    replicas: list[ModelReplica]


class DecisionQuery(WireModel):
    namespace: str
    deployment: str
    limit: int = 20


class StackPiece(WireModel):
    """One serving-stack component as a cluster's workflow last verified it."""

    name: str
    version: str
    api_version: str
    # None: not verified yet.
    served: bool | None = None
    problem: str = ""


class ClusterStatus(WireModel):
    name: str
    phase: str
    ready: bool
    reason: str = ""
    gateway_address: str | None = None
    observed_pools: dict[str, PoolObservation] = Field(default_factory=dict)
    # The gang scheduler's queue as last probed (None: no gang scheduler).
    queue: QueueCapacity | None = None
    failed_probes: int = 0
    last_probe: datetime | None = None
    # The step running now ("" when none is), and every step so far with its times.
    step: str = ""
    steps: list[ClusterStep] = Field(default_factory=list)
    # The serving stack's pinned components and whether the cluster serves each.
    stack: list[StackPiece] = Field(default_factory=list)
    # Typed conditions (Reachable, Provisioned, AccessGranted, ServingStack), type order.
    conditions: list[Condition] = Field(default_factory=list)
    # When the cluster was created (kept across the workflow's continue-as-new).
    created: datetime | None = None
    # It went NotReady after being Ready: when it is Ready again, what replicas that moved away
    # left on it is swept (``cluster.sweep``), so a teardown may leave that to it.
    sweep_pending: bool = False

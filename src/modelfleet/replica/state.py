"""The ModelReplica workflow's state that outlives a run, carried whole across continue-as-new,
and its input: the replica and its settings beside the state.

A run continued while serving starts in the serving loop with everything the last one knew:
when it became Ready, what it applied (so teardown deletes what is really there even if the
renderer has changed since), a repair's deadline, its phase and reason, whether its endpoint is
published and what the deployment was last told, the health checks failed in a row, the
cluster's news not yet acted on and a teardown already asked for. So it neither publishes its
endpoint nor tells its deployment again, nor reports a Degraded replica Ready.

Pure: pydantic models only. Bounded: ``applied`` by the objects one replica renders, ``news``
by the handler (the last 8).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from modelfleet.api.deployments import ModelReplica
from modelfleet.contracts.kube_payloads import ObjectRef
from modelfleet.contracts.status import ReplicaPhase, ReplicaProgress, ReplicaStep
from modelfleet.contracts.watch_payloads import HealthNews
from modelfleet.contracts.wire import WireModel
from modelfleet.rendering.facts import ClusterFacts


class ReplicaState(WireModel):
    """Everything the replica workflow knows that outlives a run (a first run's is empty)."""

    # When it became Ready: None in a first run, which rolls the replica out; a run continued
    # from another starts serving.
    serving_since: datetime | None = None
    # References of every object a step applied (from kube.apply's answer), in order.
    applied: list[ObjectRef] = []
    # When a repair started and the replica is not Ready again yet: by when it must be (else
    # it fails and is re-placed).
    repair_deadline: datetime | None = None
    phase: ReplicaPhase = ReplicaPhase.PENDING
    step: ReplicaStep = ReplicaStep.PLACED
    reason: str = ""
    # Container restarts shown when it last left Ready (the evidence of a crash loop), and the
    # cluster's reason that left it so (the replica's own reason is the pods' story).
    restarts: int = 0
    health_reason: str = ""
    # Its ModelEndpoint is published; it was at some time (a route may still carry it after a
    # withdrawal made while Degraded, so its teardown drains too).
    published: bool = False
    ever_published: bool = False
    # What the parent deployment was last told.
    told: ReplicaProgress | None = None
    # Health checks failed in a row (a polling replica's verdict over time).
    failed_checks: int = 0
    # What the cluster's replica watch said since the serving loop last looked.
    news: list[HealthNews] = []
    teardown: bool = False


class ReplicaInput(WireModel):
    replica: ModelReplica
    parent_id: str
    # Settings, passed on unchanged to the next run.
    progress_deadline_seconds: int = 1800
    # Restarts in CrashLoopBackOff before Ready that fail the rollout at once (0: never).
    crash_loop_restarts: int = 0
    facts: ClusterFacts = ClusterFacts()
    health_interval_seconds: int = 30
    # Drift repair: how often the replica compares what it applied with what the cluster holds
    # when nothing else prompts it (a failed health check does at once).
    drift_resync_seconds: int = Field(default=300, ge=1)
    # Health over time: consecutive failed health checks before the replica is Degraded (the
    # cluster reporting its readiness condition False counts at once; API errors never count).
    degraded_after_checks: int = Field(default=3, ge=1)
    # The longest a replica that served waits, between withdrawing its endpoint and deleting
    # its objects, for the front-door clusters to report that no route carries it any more
    # (``replica.drain``); past it the objects go anyway, and the replica says so. 0: no wait.
    drain_seconds: int = Field(default=60, ge=0, le=600)
    # Continue-as-new while serving after this many turns of the serving loop even if the
    # server does not suggest it (0: only when it does). Tests set it to exercise what a
    # continue-as-new carries.
    turns_per_run: int = Field(default=0, ge=0)
    # Carried across continue-as-new (a first run's is empty).
    state: ReplicaState = Field(default_factory=ReplicaState)

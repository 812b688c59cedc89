"""Inputs and results of the workflows: what a client or parent starts each workflow with, what
it carries across continue-as-new, and what a replica workflow ends with.

A workflow's input is read back from history on replay and after continue-as-new, possibly by a
worker of another version. Every model is a :class:`~modelfleet.contracts.wire.WireModel` (see
there); every field added later needs a default. The ModelDeployment and InferenceCluster
workflows' inputs live with their state (``deployment.state``, ``cluster.state``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from modelfleet.api.classes import InferenceClass
from modelfleet.api.deployments import ModelReplica
from modelfleet.contracts.fleet_state import ClusterEntry, CompactAnswer, CompactLedger
from modelfleet.contracts.kube_payloads import ObjectRef
from modelfleet.contracts.status import Decision, ReplicaPhase
from modelfleet.contracts.wire import WireModel
from modelfleet.rendering.facts import ClusterFacts


class FleetLimits(WireModel):
    """When the Fleet continues-as-new, and how much it may hold (see ``fleet.workflow``)."""

    # History length and bytes past which the Fleet continues-as-new: replaying ~2,000 events
    # (~400 placements) after a cache eviction stays a few seconds, far below the task timeout.
    max_history_events: int = 2_000
    max_history_bytes: int = 8 * 1024 * 1024
    # The ledger's size guard: the compact state costs ~40-60 bytes per replica, so this keeps
    # the continue-as-new input near 1 MiB at most, well under Temporal's 2 MiB payload limit.
    max_replicas: int = 20_000
    # How long a cluster may stay NotReady before its replicas are re-placed elsewhere, counted
    # from its first failed probe when it went silent: long enough that a blip does not move
    # serving replicas, short enough that failover starts within 3 minutes of the silence (a
    # probe notices it within 50 s). ``worker.tuning`` sets it.
    not_ready_grace_seconds: int = Field(default=120, ge=1)


class FleetState(WireModel):
    """The Fleet workflow's whole state, carried across continue-as-new, in compact form (see
    ``contracts.fleet_state``)."""

    classes: dict[str, InferenceClass] = {}
    # When each class was first applied (``get classes``' AGE), by name.
    class_created: dict[str, datetime] = {}
    decisions: list[Decision] = []
    cluster_entries: dict[str, ClusterEntry] = {}
    layouts: dict[str, list[Any]] = {}
    ledger: CompactLedger | None = None
    remembered: dict[str, CompactAnswer] = {}
    version: int = 0


class FleetInput(WireModel):
    state: FleetState | None = None
    limits: FleetLimits = FleetLimits()


class ReplicaInput(WireModel):
    replica: ModelReplica
    parent_id: str
    progress_deadline_seconds: int = 1800
    # Restarts in CrashLoopBackOff before Ready that fail the rollout at once (0: never).
    crash_loop_restarts: int = 0
    facts: ClusterFacts = ClusterFacts()
    # Carried across continue-as-new while serving.
    serving_since: datetime | None = None
    health_interval_seconds: int = 30
    # What the rollout applied (references only), carried across continue-as-new so teardown
    # deletes what is really there even if the renderer has changed since.
    applied: list[ObjectRef] = []
    # Drift repair: how often the replica compares what it applied with what the cluster holds
    # when nothing else prompts it (a failed health check does at once).
    drift_resync_seconds: int = Field(default=300, ge=1)
    # Health over time: consecutive failed health checks before the replica is Degraded (the
    # cluster reporting its readiness condition False counts at once; API errors never count).
    degraded_after_checks: int = Field(default=3, ge=1)
    # When a repair started and the replica is not Ready again yet: by when it must be, carried
    # across continue-as-new (else it fails and is re-placed).
    repair_deadline: datetime | None = None
    # The longest a replica that served waits, between withdrawing its endpoint and deleting
    # its objects, for the front-door clusters to report that no route carries it any more
    # (``replica.drain``); past it the objects go anyway, and the replica says so. 0: no wait.
    drain_seconds: int = Field(default=60, ge=0, le=600)


class ReplicaResult(WireModel):
    name: str
    phase: ReplicaPhase
    reason: str = ""

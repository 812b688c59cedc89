"""Inputs and results of the workflows: what a client or parent starts each workflow with, what
it carries across continue-as-new, and what a replica workflow ends with.

A workflow's input is read back from history on replay and after continue-as-new, possibly by a
worker of another version. Every model is a :class:`~modelfleet.contracts.wire.WireModel` (see
there); every field added later needs a default. The ModelDeployment and InferenceCluster
workflows' inputs live with their state (``deployment.state``, ``cluster.state``,
``replica.state``, ``service.state``, ...).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from modelfleet.api.classes import InferenceClass
from modelfleet.contracts.fleet_state import ClusterEntry, CompactAnswer, CompactLedger
from modelfleet.contracts.status import Decision, ReplicaPhase
from modelfleet.contracts.wire import WireModel


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


class ReplicaResult(WireModel):
    name: str
    phase: ReplicaPhase
    reason: str = ""

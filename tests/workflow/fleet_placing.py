"""Placing through a Fleet in workflow tests as the product's ``fleet.place`` and
``fleet.dry_place`` activities do (issue 22): the worker's copy of the fleet computes, the
Fleet's ``commit`` Update books. One placer (one worker's copy) per Fleet workflow, kept for the
test's duration, as a worker process keeps its copy."""

from __future__ import annotations

from typing import Any

from temporalio.client import WorkflowHandle

from modelfleet.activities.fleet_updates import FleetActivities
from modelfleet.fleet.mirror import FleetMirror

_PLACERS: dict[str, FleetActivities] = {}


def placer(handle: WorkflowHandle[Any, Any]) -> FleetActivities:
    """The placer of the Fleet ``handle`` names: a fresh worker copy the first time."""
    found = _PLACERS.get(handle.id)
    if found is None:
        found = _PLACERS[handle.id] = FleetActivities(
            handle._client, copy=FleetMirror(), fleet_id=handle.id
        )
    return found


def fresh_placer(handle: WorkflowHandle[Any, Any]) -> FleetActivities:
    """Another worker's copy of the same Fleet (read from nothing)."""
    return FleetActivities(handle._client, copy=FleetMirror(), fleet_id=handle.id)

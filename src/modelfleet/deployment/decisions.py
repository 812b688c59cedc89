"""Rollout decisions for the ModelDeployment workflow, as pure functions of its state.

The workflow keeps one ``DeploymentState``; it asks ``next_action`` what to do, carries the
action out (an activity, a child workflow, a signal, a wait), and feeds what happened back
through the functions in ``events``. Everything here is pure: no I/O, no clock, no Temporal,
so every decision is unit-tested without a server (tests/unit/test_rollout_*.py).

This module only gathers them, for the workflow and the tests: ``decide`` drives a pass,
``roll`` chooses how replicas are replaced, ``analysis`` runs a canary's steps, ``failures``
says what has failed and rolls back, ``events`` folds in what happened, ``report`` words the
status.

May import: ``api``, the ``contracts`` models, the ``deployment`` decision modules, the
standard library and pydantic. Nothing else.

Extending it: a new step of a pass is a new op in ``state`` (what is left to do, as data) with
its branch in ``decide._step``; a new kind of outcome is a function in ``events``; a new thing for
the workflow to do is an action in ``actions`` and one branch in the workflow's loop. So a
placement that only checks whether the new template fits, ahead of a roll, is an op before
``Roll`` (``DryPlace``); a bounded teardown is a deadline on ``Wait``; cancelling a replica's
rollout is an action. Nothing is released yet, so there are no replay patches: a change to
the actions taken re-records the golden history (``tests/replay/record_histories.py``).
"""

from modelfleet.deployment.actions import (
    Action,
    CheckErrors,
    CheckPlacement,
    DryPlace,
    EndPass,
    Finish,
    Forget,
    Place,
    ReadFigures,
    Rest,
    SignalTeardown,
    StartReplica,
    Wait,
)
from modelfleet.deployment.decide import (
    MAX_CLUSTER_RETRIES,
    RESYNC_INTERVAL,
    next_action,
    rest_over,
    wait_over,
    woke,
)
from modelfleet.deployment.events import (
    aborted_canary,
    applied,
    avoided,
    canary_in_progress,
    carried,
    deleted,
    dry_place_request,
    dry_placed,
    errors_counted,
    figures_read,
    fleet_failed,
    forgotten,
    paused,
    place_request,
    placed,
    placement_checked,
    progressed,
    promoted_canary,
    resumed,
    resync,
    scaled,
    standing,
    started,
)
from modelfleet.deployment.failures import (
    AVOID_AFTER_FAILURE,
    after_ready,
    crash_looping,
    failed_after_roll,
    failed_replacement,
)
from modelfleet.deployment.report import SearchValues, details, held_back, report, search_values
from modelfleet.deployment.roll import WAITING_FOR_HEALTH, in_place_allowed, proven
from modelfleet.deployment.state import (
    DeploymentState,
    LogEntry,
    Revision,
    Stage,
    effective_spec,
    promote,
    rollback_window_end,
    template_hash,
)

__all__ = [
    "AVOID_AFTER_FAILURE",
    "MAX_CLUSTER_RETRIES",
    "RESYNC_INTERVAL",
    "WAITING_FOR_HEALTH",
    "Action",
    "CheckErrors",
    "CheckPlacement",
    "DeploymentState",
    "DryPlace",
    "EndPass",
    "Finish",
    "Forget",
    "LogEntry",
    "Place",
    "ReadFigures",
    "Rest",
    "Revision",
    "SearchValues",
    "SignalTeardown",
    "Stage",
    "StartReplica",
    "Wait",
    "aborted_canary",
    "after_ready",
    "applied",
    "avoided",
    "canary_in_progress",
    "carried",
    "crash_looping",
    "deleted",
    "details",
    "dry_place_request",
    "dry_placed",
    "effective_spec",
    "errors_counted",
    "failed_after_roll",
    "failed_replacement",
    "figures_read",
    "fleet_failed",
    "forgotten",
    "held_back",
    "in_place_allowed",
    "next_action",
    "paused",
    "place_request",
    "placed",
    "placement_checked",
    "progressed",
    "promote",
    "promoted_canary",
    "proven",
    "report",
    "rest_over",
    "resumed",
    "resync",
    "rollback_window_end",
    "scaled",
    "search_values",
    "standing",
    "started",
    "template_hash",
    "wait_over",
    "woke",
]

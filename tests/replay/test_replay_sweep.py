"""The goldens of the InferenceCluster's orphan sweep (recorded by
``record_sweep_cluster_history.py``) hold what they are meant to guard: ``swept-cluster.json``
the patch marker and the sweep's activities in their safe order (list the cluster, then the
ledger, then delete) after the cluster came back; ``resync-swept-cluster.json`` the resync
patch's marker, the follow-ups after the return and the resync sweep later. (``test_replay.py``
replays them with every other golden.)"""

from __future__ import annotations

from datetime import timedelta
from itertools import pairwise

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from test_replay import activities, load, of_type

from modelfleet.cluster.sweep import PATCH_SWEEP, PATCH_SWEEP_RESYNC
from modelfleet.cluster.sweep_schedule import FOLLOW_UPS
from modelfleet.contracts.activity_names import (
    FLEET_REPLICAS_ON,
    KUBE_REPLICAS_FOUND,
    KUBE_SWEEP_REPLICAS,
)

SWEPT = {KUBE_REPLICAS_FOUND, FLEET_REPLICAS_ON, KUBE_SWEEP_REPLICAS}


def _markers(history: WorkflowHistory) -> list[bytes]:
    return [
        e.marker_recorded_event_attributes.SerializeToString()
        for e in of_type(history, EventType.EVENT_TYPE_MARKER_RECORDED)
    ]


def test_sweep_golden_holds_the_patch_and_the_sweep_in_order() -> None:
    history = load("swept-cluster.json")
    markers = _markers(history)
    assert any(PATCH_SWEEP.encode() in m for m in markers)
    # The path from before the follow-ups and the resync: it must keep replaying without them.
    assert not any(PATCH_SWEEP_RESYNC.encode() in m for m in markers)
    names = list(activities(history))
    swept = [n for n in names if n in {KUBE_REPLICAS_FOUND, KUBE_SWEEP_REPLICAS}]
    assert swept == [KUBE_REPLICAS_FOUND, KUBE_SWEEP_REPLICAS]
    found, sweep = names.index(KUBE_REPLICAS_FOUND), names.index(KUBE_SWEEP_REPLICAS)
    assert FLEET_REPLICAS_ON in names[found:sweep]


def test_resync_golden_holds_the_follow_ups_and_the_resync() -> None:
    """Back from dark: the return sweep keeps a held replica (list, ledger, no delete); the first
    follow-up deletes it, now released; the follow-ups stop after their bound (a serving replica
    stays held); the resync a period later deletes what was left meanwhile."""
    history = load("resync-swept-cluster.json")
    markers = _markers(history)
    assert any(PATCH_SWEEP.encode() in m for m in markers)
    assert any(PATCH_SWEEP_RESYNC.encode() in m for m in markers)
    scheduled = [
        (e.event_time.ToDatetime(), e.activity_task_scheduled_event_attributes.activity_type.name)
        for e in of_type(history, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
    ]
    sweeps = [(t, n) for t, n in scheduled if n in SWEPT]
    last = max(i for i, (_, n) in enumerate(sweeps) if n == KUBE_SWEEP_REPLICAS)
    rounds: list[list[str]] = []
    starts = []
    for t, name in sweeps[: last + 1]:  # after it, the delete's drain asks the ledger
        if name == KUBE_REPLICAS_FOUND:
            rounds.append([])
            starts.append(t)
        rounds[-1].append(name)
    listed = [KUBE_REPLICAS_FOUND, FLEET_REPLICAS_ON]
    deleted = [*listed, KUBE_SWEEP_REPLICAS]
    assert rounds == [listed, deleted] + [listed] * (FOLLOW_UPS - 1) + [deleted]
    follow_up_gaps = [b - a for a, b in pairwise(starts[:-1])]
    assert all(gap < timedelta(seconds=60) for gap in follow_up_gaps), follow_up_gaps
    # The resync: a period (120 s when recorded) after the last follow-up, not at a next probe.
    assert starts[-1] - starts[-2] >= timedelta(seconds=100)

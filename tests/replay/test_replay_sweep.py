"""The golden of the InferenceCluster's orphan sweep (``swept-cluster.json``, recorded by
``record_sweep_cluster_history.py``) holds what it is meant to guard: the patch marker, and the
sweep's activities in their safe order (list the cluster, then the ledger, then delete) after
the cluster came back. (``test_replay.py`` replays it with every other golden.)"""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from test_replay import activities, load, of_type

from modelfleet.contracts.activity_names import (
    FLEET_REPLICAS_ON,
    KUBE_REPLICAS_FOUND,
    KUBE_SWEEP_REPLICAS,
)
from modelfleet.workflows.cluster_sweep import PATCH_SWEEP


def test_sweep_golden_holds_the_patch_and_the_sweep_in_order() -> None:
    history = load("swept-cluster.json")
    markers = [
        e.marker_recorded_event_attributes.SerializeToString()
        for e in of_type(history, EventType.EVENT_TYPE_MARKER_RECORDED)
    ]
    assert any(PATCH_SWEEP.encode() in m for m in markers)
    names = list(activities(history))
    swept = [n for n in names if n in {KUBE_REPLICAS_FOUND, KUBE_SWEEP_REPLICAS}]
    assert swept == [KUBE_REPLICAS_FOUND, KUBE_SWEEP_REPLICAS]
    found, sweep = names.index(KUBE_REPLICAS_FOUND), names.index(KUBE_SWEEP_REPLICAS)
    assert FLEET_REPLICAS_ON in names[found:sweep]

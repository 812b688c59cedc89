"""The InferenceCluster golden (``cluster.json``, recorded by ``record_cluster_history.py``) tells
the story it was recorded for: a GKE cluster provisioned by the saga, reviewed and verified
before it is Ready, its pools reconciled, a dark spell and the return sweep, then deleted and
deprovisioned. (``test_replay.py`` replays it with every other golden.)"""

from __future__ import annotations

from test_replay import activities, load, updates

from modelfleet.contracts.activity_names import (
    FLEET_REPLICAS_ON,
    KUBE_PROBE,
    KUBE_REPLICAS_FOUND,
)


def test_the_cluster_golden_is_provisioned_reconciled_swept_and_deprovisioned() -> None:
    history = load("cluster.json")
    steps = activities(history)
    assert steps[0] == "fleet.classes"
    cloud = [a for a in steps if a.startswith("gke.")]
    assert cloud[:3] == ["gke.create_cluster", "gke.create_node_pool", "gke.write_kubeconfig"]
    # Reachable: the credentials reviewed, then the serving stack verified, before Ready.
    first_probe = steps.index(KUBE_PROBE)
    assert steps[first_probe + 1 : first_probe + 3] == ["kube.check_access", "kube.verify_stack"]
    # A pool added and one resized, then the added pool removed (the apply asked the Fleet).
    after = cloud[3:]
    assert after[:3] == ["gke.list_node_pools", "gke.create_node_pool", "gke.update_node_pool"]
    assert after[3:5] == ["gke.list_node_pools", "gke.delete_node_pool"]
    assert steps.count("fleet.replicas_by_pool") >= 1
    assert "apply" in updates(history)
    # Back from dark: the return sweep listed the cluster.
    assert KUBE_REPLICAS_FOUND in steps
    # Deleted: drained (the Fleet asked what is left), withdrawn, deprovisioned.
    assert FLEET_REPLICAS_ON in steps[steps.index(KUBE_REPLICAS_FOUND) + 1 :]
    assert cloud[-2:] == ["gke.delete_node_pool", "gke.delete_cluster"]
    assert "delete" in updates(history)

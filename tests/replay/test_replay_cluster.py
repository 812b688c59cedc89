"""The provisioning paths of the InferenceCluster workflow are covered by golden histories
(recorded by ``record_cloud_histories.py``; ``test_replay.py`` replays every golden): they
contain the saga's steps in order, the compensation in reverse, and the patch marker that
keeps pre-provisioning runs replaying the old branch."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from test_replay import activities, load, of_type

from modelfleet.cluster.workflow import PATCH_ACCESS, PATCH_POOL_CHANGES, PATCH_PROVISION


def _patches(filename: str) -> list[str]:
    """The patch markers, as text (the SDK core writes the patch ID into the details)."""
    return [
        str(e.marker_recorded_event_attributes)
        for e in of_type(load(filename), EventType.EVENT_TYPE_MARKER_RECORDED)
        if e.marker_recorded_event_attributes.marker_name == "core_patch"
    ]


def test_provisioned_history_runs_the_saga_then_deprovisions_on_delete() -> None:
    steps = [a for a in activities(load("provisioned-cluster-gke.json")) if "." in a]
    cloud = [a for a in steps if a.startswith("gke.")]
    assert cloud == [
        "gke.create_cluster",
        "gke.create_node_pool",
        "gke.write_kubeconfig",
        "gke.delete_node_pool",
        "gke.delete_cluster",
    ]
    assert steps[0] == "fleet.classes"
    # Once reachable, the serving stack is verified before the cluster counts as Ready.
    assert steps.index("kube.verify_stack") == steps.index("kube.probe") + 1
    assert any(PATCH_PROVISION in p for p in _patches("provisioned-cluster-gke.json"))


def test_rolled_back_history_compensates_in_reverse() -> None:
    history = load("rolled-back-cluster-gke.json")
    cloud = [a for a in activities(history) if a.startswith("gke.")]
    assert cloud == [
        "gke.create_cluster",
        "gke.create_node_pool",
        "gke.create_node_pool",
        "gke.delete_node_pool",
        "gke.delete_node_pool",
        "gke.delete_cluster",
    ]
    failures = [
        f.activity_task_failed_event_attributes.failure.application_failure_info.type
        for f in of_type(history, EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED)
    ]
    assert failures == ["CloudQuotaExceeded"]
    assert "kube.probe" not in activities(history)


def test_a_run_from_before_provisioning_keeps_its_old_branch() -> None:
    history = load("unprovisioned-cluster-gke.json")
    assert not [a for a in activities(history) if a.startswith(("gke.", "fleet.classes"))]
    assert _patches("unprovisioned-cluster-gke.json") == []
    assert "ProvisioningNotSupported" in str(history.events)


def test_access_reviewed_history_is_not_ready_until_the_review_passes() -> None:
    history = load("access-reviewed-cluster.json")
    steps = activities(history)
    reviews = [i for i, a in enumerate(steps) if a == "kube.check_access"]
    assert len(reviews) >= 2, "denied first, then reviewed again on a later probe"
    # The stack is verified only once the credentials may do everything.
    assert steps.index("kube.verify_stack") > reviews[-1]
    assert any(PATCH_ACCESS in p for p in _patches("access-reviewed-cluster.json"))
    assert "AccessDenied" in str(history.events)


def test_pools_changed_history_creates_resizes_then_deletes_the_removed_pool() -> None:
    history = load("pools-changed-cluster-gke.json")
    cloud = [a for a in activities(history) if a.startswith("gke.")]
    after = cloud[cloud.index("gke.write_kubeconfig") + 1 :]
    assert after[:3] == ["gke.list_node_pools", "gke.create_node_pool", "gke.update_node_pool"]
    assert after[3:5] == ["gke.list_node_pools", "gke.delete_node_pool"]
    assert after[-2:] == ["gke.delete_node_pool", "gke.delete_cluster"]
    # Removing a pool asks the Fleet which replicas are on it, in the apply handler too.
    assert activities(history).count("fleet.replicas_by_pool") >= 2
    assert any(PATCH_POOL_CHANGES in p for p in _patches("pools-changed-cluster-gke.json"))

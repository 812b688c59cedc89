"""The phase an InferenceCluster reports (``cluster.phase``), from what its workflow knows."""

from __future__ import annotations

from modelfleet.cluster.phase import cluster_phase

NOTHING = {
    "deleting": False,
    "ready": False,
    "provisioned_by_modelfleet": False,
    "provisioned": False,
    "provisioning_failed": False,
    "provisioning": False,
}


def phase(**known: bool) -> str:
    return cluster_phase(**{**NOTHING, **known})


def test_deleting_wins_over_ready_and_over_a_failed_provisioning() -> None:
    assert phase(deleting=True, ready=True) == "Deleting"
    assert phase(deleting=True, provisioned_by_modelfleet=True, provisioning_failed=True) == (
        "Deleting"
    )


def test_a_ready_probe_wins_over_the_provisioning_story() -> None:
    assert phase(ready=True, provisioned_by_modelfleet=True, provisioning=True) == "Ready"


def test_a_cluster_modelfleet_provisions_is_failed_or_provisioning_until_provisioned() -> None:
    assert phase(provisioned_by_modelfleet=True, provisioning_failed=True) == "Failed"
    assert phase(provisioned_by_modelfleet=True, provisioning=True) == "Provisioning"
    # Provisioned, but its probes fail (or have not run yet): not a provisioning problem.
    assert phase(provisioned_by_modelfleet=True, provisioned=True, provisioning=True) == "NotReady"


def test_an_adopted_cluster_is_never_provisioning() -> None:
    assert phase(provisioning=True, provisioning_failed=True) == "NotReady"
    assert phase() == "NotReady"

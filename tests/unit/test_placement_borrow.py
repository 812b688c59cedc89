"""Capacity borrowing in the scheduler (issue 25): new replicas go to the home clusters (those
``homeSelector`` also matches); a roll's surge with ``borrow`` takes any other selected cluster
that fits when home is full, says what was full where, and replicas already away from home are
kept (named borrowed) rather than evicted."""

from __future__ import annotations

from placement_builders import deployment, existing, fleet, simple_cluster

from modelfleet.api.deployments import BorrowPolicy, ClusterSelector, ModelDeployment
from modelfleet.scheduling.explain import NOT_SELECTED
from modelfleet.scheduling.placement import NOT_HOME, place

FLEET = fleet(
    simple_cluster("l4-dev", 2, labels={"site": "dev", "tier": "gpu"}),
    simple_cluster("us-east-h100", 2, labels={"site": "east", "tier": "gpu"}),
    simple_cluster("lab", 2, labels={"site": "lab"}),  # outside the clusterSelector
)


def homed(replicas: int = 2, home: str | None = "dev") -> ModelDeployment:
    dep = deployment(replicas=replicas, cluster_selector={"tier": "gpu"})
    spec = dep.spec.template.spec
    if home is not None:
        spec.home_selector = ClusterSelector(match_labels={"site": home})
    dep.spec.strategy.borrow = BorrowPolicy.FLEET
    return dep


def test_new_replicas_go_home_only_and_other_selected_clusters_say_why() -> None:
    dep = homed(replicas=3)
    placement = place(dep, FLEET, [])
    assert sorted(r.spec.cluster_name for r in placement.placed) == ["l4-dev", "l4-dev"]
    assert placement.rejections["us-east-h100"] == NOT_HOME
    assert placement.rejections["lab"] == NOT_SELECTED
    assert placement.borrowed == {}


def test_a_surge_borrows_outside_home_when_home_is_full_and_says_what_was_full() -> None:
    dep = homed()
    running = [existing(dep, "l4-dev", 0), existing(dep, "l4-dev", 1)]
    placement = place(dep, FLEET, running, desired=3, borrow=True)
    (surge,) = placement.placed
    assert surge.spec.cluster_name == "us-east-h100"
    assert placement.borrowed[surge.name].endswith("on l4-dev")
    assert "gpu" in placement.borrowed[surge.name]
    assert placement.rejections == {}
    assert placement.summary == ""


def test_without_borrow_the_same_surge_is_not_placed() -> None:
    dep = homed()
    running = [existing(dep, "l4-dev", 0), existing(dep, "l4-dev", 1)]
    placement = place(dep, FLEET, running, desired=3)
    assert placement.placed == []
    assert placement.rejections["us-east-h100"] == NOT_HOME
    assert "l4-dev" in placement.rejections


def test_borrowing_never_leaves_the_cluster_selector() -> None:
    dep = homed()
    crowded = fleet(
        simple_cluster("l4-dev", 2, labels={"site": "dev", "tier": "gpu"}),
        simple_cluster("lab", 2, labels={"site": "lab"}),
    )
    running = [existing(dep, "l4-dev", 0), existing(dep, "l4-dev", 1)]
    placement = place(dep, crowded, running, desired=3, borrow=True)
    assert placement.placed == []
    assert placement.rejections["lab"] == NOT_SELECTED


def test_home_is_preferred_even_when_borrowing_is_allowed() -> None:
    dep = homed()
    running = [existing(dep, "l4-dev", 0)]
    placement = place(dep, FLEET, running, desired=2, borrow=True)
    assert [r.spec.cluster_name for r in placement.placed] == ["l4-dev"]
    assert placement.borrowed == {}


def test_a_borrowed_replica_is_kept_and_named_and_a_return_surge_goes_home() -> None:
    dep = homed()
    borrowed = existing(dep, "us-east-h100", 0)
    running = [existing(dep, "l4-dev", 0), borrowed]
    placement = place(dep, FLEET, running)
    assert placement.victims == []
    assert sorted(r.name for r in placement.kept) == sorted(r.name for r in running)
    assert list(placement.borrowed) == [borrowed.name]
    back = place(dep, FLEET, running, desired=3)
    assert [r.spec.cluster_name for r in back.placed] == ["l4-dev"]


def test_without_a_home_selector_nothing_changes() -> None:
    dep = homed(home=None)
    running = [existing(dep, "l4-dev", 0), existing(dep, "l4-dev", 1)]
    plain = place(dep, FLEET, running, desired=3)
    borrowing = place(dep, FLEET, running, desired=3, borrow=True)
    assert [r.spec.cluster_name for r in plain.placed] == ["us-east-h100"]
    assert plain == borrowing
    assert plain.borrowed == {}

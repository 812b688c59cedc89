"""Fleet-level taints and tolerations with Kubernetes semantics (Modelplane's
TestScheduleTaints, plus the toleration matcher itself)."""

from __future__ import annotations

import pytest
from placement_builders import deployment, existing, fleet, reasons, simple_cluster, status, where

from modelfleet.api.clusters import Taint
from modelfleet.api.deployments import Toleration
from modelfleet.scheduling.placement import place
from modelfleet.scheduling.tolerations import describe_taint, tolerates

MAINTENANCE = ("maintenance", "true", "NoSchedule")
DRAIN = ("maintenance", "true", "NoExecute")


class TestScheduleTaints:
    def test_no_schedule_keeps_new_replicas_off(self) -> None:
        snapshot = fleet(simple_cluster("a", taints=[MAINTENANCE]), simple_cluster("b"))
        result = place(deployment(), snapshot, [])
        assert where(result) == [("b", 0)]

    def test_no_schedule_leaves_existing_replicas(self) -> None:
        dep = deployment()
        snapshot = fleet(simple_cluster("a", taints=[MAINTENANCE]), simple_cluster("b"))
        result = place(dep, snapshot, [existing(dep, "a", 0)])
        assert where(result) == [("a", 0)]
        assert result.victims == []

    def test_toleration_allows_placement(self) -> None:
        dep = deployment(tolerations=[{"key": "maintenance", "value": "true"}])
        result = place(dep, fleet(simple_cluster("a", taints=[MAINTENANCE])), [])
        assert where(result) == [("a", 0)]

    def test_no_execute_drains_and_reschedules(self) -> None:
        dep = deployment()
        old = existing(dep, "a", 0)
        snapshot = fleet(simple_cluster("a", taints=[DRAIN]), simple_cluster("b"))
        result = place(dep, snapshot, [old])
        assert where(result) == [("b", 0)]
        assert reasons(result) == [(old.name, "NoExecuteTaint")]
        assert result.victims[0].message == "untolerated taint maintenance=true:NoExecute"

    def test_no_execute_toleration_keeps_the_replica_in_place(self) -> None:
        dep = deployment(
            tolerations=[{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}]
        )
        snapshot = fleet(simple_cluster("a", taints=[DRAIN]), simple_cluster("b"))
        result = place(dep, snapshot, [existing(dep, "a", 0)])
        assert where(result) == [("a", 0)]

    def test_drain_with_nowhere_to_go_leaves_the_count_unmet(self) -> None:
        dep = deployment()
        result = place(dep, fleet(simple_cluster("a", taints=[DRAIN])), [existing(dep, "a", 0)])
        assert where(result) == []
        assert status(result) == ("False", "InsufficientCapacity")
        assert result.summary == "0/1 clusters fit: 1 untolerated taint maintenance=true:NoExecute"

    def test_no_schedule_toleration_does_not_cover_no_execute(self) -> None:
        dep = deployment(
            tolerations=[{"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}]
        )
        old = existing(dep, "a", 0)
        result = place(dep, fleet(simple_cluster("a", taints=[DRAIN])), [old])
        assert reasons(result) == [(old.name, "NoExecuteTaint")]

    def test_any_untolerated_second_taint_still_repels(self) -> None:
        dep = deployment(tolerations=[{"key": "maintenance", "operator": "Exists"}])
        snapshot = fleet(simple_cluster("a", taints=[MAINTENANCE, ("gpu-type", "", "NoSchedule")]))
        result = place(dep, snapshot, [])
        assert result.placed == []
        assert result.rejections == {"a": "untolerated taint gpu-type:NoSchedule"}

    @pytest.mark.parametrize(("value", "placed"), [("on", True), ("off", False)])
    def test_equal_matches_on_value(self, value: str, placed: bool) -> None:
        dep = deployment(tolerations=[{"key": "mode", "operator": "Equal", "value": value}])
        result = place(dep, fleet(simple_cluster("a", taints=[("mode", "on", "NoSchedule")])), [])
        assert bool(result.placed) is placed

    def test_keyless_exists_tolerates_everything(self) -> None:
        dep = deployment(tolerations=[{"operator": "Exists"}], replicas=2)
        taints = [DRAIN, MAINTENANCE, ("x", "", "NoSchedule")]
        snapshot = fleet(simple_cluster("a", 2, taints=taints))
        result = place(dep, snapshot, [existing(dep, "a", 0)])
        assert result.victims == []
        assert where(result) == [("a", 0), ("a", 1)]


def _taint(key: str, value: str, effect: str) -> Taint:
    return Taint.model_validate({"key": key, "value": value, "effect": effect})


def _toleration(**fields: str) -> Toleration:
    return Toleration.model_validate(fields)


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"key": "k", "value": "v"}, ("k", "v", "NoSchedule"), True),
        ({"key": "k", "value": "v"}, ("k", "w", "NoSchedule"), False),
        ({"key": "k"}, ("k", "", "NoExecute"), True),  # empty value matches an empty value
        ({"key": "k"}, ("k", "v", "NoExecute"), False),
        ({"key": "k", "operator": "Exists"}, ("k", "anything", "NoExecute"), True),
        ({"key": "k", "operator": "Exists"}, ("other", "", "NoExecute"), False),
        ({"operator": "Exists"}, ("any", "thing", "NoSchedule"), True),
        ({"operator": "Exists", "effect": "NoSchedule"}, ("any", "", "NoExecute"), False),
        ({"key": "k", "value": "v", "effect": "NoExecute"}, ("k", "v", "NoExecute"), True),
    ],
)
def test_toleration_semantics(
    toleration: dict[str, str], taint: tuple[str, str, str], expected: bool
) -> None:
    assert tolerates(_toleration(**toleration), _taint(*taint)) is expected


def test_taints_print_like_kubectl() -> None:
    assert describe_taint(_taint("maintenance", "true", "NoSchedule")) == (
        "maintenance=true:NoSchedule"
    )
    assert describe_taint(_taint("gpu", "", "NoExecute")) == "gpu:NoExecute"

"""When a ModelService's health watch returns to its workflow (``contracts.health_watch``), and
how long the workflow lets it run (``service.decide.watch_seconds``): only a change the
workflow acts on wakes it, and a watch runs to its bound unless a reconcile must be retried."""

from __future__ import annotations

from modelfleet.contracts.health_watch import doors_changed, endpoints_changed, watch_task_queue
from modelfleet.contracts.serving_payloads import (
    EndpointHealth,
    FrontDoorHealth,
    GlobalAddressResult,
)
from modelfleet.service.decide import watch_seconds


def ok(key: str, *models: str, reason: str = "serves qwen") -> EndpointHealth:
    return EndpointHealth(key=key, healthy=True, reason=reason, models=list(models or ["qwen"]))


def bad(key: str, reason: str = "answered 503") -> EndpointHealth:
    return EndpointHealth(key=key, healthy=False, reason=reason)


def probed(*health: EndpointHealth) -> dict[str, EndpointHealth]:
    return {h.key: h for h in health}


def test_the_same_verdicts_are_no_change() -> None:
    assert endpoints_changed([ok("a"), bad("b")], probed(ok("a"), bad("b"))) == []
    assert endpoints_changed([], {}) == []


def test_a_reworded_reason_is_no_change() -> None:
    # An unreachable endpoint's wording varies between probes; it would wake the workflow
    # every round for nothing to do.
    known = [bad("b", "GET http://b/v1/models timed out after 3s")]
    assert endpoints_changed(known, probed(bad("b", "GET http://b/v1/models failed"))) == []
    assert endpoints_changed([ok("a", reason="x")], probed(ok("a", reason="y"))) == []


def test_health_flipping_either_way_is_a_change() -> None:
    assert endpoints_changed([ok("a"), ok("b")], probed(ok("a"), bad("b"))) == ["b"]
    assert endpoints_changed([bad("a"), ok("b")], probed(ok("a"), ok("b"))) == ["a"]


def test_a_changed_model_list_is_a_change() -> None:
    # What a joining replica is held to (``served_models``) reads the model lists.
    assert endpoints_changed([ok("a", "qwen")], probed(ok("a", "qwen", "qwen-b"))) == ["a"]


def test_a_new_or_withdrawn_endpoint_is_a_change() -> None:
    assert endpoints_changed([ok("a")], probed(ok("a"), ok("b"))) == ["b"]
    assert endpoints_changed([ok("a"), ok("b")], probed(ok("a"))) == ["b"]
    # Not probed yet: the first round of a new service answers.
    assert endpoints_changed([], probed(bad("a"))) == ["a"]


def door(cluster: str, healthy: bool = True, reason: str = "No failures") -> FrontDoorHealth:
    return FrontDoorHealth(cluster=cluster, healthy=healthy, reason=reason)


def view(*doors: FrontDoorHealth) -> GlobalAddressResult:
    return GlobalAddressResult(address="http://svc.ml.zone/ml/svc", doors=list(doors))


def test_doors_in_another_order_are_no_change() -> None:
    assert not doors_changed([door("a"), door("b")], False, view(door("b"), door("a")), False)


def test_a_door_going_out_or_disabled_is_a_change() -> None:
    known = [door("a"), door("b")]
    assert doors_changed(
        known, False, view(door("a", False, "TCP connection failed"), door("b")), False
    )
    disabled = FrontDoorHealth(cluster="a", enabled=False, reason="cluster not Ready")
    assert doors_changed(known, False, view(disabled, door("b")), False)


def test_the_first_sync_is_a_change() -> None:
    assert doors_changed([], False, view(door("a")), False)


def test_a_sync_that_starts_or_stops_failing_is_a_change_and_a_failing_one_is_not() -> None:
    known = [door("a")]
    assert doors_changed(known, False, None, True)
    assert doors_changed(known, True, view(door("a")), False)
    # Still failing: the workflow already says so (and keeps the last view).
    assert not doors_changed(known, True, None, True)


def test_a_watch_runs_to_its_bound_while_the_route_is_where_it_should_be() -> None:
    args = {"door_errors": {}, "applied": ["a", "b"], "clusters": ["a", "b"]}
    assert watch_seconds(10, 600, **args, global_moving=False) == 600
    # A bound under the probe interval is the interval: a watch probes at least once.
    assert watch_seconds(10, 5, **args, global_moving=False) == 10


def test_a_reconcile_to_retry_brings_the_probe_interval_back() -> None:
    # A door whose apply failed, a door that stopped being one with its objects still there,
    # a global address still to be removed: retried every probe interval, as before.
    same = {"applied": ["a"], "clusters": ["a"]}
    assert watch_seconds(10, 600, door_errors={"a": "x"}, **same, global_moving=False) == 10
    gone = {"applied": ["a", "old"], "clusters": ["a"]}
    assert watch_seconds(10, 600, door_errors={}, **gone, global_moving=False) == 10
    assert watch_seconds(10, 600, door_errors={}, **same, global_moving=True) == 10
    # A door not applied yet is not a retry (the reconcile applies it when it can).
    assert (
        watch_seconds(10, 600, door_errors={}, applied=[], clusters=["a"], global_moving=False)
        == 600
    )


def test_watches_run_on_a_queue_beside_the_workers_own() -> None:
    assert watch_task_queue("modelfleet") == "modelfleet-watch"

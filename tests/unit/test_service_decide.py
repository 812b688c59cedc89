"""A ModelService's pure decisions and views: weights in rotation, the conditions it reports,
its address, whether the global address moved, the route's plan and door bookkeeping, and the
status it shows for endpoints and front doors."""

from __future__ import annotations

from typing import Any

from temporalio.contrib.pydantic import pydantic_data_converter

from modelfleet.api.services import GlobalAddress, ModelService
from modelfleet.contracts.health_watch import ROUTE_DIGEST_ANNOTATION
from modelfleet.contracts.serving_payloads import (
    EndpointHealth,
    FrontDoorHealth,
    GlobalAddressResult,
)
from modelfleet.rendering.front_door import EndpointRecord, FrontDoor, select_endpoints
from modelfleet.service.decide import (
    global_address_condition,
    global_moved,
    resolved_condition,
    rotation_weights,
    routed_endpoints,
    routing_ready,
    service_address,
)
from modelfleet.service.report import endpoint_statuses, front_door_statuses, served_model_lists
from modelfleet.service.route import DoorBook, plan_route
from modelfleet.service.state import ServiceInput, ServiceState

DOOR = FrontDoor(cluster="east", gateway_name="gw", gateway_namespace="gw-ns")


def service(*entries: tuple[dict[str, str], int], auth: bool = False) -> ModelService:
    spec: dict[str, Any] = {
        "endpoints": [{"selector": {"matchLabels": s}, "weight": w} for s, w in entries]
    }
    if auth:
        spec["auth"] = {"apiKeysSecretRef": {"name": "keys"}}
    return ModelService.model_validate(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelService",
            "metadata": {"name": "svc", "namespace": "ml"},
            "spec": spec,
        }
    )


def endpoint(name: str, **labels: str) -> EndpointRecord:
    return EndpointRecord(namespace="ml", name=name, labels=labels, url=f"http://{name}:8000")


def healthy(*keys: str, models: list[str] | None = None) -> dict[str, EndpointHealth]:
    return {k: EndpointHealth(key=k, healthy=True, models=models or []) for k in keys}


def settings(zone: str = "example.com", account: str = "a" * 32) -> GlobalAddress:
    return GlobalAddress.model_validate(
        {
            "accountId": account,
            "zoneId": "b" * 32,
            "zone": zone,
            "apiTokenSecretRef": {"name": "cf"},
        }
    )


SVC = service(({"v": "stable"}, 9), ({"v": "canary"}, 1))
ENDPOINTS = [endpoint("s0", v="stable"), endpoint("s1", v="stable"), endpoint("c0", v="canary")]
GROUPS = select_endpoints(SVC.spec.endpoints, ENDPOINTS)


def test_only_healthy_endpoints_take_their_entrys_share() -> None:
    weights = rotation_weights(SVC.spec.endpoints, GROUPS, healthy("ml/s0", "ml/s1", "ml/c0"))
    assert weights["ml/s0"] + weights["ml/s1"] == 9 * weights["ml/c0"]
    # Unprobed and unhealthy endpoints are out; an entry with none left gives its share away.
    health = {**healthy("ml/s0"), "ml/c0": EndpointHealth(key="ml/c0", healthy=False)}
    assert set(rotation_weights(SVC.spec.endpoints, GROUPS, health)) == {"ml/s0"}
    assert rotation_weights(SVC.spec.endpoints, GROUPS, {}) == {}


def test_routed_endpoints_are_those_with_weight_with_their_entry() -> None:
    routed = routed_endpoints(GROUPS, {"ml/s1": 3, "ml/c0": 1, "ml/s0": 0})
    assert {k: i for k, (i, _) in routed.items()} == {"ml/s1": 0, "ml/c0": 1}


def test_conditions() -> None:
    assert resolved_condition(GROUPS).message == "3 endpoint(s) selected"
    assert resolved_condition([[], []]).reason == "NoEndpoints"
    assert routing_ready(2, 1, 1).message == "2 endpoint(s) in rotation"
    assert routing_ready(2, 1, 3).message == "2 endpoint(s) in rotation on 1 of 3 front doors"
    result = GlobalAddressResult(
        address="svc.ml.example.com",
        doors=[FrontDoorHealth(cluster="east", healthy=True), FrontDoorHealth(cluster="west")],
    )
    ok = global_address_condition(result, "", 2)
    assert (ok.status, ok.message) == ("True", "1 of 2 front doors in the address")
    down = global_address_condition(result, "API down", 2)
    assert (down.status, down.reason, down.message) == ("False", "Unavailable", "API down")
    assert global_address_condition(None, "", 2).status == "False"


def test_address_is_the_global_one_else_the_first_applied_doors() -> None:
    doors = {"east": "http://e/ml/svc", "west": "http://w/ml/svc"}
    assert service_address(None, doors, ["west", "east"]) == "http://w/ml/svc"
    assert service_address(None, doors, []) is None
    result = GlobalAddressResult(address="https://svc.ml.example.com")
    assert service_address(result, doors, ["east"]) == "https://svc.ml.example.com"


def test_global_address_moves_when_dropped_or_on_another_zone_or_account() -> None:
    assert not global_moved(None, settings())
    assert not global_moved(settings(), settings())
    assert global_moved(settings(), None)
    assert global_moved(settings(), settings(zone="example.org"))
    assert global_moved(settings(), settings(account="c" * 32))


def test_route_plan_owns_secrets_first_and_digests_weights() -> None:
    weights = {"ml/s0": 1, "ml/c0": 1}
    plan = plan_route(DOOR, service(({"v": "stable"}, 1), auth=True), weights, ENDPOINTS)
    kinds = [r.kind for r in plan.refs]
    assert kinds[0] == "Secret"
    assert "HTTPRoute" in kinds
    assert "Namespace" not in kinds
    assert sum(plan.backends().values()) == 2
    other = plan_route(
        DOOR, service(({"v": "stable"}, 1), auth=True), {"ml/s0": 3, "ml/c0": 1}, ENDPOINTS
    )
    # Same objects, new weights: only the digest tells them apart.
    assert other.refs == plan.refs
    assert other.digest != plan.digest


def test_door_book_applies_only_what_changed_and_forgets_a_door() -> None:
    book = DoorBook()
    plan = plan_route(DOOR, SVC, {"ml/s0": 1}, ENDPOINTS)
    assert not book.current("east", plan)
    book.record("east", plan)
    # Not current until the door's address is known: the apply is what asks for it.
    assert not book.current("east", plan)
    book.address["east"] = "http://e"
    assert book.current("east", plan)
    wider = plan_route(DOOR, SVC, {"ml/s0": 1, "ml/s1": 1}, ENDPOINTS)
    assert not book.current("east", wider)
    assert book.stale("east", wider) == []
    # Narrowed back: the backend objects of the endpoint that left the route go.
    book.record("east", wider)
    assert [(r.kind, "-s1-" in r.name) for r in book.stale("east", plan)] == [
        ("Service", True),
        ("EndpointSlice", True),
    ]
    book.error["east"] = "boom"
    book.forget("east")
    assert (book.applied, book.digests, book.address, book.error) == ({}, {}, {}, {})


def test_a_door_book_names_the_routes_to_read_for_drift_and_reapplies_a_drifted_one() -> None:
    book = DoorBook()
    plan = plan_route(DOOR, SVC, {"ml/s0": 1}, ENDPOINTS)
    # The route says which plan it carries (what a health watch compares at its bound).
    route = next(m for m in plan.manifests if m["kind"] == "HTTPRoute")
    assert route["metadata"]["annotations"][ROUTE_DIGEST_ANNOTATION] == plan.digest
    assert book.checks(["east"]) == []  # nothing applied: nothing to read
    book.record("east", plan)
    book.address["east"] = "http://e"
    (check,) = book.checks(["east", "west"])
    assert (check.cluster, check.route.kind, check.digest) == ("east", "HTTPRoute", plan.digest)
    # A door whose last apply failed is retried anyway; one no longer a door is not read.
    book.error["east"] = "boom"
    assert book.checks(["east"]) == []
    del book.error["east"]
    assert book.checks(["west"]) == []
    # Drifted: the same plan is applied again, its objects and address kept meanwhile.
    book.drifted("east")
    assert not book.current("east", plan)
    assert book.stale("east", plan) == []
    assert book.address["east"] == "http://e"


def test_the_service_state_survives_the_continue_as_new_payload_whole() -> None:
    """What a run hands the next (through Temporal's pydantic converter) is what it held: the
    doors (so an unchanged route is not applied again), the routed endpoints and the flags."""
    plan = plan_route(DOOR, SVC, {"ml/s0": 1}, ENDPOINTS)
    book = DoorBook()
    book.record("east", plan)
    book.address["east"] = "http://e"
    book.error["west"] = "unreachable"
    state = ServiceState(
        spec=SVC,
        revision=7,
        endpoints=ENDPOINTS,
        doors=book,
        routed={"ml/s0": (0, ENDPOINTS[0])},
        weights={"ml/s0": 1},
        health=healthy("ml/s0", models=["qwen"]),
        deleting=True,
        spec_changed=True,
        address="http://e",
        phase="Ready",
    )
    arg = ServiceInput(state=state, probe_interval_seconds=2.5, reconciles_per_run=4)
    (payload,) = pydantic_data_converter.payload_converter.to_payloads([arg])
    (back,) = pydantic_data_converter.payload_converter.from_payloads([payload], [ServiceInput])
    assert back == arg
    assert back.state.doors.current("east", plan)
    assert ServiceInput.of(SVC).state == ServiceState(spec=SVC)


def test_endpoint_statuses_list_withdrawn_routed_endpoints() -> None:
    health = healthy("ml/s0", models=["qwen"])
    routed = {"ml/gone": (0, endpoint("gone", v="stable"))}
    out = endpoint_statuses(GROUPS, health, {"ml/s0": 2, "ml/gone": 1}, routed)
    by_name = {e.name: e for e in out}
    assert by_name["s0"].healthy
    assert by_name["s0"].weight == 2
    assert by_name["s0"].models == ["qwen"]
    assert by_name["s1"].reason == "not probed yet"
    assert by_name["gone"].reason.startswith("withdrawn")
    assert by_name["gone"].weight == 1
    assert [e.name for e in out][-1] == "gone"


def test_front_door_states() -> None:
    health = {
        "b": FrontDoorHealth(cluster="b", healthy=False, reason="503"),
        "c": FrontDoorHealth(cluster="c", enabled=False, reason="NotReady"),
        "d": FrontDoorHealth(cluster="d", healthy=True, reason="ok"),
        "g": FrontDoorHealth(cluster="g", healthy=False, reason="check timed out"),
        "h": FrontDoorHealth(cluster="h", healthy=False, reason="503"),
    }
    out = front_door_statuses(
        ["a", "b", "c", "d", "e", "f", "g", "h"],
        ["b", "c", "d", "e", "f", "g"],
        {"f": "apply failed", "g": "no answer within 20 s", "h": "apply failed"},
        {"d": "http://d"},
        health,
    )
    states = [(d.cluster, d.state, d.reason) for d in out]
    assert states == [
        ("a", "Configuring", "route not applied yet"),
        ("b", "Out", "503"),
        ("c", "Disabled", "NotReady"),
        ("d", "Serving", "ok"),
        ("e", "Serving", "route applied"),
        ("f", "Configuring", "apply failed"),
        # Gone dark: the balancer took it out and the apply to it failed; it left the address.
        ("g", "Out", "check timed out; last apply: no answer within 20 s"),
        # Never applied: nothing of it is in the address to take out.
        ("h", "Configuring", "apply failed"),
    ]
    assert out[3].address == "http://d"


def test_served_model_lists_are_distinct_and_from_healthy_endpoints_only() -> None:
    health = {
        **healthy("ml/s0", "ml/s1", models=["qwen"]),
        **healthy("ml/c0", models=["qwen", "lora"]),
    }
    assert served_model_lists(GROUPS, [0], health) == [["qwen"]]
    assert served_model_lists(GROUPS, [0, 1, 7, -1], health) == [["qwen"], ["qwen", "lora"]]
    health["ml/c0"] = EndpointHealth(key="ml/c0", healthy=False, models=["x"])
    assert served_model_lists(GROUPS, [1], health) == []

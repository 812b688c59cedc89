"""The pure decisions of issue 29 items 4 and 5: when a withdrawn replica may delete its
objects (``replica.drain``), whether a front-door route still carries an endpoint
(``rendering.front_door.carries``), and whether a replica answers for the model names its
services expect (``replica.models``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from modelfleet.api.naming import child_name
from modelfleet.contracts.serving_payloads import RoutesCarrying, ServiceModels
from modelfleet.rendering.front_door import carries
from modelfleet.replica.drain import FIRST_LOOK, MAX_INTERVAL, drain_step, next_interval
from modelfleet.replica.models import expected_models, model_mismatch

T0 = datetime(2026, 1, 1, tzinfo=UTC)
BOUND = timedelta(seconds=60)


def test_confirmed_when_no_route_carries_it_and_every_door_was_read() -> None:
    step = drain_step(RoutesCarrying(), T0, T0 + timedelta(seconds=1), FIRST_LOOK, BOUND)
    assert step.done
    assert step.reason == ""


def test_a_route_still_carrying_it_means_looking_again_after_the_interval() -> None:
    seen = RoutesCarrying(carrying=["h100-east/ms-svc"])
    step = drain_step(seen, T0, T0 + timedelta(seconds=3), timedelta(seconds=4), BOUND)
    assert not step.done
    assert step.wait == timedelta(seconds=4)


def test_an_unread_door_or_a_failed_read_is_not_a_confirmation() -> None:
    unread = RoutesCarrying(unread=["l4-dev: connection refused"])
    assert not drain_step(unread, T0, T0 + timedelta(seconds=2), FIRST_LOOK, BOUND).done
    assert not drain_step(None, T0, T0 + timedelta(seconds=2), FIRST_LOOK, BOUND).done


def test_the_wait_never_passes_the_bound() -> None:
    seen = RoutesCarrying(carrying=["h100-east/ms-svc"])
    step = drain_step(seen, T0, T0 + timedelta(seconds=57), MAX_INTERVAL, BOUND)
    assert step.wait == timedelta(seconds=3)


def test_at_the_bound_it_goes_on_and_says_what_was_left() -> None:
    seen = RoutesCarrying(carrying=["h100-east/ms-svc"], unread=["l4-dev: timed out"])
    step = drain_step(seen, T0, T0 + BOUND, MAX_INTERVAL, BOUND)
    assert step.done
    assert "not confirmed within 60 s" in step.reason
    assert "still carried by h100-east/ms-svc" in step.reason
    assert "unread l4-dev: timed out" in step.reason
    assert "could not be read" in drain_step(None, T0, T0 + BOUND, FIRST_LOOK, BOUND).reason


def test_back_off_doubles_up_to_its_cap() -> None:
    steps = [FIRST_LOOK]
    for _ in range(6):
        steps.append(next_interval(steps[-1]))
    assert steps[:4] == [timedelta(seconds=s) for s in (1, 2, 4, 8)]
    assert max(steps) == MAX_INTERVAL
    # Bounded reads over the whole wait: a dark door costs a handful, not a poll.
    waited, reads, interval = timedelta(0), 0, FIRST_LOOK
    while waited < BOUND:
        waited += interval
        reads += 1
        interval = next_interval(interval)
    assert reads <= 12


def _backend(endpoint: str) -> str:
    return child_name("ms", "svc", endpoint)


def _route(backends: list[str], generation: int = 1, observed: int | None = 1) -> dict[str, Any]:
    condition: dict[str, Any] = {"type": "Accepted", "status": "True"}
    if observed is not None:
        condition["observedGeneration"] = observed
    return {
        "metadata": {
            "name": "ms-svc",
            "generation": generation,
            "labels": {"modelfleet.dev/service": "svc"},
        },
        "spec": {"rules": [{"backendRefs": [{"name": _backend(b)} for b in backends]}]},
        "status": {"parents": [{"conditions": [condition]}]},
    }


def test_a_route_carries_the_endpoint_its_backend_refs_name() -> None:
    assert carries(_route(["m-abcde", "m-fghij"]), "m-abcde")
    assert not carries(_route(["m-fghij"]), "m-abcde")


def test_a_route_its_gateway_has_not_accepted_yet_may_still_carry_it() -> None:
    # The spec dropped it (generation 2) but the gateway still runs generation 1.
    assert carries(_route(["m-fghij"], generation=2, observed=1), "m-abcde")
    assert not carries(_route(["m-fghij"], generation=2, observed=2), "m-abcde")
    # A gateway that reports no observedGeneration is taken at its word.
    assert not carries(_route(["m-fghij"], generation=2, observed=None), "m-abcde")


def test_a_route_of_no_service_carries_nothing() -> None:
    route = _route(["m-abcde"])
    route["metadata"]["labels"] = {}
    assert not carries(route, "m-abcde")


def test_the_expected_names_are_those_every_endpoint_serves() -> None:
    service = ServiceModels(service="svc", served=[["qwen", "Qwen/Qwen3-8B"], ["qwen"]])
    assert expected_models(service) == {"qwen"}
    # Endpoints that share no name hold a replica to nothing.
    assert expected_models(ServiceModels(service="svc", served=[["a"], ["b"]])) == set()
    assert expected_models(ServiceModels(service="svc")) == set()


def test_a_replica_serving_the_expected_names_joins() -> None:
    expected = [ServiceModels(service="svc", served=[["qwen"], ["qwen"]])]
    assert model_mismatch(["qwen"], expected) is None
    assert model_mismatch(["qwen", "qwen-lora"], expected) is None
    # Nothing expected (no service, or none with endpoints yet): nothing to hold it to.
    assert model_mismatch(["anything"], []) is None


def test_a_served_model_name_typo_is_a_mismatch_naming_both_names() -> None:
    expected = [
        ServiceModels(service="other", served=[["qwen3"]]),
        ServiceModels(service="svc", served=[["Qwen/Qwen3-8B"]]),
    ]
    reason = model_mismatch(["qwen3"], expected)
    assert reason is not None
    assert reason.startswith("model mismatch: its engine serves qwen3")
    assert "service svc expects Qwen/Qwen3-8B" in reason
    assert model_mismatch([], expected[:1]) is not None

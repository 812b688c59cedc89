"""Issue 23 item 9: a replacement replica never reuses a name that was live in the last hour.

Replica names come from ``(namespace, deployment, cluster, index)`` and a new replica takes the
lowest free index on its cluster, so a surge replacement used to get the name of the replica it
replaced the moment that one left ("removing X ... (surge)" and "placed X" in one second). The
deployment now remembers the names that left (``DeploymentState.retired``, bounded), sends them
with its placement requests, and ``fill`` skips an index whose name is retired."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from placement_builders import deployment, existing, fleet, simple_cluster

from modelfleet.api.naming import replica_name
from modelfleet.deployment import decisions as rollout
from modelfleet.deployment.actions import Place
from modelfleet.deployment.state import (
    RETIRED_FOR,
    RETIRED_LIMIT,
    DeploymentState,
    retire,
    still_retired,
)
from modelfleet.scheduling.placement import place

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _name(i: int) -> str:
    return replica_name("ml-team", "my-model", "a", i)


def test_a_surge_replacement_does_not_take_the_name_of_the_replica_that_just_left() -> None:
    md = deployment(replicas=1)
    snapshot = fleet(simple_cluster("a", nodes=3))
    first = existing(md, "a", 0)
    assert first.name == _name(0)

    # A roll surges: the replacement is placed next to the serving replica...
    surge = place(md, snapshot, [first], desired=2)
    (second,) = surge.placed
    assert second.name == _name(1)
    # ...which leaves once the replacement is Ready: released, forgotten, its name retired.
    state = DeploymentState(spec=md, placed={first.name: first, second.name: second})
    state = rollout.forgotten(state, first.name, T0)
    assert state.retired == {first.name: T0}

    # The next roll (a second template change, the same second) surges again.
    request = rollout.place_request(state, Place(desired=2, sequence=1), "r-1", T0)
    assert request.retired == [first.name]
    again = place(md, snapshot, [second], desired=2, retired=request.retired)
    (third,) = again.placed
    assert third.name not in (first.name, second.name)
    assert third.name == _name(2)
    # Without the retired names the lowest free index comes back: the name reused (the bug).
    assert [r.name for r in place(md, snapshot, [second], desired=2).placed] == [first.name]


def test_a_name_is_free_again_after_an_hour() -> None:
    md = deployment(replicas=1)
    state = rollout.forgotten(DeploymentState(spec=md), _name(0), T0)
    later = T0 + RETIRED_FOR + timedelta(seconds=1)
    request = rollout.place_request(state, Place(desired=1, sequence=1), "r-1", later)
    assert request.retired == []
    # The next name retired trims what is older than the hour.
    state = rollout.forgotten(state, _name(1), later)
    assert state.retired == {_name(1): later}


def test_retired_names_are_bounded_keeping_the_latest() -> None:
    retired: dict[str, datetime] = {}
    for i in range(RETIRED_LIMIT + 5):
        retired = retire(retired, f"r{i}", T0 + timedelta(milliseconds=i))
    assert len(retired) == RETIRED_LIMIT
    assert "r0" not in retired
    assert f"r{RETIRED_LIMIT + 4}" in retired
    assert still_retired(retired, T0 + 2 * RETIRED_FOR) == {}


def test_retired_names_survive_continue_as_new_and_the_wire() -> None:
    md = deployment(replicas=1)
    state = rollout.forgotten(DeploymentState(spec=md), _name(0), T0)
    carried = rollout.carried(state)
    assert carried.retired == {_name(0): T0}
    assert DeploymentState.model_validate_json(carried.model_dump_json()).retired == carried.retired
    # Forgotten without a time (callers that do not know it) retires nothing.
    assert rollout.forgotten(DeploymentState(spec=md), _name(0)).retired == {}

"""The endpoint directory's continue-as-new input groups replicas' endpoints: exactly the same
records come back, and 10,000 endpoints fit well under Temporal's 2 MiB payload limit."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from modelfleet.contracts.serving_payloads import DirectoryStart
from modelfleet.endpoints.state import CarriedEndpoints, EndpointsInput, EndpointsState
from modelfleet.rendering.endpoint_groups import expand_groups, group_endpoints
from modelfleet.rendering.front_door import EndpointRecord

T0 = datetime(2026, 11, 24, tzinfo=UTC)
PAYLOAD_LIMIT = 2 * 1024 * 1024


def published(ns: str, deployment: str, replica: str, cluster: str, n: int) -> EndpointRecord:
    """A record as ``publish_replica`` writes it (then dated by the directory)."""
    path = f"/{ns}/{replica}/"
    return EndpointRecord(
        namespace=ns,
        name=replica,
        labels={
            "app": deployment,
            "modelfleet.dev/deployment": deployment,
            "modelfleet.dev/cluster": cluster,
            "topology.kubernetes.io/region": "us-east1",
        },
        url=f"http://10.0.{n % 250}.1:8080{path}v1",
        rewrite_path=path,
        replica=replica,
        created=T0 + timedelta(seconds=n),
    )


def fleet_of(
    deployments: int, replicas: int, clusters: int, spread: int | None = None
) -> list[EndpointRecord]:
    """Each deployment's replicas round-robin over ``spread`` of the clusters (all of them)."""
    spread = spread or clusters
    out = []
    for d in range(deployments):
        for r in range(replicas):
            c = (d + r % spread) % clusters
            out.append(published(f"team-{d % 7}", f"md-{d:04d}", f"md-{d:04d}-{r:05x}", f"c{c}", c))
    return out


def test_grouping_gives_back_exactly_the_records() -> None:
    records = fleet_of(6, 5, 3)
    authored = EndpointRecord(
        namespace="team-1",
        name="openai",
        labels={"provider": "openai"},
        url="https://api.openai.com/v1",
        auth_secret="openai-key",
    )
    odd = records[0].model_copy(update={"name": "renamed"})  # name and path disagree
    undated = records[1].model_copy(update={"created": None, "auth_secret": "k"})
    everything = [*records[2:], authored, odd, undated]
    groups, whole = group_endpoints(everything)
    assert {r.key for r in whole} == {authored.key, odd.key}
    back = sorted([*whole, *expand_groups(groups)], key=lambda r: r.key)
    assert back == sorted(everything, key=lambda r: r.key)
    # Through the payload's JSON, as continue-as-new carries it.
    state = EndpointsState(endpoints={r.key: r for r in everything})
    wire = EndpointsInput(state=state).model_dump_json(by_alias=True)
    assert json.loads(wire)["state"]["groups"]  # grouped on the wire
    carried = EndpointsInput.model_validate_json(wire)
    assert carried.state == state
    assert sorted(carried.state.endpoints.values(), key=lambda r: r.key) == back


def _sizes(records: list[EndpointRecord]) -> tuple[int, int, int]:
    whole_bytes = len(CarriedEndpoints(endpoints=records).model_dump_json(by_alias=True))
    groups, whole = group_endpoints(records)
    assert whole == []
    grouped = EndpointsInput(state=EndpointsState(endpoints={r.key: r for r in records}))
    return whole_bytes, len(grouped.model_dump_json(by_alias=True)), len(groups)


def test_ten_thousand_endpoints_fit_under_the_payload_limit() -> None:
    # 100 deployments x 100 replicas, each deployment on 5 of 50 clusters: 500 groups.
    whole_bytes, grouped_bytes, groups = _sizes(fleet_of(100, 100, 50, spread=5))
    assert groups == 500
    assert whole_bytes > PAYLOAD_LIMIT  # what the directory could no longer carry
    assert grouped_bytes < PAYLOAD_LIMIT // 4, grouped_bytes
    # The worst case: every deployment on every cluster, 5,000 groups of 2.
    whole_bytes, grouped_bytes, groups = _sizes(fleet_of(100, 100, 50))
    assert groups == 5_000
    assert grouped_bytes < PAYLOAD_LIMIT * 3 // 4, grouped_bytes


def test_a_starter_s_empty_input_is_an_empty_directory() -> None:
    # The publishing activities start the directory without its input type (a lower layer).
    started = EndpointsInput.model_validate_json(DirectoryStart().model_dump_json(by_alias=True))
    assert started == EndpointsInput()
    assert started.state.endpoints == {}
    assert started.state.watches == {}

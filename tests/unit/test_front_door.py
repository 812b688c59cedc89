"""The front door's pure decisions: endpoint selection, Modelplane's weight distribution, and
the rendered route and backends."""

from __future__ import annotations

import json

import jsonschema
import pytest
from render_helpers import SCHEMA_DIR

from modelfleet.api.services import LabelSelector, OutlierDetection, ServiceEndpoint, ServiceRetries
from modelfleet.rendering.front_door import (
    EndpointRecord,
    FrontDoor,
    containment_summary,
    distribute_weights,
    provider_tokens,
    render_front_door,
    select_endpoints,
)


def _keys(n: int, prefix: str) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        ([(80, _keys(3, "a")), (20, _keys(1, "b"))], [27, 27, 26, 20]),
        ([(1, _keys(2, "a")), (3, _keys(1, "b"))], [1, 1, 6]),
        ([(2, _keys(1, "a")), (2, _keys(1, "b"))], [1, 1]),
        ([(1_000_000, _keys(1, "a")), (1, _keys(2, "b"))], [1_000_000, 1, 1]),
        ([(90, _keys(1, "a")), (10, _keys(1, "b"))], [9, 1]),
        ([(90, _keys(1, "a")), (10, [])], [1]),
        ([(5, [])], []),
    ],
)
def test_weights_follow_modelplane(
    groups: list[tuple[int, list[str]]], expected: list[int]
) -> None:
    weights = distribute_weights(groups)
    assert [weights[k] for _, keys in groups for k in keys] == expected


def _ep(name: str, **labels: str) -> EndpointRecord:
    return EndpointRecord(
        namespace="ml", name=name, labels=labels, url=f"http://10.0.0.1:8080/ml/{name}/v1",
        rewrite_path=f"/ml/{name}/",
    )  # fmt: skip


def test_an_endpoint_belongs_to_the_first_entry_that_selects_it() -> None:
    entries = [
        ServiceEndpoint(selector=LabelSelector(match_labels={"model": "q"}), weight=9),
        ServiceEndpoint(selector=LabelSelector(match_labels={"tier": "canary"}), weight=1),
    ]
    stable, canary, other = _ep("a", model="q"), _ep("b", model="q", tier="canary"), _ep("c")
    groups = select_endpoints(entries, [other, canary, stable])
    assert [[e.name for e in g] for g in groups] == [["a", "b"], []]


def test_route_rewrites_each_backend_to_its_own_path_and_checks_keys() -> None:
    a, b = _ep("a"), _ep("b")
    objects = render_front_door(
        FrontDoor(cluster="c", gateway_name="gw", gateway_namespace="sys"),
        "ml",
        "svc",
        {a.key: 3, b.key: 1},
        [a, b],
        auth=True,
    )
    kinds = [o["kind"] for o in objects]
    assert kinds == [
        "Namespace",
        "Service",
        "EndpointSlice",
        "Service",
        "EndpointSlice",
        "BackendTrafficPolicy",
        "HTTPRoute",
    ]
    route = objects[-1]
    rule = route["spec"]["rules"][0]
    assert rule["matches"][0]["path"] == {"type": "PathPrefix", "value": "/ml/svc/"}
    assert [r["weight"] for r in rule["backendRefs"]] == [3, 1]
    assert rule["backendRefs"][0]["filters"][0]["urlRewrite"]["path"]["replacePrefixMatch"] == (
        "/ml/a/"
    )
    assert rule["filters"][0]["extensionRef"]["kind"] == "Secret"
    slice_ = objects[2]
    assert slice_["addressType"] == "IPv4"
    assert slice_["endpoints"][0]["addresses"] == ["10.0.0.1"]
    assert slice_["ports"][0]["port"] == 8080
    assert (
        slice_["metadata"]["labels"]["kubernetes.io/service-name"] == objects[1]["metadata"]["name"]
    )
    empty = render_front_door(
        FrontDoor(cluster="c", gateway_name="gw", gateway_namespace="sys"), "ml", "svc", {}, []
    )
    assert empty[-1]["spec"]["rules"][0]["backendRefs"] == []
    assert "filters" not in empty[-1]["spec"]["rules"][0]


def test_a_provider_key_goes_to_its_backend_only() -> None:
    inhouse = _ep("a")
    external = EndpointRecord(
        namespace="ml", name="together", url="https://api.together.xyz/", auth_secret="tg-key"
    )
    weights = {inhouse.key: 1, external.key: 1}
    objects = render_front_door(
        FrontDoor(cluster="c", gateway_name="gw", gateway_namespace="sys"),
        "ml",
        "svc",
        weights,
        [inhouse, external],
    )
    refs = {r["name"]: r for r in objects[-1]["spec"]["rules"][0]["backendRefs"]}
    tokens = provider_tokens("svc", weights, [inhouse, external])
    assert list(tokens.values()) == ["tg-key"]
    with_key = [r for r in refs.values() if len(r["filters"]) == 2]
    assert len(with_key) == 1
    assert with_key[0]["port"] == 443
    assert with_key[0]["filters"][1]["extensionRef"]["name"] == next(iter(tokens))
    slice_ = next(
        o for o in objects if o["kind"] == "EndpointSlice" and "together" in o["metadata"]["name"]
    )
    assert slice_["addressType"] == "FQDN"
    assert slice_["ports"][0]["appProtocol"] == "https"
    # Out of rotation, its key is not synced either.
    assert provider_tokens("svc", {inhouse.key: 1}, [inhouse, external]) == {}


def test_describe_says_how_failures_are_contained() -> None:
    assert containment_summary(OutlierDetection(), ServiceRetries()) == (
        "ejects an endpoint after 3 errors in a row for 10 s x its ejections (at most 50% of "
        "endpoints out); retries 2x on another endpoint before any byte is sent (connection "
        "failures, 500, 502, 503, 504)"
    )
    off = containment_summary(OutlierDetection(max_ejection_percent=0), ServiceRetries(attempts=0))
    assert off == "never ejects an endpoint; no retries"


@pytest.mark.parametrize(
    ("outlier", "retries"),
    [
        (OutlierDetection(), ServiceRetries()),
        (
            OutlierDetection(
                consecutive_errors=1000,
                base_ejection_seconds=3600,
                max_ejection_percent=0,
                interval_seconds=300,
            ),
            ServiceRetries(attempts=10, status_codes=[599, 500, 500]),
        ),
        (OutlierDetection(), ServiceRetries(attempts=0)),
    ],
    ids=["defaults", "extremes", "no-retries"],
)
def test_the_front_door_validates_against_the_gateway_schemas(
    outlier: OutlierDetection, retries: ServiceRetries
) -> None:
    """The route and its policy have the shapes Gateway API and Envoy Gateway accept (strict
    schemas written from their Go types), whatever the service's settings."""
    a, b = _ep("a"), _ep("b")
    objects = render_front_door(
        FrontDoor(cluster="c", gateway_name="gw", gateway_namespace="sys"),
        "ml",
        "svc",
        {a.key: 1, b.key: 1},
        [a, b],
        outlier=outlier,
        retries=retries,
    )
    schemas = {"HTTPRoute": "httproute.json", "BackendTrafficPolicy": "backendtrafficpolicy.json"}
    for manifest in objects:
        if manifest["kind"] not in schemas:
            continue
        schema = json.loads((SCHEMA_DIR / schemas[manifest["kind"]]).read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(manifest)]
        assert errors == [], manifest["kind"]
    [policy] = [m for m in objects if m["kind"] == "BackendTrafficPolicy"]
    [route] = [m for m in objects if m["kind"] == "HTTPRoute"]
    assert policy["metadata"]["namespace"] == route["metadata"]["namespace"]
    assert policy["spec"]["targetRefs"] == [
        {
            "group": "gateway.networking.k8s.io",
            "kind": "HTTPRoute",
            "name": route["metadata"]["name"],
        }
    ]

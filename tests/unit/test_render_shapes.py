"""Every rendered object has the exact shape its API accepts.

Core objects go through the official Kubernetes client's models and must come back unchanged (a
misspelled or misplaced field is dropped by the models, so the comparison fails). Custom resources
validate against the strict JSON schemas in ``tests/schemas``, written from the upstream Go types.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import jsonschema
import pytest
from kubernetes.client import ApiClient
from render_factories import GOLDEN_CASES, prefill_decode, replica, standalone
from render_helpers import SCHEMA_DIR, epp_config, one, pod_templates, render, workload

from modelfleet.rendering.facts import ClusterFacts
from modelfleet.rendering.replica_manifests import RenderedReplica

# Kubernetes' own kinds, checked with the official client's models.
CORE_MODELS = {
    ("v1", "Namespace"): "V1Namespace",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Service"): "V1Service",
    ("apps/v1", "Deployment"): "V1Deployment",
    ("rbac.authorization.k8s.io/v1", "Role"): "V1Role",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "V1RoleBinding",
    # Built in since Kubernetes 1.34, so the client has a model for it too.
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): "V1ResourceClaimTemplate",
}
SCHEMAS = {
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): "leaderworkerset.json",
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): "resourceclaimtemplate.json",
    ("inference.networking.k8s.io/v1", "InferencePool"): "inferencepool.json",
    ("gateway.networking.k8s.io/v1", "HTTPRoute"): "httproute.json",
}
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

_client = ApiClient()


def _round_trip(data: dict[str, Any], model: str) -> Any:
    obj = _client._ApiClient__deserialize(copy.deepcopy(data), model)  # type: ignore[attr-defined]
    return _client.sanitize_for_serialization(obj)


def _validator(schema_file: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / schema_file).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _all_renders() -> list[tuple[str, RenderedReplica]]:
    renders = [(case, render(build())) for case, build in sorted(GOLDEN_CASES.items())]
    renders.append(
        ("legacy-epp-group", render(prefill_decode(), ClusterFacts(legacy_epp_api_group=True)))
    )
    return renders


RENDERS = _all_renders()
MANIFESTS = [
    pytest.param(m, id=f"{case}:{m['kind']}:{m['metadata']['name']}")
    for case, rendered in RENDERS
    for m in rendered.manifests()
]


def _key(param: Any) -> tuple[str, str]:
    manifest = param.values[0]
    return (manifest["apiVersion"], manifest["kind"])


@pytest.mark.parametrize("manifest", MANIFESTS)
def test_every_manifest_has_a_known_shape(manifest: dict[str, Any]) -> None:
    key = (manifest["apiVersion"], manifest["kind"])
    assert key in CORE_MODELS or key in SCHEMAS, f"no shape check for {key}"


@pytest.mark.parametrize(
    "manifest",
    [p for p in MANIFESTS if (p.values[0]["apiVersion"], p.values[0]["kind"]) in CORE_MODELS],
)
def test_core_objects_round_trip_through_the_official_client(manifest: dict[str, Any]) -> None:
    model = CORE_MODELS[(manifest["apiVersion"], manifest["kind"])]
    assert _round_trip(manifest, model) == manifest


@pytest.mark.parametrize(
    "manifest",
    [p for p in MANIFESTS if (p.values[0]["apiVersion"], p.values[0]["kind"]) in SCHEMAS],
)
def test_custom_resources_validate_against_their_schema(manifest: dict[str, Any]) -> None:
    schema = SCHEMAS[(manifest["apiVersion"], manifest["kind"])]
    errors = [e.message for e in _validator(schema).iter_errors(manifest)]
    assert errors == []


@pytest.mark.parametrize("lws", [p for p in MANIFESTS if p.values[0]["kind"] == "LeaderWorkerSet"])
def test_gang_pod_templates_round_trip_through_the_official_client(lws: dict[str, Any]) -> None:
    for template in pod_templates(lws).values():
        assert _round_trip(template, "V1PodTemplateSpec") == template


@pytest.mark.parametrize(("case", "rendered"), RENDERS, ids=[c for c, _ in RENDERS])
def test_endpoint_picker_config_is_valid_and_self_consistent(
    case: str, rendered: RenderedReplica
) -> None:
    config = epp_config(rendered)
    assert [e.message for e in _validator("endpointpickerconfig.json").iter_errors(config)] == []
    # Every profile refers to declared plugins, and exactly one plugin handles profiles.
    declared = {p.get("name") or p["type"] for p in config["plugins"]}
    referenced = {
        ref["pluginRef"] for prof in config["schedulingProfiles"] for ref in prof["plugins"]
    }
    assert referenced <= declared
    handlers = [p for p in config["plugins"] if p["type"].endswith("profile-handler")]
    assert len(handlers) == 1
    for handler in handlers:
        for decider in handler.get("parameters", {}).get("deciders", {}).values():
            assert decider in declared


def _assert_names_are_dns_labels_and_unique_per_kind(rendered: RenderedReplica) -> None:
    seen: set[tuple[str, str]] = set()
    for manifest in rendered.manifests():
        name = manifest["metadata"]["name"]
        assert len(name) <= 63, name
        assert DNS1123_LABEL.match(name), name
        key = (manifest["kind"], name)
        assert key not in seen, f"two {key}"
        seen.add(key)


@pytest.mark.parametrize(("case", "rendered"), RENDERS, ids=[c for c, _ in RENDERS])
def test_names_are_dns_labels_and_unique_per_kind(case: str, rendered: RenderedReplica) -> None:
    _assert_names_are_dns_labels_and_unique_per_kind(rendered)


def test_long_names_are_shortened_to_63_characters_and_stay_distinct() -> None:
    long_name = "a-very-long-deployment-name-that-fills-the-whole-label-0a1b2"
    rendered = render(
        replica(
            standalone("first-engine-with-a-long-name"),
            standalone("second-engine-with-a-long-name"),
            name=long_name,
            namespace="a-namespace-whose-name-is-long-enough-to-overflow-the-prefix-xy",
        )
    )
    _assert_names_are_dns_labels_and_unique_per_kind(rendered)
    assert len(rendered.namespace) <= 63
    assert len(long_name) + len("-pool") > 63
    # The shortened routing names keep their suffix, so they still read as what they are.
    assert one(rendered, "InferencePool")["metadata"]["name"].endswith("-pool")
    assert one(rendered, "Service")["metadata"]["name"].endswith("-epp")


def test_schemas_are_strict() -> None:
    """The schemas reject what the APIs reject, or passing them would prove nothing."""
    rendered = render(prefill_decode())
    pool = copy.deepcopy(one(rendered, "InferencePool"))
    pool["spec"]["targetPortNumber"] = 8000  # the deprecated v1alpha2 field
    assert list(_validator("inferencepool.json").iter_errors(pool))
    ref_without_port = copy.deepcopy(one(rendered, "InferencePool"))
    del ref_without_port["spec"]["endpointPickerRef"]["port"]
    assert list(_validator("inferencepool.json").iter_errors(ref_without_port))
    route = copy.deepcopy(one(rendered, "HTTPRoute"))
    route["spec"]["rules"][0]["timeouts"]["request"] = "forever"
    assert list(_validator("httproute.json").iter_errors(route))
    claim = copy.deepcopy(rendered.manifests()[1])
    assert claim["kind"] == "ResourceClaimTemplate"
    claim["spec"]["spec"]["devices"]["requests"][0]["deviceClassName"] = "gpu.nvidia.com"
    claim["spec"]["spec"]["devices"]["requests"][0]["count"] = 0
    assert list(_validator("resourceclaimtemplate.json").iter_errors(claim))
    config = epp_config(rendered)
    config["plugins"][0]["parameters"]["blockSizeTokens"] = "64"
    assert list(_validator("endpointpickerconfig.json").iter_errors(config))


def test_the_round_trip_notices_a_misplaced_field() -> None:
    deployment = copy.deepcopy(workload(render(replica()), "main"))
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessprobe"] = {}
    assert _round_trip(deployment, "V1Deployment") != deployment

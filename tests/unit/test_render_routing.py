"""The routing surface (InferencePool, endpoint picker, HTTPRoute), the EPP config and its KV
block size, the readiness rules and the step order."""

from __future__ import annotations

import hashlib

import pytest
from render_factories import (
    engine,
    gang,
    member,
    prefill_decode,
    replica,
    standalone,
)
from render_helpers import epp_config, one, render, serving_template, workload

from modelfleet.api.naming import LABEL_SERVING
from modelfleet.rendering.args import flag_value
from modelfleet.rendering.epp_config import kv_block_size
from modelfleet.rendering.facts import ClusterFacts
from modelfleet.rendering.readiness import ReadinessRole
from modelfleet.rendering.replica_manifests import Step

EPP_IMAGE = "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.9.0"


# --- InferencePool and HTTPRoute --------------------------------------------------------------


@pytest.mark.parametrize("mode", ["Unified", "PrefillDecode"])
def test_both_modes_are_fronted_by_a_pool_and_an_endpoint_picker(mode: str) -> None:
    rendered = render(replica() if mode == "Unified" else prefill_decode())
    pool = one(rendered, "InferencePool")
    assert pool["apiVersion"] == "inference.networking.k8s.io/v1"
    assert pool["metadata"]["name"] == f"{rendered.replica}-pool"
    assert pool["spec"]["selector"] == {"matchLabels": {LABEL_SERVING: rendered.replica}}
    assert pool["spec"]["targetPorts"] == [{"number": 8000}]
    assert pool["spec"]["endpointPickerRef"] == {
        "name": f"{rendered.replica}-epp",
        "port": {"number": 9002},
        "failureMode": "FailOpen",
    }
    # No plain Service fronts the engines: the only Service is the picker's.
    assert one(rendered, "Service")["metadata"]["name"] == f"{rendered.replica}-epp"


def test_the_pool_selects_a_single_standalone_pod_by_its_serving_label() -> None:
    rendered = render(replica())
    selector = one(rendered, "InferencePool")["spec"]["selector"]["matchLabels"]
    pod_labels = serving_template(workload(rendered, "main"))["metadata"]["labels"]
    assert selector.items() <= pod_labels.items()


def test_the_route_sends_the_replica_path_to_the_pool_without_a_timeout() -> None:
    rendered = render(replica(name="qwen-5ab63", namespace="ml-team"))
    route = one(rendered, "HTTPRoute")
    assert route["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert route["metadata"]["name"] == "qwen-5ab63"
    assert route["spec"]["parentRefs"] == [
        {
            "group": "gateway.networking.k8s.io",
            "kind": "Gateway",
            "name": "inference-gateway",
            "namespace": "modelfleet-system",
        }
    ]
    [rule] = route["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/ml-team/qwen-5ab63/"}}]
    assert rule["filters"] == [
        {
            "type": "URLRewrite",
            "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}},
        }
    ]
    assert rule["backendRefs"] == [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "qwen-5ab63-pool"}
    ]
    assert rule["timeouts"] == {"request": "0s"}


def test_the_route_attaches_to_the_gateway_named_by_the_cluster_facts() -> None:
    facts = ClusterFacts(gateway_name="gw", gateway_namespace="edge")
    route = one(render(replica(), facts), "HTTPRoute")
    assert route["spec"]["parentRefs"][0]["name"] == "gw"
    assert route["spec"]["parentRefs"][0]["namespace"] == "edge"


# --- endpoint picker --------------------------------------------------------------------------


def test_the_picker_runs_the_pinned_image_against_the_pool_in_the_workload_namespace() -> None:
    rendered = render(replica())
    epp = next(d for d in rendered.step(Step.ROUTING).manifests if d["kind"] == "Deployment")
    assert epp["metadata"]["name"] == f"{rendered.replica}-epp"
    assert epp["spec"]["replicas"] == 1
    pod = epp["spec"]["template"]
    [container_] = pod["spec"]["containers"]
    assert container_["image"] == EPP_IMAGE
    assert container_["args"] == [
        f"--pool-name={rendered.replica}-pool",
        f"--pool-namespace={rendered.namespace}",
        "--pool-group=inference.networking.k8s.io",
        "--config-file=/config/epp-config.yaml",
        "--grpc-port=9002",
    ]
    assert [p["containerPort"] for p in container_["ports"]] == [9002, 9003]
    assert pod["spec"]["serviceAccountName"] == f"{rendered.replica}-epp"
    assert pod["spec"]["volumes"] == [
        {"name": "config", "configMap": {"name": f"{rendered.replica}-epp"}}
    ]
    service = one(rendered, "Service")
    assert service["spec"]["selector"] == pod["metadata"]["labels"]
    assert service["spec"]["ports"] == [
        {
            "name": "grpc-ext-proc",
            "port": 9002,
            "targetPort": 9002,
            "protocol": "TCP",
            "appProtocol": "http2",
        }
    ]


def test_the_picker_pods_are_not_in_the_pool() -> None:
    rendered = render(replica())
    epp = next(d for d in rendered.step(Step.ROUTING).manifests if d["kind"] == "Deployment")
    assert LABEL_SERVING not in epp["spec"]["template"]["metadata"]["labels"]


def test_the_picker_images_come_from_the_cluster_facts() -> None:
    facts = ClusterFacts(epp_image="registry.local/epp:1", pd_sidecar_image="registry.local/sc:1")
    rendered = render(prefill_decode(), facts)
    epp = next(d for d in rendered.step(Step.ROUTING).manifests if d["kind"] == "Deployment")
    assert epp["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.local/epp:1"
    decode = serving_template(workload(rendered, "decode"))
    assert decode["spec"]["initContainers"][0]["image"] == "registry.local/sc:1"


def test_the_picker_may_read_pods_pools_objectives_and_rewrites() -> None:
    rendered = render(replica())
    role = one(rendered, "Role")
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "watch", "list"]},
        {
            "apiGroups": ["inference.networking.k8s.io"],
            "resources": ["inferencepools"],
            "verbs": ["get", "watch", "list"],
        },
        {
            "apiGroups": ["llm-d.ai"],
            "resources": ["inferenceobjectives", "inferencemodelrewrites"],
            "verbs": ["get", "watch", "list"],
        },
    ]
    binding = one(rendered, "RoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": one(rendered, "ServiceAccount")["metadata"]["name"],
            "namespace": rendered.namespace,
        }
    ]


def test_the_legacy_switch_moves_the_picker_apis_but_not_the_pool() -> None:
    rendered = render(replica(), ClusterFacts(legacy_epp_api_group=True))
    assert epp_config(rendered)["apiVersion"] == "inference.networking.x-k8s.io/v1alpha1"
    assert one(rendered, "Role")["rules"][2]["apiGroups"] == ["inference.networking.x-k8s.io"]
    assert one(rendered, "InferencePool")["apiVersion"] == "inference.networking.k8s.io/v1"


def test_the_unified_config_scores_prefix_twice_as_much_as_queue() -> None:
    config = epp_config(render(replica()))
    assert config["apiVersion"] == "llm-d.ai/v1alpha1"
    assert config["kind"] == "EndpointPickerConfig"
    assert [p["type"] for p in config["plugins"]] == [
        "approx-prefix-cache-producer",
        "prefix-cache-scorer",
        "queue-scorer",
        "max-score-picker",
        "single-profile-handler",
    ]
    assert config["plugins"][0]["parameters"] == {
        "autoTune": False,
        "blockSizeTokens": 16,
        "maxPrefixBlocksToMatch": 256,
        "lruCapacityPerServer": 31250,
    }
    assert config["schedulingProfiles"] == [
        {
            "name": "default",
            "plugins": [
                {"pluginRef": "max-score-picker"},
                {"pluginRef": "prefix-cache-scorer", "weight": 2},
                {"pluginRef": "queue-scorer", "weight": 1},
            ],
        }
    ]


def test_the_picker_pod_carries_the_checksum_of_its_config() -> None:
    rendered = render(replica())
    text = one(rendered, "ConfigMap")["data"]["epp-config.yaml"]
    epp = next(d for d in rendered.step(Step.ROUTING).manifests if d["kind"] == "Deployment")
    annotations = epp["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {
        "modelfleet.dev/epp-config-checksum": hashlib.sha256(text.encode()).hexdigest()
    }


def _checksum(args: list[str]) -> str:
    rendered = render(replica(standalone(args=args)))
    epp = next(d for d in rendered.step(Step.ROUTING).manifests if d["kind"] == "Deployment")
    checksum: str = epp["spec"]["template"]["metadata"]["annotations"][
        "modelfleet.dev/epp-config-checksum"
    ]
    return checksum


def test_the_checksum_changes_with_the_config_and_only_then() -> None:
    base = _checksum(["--model=m"])
    assert _checksum(["--model=m"]) == base
    # Other engine args leave the config, and so the picker pod, alone.
    assert _checksum(["--model=other", "--max-model-len=8192"]) == base
    assert _checksum(["--model=m", "--block-size=32"]) != base


# --- KV block size ----------------------------------------------------------------------------


def _block_size(args: list[str] | None = None, command: list[str] | None = None) -> int:
    return kv_block_size(replica(standalone(args=args, command=command)).spec.engines[0])


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (None, 16),
        (["--model=m"], 16),
        (["--block-size=32"], 32),
        (["--block-size", "64"], 64),
        (["--page-size=8"], 8),
        (["--page-size", "128"], 128),
        (["--block-size=sixteen"], 16),
        (["--block-size=0"], 16),
        (["--block-size=-4"], 16),
        (["--block-size"], 16),
        (["--block-size=16", "--block-size=48"], 48),
    ],
)
def test_block_size_is_read_from_vllm_or_sglang_flags(
    args: list[str] | None, expected: int
) -> None:
    assert _block_size(args) == expected


def test_block_size_is_also_read_from_an_engine_command() -> None:
    command = ["python3", "-m", "sglang.launch_server", "--page-size", "32"]
    assert _block_size(command=command) == 32


def test_the_rendered_config_uses_the_first_engines_block_size() -> None:
    rendered = render(
        replica(
            standalone("first", args=["--block-size=64"]),
            standalone("second", args=["--block-size=8"]),
        )
    )
    assert epp_config(rendered)["plugins"][0]["parameters"]["blockSizeTokens"] == 64


def test_a_gang_reads_its_block_size_from_the_leader() -> None:
    rendered = render(
        replica(gang(leader={"args": ["--block-size=32"]}, worker={"args": ["--block-size=8"]}))
    )
    assert epp_config(rendered)["plugins"][0]["parameters"]["blockSizeTokens"] == 32


def test_flag_value_reads_both_forms_and_ignores_look_alikes() -> None:
    tokens = ["--port-range=1", "--port", "9000", "--portable"]
    assert flag_value(tokens, "--port") == "9000"
    assert flag_value(["--port=1", "--port=2"], "--port") == "2"
    assert flag_value(["--model=x"], "--port") is None


# --- readiness and steps ----------------------------------------------------------------------


def test_readiness_waits_for_every_workload_and_the_endpoint_picker() -> None:
    rendered = render(replica(standalone("solo"), gang("group")))
    rules = [(r.role, r.api_version, r.kind, r.name, r.condition) for r in rendered.readiness]
    assert rules == [
        (
            ReadinessRole.WORKLOAD,
            "apps/v1",
            "Deployment",
            workload(rendered, "solo")["metadata"]["name"],
            "Available",
        ),
        (
            ReadinessRole.WORKLOAD,
            "leaderworkerset.x-k8s.io/v1",
            "LeaderWorkerSet",
            workload(rendered, "group")["metadata"]["name"],
            "Available",
        ),
        (
            ReadinessRole.ENDPOINT_PICKER,
            "apps/v1",
            "Deployment",
            f"{rendered.replica}-epp",
            "Available",
        ),
    ]
    assert {r.namespace for r in rendered.readiness} == {rendered.namespace}
    assert rendered.to_wire()["readiness"][2]["role"] == "endpoint-picker"


def _observed(status: str, generation: int = 2, seen: int | None = 2) -> dict[str, object]:
    observed_status: dict[str, object] = {"conditions": [{"type": "Available", "status": status}]}
    if seen is not None:
        observed_status["observedGeneration"] = seen
    return {"metadata": {"generation": generation}, "status": observed_status}


def test_a_readiness_rule_needs_its_condition_true_for_the_current_generation() -> None:
    rule = render(replica()).readiness[0]
    assert rule.satisfied_by(_observed("True"))
    assert not rule.satisfied_by(_observed("False"))
    assert not rule.satisfied_by(_observed("True", generation=3, seen=2))
    assert rule.satisfied_by(_observed("True", seen=None))
    assert not rule.satisfied_by({"metadata": {}, "status": {}})
    assert not rule.satisfied_by({})


def test_steps_come_in_apply_order_and_manifests_lists_them_in_that_order() -> None:
    rendered = render(replica(gang()))
    assert [s.step for s in rendered.steps] == [
        Step.NAMESPACE,
        Step.CLAIMS,
        Step.WORKLOADS,
        Step.ROUTING,
    ]
    assert [m["kind"] for m in rendered.manifests()] == [
        "Namespace",
        "ResourceClaimTemplate",
        "ResourceClaimTemplate",
        "LeaderWorkerSet",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Deployment",
        "Service",
        "InferencePool",
        "HTTPRoute",
    ]


def test_a_replica_with_no_claiming_member_keeps_an_empty_claims_step() -> None:
    # api.rules rejects this replica; the renderer still renders it predictably.
    rendered = render(replica(engine("main", member("Standalone"))))
    assert rendered.step(Step.CLAIMS).manifests == []
    assert [s.step for s in rendered.steps] == list(Step)

"""PrefillDecode: engines chosen by phase, role labels, the decode sidecar and port move, NIXL
env, the disaggregated picker config, and the shared-memory fix over Modelplane."""

from __future__ import annotations

from typing import Any

import pytest
from render_factories import engine, gang, gpus, member, prefill_decode
from render_helpers import (
    engine_container,
    env_names,
    epp_config,
    labels,
    one,
    pod_templates,
    render,
    serving_template,
    workload,
)

from modelfleet.api.naming import LABEL_SERVING
from modelfleet.rendering.engines import RenderError

SIDECAR_IMAGE = "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0"


def _decode(args: list[str], env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return engine(
        "decode", member("Standalone", requests=[gpus(1)], args=args, env=env), phase="Decode"
    )


def _sidecar(template: dict[str, Any]) -> dict[str, Any]:
    [sidecar] = template["spec"]["initContainers"]
    assert isinstance(sidecar, dict)
    return sidecar


def test_decode_gets_the_sidecar_on_the_pool_port_and_the_engine_moves_to_its_port() -> None:
    rendered = render(prefill_decode(decode=_decode(["--model=m", "--port=8200"])))
    template = serving_template(workload(rendered, "decode"))
    sidecar = _sidecar(template)
    assert sidecar["name"] == "pd-sidecar"
    assert sidecar["image"] == SIDECAR_IMAGE
    assert sidecar["args"] == ["--secure-proxy=false", "--kv-connector=nixlv2", "--vllm-port=8200"]
    assert sidecar["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert sidecar["readinessProbe"]["httpGet"] == {"path": "/health", "port": 8000}
    assert sidecar["readinessProbe"]["timeoutSeconds"] == 5
    # A native sidecar: starts before the engine and outlives it.
    assert sidecar["restartPolicy"] == "Always"
    engine_ = engine_container(template)
    assert [p["containerPort"] for p in engine_["ports"]] == [8200]
    assert engine_["readinessProbe"]["httpGet"] == {"path": "/health", "port": 8200}
    # The user's args are untouched: the port flag was theirs.
    assert engine_["args"] == ["--model=m", "--port=8200"]


@pytest.mark.parametrize(
    ("args", "port"),
    [
        (["--port=9100"], 9100),
        (["--port", "9101"], 9101),
        (["--model=m"], 8001),
        (["--port=eighty"], 8001),
        (["--port=70000"], 8001),
    ],
)
def test_the_decode_port_follows_the_users_port_flag(args: list[str], port: int) -> None:
    rendered = render(prefill_decode(decode=_decode(args)))
    template = serving_template(workload(rendered, "decode"))
    assert _sidecar(template)["args"][-1] == f"--vllm-port={port}"
    assert engine_container(template)["ports"][0]["containerPort"] == port


def test_a_decode_engine_on_the_sidecar_port_is_refused() -> None:
    with pytest.raises(RenderError, match="8000"):
        render(prefill_decode(decode=_decode(["--port=8000"])))


def test_prefill_serves_directly_without_a_sidecar() -> None:
    rendered = render(prefill_decode())
    template = serving_template(workload(rendered, "prefill"))
    assert "initContainers" not in template["spec"]
    assert engine_container(template)["ports"][0]["containerPort"] == 8000


def test_engines_are_role_labelled_for_the_picker() -> None:
    rendered = render(prefill_decode())
    for name, role in [("prefill", "prefill"), ("decode", "decode")]:
        pod = labels(serving_template(workload(rendered, name)))
        assert pod["llm-d.ai/role"] == role
        assert pod["llm-d.ai/inference-serving"] == "true"
        assert pod["app"] == rendered.replica
        assert pod[LABEL_SERVING] == rendered.replica


def test_engines_are_chosen_by_phase_not_by_name() -> None:
    # Names that say the opposite of the phases.
    replica = prefill_decode(
        prefill=engine(
            "decode", member("Standalone", requests=[gpus(1)], args=["--m"]), phase="Prefill"
        ),
        decode=engine(
            "prefill",
            member("Standalone", requests=[gpus(1)], args=["--port=8300", "--block-size=48"]),
            phase="Decode",
        ),
    )
    rendered = render(replica)
    prefilling = serving_template(workload(rendered, "decode"))
    decoding = serving_template(workload(rendered, "prefill"))
    assert labels(prefilling)["llm-d.ai/role"] == "prefill"
    assert "initContainers" not in prefilling["spec"]
    assert labels(decoding)["llm-d.ai/role"] == "decode"
    assert _sidecar(decoding)["args"][-1] == "--vllm-port=8300"
    # The picker's block size comes from the decode engine, whatever its name.
    assert epp_config(rendered)["plugins"][0]["parameters"]["blockSizeTokens"] == 48


def test_a_gang_decode_puts_labels_sidecar_and_port_on_the_leader_only() -> None:
    rendered = render(
        prefill_decode(
            decode=gang(
                "decode",
                nodes=2,
                phase="Decode",
                leader={"args": ["--port", "8400"]},
                worker={"args": ["--worker"]},
            )
        )
    )
    templates = pod_templates(workload(rendered, "decode"))
    leader, worker = templates["leader"], templates["worker"]
    assert labels(leader)["llm-d.ai/role"] == "decode"
    assert _sidecar(leader)["args"][-1] == "--vllm-port=8400"
    assert engine_container(leader)["ports"][0]["containerPort"] == 8400
    assert "metadata" not in worker
    assert "initContainers" not in worker["spec"]
    assert "ports" not in engine_container(worker)


def test_nixl_side_channel_env_reaches_every_pod_of_both_engines() -> None:
    rendered = render(
        prefill_decode(decode=gang("decode", phase="Decode", leader={"args": ["--port=8001"]}))
    )
    templates = [
        serving_template(workload(rendered, "prefill")),
        *pod_templates(workload(rendered, "decode")).values(),
    ]
    for template in templates:
        env = {v["name"]: v for v in engine_container(template)["env"]}
        assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == {
            "name": "VLLM_NIXL_SIDE_CHANNEL_HOST",
            "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
        }
        assert env["VLLM_NIXL_SIDE_CHANNEL_PORT"]["value"] == "5557"
    # In a gang the injected rank env still comes first.
    leader = engine_container(pod_templates(workload(rendered, "decode"))["leader"])
    assert env_names(leader)[:2] == ["MODELPLANE_LEADER_ADDRESS", "MODELPLANE_RANK"]


def test_nixl_env_never_overrides_the_users_values() -> None:
    user_env = [
        {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": "6000"},
        {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": "10.0.0.1"},
    ]
    rendered = render(prefill_decode(decode=_decode(["--port=8001"], env=user_env)))
    assert engine_container(serving_template(workload(rendered, "decode")))["env"] == user_env


def test_only_one_of_the_nixl_values_may_be_the_users() -> None:
    user_env = [{"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": "6000"}]
    rendered = render(prefill_decode(decode=_decode(["--port=8001"], env=user_env)))
    env = engine_container(serving_template(workload(rendered, "decode")))["env"]
    assert env_names({"env": env}) == ["VLLM_NIXL_SIDE_CHANNEL_PORT", "VLLM_NIXL_SIDE_CHANNEL_HOST"]
    assert env[0]["value"] == "6000"


def test_nixl_shared_memory_is_the_memory_backed_dev_shm_and_nothing_unused() -> None:
    rendered = render(prefill_decode())
    for name in ("prefill", "decode"):
        template = serving_template(workload(rendered, name))
        volumes = template["spec"]["volumes"]
        assert volumes == [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
        mounted = {m["name"] for m in engine_container(template)["volumeMounts"]}
        assert mounted == {v["name"] for v in volumes}


def test_the_disaggregated_config_arms_the_pd_decider() -> None:
    config = epp_config(render(prefill_decode()))
    plugins = {p["type"]: p.get("parameters") for p in config["plugins"]}
    assert plugins["prefix-based-pd-decider"] == {"nonCachedTokens": 16}
    assert plugins["disagg-profile-handler"] == {"deciders": {"prefill": "prefix-based-pd-decider"}}
    assert plugins["approx-prefix-cache-producer"]["autoTune"] is False
    assert {"disagg-headers-handler", "prefill-filter", "decode-filter"} <= plugins.keys()
    assert "single-profile-handler" not in plugins
    profiles = {p["name"]: p["plugins"] for p in config["schedulingProfiles"]}
    assert list(profiles) == ["prefill", "decode"]
    for name, refs in profiles.items():
        assert refs == [
            {"pluginRef": f"{name}-filter"},
            {"pluginRef": "max-score-picker"},
            {"pluginRef": "prefix-cache-scorer", "weight": 2},
            {"pluginRef": "queue-scorer", "weight": 1},
        ]


def test_the_route_targets_the_pool_under_prefill_decode_too() -> None:
    rendered = render(prefill_decode())
    backend = one(rendered, "HTTPRoute")["spec"]["rules"][0]["backendRefs"][0]
    assert backend["kind"] == "InferencePool"
    assert backend["name"] == one(rendered, "InferencePool")["metadata"]["name"]


def test_a_prefill_decode_replica_without_both_phases_is_refused() -> None:
    replica = prefill_decode()
    replica.spec.engines[1].phase = replica.spec.engines[0].phase
    with pytest.raises(RenderError, match="one with phase Prefill and one"):
        render(replica)

"""Workloads, pods and claims: Modelplane's replica-function behaviours (reference 9.4) that
apply to modelfleet, plus the workload namespace."""

from __future__ import annotations

from render_factories import (
    claimless_leader,
    engine,
    gang,
    gpus,
    member,
    multiple_device_requests,
    replica,
    standalone,
)
from render_helpers import (
    engine_container,
    env_names,
    labels,
    of_kind,
    pod_templates,
    render,
    serving_template,
    workload,
    workloads,
)

from modelfleet.api.naming import (
    LABEL_LWS_ROLE,
    LABEL_POOL,
    LABEL_SERVING,
    LABEL_WORKLOAD,
    workload_namespace,
)
from modelfleet.rendering.replica_manifests import Step

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
INJECTED = ["MODELPLANE_LEADER_ADDRESS", "MODELPLANE_RANK"]


# --- backend selection and shape -------------------------------------------------------------


def test_standalone_engine_is_a_deployment_with_one_replica_per_copy() -> None:
    rendered = render(replica(standalone(copies=3)))
    deployment = workload(rendered, "main")
    assert deployment["apiVersion"] == "apps/v1"
    assert deployment["kind"] == "Deployment"
    assert deployment["spec"]["replicas"] == 3
    name = deployment["metadata"]["name"]
    assert deployment["spec"]["selector"] == {"matchLabels": {LABEL_WORKLOAD: name}}
    assert labels(deployment["spec"]["template"])[LABEL_WORKLOAD] == name


def test_gang_engine_is_a_leader_worker_set_of_one_plus_worker_nodes() -> None:
    rendered = render(replica(gang(nodes=3, copies=2)))
    lws = workload(rendered, "main")
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    assert lws["kind"] == "LeaderWorkerSet"
    assert lws["spec"]["replicas"] == 2
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 4
    assert lws["spec"]["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    # Workers are created with the leader: a leader whose /health waits for every rank must
    # not be waited for (see workloads.GANG_STARTUP_POLICY).
    assert lws["spec"]["startupPolicy"] == "LeaderCreated"


def test_gang_commands_and_args_pass_through_verbatim() -> None:
    command = ["sh", "-c"]
    leader_args = ["ray start --head && vllm serve m --tensor-parallel-size 8"]
    rendered = render(
        replica(gang(leader={"command": command, "args": leader_args}, worker={"args": ["--x"]}))
    )
    templates = pod_templates(workload(rendered, "main"))
    leader, worker = engine_container(templates["leader"]), engine_container(templates["worker"])
    assert leader["command"] == command
    assert leader["args"] == leader_args
    assert "command" not in worker
    assert worker["args"] == ["--x"]


def test_workload_names_never_equal_the_replica_or_routing_names() -> None:
    rendered = render(replica(gang("epp"), standalone("pool")))
    routing = {m["metadata"]["name"] for m in rendered.step(Step.ROUTING).manifests}
    for w in workloads(rendered):
        name = w["metadata"]["name"]
        assert name != rendered.replica
        assert name not in routing


# --- env --------------------------------------------------------------------------------------


def test_leader_address_and_rank_are_injected_first_in_both_gang_templates() -> None:
    user_env = [{"name": "NCCL_DEBUG", "value": "INFO"}]
    rendered = render(replica(gang(leader={"env": user_env}, worker={"env": user_env})))
    for role, template in pod_templates(workload(rendered, "main")).items():
        env = engine_container(template)["env"]
        assert env_names(engine_container(template))[:2] == INJECTED, role
        assert env[0]["value"] == "$(LWS_LEADER_ADDRESS)"
        assert env[1]["value"] == "$(LWS_WORKER_INDEX)"


def test_user_env_is_preserved_in_order_after_the_injected_env() -> None:
    user_env = [
        {"name": "B", "value": "2"},
        {"name": "A", "value": "1"},
        {"name": "EMPTY", "value": ""},
    ]
    rendered = render(replica(gang(leader={"env": user_env})))
    leader = engine_container(pod_templates(workload(rendered, "main"))["leader"])
    assert leader["env"][2:] == user_env


def test_standalone_pods_get_no_injected_env() -> None:
    rendered = render(replica(standalone(env=[{"name": "A", "value": "1"}])))
    assert engine_container(serving_template(workload(rendered, "main")))["env"] == [
        {"name": "A", "value": "1"}
    ]
    bare = render(replica(standalone()))
    assert "env" not in engine_container(serving_template(workload(bare, "main")))


def test_field_ref_and_secret_env_pass_through() -> None:
    user_env = [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {
            "name": "NODE",
            "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName", "apiVersion": "v1"}},
        },
        {
            "name": "HF_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token", "optional": True}},
        },
        {"name": "CFG", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}},
    ]
    rendered = render(replica(standalone(env=user_env)))
    assert engine_container(serving_template(workload(rendered, "main")))["env"] == user_env


# --- metadata ---------------------------------------------------------------------------------


def test_member_metadata_reaches_the_pod_template() -> None:
    rendered = render(
        replica(standalone(labels={"team": "search"}, annotations={"prometheus.io/scrape": "true"}))
    )
    template = serving_template(workload(rendered, "main"))
    assert template["metadata"]["labels"]["team"] == "search"
    assert template["metadata"]["annotations"] == {"prometheus.io/scrape": "true"}


def test_managed_pod_labels_win_over_user_labels() -> None:
    rendered = render(replica(standalone(labels={"modelfleet.dev/serving": "hijack", "x": "y"})))
    pod = labels(serving_template(workload(rendered, "main")))
    assert pod[LABEL_SERVING] == rendered.replica
    assert pod["x"] == "y"


def test_leader_and_worker_metadata_stay_independent() -> None:
    rendered = render(
        replica(
            gang(
                leader={"labels": {"who": "leader"}, "annotations": {"a": "leader"}},
                worker={"labels": {"who": "worker"}},
            )
        )
    )
    templates = pod_templates(workload(rendered, "main"))
    assert templates["leader"]["metadata"]["labels"]["who"] == "leader"
    assert templates["leader"]["metadata"]["annotations"] == {"a": "leader"}
    assert templates["worker"]["metadata"] == {"labels": {"who": "worker"}}


def test_a_worker_without_metadata_composes_none() -> None:
    rendered = render(replica(gang()))
    assert "metadata" not in pod_templates(workload(rendered, "main"))["worker"]


def test_serving_labels_mark_standalone_pods_and_leaders_but_never_workers() -> None:
    rendered = render(replica(standalone("solo"), gang("group")))
    solo = labels(serving_template(workload(rendered, "solo")))
    assert solo == {
        LABEL_SERVING: rendered.replica,
        LABEL_WORKLOAD: workload(rendered, "solo")["metadata"]["name"],
    }
    templates = pod_templates(workload(rendered, "group"))
    assert labels(templates["leader"]) == {
        LABEL_SERVING: rendered.replica,
        LABEL_LWS_ROLE: "leader",
    }
    assert LABEL_SERVING not in labels(templates["worker"])


def test_only_serving_pods_expose_the_port_and_probe() -> None:
    rendered = render(replica(standalone("solo"), gang("group")))
    expected_probe = {
        "httpGet": {"path": "/health", "port": 8000},
        "initialDelaySeconds": 30,
        "periodSeconds": 10,
        "timeoutSeconds": 5,
    }
    for template in (
        serving_template(workload(rendered, "solo")),
        pod_templates(workload(rendered, "group"))["leader"],
    ):
        container = engine_container(template)
        assert [p["containerPort"] for p in container["ports"]] == [8000]
        assert container["readinessProbe"] == expected_probe
    worker = engine_container(pod_templates(workload(rendered, "group"))["worker"])
    assert "ports" not in worker
    assert "readinessProbe" not in worker


def test_every_pod_mounts_memory_backed_shared_memory() -> None:
    rendered = render(replica(standalone("solo"), gang("group")))
    for w in workloads(rendered):
        for template in pod_templates(w).values():
            spec = template["spec"]
            assert spec["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
            mounts = engine_container(template)["volumeMounts"]
            assert mounts == [{"name": "dshm", "mountPath": "/dev/shm"}]


def test_image_pull_secrets_pass_through() -> None:
    rendered = render(replica(standalone(pull_secrets=["a", "b"])))
    spec = serving_template(workload(rendered, "main"))["spec"]
    assert spec["imagePullSecrets"] == [{"name": "a"}, {"name": "b"}]


# --- devices, pools and tolerations -----------------------------------------------------------


def test_several_device_requests_give_one_claim_template_and_one_container_claim() -> None:
    rendered = render(multiple_device_requests())
    [claim] = rendered.step(Step.CLAIMS).manifests
    requests = claim["spec"]["spec"]["devices"]["requests"]
    assert [r["name"] for r in requests] == ["gpu", "rdma"]
    assert requests[1]["exactly"] == {
        "deviceClassName": "rdma.mellanox.com",
        "count": 1,
        "selectors": [
            {
                "cel": {
                    "expression": 'device.attributes["rdma.mellanox.com"].linkType == "infiniband"'
                }
            }
        ],
    }
    template = serving_template(workload(rendered, "main"))
    assert engine_container(template)["resources"] == {"claims": [{"name": "devices"}]}
    assert template["spec"]["resourceClaims"] == [
        {"name": "devices", "resourceClaimTemplateName": claim["metadata"]["name"]}
    ]


def test_device_requests_are_copied_verbatim() -> None:
    cel = ['device.attributes["gpu.nvidia.com"].productName == "X"', "device.driver != ''"]
    rendered = render(replica(standalone(requests=[gpus(4, "accel", *cel)])))
    [claim] = rendered.step(Step.CLAIMS).manifests
    assert claim["apiVersion"] == "resource.k8s.io/v1"
    assert claim["spec"]["spec"]["devices"]["requests"] == [
        {
            "name": "accel",
            "exactly": {
                "deviceClassName": "gpu.nvidia.com",
                "count": 4,
                "selectors": [{"cel": {"expression": c}} for c in cel],
            },
        }
    ]


def test_a_request_without_selectors_renders_none() -> None:
    request = {"name": "any", "deviceClassName": "gpu.nvidia.com", "count": 1}
    rendered = render(replica(standalone(requests=[request])))
    [claim] = rendered.step(Step.CLAIMS).manifests
    assert claim["spec"]["spec"]["devices"]["requests"] == [
        {"name": "any", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}
    ]


def test_a_claimless_leader_keeps_its_pool_pin_and_toleration_but_claims_nothing() -> None:
    rendered = render(claimless_leader())
    templates = pod_templates(workload(rendered, "main"))
    leader, worker = templates["leader"], templates["worker"]
    assert leader["spec"]["nodeSelector"] == {LABEL_POOL: "h100"}
    assert leader["spec"]["tolerations"] == [GPU_TOLERATION]
    assert "resourceClaims" not in leader["spec"]
    assert "resources" not in engine_container(leader)
    assert worker["spec"]["resourceClaims"][0]["name"] == "devices"
    # Only the worker has a claim template.
    claims = rendered.step(Step.CLAIMS).manifests
    assert [c["metadata"]["name"] for c in claims] == [
        worker["spec"]["resourceClaims"][0]["resourceClaimTemplateName"]
    ]


def test_members_are_pinned_to_their_own_pools() -> None:
    rendered = render(
        replica(
            engine(
                "main",
                member("Leader", pool="cpu-pool"),
                member("Worker", pool="h100-pool", nodes=2, requests=[gpus(8)]),
            )
        )
    )
    templates = pod_templates(workload(rendered, "main"))
    assert templates["leader"]["spec"]["nodeSelector"] == {LABEL_POOL: "cpu-pool"}
    assert templates["worker"]["spec"]["nodeSelector"] == {LABEL_POOL: "h100-pool"}


def test_every_pod_tolerates_the_gpu_taint() -> None:
    rendered = render(replica(standalone("solo"), gang("group")))
    for w in workloads(rendered):
        for template in pod_templates(w).values():
            assert template["spec"]["tolerations"] == [GPU_TOLERATION]


# --- names ------------------------------------------------------------------------------------


def test_multi_engine_replicas_qualify_workload_and_claim_names() -> None:
    rendered = render(replica(standalone("alpha"), standalone("beta")))
    names = [m["metadata"]["name"] for m in rendered.manifests()]
    workload_names = [w["metadata"]["name"] for w in workloads(rendered)]
    claim_names = [c["metadata"]["name"] for c in rendered.step(Step.CLAIMS).manifests]
    assert len(set(workload_names + claim_names)) == 4
    assert workload_names[0].startswith(f"{rendered.replica}-alpha-")
    assert workload_names[1].startswith(f"{rendered.replica}-beta-")
    assert len(names) == len(
        set(zip([m["kind"] for m in rendered.manifests()], names, strict=True))
    )


def test_co_located_replicas_get_distinct_names() -> None:
    first = render(replica(standalone(), gang("group"), name="qwen-aaaaa"))
    second = render(replica(standalone(), gang("group"), name="qwen-bbbbb"))
    assert first.namespace == second.namespace
    names_first = {(m["kind"], m["metadata"]["name"]) for m in first.manifests()}
    names_second = {(m["kind"], m["metadata"]["name"]) for m in second.manifests()}
    # Only the shared namespace overlaps.
    assert names_first & names_second == {("Namespace", first.namespace)}


# --- namespace and labels ---------------------------------------------------------------------


def test_everything_goes_into_the_workload_namespace_never_default() -> None:
    rendered = render(replica(namespace="default"))
    assert rendered.namespace == workload_namespace("default") == "mf-default"
    [namespace] = rendered.step(Step.NAMESPACE).manifests
    assert namespace["kind"] == "Namespace"
    assert namespace["metadata"]["name"] == rendered.namespace
    for manifest in rendered.manifests()[1:]:
        assert manifest["metadata"]["namespace"] == rendered.namespace


def test_every_object_names_its_replica_deployment_namespace_and_cluster() -> None:
    rendered = render(
        replica(gang(), name="r-12345", namespace="team-a", deployment="llm", cluster="c1")
    )
    expected = {
        "modelfleet.dev/deployment": "llm",
        "modelfleet.dev/namespace": "team-a",
        "modelfleet.dev/replica": "r-12345",
        "modelfleet.dev/cluster": "c1",
        "app.kubernetes.io/managed-by": "modelfleet",
    }
    for manifest in rendered.manifests()[1:]:
        assert manifest["metadata"]["labels"] == expected, manifest["kind"]


def test_the_shared_namespace_carries_no_replica_or_deployment_label() -> None:
    rendered = render(replica(namespace="team-a", cluster="c1"))
    [namespace] = rendered.step(Step.NAMESPACE).manifests
    assert namespace["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "modelfleet",
        "modelfleet.dev/cluster": "c1",
        "modelfleet.dev/namespace": "team-a",
    }


def test_manifests_share_no_mutable_objects() -> None:
    """Mutating one rendered manifest must never change another (or the next render)."""
    rendered = render(replica(gang("group"), standalone("solo")))
    seen: dict[int, str] = {}

    def walk(node: object, where: str) -> None:
        if isinstance(node, dict | list):
            assert id(node) not in seen, f"{where} is shared with {seen[id(node)]}"
            seen[id(node)] = where
            items = node.items() if isinstance(node, dict) else enumerate(node)
            for key, child in items:
                walk(child, f"{where}.{key}")

    for i, manifest in enumerate(rendered.manifests()):
        walk(manifest, f"[{i}]{manifest['kind']}")
    assert of_kind(rendered, "LeaderWorkerSet")

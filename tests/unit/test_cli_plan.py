"""``modelfleet plan`` from a user's point of view: the example fleets land where the hardware
and taints say they should, and the structured output keeps its contract."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from modelfleet.cli.main import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QUICKSTART = str(EXAMPLES / "quickstart")
CLASSES = str(EXAMPLES / "quickstart" / "classes.yaml")
CLUSTERS = str(EXAMPLES / "quickstart" / "clusters.yaml")
FRONTIER = str(EXAMPLES / "frontier")
runner = CliRunner()

DEPLOYMENT_KEYS = [
    "namespace",
    "name",
    "desired",
    "scheduled",
    "replicas",
    "conditions",
    "rejections",
]


def _plan(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["plan", *args, "-o", "json"])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def _by_name(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {d["name"]: d for d in document["deployments"]}


def test_quickstart_puts_qwen_on_20gi_gpus_and_off_the_frontier_cluster() -> None:
    qwen = _by_name(_plan("-f", QUICKSTART))["qwen3-8b"]
    assert (qwen["desired"], qwen["scheduled"]) == (2, 2)
    clusters = sorted(r["cluster"] for r in qwen["replicas"])
    assert clusters == ["h100-east", "l4-dev"]
    assert qwen["conditions"] == [
        {
            "type": "ReplicasScheduled",
            "status": "True",
            "reason": "ReplicasCreated",
            "message": "Scheduled 2 of 2 replicas",
        }
    ]


def test_frontier_models_land_on_matching_hardware() -> None:
    plans = _by_name(_plan("-f", QUICKSTART, "-f", FRONTIER))
    assert set(plans) == {
        "qwen3-8b",
        "gemma3-27b-fp8",
        "gemma3-27b-bf16",
        "gemma3-27b-int4",
        "kimi-k2",
        "qwen3-coder",
    }
    assert all(p["scheduled"] == p["desired"] for p in plans.values())

    (kimi,) = plans["kimi-k2"]["replicas"]
    assert kimi["cluster"] == "h200-west"
    assert [(e["name"], e["pool"], e["nodes"]) for e in kimi["engines"]] == [
        ("prefill", "gpu-h200", 1),
        ("decode", "gpu-h200", 1),
    ]
    # The InfiniBand NICs are Synthetic: they gate the pool but are never claimed.
    for e in kimi["engines"]:
        assert [r["name"] for r in e["members"][0]["deviceRequests"]] == ["gpu"]

    (coder,) = plans["qwen3-coder"]["replicas"]
    assert coder["cluster"] == "h200-west"
    (gang,) = coder["engines"]
    assert gang["nodes"] == 2
    assert [(m["role"], m["pool"]) for m in gang["members"]] == [
        ("Leader", "gpu-h200"),
        ("Worker", "gpu-h200"),
    ]

    def cluster_of(name: str) -> str:
        (replica,) = plans[name]["replicas"]
        cluster: str = replica["cluster"]
        return cluster

    assert cluster_of("gemma3-27b-fp8") == "h100-east"
    assert cluster_of("gemma3-27b-bf16") == "h100-east"
    assert cluster_of("gemma3-27b-int4") == "l4-dev"
    bf16_requests = plans["gemma3-27b-bf16"]["replicas"][0]["engines"][0]["members"][0]
    assert bf16_requests["deviceRequests"][0]["count"] == 2


def test_json_keys_follow_the_contract_exactly() -> None:
    document = _plan("-f", QUICKSTART, "-f", FRONTIER)
    assert list(document) == ["deployments"]
    for deployment in document["deployments"]:
        assert list(deployment) == DEPLOYMENT_KEYS
        for replica in deployment["replicas"]:
            assert list(replica) == ["name", "cluster", "engines"]
            for engine in replica["engines"]:
                assert list(engine) == ["name", "pool", "nodes", "members"]
                for member in engine["members"]:
                    assert list(member) == ["role", "pool", "deviceRequests"]
        for condition in deployment["conditions"]:
            assert list(condition) == ["type", "status", "reason", "message"]
        assert isinstance(deployment["rejections"], dict)


def test_yaml_output_matches_json_output() -> None:
    result = runner.invoke(app, ["plan", "-f", QUICKSTART, "-o", "yaml"])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout) == _plan("-f", QUICKSTART)


def test_later_deployments_see_capacity_taken_by_earlier_ones(tmp_path: Path) -> None:
    hungry = (EXAMPLES / "quickstart" / "qwen3-8b.yaml").read_text()
    hungry = hungry.split("---")[0].replace("replicas: 2", "replicas: 6")
    second = hungry.replace("name: qwen3-8b", "name: qwen3-8b-extra")
    (tmp_path / "deployments.yaml").write_text(hungry + "\n---\n" + second)
    plans = _by_name(_plan("-f", CLASSES, "-f", CLUSTERS, "-f", str(tmp_path)))
    # h100-east: 2 nodes x 8 GPUs; l4-dev: 2 nodes x 1 GPU; h200-west is tainted.
    assert plans["qwen3-8b"]["scheduled"] == 6
    assert plans["qwen3-8b-extra"]["scheduled"] == 6
    total_on_l4 = sum(r["cluster"] == "l4-dev" for p in plans.values() for r in p["replicas"])
    assert total_on_l4 == 2


def test_shortfall_exits_zero_and_explains_every_cluster(tmp_path: Path) -> None:
    doc = (EXAMPLES / "quickstart" / "qwen3-8b.yaml").read_text().split("---")[0]
    doc = doc.replace("count: 1", "count: 8").replace("replicas: 2", "replicas: 10")
    (tmp_path / "big.yaml").write_text(doc)
    (plan,) = _plan("-f", CLASSES, "-f", CLUSTERS, "-f", str(tmp_path))["deployments"]
    assert plan["scheduled"] == 2  # one 8-GPU pod per H100 node
    assert plan["conditions"][0]["reason"] == "InsufficientCapacity"
    assert plan["rejections"] == {
        "l4-dev": "no pool satisfies device 'gpu' of engine 'vllm'",
        "h100-east": "pool 'gpu-h100' has 0 free nodes, needs 1",
        "h200-west": "untolerated taint frontier-only=true:NoSchedule",
    }


def test_table_output_names_replicas_clusters_and_conditions() -> None:
    result = runner.invoke(app, ["plan", "-f", QUICKSTART, "-f", FRONTIER])
    assert result.exit_code == 0, result.output
    assert "ml-team/qwen3-8b: 2/2 replicas scheduled" in result.stdout
    assert "frontier/kimi-k2: 1/1 replicas scheduled" in result.stdout
    assert "h200-west" in result.stdout
    assert "ReplicasScheduled=True (ReplicasCreated)" in result.stdout


def test_existing_replicas_in_the_manifests_are_kept(tmp_path: Path) -> None:
    manifest = {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "ModelReplica",
        "metadata": {"name": "qwen3-8b-running", "namespace": "ml-team"},
        "spec": {
            "clusterName": "l4-dev",
            "deployment": "qwen3-8b",
            "index": 7,
            "engines": [
                {
                    "name": "vllm",
                    "members": [
                        {
                            "role": "Standalone",
                            "nodePoolName": "gpu-l4",
                            "deviceRequests": [
                                {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 1}
                            ],
                            "template": {
                                "spec": {"containers": [{"name": "engine", "image": "vllm"}]}
                            },
                        }
                    ],
                }
            ],
        },
    }
    (tmp_path / "running.yaml").write_text(yaml.safe_dump(manifest))
    plans = _by_name(_plan("-f", QUICKSTART, "-f", str(tmp_path)))
    replicas = plans["qwen3-8b"]["replicas"]
    # The running replica stays; the second one spreads to the cluster without one.
    assert [r["cluster"] for r in replicas] == ["h100-east", "l4-dev"]
    assert replicas[1]["name"] == "qwen3-8b-running"


def test_invalid_manifests_exit_two_with_every_error(tmp_path: Path) -> None:
    broken = (
        (EXAMPLES / "quickstart" / "qwen3-8b.yaml")
        .read_text()
        .replace("name: engine", "name: vllm")
    )
    (tmp_path / "broken.yaml").write_text(broken)
    result = runner.invoke(app, ["plan", "-f", str(tmp_path)])
    assert result.exit_code == 2
    assert "containers[0].name" in result.stderr
    assert "1 error; nothing was changed." in result.stderr


def test_missing_class_is_a_warning_not_a_crash(tmp_path: Path) -> None:
    clusters = (EXAMPLES / "quickstart" / "clusters.yaml").read_text()
    (tmp_path / "clusters.yaml").write_text(clusters)
    (tmp_path / "qwen.yaml").write_text((EXAMPLES / "quickstart" / "qwen3-8b.yaml").read_text())
    result = runner.invoke(app, ["plan", "-f", str(tmp_path), "-o", "json"])
    assert result.exit_code == 0, result.output
    assert "references InferenceClass 'l4', which does not exist" in result.stderr
    (plan,) = json.loads(result.stdout)["deployments"]
    assert plan["scheduled"] == 0
    assert plan["rejections"]["l4-dev"] == "no node pools"

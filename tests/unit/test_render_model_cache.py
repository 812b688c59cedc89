"""Rendering of ModelCache objects (the claim, the hydration Job, the auth Secret's metadata) and
of a replica that mounts a cache: Modelplane's claim name, read-only at /mnt/models on every pod
of every engine, and the downloader's progress lines read back."""

from __future__ import annotations

from typing import Any

from render_factories import gang, replica_doc, standalone

from modelfleet.api.caches import ModelCache
from modelfleet.api.deployments import ModelReplica
from modelfleet.api.kinds import parse_resource
from modelfleet.api.naming import child_name
from modelfleet.rendering.facts import ClusterFacts
from modelfleet.rendering.model_cache import (
    CACHE_MOUNT_PATH,
    DOWNLOADER_IMAGE,
    claim_name,
    job_name,
    last_error,
    parse_progress,
    render_auth_secret,
    render_claim,
    render_job,
    source_digest,
)
from modelfleet.rendering.replica_manifests import Step, render_replica


def _cache(revision: str | None = "r1", auth: bool = False) -> ModelCache:
    hf: dict[str, Any] = {"repo": "Qwen/Qwen3-Coder", "sizeGiB": 1100}
    if revision:
        hf["revision"] = revision
    if auth:
        hf["authSecret"] = {"name": "hf"}
    resource = parse_resource(
        {
            "apiVersion": "modelplane.ai/v1alpha1",
            "kind": "ModelCache",
            "metadata": {"name": "coder", "namespace": "ml-team"},
            "spec": {"source": "HuggingFace", "huggingFace": hf},
        }
    )
    assert isinstance(resource, ModelCache)
    return resource


def test_the_claim_has_modelplanes_name_the_size_and_the_class() -> None:
    claim = render_claim(_cache(), cluster="a", namespace="mf-ml-team", storage_class="rwx")
    assert claim["metadata"]["name"] == child_name("modelcache", "ml-team", "coder")
    assert claim["metadata"]["namespace"] == "mf-ml-team"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "1100Gi"}},
        "storageClassName": "rwx",
    }
    default = render_claim(_cache(), cluster="a", namespace="mf-ml-team", storage_class=None)
    assert "storageClassName" not in default["spec"]


def test_the_job_downloads_with_a_pinned_image_and_fails_fast() -> None:
    job = render_job(_cache(), cluster="a", namespace="mf-ml-team", with_token=False)
    assert job["metadata"]["name"] == job_name("ml-team", "coder", source_digest(_cache()))
    spec = job["spec"]
    assert spec["backoffLimit"] == 0  # the workflow retries, visibly, with its own back-off
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert container["image"] == DOWNLOADER_IMAGE
    assert ":" in DOWNLOADER_IMAGE
    assert not DOWNLOADER_IMAGE.endswith(":latest")
    script = container["command"][-1]
    assert "hf download" in script
    assert "huggingface_hub==" in script
    env = {e["name"]: e for e in container["env"]}
    assert env["MODEL_REPO"]["value"] == "Qwen/Qwen3-Coder"
    assert env["MODEL_REVISION"]["value"] == "r1"
    assert env["MODEL_BYTES"]["value"] == str(1100 << 30)
    assert "HF_TOKEN" not in env
    assert pod["volumes"] == [
        {
            "name": "model-cache",
            "persistentVolumeClaim": {"claimName": claim_name("ml-team", "coder")},
        }
    ]
    assert container["volumeMounts"] == [{"name": "model-cache", "mountPath": CACHE_MOUNT_PATH}]


def test_the_token_comes_from_the_secret_the_worker_writes_never_from_the_manifest() -> None:
    cache = _cache(auth=True)
    job = render_job(cache, cluster="a", namespace="mf-ml-team", with_token=True)
    env = {e["name"]: e for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    secret = render_auth_secret(cache, cluster="a", namespace="mf-ml-team")
    assert env["HF_TOKEN"] == {
        "name": "HF_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": secret["metadata"]["name"], "key": "HF_TOKEN"}},
    }
    assert "data" not in secret
    assert "stringData" not in secret


def test_a_new_revision_is_a_new_digest_and_a_new_job() -> None:
    assert source_digest(_cache("r1")) != source_digest(_cache("r2"))
    assert source_digest(_cache("r1")) == source_digest(_cache("r1"))
    assert job_name("ml-team", "coder", source_digest(_cache("r1"))) != job_name(
        "ml-team", "coder", source_digest(_cache("r2"))
    )


def test_progress_and_errors_are_read_from_the_downloader_log() -> None:
    log = "\n".join(
        [
            "Collecting huggingface_hub",
            "modelfleet-progress bytes=10 total=100",
            "modelfleet-progress bytes=40 total=100",
            "ConnectionResetError: [Errno 104] Connection reset by peer",
        ]
    )
    assert parse_progress(log) == (40, 100)
    assert last_error(log).startswith("ConnectionResetError")
    assert parse_progress("nothing yet") is None


def _cached_replica(*engines: dict[str, Any]) -> ModelReplica:
    doc = replica_doc(*engines)
    doc["spec"]["modelCacheRef"] = {"name": "coder"}
    return ModelReplica.model_validate(doc)


def _pod_specs(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    spec = manifest["spec"]
    if manifest["kind"] == "LeaderWorkerSet":
        lwt = spec["leaderWorkerTemplate"]
        return [lwt["leaderTemplate"]["spec"], lwt["workerTemplate"]["spec"]]
    return [spec["template"]["spec"]]


def test_every_engine_pod_mounts_the_cache_read_only_at_mnt_models() -> None:
    rendered = render_replica(_cached_replica(standalone("a"), gang("b")), ClusterFacts())
    workloads = rendered.step(Step.WORKLOADS).manifests
    pods = [p for m in workloads for p in _pod_specs(m)]
    assert len(pods) == 3  # a's pod, b's leader and b's worker
    for pod in pods:
        assert {
            "name": "model-cache",
            "persistentVolumeClaim": {
                "claimName": claim_name("ml-team", "coder"),
                "readOnly": True,
            },
        } in pod["volumes"]
        mounts = pod["containers"][0]["volumeMounts"]
        assert {"name": "model-cache", "mountPath": "/mnt/models", "readOnly": True} in mounts


def test_a_replica_without_a_cache_mounts_nothing_more() -> None:
    rendered = render_replica(
        ModelReplica.model_validate(replica_doc(standalone())), ClusterFacts()
    )
    (workload,) = rendered.step(Step.WORKLOADS).manifests
    (pod,) = _pod_specs(workload)
    assert [v["name"] for v in pod["volumes"]] == ["dshm"]

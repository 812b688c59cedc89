"""The ``cache.*`` Kubernetes activities against a simulated cluster (real HTTP, the product's
adapter): stage writes the volume, the token Secret (read from the worker's secrets directory)
and the Job; observe reports the claim, the Job, its progress and who mounts the volume; clean
removes what it is asked to. The token never appears in what they return or raise."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from test_sim_workloads import _start

from modelfleet.activities.caches import CacheActivities, WorkerSecrets
from modelfleet.adapters.kube_client import KubeCluster
from modelfleet.api.caches import ModelCache
from modelfleet.api.kinds import parse_resource
from modelfleet.contracts.cache_payloads import (
    CacheObjects,
    CacheObservation,
    CleanRequest,
    ObserveRequest,
    StageRequest,
)
from modelfleet.rendering.model_cache import (
    auth_secret_name,
    cache_labels,
    claim_name,
    job_name,
    render_auth_secret,
    render_claim,
    render_job,
    source_digest,
)
from modelfleet.sim.loop_thread import LoopThread
from modelfleet.sim.simulated_fleet import SimulatedFleet

CLUSTER = "l4-dev"
NS = "mf-ml"
TOKEN = "hf_unit-test-token-42"


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[LoopThread[SimulatedFleet]]:
    with _start(tmp_path / "sim") as f:
        yield f


def _cache() -> ModelCache:
    resource = parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelCache",
            "metadata": {"name": "qwen", "namespace": "ml"},
            "spec": {
                "source": "HuggingFace",
                "huggingFace": {
                    "repo": "Qwen/Qwen3-8B",
                    "sizeGiB": 1,
                    "authSecret": {"name": "hf"},
                },
            },
        }
    )
    assert isinstance(resource, ModelCache)
    return resource


def test_worker_secrets_are_found_in_order_and_a_missing_one_names_where_it_looked(
    tmp_path: Path,
) -> None:
    secrets = WorkerSecrets(tmp_path)
    with pytest.raises(ApplicationError) as missing:
        secrets.value("ml", "hf", "HF_TOKEN")
    assert missing.value.type == "MissingSecret"
    assert "secrets/ml/hf/HF_TOKEN" in str(missing.value)
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "hf").write_text("\nflat-token\n")
    assert secrets.value("ml", "hf", "HF_TOKEN") == "flat-token"
    mounted = tmp_path / "secrets" / "ml" / "hf"
    mounted.mkdir(parents=True)
    (mounted / "HF_TOKEN").write_text(TOKEN)
    assert secrets.value("ml", "hf", "HF_TOKEN") == TOKEN


def _observe(acts: CacheActivities, objects: CacheObjects) -> CacheObservation:
    return acts.observe(ObserveRequest(objects=objects))


def test_stage_observe_and_clean_on_a_simulated_cluster(
    fleet: LoopThread[SimulatedFleet], tmp_path: Path
) -> None:
    token_file = tmp_path / "creds" / "secrets" / "ml" / "hf" / "HF_TOKEN"
    token_file.parent.mkdir(parents=True)
    token_file.write_text(TOKEN)
    kube = KubeCluster(fleet.target.kubeconfig(CLUSTER), request_timeout=5.0)
    fleet.target.set_faults(CLUSTER, {"download_mib_per_second": 2048})
    # The Kubernetes activities never touch the Temporal client: an unconnected one will do.
    acts = CacheActivities(Client.__new__(Client), lambda _: kube, tmp_path / "creds")
    cache = _cache()
    digest = source_digest(cache)
    objects = CacheObjects(
        cluster=CLUSTER,
        namespace=NS,
        claim=claim_name("ml", "qwen"),
        job=job_name("ml", "qwen", digest),
        secret=auth_secret_name("ml", "qwen"),
    )
    assert _observe(acts, objects).claim == "Absent"
    where: dict[str, Any] = {"cluster": CLUSTER, "namespace": NS}
    acts.stage(
        StageRequest(objects=objects, manifests=[render_claim(cache, storage_class=None, **where)])
    )
    fleet.run(fleet.target.settle(10), timeout=15)
    assert _observe(acts, objects).claim == "Bound"
    acts.stage(
        StageRequest(
            objects=objects,
            manifests=[render_job(cache, with_token=True, **where)],
            auth_secret="ml/hf",
            secret_manifest=render_auth_secret(cache, **where),
        )
    )
    seen = _observe(acts, objects)
    assert seen.secret
    assert seen.job == "Active"
    assert TOKEN not in seen.model_dump_json()

    store = fleet.target.store(CLUSTER)

    async def completed() -> None:
        async with asyncio.timeout(10):
            await store.wait_for(
                "batch/v1",
                "Job",
                objects.job,
                lambda o: (o or {}).get("status", {}).get("succeeded") == 1,
                namespace=NS,
            )

    fleet.run(completed(), timeout=15)
    done = _observe(acts, objects)
    assert done.job == "Succeeded"
    assert (done.bytes_done, done.bytes_total) == (1 << 30, 1 << 30)

    # A workload that mounts the volume is named; clean-up of the volume is then the caller's
    # decision (the workflow keeps it), the activity only reports.
    kube.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "reader", "namespace": NS},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "reader"}},
                "template": {
                    "metadata": {"labels": {"app": "reader"}},
                    "spec": {
                        "containers": [{"name": "c", "image": "busybox"}],
                        "volumes": [
                            {"name": "m", "persistentVolumeClaim": {"claimName": objects.claim}}
                        ],
                    },
                },
            },
        }
    )
    assert _observe(acts, objects).mounted_by == ["Deployment reader"]

    labels = cache_labels(cache, CLUSTER)
    acts.clean(CleanRequest(objects=objects, jobs=True, secret=True, labels=labels))
    after = _observe(acts, objects)
    assert (after.job, after.secret, after.claim) == ("Absent", False, "Bound")
    acts.clean(CleanRequest(objects=objects, claim=True))
    assert _observe(acts, objects).claim == "Absent"
    kube.close()

"""The simulated cluster's side of ModelCache staging, driven through the product's Kubernetes
adapter with the product's rendered objects: a claim of a known StorageClass binds (a volume
provisioned for it), one of an unknown class stays Pending with the provisioner's reason, a pod
that mounts an unbound claim stays Pending with the scheduler's message, a download Job runs for
a time set by size and bandwidth printing progress, and an injected failure fails it with the
hub's error. Waits are event-driven (store subscriptions) and bounded."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_sim_workloads import _start

from modelfleet.adapters.kube_client import KubeCluster
from modelfleet.api.caches import ModelCache
from modelfleet.api.kinds import parse_resource
from modelfleet.rendering.model_cache import (
    claim_name,
    parse_progress,
    render_claim,
    render_job,
)
from modelfleet.sim.loop_thread import LoopThread
from modelfleet.sim.simulated_fleet import SimulatedFleet

CLUSTER = "l4-dev"
NS = "mf-ml"
WAIT = 10.0


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[LoopThread[SimulatedFleet]]:
    with _start(tmp_path) as f:
        yield f


def _cache(size_gib: int = 2, storage_class: str | None = None) -> ModelCache:
    spec: dict[str, Any] = {
        "source": "HuggingFace",
        "huggingFace": {"repo": "Qwen/Qwen3-8B", "revision": "abc123", "sizeGiB": size_gib},
    }
    if storage_class:
        spec["storageClassName"] = storage_class
    resource = parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelCache",
            "metadata": {"name": "qwen", "namespace": "ml"},
            "spec": spec,
        }
    )
    assert isinstance(resource, ModelCache)
    return resource


def _wait(
    fleet: LoopThread[SimulatedFleet], api_version: str, kind: str, name: str, predicate: Any
) -> dict[str, Any]:
    store = fleet.target.store(CLUSTER)

    async def go() -> dict[str, Any] | None:
        async with asyncio.timeout(WAIT):
            return await store.wait_for(api_version, kind, name, predicate, namespace=NS)

    found = fleet.run(go(), timeout=WAIT + 5)
    assert found is not None
    return found


def _kube(fleet: LoopThread[SimulatedFleet]) -> KubeCluster:
    kube = KubeCluster(fleet.target.kubeconfig(CLUSTER), request_timeout=5.0)
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    return kube


def _phase(obj: dict[str, Any] | None) -> str | None:
    return None if obj is None else (obj.get("status") or {}).get("phase")


def _job_done(obj: dict[str, Any] | None) -> str | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed"):
            return str(cond["type"])
    return None


def test_a_claim_of_the_default_class_binds_to_a_provisioned_volume(
    fleet: LoopThread[SimulatedFleet],
) -> None:
    kube = _kube(fleet)
    kube.apply(render_claim(_cache(), cluster=CLUSTER, namespace=NS, storage_class=None))
    name = claim_name("ml", "qwen")
    claim = _wait(fleet, "v1", "PersistentVolumeClaim", name, lambda o: _phase(o) == "Bound")
    assert claim["spec"]["storageClassName"] == "standard-rwx"
    assert claim["status"]["capacity"] == {"storage": "2Gi"}
    volume = kube.get("v1", "PersistentVolume", claim["spec"]["volumeName"])
    assert volume is not None
    assert volume["spec"]["claimRef"]["name"] == name
    assert volume["status"]["phase"] == "Bound"


def test_a_claim_of_an_unknown_class_stays_pending_and_its_pods_wait(
    fleet: LoopThread[SimulatedFleet],
) -> None:
    kube = _kube(fleet)
    cache = _cache(storage_class="no-such-class")
    kube.apply(render_claim(cache, cluster=CLUSTER, namespace=NS, storage_class="no-such-class"))
    kube.apply(render_job(cache, cluster=CLUSTER, namespace=NS, with_token=False))
    fleet.run(fleet.target.settle(WAIT), timeout=WAIT + 5)
    name = claim_name("ml", "qwen")
    claim = kube.get("v1", "PersistentVolumeClaim", name, NS)
    assert claim is not None
    assert _phase(claim) == "Pending"
    events = kube.list("v1", "Event", NS)
    assert any(
        e.get("reason") == "ProvisioningFailed"
        and 'storageclass.storage.k8s.io "no-such-class" not found' in e.get("message", "")
        for e in events
    )
    (pod,) = kube.list("v1", "Pod", NS)
    assert not pod["spec"].get("nodeName")
    (scheduled,) = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert "pod has unbound immediate PersistentVolumeClaims" in scheduled["message"]
    # The class appearing later (the cluster's owner installs it) binds the claim and the pod.
    kube.apply(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "no-such-class"},
            "provisioner": "example.com/nfs",
        }
    )
    _wait(fleet, "v1", "PersistentVolumeClaim", name, lambda o: _phase(o) == "Bound")


def test_a_download_job_runs_for_its_size_over_the_bandwidth_and_reports_progress(
    fleet: LoopThread[SimulatedFleet],
) -> None:
    # 2 GiB at 2 GiB/s: about one second.
    fleet.target.set_faults(CLUSTER, {"download_mib_per_second": 2048})
    kube = _kube(fleet)
    cache = _cache(size_gib=2)
    kube.apply(render_claim(cache, cluster=CLUSTER, namespace=NS, storage_class=None))
    job = render_job(cache, cluster=CLUSTER, namespace=NS, with_token=False)
    kube.apply(job)
    name = job["metadata"]["name"]
    done = _wait(fleet, "batch/v1", "Job", name, lambda o: _job_done(o) is not None)
    assert _job_done(done) == "Complete"
    assert done["status"]["succeeded"] == 1
    (pod,) = kube.list("v1", "Pod", NS, {"batch.kubernetes.io/job-name": name})
    assert pod["status"]["phase"] == "Succeeded"
    log = kube.pod_log(pod["metadata"]["name"], NS, tail_lines=50)
    assert parse_progress(log) == (2 << 30, 2 << 30)
    steps = [line for line in log.splitlines() if line.startswith("modelfleet-progress")]
    assert len(steps) > 2  # intermediate progress, not only the end


def test_an_injected_download_failure_fails_the_job_with_the_hubs_error(
    fleet: LoopThread[SimulatedFleet],
) -> None:
    fleet.target.set_faults(
        CLUSTER,
        {
            "download_mib_per_second": 4096,
            "fail_downloads": ["*hydrate*"],
            "download_error": "auth",
        },
    )
    kube = _kube(fleet)
    cache = _cache(size_gib=1)
    kube.apply(render_claim(cache, cluster=CLUSTER, namespace=NS, storage_class=None))
    job = render_job(cache, cluster=CLUSTER, namespace=NS, with_token=False)
    kube.apply(job)
    name = job["metadata"]["name"]
    failed = _wait(fleet, "batch/v1", "Job", name, lambda o: _job_done(o) is not None)
    assert _job_done(failed) == "Failed"
    assert failed["status"]["failed"] == 1  # backoffLimit 0: one pod, no retry in the Job
    (pod,) = kube.list("v1", "Pod", NS, {"batch.kubernetes.io/job-name": name})
    assert pod["status"]["phase"] == "Failed"
    log = kube.pod_log(pod["metadata"]["name"], NS, tail_lines=50)
    assert "401 Client Error: Unauthorized" in log
    done, total = parse_progress(log) or (0, 0)
    assert 0 < done < total

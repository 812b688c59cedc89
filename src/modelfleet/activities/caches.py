"""ModelCache activities (``cache.*``): look at a cache's objects on one cluster, apply its volume
and hydration Job, write and delete the auth Secret, clean up, and the Temporal-side calls the
ModelCache workflow needs (which clusters exist, report readiness to the Fleet, and answer a
replica that waits for a cache).

Thin: Kubernetes through ``adapters.kube_client`` (the worker's kubeconfigs, as the ``kube.*``
activities), Temporal through the client. The auth token is read here, from the worker's
secrets directory, and goes only into the Secret applied on the cluster: it is never returned,
logged or put in an error message.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.service import RPCError

from modelfleet.activities.errors import missing_secret, to_temporal
from modelfleet.adapters.kube_client import KubeCluster, KubeError
from modelfleet.api.clusters import NamespaceMode
from modelfleet.api.naming import workload_namespace
from modelfleet.contracts.cache_payloads import (
    CACHE_CLEAN,
    CACHE_OBSERVE,
    CACHE_READINESS,
    CACHE_REPORT,
    CACHE_STAGE,
    CACHE_TARGETS,
    CacheObjects,
    CacheObservation,
    CacheReadiness,
    CacheReadinessRequest,
    CacheReport,
    CacheStatus,
    CacheTarget,
    CleanRequest,
    ObserveRequest,
    StageRequest,
    cache_id,
)
from modelfleet.contracts.status import ClusterRecord
from modelfleet.rendering.cluster_settings import cluster_facts
from modelfleet.rendering.model_cache import last_error, parse_progress

FLEET_WORKFLOW_ID = "fleet"
# Workloads that may mount a cache's volume: checked before the volume is deleted.
_MOUNTERS = (
    ("apps/v1", "Deployment"),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
)
_MAX_MOUNTERS = 5


class WorkerSecrets:
    """Secrets the worker holds for a namespace: ``<credentials dir>/secrets/<ns>/<name>/<key>``
    (a Kubernetes Secret mounted as a directory), else ``secrets/<name>/<key>``, else the first
    line of ``secrets/<name>``."""

    def __init__(self, credentials_dir: Path) -> None:
        self.directory = credentials_dir / "secrets"

    def value(self, namespace: str, name: str, key: str) -> str:
        for path in (
            self.directory / namespace / name / key,
            self.directory / name / key,
            self.directory / name,
        ):
            if path.is_file():
                lines = [line.strip() for line in path.read_text().splitlines() if line.strip()]
                if lines:
                    return lines[0]
        raise missing_secret(
            f"auth secret {namespace}/{name} (key {key}) is not in the worker's secrets "
            f"directory (looked for secrets/{namespace}/{name}/{key} and secrets/{name})"
        )


def _job_state(job: dict[str, Any] | None) -> str:
    if job is None:
        return "Absent"
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed"):
            return "Succeeded" if cond["type"] == "Complete" else "Failed"
    return "Active"


def _mounts(template: dict[str, Any], claim: str) -> bool:
    for volume in (template.get("spec") or {}).get("volumes") or []:
        if (volume.get("persistentVolumeClaim") or {}).get("claimName") == claim:
            return True
    return False


def _pod_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj.get("spec") or {}
    if "leaderWorkerTemplate" in spec:
        lwt = spec["leaderWorkerTemplate"] or {}
        return [t for t in (lwt.get("leaderTemplate"), lwt.get("workerTemplate")) if t]
    return [spec.get("template") or {}]


class CacheActivities:
    def __init__(
        self, client: Client, cluster: Callable[[str], KubeCluster], credentials_dir: Path
    ) -> None:
        self._client = client
        # The worker's client for a cluster (``KubeActivities.client_for``: cached, secretRefs).
        self._cluster = cluster
        self._secrets = WorkerSecrets(credentials_dir)

    # --- Kubernetes ------------------------------------------------------------------------

    @activity.defn(name=CACHE_OBSERVE)
    def observe(self, request: ObserveRequest) -> CacheObservation:
        o = request.objects
        try:
            kube = self._cluster(o.cluster)
            claim = kube.get("v1", "PersistentVolumeClaim", o.claim, o.namespace)
            job = kube.get("batch/v1", "Job", o.job, o.namespace)
            secret = kube.get("v1", "Secret", o.secret, o.namespace) is not None
            phase = "Absent" if claim is None else (claim.get("status") or {}).get("phase")
            obs = CacheObservation.model_validate(
                {"secret": secret, "job": _job_state(job), "claim": phase or "Pending"}
            )
            if claim is not None and obs.claim == "Pending":
                obs.claim_message = self._claim_problem(kube, claim)
            if job is not None:
                self._read_progress(kube, o, obs)
            obs.mounted_by = self._mounted_by(kube, o)
        except KubeError as exc:
            raise to_temporal(exc) from None
        return obs

    @staticmethod
    def _claim_problem(kube: KubeCluster, claim: dict[str, Any]) -> str:
        """Why a claim is Pending, as far as the cluster says: its class is missing."""
        wanted = (claim.get("spec") or {}).get("storageClassName")
        if wanted and kube.get("storage.k8s.io/v1", "StorageClass", str(wanted)) is None:
            return f"StorageClass {wanted!r} does not exist on the cluster; the volume cannot bind"
        return "the volume is not bound yet"

    @staticmethod
    def _read_progress(kube: KubeCluster, o: CacheObjects, obs: CacheObservation) -> None:
        """Progress and the last error from the newest pod of the Job, as its log says."""
        pods = kube.list("v1", "Pod", o.namespace, {"batch.kubernetes.io/job-name": o.job})
        if not pods:
            obs.job_message = "waiting for the download pod"
            return
        pod = max(pods, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp", "")))
        name = str((pod.get("metadata") or {}).get("name", ""))
        status = pod.get("status") or {}
        if status.get("phase") == "Pending":
            waiting = [
                c.get("message")
                for c in status.get("conditions") or []
                if c.get("type") == "PodScheduled" and c.get("status") == "False"
            ]
            obs.job_message = f"download pod Pending: {waiting[0]}" if waiting else ""
            return
        log = kube.pod_log(name, o.namespace, tail_lines=20)
        progress = parse_progress(log)
        if progress is not None:
            obs.bytes_done, obs.bytes_total = progress
        if obs.job == "Failed":
            obs.job_message = last_error(log) or "the download pod failed"

    @staticmethod
    def _mounted_by(kube: KubeCluster, o: CacheObjects) -> list[str]:
        users: list[str] = []
        for api_version, kind in _MOUNTERS:
            if not kube.serves(api_version, kind):
                continue
            for obj in kube.list(api_version, kind, o.namespace):
                if any(_mounts(t, o.claim) for t in _pod_templates(obj)):
                    users.append(f"{kind} {(obj.get('metadata') or {}).get('name')}")
        return sorted(users)[:_MAX_MOUNTERS]

    @activity.defn(name=CACHE_STAGE)
    def stage(self, request: StageRequest) -> int:
        """Apply the namespace, the token Secret (when the cache has one) and ``manifests``."""
        o = request.objects
        kube = self._cluster(o.cluster)
        try:
            kube.ensure_namespace(o.namespace)  # claims none of its fields
            if request.auth_secret is not None and request.secret_manifest is not None:
                namespace, _, name = request.auth_secret.partition("/")
                token = self._secrets.value(namespace, name, request.auth_key)
                secret = dict(request.secret_manifest)
                secret["data"] = {"HF_TOKEN": base64.b64encode(token.encode()).decode()}
                kube.apply(secret)
            for manifest in request.manifests:
                kube.apply(manifest)
        except KubeError as exc:
            # The adapter's message names the object, never its data.
            raise to_temporal(exc) from None
        return len(request.manifests)

    @activity.defn(name=CACHE_CLEAN)
    def clean(self, request: CleanRequest) -> int:
        o = request.objects
        kube = self._cluster(o.cluster)
        deleted = 0
        try:
            if request.jobs:
                names = {o.job}
                if request.labels:
                    names |= {
                        str((j.get("metadata") or {}).get("name"))
                        for j in kube.list("batch/v1", "Job", o.namespace, request.labels)
                    }
                for name in sorted(names):
                    # Background: the Job's pods go with it (owner references).
                    deleted += kube.delete("batch/v1", "Job", name, o.namespace)
            if request.secret:
                deleted += kube.delete("v1", "Secret", o.secret, o.namespace)
            if request.claim:
                deleted += kube.delete("v1", "PersistentVolumeClaim", o.claim, o.namespace)
        except KubeError as exc:
            raise to_temporal(exc) from None
        return deleted

    # --- Temporal --------------------------------------------------------------------------

    @activity.defn(name=CACHE_TARGETS)
    async def targets(self, namespace: str) -> list[CacheTarget]:
        """Every cluster the Fleet knows, with what a cache in ``namespace`` needs of it."""
        handle = self._client.get_workflow_handle(FLEET_WORKFLOW_ID)
        records: list[ClusterRecord] = await handle.query(
            "clusters", result_type=list[ClusterRecord]
        )
        out = []
        for record in records:
            spec = record.spec
            facts = cluster_facts(spec)
            ns = (
                namespace
                if facts.namespace_mode is NamespaceMode.DEPLOYMENT
                else workload_namespace(namespace)
            )
            existing = spec.spec.cluster.existing
            storage = (
                existing.cache.storage_class_name
                if existing is not None and existing.cache is not None
                else None
            )
            out.append(
                CacheTarget(
                    cluster=spec.name,
                    labels=dict(spec.metadata.labels),
                    ready=record.ready and not record.draining,
                    namespace=ns,
                    storage_class=storage,
                )
            )
        return out

    @activity.defn(name=CACHE_REPORT)
    async def report(self, report: CacheReport) -> None:
        await self._client.get_workflow_handle(FLEET_WORKFLOW_ID).execute_update(
            "report_cache", report
        )

    @activity.defn(name=CACHE_READINESS)
    async def readiness(self, request: CacheReadinessRequest) -> CacheReadiness:
        """The cache's state on one cluster, from its workflow (for a replica that waits)."""
        handle = self._client.get_workflow_handle(cache_id(request.namespace, request.name))
        try:
            status: CacheStatus = await handle.query("status", result_type=CacheStatus)
        except RPCError:
            return CacheReadiness(ready=False, summary=f"ModelCache {request.name} not found")
        for entry in status.clusters:
            if entry.cluster == request.cluster:
                return CacheReadiness(ready=entry.summary() == "Ready", summary=entry.summary())
        return CacheReadiness(ready=False, summary="not staged on this cluster")

"""Kubernetes activities: apply, delete, wait for readiness, check readiness, compare what was
applied with what the cluster holds (drift), scan a cluster's watched replicas, probe a cluster.

Thin by design: each resolves the cluster's kubeconfig on the worker, calls the Kubernetes
adapter, and translates the adapter's error taxonomy into Temporal's (``activities.errors``:
retryable vs not, with Retry-After honoured). Credentials never leave the worker: payloads name
clusters only, and error messages come from the adapter, which never includes them.

These are synchronous activities; the worker runs them on a thread pool.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from temporalio import activity

from modelfleet.activities.errors import (
    crash_looping_before_ready,
    image_pull_failed,
    missing_credentials,
    not_ready_yet,
    readiness_deadline_exceeded,
    to_temporal,
)
from modelfleet.activities.keepalive import KeepAlive
from modelfleet.adapters.device_inventory import pool_devices
from modelfleet.adapters.gang_queues import observe_queue
from modelfleet.adapters.kube_client import KubeCluster, KubeError
from modelfleet.adapters.kube_drift import compare, repair_reason
from modelfleet.adapters.kube_errors import KubeNotFoundError
from modelfleet.adapters.kube_nodes import NodeInfo
from modelfleet.adapters.kube_readiness import unpullable
from modelfleet.adapters.kube_scan import Listed, changed_scans
from modelfleet.api.naming import LABEL_MANAGED_BY, LABEL_NAMESPACE, LABEL_REPLICA, MANAGED_BY
from modelfleet.contracts.activity_names import (
    KUBE_APPLY,
    KUBE_CHECK_READY,
    KUBE_DELETE,
    KUBE_DRIFT,
    KUBE_POLL_READY,
    KUBE_PROBE,
    KUBE_REPLICAS_FOUND,
    KUBE_SCAN_REPLICAS,
    KUBE_SWEEP_REPLICAS,
)
from modelfleet.contracts.kube_payloads import (
    ApplyRequest,
    ApplyResult,
    DeleteRequest,
    DeleteResult,
    DriftFound,
    DriftRequest,
    DriftResult,
    KubeconfigRef,
    ObjectRef,
    PoolObservation,
    ProbeRequest,
    ProbeResult,
    ReadyResult,
    ReplicaSweepRequest,
    WaitReadyRequest,
)
from modelfleet.contracts.watch_payloads import ScanRequest, ScanResult
from modelfleet.rendering.facts import ClusterFacts
from modelfleet.rendering.gateway_address import gateway_authority

GATEWAY_API_VERSION = "gateway.networking.k8s.io/v1"


class KubeconfigStore:
    """Resolves a cluster name to a kubeconfig file in the worker's credentials directory:
    ``<cluster>.yaml``, or, when the cluster names a secretRef, ``<name>/<key>`` (a Kubernetes
    Secret mounted as a directory) or ``<name>.yaml``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, cluster: str, ref: KubeconfigRef | None = None) -> Path:
        name = ref.name if ref is not None else cluster
        candidates = [self.directory / f"{name}{suffix}" for suffix in (".yaml", ".yml")]
        candidates.append(self.directory / f"{name}.kubeconfig")
        if ref is not None:
            candidates.insert(0, self.directory / name / ref.key)
        for candidate in candidates:
            if candidate.is_file():
                return candidate
        looked = " or ".join(str(c.relative_to(self.directory)) for c in candidates[:2])
        raise missing_credentials(
            f"no kubeconfig for cluster {cluster!r} in the worker's credentials directory "
            f"(looked for {looked} in {self.directory})"
        )


def _pool_of(node: NodeInfo, facts: ClusterFacts | None) -> str | None:
    """The pool ``node`` belongs to, by the node label each pool is pinned with."""
    if facts is None:
        return node.pool
    for pool, key in facts.pool_labels.items():
        if node.labels.get(key) == pool:
            return pool
    return node.labels.get(facts.default_pool_label)


class KubeActivities:
    def __init__(self, kubeconfigs: KubeconfigStore, facts: ClusterFacts | None = None) -> None:
        self._kubeconfigs = kubeconfigs
        self._facts = facts or ClusterFacts()
        self._clients: dict[str, KubeCluster] = {}
        self._stamps: dict[str, int] = {}
        # secretRefs learnt from probes: a cluster's other activities name only the cluster.
        self._refs: dict[str, KubeconfigRef] = {}
        self._lock = threading.Lock()

    def _cluster(self, name: str, ref: KubeconfigRef | None = None) -> KubeCluster:
        with self._lock:
            if ref is not None and self._refs.get(name) != ref:
                self._refs[name] = ref
                stale = self._clients.pop(name, None)
                if stale is not None:
                    stale.close()
            path = self._kubeconfigs.path(name, self._refs.get(name))
            # A rewritten kubeconfig (a refreshed cloud token) gets a fresh client.
            stamp = path.stat().st_mtime_ns
            client = self._clients.get(name)
            if client is not None and self._stamps.get(name) != stamp:
                client.close()
                client = None
            if client is None:
                client = KubeCluster(path)
                self._clients[name] = client
                self._stamps[name] = stamp
            return client

    def client_for(self, name: str) -> KubeCluster:
        """The worker's client for cluster ``name`` (shared with other activities' callers)."""
        return self._cluster(name)

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()

    @activity.defn(name=KUBE_APPLY)
    def apply(self, request: ApplyRequest) -> ApplyResult:
        """Apply the manifests in order. Progress is heartbeated, so a retry resumes after the
        last object applied rather than starting over: with a per-request failure rate, a step
        of many objects would otherwise rarely get through in one attempt."""
        cluster = self._cluster(request.cluster)
        (start,) = _resumed(1)
        with KeepAlive(start) as alive:
            for index in range(min(start, len(request.manifests)), len(request.manifests)):
                try:
                    cluster.apply(request.manifests[index])
                except KubeError as exc:
                    raise to_temporal(exc) from None
                alive.beat(index + 1)
        return ApplyResult(applied=[ObjectRef.of(m) for m in request.manifests])

    @activity.defn(name=KUBE_DELETE)
    def delete(self, request: DeleteRequest) -> DeleteResult:
        """Delete the objects in order; like ``apply``, a retry resumes where the last attempt
        got to (heartbeated as ``(next index, deleted, absent)``)."""
        cluster = self._cluster(request.cluster)
        start, deleted, absent = _resumed(3)
        with KeepAlive(start, deleted, absent) as alive:
            for index in range(min(start, len(request.objects)), len(request.objects)):
                ref = request.objects[index]
                try:
                    existed = cluster.delete(ref.api_version, ref.kind, ref.name, ref.namespace)
                except KubeError as exc:
                    raise to_temporal(exc) from None
                if existed:
                    deleted += 1
                else:
                    absent += 1
                alive.beat(index + 1, deleted, absent)
            swept = self._sweep(cluster, request) if request.sweep_labels else 0
        return DeleteResult(deleted=deleted + swept, absent=absent, swept=swept)

    @staticmethod
    def _sweep(cluster: KubeCluster, request: DeleteRequest) -> int:
        """Delete what still carries the labels, in the kinds and namespaces of the listed
        objects (idempotent, so a retry simply lists again; the caller's KeepAlive beats)."""
        swept = 0
        kinds = sorted({(r.api_version, r.kind, r.namespace) for r in request.objects}, key=str)
        for api_version, kind, namespace in kinds:
            try:
                swept += _delete_labelled(
                    cluster, (api_version, kind), namespace, request.sweep_labels
                )
            except KubeError as exc:
                raise to_temporal(exc) from None
            activity.heartbeat(len(request.objects), 0, 0)
        return swept

    @activity.defn(name=KUBE_REPLICAS_FOUND)
    def replicas_found(self, request: ReplicaSweepRequest) -> list[tuple[str, str]]:
        """The (deployment namespace, replica) labels on modelfleet's objects of the kinds, in
        every namespace. Read-only; kinds the cluster does not serve are skipped."""
        cluster = self._cluster(request.cluster)
        found: set[tuple[str, str]] = set()
        for api_version, kind in request.kinds:
            try:
                objects = cluster.list(api_version, kind, None, {LABEL_MANAGED_BY: MANAGED_BY})
            except KubeNotFoundError:
                continue  # not served here (no CRD): nothing of that kind to find
            except KubeError as exc:
                raise to_temporal(exc) from None
            for obj in objects:
                labels = (obj.get("metadata") or {}).get("labels") or {}
                if labels.get(LABEL_REPLICA) and labels.get(LABEL_NAMESPACE):
                    found.add((labels[LABEL_NAMESPACE], labels[LABEL_REPLICA]))
            activity.heartbeat()
        return sorted(found)

    @activity.defn(name=KUBE_SCAN_REPLICAS)
    def scan_replicas(self, request: ScanRequest) -> ScanResult:
        """The cluster's replica watch: one list per kind (modelfleet's label, every namespace)
        answers for every watched replica; only those whose observation changed or that are
        not healthy come back (``adapters.kube_scan``). An API error is raised, never answered
        as "not ready": a scan that could not be made is no sample."""
        cluster = self._cluster(request.cluster, request.kubeconfig)
        listed: list[Listed] = []
        for api_version, kind in request.kinds:
            try:
                objects = cluster.list(api_version, kind, None, {LABEL_MANAGED_BY: MANAGED_BY})
            except KubeNotFoundError:
                continue  # not served here: nothing of that kind exists
            except KubeError as exc:
                raise to_temporal(exc) from None
            listed += [(api_version, kind, obj) for obj in objects]
            activity.heartbeat()
        return ScanResult(changed=changed_scans(request.replicas, listed))

    @activity.defn(name=KUBE_SWEEP_REPLICAS)
    def sweep_replicas(self, request: ReplicaSweepRequest) -> int:
        """Delete every object of the kinds, in any namespace, labelled with one of the
        replicas (the same label sweep as ``kube.delete``'s backstop); idempotent, so a retry
        lists again. Returns how many were deleted."""
        cluster = self._cluster(request.cluster)
        deleted = 0
        for namespace, replica in request.replicas:
            labels = {LABEL_NAMESPACE: namespace, LABEL_REPLICA: replica}
            for kind in request.kinds:
                try:
                    deleted += _delete_labelled(cluster, kind, None, labels)
                except KubeNotFoundError:
                    continue  # not served here: nothing of that kind to delete
                except KubeError as exc:
                    raise to_temporal(exc) from None
            activity.heartbeat()
        return deleted

    def _readiness(
        self, request: WaitReadyRequest, *, raise_transient: bool = False
    ) -> ReadyResult:
        cluster = self._cluster(request.cluster)
        for rule in request.rules:
            try:
                readiness = cluster.readiness(rule)
            except KubeError as exc:
                if raise_transient or not exc.retryable:
                    raise to_temporal(exc) from None
                return ReadyResult(ready=False, reason=f"API error: {exc}")
            if not readiness.ready:
                # The adapter's reason already names the object.
                return ReadyResult(
                    ready=False,
                    reason=readiness.reason,
                    reported=readiness.reported,
                    restarts=readiness.restarts,
                    backing_off=readiness.backing_off,
                    pull_error=pulled.error if (pulled := readiness.pull_failure) else "",
                    pull_since=pulled.since if pulled else None,
                )
        return ReadyResult(ready=True, reason="all ready")

    @activity.defn(name=KUBE_CHECK_READY)
    def check_ready(self, request: WaitReadyRequest) -> ReadyResult:
        """One health sample. An API error is raised (Temporal retries it), never answered as
        "not ready": a failing request says nothing about the replica's health."""
        return self._readiness(request, raise_transient=True)

    @activity.defn(name=KUBE_DRIFT)
    def drift(self, request: DriftRequest) -> DriftResult:
        """What of the applied manifests the cluster no longer holds as applied (read-only: the
        workflow re-applies, so the repair is its own step in the history)."""
        cluster = self._cluster(request.cluster)
        found: list[DriftFound] = []
        for index, manifest in enumerate(request.manifests):
            ref = ObjectRef.of(manifest)
            try:
                live = cluster.get(ref.api_version, ref.kind, ref.name, ref.namespace)
            except KubeError as exc:
                raise to_temporal(exc) from None
            drift = compare(manifest, live)
            if drift is not None:
                found.append(
                    DriftFound(
                        index=index,
                        ref=ref,
                        kind=drift.kind.value,
                        reason=repair_reason(str(ref), drift),
                    )
                )
        return DriftResult(drifted=found)

    @activity.defn(name=KUBE_POLL_READY)
    def poll_ready(self, request: WaitReadyRequest) -> ReadyResult:
        """One check of every rule. Not ready before the (absolute) deadline raises a benign
        retryable ``NotReadyYet`` (the caller's retry policy is the poll interval), so a wait
        of up to the progress deadline holds an activity slot only for each short check;
        past the deadline it fails permanently with the reason."""
        result = self._readiness(request)
        if result.ready:
            return result
        limit = request.crash_loop_restarts
        if limit and result.restarts >= limit and result.backing_off:
            raise crash_looping_before_ready(result.restarts, result.reason)
        now = datetime.now(UTC)
        if limit and unpullable(result.pull_error, result.pull_since, now):
            raise image_pull_failed(result.reason)
        if now >= request.deadline:
            raise readiness_deadline_exceeded(result.reason)
        raise not_ready_yet(result.reason)

    @activity.defn(name=KUBE_PROBE)
    def probe(self, request: ProbeRequest) -> ProbeResult:
        started = time.monotonic()
        try:
            cluster = self._cluster(request.cluster, request.kubeconfig)
            facts = request.facts or self._facts
            version = cluster.server_version()
            nodes = cluster.nodes()
            # What the hardware reports (DRA); a cluster without the API publishes its classes.
            slices = (
                cluster.resource_slices()
                if cluster.serves("resource.k8s.io/v1", "ResourceSlice")
                else None
            )
            gateway = cluster.get(
                GATEWAY_API_VERSION,
                "Gateway",
                facts.gateway_name,
                facts.gateway_namespace,
            )
            # What the gang scheduler's queue can still admit is the cluster's real capacity.
            queue = observe_queue(cluster, facts.scheduler) if facts.scheduler else None
        except KubeError as exc:
            if exc.retryable:
                # A transient error says little about health: let Temporal retry the probe.
                raise to_temporal(exc) from None
            return ProbeResult(reachable=False, reason=str(exc))
        pools: dict[str, PoolObservation] = {}
        counted: dict[str, list[str]] = {}
        for node in nodes:
            pool = _pool_of(node, request.facts)
            if pool is None:
                continue
            seen = pools.setdefault(pool, PoolObservation(nodes=0, ready_nodes=0))
            seen.nodes += 1
            counted.setdefault(pool, [])
            if node.ready and node.schedulable:
                seen.ready_nodes += 1
                counted[pool].append(node.name)
        if slices is not None:
            for pool, groups in pool_devices(counted, slices).items():
                pools[pool].devices = groups
        address = gateway_authority(gateway) if gateway is not None else None
        elapsed = int((time.monotonic() - started) * 1000)
        return ProbeResult(
            reachable=True,
            reason=f"answered in {elapsed} ms",
            version=version,
            gateway_address=address,
            pools=pools,
            queue=queue,
        )


def _delete_labelled(
    cluster: KubeCluster, kind: tuple[str, str], namespace: str | None, labels: dict[str, str]
) -> int:
    """Delete the objects of ``kind`` carrying ``labels`` (all namespaces when ``namespace`` is
    None), skipping those already terminating; returns how many were deleted."""
    api_version, name_of_kind = kind
    deleted = 0
    for obj in cluster.list(api_version, name_of_kind, namespace, labels):
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            continue
        if cluster.delete(api_version, name_of_kind, meta["name"], meta.get("namespace")):
            deleted += 1
    return deleted


def _resumed(count: int) -> tuple[int, ...]:
    """The ``count`` counters the previous attempt of this activity last heartbeated, or zeros
    on a first attempt (or details of another shape, e.g. from an older worker)."""
    details = activity.info().heartbeat_details
    if len(details) == count and all(type(d) is int and d >= 0 for d in details):
        return tuple(details)
    return (0,) * count

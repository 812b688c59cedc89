"""The workload simulator: makes one emulated cluster behave like a GPU cluster by running its
controllers on the store's event loop, as kube-controller-manager, kube-scheduler and the
kubelets do on a real one.

It follows the store's changes, turns each into work keys (see :mod:`.context`) and runs them one
at a time: the Deployment and LeaderWorkerSet controllers create pods; the scheduler binds them to
nodes with free DRA devices (or leaves them Pending with a kube-scheduler-style message); the
kubelet turns bound pods Ready after a start-up delay, or applies the workload faults; the
gateway controller accepts Gateways, HTTPRoutes and InferencePools. :meth:`WorkloadSimulator.settle`
awaits quiescence for tests (event-driven).

Development/test emulator only: product code never imports ``modelfleet.sim``. This module only
touches the given store (in process, on its event loop) and the loop's timers; no files, no
network. A new controller gets its own module beside the others, a key kind, and a line in
:meth:`WorkloadSimulator._on_event` and :meth:`WorkloadSimulator._handle`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any, cast

from modelfleet.sim.apiserver.status_errors import ApiError
from modelfleet.sim.apiserver.store import ClusterStore, WatchEvent
from modelfleet.sim.controllers.context import API, ClusterContext, Key, PodAction, meta_of
from modelfleet.sim.controllers.deployment_controller import DeploymentController
from modelfleet.sim.controllers.gang_objects import GANG_GROUPS
from modelfleet.sim.controllers.gateway_controller import GatewayController
from modelfleet.sim.controllers.job_controller import JobController
from modelfleet.sim.controllers.kubelet import Kubelet, StartupPolicy
from modelfleet.sim.controllers.leaderworkerset_controller import LeaderWorkerSetController
from modelfleet.sim.controllers.replicaset_controller import ReplicaSetController
from modelfleet.sim.controllers.scheduler import Scheduler
from modelfleet.sim.controllers.volume_controller import VolumeController
from modelfleet.sim.faults import FaultConfig

__all__ = ["WorkloadSimulator"]

log = logging.getLogger(__name__)


class WorkloadSimulator:
    """Controllers, scheduler and kubelet of one simulated cluster, on the store's event loop."""

    def __init__(
        self,
        store: ClusterStore,
        *,
        startup: StartupPolicy | None = None,
        faults: Callable[[], FaultConfig] | None = None,
        gateway_address: str = "10.1.0.1",
        pod_cidr_prefix: str = "10.244",
    ) -> None:
        self.store = store
        self.startup = startup or StartupPolicy()
        self.gateway_address = gateway_address
        self._ctx = ClusterContext(store, faults or FaultConfig)
        self.kubelet = Kubelet(self._ctx, self.startup, pod_cidr_prefix)
        self.scheduler = Scheduler(self._ctx, self.kubelet)
        self.deployments = DeploymentController(self._ctx)
        self.replica_sets = ReplicaSetController(self._ctx)
        self.leader_worker_sets = LeaderWorkerSetController(self._ctx)
        self.gateways = GatewayController(self._ctx, gateway_address)
        self.jobs = JobController(self._ctx)
        self.volumes = VolumeController(self._ctx)
        self._busy = False
        self._pumping = False
        self._tasks: list[asyncio.Task[None]] = []
        # The gang schedulers' kinds (KAI, Kueue) are CRDs a cluster may serve or not, and may
        # come later: they are followed by group, not by a registered type.
        keys = {store.resource_type(*API[k]).key for k in API}
        self._sub = store.watches.subscribe(
            lambda ev: ev.resource.key in keys or ev.resource.group in GANG_GROUPS,
            maxsize=None,
            detach=True,
        )
        self.errors: list[str] = []

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Adopt what the store already holds, then follow its changes."""
        self.scheduler.rebuild_ledger()
        for kind in ("deployment", "replicaset", "lws", "gateway", "pool", "route", "job", "pvc"):
            for obj in await self.store.list(*API[kind]):
                meta = meta_of(obj)
                self._ctx.enqueue((kind, str(meta.get("namespace", "")), str(meta.get("name"))))
        self._ctx.enqueue(("schedule",))
        loop = asyncio.get_running_loop()
        name = self.store.name
        self._tasks = [
            loop.create_task(self._pump(), name=f"sim-workloads-pump-{name}"),
            loop.create_task(self._work(), name=f"sim-workloads-{name}"),
        ]

    async def stop(self) -> None:
        if self._ctx.stopped:
            return
        self._ctx.stopped = True
        self._sub.close()
        self._ctx.cancel_all_timers()
        self.jobs.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._ctx.notify()

    def idle(self, *, timers: bool = True) -> bool:
        """No event unprocessed, no work queued or running (and, with ``timers``, no start-up or
        crash timer pending; crash-loop restarts recur forever and never count)."""
        if self._sub.pending() or self._pumping or self._busy or not self._ctx.queue.empty():
            return False
        return not (timers and self._ctx.settling_timers())

    async def settle(self, max_seconds: float = 10.0, *, timers: bool = True) -> None:
        """Wait until :meth:`idle`; TimeoutError after ``max_seconds``."""
        async with asyncio.timeout(max_seconds):
            while not self.idle(timers=timers):
                if self._ctx.stopped:
                    return
                self._ctx.changed.clear()
                await self._ctx.changed.wait()

    # -- event plumbing --------------------------------------------------------------------

    async def _pump(self) -> None:
        while True:
            event = await self._sub.get()
            if event is None:
                if self._sub.overflowed:
                    log.error("workload simulator of %s fell behind its events", self.store.name)
                return
            self._pumping = True
            try:
                self._on_event(event)
            except Exception:
                log.exception("workload simulator failed on %s %s", event.type, event.name)
            finally:
                self._pumping = False
                self._ctx.notify()

    async def _work(self) -> None:
        ctx = self._ctx
        while True:
            key = await ctx.queue.get()
            self._busy = True
            ctx.dequeued(key)
            try:
                await self._handle(key)
            except ApiError as exc:
                # Someone else changed or removed the object meanwhile; its event re-queues it.
                log.debug("sim %s: %s on %s", self.store.name, exc, key)
            except Exception as exc:
                log.exception("workload simulator failed on %s", key)
                self.errors.append(f"{key}: {exc!r}")
            finally:
                self._busy = False
                ctx.notify()

    def _on_event(self, event: WatchEvent) -> None:
        enqueue = self._ctx.enqueue
        kind = event.resource.kind
        obj = event.object
        meta = meta_of(obj)
        ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        if kind == "Deployment":
            enqueue(("deployment", ns, name))
        elif kind == "ReplicaSet":
            enqueue(("replicaset", ns, name))
            for ref in meta.get("ownerReferences") or []:
                if ref.get("kind") == "Deployment" and ref.get("controller"):
                    enqueue(("deployment", ns, str(ref.get("name"))))
        elif kind == "LeaderWorkerSet":
            enqueue(("lws", ns, name))
            if "kueue.x-k8s.io/queue-name" in (meta.get("labels") or {}):
                # Kueue makes (or drops) the group's Workloads when the LWS changes.
                enqueue(("schedule",))
        elif kind == "Pod":
            self._on_pod_event(event)
        elif kind in ("Node", "ResourceSlice"):
            self.scheduler.nodes_changed()
            enqueue(("schedule",))
        elif kind == "DeviceClass":
            self.scheduler.device_classes_changed()
            enqueue(("schedule",))
        elif kind in ("ResourceClaimTemplate", "ResourceClaim"):
            if event.type != "DELETED" or kind == "ResourceClaimTemplate":
                enqueue(("schedule",))
        elif kind == "InferencePool":
            if event.type != "DELETED":
                enqueue(("pool", ns, name))
        elif kind == "HTTPRoute":
            if event.type != "DELETED":
                enqueue(("route", ns, name))
            for ref in (obj.get("spec") or {}).get("rules") or []:
                for backend in ref.get("backendRefs") or []:
                    if backend.get("kind") == "InferencePool":
                        enqueue(("pool", str(backend.get("namespace") or ns), backend["name"]))
        elif kind == "Gateway" and event.type != "DELETED":
            enqueue(("gateway", ns, name))
        elif kind == "Job":
            if event.type != "DELETED":
                enqueue(("job", ns, name))
        elif kind == "PersistentVolumeClaim":
            if event.type == "DELETED":
                enqueue(("reclaim", str(meta.get("uid", ""))))
            else:
                enqueue(("pvc", ns, name))
            # Pods waiting for the claim to bind may fit now.
            enqueue(("schedule",))
        elif event.resource.group in GANG_GROUPS and kind != "Workload":
            # A queue's quota, a PodGroup or a LocalQueue changed: admission may change.
            enqueue(("schedule",))
        elif kind == "StorageClass" and event.type != "DELETED":
            for claim in self.volumes.pending_claims():
                enqueue(("pvc", *claim))
        # Services: LWS headless services are created here; nothing reacts to them

    def _on_pod_event(self, event: WatchEvent) -> None:
        ctx = self._ctx
        pod = event.object
        uid = str(meta_of(pod).get("uid", ""))
        owner = ctx.owner_key(pod)
        replica_set = ctx.replicaset_of(pod)
        if replica_set is not None:
            ctx.enqueue(replica_set)
        job = _job_of(pod)
        if job is not None:
            ctx.enqueue(("job", str(meta_of(pod).get("namespace", "")), job))
        if event.type == "DELETED":
            self.jobs.pod_gone(uid)
            ctx.forget_pod(uid)
            if self.scheduler.pod_gone(uid):
                ctx.enqueue(("schedule",))
            if owner is not None:
                ctx.enqueue(owner)
            return
        ctx.arrival_of(pod)
        if not (pod.get("spec") or {}).get("nodeName"):
            ctx.enqueue(("schedule",))
        if owner is not None:
            ctx.enqueue(owner)

    async def _handle(self, key: Key) -> None:
        what = key[0]
        if what == "schedule":
            await self.scheduler.schedule()
        elif what == "deployment":
            await self.deployments.reconcile(key[1], key[2])
        elif what == "replicaset":
            await self.replica_sets.reconcile(key[1], key[2])
        elif what == "lws":
            await self.leader_worker_sets.reconcile(key[1], key[2])
        elif what == "tick":
            await self.kubelet.tick(key[1], key[2], key[3], cast(PodAction, key[4]))
        elif what == "pool":
            await self.gateways.reconcile_pool(key[1], key[2])
        elif what == "route":
            await self.gateways.reconcile_route(key[1], key[2])
        elif what == "gateway":
            await self.gateways.reconcile_gateway(key[1], key[2])
        elif what == "job":
            await self.jobs.reconcile(key[1], key[2])
        elif what == "download":
            await self.jobs.tick(key[1], key[2], key[3])
        elif what == "pvc":
            await self.volumes.reconcile(key[1], key[2])
        elif what == "reclaim":
            await self.volumes.reclaim(key[1])


def _job_of(pod: Mapping[str, Any]) -> str | None:
    """The name of the Job controlling ``pod``, if one does."""
    for ref in meta_of(pod).get("ownerReferences") or []:
        if ref.get("kind") == "Job" and ref.get("controller"):
            return str(ref.get("name"))
    return None

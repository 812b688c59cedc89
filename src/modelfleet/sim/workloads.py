"""The workload simulator: makes one emulated cluster behave like a GPU cluster.

It watches the cluster's in-process store and plays the controllers a real cluster runs: the
Deployment and LeaderWorkerSet controllers create pods; a scheduler binds each pod to a node whose
labels match its ``nodeSelector``, whose taints it tolerates and that has enough free DRA devices
for its ResourceClaims (evaluating the claim templates' CEL selectors), creating the allocated
ResourceClaims, or leaves it Pending with a kube-scheduler-style message; a kubelet turns bound
pods Ready after a start-up delay; the workloads' statuses track their pods; gateway and
InferencePool statuses are accepted. Workload faults from the cluster's fault config apply:

- ``never_ready`` (globs over workload names or ``namespace/name``): pods are bound but their
  containers stay waiting in ``ImagePullBackOff`` ("Back-off pulling image ..."), the most common
  way a real rollout never becomes ready; the workload never becomes Available.
- ``crash_after_ready_seconds`` (for workloads matching ``crash_after_ready``): once Ready, the
  pod's first container crashes after that many seconds and enters ``CrashLoopBackOff``;
  ``restartCount`` then grows at the kubelet's back-off (doubling up to 5 minutes). The pod never
  becomes Ready again, so the workload loses Available.

Faults are read when a pod starts (bind time) and when it becomes Ready, so changing them affects
pods started afterwards.

Development/test emulator only: product code never imports ``modelfleet.sim``. This module only
touches the given :class:`~.store.ClusterStore` (in process, on its event loop) and
the loop's timers; no files, no network. Time is real: start-up delays and back-offs use
``loop.call_later``. :meth:`WorkloadSimulator.settle` awaits quiescence for tests (event-driven).
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import itertools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from modelfleet.sim.apiserver.registry import ResourceType
from modelfleet.sim.apiserver.selectors import label_selector_from_object
from modelfleet.sim.apiserver.status_errors import ApiError
from modelfleet.sim.apiserver.store import ClusterStore, WatchEvent, now_rfc3339
from modelfleet.sim.controllers import (
    CONTROLLER_MANAGER,
    LWS_NAME,
    LWS_REVISION,
    POD_TEMPLATE_HASH,
    ClaimRequest,
    NodeState,
    allocate_on_node,
    claim_requests,
    condition,
    deployment_status,
    fit_failure,
    lws_pod,
    lws_pod_names,
    lws_status,
    match_attribute,
    merge_conditions,
    node_states,
    owner_reference,
    pod_for_deployment,
    pod_is_ready,
    template_hash,
    unschedulable_message,
)
from modelfleet.sim.faults import FaultConfig
from modelfleet.sim.nodes import GATEWAY_CONTROLLER, GATEWAY_NAME, SYSTEM_NAMESPACE

__all__ = [
    "DEFAULT_IMAGE_STARTUP",
    "STARTUP_ANNOTATION",
    "StartupPolicy",
    "WorkloadSimulator",
]

log = logging.getLogger(__name__)

STARTUP_ANNOTATION = "sim.modelfleet.dev/startup-seconds"
# Rough times from pod start to a passing readiness probe on warm nodes (image cached, weights
# on local disk for small models). Any image not listed takes ``fallback_seconds``.
DEFAULT_IMAGE_STARTUP: tuple[tuple[str, float], ...] = (
    ("*vllm*", 30.0),
    ("*sglang*", 30.0),
    ("*tensorrt*", 45.0),
    ("*endpoint-picker*", 3.0),
    ("*llm-d-router*", 3.0),
    ("*inference-scheduler*", 3.0),
)
KUBELET = "kubelet"
SCHEDULER = "default-scheduler"
_MAX_BACKOFF = 300.0
_API = {
    "deployment": ("apps/v1", "Deployment"),
    "lws": ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    "pod": ("v1", "Pod"),
    "node": ("v1", "Node"),
    "slice": ("resource.k8s.io/v1", "ResourceSlice"),
    "deviceclass": ("resource.k8s.io/v1", "DeviceClass"),
    "rct": ("resource.k8s.io/v1", "ResourceClaimTemplate"),
    "claim": ("resource.k8s.io/v1", "ResourceClaim"),
    "pool": ("inference.networking.k8s.io/v1", "InferencePool"),
    "route": ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    "gateway": ("gateway.networking.k8s.io/v1", "Gateway"),
    "service": ("v1", "Service"),
}

PodAction = Literal["ready", "crash", "restart"]
Key = tuple[str, ...]


@dataclass(frozen=True)
class StartupPolicy:
    """How long a bound pod takes to become Ready.

    Precedence: the ``sim.modelfleet.dev/startup-seconds`` annotation (on the pod template or the
    workload), then ``per_workload`` (globs over workload names or ``namespace/name``, first
    match wins), then ``default_seconds`` when set (a global override, e.g. 0 in tests), then
    the slowest matching ``per_image`` entry among the pod's containers, then
    ``fallback_seconds``.
    """

    default_seconds: float | None = None
    per_workload: tuple[tuple[str, float], ...] = ()
    per_image: tuple[tuple[str, float], ...] = DEFAULT_IMAGE_STARTUP
    fallback_seconds: float = 5.0
    # The kubelet's first crash-loop back-off; it doubles per restart up to five minutes.
    crash_backoff_seconds: float = 10.0

    def seconds_for(
        self,
        *,
        workload: str,
        namespace: str,
        annotations: Sequence[Mapping[str, str]],
        images: Iterable[str],
    ) -> float:
        for notes in annotations:
            raw = notes.get(STARTUP_ANNOTATION)
            if raw is not None:
                with contextlib.suppress(ValueError):
                    return max(0.0, float(raw))
        qualified = f"{namespace}/{workload}"
        for pattern, seconds in self.per_workload:
            if fnmatch.fnmatchcase(workload, pattern) or fnmatch.fnmatchcase(qualified, pattern):
                return seconds
        if self.default_seconds is not None:
            return self.default_seconds
        matched = [
            seconds
            for image in images
            for pattern, seconds in self.per_image
            if fnmatch.fnmatchcase(image, pattern)
        ]
        return max(matched) if matched else self.fallback_seconds


@dataclass
class _Timer:
    handle: asyncio.TimerHandle
    action: PodAction
    settling: bool


@dataclass
class _Ledger:
    """Which pod holds which device (driver, pool, device)."""

    owner: dict[tuple[str, str, str], str] = field(default_factory=dict)
    by_pod: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)

    def hold(self, pod_uid: str, keys: Iterable[tuple[str, str, str]]) -> None:
        for key in keys:
            self.owner[key] = pod_uid
            self.by_pod.setdefault(pod_uid, []).append(key)

    def release(self, pod_uid: str) -> bool:
        keys = self.by_pod.pop(pod_uid, [])
        for key in keys:
            if self.owner.get(key) == pod_uid:
                del self.owner[key]
        return bool(keys)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


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
        self._faults = faults or FaultConfig
        self.gateway_address = gateway_address
        self._pod_prefix = pod_cidr_prefix
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._queued: set[Key] = set()
        self._busy = False
        self._pumping = False
        self._changed = asyncio.Event()
        self._timers: dict[str, _Timer] = {}
        self._ledger = _Ledger()
        self._nodes: list[NodeState] | None = None
        self._device_classes: dict[str, list[str]] | None = None
        self._ip_counter = 0
        # Creation order of pods as first seen: creationTimestamp has one-second resolution and
        # resourceVersion changes on every write, so neither orders pods by age.
        self._arrival: dict[str, int] = {}
        self._arrivals = itertools.count()
        self._tasks: list[asyncio.Task[None]] = []
        self._sub = store.subscribe([_API[k] for k in _API])
        self._stopped = False
        self.errors: list[str] = []

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Adopt what the store already holds, then follow its changes."""
        self._rebuild_ledger()
        for kind, key_kind in (("deployment", "deployment"), ("lws", "lws")):
            for obj in await self.store.list(*_API[kind]):
                meta = _meta(obj)
                self._enqueue((key_kind, str(meta.get("namespace", "")), str(meta.get("name"))))
        for kind in ("gateway", "pool", "route"):
            for obj in await self.store.list(*_API[kind]):
                meta = _meta(obj)
                self._enqueue((kind, str(meta.get("namespace", "")), str(meta.get("name"))))
        self._enqueue(("schedule",))
        loop = asyncio.get_running_loop()
        name = self.store.name
        self._tasks = [
            loop.create_task(self._pump(), name=f"sim-workloads-pump-{name}"),
            loop.create_task(self._work(), name=f"sim-workloads-{name}"),
        ]

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._sub.close()
        for timer in self._timers.values():
            timer.handle.cancel()
        self._timers.clear()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._notify()

    def idle(self, *, timers: bool = True) -> bool:
        """No event unprocessed, no work queued or running (and, with ``timers``, no start-up or
        crash timer pending; crash-loop restarts recur forever and never count)."""
        if self._sub.pending() or self._pumping or self._busy or not self._queue.empty():
            return False
        return not (timers and any(t.settling for t in self._timers.values()))

    async def settle(self, max_seconds: float = 10.0, *, timers: bool = True) -> None:
        """Wait until :meth:`idle`; TimeoutError after ``max_seconds``."""
        async with asyncio.timeout(max_seconds):
            while not self.idle(timers=timers):
                if self._stopped:
                    return
                self._changed.clear()
                await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()

    # -- event plumbing --------------------------------------------------------------------

    def _enqueue(self, key: Key) -> None:
        if key in self._queued or self._stopped:
            return
        self._queued.add(key)
        self._queue.put_nowait(key)
        self._notify()

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
                self._notify()

    async def _work(self) -> None:
        while True:
            key = await self._queue.get()
            self._busy = True
            self._queued.discard(key)
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
                self._notify()

    def _on_event(self, event: WatchEvent) -> None:
        kind = event.resource.kind
        obj = event.object
        meta = _meta(obj)
        ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        if kind == "Deployment":
            self._enqueue(("deployment", ns, name))
        elif kind == "LeaderWorkerSet":
            self._enqueue(("lws", ns, name))
        elif kind == "Pod":
            self._on_pod_event(event)
        elif kind in ("Node", "ResourceSlice"):
            self._nodes = None
            self._enqueue(("schedule",))
        elif kind == "DeviceClass":
            self._device_classes = None
            self._enqueue(("schedule",))
        elif kind in ("ResourceClaimTemplate", "ResourceClaim"):
            if event.type != "DELETED" or kind == "ResourceClaimTemplate":
                self._enqueue(("schedule",))
        elif kind == "InferencePool":
            if event.type != "DELETED":
                self._enqueue(("pool", ns, name))
        elif kind == "HTTPRoute":
            if event.type != "DELETED":
                self._enqueue(("route", ns, name))
            for ref in (obj.get("spec") or {}).get("rules") or []:
                for backend in ref.get("backendRefs") or []:
                    if backend.get("kind") == "InferencePool":
                        self._enqueue(
                            ("pool", str(backend.get("namespace") or ns), backend["name"])
                        )
        elif kind == "Gateway" and event.type != "DELETED":
            self._enqueue(("gateway", ns, name))
        elif kind == "Service":
            pass  # LWS headless services are created here; nothing reacts to them

    def _on_pod_event(self, event: WatchEvent) -> None:
        pod = event.object
        meta = _meta(pod)
        uid = str(meta.get("uid", ""))
        owner = self._owner_key(pod)
        if event.type == "DELETED":
            self._arrival.pop(uid, None)
            self._cancel_timer(uid)
            if self._ledger.release(uid):
                self._enqueue(("schedule",))
            if owner is not None:
                self._enqueue(owner)
            return
        self._arrival_of(pod)
        if not (pod.get("spec") or {}).get("nodeName"):
            self._enqueue(("schedule",))
        if owner is not None:
            self._enqueue(owner)

    def _arrival_of(self, pod: Mapping[str, Any]) -> int:
        uid = str(_meta(pod).get("uid", ""))
        order = self._arrival.get(uid)
        if order is None:
            order = self._arrival[uid] = next(self._arrivals)
        return order

    def _owner_key(self, pod: Mapping[str, Any]) -> Key | None:
        meta = _meta(pod)
        ns = str(meta.get("namespace", ""))
        lws = (meta.get("labels") or {}).get(LWS_NAME)
        if lws:
            return ("lws", ns, str(lws))
        for ref in meta.get("ownerReferences") or []:
            if ref.get("kind") == "Deployment" and ref.get("controller"):
                return ("deployment", ns, str(ref.get("name")))
        return None

    async def _handle(self, key: Key) -> None:
        what = key[0]
        if what == "schedule":
            await self._schedule()
        elif what == "deployment":
            await self._reconcile_deployment(key[1], key[2])
        elif what == "lws":
            await self._reconcile_lws(key[1], key[2])
        elif what == "tick":
            await self._pod_tick(key[1], key[2], key[3], cast(PodAction, key[4]))
        elif what == "pool":
            await self._reconcile_pool(key[1], key[2])
        elif what == "route":
            await self._reconcile_route(key[1], key[2])
        elif what == "gateway":
            await self._reconcile_gateway(key[1], key[2])

    # -- store helpers ---------------------------------------------------------------------

    def _rt(self, kind: str) -> ResourceType:
        return self.store.resource_type(*_API[kind])

    def _peek(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        try:
            return self.store.get_object(self._rt(kind), namespace, name)
        except ApiError:
            return None

    def _pods(self, namespace: str, selector: Any) -> list[dict[str, Any]]:
        return self.store.list_objects(
            self._rt("pod"), namespace=namespace, label_selector=selector
        ).items

    async def _write_status(
        self, kind: str, obj: Mapping[str, Any], status: Mapping[str, Any]
    ) -> None:
        current = obj.get("status") or {}
        if all(current.get(k) == v for k, v in status.items()):
            return  # rewriting an unchanged status would only wake every watcher
        meta = _meta(obj)
        await self.store.patch_status(
            *_API[kind],
            str(meta["name"]),
            status,
            namespace=meta.get("namespace"),
            field_manager=CONTROLLER_MANAGER,
        )

    # -- Deployments -----------------------------------------------------------------------

    async def _reconcile_deployment(self, namespace: str, name: str) -> None:
        dep = self._peek("deployment", namespace, name)
        if dep is None or _meta(dep).get("deletionTimestamp"):
            return  # owner-reference garbage collection removes the pods
        uid = _meta(dep)["uid"]
        spec = dep.get("spec") or {}
        desired = int(spec.get("replicas", 1))
        current_hash = template_hash(spec.get("template") or {})
        selector = label_selector_from_object(spec.get("selector"))
        pods = [
            p
            for p in self._pods(namespace, selector)
            if any(r.get("uid") == uid for r in _meta(p).get("ownerReferences") or [])
            and not _meta(p).get("deletionTimestamp")
        ]
        current = [
            p for p in pods if _meta(p).get("labels", {}).get(POD_TEMPLATE_HASH) == current_hash
        ]
        old = [p for p in pods if p not in current]
        for _ in range(desired - len(current)):
            await self.store.create(
                pod_for_deployment(dep, current_hash), field_manager=CONTROLLER_MANAGER
            )
        if len(current) > desired:
            # As the ReplicaSet controller ranks them: unbound, then not ready, then the newest
            # go first, since they cost least to lose. (Sorts are stable: newest-first survives.)
            newest_first = sorted(current, key=self._arrival_of, reverse=True)
            victims = sorted(
                newest_first,
                key=lambda p: (bool((p.get("spec") or {}).get("nodeName")), pod_is_ready(p)),
            )
            for pod in victims[: len(current) - desired]:
                await self._delete_pod(pod)
        ready_current = sum(1 for p in current if pod_is_ready(p))
        if old and (desired == 0 or ready_current >= desired):
            for pod in old:
                await self._delete_pod(pod)
        dep = self._peek("deployment", namespace, name)
        if dep is None:
            return
        pods = [
            p
            for p in self._pods(namespace, selector)
            if any(r.get("uid") == uid for r in _meta(p).get("ownerReferences") or [])
            and not _meta(p).get("deletionTimestamp")
        ]
        await self._write_status(
            "deployment", dep, deployment_status(dep, pods, current_hash, now_rfc3339())
        )

    async def _delete_pod(self, pod: Mapping[str, Any]) -> None:
        meta = _meta(pod)
        with contextlib.suppress(ApiError):
            await self.store.delete("v1", "Pod", str(meta["name"]), namespace=meta.get("namespace"))

    # -- LeaderWorkerSets ------------------------------------------------------------------

    async def _reconcile_lws(self, namespace: str, name: str) -> None:
        lws = self._peek("lws", namespace, name)
        if lws is None or _meta(lws).get("deletionTimestamp"):
            return
        spec = lws.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        lwt = spec.get("leaderWorkerTemplate") or {}
        size = int(lwt.get("size") or 1)
        revision = template_hash(lwt)
        await self._ensure_headless_service(lws)
        existing = {
            str(_meta(p)["name"]): p
            for p in self._pods(namespace, f"{LWS_NAME}={name}")
            if not _meta(p).get("deletionTimestamp")
        }
        wanted = lws_pod_names(name, replicas, size)
        wanted_names = {pod for pod, _, _ in wanted}
        for pod_name, stale in existing.items():
            if pod_name not in wanted_names:
                await self._delete_pod(stale)
        for pod_name, group, worker in wanted:
            pod = existing.get(pod_name)
            if pod is not None and _meta(pod).get("labels", {}).get(LWS_REVISION) == revision:
                continue
            if pod is not None:
                await self._delete_pod(pod)
            await self.store.create(
                lws_pod(lws, group, worker, revision), field_manager=CONTROLLER_MANAGER
            )
        lws = self._peek("lws", namespace, name)
        if lws is None:
            return
        pods = [
            p
            for p in self._pods(namespace, f"{LWS_NAME}={name}")
            if not _meta(p).get("deletionTimestamp")
        ]
        await self._write_status("lws", lws, lws_status(lws, pods, revision, now_rfc3339()))

    async def _ensure_headless_service(self, lws: Mapping[str, Any]) -> None:
        meta = _meta(lws)
        name, namespace = str(meta["name"]), str(meta.get("namespace", "default"))
        if self._peek("service", namespace, name) is not None:
            return  # the LWS controller never replaces a Service it finds
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {LWS_NAME: name},
                "ownerReferences": [owner_reference(lws)],
            },
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": True,
                "selector": {LWS_NAME: name},
            },
        }
        with contextlib.suppress(ApiError):
            await self.store.create(service, field_manager=CONTROLLER_MANAGER)

    # -- scheduling ------------------------------------------------------------------------

    def _node_view(self) -> list[NodeState]:
        if self._nodes is None:
            nodes = self.store.list_objects(self._rt("node")).items
            slices = self.store.list_objects(self._rt("slice")).items
            self._nodes = node_states(nodes, slices)
        return self._nodes

    def _class_view(self) -> dict[str, list[str]]:
        if self._device_classes is None:
            classes: dict[str, list[str]] = {}
            for dc in self.store.list_objects(self._rt("deviceclass")).items:
                classes[str(_meta(dc)["name"])] = [
                    str((s.get("cel") or {}).get("expression"))
                    for s in (dc.get("spec") or {}).get("selectors") or []
                    if (s.get("cel") or {}).get("expression")
                ]
            self._device_classes = classes
        return self._device_classes

    def _rebuild_ledger(self) -> None:
        for claim in self.store.list_objects(self._rt("claim")).items:
            status = claim.get("status") or {}
            results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
            for holder in status.get("reservedFor") or []:
                uid = str(holder.get("uid", ""))
                self._ledger.hold(
                    uid, [(str(r["driver"]), str(r["pool"]), str(r["device"])) for r in results]
                )

    def _pod_claims(
        self, pod: Mapping[str, Any]
    ) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
        """(claim name, claim spec) per pod claim, or an error when a template is missing."""
        namespace = str(_meta(pod).get("namespace", "default"))
        out = []
        for ref in (pod.get("spec") or {}).get("resourceClaims") or []:
            claim_name = str(ref.get("name", ""))
            template_name = ref.get("resourceClaimTemplateName")
            if template_name:
                rct = self._peek("rct", namespace, str(template_name))
                if rct is None:
                    return [], (
                        f'resourceclaimtemplate.resource.k8s.io "{template_name}" not found'
                    )
                out.append((claim_name, dict((rct.get("spec") or {}).get("spec") or {})))
            elif ref.get("resourceClaimName"):
                claim = self._peek("claim", namespace, str(ref["resourceClaimName"]))
                if claim is None:
                    return [], (
                        f'resourceclaim.resource.k8s.io "{ref["resourceClaimName"]}" not found'
                    )
                out.append((claim_name, dict(claim.get("spec") or {})))
        return out, None

    async def _schedule(self) -> None:
        pending = [
            p
            for p in self.store.list_objects(self._rt("pod")).items
            if not (p.get("spec") or {}).get("nodeName") and not _meta(p).get("deletionTimestamp")
        ]
        for pod in sorted(pending, key=self._arrival_of):
            await self._try_bind(pod)

    async def _try_bind(self, pod: Mapping[str, Any]) -> None:
        spec = pod.get("spec") or {}
        claims, missing = self._pod_claims(pod)
        if missing is not None:
            await self._mark_unschedulable(pod, missing)
            return
        requests: list[tuple[Sequence[ClaimRequest], str | None]] = [
            (claim_requests(name, claim_spec), match_attribute(claim_spec))
            for name, claim_spec in claims
        ]
        nodes = self._node_view()
        reasons: dict[str, int] = {}
        taken = set(self._ledger.owner)
        classes = self._class_view()
        for node in nodes:
            failure = fit_failure(spec, node)
            if failure is None:
                allocation, failure = allocate_on_node(node, requests, taken, classes)
                if allocation is not None:
                    await self._bind(pod, node, claims, allocation.results)
                    return
            reasons[failure or "unknown"] = reasons.get(failure or "unknown", 0) + 1
        await self._mark_unschedulable(pod, unschedulable_message(len(nodes), reasons))

    async def _mark_unschedulable(self, pod: Mapping[str, Any], message: str) -> None:
        status = pod.get("status") or {}
        conditions = status.get("conditions") or []
        for cond in conditions:
            if cond.get("type") == "PodScheduled" and cond.get("message") == message:
                return
        new = merge_conditions(
            conditions,
            [condition("PodScheduled", False, "Unschedulable", message)],
            now_rfc3339(),
        )
        meta = _meta(pod)
        await self.store.patch_status(
            "v1",
            "Pod",
            str(meta["name"]),
            {"phase": "Pending", "conditions": new},
            namespace=meta.get("namespace"),
            field_manager=SCHEDULER,
        )

    async def _bind(
        self,
        pod: Mapping[str, Any],
        node: NodeState,
        claims: Sequence[tuple[str, dict[str, Any]]],
        results: Sequence[tuple[str, str, Any]],
    ) -> None:
        meta = _meta(pod)
        name, namespace, uid = str(meta["name"]), str(meta.get("namespace")), str(meta["uid"])
        self._ledger.hold(uid, [device.key for _, _, device in results])
        claim_statuses = []
        for claim_name, claim_spec in claims:
            claim_results = [
                {"request": req, "driver": d.driver, "pool": d.pool, "device": d.name}
                for c, req, d in results
                if c == claim_name
            ]
            created = await self.store.create(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaim",
                    "metadata": {
                        "generateName": f"{name}-{claim_name}-",
                        "namespace": namespace,
                        "annotations": {"resource.kubernetes.io/pod-claim-name": claim_name},
                        "ownerReferences": [owner_reference(pod)],
                    },
                    "spec": claim_spec,
                },
                field_manager="resource-claim-controller",
            )
            claim_statuses.append(
                {"name": claim_name, "resourceClaimName": created["metadata"]["name"]}
            )
            await self.store.patch_status(
                "resource.k8s.io/v1",
                "ResourceClaim",
                created["metadata"]["name"],
                {
                    "allocation": {
                        "devices": {"results": claim_results},
                        "nodeSelector": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": [node.name],
                                        }
                                    ]
                                }
                            ]
                        },
                    },
                    "reservedFor": [{"resource": "pods", "name": name, "uid": uid}],
                },
                namespace=namespace,
                field_manager=SCHEDULER,
            )
        await self.store.patch(
            "v1",
            "Pod",
            name,
            {"spec": {"nodeName": node.name}},
            namespace=namespace,
            field_manager=SCHEDULER,
        )
        never_ready = self._faults().workload_never_ready(*self._workload_of(pod))
        now = now_rfc3339()
        conditions = merge_conditions(
            (pod.get("status") or {}).get("conditions"),
            [
                condition("PodScheduled", True, "", ""),
                condition("Initialized", True, "", ""),
                condition("ContainersReady", False, "ContainersNotReady", _not_ready(pod)),
                condition("Ready", False, "ContainersNotReady", _not_ready(pod)),
            ],
            now,
        )
        status: dict[str, Any] = {
            "phase": "Pending",
            "conditions": conditions,
            "hostIP": _node_ip(node.name),
            "startTime": now,
            "containerStatuses": [
                _waiting(c, "ImagePullBackOff", f'Back-off pulling image "{c.get("image", "")}"')
                if never_ready
                else _waiting(c, "ContainerCreating", "")
                for c in (pod.get("spec") or {}).get("containers") or []
            ],
        }
        if claim_statuses:
            status["resourceClaimStatuses"] = claim_statuses
        await self.store.patch_status(
            "v1", "Pod", name, status, namespace=namespace, field_manager=KUBELET
        )
        if not never_ready:
            self._set_timer(pod, self._startup_seconds(pod), "ready", settling=True)

    def _workload_of(self, pod: Mapping[str, Any]) -> tuple[str, str]:
        """(workload name, namespace) for fault and start-up matching; a bare pod is its own."""
        meta = _meta(pod)
        owner = self._owner_key(pod)
        name = owner[2] if owner is not None else str(meta.get("name", ""))
        return name, str(meta.get("namespace", ""))

    def _startup_seconds(self, pod: Mapping[str, Any]) -> float:
        workload, namespace = self._workload_of(pod)
        owner = self._owner_key(pod)
        notes: list[Mapping[str, str]] = [_meta(pod).get("annotations") or {}]
        if owner is not None:
            obj = self._peek(owner[0], owner[1], owner[2])
            if obj is not None:
                notes.append(_meta(obj).get("annotations") or {})
        images = [str(c.get("image", "")) for c in (pod.get("spec") or {}).get("containers") or []]
        return self.startup.seconds_for(
            workload=workload, namespace=namespace, annotations=notes, images=images
        )

    # -- kubelet ---------------------------------------------------------------------------

    def _set_timer(
        self, pod: Mapping[str, Any], delay: float, action: PodAction, *, settling: bool
    ) -> None:
        meta = _meta(pod)
        uid = str(meta["uid"])
        self._cancel_timer(uid)
        key: Key = ("tick", str(meta.get("namespace")), str(meta["name"]), uid, action)
        loop = asyncio.get_running_loop()
        handle = loop.call_later(max(0.0, delay), self._fire, uid, key)
        self._timers[uid] = _Timer(handle, action, settling)
        self._notify()

    def _fire(self, uid: str, key: Key) -> None:
        self._timers.pop(uid, None)
        self._enqueue(key)

    def _cancel_timer(self, uid: str) -> None:
        timer = self._timers.pop(uid, None)
        if timer is not None:
            timer.handle.cancel()
            self._notify()

    async def _pod_tick(self, namespace: str, name: str, uid: str, action: PodAction) -> None:
        pod = self._peek("pod", namespace, name)
        if pod is None or _meta(pod).get("uid") != uid or _meta(pod).get("deletionTimestamp"):
            return
        if action == "ready":
            await self._pod_ready(pod)
        elif action == "crash":
            await self._pod_crash(pod, restarts=1, backoff=self.startup.crash_backoff_seconds)
        else:
            statuses = (pod.get("status") or {}).get("containerStatuses") or []
            restarts = int(statuses[0].get("restartCount", 0)) + 1 if statuses else 1
            backoff = min(_MAX_BACKOFF, self.startup.crash_backoff_seconds * 2 ** (restarts - 1))
            await self._pod_crash(pod, restarts=restarts, backoff=backoff)

    async def _pod_ready(self, pod: Mapping[str, Any]) -> None:
        meta = _meta(pod)
        self._ip_counter += 1
        n = self._ip_counter
        now = now_rfc3339()
        status = {
            "phase": "Running",
            "podIP": f"{self._pod_prefix}.{(n // 250) % 250}.{n % 250 + 2}",
            "conditions": merge_conditions(
                (pod.get("status") or {}).get("conditions"),
                [
                    condition("PodScheduled", True, "", ""),
                    condition("Initialized", True, "", ""),
                    condition("ContainersReady", True, "", ""),
                    condition("Ready", True, "", ""),
                ],
                now,
            ),
            "containerStatuses": [
                _running(c, now) for c in (pod.get("spec") or {}).get("containers") or []
            ],
        }
        await self.store.patch_status(
            "v1",
            "Pod",
            str(meta["name"]),
            status,
            namespace=meta.get("namespace"),
            field_manager=KUBELET,
        )
        faults = self._faults()
        if faults.workload_crashes(*self._workload_of(pod)):
            seconds = faults.crash_after_ready_seconds or 0.0
            self._set_timer(pod, seconds, "crash", settling=True)

    async def _pod_crash(self, pod: Mapping[str, Any], *, restarts: int, backoff: float) -> None:
        meta = _meta(pod)
        name = str(meta["name"])
        containers = (pod.get("spec") or {}).get("containers") or []
        if not containers:
            return
        crashed = containers[0]
        now = now_rfc3339()
        message = (
            f"back-off {backoff:g}s restarting failed container={crashed.get('name')} "
            f"pod={name}_{meta.get('namespace')}({meta.get('uid')})"
        )
        statuses = [
            {
                **_waiting(crashed, "CrashLoopBackOff", message),
                "restartCount": restarts,
                "lastState": {
                    "terminated": {
                        "exitCode": 1,
                        "reason": "Error",
                        "startedAt": now,
                        "finishedAt": now,
                    }
                },
            },
            *[_running(c, now) for c in containers[1:]],
        ]
        not_ready = f"containers with unready status: [{crashed.get('name')}]"
        status = {
            "phase": "Running",
            "conditions": merge_conditions(
                (pod.get("status") or {}).get("conditions"),
                [
                    condition("PodScheduled", True, "", ""),
                    condition("Initialized", True, "", ""),
                    condition("ContainersReady", False, "ContainersNotReady", not_ready),
                    condition("Ready", False, "ContainersNotReady", not_ready),
                ],
                now,
            ),
            "containerStatuses": statuses,
        }
        await self.store.patch_status(
            "v1", "Pod", name, status, namespace=meta.get("namespace"), field_manager=KUBELET
        )
        self._set_timer(pod, backoff, "restart", settling=False)

    # -- routing ---------------------------------------------------------------------------

    async def _reconcile_gateway(self, namespace: str, name: str) -> None:
        gateway = self._peek("gateway", namespace, name)
        if gateway is None:
            return
        status = gateway.get("status") or {}
        if status.get("addresses"):
            return
        # Any other Gateway someone creates gets a neighbour of the cluster's address, so that
        # addresses stay deterministic and never collide with the serving gateway's.
        address = (
            self.gateway_address
            if (namespace, name) == (SYSTEM_NAMESPACE, GATEWAY_NAME)
            else self.gateway_address.rsplit(".", 1)[0] + f".{10 + len(name) % 200}"
        )
        now = now_rfc3339()
        await self._write_status(
            "gateway",
            gateway,
            {
                "addresses": [{"type": "IPAddress", "value": address}],
                "conditions": merge_conditions(
                    status.get("conditions"),
                    [
                        condition("Accepted", True, "Accepted", "simulated gateway"),
                        condition("Programmed", True, "Programmed", "simulated gateway"),
                    ],
                    now,
                ),
            },
        )

    def _parent_status(
        self, parent_ref: Mapping[str, Any], old: Sequence[Mapping[str, Any]] | None, now: str
    ) -> dict[str, Any]:
        return {
            "parentRef": dict(parent_ref),
            "controllerName": GATEWAY_CONTROLLER,
            "conditions": merge_conditions(
                old,
                [
                    condition("Accepted", True, "Accepted", "simulated"),
                    condition("ResolvedRefs", True, "ResolvedRefs", "simulated"),
                ],
                now,
            ),
        }

    async def _reconcile_route(self, namespace: str, name: str) -> None:
        route = self._peek("route", namespace, name)
        if route is None:
            return
        now = now_rfc3339()
        old = {
            str(p.get("parentRef")): p.get("conditions")
            for p in (route.get("status") or {}).get("parents") or []
        }
        parents = []
        for ref in (route.get("spec") or {}).get("parentRefs") or []:
            parent = {
                "group": "gateway.networking.k8s.io",
                "kind": "Gateway",
                "namespace": namespace,
                **ref,
            }
            parents.append(self._parent_status(parent, old.get(str(parent)), now))
        await self._write_status("route", route, {"parents": parents})

    async def _reconcile_pool(self, namespace: str, name: str) -> None:
        pool = self._peek("pool", namespace, name)
        if pool is None:
            return
        gateways: list[dict[str, Any]] = []
        for route in self.store.list_objects(self._rt("route"), namespace=namespace).items:
            spec = route.get("spec") or {}
            refs_pool = any(
                b.get("kind") == "InferencePool" and b.get("name") == name
                for rule in spec.get("rules") or []
                for b in rule.get("backendRefs") or []
            )
            if not refs_pool:
                continue
            for ref in spec.get("parentRefs") or []:
                parent = {
                    "group": "gateway.networking.k8s.io",
                    "kind": "Gateway",
                    "namespace": str(ref.get("namespace") or namespace),
                    "name": str(ref.get("name")),
                }
                if parent not in gateways:
                    gateways.append(parent)
        if not gateways:
            # Until a route attaches it, report it against the cluster's gateway, which is where
            # every modelfleet route goes; it keeps "accepted" meaningful in isolation.
            gateways = [
                {
                    "group": "gateway.networking.k8s.io",
                    "kind": "Gateway",
                    "namespace": SYSTEM_NAMESPACE,
                    "name": GATEWAY_NAME,
                }
            ]
        now = now_rfc3339()
        old = {
            str(p.get("parentRef")): p.get("conditions")
            for p in (pool.get("status") or {}).get("parents") or []
        }
        parents = [self._parent_status(g, old.get(str(g)), now) for g in gateways]
        await self._write_status("pool", pool, {"parents": parents})


def _not_ready(pod: Mapping[str, Any]) -> str:
    names = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
    return f"containers with unready status: [{' '.join(names)}]"


def _waiting(container: Mapping[str, Any], reason: str, message: str) -> dict[str, Any]:
    waiting: dict[str, Any] = {"reason": reason}
    if message:
        waiting["message"] = message
    return {
        "name": container.get("name"),
        "image": container.get("image", ""),
        "imageID": "",
        "ready": False,
        "started": False,
        "restartCount": 0,
        "state": {"waiting": waiting},
    }


def _running(container: Mapping[str, Any], now: str) -> dict[str, Any]:
    image = str(container.get("image", ""))
    return {
        "name": container.get("name"),
        "image": image,
        "imageID": f"{image.split(':', 1)[0]}@sha256:{template_hash(image) * 6 + 'abcd'}",
        "ready": True,
        "started": True,
        "restartCount": 0,
        "state": {"running": {"startedAt": now}},
    }


def _node_ip(node: str) -> str:
    digest = template_hash(node)
    return f"10.128.{int(digest[:2], 16)}.{int(digest[2:4], 16) % 250 + 2}"

"""What every simulated controller of one cluster shares: the store, the work queue it adds keys
to, the pod timers, the order pods arrived in, and small store helpers (peek, list pods, write a
status only when it changes).

Development/test emulator only: product code never imports ``modelfleet.sim``. Touches the given
:class:`~modelfleet.sim.apiserver.store.ClusterStore` in process, on its event loop, and the
loop's timers; no files, no network.

A key is a tuple whose first element names the work: ``("deployment", ns, name)``,
``("replicaset", ns, name)``, ``("lws", ns, name)``, ``("job", ns, name)``, ``("pvc", ns, name)``,
``("download", ns, pod, uid)``, ``("schedule",)``, ``("tick", ns, name, uid,
action)``, ``("gateway"|"route"|"pool", ns, name)``.
:class:`~.controller_manager.WorkloadSimulator` routes each to its controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from modelfleet.sim.apiserver.registry import ResourceType
from modelfleet.sim.apiserver.status_errors import ApiError
from modelfleet.sim.apiserver.store import ClusterStore
from modelfleet.sim.controllers.events import EventRecorder
from modelfleet.sim.controllers.object_helpers import CONTROLLER_MANAGER, LWS_NAME
from modelfleet.sim.faults import FaultConfig

__all__ = ["API", "ClusterContext", "Key", "PodAction", "meta_of"]

# The kinds the controllers read and write, by short name.
API = {
    "deployment": ("apps/v1", "Deployment"),
    "replicaset": ("apps/v1", "ReplicaSet"),
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
    "job": ("batch/v1", "Job"),
    "pvc": ("v1", "PersistentVolumeClaim"),
    "pv": ("v1", "PersistentVolume"),
    "storageclass": ("storage.k8s.io/v1", "StorageClass"),
}

PodAction = Literal["ready", "crash", "restart", "pull", "pull_back_off"]
Key = tuple[str, ...]


def meta_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


@dataclass
class _Timer:
    handle: asyncio.TimerHandle
    action: PodAction
    settling: bool


class ClusterContext:
    """The shared state and helpers of one cluster's controllers."""

    def __init__(self, store: ClusterStore, faults: Callable[[], FaultConfig]) -> None:
        self.store = store
        self.faults = faults
        self.events = EventRecorder(store)
        self.queue: asyncio.Queue[Key] = asyncio.Queue()
        self._queued: set[Key] = set()
        self.changed = asyncio.Event()
        self.stopped = False
        self._timers: dict[str, _Timer] = {}
        # Creation order of pods as first seen: creationTimestamp has one-second resolution and
        # resourceVersion changes on every write, so neither orders pods by age.
        self._arrival: dict[str, int] = {}
        self._arrivals = itertools.count()

    # -- the work queue ------------------------------------------------------------------------

    def notify(self) -> None:
        self.changed.set()

    def enqueue(self, key: Key) -> None:
        if key in self._queued or self.stopped:
            return
        self._queued.add(key)
        self.queue.put_nowait(key)
        self.notify()

    def dequeued(self, key: Key) -> None:
        self._queued.discard(key)

    # -- pod timers (start-up, crash and restart) ------------------------------------------------

    def set_timer(
        self, pod: Mapping[str, Any], delay: float, action: PodAction, *, settling: bool
    ) -> None:
        """Enqueue ``("tick", ..., action)`` for ``pod`` after ``delay`` seconds (replacing its
        timer). ``settling`` timers count as pending work for :meth:`settling_timers`."""
        meta = meta_of(pod)
        uid = str(meta["uid"])
        self.cancel_timer(uid)
        key: Key = ("tick", str(meta.get("namespace")), str(meta["name"]), uid, action)
        loop = asyncio.get_running_loop()
        handle = loop.call_later(max(0.0, delay), self._fire, uid, key)
        self._timers[uid] = _Timer(handle, action, settling)
        self.notify()

    def _fire(self, uid: str, key: Key) -> None:
        self._timers.pop(uid, None)
        self.enqueue(key)

    def cancel_timer(self, uid: str) -> None:
        timer = self._timers.pop(uid, None)
        if timer is not None:
            timer.handle.cancel()
            self.notify()

    def cancel_all_timers(self) -> None:
        for timer in self._timers.values():
            timer.handle.cancel()
        self._timers.clear()

    def settling_timers(self) -> bool:
        return any(t.settling for t in self._timers.values())

    # -- pods: age and ownership ---------------------------------------------------------------

    def arrival_of(self, pod: Mapping[str, Any]) -> int:
        uid = str(meta_of(pod).get("uid", ""))
        order = self._arrival.get(uid)
        if order is None:
            order = self._arrival[uid] = next(self._arrivals)
        return order

    def forget_pod(self, uid: str) -> None:
        self._arrival.pop(uid, None)
        self.cancel_timer(uid)

    def owner_key(self, pod: Mapping[str, Any]) -> Key | None:
        """The key of the workload controlling ``pod`` (LWS by label, Deployment by owner)."""
        meta = meta_of(pod)
        ns = str(meta.get("namespace", ""))
        lws = (meta.get("labels") or {}).get(LWS_NAME)
        if lws:
            return ("lws", ns, str(lws))
        for ref in meta.get("ownerReferences") or []:
            if ref.get("kind") == "Deployment" and ref.get("controller"):
                return ("deployment", ns, str(ref.get("name")))
            if ref.get("kind") == "ReplicaSet" and ref.get("controller"):
                # A Deployment's pod belongs to the Deployment (for faults and start-up times).
                rs = self.peek("replicaset", ns, str(ref.get("name")))
                for rs_ref in meta_of(rs or {}).get("ownerReferences") or []:
                    if rs_ref.get("kind") == "Deployment" and rs_ref.get("controller"):
                        return ("deployment", ns, str(rs_ref.get("name")))
                return ("replicaset", ns, str(ref.get("name")))
        return None

    def replicaset_of(self, pod: Mapping[str, Any]) -> Key | None:
        """The key of the ReplicaSet controlling ``pod``, if one does."""
        meta = meta_of(pod)
        for ref in meta.get("ownerReferences") or []:
            if ref.get("kind") == "ReplicaSet" and ref.get("controller"):
                return ("replicaset", str(meta.get("namespace", "")), str(ref.get("name")))
        return None

    def workload_of(self, pod: Mapping[str, Any]) -> tuple[str, str]:
        """(workload name, namespace) for fault and start-up matching; a bare pod is its own."""
        meta = meta_of(pod)
        owner = self.owner_key(pod)
        name = owner[2] if owner is not None else str(meta.get("name", ""))
        return name, str(meta.get("namespace", ""))

    # -- store helpers -------------------------------------------------------------------------

    def rt(self, kind: str) -> ResourceType:
        return self.store.resource_type(*API[kind])

    def peek(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        try:
            return self.store.get_object(self.rt(kind), namespace, name)
        except ApiError:
            return None

    def pods(self, namespace: str, selector: Any) -> list[dict[str, Any]]:
        return self.store.list_objects(
            self.rt("pod"), namespace=namespace, label_selector=selector
        ).items

    async def write_status(
        self, kind: str, obj: Mapping[str, Any], status: Mapping[str, Any]
    ) -> None:
        current = obj.get("status") or {}
        if all(current.get(k) == v for k, v in status.items()):
            return  # rewriting an unchanged status would only wake every watcher
        meta = meta_of(obj)
        await self.store.patch_status(
            *API[kind],
            str(meta["name"]),
            status,
            namespace=meta.get("namespace"),
            field_manager=CONTROLLER_MANAGER,
        )

    async def delete_pod(self, pod: Mapping[str, Any]) -> None:
        meta = meta_of(pod)
        with contextlib.suppress(ApiError):
            await self.store.delete("v1", "Pod", str(meta["name"]), namespace=meta.get("namespace"))

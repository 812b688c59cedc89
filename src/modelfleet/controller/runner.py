"""The controller at work: leader election, one informer per kind (list, then watch from the
list's resourceVersion; list again when the watch's version is gone; resync on a bounded
period), a work queue of keys and a few workers that reconcile one key at a time.

May touch: the management cluster (``adapters.management``, called from daemon threads: the
client is synchronous), the Temporal client (``applying``, workflow queries), asyncio, logging.
Decisions are ``decide``'s, ``conditions``' and ``election``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from temporalio.client import Client, WorkflowUpdateFailedError

from modelfleet.adapters.management import (
    KubeConflictError,
    KubeError,
    KubeGoneError,
    KubeNotFoundError,
    ManagementCluster,
    WatchEvent,
)
from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.kinds import parse_resource
from modelfleet.api.manifest_errors import InvalidResourceError
from modelfleet.applying.deleting import DELETERS
from modelfleet.applying.entities import rejection_reason
from modelfleet.applying.kinds import apply_resource
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.contracts.ids import FLEET_ID, deployment_id
from modelfleet.contracts.status import DeploymentStatus
from modelfleet.controller import conditions
from modelfleet.controller.decide import (
    API_VERSION,
    WATCHED,
    AddFinalizer,
    Hand,
    Invalid,
    Key,
    Nothing,
    Teardown,
    decide,
    deployment_change,
    document,
    key_of,
    missing_classes,
    scale_target,
    scale_writers,
    scaled_by_autoscaler,
    scaler_conflict,
)
from modelfleet.controller.lease import try_lead
from modelfleet.controller.support import (
    ControllerSettings,
    in_thread,
    newer,
    query_or_none,
    raise_if_cancelling,
    short,
    wait,
)
from modelfleet.controller.workqueue import WorkQueue
from modelfleet.deployment.workflow import DeploymentWorkflow
from modelfleet.fleet.workflow import FleetWorkflow
from modelfleet.worker.tuning import Tuning

log = logging.getLogger("modelfleet.controller")
# How long the Fleet's classes are taken as known before they are read again.
FLEET_CLASSES_SECONDS = 10.0


class Controller:
    """See the module docstring. ``run`` until ``stop`` is set."""

    def __init__(
        self,
        management: ManagementCluster,
        client: Client,
        settings: ControllerSettings | None = None,
        *,
        tuning: Tuning | None = None,
    ) -> None:
        self.api = management
        self.client = client
        self.settings = settings or ControllerSettings()
        self.tuning = tuning
        self.objects: dict[Key, dict[str, Any]] = {}
        self.queue: WorkQueue[Key] = WorkQueue()
        # The generation of each object last handed to its workflow (a restart hands each once
        # more: update-with-start is idempotent).
        self.handed: dict[Key, int] = {}
        self._held_by: dict[Key, str] = {}  # the workflow ID each handed object went to
        self._last_status: dict[Key, float] = {}
        self._failures: dict[Key, int] = {}
        self._evaluator = SelectorEvaluator()
        self.leading = asyncio.Event()
        self._fleet_classes: list[InferenceClass] = []
        self._fleet_classes_at = -FLEET_CLASSES_SECONDS
        self.reconciles = 0

    # -- leadership ----------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Campaign for the lease; while leading, run informers and workers; stop with ``stop``."""
        while not stop.is_set():
            if await self._try_lead():
                log.info("controller %s leads", self.settings.identity)
                self.leading.set()
                try:
                    await self._lead(stop)
                finally:
                    self.leading.clear()
                    self.queue.close()
                    self.queue = WorkQueue()
                    self.objects.clear()
                continue
            await wait(stop, self.settings.retry_seconds)

    async def _try_lead(self) -> bool:
        return await try_lead(self.api, self.settings)

    async def _lead(self, stop: asyncio.Event) -> None:
        from modelfleet.worker.runner import ensure_fleet  # loads the activities' modules

        lost = asyncio.Event()
        tasks = [
            asyncio.create_task(self._renew(stop, lost)),
            *(asyncio.create_task(self._inform(kind)) for kind in WATCHED),
            *(asyncio.create_task(self._work()) for _ in range(self.settings.workers)),
            asyncio.create_task(self._resync()),
        ]
        try:
            await ensure_fleet(self.client, tuning=self.tuning)
            stopped = asyncio.create_task(stop.wait())
            lost_task = asyncio.create_task(lost.wait())
            await asyncio.wait({stopped, lost_task}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            lost_task.cancel()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _renew(self, stop: asyncio.Event, lost: asyncio.Event) -> None:
        s = self.settings
        # As client-go's renew deadline: the leader gives up a third of a lease before anyone
        # else may claim it, timed from when its last successful renewal was *sent* (the Lease's
        # renewTime is written after that), and an attempt that hangs counts against it too.
        # Otherwise a starved or partitioned leader keeps acting after another took over.
        give_up = s.lease_seconds * 2 / 3
        deadline = time.monotonic() + give_up
        while not stop.is_set():
            raise_if_cancelling()  # a renewal's wait_for may have swallowed it
            await wait(stop, s.renew_seconds)
            sent = time.monotonic()
            renewed = False
            with contextlib.suppress(TimeoutError):
                renewed = await asyncio.wait_for(
                    self._try_lead(), timeout=max(0.0, deadline - sent)
                )
            if renewed:
                deadline = sent + give_up
            elif time.monotonic() >= deadline:
                log.warning("controller %s lost the lease", s.identity)
                lost.set()
                return

    # -- informers ------------------------------------------------------------------------

    async def _inform(self, kind: str) -> None:
        backoff = self.settings.retry_seconds
        while True:
            try:
                listed = await in_thread(lambda: self.api.list_versioned(API_VERSION, kind))
            except KubeError as exc:
                log.info("list %s failed (retrying in %.0fs): %s", kind, backoff, exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)
                continue
            backoff = self.settings.retry_seconds
            seen = {key_of(obj): obj for obj in listed.items}
            for key in [k for k in self.objects if k.kind == kind and k not in seen]:
                self.objects.pop(key, None)
                self.queue.add(key)
            for key, obj in seen.items():
                self.objects[key] = obj
                self.queue.add(key)
            version = listed.resource_version
            while True:
                try:
                    version = await self._watch_once(kind, version)
                except KubeGoneError:
                    break  # too old: list again
                except KubeError as exc:
                    log.info("watch %s failed (listing again): %s", kind, exc)
                    await asyncio.sleep(backoff)
                    break

    async def _watch_once(self, kind: str, version: str) -> str:
        loop = asyncio.get_running_loop()
        latest = [version]
        active = [True]

        def follow() -> None:
            for event in self.api.watch(
                API_VERSION, kind, version, timeout_seconds=self.settings.watch_seconds
            ):
                if not active[0]:
                    return
                rv = (event.object.get("metadata") or {}).get("resourceVersion")
                if rv:
                    latest[0] = str(rv)
                loop.call_soon_threadsafe(self._on_event, event)

        try:
            await in_thread(follow)
        finally:
            active[0] = False
        return latest[0]

    def _on_event(self, event: WatchEvent) -> None:
        if event.type == "BOOKMARK" or not (event.object.get("metadata") or {}).get("name"):
            return
        key = key_of(event.object)
        if event.type == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = event.object
        self.queue.add(key)
        target = scale_target(event.object)
        if target is not None:
            # Whether the deployment has a scaler conflict changes with its autoscalers.
            self.queue.add(target)

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(self.settings.resync_seconds)
            for key in list(self.objects):
                self.queue.add(key)

    # -- workers --------------------------------------------------------------------------

    async def _work(self) -> None:
        task = asyncio.current_task()
        while True:
            # A call inside the last reconcile may have caught this worker's cancellation and
            # returned (Python 3.11's wait_for does when its call completes as it is
            # cancelled): stop here, or the stopping leader waits for this worker for ever.
            raise_if_cancelling()
            key = await self.queue.get()
            try:
                again = await self.reconcile(key)
                self._failures.pop(key, None)
                if again is not None:
                    self.queue.add_after(key, again)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure: the key comes back with a backoff
                if task is not None and task.cancelling():
                    # Cancelled mid-call: the Temporal client reports that as its own error.
                    raise asyncio.CancelledError from exc
                failures = self._failures.get(key, 0) + 1
                self._failures[key] = failures
                delay = min(self.settings.retry_seconds * 2 ** (failures - 1), 60.0)
                log.info("reconcile %s failed (again in %.0fs): %s", key, delay, short(exc))
                self.queue.add_after(key, delay)
            finally:
                self.reconciles += 1
                self.queue.done(key)

    async def reconcile(self, key: Key) -> float | None:
        """Bring one object's workflow and status in line with the object; returns when to look
        again (None: on the next change or resync)."""
        obj = self.objects.get(key)
        if obj is None:
            self.handed.pop(key, None)
            self._last_status.pop(key, None)
            return None
        action = decide(obj, await self._known_classes(), self._evaluator)
        meta = obj["metadata"]
        generation = int(meta.get("generation") or 0)
        if isinstance(action, AddFinalizer):
            await self._set_finalizers(obj, action.finalizers)
            return None
        if isinstance(action, Nothing):
            return None
        if isinstance(action, Teardown):
            return await self._teardown(key, obj, action)
        if isinstance(action, Invalid):
            self.handed.pop(key, None)
            return await self._write_status(
                key,
                obj,
                conditions.refused_status(generation, "Invalid", action.message, "Invalid"),
            )
        assert isinstance(action, Hand)
        if isinstance(action.resource, ModelDeployment):
            return await self._deployment(key, obj, action)
        if isinstance(action.resource, InferenceCluster):
            known = {c.name for c in await self._known_classes()}
            why = missing_classes(action.resource, known)
            if why:
                self.handed.pop(key, None)
                return await self._write_status(
                    key, obj, conditions.refused_status(generation, "Invalid", why, "Invalid")
                )
        target = scale_target(obj)
        scaled = self.objects.get(target) if target is not None else None
        if scaled is not None and target is not None:
            conflict = scaler_conflict(scale_writers(scaled), [key.name])
            if conflict:
                self.handed.pop(key, None)
                return await self._write_status(
                    key,
                    obj,
                    conditions.refused_status(generation, "ScalerConflict", conflict, "Conflict"),
                )
        if self.handed.get(key) != generation:
            try:
                wid = await apply_resource(self.client, action.resource, tuning=self.tuning)
            except WorkflowUpdateFailedError as exc:
                return await self._rejected(key, obj, generation, exc)
            self.handed[key] = generation
            self._held_by[key] = wid
        # Written whenever the object does not say it yet (a failed write is tried again).
        held_by = self._held_by.get(key, "")
        return await self._write_status(key, obj, conditions.handed_status(generation, held_by))

    async def _deployment(self, key: Key, obj: dict[str, Any], action: Hand) -> float | None:
        wanted = action.resource
        assert isinstance(wanted, ModelDeployment)
        generation = action.generation
        autoscalers = scaled_by_autoscaler(
            key, [o for k, o in self.objects.items() if k.kind == "ModelAutoscaler"]
        )
        conflict = scaler_conflict(scale_writers(obj), autoscalers)
        if conflict:
            return await self._write_status(
                key,
                obj,
                conditions.refused_status(generation, "ScalerConflict", conflict, "Conflict"),
            )
        handle = self.client.get_workflow_handle(deployment_id(key.namespace, key.name))
        if self.handed.get(key) != generation:
            held = await query_or_none(handle, DeploymentWorkflow.spec)
            if autoscalers and held is not None:
                # The ModelAutoscaler owns the replicas: the object's are not pushed over its.
                wanted = wanted.model_copy(
                    update={"spec": wanted.spec.model_copy(update={"replicas": held.spec.replicas})}
                )
            change = deployment_change(held, wanted)
            try:
                if change == "apply":
                    await apply_resource(self.client, wanted, tuning=self.tuning)
                elif change == "scale":
                    await handle.execute_update(
                        DeploymentWorkflow.scale, {"replicas": wanted.spec.replicas}
                    )
            except WorkflowUpdateFailedError as exc:
                return await self._rejected(key, obj, generation, exc)
            self.handed[key] = generation
        status: DeploymentStatus | None = await query_or_none(handle, DeploymentWorkflow.status)
        if status is None:
            return self.settings.status_poll_seconds
        wanted_status = conditions.deployment_status(status, generation, key.namespace, key.name)
        again = await self._write_status(key, obj, wanted_status)
        steady = status.phase == "Ready" and status.observed_generation >= status.generation
        if steady:
            return again
        return min(again or self.settings.status_poll_seconds, self.settings.status_poll_seconds)

    async def _teardown(self, key: Key, obj: dict[str, Any], action: Teardown) -> float | None:
        deleter = DELETERS.get(key.kind)
        if deleter is not None:
            try:
                refused = await asyncio.wait_for(
                    deleter(self.client, key.namespace, key.name),
                    self.settings.teardown_wait_seconds,
                )
            except TimeoutError:
                return 1.0  # still tearing down: look again (the delete Update is idempotent)
            if refused:
                generation = int(obj["metadata"].get("generation") or 0)
                await self._write_status(
                    key,
                    obj,
                    conditions.refused_status(generation, "DeleteRefused", refused, "Terminating"),
                    force=True,
                )
                return 10.0
        await self._set_finalizers(obj, action.remaining)
        self.handed.pop(key, None)
        self._last_status.pop(key, None)
        return None

    # -- writes ---------------------------------------------------------------------------

    async def _set_finalizers(self, obj: dict[str, Any], finalizers: list[str]) -> None:
        meta = obj["metadata"]
        key = key_of(obj)
        try:
            updated = await in_thread(
                lambda: self.api.set_finalizers(
                    API_VERSION,
                    key.kind,
                    key.name,
                    key.namespace or None,
                    finalizers,
                    str(meta.get("resourceVersion") or ""),
                )
            )
        except KubeConflictError:
            # Changed meanwhile: read it again and decide again.
            await self._refresh(key)
            raise
        except KubeNotFoundError:
            self.objects.pop(key, None)
            return
        self._remember(key, updated)

    async def _rejected(
        self, key: Key, obj: dict[str, Any], generation: int, exc: WorkflowUpdateFailedError
    ) -> float | None:
        """The workflow's validator refused the object: its status says why."""
        return await self._write_status(
            key,
            obj,
            conditions.refused_status(generation, "Rejected", rejection_reason(exc), "Rejected"),
        )

    async def _write_status(
        self, key: Key, obj: dict[str, Any], status: dict[str, Any], *, force: bool = False
    ) -> float | None:
        """Write ``status`` unless the object already says it; at most once per object per
        ``status_interval_seconds`` (returns when to come back for a coalesced write)."""
        if not conditions.differs(obj.get("status"), status):
            return None
        now = time.monotonic()
        last = self._last_status.get(key)
        if not force and last is not None and now - last < self.settings.status_interval_seconds:
            return self.settings.status_interval_seconds - (now - last)
        try:
            updated = await in_thread(
                lambda: self.api.patch_status(
                    API_VERSION, key.kind, key.name, key.namespace or None, status
                )
            )
        except KubeNotFoundError:
            self.objects.pop(key, None)
            return None
        self._last_status[key] = time.monotonic()
        self._remember(key, updated)
        return None

    def _remember(self, key: Key, updated: dict[str, Any]) -> None:
        current = self.objects.get(key)
        if current is None or newer(updated, current):
            self.objects[key] = {"apiVersion": API_VERSION, "kind": key.kind, **updated}

    async def _refresh(self, key: Key) -> None:
        fresh = await in_thread(
            lambda: self.api.get(API_VERSION, key.kind, key.name, key.namespace or None)
        )
        if fresh is None:
            self.objects.pop(key, None)
        else:
            self.objects[key] = fresh

    async def _known_classes(self) -> list[InferenceClass]:
        """The InferenceClasses of the management cluster, and the Fleet's (applied through the
        CLI, or before this install had a management cluster), the Fleet's read at most every
        ``FLEET_CLASSES_SECONDS``."""
        now = time.monotonic()
        if now - self._fleet_classes_at > FLEET_CLASSES_SECONDS:
            handle = self.client.get_workflow_handle(FLEET_ID)
            found = await query_or_none(handle, FleetWorkflow.classes)
            self._fleet_classes = list(found or [])
            self._fleet_classes_at = now
        ours = self._classes()
        names = {c.name for c in ours}
        return ours + [c for c in self._fleet_classes if c.name not in names]

    def _classes(self) -> list[InferenceClass]:
        found = []
        for k, obj in list(self.objects.items()):
            if k.kind != "InferenceClass" or (obj["metadata"].get("deletionTimestamp")):
                continue
            try:
                resource = parse_resource(document(obj))
            except InvalidResourceError:
                continue
            if isinstance(resource, InferenceClass):
                found.append(resource)
        return found


__all__ = ["Controller"]

"""The in-process ClusterStore API (what the workload simulator and fake controllers use)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from modelfleet.sim.apiserver import writes
from modelfleet.sim.apiserver.scale import set_scale
from modelfleet.sim.apiserver.status_errors import ApiError
from modelfleet.sim.apiserver.store import ClusterStore, WatchEvent

WAIT = 5.0


def _deploy(name: str, ns: str = "default", image: str = "nginx") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": image}]},
            },
        },
    }


async def _next(sub: Any) -> WatchEvent:
    event = await asyncio.wait_for(sub.get(), WAIT)
    assert event is not None
    return event


async def test_crud_and_metadata() -> None:
    store = ClusterStore("unit")
    created = await store.create(_deploy("web"))
    meta = created["metadata"]
    assert meta["generation"] == 1
    assert meta["resourceVersion"] == store.resource_version
    assert created["spec"]["replicas"] == 1  # defaulted
    fetched = await store.get("apps/v1", "Deployment", "web", "default")
    fetched["spec"]["replicas"] = 3
    assert (await store.get("apps/v1", "Deployment", "web", "default"))["spec"]["replicas"] == 1
    updated = await store.update(fetched)
    assert updated["metadata"]["generation"] == 2
    relabelled = await store.patch(
        "apps/v1", "Deployment", "web", {"metadata": {"labels": {"x": "y"}}}, namespace="default"
    )
    assert relabelled["metadata"]["generation"] == 2
    with_status = await store.patch_status(
        "apps/v1", "Deployment", "web", {"readyReplicas": 3}, namespace="default"
    )
    assert with_status["status"] == {"readyReplicas": 3}
    assert with_status["metadata"]["generation"] == 2
    listed = await store.list("apps/v1", "Deployment", label_selector="x=y")
    assert [d["metadata"]["name"] for d in listed] == ["web"]
    assert await store.delete("apps/v1", "Deployment", "web", namespace="default") is None
    with pytest.raises(ApiError) as exc:
        await store.get("apps/v1", "Deployment", "web", "default")
    assert (exc.value.code, exc.value.reason) == (404, "NotFound")


async def test_errors_carry_status() -> None:
    store = ClusterStore("unit")
    await store.create(_deploy("a"))
    with pytest.raises(ApiError) as exc:
        await store.create(_deploy("a"))
    assert exc.value.status["reason"] == "AlreadyExists"
    with pytest.raises(ApiError) as exc:
        await store.create(_deploy("a", ns="missing"))
    assert exc.value.code == 404
    bad = _deploy("b")
    del bad["spec"]["template"]
    with pytest.raises(ApiError) as exc:
        await store.create(bad)
    assert exc.value.code == 422
    assert [c["field"] for c in exc.value.causes] == ["spec.template.spec.containers"]
    stale = await store.get("apps/v1", "Deployment", "a", "default")
    await store.patch("apps/v1", "Deployment", "a", {"spec": {"replicas": 2}}, namespace="default")
    with pytest.raises(ApiError) as exc:
        await store.update(stale)
    assert (exc.value.code, exc.value.reason) == (409, "Conflict")
    with pytest.raises(ApiError) as exc:
        await store.get("example.com/v1", "Nothing", "x")
    assert exc.value.code == 404
    rct: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpus"},
        "spec": {"spec": {}},  # an empty claim spec is valid
    }
    await store.create(rct)
    rct["metadata"]["name"], rct["spec"] = "broken", {}
    with pytest.raises(ApiError) as exc:
        await store.create(rct)
    assert [c["field"] for c in exc.value.causes] == ["spec.spec"]


async def test_subscription_queue_sees_changes_in_order() -> None:
    store = ClusterStore("unit")
    await store.ensure_namespace("apps")
    sub = store.subscribe([("apps/v1", "Deployment")], namespace="apps")
    await store.create(_deploy("other"))  # other namespace: filtered out
    await store.create(_deploy("web", ns="apps"))
    await store.patch_status("apps/v1", "Deployment", "web", {"replicas": 1}, namespace="apps")
    await store.delete("apps/v1", "Deployment", "web", namespace="apps")
    events = [await _next(sub) for _ in range(3)]
    assert [e.type for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert [e.name for e in events] == ["web"] * 3
    assert events[1].old_object is not None
    assert "status" not in events[1].old_object
    events[0].object["spec"] = "mutated"  # subscribers get a copy detached from the store
    assert (await store.list("apps/v1", "Deployment", namespace="default"))[0]["spec"] != "mutated"
    sub.close()
    assert await sub.get() is None


async def test_subscribers_share_one_detached_copy_per_event() -> None:
    store = ClusterStore("unit")
    first = store.subscribe([("apps/v1", "Deployment")])
    second = store.subscribe([("apps/v1", "Deployment")])
    rt = store.resource_type("apps/v1", "Deployment")
    _, watcher = store.open_watch(rt, namespace=None, resource_version=None)
    await store.create(_deploy("web"))
    a, b, raw = await _next(first), await _next(second), await _next(watcher)
    assert a.object is b.object  # one copy for every in-process subscriber
    assert raw.object is store.get_object(rt, "default", "web")  # watchers read the snapshot
    assert a.object is not raw.object
    assert a.object == raw.object


async def test_identical_apply_is_a_noop_without_events() -> None:
    store = ClusterStore("unit")
    sub = store.subscribe([("apps/v1", "Deployment")])
    first = await store.apply(_deploy("web"), field_manager="m")
    second = await store.apply(_deploy("web"), field_manager="m")
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert sub.pending() == 1
    third = await store.apply(_deploy("web", image="nginx:2"), field_manager="m")
    assert third["metadata"]["generation"] == 2
    assert [(await _next(sub)).type for _ in range(2)] == ["ADDED", "MODIFIED"]


async def test_callback_subscriber_acts_as_a_controller() -> None:
    store = ClusterStore("unit")

    async def controller(event: WatchEvent) -> None:
        if event.type == "ADDED":
            await store.patch_status(
                "apps/v1",
                "Deployment",
                event.name,
                {"readyReplicas": 1, "observedGeneration": 1},
                namespace=event.namespace,
            )

    ctl = store.subscribe([("apps/v1", "Deployment")], callback=controller)
    observer = store.subscribe([("apps/v1", "Deployment")])
    await store.create(_deploy("web"))
    assert (await _next(observer)).type == "ADDED"
    modified = await _next(observer)
    assert modified.type == "MODIFIED"
    assert modified.object["status"]["readyReplicas"] == 1
    ctl.close()
    observer.close()


async def test_slow_subscriber_is_dropped() -> None:
    store = ClusterStore("unit", subscriber_queue_limit=2)
    sub = store.subscribe()
    for i in range(3):
        await store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"}})
    assert sub.overflowed
    assert sub.closed


async def test_watch_history_expiry() -> None:
    store = ClusterStore("unit", history_limit=3)
    rt = store.resource_type("v1", "ConfigMap")
    start = store.resource_version
    for i in range(5):
        await store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"}})
    with pytest.raises(ApiError) as exc:
        store.open_watch(rt, namespace=None, resource_version=start)
    assert (exc.value.code, exc.value.reason) == (410, "Expired")
    recent, sub = store.open_watch(
        rt, namespace=None, resource_version=str(int(store.resource_version) - 2)
    )
    assert [e.name for e in recent] == ["c3", "c4"]
    sub.close()


async def test_namespace_termination_waits_for_finalizers() -> None:
    store = ClusterStore("unit")
    await store.ensure_namespace("doomed")
    await store.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "held", "namespace": "doomed", "finalizers": ["x/y"]},
        }
    )
    await store.create(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "doomed"}}
    )
    terminating = await store.delete("v1", "Namespace", "doomed")
    assert terminating is not None
    assert terminating["status"]["phase"] == "Terminating"
    assert await store.list("v1", "Secret", namespace="doomed") == []
    with pytest.raises(ApiError) as exc:
        await store.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "new", "namespace": "doomed"},
            }
        )
    assert exc.value.code == 403
    await store.patch(
        "v1", "ConfigMap", "held", {"metadata": {"finalizers": None}}, namespace="doomed"
    )
    with pytest.raises(ApiError):
        await store.get("v1", "Namespace", "doomed")


async def test_crd_registers_a_served_kind() -> None:
    store = ClusterStore("unit")
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
    await store.create(crd)
    widget = await store.create(
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 1},
            "status": {"x": 1},
        }
    )
    assert "status" not in widget
    await store.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", "widgets.example.com")
    with pytest.raises(ApiError):
        await store.list("example.com/v1", "Widget")


async def test_scale_and_dry_run_internals() -> None:
    store = ClusterStore("unit")
    rt = store.resource_type("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "l"},
        "spec": {
            "leaderWorkerTemplate": {"workerTemplate": {"spec": {"containers": [{"name": "c"}]}}}
        },
    }
    dry = writes.create(store, rt, lws, namespace="default", field_manager="m", dry_run=True)
    assert dry["spec"]["leaderWorkerTemplate"]["size"] == 1
    assert await store.list("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet") == []
    await store.create(lws)
    scale = set_scale(store, rt, "default", "l", 4, resource_version=None, field_manager="hpa")
    assert scale["spec"]["replicas"] == 4
    stored = await store.get("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "l")
    assert stored["metadata"]["generation"] == 2


async def test_wait_for_condition() -> None:
    store = ClusterStore("unit")
    await store.create(_deploy("web"))

    async def become_ready() -> None:
        await store.patch_status("apps/v1", "Deployment", "web", {"readyReplicas": 1})

    waiter = asyncio.create_task(
        store.wait_for(
            "apps/v1",
            "Deployment",
            "web",
            lambda o: o is not None and o.get("status", {}).get("readyReplicas") == 1,
        )
    )
    await asyncio.sleep(0)  # one loop turn: the waiter subscribes before the change (ordering)
    assert not waiter.done()
    await become_ready()
    async with asyncio.timeout(WAIT):
        ready = await waiter
    assert ready is not None
    assert ready["status"]["readyReplicas"] == 1
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await store.wait_for("apps/v1", "Deployment", "web", lambda o: o is None)
    await store.delete("apps/v1", "Deployment", "web")
    async with asyncio.timeout(WAIT):
        gone = await store.wait_for("apps/v1", "Deployment", "web", lambda o: o is None)
    assert gone is None

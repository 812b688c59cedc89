"""The controller under faults, against a simulated management cluster and the shared stack:
many objects at once with the management API answering 20% of requests with 500 throughout,
a controller killed mid-sync and another taking over once its Lease expires (only the leader
acts), and a write that loses a resourceVersion race (409) retried. Every object converges,
each handed over once.

Waits are bounded condition waits, never sleeps.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration_support import Stack, wait_for
from management_support import Management, management_cluster

from modelfleet.adapters.management import KubeConflictError
from modelfleet.cli.resources import directory_endpoints
from modelfleet.controller.decide import FINALIZER, Key
from modelfleet.controller.runner import Controller

MANY = 200


def endpoints(namespace: str, count: int) -> str:
    docs = [
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelEndpoint",
            "metadata": {"name": f"ep-{i:04d}", "namespace": namespace, "labels": {"n": str(i)}},
            "spec": {"url": f"http://127.0.0.1:9/v{i}"},
        }
        for i in range(count)
    ]
    return yaml.safe_dump_all(docs)


async def converged(mgmt: Management, namespace: str, count: int) -> bool | None:
    """Every endpoint object Ready for its generation, and in the directory exactly once."""
    code, out, _ = await mgmt.kubectl(
        "get", "-n", namespace, "modelendpoints", "-o", "json", check=False
    )
    if code != 0:
        return None  # kubectl met an injected 500 too: ask again
    listed = json.loads(out)
    ready = 0
    for item in listed["items"]:
        status = item.get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
        fresh = status.get("observedGeneration") == item["metadata"]["generation"]
        ready += conditions.get("Ready") == "True" and fresh
    if ready < count:
        return None
    names = [e.name for e in await directory_endpoints(mgmt.stack.client, namespace)]
    assert len(names) == len(set(names)) == count, names
    return True


async def test_many_objects_converge_while_the_management_api_answers_500s(
    stack: Stack, tmp_path: Path
) -> None:
    namespace = "ctl-many"
    async with management_cluster(stack, "mgmt-many", tmp_path) as mgmt:
        await mgmt.kubectl("create", "namespace", namespace)
        await mgmt.kubectl("apply", "-f", "-", stdin=endpoints(namespace, MANY))
        stack.fleet.server.set_faults(mgmt.name, {"error_rate_500": 0.2, "seed": 7})
        mgmt.start_controller(retry_seconds=0.5)

        await wait_for(lambda: converged(mgmt, namespace, MANY), 240, f"{MANY} endpoints Ready")
        assert stack.fleet.server.stats(mgmt.name).injected_500 >= 20
        stack.fleet.server.set_faults(mgmt.name, {})  # the clean-up below must not fail
        await mgmt.kubectl("delete", "modelendpoints", "--all", "-n", namespace, "--timeout=180s")
        assert await directory_endpoints(stack.client, namespace) == []


def timed(controller: Controller) -> list[tuple[float, float]]:
    """When each of ``controller``'s reconciles began and ended (a cancelled one included)."""
    spans: list[tuple[float, float]] = []
    inner = controller.reconcile

    async def reconcile(key: Key) -> float | None:
        began = time.monotonic()
        try:
            return await inner(key)
        finally:
            spans.append((began, time.monotonic()))

    controller.reconcile = reconcile  # type: ignore[method-assign]
    return spans


async def test_a_killed_leader_is_replaced_once_its_lease_expires(
    stack: Stack, tmp_path: Path
) -> None:
    namespace = "ctl-takeover"
    count = 40
    async with management_cluster(stack, "mgmt-lead", tmp_path) as mgmt:
        await mgmt.kubectl("create", "namespace", namespace)
        fast: dict[str, Any] = {"lease_seconds": 6, "renew_seconds": 1.0, "retry_seconds": 0.5}
        first = mgmt.start_controller(**fast)
        second = mgmt.start_controller(**fast)
        spans = {id(first): timed(first), id(second): timed(second)}

        async def one_leads() -> Any:
            leaders = [c for c in (first, second) if c.leading.is_set()]
            return leaders[0] if leaders else None

        leader = await wait_for(one_leads, 30, "a leader")
        follower = second if leader is first else first
        await mgmt.kubectl("apply", "-f", "-", stdin=endpoints(namespace, count))

        async def some_done() -> bool | None:
            return True if leader.reconciles >= 5 else None

        await wait_for(some_done, 60, "the leader to be mid-sync")
        await mgmt.kill(leader)  # mid-sync; its lease is not released
        await wait_for(lambda: converged(mgmt, namespace, count), 120, "the follower to finish")
        assert follower.leading.is_set()
        # Only a leader acts: the two never reconciled at the same time (a machine starved
        # enough for the leader to miss its renew deadline before the kill may hand over
        # earlier than the kill, never while the leader still acts).
        led, followed = spans[id(leader)], spans[id(follower)]
        assert led
        assert followed
        overlapping = [(a, b) for a in led for b in followed if a[0] < b[1] and b[0] < a[1]]
        assert not overlapping, overlapping[:3]
        assert min(began for began, _ in followed) >= min(began for began, _ in led)
        await mgmt.kubectl("delete", "modelendpoints", "--all", "-n", namespace, "--timeout=120s")


async def test_a_stale_write_conflicts_and_the_next_reconcile_succeeds(
    stack: Stack, tmp_path: Path
) -> None:
    namespace = "ctl-conflict"
    async with management_cluster(stack, "mgmt-409", tmp_path) as mgmt:
        await mgmt.kubectl("create", "namespace", namespace)
        await mgmt.kubectl("apply", "-f", "-", stdin=endpoints(namespace, 1))
        controller = mgmt.start_controller(workers=1)
        await wait_for(lambda: converged(mgmt, namespace, 1), 60, "the endpoint Ready")
        await mgmt.stop_controllers()
        key = Key("ModelEndpoint", namespace, "ep-0000")
        current = controller.objects.get(key) or await mgmt.get_json(
            "-n", namespace, "modelendpoint", "ep-0000"
        )
        # Someone else changes the object after the controller read it: the controller's
        # finalizer write carries the old resourceVersion and is refused with 409.
        await mgmt.kubectl("label", "-n", namespace, "modelendpoint/ep-0000", "changed=yes")
        await mgmt.kubectl(
            "patch",
            "-n",
            namespace,
            "modelendpoint/ep-0000",
            "--type=merge",
            "-p",
            '{"metadata":{"finalizers":null}}',
        )
        stale = {**current, "metadata": {**current["metadata"], "finalizers": []}}
        controller.objects[key] = stale
        with pytest.raises(KubeConflictError):
            await controller.reconcile(key)
        # The conflict made it read the object again; deciding again succeeds.
        assert controller.objects[key]["metadata"]["labels"]["changed"] == "yes"
        await controller.reconcile(key)
        got = await mgmt.get_json("-n", namespace, "modelendpoint", "ep-0000")
        assert got["metadata"]["finalizers"] == [FINALIZER]
        mgmt.start_controller()
        await mgmt.kubectl("delete", "modelendpoints", "--all", "-n", namespace, "--timeout=60s")
        assert await directory_endpoints(stack.client, namespace) == []


async def test_the_controller_comes_back_from_a_management_api_gone_dark(
    stack: Stack, tmp_path: Path
) -> None:
    """The management API stops answering (requests and watches held, as a partitioned server
    is) for longer than the Lease: the controller loses nothing, and once the API answers
    again it takes the Lease back, watches again and hands over what was applied since."""
    namespace = "ctl-dark"
    first = 20
    async with management_cluster(stack, "mgmt-dark", tmp_path) as mgmt:
        await mgmt.kubectl("create", "namespace", namespace)
        await mgmt.kubectl("apply", "-f", "-", stdin=endpoints(namespace, first))
        mgmt.start_controller(retry_seconds=0.5)
        await wait_for(lambda: converged(mgmt, namespace, first), 120, f"{first} endpoints Ready")

        held_before = stack.fleet.server.stats(mgmt.name).dark_held
        stack.fleet.server.set_faults(mgmt.name, {"dark": True, "dark_mode": "hang"})
        try:

            async def lease_expired() -> bool | None:
                # Read from the simulated cluster's store (the API answers nobody now): the
                # controller's Lease, renewed every 2 s until the dark began, has expired.
                leases = await stack.fleet.store(mgmt.name).list("coordination.k8s.io/v1", "Lease")
                if not leases:
                    return None
                spec = leases[0]["spec"]
                renewed = datetime.fromisoformat(str(spec["renewTime"]).replace("Z", "+00:00"))
                expired = datetime.now(UTC) - renewed > timedelta(
                    seconds=int(spec["leaseDurationSeconds"]) + 1
                )
                return True if expired else None

            await wait_for(lease_expired, 90, "the controller's Lease to expire while dark")
            assert stack.fleet.server.stats(mgmt.name).dark_held > held_before
        finally:
            stack.fleet.server.set_faults(mgmt.name, {})
        more = endpoints(namespace, 2 * first)
        await mgmt.kubectl("apply", "-f", "-", stdin=more)
        await wait_for(
            lambda: converged(mgmt, namespace, 2 * first), 180, f"{2 * first} endpoints Ready"
        )
        await mgmt.kubectl("delete", "modelendpoints", "--all", "-n", namespace, "--timeout=180s")
        assert await directory_endpoints(stack.client, namespace) == []

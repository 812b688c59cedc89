"""A cluster dark (no API answers) past its NotReady grace, end to end (issue 16): its replicas
are re-placed on the other cluster within grace + one rollout, a scale-up meanwhile lands on the
other cluster, a scale-down aimed at the dark cluster does not hold anything up, and once the
cluster answers again what the moved replicas left there is swept (0 objects, 0 pods).

Its own environment (the real dev server, a simulated fleet of two H100 clusters, an in-process
worker) because it needs short probe and grace knobs (``worker.tuning``), which the shared
``stack`` keeps at their defaults. Placement is deterministic (``scheduling.fill`` spreads, then
takes the smaller name; ``retain.scale_down`` takes from the most loaded cluster): 3 replicas
put 2 on ``alpha`` (the one made dark) and 1 on ``bravo``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from integration_support import Stack, clusters_stack, delete_deployment, deployment, wait_for

from modelfleet.api.naming import LABEL_NAMESPACE, LABEL_REPLICA, workload_namespace
from modelfleet.cli.apply import apply_resource
from modelfleet.cluster.orphans import REPLICA_KINDS
from modelfleet.contracts.status import DeploymentStatus, ReplicaPhase
from modelfleet.sim.faults import FaultConfig
from modelfleet.worker.tuning import Tuning

DARK, STEADY = "alpha", "bravo"
# Probe every 2 s, NotReady after 2 failed probes (each ~7 s with its retries), re-placement
# GRACE s after that: the whole dark spell stays about a minute.
GRACE = 30
TUNING = Tuning(probe_interval_seconds=2, failure_threshold=2, not_ready_grace_seconds=GRACE)
# One rollout of a replica on the simulated fleet takes seconds; this bounds it generously on a
# loaded 2-core machine (a teardown stuck on the dark cluster takes minutes).
ROLLOUT = 60.0


@pytest_asyncio.fixture
async def two_clusters(tmp_path: Path) -> AsyncIterator[Stack]:
    async with clusters_stack(tmp_path, [DARK, STEADY], TUNING) as stack:
        yield stack


def on(status: DeploymentStatus, cluster: str, *, ready: bool = True) -> list[str]:
    return sorted(
        r.name
        for r in status.replicas
        if r.cluster == cluster and (not ready or r.phase is ReplicaPhase.READY)
    )


class ServingWatch:
    """Polls the deployment continuously: a replica once Ready on the steady cluster stays Ready
    there, and the deployment never serves fewer than those (nothing scales that cluster down)."""

    def __init__(self, stack: Stack, ns: str) -> None:
        self.stack, self.ns = stack, ns
        self.steady: set[str] = set()
        self.samples = 0
        self.violations: list[str] = []
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            try:
                status = await self.stack.status(self.ns, "m")
            except Exception:  # an unanswered query says nothing; ask again
                await asyncio.sleep(0.2)
                continue
            self.samples += 1
            ready_here = set(on(status, STEADY))
            lost = self.steady - ready_here
            if lost or status.ready < len(self.steady):
                self.violations.append(
                    f"ready {status.ready}, steady replicas lost: {sorted(lost)}"
                )
            self.steady |= ready_here
            await asyncio.sleep(0.2)

    async def stop(self) -> None:
        self._task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self._task


async def left_on(stack: Stack, cluster: str, ns: str, replicas: list[str]) -> list[str]:
    """On ``cluster``, the objects labelled for ``replicas`` and the pods of the deployment's
    workload namespace (pods carry the serving label, not the replica's), listed with the
    Kubernetes client (in a thread: the simulated API server runs on this event loop)."""
    kube = stack.kube(cluster)

    def listing() -> list[str]:
        served = [(v, k) for v, k in REPLICA_KINDS if kube.serves(v, k) and k != "Pod"]
        labelled = [
            f"{kind} {o['metadata']['name']}"
            for name in replicas
            for api_version, kind in served
            for o in kube.list(api_version, kind, labels={LABEL_REPLICA: name, LABEL_NAMESPACE: ns})
        ]
        pods = kube.list("v1", "Pod", namespace=workload_namespace(ns))
        return labelled + [f"Pod {o['metadata']['name']}" for o in pods]

    try:
        return await asyncio.to_thread(listing)
    finally:
        kube.close()


async def test_a_dark_cluster_loses_its_replicas_and_is_swept_on_return(
    two_clusters: Stack,
) -> None:
    stack, ns = two_clusters, "dark-e2e"
    await apply_resource(stack.client, deployment("m", ns, replicas=3, memory="40Gi"))
    status = await stack.wait_status(ns, "m", lambda s: s.ready == 3, limit=90)
    moved = on(status, DARK)
    assert len(moved) == 2, status.replicas
    assert len(on(status, STEADY)) == 1, status.replicas
    before = await left_on(stack, DARK, ns, moved)
    # Pods are counted too: the sweep must leave none behind, not only their owners.
    assert any(o.startswith("Pod ") for o in before), before
    assert any(o.startswith("Deployment ") for o in before), before
    watch = ServingWatch(stack, ns)

    def nothing_new_on_dark(s: DeploymentStatus) -> bool:
        return set(on(s, DARK, ready=False)) <= set(moved)

    async def dark_is(ready: bool) -> bool | None:
        view = await stack.fleet_view()
        return (
            True if next(c for c in view.clusters if c.spec.name == DARK).ready == ready else None
        )

    stack.fleet.set_faults(DARK, FaultConfig(dark=True, dark_mode="reset"))
    try:
        await wait_for(lambda: dark_is(False), 60, f"{DARK} to be NotReady")
        dark_at = time.monotonic()
        # Scale down while dark: the most loaded cluster, the dark one, loses a replica. Its
        # teardown cannot reach the cluster; it must not hold the deployment up for long.
        await apply_resource(stack.client, deployment("m", ns, replicas=2, memory="40Gi"))
        status = await stack.wait_status(ns, "m", lambda s: len(s.replicas) == 2, limit=ROLLOUT)
        assert len(on(status, DARK, ready=False)) == 1, status.replicas
        scaled_down_after = time.monotonic() - dark_at
        # Scale up while dark: the new replicas go to the steady cluster (were the dark one a
        # candidate, the spread would put one there, it holding fewer).
        await apply_resource(stack.client, deployment("m", ns, replicas=4, memory="40Gi"))
        status = await stack.wait_status(
            ns, "m", lambda s: len(on(s, STEADY)) >= 3 and s.ready >= 3, limit=ROLLOUT
        )
        assert nothing_new_on_dark(status), status.replicas
        # Past the grace the last replica on the dark cluster is re-placed on the steady one.
        status = await stack.wait_status(
            ns,
            "m",
            lambda s: s.ready == 4 and len(on(s, STEADY)) == 4 and len(s.replicas) == 4,
            limit=GRACE + ROLLOUT - (time.monotonic() - dark_at),
        )
        replaced_after = time.monotonic() - dark_at
    finally:
        stack.fleet.set_faults(DARK, FaultConfig())
    await wait_for(lambda: dark_is(True), 60, f"{DARK} to be Ready again")

    async def swept() -> bool | None:
        return True if not await left_on(stack, DARK, ns, moved) else None

    await wait_for(swept, 60, "what the moved replicas left on the returned cluster to go")
    await watch.stop()
    assert watch.samples > 50, watch.samples
    assert not watch.violations, watch.violations[:5]
    final = await stack.status(ns, "m")
    assert final.ready == 4, final.replicas
    assert len(on(final, STEADY)) == 4, final.replicas
    print(
        f"scaled down {scaled_down_after:.0f} s, re-placed {replaced_after:.0f} s after "
        f"NotReady (grace {GRACE} s); {watch.samples} samples"
    )
    await delete_deployment(stack, ns, "m")
    assert await left_on(stack, STEADY, ns, on(final, STEADY)) == []

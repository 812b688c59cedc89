"""An unreachable cluster (issue 29 item 2), the scenario ``test_unreachable_cluster`` runs
with short knobs and ``bench/unreachable_cluster.py`` with the product's defaults: a 2-replica
deployment, one replica on each of two H100 clusters; one cluster's API hangs
(``dark_mode="hang"``). Its replica must turn Unknown at the first failed probe (the
deployment's READY drops, ``get replicas`` says Unknown with the probe's reason), the cluster
NotReady after ``failure_threshold`` failed probes, and the replica re-placed on the other
cluster and Ready there once the grace has passed. ``bounds`` derives the bounds from the knobs
the way ``docs/operations.md`` ("An unreachable cluster, and its bounds") derives the defaults'
60 s and 180 s."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from integration_support import Stack, clusters_stack, deployment, wait_for
from test_cli_kubectl import run
from test_dark_cluster import DARK, STEADY, on

from modelfleet.cli.apply import apply_resource
from modelfleet.cluster.probing import PROBE_BUDGET
from modelfleet.cluster.state import ClusterInput
from modelfleet.contracts.status import DeploymentStatus, ReplicaPhase
from modelfleet.contracts.workflow_inputs import FleetLimits
from modelfleet.sim.faults import FaultConfig
from modelfleet.worker.tuning import Tuning

# A rollout on the simulated fleet takes seconds; generous on a loaded 2-core machine.
ROLLOUT = 90.0
# The slack of the documented bounds over the knobs' worst case: noticed "under 60 s" for
# interval + probe budget = 50 s, failover "within 3 minutes" for 50 + grace 120 = 170 s.
NOTICED_SLACK = 60.0 / 50.0
FAILOVER_SLACK = 180.0 / 170.0


@dataclass(frozen=True)
class Bounds:
    interval: int
    threshold: int
    grace: int
    noticed_within: float
    failover_within: float


def bounds(tuning: Tuning) -> Bounds:
    """The bounds ``tuning``'s knobs promise (a knob left unset: the product's default). A
    hanging probe fails at most interval + budget after the silence; the cluster is NotReady
    after ``threshold`` such probes in a row; its replicas move once the grace has passed since
    the first failed probe, and not before it is NotReady."""
    fields = ClusterInput.model_fields
    interval = tuning.probe_interval_seconds or int(fields["probe_interval_seconds"].default)
    threshold = tuning.failure_threshold or int(fields["failure_threshold"].default)
    grace = tuning.not_ready_grace_seconds or FleetLimits().not_ready_grace_seconds
    probe = interval + PROBE_BUDGET.total_seconds()
    return Bounds(
        interval=interval,
        threshold=threshold,
        grace=grace,
        noticed_within=probe * NOTICED_SLACK,
        failover_within=max(threshold * probe, probe + grace) * FAILOVER_SLACK,
    )


@dataclass
class Figures:
    noticed: float
    not_ready_after: float
    served_again: float

    def line(self, b: Bounds) -> str:
        return (
            f"hanging API (probe every {b.interval} s, NotReady after {b.threshold} failed probes, "
            f"grace {b.grace} s): replica Unknown after {self.noticed:.0f} s "
            f"(bound {b.noticed_within:.0f}), cluster NotReady after {self.not_ready_after:.0f} s, "
            f"replacement Ready elsewhere after {self.served_again:.0f} s "
            f"(failover bound {b.failover_within:.0f} s + one rollout, {ROLLOUT:.0f} s)"
        )

    def missed(self, b: Bounds) -> list[str]:
        """The bounds missed (none: [])."""
        out = []
        if self.noticed > b.noticed_within:
            out.append(f"noticed after {self.noticed:.1f} s > {b.noticed_within:.1f} s")
        if self.served_again > b.failover_within + ROLLOUT:
            out.append(
                f"served again after {self.served_again:.1f} s > "
                f"{b.failover_within:.1f} s + {ROLLOUT:.0f} s"
            )
        return out


@asynccontextmanager
async def two_clusters(tmp_path: Path, tuning: Tuning) -> AsyncIterator[Stack]:
    async with clusters_stack(tmp_path, [DARK, STEADY], tuning, ready_within=90) as stack:
        yield stack


async def hang_and_fail_over(stack: Stack, b: Bounds, ns: str = "unreach") -> Figures:
    """The scenario on ``stack`` (whose knobs ``b`` describes); asserts what must hold on the
    way (Unknown with the probe's reason, READY 1, NotReady, the replacement on the steady
    cluster), returns the times, measured from the silence."""
    await apply_resource(stack.client, deployment("m", ns, replicas=2, memory="40Gi"))
    status = await stack.wait_status(ns, "m", lambda s: s.ready == 2, limit=ROLLOUT)
    (stranded,) = on(status, DARK)
    (kept,) = on(status, STEADY)

    def unknown(s: DeploymentStatus) -> bool:
        return any(r.name == stranded and r.phase is ReplicaPhase.UNKNOWN for r in s.replicas)

    stack.fleet.set_faults(DARK, FaultConfig(dark=True, dark_mode="hang"))
    silent_at = time.monotonic()
    try:
        status = await stack.wait_status(ns, "m", unknown, limit=b.noticed_within + 30)
        noticed = time.monotonic() - silent_at
        # No green status for what nobody can reach: READY counts only the steady replica.
        assert status.ready == 1, status
        (seen,) = [r for r in status.replicas if r.name == stranded]
        assert f"cluster {DARK} unreachable" in seen.reason, seen
        assert "did not answer in time" in seen.reason, seen
        code, out, err = await run(stack.env.settings.address, "get", "replicas", "-n", ns)
        assert code == 0, err
        line = next(x for x in out.splitlines() if stranded in x)
        assert "Unknown" in line, out

        async def not_ready() -> bool | None:
            view = await stack.fleet_view()
            dark = next(c for c in view.clusters if c.spec.name == DARK)
            return True if not dark.ready else None

        await wait_for(not_ready, b.failover_within, f"{DARK} to be NotReady")
        not_ready_after = time.monotonic() - silent_at

        def failed_over(s: DeploymentStatus) -> bool:
            return s.ready == 2 and len(on(s, STEADY)) == 2 and kept in on(s, STEADY)

        await stack.wait_status(
            ns,
            "m",
            failed_over,
            limit=b.failover_within + ROLLOUT - (time.monotonic() - silent_at),
        )
        served_again = time.monotonic() - silent_at
    finally:
        stack.fleet.set_faults(DARK, FaultConfig())
    return Figures(noticed, not_ready_after, served_again)

"""The orphan sweep an InferenceCluster runs when it is Ready again after being NotReady.

While a cluster is dark its replicas are re-placed elsewhere (the Fleet's NotReady grace) and
their teardowns, aimed at the dark cluster, give up; what they left there is still running when
the cluster returns. The sweep lists which replicas have objects on the cluster, *then* asks the
Fleet which replicas its ledger holds there, and deletes only the others (decided by the pure
:func:`modelfleet.rendering.orphans.orphaned`). That order is what keeps a replica being created
safe: placement books it in the ledger before anything of it is applied, so any replica whose
objects the listing saw is in the ledger the later answer comes from.

Deterministic orchestration only: activities do the listing, the ledger query and the deletes.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from modelfleet.contracts.activity_names import (
        FLEET_REPLICAS_ON,
        KUBE_REPLICAS_FOUND,
        KUBE_SWEEP_REPLICAS,
    )
    from modelfleet.contracts.kube_payloads import ReplicaSweepRequest
    from modelfleet.rendering.orphans import REPLICA_KINDS, orphaned

# Clusters recorded before the sweep never ran these activities after a return to Ready; the
# marker keeps their histories replaying (new runs record it once, at the start).
PATCH_SWEEP = "sweep-orphans-after-dark"
# A cluster just back may still be flaky: a few retries, then the sweep waits for the next
# return (bounded, so the probe loop is never held up for long).
SWEEP_RETRY = RetryPolicy(maximum_attempts=5, maximum_interval=timedelta(seconds=10))


async def sweep_orphans(cluster: str) -> list[tuple[str, str]]:
    """Delete on ``cluster`` the objects of replicas the Fleet's ledger does not hold there;
    returns the (namespace, replica) pairs swept. Raises ActivityError when an activity fails
    past its retries (the caller decides what that means)."""
    kinds = list(REPLICA_KINDS)
    found: list[tuple[str, str]] = await workflow.execute_activity(
        KUBE_REPLICAS_FOUND,
        ReplicaSweepRequest(cluster=cluster, kinds=kinds),
        result_type=list[tuple[str, str]],
        start_to_close_timeout=timedelta(minutes=2),
        retry_policy=SWEEP_RETRY,
        summary="replicas with objects on the cluster",
    )
    if not found:
        return []
    held: list[str] = await workflow.execute_activity(
        FLEET_REPLICAS_ON,
        cluster,
        result_type=list[str],
        start_to_close_timeout=timedelta(seconds=30),
        retry_policy=SWEEP_RETRY,
        summary="replicas the fleet holds here",
    )
    orphans = orphaned(found, held)
    if orphans:
        await workflow.execute_activity(
            KUBE_SWEEP_REPLICAS,
            ReplicaSweepRequest(cluster=cluster, kinds=kinds, replicas=orphans),
            result_type=int,
            start_to_close_timeout=timedelta(minutes=5),
            retry_policy=SWEEP_RETRY,
            summary=f"remove what {len(orphans)} moved replica(s) left behind",
        )
    return orphans


class DarkWatch:
    """Remembers that a cluster went from Ready to NotReady until the sweep after its return
    has succeeded (a failed sweep is tried again at the next Ready probe). The workflow carries
    ``dark`` across continue-as-new (``ClusterInput.sweep_pending``). Disabled (``enabled``
    False: a history from before ``PATCH_SWEEP``) it does nothing."""

    def __init__(self, enabled: bool, *, ready: bool, dark: bool = False) -> None:
        self.enabled = enabled
        self.ready = ready
        self.dark = dark
        self.last: str | None = None  # what the last sweep did

    @property
    def pending(self) -> bool:
        """A sweep will run when the cluster is Ready again."""
        return self.enabled and self.dark

    async def observe(self, cluster: str, ready: bool) -> None:
        """Called after every probe with the cluster's readiness."""
        if not self.enabled:
            return
        if self.ready and not ready:
            self.dark = True
        self.ready = ready
        if not (self.dark and ready):
            return
        try:
            orphans = await sweep_orphans(cluster)
        except ActivityError as exc:
            self.last = f"orphan sweep failed, tried again at the next probe: {exc.cause or exc}"
            workflow.logger.warning(self.last)
            return
        self.dark = False
        names = ", ".join(f"{ns}/{name}" for ns, name in orphans) or "none"
        self.last = f"back from NotReady: removed what moved replicas left ({names})"
        workflow.logger.info(self.last)

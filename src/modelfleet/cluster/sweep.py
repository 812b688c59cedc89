"""The orphan sweep an InferenceCluster runs when it is Ready again after being NotReady, then
at its next probes while replicas it kept may be on their way out, and on a slow resync while
Ready (when: :mod:`modelfleet.cluster.sweep_schedule`).

While a cluster is dark its replicas are re-placed elsewhere (the Fleet's NotReady grace) and
their teardowns, aimed at the dark cluster, give up; what they left there is still running when
the cluster returns. The sweep lists which replicas have objects on the cluster, *then* asks the
Fleet which replicas its ledger holds there, and deletes only the others (decided by the pure
:func:`modelfleet.cluster.orphans.orphaned`). That order is what keeps a replica being created
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
    from modelfleet.cluster.orphans import REPLICA_KINDS, orphaned
    from modelfleet.cluster.state import ClusterInput
    from modelfleet.cluster.sweep_schedule import SweepKind, SweepSchedule, still_held
    from modelfleet.contracts.activity_names import (
        FLEET_REPLICAS_ON,
        KUBE_REPLICAS_FOUND,
        KUBE_SWEEP_REPLICAS,
    )
    from modelfleet.contracts.kube_payloads import ReplicaSweepRequest

# A cluster just back may still be flaky: a few retries, then the sweep waits for the next
# return (bounded, so the probe loop is never held up for long).
SWEEP_RETRY = RetryPolicy(maximum_attempts=5, maximum_interval=timedelta(seconds=10))


class Swept:
    """What one sweep did: the replicas it removed, and the ledger keys of those it found but
    kept because the ledger holds them."""

    def __init__(self, orphans: list[tuple[str, str]], kept: frozenset[str]) -> None:
        self.orphans = orphans
        self.kept = kept


async def sweep_orphans(cluster: str, summary: str = "") -> Swept:
    """Delete on ``cluster`` the objects of replicas the Fleet's ledger does not hold there.
    Raises ActivityError when an activity fails past its retries (the caller decides what that
    means)."""
    kinds = list(REPLICA_KINDS)
    found: list[tuple[str, str]] = await workflow.execute_activity(
        KUBE_REPLICAS_FOUND,
        ReplicaSweepRequest(cluster=cluster, kinds=kinds),
        result_type=list[tuple[str, str]],
        start_to_close_timeout=timedelta(minutes=2),
        retry_policy=SWEEP_RETRY,
        summary=f"replicas with objects on the cluster{summary}",
    )
    if not found:
        return Swept([], frozenset())
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
    return Swept(orphans, still_held(found, held))


class DarkWatch:
    """Runs the cluster's orphan sweeps when :class:`SweepSchedule` says: on the return from a
    dark spell (a failed one is tried again at the next Ready probe), at the next probes after it
    while a replica it kept may be on its way out, and on a slow resync. The workflow carries
    ``dark`` across continue-as-new (``ClusterState.sweep_pending``); the follow-ups and the
    resync clock start again with each run (the resync catches what a restart cut short)."""

    def __init__(self, *, ready: bool, dark: bool = False, resync_seconds: int = 600) -> None:
        resync = timedelta(seconds=resync_seconds)
        self.schedule = SweepSchedule(resync=resync, ready=ready, dark=dark)
        self.last: str | None = None  # what the last sweep did

    @classmethod
    def of(cls, arg: ClusterInput) -> DarkWatch:
        """What the input carries over."""
        state = arg.state
        return cls(
            ready=state.ready, dark=state.sweep_pending, resync_seconds=arg.sweep_resync_seconds
        )

    @property
    def pending(self) -> bool:
        """A sweep will run when the cluster is Ready again."""
        return self.schedule.dark

    async def observe(self, cluster: str, ready: bool) -> None:
        """Called after every probe with the cluster's readiness."""
        now = workflow.now()
        self.schedule = self.schedule.observe(ready, now)
        kind = self.schedule.due(now)
        if kind is None:
            return
        why = "" if kind is SweepKind.RETURN else f" ({kind.value} sweep)"
        try:
            swept = await sweep_orphans(cluster, why)
        except ActivityError as exc:
            self.schedule = self.schedule.failed(kind, workflow.now())
            self.last = f"{kind.value} orphan sweep failed, tried again later: {exc.cause or exc}"
            workflow.logger.warning(self.last)
            return
        self.schedule = self.schedule.swept(kind, workflow.now(), swept.kept)
        names = ", ".join(f"{ns}/{name}" for ns, name in swept.orphans) or "none"
        if kind is SweepKind.RETURN:
            self.last = f"back from NotReady: removed what moved replicas left ({names})"
        else:
            self.last = f"{kind.value} orphan sweep: removed what gone replicas left ({names})"
        workflow.logger.info(self.last)

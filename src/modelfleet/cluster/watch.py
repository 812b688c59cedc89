"""The replica watch an InferenceCluster runs for the Ready replicas on its cluster (issue 11):
one ``kube.scan_replicas`` activity per probe while the cluster is Ready lists the objects
modelfleet owns there, and only the replicas whose health changed are signalled (``replica_health``,
decided by the pure :func:`modelfleet.cluster.watch_decide.judge`). Before, every Ready replica
ran its own health check every 30 s and a drift comparison every 5 minutes: at 10,000 replicas
330 activities/s of polling. Now a cluster costs one activity per probe interval however many
replicas it serves, and a healthy, idle replica costs nothing.

Replicas register (``watch_replica``, idempotent: a re-registration takes a fresh baseline) when
they become Ready, after a repair and after their own continue-as-new, and unregister
(``unwatch_replica``) when they stop serving. A replica whose workflow is gone is dropped at the
first signal that cannot reach it; that never fails the cluster. The watched map is bounded by the
replicas placed on this cluster; it is the state's ``watched`` (``cluster.state``), carried across
continue-as-new.

A run that starts afresh (not continued, nothing carried: the workflow was terminated or failed
and started again) knows none of the replicas that registered with the run before it, and a
watched, healthy replica waits for its cluster's word with no timer of its own: it would go
unwatched for good. So once the cluster is Ready such a run asks the Fleet which replicas are
placed on it and tells each to compare and register again (``repair`` news, the replica's own
way back to a fresh baseline).

A probe that finds the cluster's API silent tells every watched replica so, at once
(``unreachable`` news: the replica shows Unknown rather than a Ready nobody can check); the first
scan after the API answers again tells each what it sees.

Deterministic orchestration only: the activity lists, the judge decides.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from modelfleet.cluster.orphans import REPLICA_KINDS
    from modelfleet.cluster.watch_decide import judge, registered
    from modelfleet.contracts.activity_names import FLEET_REPLICAS_ON, KUBE_SCAN_REPLICAS
    from modelfleet.contracts.error_types import PERMANENT_KUBE_ERROR
    from modelfleet.contracts.ids import replica_id
    from modelfleet.contracts.kube_payloads import ProbeRequest
    from modelfleet.contracts.watch_payloads import (
        REPLICA_HEALTH,
        UNWATCH_REPLICA,
        WATCH_REPLICA,
        HealthNews,
        NewsKind,
        ScanRequest,
        ScanResult,
        WatchedReplica,
    )

# What a replica applies, all labelled with it; its pods are the controllers' (and many).
SCAN_KINDS = [k for k in REPLICA_KINDS if k != ("v1", "Pod")]
# A scan's API errors are retried a few times, quickly; past that it is no sample (the next
# probe scans again), so the probe loop is never held up for long.
SCAN_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=4,
    non_retryable_error_types=[PERMANENT_KUBE_ERROR],
)


class ReplicaWatcher:
    """The watched replicas of one cluster, by key (``namespace/replica``)."""

    def __init__(self, watched: dict[str, WatchedReplica]) -> None:
        # The workflow's state's own map, changed in place: what it carries is what is watched.
        self.entries = watched
        self.last: str | None = None  # what the last scan did, for the logs
        # A run started afresh (no earlier run's map carried) that has not yet asked the
        # replicas on its cluster to register again.
        self.rewatch = not watched and workflow.info().continued_run_id is None

    @classmethod
    def installed(cls, watched: dict[str, WatchedReplica]) -> ReplicaWatcher:
        """A watcher whose ``watch_replica``/``unwatch_replica`` signal handlers are set on the
        running workflow (signals sent before are delivered now: Temporal buffers them)."""
        watcher = cls(watched)
        workflow.set_signal_handler(WATCH_REPLICA, watcher.register)
        workflow.set_signal_handler(UNWATCH_REPLICA, watcher.unregister)
        return watcher

    def register(self, entry: WatchedReplica) -> None:
        self.entries[entry.key] = registered(entry)

    def unregister(self, key: str) -> None:
        self.entries.pop(key, None)

    def state(self) -> list[WatchedReplica]:
        """The watched replicas in key order (what a scan sends)."""
        return [self.entries[k] for k in sorted(self.entries)]

    async def ask_to_register_again(self, cluster: str, *, ready: bool) -> None:
        """Once, in a run started afresh and only when the cluster is Ready (the replicas
        compare against it): every replica the Fleet placed here is told to compare and
        register again. A replica whose workflow is gone is skipped; a Fleet that cannot
        answer now is asked again after the next probe."""
        if not (self.rewatch and ready):
            return
        try:
            keys: list[str] = await workflow.execute_activity(
                FLEET_REPLICAS_ON,
                cluster,
                result_type=list[str],
                start_to_close_timeout=timedelta(seconds=30),
                schedule_to_close_timeout=timedelta(seconds=60),
                retry_policy=SCAN_RETRY,
                summary="replicas to watch again",
            )
        except ActivityError as exc:
            workflow.logger.warning("cannot ask the Fleet what to watch again: %s", exc)
            return
        self.rewatch = False
        news = HealthNews(
            kind=NewsKind.REPAIR, reason="the cluster's watch started afresh: register again"
        )
        targets = [k.split("/", 1) for k in keys if k not in self.entries and "/" in k]
        await asyncio.gather(*(self._signal(replica_id(ns, name), news) for ns, name in targets))

    async def unreachable(self, reason: str) -> None:
        """The cluster's API stopped answering: every watched replica not yet told hears it
        once (it shows Unknown), and the next scan that answers tells each what it finds."""
        news = HealthNews(kind=NewsKind.UNREACHABLE, reason=reason)
        told = [e for e in self.entries.values() if not e.unreachable]
        for entry in told:
            self.entries[entry.key] = entry.model_copy(update={"unreachable": True})
        await asyncio.gather(*(self._tell(self.entries[e.key], news) for e in told))

    async def _signal(self, workflow_id: str, news: HealthNews) -> bool:
        """Tell a replica; False when its workflow is closed (torn down, failed)."""
        try:
            await workflow.get_external_workflow_handle(workflow_id).signal(REPLICA_HEALTH, news)
        except ApplicationError as exc:
            workflow.logger.info("%s not told %s: %s", workflow_id, news.kind.value, exc)
            return False
        return True

    async def scan(self, probe: ProbeRequest, *, ready: bool) -> None:
        """One scan (after a probe that found the cluster ``ready``; a dark cluster's scan would
        be no sample) and what follows from it; a scan that fails changes nothing."""
        if not ready or not self.entries:
            return
        sent = dict(self.entries)
        try:
            result: ScanResult = await workflow.execute_activity(
                KUBE_SCAN_REPLICAS,
                ScanRequest(
                    cluster=probe.cluster,
                    kubeconfig=probe.kubeconfig,
                    kinds=SCAN_KINDS,
                    replicas=self.state(),
                ),
                result_type=ScanResult,
                start_to_close_timeout=timedelta(seconds=60),
                schedule_to_close_timeout=timedelta(seconds=90),
                retry_policy=SCAN_RETRY,
                summary=f"scan {len(sent)} watched replica(s)",
            )
        except ActivityError as exc:
            self.last = f"replica scan failed (no sample): {exc.cause or exc}"
            workflow.logger.warning(self.last)
            return
        tell: list[tuple[WatchedReplica, HealthNews]] = []
        for scan in result.changed:
            entry = self.entries.get(scan.key)
            # Registered again (or gone) while the scan ran: the next scan judges the new one.
            if entry is None or entry is not sent.get(scan.key):
                continue
            kept, news = judge(entry, scan)
            self.entries[scan.key] = kept
            if news is not None:
                tell.append((kept, news))
        if tell:
            await asyncio.gather(*(self._tell(entry, news) for entry, news in tell))

    async def _tell(self, entry: WatchedReplica, news: HealthNews) -> None:
        # A replica whose workflow is closed has nobody left to watch.
        if not await self._signal(entry.workflow_id, news) and self.entries.get(entry.key) is entry:
            del self.entries[entry.key]

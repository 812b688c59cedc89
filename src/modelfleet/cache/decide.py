"""What to do next about one cache on one cluster, given the workflow's record and what was just
observed there: create the volume, start (or restart after a back-off) the hydration Job, follow
its progress, clean the Job and the auth Secret once the volume holds the current revision,
re-hydrate when the revision changes, and remove everything when the cache leaves the cluster,
keeping a volume that a workload still mounts unless forced.

Level-triggered like a controller: every decision is made from the observation, so a lost
step (a worker killed mid-way) is simply decided again on the next look.

Pure: no I/O, no clock (``now`` is an argument), no Temporal; inputs are never mutated.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from modelfleet.api.caches import ModelCache
from modelfleet.contracts.cache_payloads import (
    CacheObservation,
    CachePhase,
    CacheTarget,
    ClusterCache,
)


class Act(StrEnum):
    APPLY_CLAIM = "apply-claim"
    APPLY_JOB = "apply-job"
    DELETE_JOB = "delete-job"
    DELETE_SECRET = "delete-secret"
    DELETE_CLAIM = "delete-claim"


@dataclass(frozen=True)
class Want:
    """What the cache should hold on every cluster right now."""

    digest: str
    job: str
    bytes_total: int


@dataclass(frozen=True)
class RetryPolicy:
    first_seconds: float = 10.0
    max_seconds: float = 600.0

    def delay(self, attempts: int) -> timedelta:
        """Before attempt ``attempts + 1``: doubling from the first delay, capped."""
        seconds = self.first_seconds * 2.0 ** max(attempts - 1, 0)
        return timedelta(seconds=min(seconds, self.max_seconds))


@dataclass(frozen=True)
class ClusterPlan:
    state: ClusterCache
    acts: tuple[Act, ...] = ()
    # The record can be dropped: everything on the cluster is gone.
    gone: bool = False


def targets_for(cache: ModelCache, targets: list[CacheTarget]) -> list[CacheTarget]:
    """The clusters ``cache`` goes to: those its selector matches (all without one), by name."""
    selector = cache.spec.cluster_selector
    wanted = dict(selector.match_labels) if selector is not None else {}
    return sorted(
        (t for t in targets if all(t.labels.get(k) == v for k, v in wanted.items())),
        key=lambda t: t.cluster,
    )


def _with(state: ClusterCache, now: datetime, **changes: object) -> ClusterCache:
    return state.model_copy(update={**changes, "updated": now})


def plan_cluster(
    state: ClusterCache,
    obs: CacheObservation,
    want: Want,
    now: datetime,
    retry: RetryPolicy,
) -> ClusterPlan:
    """The next step for a cluster the cache should be on."""
    if obs.claim == "Absent":
        # No volume (new, or deleted behind our back): whatever it held is gone with it.
        return ClusterPlan(
            _with(state, now, phase=CachePhase.PENDING, staged="", message="creating the volume"),
            (Act.APPLY_CLAIM,),
        )
    if obs.claim != "Bound":
        why = obs.claim_message or f"volume {obs.claim}, waiting for it to bind"
        return ClusterPlan(_with(state, now, phase=CachePhase.PENDING, message=why))
    if state.staged == want.digest:
        # Ready; the Job and the token have no business staying once the weights are in.
        acts = []
        if obs.job != "Absent":
            acts.append(Act.DELETE_JOB)
        if obs.secret:
            acts.append(Act.DELETE_SECRET)
        ready = _with(
            state,
            now,
            phase=CachePhase.READY,
            message="",
            digest=want.digest,
            bytes_done=want.bytes_total,
            bytes_total=want.bytes_total,
            attempts=0,
            retry_at=None,
            job="",
        )
        return ClusterPlan(ready, tuple(acts))
    if state.digest != want.digest:
        # A new revision (or the first): attempts count afresh; an older Job is removed.
        fresh = _with(state, now, digest=want.digest, attempts=0, retry_at=None, bytes_done=0)
        if state.job and state.job != want.job:
            # DELETE_JOB removes every Job of the cache on the cluster, the old one included.
            return ClusterPlan(
                _with(fresh, now, phase=CachePhase.HYDRATING, message="new revision", job=""),
                (Act.DELETE_JOB,),
            )
        state = fresh
    if obs.job == "Succeeded":
        done = _with(
            state,
            now,
            phase=CachePhase.READY,
            staged=want.digest,
            message="",
            bytes_done=want.bytes_total,
            bytes_total=want.bytes_total,
            attempts=0,
            retry_at=None,
            job="",
        )
        acts = [Act.DELETE_JOB] + ([Act.DELETE_SECRET] if obs.secret else [])
        return ClusterPlan(done, tuple(acts))
    if obs.job == "Failed":
        return ClusterPlan(
            failed_attempt(state, obs.job_message or "the download failed", now, retry),
            (Act.DELETE_JOB,),
        )
    if obs.job == "Active":
        total = obs.bytes_total or want.bytes_total
        return ClusterPlan(
            _with(
                state,
                now,
                phase=CachePhase.HYDRATING,
                message=obs.job_message,
                bytes_done=min(obs.bytes_done, total),
                bytes_total=total,
                job=want.job,
            )
        )
    # No Job: start one, unless a failed attempt is still backing off.
    if state.retry_at is not None and now < state.retry_at:
        return ClusterPlan(state)
    started = _with(
        state,
        now,
        phase=CachePhase.HYDRATING,
        message="starting the download"
        + (f" (attempt {state.attempts + 1})" if state.attempts else ""),
        bytes_total=want.bytes_total,
        retry_at=None,
        job=want.job,
    )
    return ClusterPlan(started, (Act.APPLY_JOB,))


def failed_attempt(
    state: ClusterCache, reason: str, now: datetime, retry: RetryPolicy
) -> ClusterCache:
    """A download (or its start) failed: Failed with the reason until the back-off passes."""
    attempts = state.attempts + 1
    delay = retry.delay(attempts)
    message = f"attempt {attempts} failed: {reason}; retrying in {int(delay.total_seconds())}s"
    return _with(
        state,
        now,
        phase=CachePhase.FAILED,
        message=message,
        attempts=attempts,
        retry_at=now + delay,
    )


def plan_removal(
    state: ClusterCache, obs: CacheObservation, now: datetime, *, force: bool
) -> ClusterPlan:
    """The next step for a cluster the cache should leave (deleted, or no longer selected)."""
    acts = []
    if obs.job != "Absent":
        acts.append(Act.DELETE_JOB)
    if obs.secret:
        acts.append(Act.DELETE_SECRET)
    if obs.claim == "Absent":
        return ClusterPlan(
            _with(state, now, phase=CachePhase.DELETING, message=""), tuple(acts), gone=not acts
        )
    if obs.mounted_by and not force:
        users = ", ".join(obs.mounted_by)
        return ClusterPlan(
            _with(
                state,
                now,
                phase=CachePhase.DELETING,
                message=f"volume kept: mounted by {users} (delete --force removes it anyway)",
            ),
            tuple(acts),
        )
    acts.append(Act.DELETE_CLAIM)
    return ClusterPlan(
        _with(state, now, phase=CachePhase.DELETING, message="deleting the volume"), tuple(acts)
    )


def overall(states: list[ClusterCache], *, deleting: bool) -> tuple[str, int]:
    """(the cache's phase in one word, how many clusters are Ready), after Modelplane's
    ``ArtifactReady`` reasons: Staged, Hydrating, Partial, Failed, NoClusters."""
    ready = sum(1 for s in states if s.phase is CachePhase.READY)
    if deleting:
        return "Deleting", ready
    if not states:
        return "NoClusters", 0
    if ready == len(states):
        return "Staged", ready
    if any(s.phase is CachePhase.FAILED for s in states):
        return ("Partial" if ready else "Failed"), ready
    return "Hydrating", ready

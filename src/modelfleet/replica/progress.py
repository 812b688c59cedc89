"""Which of a replica's progress reports its deployment must hear (by signal); the rest it, or
the CLI, reads by query. And the status a user sees with those queried reports laid over it.

Pure: no I/O, no Temporal.
"""

from __future__ import annotations

from modelfleet.contracts.status import (
    DeploymentStatus,
    ReplicaPhase,
    ReplicaProgress,
    ReplicaStep,
)

# What the deployment decides on or reports: serving, serving badly, out of sight (its cluster
# does not answer), failed (the rollout pauses or rolls back), and done (the next pass reaps the
# replica, a teardown wait ends).
_TOLD = (ReplicaPhase.READY, ReplicaPhase.DEGRADED, ReplicaPhase.UNKNOWN, ReplicaPhase.FAILED)
# Phases in which the deployment's copy of a replica's step may lag behind the replica.
_IN_FLIGHT = (ReplicaPhase.PENDING, ReplicaPhase.PROGRESSING)


def parent_needs(progress: ReplicaProgress, last: ReplicaProgress | None) -> bool:
    """Whether ``progress`` must be signalled to the deployment, given the ``last`` report
    signalled. Rollout steps (Progressing) and Terminating (the deployment itself asked for
    the teardown) are not; Ready, Degraded, Failed and Done are, once each (a new reason of a
    Degraded or Failed replica again)."""
    done = progress.step is ReplicaStep.DONE
    if progress.phase not in _TOLD and not done:
        return False
    if last is None:
        return True
    return (last.phase, last.step is ReplicaStep.DONE, last.reason) != (
        progress.phase,
        done,
        progress.reason,
    )


def with_progress(
    status: DeploymentStatus, progress: dict[str, ReplicaProgress]
) -> DeploymentStatus:
    """``status`` with each replica the deployment knows only as Pending or Progressing shown
    at the phase, step and reason its own workflow reports (queried): the deployment is no
    longer told every step. Reports of replicas the status does not hold are ignored."""
    replicas = []
    for r in status.replicas:
        p = progress.get(r.name)
        if p is not None and r.phase in _IN_FLIGHT and p.phase in (*_IN_FLIGHT, *_TOLD):
            r = r.model_copy(update={"phase": p.phase, "step": p.step, "reason": p.reason})
        replicas.append(r)
    return status.model_copy(update={"replicas": replicas})


def in_flight(status: DeploymentStatus) -> list[str]:
    """Replicas whose step the deployment may not know (worth a ``progress`` query)."""
    return [r.name for r in status.replicas if r.phase in _IN_FLIGHT]

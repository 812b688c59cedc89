"""The step log of an InferenceCluster workflow: which step of bringing the cluster up runs now
and when each one started and finished, for ``describe cluster`` and ``rollout status
cluster/NAME``. Kept in the provisioning state (so it survives continue-as-new) and bounded.

Recording a step only changes workflow memory (times come from ``workflow.now()``); it issues
no command, so it never changes a history.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from modelfleet.contracts.cloud_payloads import ClusterStep

# Enough for a cluster with a dozen pools, one failed attempt and its compensation.
MAX_STEPS = 48


def begin(steps: list[ClusterStep], name: str) -> None:
    """``name`` starts now; a step still running ends (successfully) here. The same step begun
    again right after itself (a retried check) keeps its first start."""
    now = workflow.now()
    last = steps[-1] if steps else None
    if last is not None and last.name == name:
        last.finished, last.error = None, ""
        return
    if last is not None and last.finished is None:
        last.finished = now
    steps.append(ClusterStep(name=name, started=now))
    del steps[:-MAX_STEPS]


def end(steps: list[ClusterStep], error: str = "") -> None:
    """The running step (if any) ends now, failed when ``error`` says why."""
    if steps and steps[-1].finished is None:
        steps[-1].finished = workflow.now()
        steps[-1].error = error


def current(steps: list[ClusterStep]) -> str:
    return steps[-1].name if steps and steps[-1].finished is None else ""

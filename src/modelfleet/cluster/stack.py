"""The serving-stack step of the InferenceCluster workflow: review that the cluster's credentials
may do what modelfleet does there, verify by discovery that the cluster serves what the renderer
emits, install what is missing from pinned manifests, and say what is still missing.
Deterministic orchestration only; the activities do the I/O.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from modelfleet.api.schedulers import GangScheduler
    from modelfleet.contracts.kube_payloads import KubeconfigRef
    from modelfleet.contracts.stack_payloads import (
        KUBE_CHECK_ACCESS,
        KUBE_INSTALL_STACK,
        KUBE_VERIFY_STACK,
        REQUIRED_ACCESS,
        AccessReport,
        AccessRequest,
        StackReport,
        StackRequest,
        stack_for,
    )
    from modelfleet.contracts.status import StackPiece

STACK_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=4,
)


async def verify_and_install(
    cluster: str, kubeconfig: KubeconfigRef | None, scheduler: GangScheduler | None = None
) -> StackReport:
    """The stack every cluster needs plus its gang scheduler's (KAI or Kueue), if it has one."""
    request = StackRequest(cluster=cluster, kubeconfig=kubeconfig, components=stack_for(scheduler))
    report: StackReport = await workflow.execute_activity(
        KUBE_VERIFY_STACK,
        request,
        result_type=StackReport,
        start_to_close_timeout=timedelta(seconds=60),
        retry_policy=STACK_RETRY,
        summary="verify the serving stack",
    )
    if not report.missing:
        return report
    missing = ", ".join(c.name for c in report.missing)
    installed: StackReport = await workflow.execute_activity(
        KUBE_INSTALL_STACK,
        StackRequest(cluster=cluster, kubeconfig=kubeconfig, components=report.missing),
        result_type=StackReport,
        start_to_close_timeout=timedelta(minutes=5),
        heartbeat_timeout=timedelta(minutes=1),
        retry_policy=STACK_RETRY,
        summary=f"install {missing}",
    )
    return installed


async def review_access(cluster: str, kubeconfig: KubeconfigRef | None) -> list[str]:
    """What the cluster's credentials may not do of what modelfleet does there."""
    report: AccessReport = await workflow.execute_activity(
        KUBE_CHECK_ACCESS,
        AccessRequest(cluster=cluster, kubeconfig=kubeconfig, needs=list(REQUIRED_ACCESS)),
        result_type=AccessReport,
        start_to_close_timeout=timedelta(seconds=60),
        heartbeat_timeout=timedelta(seconds=30),
        # Each attempt resumes where the last stopped (heartbeat), so more attempts pay off.
        retry_policy=RetryPolicy(
            initial_interval=timedelta(seconds=1),
            maximum_interval=timedelta(seconds=10),
            maximum_attempts=10,
        ),
        summary="review RBAC (SelfSubjectAccessReview)",
    )
    return report.denied


def stack_reason(report: StackReport) -> str:
    pieces = []
    for component in report.missing:
        why = report.problems.get(component.name)
        pieces.append(f"{component}{f': {why}' if why else ''}")
    return "ServingStackMissing: " + "; ".join(pieces)


def stack_pieces(
    report: StackReport | None, scheduler: GangScheduler | None = None
) -> list[StackPiece]:
    """Every pinned component (the gang scheduler's included) with whether the last check found
    it served (None: not checked yet), for the cluster's status."""
    missing = {c.name for c in report.missing} if report is not None else set()
    return [
        StackPiece(
            name=c.name,
            version=c.version,
            api_version=c.api_version,
            served=None if report is None else c.name not in missing,
            problem=report.problems.get(c.name, "") if report is not None else "",
        )
        for c in stack_for(scheduler)
    ]

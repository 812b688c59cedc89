"""A cluster's health probe as the InferenceCluster workflow runs it: the ``kube.probe`` activity
with a few quick retries inside a bounded budget, a failure turned into an unreachable result
whose reason a person can act on (``probe_failure``), and how the status words a run of failed
probes. Deterministic orchestration only.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from modelfleet.cluster.probe_failure import probe_failure
    from modelfleet.contracts.activity_names import KUBE_PROBE
    from modelfleet.contracts.kube_payloads import ProbeRequest, ProbeResult

# A probe fails only after a few quick retries: one 500 or 429 says little about health. Its
# budget bounds how long a hanging API goes unnoticed: one probe interval (15 s by default) plus
# PROBE_BUDGET is under a minute (each request times out at 15 s, ``adapters.kube_client``).
PROBE_ATTEMPT = timedelta(seconds=20)
PROBE_BUDGET = timedelta(seconds=35)
PROBE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=4,
)


async def probe(request: ProbeRequest) -> ProbeResult:
    """The cluster's answer, or an unreachable result saying why none came."""
    try:
        result: ProbeResult = await workflow.execute_activity(
            KUBE_PROBE,
            request,
            result_type=ProbeResult,
            start_to_close_timeout=PROBE_ATTEMPT,
            schedule_to_close_timeout=PROBE_BUDGET,
            retry_policy=PROBE_RETRY,
            summary="probe cluster health",
        )
    except ActivityError as exc:
        return ProbeResult(reachable=False, reason=probe_failure(exc))
    return result


def unreachable_reason(failed_probes: int, reason: str) -> str:
    failed = "1 probe" if failed_probes == 1 else f"{failed_probes} probes in a row"
    return f"unreachable ({failed} failed): {reason}"


__all__ = ["PROBE_ATTEMPT", "PROBE_BUDGET", "PROBE_RETRY", "probe", "unreachable_reason"]

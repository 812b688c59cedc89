"""Structured activity logs on a real worker (time-skipping server): every line an activity
run produces carries its cluster, replica, activity name, attempt and workflow id, including
lines the activity's own code logs from the worker's thread pool; a Secret in the activity's
payload never reaches the log."""

from __future__ import annotations

import io
import json
import logging
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.common import RetryPolicy, WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from modelfleet.contracts.activity_names import KUBE_APPLY
from modelfleet.contracts.kube_payloads import (
    ApplyRequest,
    ApplyResult,
    ObjectRef,
)
from modelfleet.worker.interceptor import ActivityLogInterceptor
from modelfleet.worker.logs import LogFormat, configure_logging

PLANTED = "planted-secret-value-9c41"  # must never reach a log line
SECRET_MANIFEST = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "hf-token", "namespace": "ml"},
    "stringData": {"token": PLANTED},
}


# Not sandboxed: the sandbox re-imports this test module, and CPython 3.11 can fail compiling a
# pytest-rewritten module again ("SystemError: AST constructor recursion depth mismatch", seen in
# CI). A test stand-in has nothing the sandbox needs to guard.
@workflow.defn(name="LogProbe", sandboxed=False)
class LogProbeWorkflow:
    @workflow.run
    async def run(self, request: ApplyRequest) -> ApplyResult:
        result: ApplyResult = await workflow.execute_activity(
            KUBE_APPLY,
            request,
            result_type=ApplyResult,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=10)),
        )
        return result


@activity.defn(name=KUBE_APPLY)
def flaky_apply(request: ApplyRequest) -> ApplyResult:
    """Synchronous like the real Kubernetes activities; fails its first attempt."""
    logging.getLogger("modelfleet.adapters.fake").info("applying %d objects", 1)
    if activity.info().attempt == 1:
        raise ApplicationError("API server unavailable (HTTP 503)", type="RetryableKubeError")
    return ApplyResult(applied=[ObjectRef.of(m) for m in request.manifests])


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    root, sdk = logging.getLogger(), logging.getLogger("temporalio")
    levels = (root.level, sdk.level)
    stream = io.StringIO()
    handler = configure_logging(LogFormat.JSON, "DEBUG", stream)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(levels[0])
        sdk.setLevel(levels[1])


async def test_activity_log_lines_carry_their_context_and_no_secret(
    time_skipping_env: WorkflowEnvironment, json_log: io.StringIO
) -> None:
    client = time_skipping_env.client
    queue = f"logs-{uuid.uuid4()}"
    with ThreadPoolExecutor(2) as pool:
        async with Worker(
            client,
            task_queue=queue,
            workflows=[LogProbeWorkflow],
            activities=[flaky_apply],
            activity_executor=pool,
            interceptors=[ActivityLogInterceptor()],
            workflow_runner=UnsandboxedWorkflowRunner(),
        ):
            await client.execute_workflow(
                LogProbeWorkflow.run,
                ApplyRequest(cluster="east", manifests=[SECRET_MANIFEST]),
                id="replica/ml/qwen-abcde",
                task_queue=queue,
                id_conflict_policy=WorkflowIDConflictPolicy.TERMINATE_EXISTING,
            )

    text = json_log.getvalue()
    assert PLANTED not in text
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    ours = [entry for entry in lines if entry.get("workflow_id") == "replica/ml/qwen-abcde"]

    def one(message_start: str, attempt: int) -> dict[str, Any]:
        found = [
            e
            for e in ours
            if e["message"].startswith(message_start) and e.get("attempt") == attempt
        ]
        assert len(found) == 1, (message_start, attempt, ours)
        return found[0]

    failed = one("activity failed", 1)
    assert failed["level"] == "warning"
    assert failed["message"] == "activity failed: API server unavailable (HTTP 503)"
    assert (failed["retryable"], failed["error_type"]) == (True, "RetryableKubeError")
    # The activity's own line, logged from the worker's thread pool, has the same context.
    own = one("applying 1 objects", 2)
    assert own["logger"] == "modelfleet.adapters.fake"
    done = one("activity completed", 2)
    for entry in (failed, own, done):
        assert entry["cluster"] == "east"
        assert entry["replica"] == "ml/qwen-abcde"
        assert entry["activity"] == KUBE_APPLY
        assert entry["workflow_type"] == "LogProbe"
    assert isinstance(done["duration_ms"], int)

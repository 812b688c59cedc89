"""An image that cannot be pulled for good (``adapters.kube_readiness``): read from the pods'
waiting state in containerd's and the kubelet's own words; a missing image or refused
credentials is permanent, a rate limit, a timeout or a registry error is not, and the workload is
failed only once its pod has been at it for ``PULL_FAILURE_AFTER`` (the kubelet has retried)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from modelfleet.adapters.kube_readiness import (
    PULL_FAILURE_AFTER,
    evaluate,
    permanent_pull_error,
    pull_failure,
    unpullable,
)
from modelfleet.rendering.readiness import ReadinessRole, ReadinessRule

REF = "docker.io/vllm/vllm-openai:v0.23.0-typo"
HEAD = f'failed to pull and unpack image "{REF}"'
RESOLVE = f'failed to resolve reference "{REF}"'
# containerd 1.7/2.x as the kubelet passes them on (the ErrImagePull message).
NOT_FOUND = f"rpc error: code = NotFound desc = {HEAD}: {RESOLVE}: {REF}: not found"
DENIED = (
    f"rpc error: code = Unknown desc = {HEAD}: {RESOLVE}: pull access denied, repository does "
    "not exist or may require authorization: server message: insufficient_scope: "
    "authorization failed"
)
UNAUTHORIZED = (
    f"rpc error: code = Unknown desc = {HEAD}: {RESOLVE}: failed to authorize: failed to fetch "
    "oauth token: unexpected status from GET request to https://ghcr.io/token: 401 Unauthorized"
)
FORBIDDEN = (
    f"rpc error: code = Unknown desc = {HEAD}: {RESOLVE}: unexpected status from HEAD request "
    "to https://europe-docker.pkg.dev/v2/p/r/e/manifests/v1: 403 Forbidden"
)
MANIFEST_UNKNOWN = (
    f"rpc error: code = NotFound desc = {HEAD}: {RESOLVE}: manifest unknown: manifest unknown"
)
RATE_LIMITED = (
    f"rpc error: code = Unknown desc = {HEAD}: failed to copy: httpReadSeeker: failed open: "
    "unexpected status code https://registry-1.docker.io/v2/vllm/vllm-openai/manifests/sha256:"
    "4291abcd: 429 Too Many Requests - Server message: toomanyrequests: You have reached your "
    "unauthenticated pull rate limit. https://www.docker.com/increase-rate-limit"
)
TIMEOUT = (
    f"rpc error: code = DeadlineExceeded desc = {HEAD}: {RESOLVE}: failed to do request: Head "
    '"https://registry-1.docker.io/v2/vllm/vllm-openai/manifests/v0.23.0-typo": dial tcp '
    "52.1.184.176:443: i/o timeout"
)
UNAVAILABLE = (
    f"rpc error: code = Unknown desc = {HEAD}: {RESOLVE}: unexpected status from HEAD request "
    "to https://quay.io/v2/e/manifests/v1: 503 Service Unavailable"
)
# ECR's expired token: the credential provider fetches a new one, so it heals.
ECR_EXPIRED = (
    f"rpc error: code = Unknown desc = {HEAD}: {RESOLVE}: denied: Your authorization token has "
    "expired. Reauthenticate and try again."
)


def back_off(error: str) -> str:
    return f'Back-off pulling image "vllm/vllm-openai:v0.23.0-typo": ErrImagePull: {error}'


@pytest.mark.parametrize(
    ("reason", "message", "permanent"),
    [
        ("ErrImagePull", NOT_FOUND, True),
        ("ImagePullBackOff", back_off(NOT_FOUND), True),
        ("ErrImagePull", DENIED, True),
        ("ErrImagePull", UNAUTHORIZED, True),
        ("ImagePullBackOff", back_off(FORBIDDEN), True),
        ("ErrImagePull", MANIFEST_UNKNOWN, True),
        ("InvalidImageName", 'couldn\'t parse image name "Vllm:": invalid reference format', True),
        ("ErrImagePull", RATE_LIMITED, False),
        ("ImagePullBackOff", back_off(RATE_LIMITED), False),
        ("ErrImagePull", TIMEOUT, False),
        ("ImagePullBackOff", back_off(UNAVAILABLE), False),
        ("ErrImagePull", ECR_EXPIRED, False),
        # Before Kubernetes 1.32 the back-off message carried no error: nothing to go on.
        ("ImagePullBackOff", 'Back-off pulling image "vllm/vllm-openai:v0.23.0-typo"', False),
        ("ErrImagePull", "something nobody has seen before", False),
        # Not a pull at all.
        ("CrashLoopBackOff", "back-off 10s restarting failed container=engine: not found", False),
        ("ContainerCreating", "", False),
    ],
)
def test_permanent_pull_errors_in_the_kubelets_words(
    reason: str, message: str, permanent: bool
) -> None:
    assert permanent_pull_error(reason, message) is permanent


NOW = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)


def pod(name: str, started_ago: float | None, reason: str, message: str) -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [{"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [
            {"name": "engine", "ready": False, "state": {"waiting": {"reason": reason}}},
        ],
    }
    if message:
        status["containerStatuses"][0]["state"]["waiting"]["message"] = message
    if started_ago is not None:
        started = NOW - timedelta(seconds=started_ago)
        status["startTime"] = started.isoformat().replace("+00:00", "Z")
    return {"metadata": {"name": name}, "status": status}


def test_the_failure_is_the_longest_failing_pods_and_transient_pods_do_not_count() -> None:
    pods = [
        pod("w-1", 5, "ErrImagePull", NOT_FOUND),
        pod("w-2", 40, "ImagePullBackOff", back_off(DENIED)),
        pod("w-3", 90, "ImagePullBackOff", back_off(RATE_LIMITED)),
        pod("w-4", 200, "ContainerCreating", ""),
    ]
    found = pull_failure(pods)
    assert found is not None
    assert found.error == back_off(DENIED)
    assert found.since == NOW - timedelta(seconds=40)
    assert pull_failure(pods[2:]) is None
    # A pod the kubelet has not stamped with a start time is still reported, last.
    unstamped = pull_failure([pod("w-5", None, "ErrImagePull", NOT_FOUND)])
    assert unstamped is not None
    assert unstamped.since is None


def test_unpullable_once_the_kubelet_has_retried() -> None:
    since = NOW - PULL_FAILURE_AFTER
    assert unpullable(NOT_FOUND, since, NOW)
    assert not unpullable(NOT_FOUND, since + timedelta(seconds=1), NOW)
    assert not unpullable(NOT_FOUND, None, NOW)
    assert not unpullable("", since - timedelta(hours=1), NOW)


def test_readiness_carries_the_pull_failure_with_the_pods_story() -> None:
    rule = ReadinessRule(
        api_version="apps/v1",
        kind="Deployment",
        namespace="ns",
        name="w",
        role=ReadinessRole.WORKLOAD,
    )
    obj = {
        "kind": "Deployment",
        "metadata": {"name": "w", "namespace": "ns", "generation": 1},
        "status": {
            "observedGeneration": 1,
            "conditions": [{"type": "Available", "status": "False"}],
        },
    }
    verdict = evaluate(rule, obj, [pod("w-1", 30, "ImagePullBackOff", back_off(NOT_FOUND))])
    assert not verdict.ready
    assert verdict.pull_failure is not None
    assert verdict.pull_failure.error == back_off(NOT_FOUND)
    assert f"pod w-1: container engine ImagePullBackOff: {back_off(NOT_FOUND)}" in verdict.reason
    waiting = evaluate(rule, obj, [pod("w-1", 30, "ImagePullBackOff", back_off(TIMEOUT))])
    assert waiting.pull_failure is None

"""``kube.poll_ready``: one readiness check per attempt. Not ready before the deadline is a
benign retryable error (Temporal's retry is the poll, no slot is held in between); past the
deadline it fails for good with the reason; ready returns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from modelfleet.activities.kube_ops import KubeActivities, KubeconfigStore
from modelfleet.contracts.kube_payloads import ReadyResult, WaitReadyRequest


class Answers(KubeActivities):
    """The activity with its cluster reads replaced by a fixed answer."""

    def __init__(self, tmp: Path, answer: ReadyResult) -> None:
        super().__init__(KubeconfigStore(tmp))
        self.answer = answer

    def _readiness(self, request: WaitReadyRequest) -> ReadyResult:
        return self.answer


def request(deadline_in: timedelta) -> WaitReadyRequest:
    return WaitReadyRequest(cluster="east", rules=[], deadline=datetime.now(UTC) + deadline_in)


def test_not_ready_before_the_deadline_is_a_benign_retryable_error(tmp_path: Path) -> None:
    activities = Answers(tmp_path, ReadyResult(ready=False, reason="Deployment m: 0/1 ready"))
    with pytest.raises(ApplicationError) as raised:
        activities.poll_ready(request(timedelta(minutes=5)))
    assert raised.value.type == "NotReadyYet"
    assert not raised.value.non_retryable
    assert raised.value.category is ApplicationErrorCategory.BENIGN
    assert "0/1 ready" in raised.value.message


def test_past_the_deadline_fails_for_good_with_the_reason(tmp_path: Path) -> None:
    activities = Answers(tmp_path, ReadyResult(ready=False, reason="ImagePullBackOff"))
    with pytest.raises(ApplicationError) as raised:
        activities.poll_ready(request(-timedelta(seconds=1)))
    assert raised.value.type == "ReadinessDeadlineExceeded"
    assert raised.value.non_retryable
    assert "progress deadline: ImagePullBackOff" in raised.value.message


def test_ready_returns_at_once(tmp_path: Path) -> None:
    activities = Answers(tmp_path, ReadyResult(ready=True, reason="all ready"))
    assert activities.poll_ready(request(timedelta(minutes=5))).ready


def test_crash_looping_before_ready_fails_at_once_past_its_restart_limit(tmp_path: Path) -> None:
    looping = "pod m-0: container engine CrashLoopBackOff (restarted 2 times), last exit Error"
    ask = request(timedelta(minutes=30)).model_copy(update={"crash_loop_restarts": 2})
    # Below the limit (one restart), or restarts without a back-off: still waited for.
    for answer in (
        ReadyResult(
            ready=False,
            reason=looping.replace("2 times", "1 time"),
            restarts=1,
            backing_off=True,
        ),
        ReadyResult(ready=False, reason="pod m-0: container engine is running", restarts=4),
    ):
        with pytest.raises(ApplicationError) as raised:
            Answers(tmp_path, answer).poll_ready(ask)
        assert raised.value.type == "NotReadyYet"
    crash = ReadyResult(ready=False, reason=looping, restarts=2, backing_off=True)
    with pytest.raises(ApplicationError) as raised:
        Answers(tmp_path, crash).poll_ready(ask)
    assert raised.value.type == "CrashLoopBeforeReady"
    assert raised.value.non_retryable
    assert raised.value.message.startswith("crash-looping before Ready (2 restarts): pod m-0")
    # 0 turns it off: the deadline decides.
    with pytest.raises(ApplicationError) as raised:
        Answers(tmp_path, crash).poll_ready(request(timedelta(minutes=30)))
    assert raised.value.type == "NotReadyYet"


NOT_FOUND = (
    'rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/v/e:bad": '
    'failed to resolve reference "docker.io/v/e:bad": docker.io/v/e:bad: not found'
)


def test_an_image_that_cannot_be_pulled_for_good_fails_once_retried(tmp_path: Path) -> None:
    reason = f"pod m-0: container engine ErrImagePull: {NOT_FOUND}"
    ask = request(timedelta(minutes=30)).model_copy(update={"crash_loop_restarts": 2})
    now = datetime.now(UTC)

    def answer(started_ago: float | None, error: str = NOT_FOUND) -> ReadyResult:
        since = None if started_ago is None else now - timedelta(seconds=started_ago)
        return ReadyResult(ready=False, reason=reason, pull_error=error, pull_since=since)

    # Too soon for the kubelet's second try, no start time, or no permanent error: waited for.
    for early in (answer(5), answer(None), answer(300, error="")):
        with pytest.raises(ApplicationError) as raised:
            Answers(tmp_path, early).poll_ready(ask)
        assert raised.value.type == "NotReadyYet"
    with pytest.raises(ApplicationError) as raised:
        Answers(tmp_path, answer(25)).poll_ready(ask)
    assert raised.value.type == "ImagePullFailed"
    assert raised.value.non_retryable
    assert raised.value.message == f"image cannot be pulled: {reason}"
    # crashLoopRestarts 0 waits for the deadline for this too.
    with pytest.raises(ApplicationError) as raised:
        Answers(tmp_path, answer(25)).poll_ready(request(timedelta(minutes=30)))
    assert raised.value.type == "NotReadyYet"

"""The worker's log formats and the activity fields the interceptor derives from names."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from modelfleet.contracts.activity_names import (
    FLEET_PUBLISH_CLUSTER,
    FLEET_REPLICAS_ON,
    KUBE_PROBE,
)
from modelfleet.contracts.fleet_payloads import (
    ClusterReport,
    PublishRequest,
    ReleaseRequest,
)
from modelfleet.contracts.kube_payloads import ProbeRequest
from modelfleet.worker.interceptor import cluster_of, owner_of
from modelfleet.worker.logs import LogFormat, activity_fields, configure_logging


class Capture:
    def __init__(self) -> None:
        self.stream = io.StringIO()
        self.handlers: list[logging.Handler] = []

    def install(self, fmt: LogFormat, level: str = "INFO") -> None:
        self.handlers.append(configure_logging(fmt, level, self.stream))


@pytest.fixture
def capture() -> Iterator[Capture]:
    root, sdk = logging.getLogger(), logging.getLogger("temporalio")
    levels = (root.level, sdk.level)
    cap = Capture()
    yield cap
    for handler in cap.handlers:
        root.removeHandler(handler)
    root.setLevel(levels[0])
    sdk.setLevel(levels[1])


def test_text_lines_end_with_the_activity_fields(capture: Capture) -> None:
    capture.install(LogFormat.TEXT)
    token = activity_fields.set({"cluster": "east", "attempt": 3, "replica": "ml/a b"})
    try:
        logging.getLogger("modelfleet.test").info("hello %s", "there")
    finally:
        activity_fields.reset(token)
    line = capture.stream.getvalue().strip()
    assert line.endswith('modelfleet.test: hello there cluster=east attempt=3 replica="ml/a b"')


def test_json_lines_hold_fields_and_the_record_own_fields_win(capture: Capture) -> None:
    capture.install(LogFormat.JSON)
    token = activity_fields.set({"cluster": "east", "attempt": 1})
    try:
        logging.getLogger("modelfleet.test").warning("x", extra={"fields": {"attempt": 2}})
    finally:
        activity_fields.reset(token)
    logging.getLogger("modelfleet.test").info("outside")
    first, second = (json.loads(line) for line in capture.stream.getvalue().splitlines())
    assert (first["level"], first["message"], first["cluster"], first["attempt"]) == (
        "warning",
        "x",
        "east",
        2,
    )
    assert "cluster" not in second


def test_reinstalling_replaces_the_handler_and_sdk_debug_stays_off(capture: Capture) -> None:
    capture.install(LogFormat.TEXT, "DEBUG")
    capture.install(LogFormat.JSON, "DEBUG")
    logging.getLogger("modelfleet.test").debug("once")
    # The SDK's DEBUG lines print raw payloads: never emitted, whatever the worker's level.
    logging.getLogger("temporalio.worker").debug("payload")
    lines = capture.stream.getvalue().splitlines()
    assert [json.loads(line)["message"] for line in lines] == ["once"]


def test_cluster_comes_from_the_names_a_payload_carries() -> None:
    assert cluster_of(KUBE_PROBE, [ProbeRequest(cluster="east")]) == "east"
    assert cluster_of(FLEET_REPLICAS_ON, ["west"]) == "west"
    report = PublishRequest(report=ClusterReport(name="north", ready=True))
    assert cluster_of(FLEET_PUBLISH_CLUSTER, [report]) == "north"
    assert cluster_of(FLEET_PUBLISH_CLUSTER, [PublishRequest(remove="south")]) == "south"
    assert cluster_of("fleet.release", [ReleaseRequest(namespace="ml", replicas=["a"])]) is None
    assert cluster_of(KUBE_PROBE, []) is None


def test_owner_comes_from_the_workflow_business_id() -> None:
    assert owner_of("replica/ml/qwen-abcde") == {"replica": "ml/qwen-abcde"}
    assert owner_of("deployment/ml/qwen") == {"deployment": "ml/qwen"}
    assert owner_of("cluster/east") == {"cluster": "east"}
    assert owner_of("fleet") == {}
    assert owner_of(None) == {}


def test_a_benign_not_yet_is_not_logged_as_a_failure(caplog: pytest.LogCaptureFixture) -> None:
    from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

    from modelfleet.worker.interceptor import _log_failure

    caplog.set_level(logging.DEBUG, logger="modelfleet.activity")
    _log_failure(
        ApplicationError("not yet", type="NotReadyYet", category=ApplicationErrorCategory.BENIGN),
        0.1,
    )
    _log_failure(ApplicationError("boom", type="X"), 0.1)
    levels = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert levels == [
        (logging.DEBUG, "activity not done yet: not yet"),
        (logging.WARNING, "activity failed: boom"),
    ]

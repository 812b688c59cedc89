"""The worker's text log (what the ``modelfleet dev`` terminal shows): an expected failure (an
activity's own error such as a stockout or a readiness deadline, a cancellation) is one line,
its stack only with ``MODELFLEET_DEBUG=1``; the SDK's repeat of an activity failure is dropped;
after Ctrl-C only errors print, one line each. A bug keeps its traceback."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest
from temporalio.exceptions import ApplicationError

from modelfleet.worker.logs import LogFormat, configure_logging, quiet_stop

SDK = logging.getLogger("temporalio.activity")
OURS = logging.getLogger("modelfleet.activity")


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[io.StringIO, logging.Handler]]:
    monkeypatch.delenv("MODELFLEET_DEBUG", raising=False)
    stream = io.StringIO()
    root = logging.getLogger()
    level = root.level
    handler = configure_logging(LogFormat.TEXT, logging.WARNING, stream)
    try:
        yield stream, handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as raised:
        return raised


def test_an_expected_activity_failure_is_one_line(
    terminal: tuple[io.StringIO, logging.Handler],
) -> None:
    stream, _ = terminal
    stockout = _raised(
        ApplicationError("zone us-central1-a has no a3-highgpu-8g left", type="Stockout")
    )
    SDK.warning("Completing activity as failed", exc_info=stockout)
    OURS.warning("activity failed: %s", "zone us-central1-a has no a3-highgpu-8g left")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert "activity failed: zone us-central1-a has no a3-highgpu-8g left" in lines[0]


def test_an_expected_failure_logged_with_its_exception_keeps_the_reason_not_the_stack(
    terminal: tuple[io.StringIO, logging.Handler],
) -> None:
    stream, _ = terminal
    deadline = _raised(
        ApplicationError("not Ready within 600 s: 0/1 pods ready", non_retryable=True)
    )
    logging.getLogger("modelfleet.worker").error("replica failed", exc_info=deadline)
    out = stream.getvalue()
    assert out.count("\n") == 1, out
    assert "replica failed: not Ready within 600 s: 0/1 pods ready" in out
    assert "Traceback" not in out
    assert "ApplicationError" not in out


def test_the_stack_is_shown_with_modelfleet_debug(
    terminal: tuple[io.StringIO, logging.Handler], monkeypatch: pytest.MonkeyPatch
) -> None:
    stream, _ = terminal
    monkeypatch.setenv("MODELFLEET_DEBUG", "1")
    SDK.warning("Completing activity as failed", exc_info=_raised(ApplicationError("stockout")))
    assert "Traceback" in stream.getvalue()


def test_a_bug_keeps_its_traceback(terminal: tuple[io.StringIO, logging.Handler]) -> None:
    stream, _ = terminal
    SDK.warning("Completing activity as failed", exc_info=_raised(KeyError("spec")))
    assert "Traceback" in stream.getvalue()


def test_after_ctrl_c_only_errors_print_one_line_each(
    terminal: tuple[io.StringIO, logging.Handler],
) -> None:
    stream, handler = terminal
    quiet_stop(handler)
    for _ in range(25):  # what a stop under load used to print: a stack per cancelled task
        SDK.warning(
            "Activity task raised during worker shutdown", exc_info=_raised(RuntimeError("x"))
        )
        OURS.warning("activity failed: %s", "connection reset")
    logging.getLogger("modelfleet.worker").error(
        "could not stop cleanly", exc_info=_raised(OSError("boom"))
    )
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert "could not stop cleanly: boom" in lines[0]

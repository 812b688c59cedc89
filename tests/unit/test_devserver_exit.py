"""Why a dev server that exited at start did (``devserver.exit_report``): the bind failure that
``start_dev_server`` retries on must survive the panic stack a failed bind leaves in the log."""

from __future__ import annotations

from modelfleet.worker.devserver import exit_report

BIND = (
    'time=2026-11-28T14:53:07.110 level=ERROR msg="Failed to start gRPC listener" '
    'error="listen tcp 127.0.0.1:46257: bind: address already in use" service=frontend'
)
PANIC = "panic: runtime error: invalid memory address or nil pointer dereference\n" + "".join(
    f"go.temporal.io/server/temporal.frame{i}(...)\n\t/home/runner/go/pkg/mod/x.go:{i} +0x19e\n"
    for i in range(200)
)


def test_a_failed_bind_is_reported_though_the_panic_fills_the_tail() -> None:
    log = f"{BIND}\n{PANIC}"
    assert "address already in use" not in log[-2000:]  # what the report used to carry
    report = exit_report(log)
    assert report.startswith(BIND)
    assert report.endswith(log[-2000:])


def test_a_log_without_errors_is_its_tail() -> None:
    log = "x" * 5000
    assert exit_report(log) == "x" * 2000

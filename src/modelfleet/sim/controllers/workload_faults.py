"""Workload faults in a simulated cluster: which pods never become ready, which crash after
becoming ready and how the kubelet's restart back-off grows. The settings come from the cluster's
:class:`~modelfleet.sim.faults.FaultConfig` (``never_ready``, ``crash_after_ready``,
``crash_after_ready_seconds``); :mod:`.kubelet` acts on these decisions.

Faults are read when a pod starts (bind time) and when it becomes Ready, so changing them affects
pods started afterwards. A new workload fault goes here (the decision) and in the kubelet or the
controller that shows it (the writes).

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure; no I/O.
"""

from __future__ import annotations

from modelfleet.sim.faults import FaultConfig

__all__ = ["MAX_BACKOFF_SECONDS", "crash_delay", "never_ready", "restart_backoff"]

# The kubelet's crash-loop back-off doubles per restart up to five minutes.
MAX_BACKOFF_SECONDS = 300.0


def never_ready(faults: FaultConfig, workload: tuple[str, str]) -> bool:
    """The workload's pods stay in ``ImagePullBackOff`` (bound, never started)."""
    return faults.workload_never_ready(*workload)


def crash_delay(faults: FaultConfig, workload: tuple[str, str]) -> float | None:
    """Seconds after Ready at which the workload's pods crash, or None if they do not."""
    if not faults.workload_crashes(*workload):
        return None
    return faults.crash_after_ready_seconds or 0.0


def restart_backoff(first_seconds: float, restarts: int) -> float:
    """The back-off before restart number ``restarts`` (1 is the first)."""
    return min(MAX_BACKOFF_SECONDS, first_seconds * 2.0 ** (restarts - 1))

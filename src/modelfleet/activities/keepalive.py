"""Heartbeats for synchronous (thread-pool) activities whose single blocking call can outlast
their heartbeat timeout: one request to a slow API server can take its whole request timeout,
with retries inside the client longer still.

:class:`KeepAlive` re-sends the activity's latest heartbeat details from a helper thread every
few seconds while the activity runs, so the workflow can schedule the activity with a short
``heartbeat_timeout`` (a killed worker is noticed in seconds, not after the start-to-close
timeout) without a live but slow attempt being timed out. The details stay the activity's own
progress (what a retry resumes from), never replaced by an empty beat.

May touch: the Temporal activity context (heartbeats) and one helper thread per activity run.
"""

from __future__ import annotations

import contextvars
import threading
from types import TracebackType
from typing import Any

from temporalio import activity

from modelfleet.contracts.activity_names import KUBE_HEARTBEAT_SECONDS

# Well under the heartbeat timeout the workflows give; the SDK throttles what it sends anyway.
BEAT_SECONDS = KUBE_HEARTBEAT_SECONDS / 4


class KeepAlive:
    """``with KeepAlive(*resumed) as alive: ... alive.beat(progress...)`` inside a sync
    activity; ``details`` are what it heartbeats until the first ``beat`` (the progress it
    resumed from, so an attempt that fails before progressing keeps it for the next)."""

    def __init__(
        self, *details: Any, every: float = BEAT_SECONDS, quiet_start: bool = False
    ) -> None:
        self._every = every
        # Quiet start: no beat on entry, so the activity's first own beat (say, the operation a
        # retry must resume) is the one the SDK sends at once rather than after its throttle
        # interval (0.8 x the heartbeat timeout); the helper's first beat is ``every`` later.
        self._quiet_start = quiet_start
        self._details: tuple[Any, ...] = details
        self._stop = threading.Event()
        # The activity context lives in context variables of the activity's thread.
        self._context = contextvars.copy_context()
        self._thread = threading.Thread(target=self._run, name="activity-keepalive", daemon=True)

    def __enter__(self) -> KeepAlive:
        if not self._quiet_start:
            activity.heartbeat(*self._details)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()

    def beat(self, *details: Any) -> None:
        """Record progress and heartbeat it now; the helper repeats it until the next beat."""
        self._details = details
        activity.heartbeat(*details)

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self._context.run(activity.heartbeat, *self._details)

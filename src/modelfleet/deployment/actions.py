"""What the ModelDeployment workflow is told to do next. Each action is one thing the workflow
carries out (an activity, a child workflow, a signal, a wait) before it asks again.

Pure: pydantic models only.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from modelfleet.api.deployments import ModelReplica
from modelfleet.api.meta import Model
from modelfleet.contracts.canary_payloads import EngineCounts


class Rest(Model):
    """Between passes: wait until ``rest_over`` (a change) or ``timeout``, then ``woke``."""

    timeout: timedelta


class Place(Model):
    """Ask the Fleet for ``desired`` replicas in all (``fleet.place``), then ``placed``."""

    desired: int
    sequence: int
    # A roll's surge that may borrow a cluster outside home (``strategy.borrow: Fleet``).
    borrow: bool = False


class CheckPlacement(Model):
    """Ask the Fleet whether the placement answered at ``version`` is still current (the
    ``fleet.placement_current`` activity, a query), then report it with ``placement_checked``."""

    version: int


class DryPlace(Model):
    """Ask the Fleet where ``desired`` replicas of the spec's template would go, with the
    replicas named in ``without`` not counted, reserving nothing; then ``dry_placed``."""

    desired: int
    without: list[str]


class StartReplica(Model):
    """Start the ModelReplica child workflow for ``replica`` (already recorded as Pending)."""

    replica: ModelReplica
    progress_deadline_seconds: int
    crash_loop_restarts: int = 0


class SignalTeardown(Model):
    """Tell the replica's workflow to tear down (already recorded as Terminating)."""

    name: str


class Forget(Model):
    """Release the replica's capacity in the Fleet (``fleet.release``), then ``forgotten``."""

    name: str


class Wait(Model):
    """Wait until ``wait_over``: the replica has finished (``done``), became Ready or failed
    (``settled``), or, Ready, stayed so until ``deadline`` (``proven``: a durable timer, cut
    short when it leaves Ready or a replacement crash-loops)."""

    name: str
    until: Literal["done", "settled", "proven", "window"]
    deadline: datetime | None = None

    @property
    def summary(self) -> str:
        what = {
            "done": "teardown",
            "settled": "to become Ready",
            "proven": "to stay Ready (minReadySeconds)",
            "window": "and the stable replicas to serve through the canary window",
        }[self.until]
        return f"wait for {self.name} {what}"


class CheckErrors(Model):
    """Read what a replacement's engines answered while it proved itself (``engine.errors``)
    and report it (``events.errors_counted``)."""

    name: str
    cluster: str


class ReadFigures(Model):
    """Read the engines of a canary step's replicas (``engine.figures``), with the baseline
    when the window is over, and report it (``events.figures_read``)."""

    namespace: str
    replicas: dict[str, str]
    baseline: dict[str, EngineCounts] | None = None
    canary: list[str] = []
    stable: list[str] = []


class EndPass(Model):
    """A reconcile pass is over: publish the status (and continue-as-new if suggested)."""


class Finish(Model):
    """The deployment is deleted and every replica is gone: publish and return."""


Action = (
    Rest
    | Place
    | CheckPlacement
    | DryPlace
    | StartReplica
    | SignalTeardown
    | Forget
    | Wait
    | CheckErrors
    | ReadFigures
    | EndPass
    | Finish
)

"""The ModelDeployment workflow's whole state in one pydantic model, which is also its
continue-as-new input, plus the template identity a rollout compares replicas by.

Pure: pydantic models only. ``ops`` is what is left of the reconcile pass in progress, as data,
so the decisions in ``decide`` stay pure functions of this state and the time.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from modelfleet.api.deployments import ModelDeployment, ModelReplica
from modelfleet.api.meta import Condition
from modelfleet.contracts.canary_payloads import EngineCounts, WindowFigures
from modelfleet.contracts.status import ReplicaStatus
from modelfleet.contracts.wire import WireModel


def template_hash(md: ModelDeployment) -> str:
    """Identity of what a replica runs: a change here rolls every replica."""
    body = json.dumps(md.spec.template.to_wire(), sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:12]


class Stage(StrEnum):
    REST = "rest"  # between passes: wait for a change or the periodic resync
    PASS = "pass"  # a reconcile pass is working through ``ops``
    DELETE = "delete"  # the deployment is deleted: tearing every replica down


# --- ops: the rest of the pass in progress ---------------------------------------------------


class Reap(WireModel):
    """Forget replicas whose workflow ended by itself, in name order after ``after``."""

    op: Literal["reap"] = "reap"
    after: str = ""


PlacePurpose = Literal["reconcile", "fill", "fill-await", "surge", "return"]


class PlaceFor(WireModel):
    """Ask the Fleet for replicas; what follows depends on ``purpose`` and the answer."""

    op: Literal["place"] = "place"
    purpose: PlacePurpose
    # surge only: the replica the surge replaces, and whether to fall back to replacing it in
    # place when the fleet has no room (maxUnavailable > 0).
    old: str = ""
    fallback: bool = False
    # Guarded (every placement but the in-place fill of a replica that is not serving): a
    # serving replica leaves only after its replacement is Ready, a replacement that fails
    # rolls back to the last good template.
    guard: bool = False
    # Replacements of this one already blocked by their cluster (see ``AwaitReady.retries``).
    retries: int = 0
    # surge only: what does not fit at home may go to another cluster (``strategy.borrow``).
    # ``return`` is a surge that brings the borrowed replica ``old`` home, never borrowing.
    borrow: bool = False


DryPurpose = Literal["gate", "replace"]


class DryPlace(WireModel):
    """Ask the Fleet, without reserving anything, whether the spec's template can be placed.

    ``gate``: before a roll, with none of this deployment's replicas counted (can the new
    template run anywhere at all); a template that cannot is held back. ``replace``: before a
    serving replica ``old`` is replaced in place, with ``old`` not counted."""

    op: Literal["dry-place"] = "dry-place"
    purpose: DryPurpose
    old: str = ""


class TearDown(WireModel):
    op: Literal["teardown"] = "teardown"
    name: str
    reason: str
    signalled: bool = False


class Start(WireModel):
    op: Literal["start"] = "start"
    replica: ModelReplica
    # Placed outside home, and why (``ReplicaStatus.borrowed``).
    borrowed: str = ""


class AwaitReady(WireModel):
    """Wait for a new replica to settle; Ready goes on (replacing ``then_replace``), anything
    else pauses the rollout with ``paused`` as the summary."""

    op: Literal["await-ready"] = "await-ready"
    name: str
    paused: str
    then_replace: str = ""
    # ``then_replace`` is a borrowed replica this one brings home (``ReturnHome``).
    home: bool = False
    # A failure rolls the deployment back to its last good template; ``also_replace`` are
    # serving replicas the placement evicted, torn down only once this one is Ready.
    also_replace: list[str] = []
    # How many replacements before this one failed because their cluster could not be reached
    # (each retried on another cluster, ``decide.MAX_CLUSTER_RETRIES`` at most).
    retries: int = 0
    # Once proven: whether what its engines answered meanwhile was read, and the figures (0
    # and 0 when they could not be read).
    errors_checked: bool = False
    answered: int = 0
    answered_5xx: int = 0


class Analyse(WireModel):
    """A canary step's analysis: read the engines of the new (``canary``) and the stable
    replicas (the baseline), wait ``windowSeconds``, read again; the figures over the window
    are judged (``canary.verdict``). ``generation`` is the spec's when it began: a change of
    template under it ends it (the roll goes to the new template)."""

    op: Literal["analyse"] = "analyse"
    target: str
    step: int
    percent: int
    canary: list[str]
    stable: list[str]
    clusters: dict[str, str] = {}
    baseline: dict[str, EngineCounts] | None = None
    # When the window ends (set with the baseline), how often it was extended for want of
    # requests, and the figures read at its end.
    until: datetime | None = None
    extended: int = 0
    figures: WindowFigures | None = None


class CanaryProgress(WireModel):
    """The canary roll of template ``target``: the steps passed so far and the figures of each
    analysis (bounded by the steps, at most 10), or a person's ``rollout promote``."""

    target: str
    passed: int = 0
    promoted: bool = False
    results: list[str] = []


class CheckCurrent(WireModel):
    """A periodic resync that found nothing changed here: ask the Fleet (a query, no Update)
    whether the placement answered at ``version`` is still current; if so, the reconcile
    placement after this op is skipped."""

    op: Literal["check-current"] = "check-current"
    version: int


class Roll(WireModel):
    """Replace replicas that run another template than ``target``, one at a time.

    ``target`` and the strategy are pinned when the roll starts (empty until then)."""

    op: Literal["roll"] = "roll"
    target: str = ""
    max_surge: int = 0
    max_unavailable: int = 0


class ReturnHome(WireModel):
    """After the roll: bring borrowed replicas home, one surge each (a replacement placed under
    the normal rules, Ready and proven before the borrowed one drains); ``tried`` are those
    asked for this pass (bounded by the replicas), so a full home ends the op."""

    op: Literal["return-home"] = "return-home"
    tried: list[str] = []


# Bounded, carried across continue-as-new: kubectl's default revisionHistoryLimit, and enough
# decision-log lines for ``describe`` to say what the deployment did lately.
REVISION_LIMIT = 10
LOG_LIMIT = 20
# kubectl's annotation for why a revision exists (``rollout history``'s CHANGE-CAUSE): the CLI's
# ``rollout undo`` and ``restart`` set it on the spec they apply, as may a manifest.
CHANGE_CAUSE = "kubernetes.io/change-cause"


# A replica name that left the deployment is not given to a new replica for this long (logs,
# metrics and UI links by name would mix two templates), remembering at most this many names.
RETIRED_FOR = timedelta(hours=1)
RETIRED_LIMIT = 1000


def change_cause(spec: ModelDeployment, default: str = "apply") -> str:
    """Why ``spec`` was applied: its change-cause annotation, else ``default``."""
    return spec.metadata.annotations.get(CHANGE_CAUSE, "").strip() or default


class Revision(WireModel):
    """One replica template the deployment was given, as ``rollout history`` lists it: a new
    template is a new revision, scaling updates the replica count of the current one."""

    number: int
    at: datetime | None = None
    cause: str
    template: str  # template hash
    replicas: int
    spec: ModelDeployment
    # What became of it when it did not stay: "rolled back: <why, with the figures>".
    outcome: str = ""
    # Its canary analyses, one line each with the figures (``strategy.canary``).
    analyses: list[str] = []


class LogEntry(WireModel):
    """A decision that changed something (a replica placed or removed, a change held back, a
    pause), for ``describe``."""

    at: datetime
    message: str


Op = Annotated[
    Reap
    | PlaceFor
    | DryPlace
    | TearDown
    | Start
    | AwaitReady
    | Roll
    | ReturnHome
    | CheckCurrent
    | Analyse,
    Field(discriminator="op"),
]


class DeploymentState(WireModel):
    """Everything the ModelDeployment workflow knows, and its continue-as-new input (a first
    run's input sets only ``spec``)."""

    spec: ModelDeployment
    generation: int = 1
    replicas: dict[str, ReplicaStatus] = {}
    placed: dict[str, ModelReplica] = {}
    # Clusters this deployment's new replicas avoid until the given time, and why.
    avoid: dict[str, datetime] = {}
    avoid_reasons: dict[str, str] = {}
    # Numbers placement requests, so a retried activity never places twice.
    sequence: int = 0
    dirty: bool = True
    deleting: bool = False
    stage: Stage = Stage.REST
    ops: list[Op] = []
    # The Fleet's last answer, for the status.
    conditions: list[Condition] = []
    rejections: dict[str, str] = {}
    summary: str = ""
    # The last spec whose template had a replica Ready: what a failed change rolls back to.
    last_good: ModelDeployment | None = None
    # The last good spec before ``last_good`` took over, and when that roll finished: while
    # its rollback window is open (``rollback_window_end``), a crash loop of ``last_good``'s
    # template rolls back to it (``failures.failed_after_roll``).
    previous_good: ModelDeployment | None = None
    rolled_out_at: datetime | None = None
    # The template hash of a spec held back (blocked at the dry placement, or rolled back after
    # its replacement failed) and why: while ``spec`` still has that template, the deployment
    # runs ``last_good``'s template instead (see ``effective_spec``).
    held: str = ""
    held_reason: str = ""
    # The template hash whose dry placement last succeeded, so a roll checks once per change.
    checked: str = ""
    # ``rollout pause``: no new roll starts; new replicas (a scale-up) run ``pinned``'s
    # template, the one in effect when the pause began, until ``rollout resume``.
    paused: bool = False
    pinned: ModelDeployment | None = None
    # When the deployment was created (its first run's start), kept across continue-as-new.
    created: datetime | None = None
    # The last ``REVISION_LIMIT`` revisions and ``LOG_LIMIT`` decisions, kept across
    # continue-as-new; ``noted`` is the last summary logged, so a verdict is logged once.
    revisions: list[Revision] = []
    log: list[LogEntry] = []
    noted: str = ""
    # Continue-as-new after this many passes in a run even if the server does not suggest it
    # (0: only when it does). Tests set it to exercise what a continue-as-new carries.
    passes_per_run: int = 0
    # The generation the last finished pass (and so its verdict) was for; 0: none yet.
    observed: int = 0
    # The Fleet's change version of the last reconcile placement's answer (0: none), for the
    # "is it still current" check of a periodic resync. Versions are per Fleet run; the Fleet
    # answers "not current" for a version it no longer knows.
    fleet_version: int = 0
    # Periodic resyncs in a row that found the placement current:
    # each doubles the next rest, up to ``LONGEST_QUIET_RESYNC``; any change starts again.
    quiet_resyncs: int = 0
    # Replicas that left (released and forgotten) in the last ``RETIRED_FOR``, name -> when:
    # placements never give their names to a new replica (see ``retire``).
    retired: dict[str, datetime] = {}
    # The canary roll in progress (``strategy.canary``), None when none is.
    canary: CanaryProgress | None = None
    # The rollout slot (``deployment.slots``): "" none, "waiting" asked, "held"; how many were
    # ahead when last told (-1: not told yet).
    slot: str = ""
    slot_ahead: int = 0


def still_retired(retired: dict[str, datetime], now: datetime) -> dict[str, datetime]:
    """The names that left within ``RETIRED_FOR`` of ``now``, the latest ``RETIRED_LIMIT``."""
    recent = sorted(
        ((at, name) for name, at in retired.items() if now - at < RETIRED_FOR), reverse=True
    )
    return {name: at for at, name in sorted(recent[:RETIRED_LIMIT])}


def retire(retired: dict[str, datetime], name: str, now: datetime) -> dict[str, datetime]:
    """``retired`` with ``name`` leaving at ``now``, trimmed (bounded across continue-as-new)."""
    return still_retired({**retired, name: now}, now)


def promote(state: DeploymentState, now: datetime | None) -> None:
    """The spec's template serves: it becomes the last good one. When it replaces another
    good template, that one is kept for the rollback window (a crash loop of the new template
    within it rolls back to it); a window of 0 (or no time to count it from) keeps nothing."""
    before = state.last_good
    state.last_good = state.spec.model_copy(deep=True)
    window = state.spec.spec.strategy.rollback_window_seconds
    if now is None or not window:
        return
    if before is not None and template_hash(before) != template_hash(state.spec):
        state.previous_good, state.rolled_out_at = before, now


def rollback_window_end(state: DeploymentState) -> datetime | None:
    """Until when a crash loop of the template last rolled out rolls it back (None: none)."""
    window = state.spec.spec.strategy.rollback_window_seconds
    if state.previous_good is None or state.rolled_out_at is None or not window:
        return None
    return state.rolled_out_at + timedelta(seconds=window)


def effective_spec(state: DeploymentState) -> ModelDeployment:
    """What the deployment runs now: the spec, or with a held-back template the spec with the
    last good template in its place (replica count, strategy and the rest stay the user's);
    paused, the template in effect when the pause began."""
    if state.paused and state.pinned is not None:
        return _with_template(state.spec, state.pinned)
    if not state.held or state.last_good is None or template_hash(state.spec) != state.held:
        return state.spec
    return _with_template(state.spec, state.last_good)


def _with_template(spec: ModelDeployment, source: ModelDeployment) -> ModelDeployment:
    if template_hash(spec) == template_hash(source):
        return spec
    out = spec.model_copy(deep=True)
    out.spec.template = source.spec.template.model_copy(deep=True)
    return out


def note(state: DeploymentState, at: datetime, message: str) -> None:
    """Append to the decision log (in place: for functions working on their own copy)."""
    state.log = [*state.log, LogEntry(at=at, message=message)][-LOG_LIMIT:]


def record_revision(state: DeploymentState, at: datetime | None, cause: str) -> None:
    """Record ``state.spec`` in the revisions (in place): a new revision for a new template,
    else the current revision's replica count follows."""
    digest = template_hash(state.spec)
    last = state.revisions[-1] if state.revisions else None
    if last is not None and last.template == digest:
        updated = last.model_copy(update={"replicas": state.spec.spec.replicas, "spec": state.spec})
        state.revisions = [*state.revisions[:-1], updated]
        return
    revision = Revision(
        number=last.number + 1 if last else 1,
        at=at,
        cause=cause,
        template=digest,
        replicas=state.spec.spec.replicas,
        spec=state.spec,
    )
    state.revisions = [*state.revisions, revision][-REVISION_LIMIT:]

"""A canary roll's steps: whether a roll goes in steps at all, the analysis a step must pass
before the roll replaces more replicas (a baseline reading, the window, a second reading, the
verdict of ``canary``), extending a window too quiet to judge, and keeping each analysis'
figures on its revision (``rollout history``).

Part of the ModelDeployment's decisions: ``roll`` asks ``canary_step`` before it replaces the
next replica; ``decide`` runs ``analyse`` for the ``Analyse`` op; a failed step rolls back
through ``failures``. Functions change the working copy of the state they are handed.

May import: ``api``, the ``contracts`` models, ``deployment.state``, ``deployment.actions``,
``deployment.canary`` and ``deployment.failures``, the standard library. Pure: no I/O, no clock
(the time is an argument), no Temporal.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from modelfleet.contracts.status import ReplicaPhase
from modelfleet.deployment import canary
from modelfleet.deployment.actions import Action, ReadFigures, Wait
from modelfleet.deployment.failures import fail_replacement
from modelfleet.deployment.state import (
    Analyse,
    CanaryProgress,
    DeploymentState,
    Roll,
    effective_spec,
    note,
    template_hash,
)

# A window without enough requests to judge is extended this many times (the baseline kept, so
# the requests add up); then the roll waits for ``rollout promote`` or ``rollout abort`` (and
# analyses again at the next pass).
MAX_EXTENSIONS = 2
INCONCLUSIVE = "canary analysis inconclusive"


def canary_rolling(s: DeploymentState, target: str) -> bool:
    """A roll to ``target`` that goes in canary steps: the strategy has a canary, there is a
    last good template to return to, and ``target`` is the spec's new template (never the
    rollback to the last good one)."""
    return (
        s.spec.spec.strategy.canary is not None
        and s.last_good is not None
        and target == template_hash(s.spec)
        and target != s.held
        and target != template_hash(s.last_good)
    )


def analysis_over(state: DeploymentState) -> bool:
    """Whether a canary window should end before its timer: deleted, promoted, aborted (the
    pass ended), or one of its replicas left Ready (the analysis starts again, or the failed
    replacement rolls back)."""
    head = state.ops[0] if state.ops else None
    progress = state.canary
    if state.deleting or not isinstance(head, Analyse) or progress is None or progress.promoted:
        return True
    return any(
        n not in state.replicas or state.replicas[n].phase is not ReplicaPhase.READY
        for n in (*head.canary, *head.stable)
    )


def canary_step(s: DeploymentState, op: Roll, now: datetime) -> Analyse | None:
    """The analysis the roll must pass before it replaces another replica, if any: when as
    many replicas run the new template (Ready, proven) as the next step asks. A step of every
    replica needs none (there is nothing stable left to compare with, and nothing left to
    hold back)."""
    strategy = s.spec.spec.strategy.canary
    if strategy is None or not canary_rolling(s, op.target):
        return None
    if s.canary is None or s.canary.target != op.target:
        s.canary = CanaryProgress(target=op.target)
        note(s, now, f"canary: rolling in steps of {', '.join(f'{p}%' for p in strategy.steps)}")
    progress = s.canary
    if progress.promoted or progress.passed >= len(strategy.steps):
        return None
    replicas = s.spec.spec.replicas
    percent = strategy.steps[progress.passed]
    want = canary.step_replicas(replicas, percent)
    if want >= replicas:
        return None
    ready = sorted(
        (n for n, r in s.replicas.items() if r.phase is ReplicaPhase.READY),
    )
    new = [n for n in ready if s.replicas[n].template_hash == op.target]
    if len(new) < want:
        return None
    stable = [n for n in ready if n not in new]
    return Analyse(
        target=op.target,
        step=progress.passed,
        percent=percent,
        canary=new,
        stable=stable,
        clusters={n: s.replicas[n].cluster for n in (*new, *stable)},
    )


def analyse(s: DeploymentState, op: Analyse, now: datetime) -> Action | None:
    """Read the baseline, wait out the window, read again, judge: pass goes to the next step,
    fail rolls back with the figures, too few requests extends the window (then waits for a
    person)."""
    strategy = s.spec.spec.strategy.canary
    progress = s.canary
    if (
        strategy is None
        or progress is None
        or progress.promoted
        or progress.target != op.target
        or s.deleting
        or s.paused
        or template_hash(effective_spec(s)) != op.target
        or analysis_over(s)
    ):
        # Promoted, changed, or a replica left Ready: the roll decides again (a failed
        # replacement rolls back there; otherwise the step is analysed afresh).
        s.ops.pop(0)
        return None
    analysis = strategy.analysis
    namespace = s.spec.namespace
    if op.baseline is None or op.until is None:
        if op.baseline is None:
            return ReadFigures(namespace=namespace, replicas=op.clusters)
        op.until = now + timedelta(seconds=analysis.window_seconds)
        s.summary = (
            f"canary at {op.percent}% ({len(op.canary)} of {s.spec.spec.replicas} replicas on "
            f"the new template): analysing for {analysis.window_seconds} s"
        )
        return None
    if op.figures is None:
        if now < op.until:
            return Wait(name=op.canary[0], until="window", deadline=op.until)
        return ReadFigures(
            namespace=namespace,
            replicas=op.clusters,
            baseline=op.baseline,
            canary=op.canary,
            stable=op.stable,
        )
    judged = canary.verdict(op.figures, analysis)
    figures = canary.figures_text(op.figures)
    where = f"canary step {op.percent}% ({len(op.canary)} of {s.spec.spec.replicas} replicas)"
    if judged.outcome == "pass":
        line = f"{where} passed: {figures}"
        note(s, now, line)
        _record_analysis(s, op.target, line)
        progress.passed = op.step + 1
        s.summary = ""
        s.ops.pop(0)
        return None
    if judged.outcome == "fail":
        line = f"{where} failed: {judged.reason} ({figures})"
        _record_analysis(s, op.target, line)
        fail_replacement(s, line)
        return None
    if op.extended < MAX_EXTENSIONS:
        op.extended += 1
        op.until = now + timedelta(seconds=analysis.window_seconds)
        op.figures = None
        note(s, now, f"{where}: window extended ({op.extended}): {judged.reason}")
        return None
    line = f"{INCONCLUSIVE} at step {op.percent}%: {judged.reason} ({figures})"
    _record_analysis(s, op.target, line)
    s.summary = (
        f"{line}; the roll waits: `modelfleet rollout promote` goes on, `rollout abort` rolls "
        f"back (the next resync analyses again)"
    )
    s.ops.clear()
    return None


def _record_analysis(s: DeploymentState, target: str, line: str) -> None:
    """Keep an analysis' figures on the revision of ``target`` (``rollout history``)."""
    s.revisions = [
        r.model_copy(update={"analyses": [*r.analyses, line][-10:]}) if r.template == target else r
        for r in s.revisions
    ]

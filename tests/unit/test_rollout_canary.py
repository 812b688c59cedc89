"""SLO-gated canaries (issue 25, item 3): a roll to a new template with ``strategy.canary``
moves in steps of the replicas; at each step, once the new replicas are Ready and proven, the
new and the stable replicas' engines are read at the start and the end of the window, and the
window's figures are judged. A failed step rolls back with the figures; too few requests
extends the window, then waits for ``rollout promote`` or ``rollout abort``."""

from __future__ import annotations

import pytest
from rollout_builders import Driver, canary_counts, fleet_with, serving, spec, state_with, status

from modelfleet.api.deployments import CanaryAnalysis, CanaryStrategy, ModelDeployment
from modelfleet.api.rules import validate
from modelfleet.contracts.canary_payloads import (
    EngineCounts,
    GroupFigures,
    WindowFigures,
    delta,
    quantile,
    window_figures,
)
from modelfleet.deployment import canary
from modelfleet.deployment import decisions as rollout
from modelfleet.deployment.analysis import INCONCLUSIVE, MAX_EXTENSIONS

GOOD = "vllm:1"
NEXT = "vllm:2"
SLOW = "vllm:slow"


def canaried(
    image: str,
    replicas: int = 4,
    steps: list[int] | None = None,
    *,
    ratio: float | None = 3.0,
    seconds: float | None = None,
    errors: float | None = None,
    itl_ratio: float | None = None,
    itl_seconds: float | None = None,
) -> ModelDeployment:
    md = spec(replicas, image=image, max_error_percent=100)
    md.spec.strategy.canary = CanaryStrategy(
        steps=steps or [25, 50, 100],
        analysis=CanaryAnalysis(
            window_seconds=60,
            ttft_p95_ratio=ratio,
            ttft_p95_seconds=seconds,
            max_error_percent=errors,
            itl_p95_ratio=itl_ratio,
            itl_p95_seconds=itl_seconds,
        ),
    )
    return md


def _roll(new: ModelDeployment, replicas: int = 4, **window: EngineCounts) -> Driver:
    old = canaried(GOOD, replicas)
    clusters = [f"c{i}" for i in range(replicas)]
    state = state_with(old, *(status(old, f"{c}-old", c) for c in clusters))
    state = state.model_copy(update={"dirty": False, "last_good": old})
    fleet = fleet_with(state, **dict.fromkeys(clusters, 1), spare=1)
    driver = Driver(
        rollout.applied(state, new),
        fleet,
        window={GOOD: canary_counts(100), **{k.replace("_", ":"): v for k, v in window.items()}},
        images={f"{c}-old": GOOD for c in clusters},
    )
    return driver


def _started(driver: Driver) -> list[str]:
    return [line for line in driver.log if line.startswith("start")]


def test_a_good_image_passes_each_step_and_reaches_every_replica() -> None:
    new = canaried(NEXT)
    driver = _roll(new, vllm_2=canary_counts(100, ttft=0.004))
    assert driver.run() == "rest"
    assert set(serving(driver.state).values()) == {rollout.template_hash(new)}
    # Step 25% (one of four) is analysed with one new replica, step 50% with two; the last
    # step needs no analysis.
    figures = [line for line in driver.log if line.startswith("figures")]
    assert [len(f.split(" ")[1].split(",")) for f in figures] == [1, 2], driver.log
    first = driver.log.index(figures[0])
    assert len([s for s in _started(driver) if driver.log.index(s) < first]) == 1
    revision = driver.state.revisions[-1]
    assert len(revision.analyses) == 2
    assert revision.outcome == ""
    assert revision.analyses[0].startswith("canary step 25% (1 of 4 replicas) passed: new 1")
    assert "TTFT p95" in revision.analyses[0]
    assert "over 100 requests" in revision.analyses[0]
    assert "ITL p95 0.001 s" in revision.analyses[0], revision.analyses[0]
    assert driver.state.canary is None
    assert not driver.state.held
    assert rollout.template_hash(driver.state.last_good) == rollout.template_hash(new)  # type: ignore[arg-type]


def test_a_slow_image_is_rolled_back_at_its_first_step_with_the_figures() -> None:
    new = canaried(SLOW)
    driver = _roll(new, vllm_slow=canary_counts(100, ttft=0.2))
    assert driver.run() == "rest"
    state = driver.state
    assert state.held == rollout.template_hash(new)
    assert "canary step 25% (1 of 4 replicas) failed" in state.held_reason
    assert "x the stable replicas'" in state.held_reason, state.held_reason
    assert "ttftP95Ratio 3" in state.held_reason
    # One replica of the slow image ever ran; the old template serves everywhere again.
    slow_starts = [n for n, image in driver.images.items() if image == SLOW]
    assert len(slow_starts) == 1
    assert set(serving(state).values()) == {rollout.template_hash(canaried(GOOD))}
    assert len(serving(state)) == 4
    revision = state.revisions[-1]
    assert revision.outcome.startswith("rolled back: canary step 25%")
    assert "failed" in revision.analyses[-1]
    assert state.canary is None
    with pytest.raises(AssertionError):
        assert not rollout.canary_in_progress(state)


def test_an_absolute_ttft_threshold_and_the_error_rate_fail_a_step() -> None:
    slow = canaried(SLOW, ratio=None, seconds=0.1)
    driver = _roll(slow, vllm_slow=canary_counts(100, ttft=0.2))
    assert driver.run() == "rest"
    assert "above ttftP95Seconds 0.1 s" in driver.state.held_reason
    failing = canaried(NEXT, ratio=None, errors=5)
    driver = _roll(failing, vllm_2=canary_counts(100, errors=20))
    assert driver.run() == "rest"
    assert "20 of 100 requests with 5xx (20.0%, above maxErrorPercent 5%)" in (
        driver.state.held_reason
    )


def test_a_slow_decoding_image_is_rolled_back_on_its_inter_token_latency() -> None:
    # Its first tokens are as quick as the stable replicas'; the tokens after them are not.
    new = canaried(SLOW, ratio=3, itl_ratio=3)
    driver = _roll(new, vllm_slow=canary_counts(100, itl=0.02))
    assert driver.run() == "rest"
    reason = driver.state.held_reason
    assert "canary step 25% (1 of 4 replicas) failed" in reason
    assert "inter-token latency p95" in reason, reason
    assert "x the stable replicas' 0.001 s (itlP95Ratio 3)" in reason, reason
    assert set(serving(driver.state).values()) == {rollout.template_hash(canaried(GOOD))}
    absolute = canaried(SLOW, ratio=None, itl_seconds=0.01)
    driver = _roll(absolute, vllm_slow=canary_counts(100, itl=0.02))
    assert driver.run() == "rest"
    assert "above itlP95Seconds 0.01 s" in driver.state.held_reason
    # Within both (as quick as the stable replicas): the roll reaches every replica.
    quick = canaried(NEXT, ratio=None, itl_ratio=3, itl_seconds=0.01)
    driver = _roll(quick, vllm_2=canary_counts(100, itl=0.001))
    assert driver.run() == "rest"
    assert set(serving(driver.state).values()) == {rollout.template_hash(quick)}
    assert not driver.state.held


def test_too_few_requests_extends_the_window_then_waits_for_a_person() -> None:
    new = canaried(NEXT)
    driver = _roll(new, vllm_2=canary_counts(3))
    assert driver.run() == "rest"
    # Each analysis reads MAX_EXTENSIONS + 1 windows (the pass that follows the replaced
    # replica's teardown analyses again).
    reads = len([line for line in driver.log if line.startswith("figures")])
    assert reads > 0, driver.log
    assert reads % (MAX_EXTENSIONS + 1) == 0, driver.log
    state = driver.state
    assert state.summary.startswith(f"{INCONCLUSIVE} at step 25%"), state.summary
    assert "3 requests on the new replicas" in state.summary
    assert not state.held
    assert rollout.canary_in_progress(state) == ""
    assert len(_started(driver)) == 1  # nothing further rolled meanwhile
    # A person promotes: the rest rolls without analysis.
    driver.state = rollout.promoted_canary(driver.state, driver.now)
    assert driver.run() == "rest"
    assert set(serving(driver.state).values()) == {rollout.template_hash(new)}
    assert len(serving(driver.state)) == 4
    assert "no canary in progress" in rollout.canary_in_progress(driver.state)


def test_abort_rolls_back_now() -> None:
    new = canaried(NEXT)
    driver = _roll(new, vllm_2=canary_counts(3))
    assert driver.run() == "rest"
    driver.state = rollout.aborted_canary(driver.state, driver.now)
    assert "canary aborted by `rollout abort`" in driver.state.held_reason
    assert driver.run() == "rest"
    assert set(serving(driver.state).values()) == {rollout.template_hash(canaried(GOOD))}


def test_promote_and_abort_need_a_canary_roll_under_way() -> None:
    plain = spec(2)
    state = state_with(plain, status(plain, "a", "c0"))
    assert "has no canary strategy (spec.strategy.canary)" in rollout.canary_in_progress(state)
    settled = canaried(GOOD)
    state = state_with(settled, status(settled, "a", "c0"), last_good=settled)
    assert "no canary in progress" in rollout.canary_in_progress(state)


def test_a_step_of_every_replica_needs_no_analysis() -> None:
    # Two replicas, steps 50/100: one analysis; one replica: none (nothing stable to compare).
    new = canaried(NEXT, replicas=2, steps=[50, 100])
    driver = _roll(new, replicas=2, vllm_2=canary_counts(100))
    assert driver.run() == "rest"
    assert len([line for line in driver.log if line.startswith("figures")]) == 1
    single = canaried(NEXT, replicas=1, steps=[50, 100])
    driver = _roll(single, replicas=1, vllm_2=canary_counts(100))
    assert driver.run() == "rest"
    assert not any(line.startswith("baseline") for line in driver.log)
    assert set(serving(driver.state).values()) == {rollout.template_hash(single)}


# --- the arithmetic and the verdict ------------------------------------------------------


def test_p95_interpolates_inside_its_bucket_as_prometheus_does() -> None:
    buckets = {"0.01": 50.0, "0.1": 90.0, "1.0": 100.0, "+Inf": 100.0}
    # rank 95 lies in (0.1, 1.0], 5 of its 10 observations in: 0.1 + 0.9 * 0.5.
    assert quantile(0.95, buckets) == pytest.approx(0.55)
    assert quantile(0.5, buckets) == pytest.approx(0.01)
    assert quantile(0.95, {"0.1": 0.0, "+Inf": 0.0}) is None
    # In the +Inf bucket: the highest finite bound.
    assert quantile(0.95, {"0.1": 10.0, "+Inf": 100.0}) == pytest.approx(0.1)


def test_deltas_over_the_window_and_counter_resets() -> None:
    before = canary_counts(100, ttft=0.003)
    after = canary_counts(150, errors=10, ttft=0.003)
    d = delta(before, after)
    assert (d.requests, d.errors, d.ttft_buckets["+Inf"]) == (50, 10, 40)
    assert d.itl_buckets["+Inf"] == 7 * 40
    restarted = canary_counts(5)
    assert delta(before, restarted) == restarted
    # An inter-token histogram that went down is a restart too, whatever the other counters say.
    decoded = before.model_copy(update={"requests": 200, "itl_buckets": {"+Inf": 3.0}})
    assert delta(before, decoded) == decoded
    figures = window_figures({"a": before}, {"a": after, "b": after}, ["a"], ["b"])
    # b has no baseline: unread, left out.
    assert figures.unread == ["b"]
    assert figures.stable.replicas == 0
    assert figures.canary.requests == 50


def _figures(new: GroupFigures, stable: GroupFigures | None = None) -> WindowFigures:
    return WindowFigures(canary=new, stable=stable or GroupFigures())


def test_the_verdict() -> None:
    analysis = CanaryAnalysis(ttft_p95_ratio=2, max_error_percent=5, min_requests=20)
    good = GroupFigures(replicas=1, requests=100, errors=1, ttft_count=99, ttft_p95=0.01)
    stable = GroupFigures(replicas=1, requests=100, ttft_count=100, ttft_p95=0.008)
    assert canary.verdict(_figures(good, stable), analysis).outcome == "pass"
    slow = good.model_copy(update={"ttft_p95": 0.05})
    judged = canary.verdict(_figures(slow, stable), analysis)
    assert judged.outcome == "fail"
    assert "6.2x" in judged.reason
    few = good.model_copy(update={"requests": 10})
    assert canary.verdict(_figures(few, stable), analysis).outcome == "wait"
    # No stable observations: the ratio cannot be judged.
    assert canary.verdict(_figures(good), analysis).outcome == "wait"
    # Errors fail even when TTFT has too few observations (5xx have no first token).
    broken = GroupFigures(replicas=1, requests=100, errors=90, ttft_count=10, ttft_p95=0.01)
    assert canary.verdict(_figures(broken, stable), analysis).outcome == "fail"
    # Inter-token latency: judged like TTFT, on requests that had tokens after their first.
    decode = CanaryAnalysis(itl_p95_ratio=2, itl_p95_seconds=0.05, min_requests=20)
    fast = good.model_copy(update={"itl_count": 700, "itl_p95": 0.002})
    steady = stable.model_copy(update={"itl_count": 700, "itl_p95": 0.002})
    assert canary.verdict(_figures(fast, steady), decode).outcome == "pass"
    dragging = fast.model_copy(update={"itl_p95": 0.01})
    judged = canary.verdict(_figures(dragging, steady), decode)
    assert (judged.outcome, "5.0x" in judged.reason) == ("fail", True), judged.reason
    crawling = fast.model_copy(update={"itl_p95": 0.08})
    judged = canary.verdict(_figures(crawling, steady), decode)
    assert "inter-token latency p95 0.080 s is above itlP95Seconds 0.05 s" in judged.reason
    # No inter-token observations (one-token answers) on either side: nothing to judge yet.
    assert canary.verdict(_figures(good, steady), decode).outcome == "wait"
    waiting = canary.verdict(_figures(fast, stable), decode)
    assert waiting.outcome == "wait"
    assert "0 requests with inter-token latencies on the stable replicas" in waiting.reason
    # A slow decode fails the step even when TTFT lacks observations.
    both = CanaryAnalysis(ttft_p95_ratio=2, itl_p95_ratio=2, min_requests=20)
    unseen = dragging.model_copy(update={"ttft_count": 0, "ttft_p95": None})
    assert canary.verdict(_figures(unseen, steady), both).outcome == "fail"
    assert "ITL p95 0.010 s" in canary.figures_text(_figures(dragging, steady))
    assert canary.step_replicas(4, 25) == 1
    assert canary.step_replicas(3, 50) == 2
    assert canary.step_replicas(10, 5) == 1


@pytest.mark.parametrize(
    ("steps", "analysis", "message"),
    [
        ([50, 25, 100], {"ttftP95Ratio": 2}, "steps must increase"),
        ([25, 50], {"ttftP95Ratio": 2}, "the last step must be 100"),
        ([50, 100], {"windowSeconds": 30}, "set at least one of ttftP95Seconds"),
        ([50, 100], {"windowSeconds": 30}, "itlP95Seconds, itlP95Ratio"),
    ],
)
def test_a_bad_canary_is_refused_naming_the_field(
    steps: list[int], analysis: dict[str, object], message: str
) -> None:
    md = canaried(GOOD)
    wire = md.to_wire()
    wire["spec"]["strategy"]["canary"] = {"steps": steps, "analysis": analysis}
    errors = validate(ModelDeployment.model_validate(wire))
    assert any(message in e.reason for e in errors), errors
    assert all(e.path[:3] == ("spec", "strategy", "canary") for e in errors), errors


@pytest.mark.parametrize("threshold", ["itlP95Seconds", "itlP95Ratio"])
def test_an_inter_token_threshold_alone_is_enough(threshold: str) -> None:
    wire = canaried(GOOD).to_wire()
    wire["spec"]["strategy"]["canary"] = {"steps": [50, 100], "analysis": {threshold: 2}}
    assert validate(ModelDeployment.model_validate(wire)) == []

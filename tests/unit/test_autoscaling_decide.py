"""The autoscaling decision against the examples Kubernetes documents for the
HorizontalPodAutoscaler (algorithm details, missing metrics, behavior policies, stabilisation),
with replicas in the place of pods."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from modelfleet.api.autoscalers import ModelAutoscalerSpec
from modelfleet.autoscaler.behavior import record_scale
from modelfleet.autoscaler.decide import GATEWAY_METRIC, decide
from modelfleet.autoscaler.records import Decision, History, Observation
from modelfleet.contracts.autoscaler_payloads import ReplicaLoad

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WAITING = "vllm:num_requests_waiting"
CACHE = "vllm:gpu_cache_usage_perc"


def spec(
    *,
    minimum: int = 1,
    maximum: int = 10,
    target: float = 100,
    behavior: dict[str, Any] | None = None,
    extra_metrics: list[dict[str, Any]] | None = None,
) -> ModelAutoscalerSpec:
    return ModelAutoscalerSpec.model_validate(
        {
            "scaleTargetRef": {"name": "qwen"},
            "minReplicas": minimum,
            "maxReplicas": maximum,
            "metrics": [
                {"type": "Engine", "engine": {"name": WAITING, "target": {"averageValue": target}}},
                *(extra_metrics or []),
            ],
            "behavior": behavior or {},
        }
    )


NO_WINDOWS = {"scaleDown": {"stabilizationWindowSeconds": 0}}


def obs(
    current: int,
    values: list[float | None],
    *,
    unready: int = 0,
    at: datetime = T0,
    metric: str = WAITING,
    **kwargs: Any,
) -> Observation:
    replicas = [
        ReplicaLoad(name=f"r{i}", ready=True, values={} if v is None else {metric: v})
        for i, v in enumerate(values)
    ]
    replicas += [ReplicaLoad(name=f"u{i}", ready=False) for i in range(unready)]
    return Observation(at=at, current=current, replicas=replicas, **kwargs)


def once(s: ModelAutoscalerSpec, o: Observation) -> Decision:
    decision, _ = decide(s, o, History())
    return decision


class Driver:
    """Runs decisions over time the way the workflow does: scale, then record the scale."""

    def __init__(self, s: ModelAutoscalerSpec, current: int) -> None:
        self.spec = s
        self.current = current
        self.history = History()
        self.log: list[Decision] = []

    def tick(self, seconds: float, total: float) -> Decision:
        """One decision at ``seconds`` with ``total`` load spread evenly over the replicas."""
        at = T0 + timedelta(seconds=seconds)
        per_replica = total / self.current if self.current else 0.0
        o = obs(self.current, [per_replica] * self.current, at=at)
        decision, self.history = decide(self.spec, o, self.history)
        if decision.applied != self.current:
            self.history = record_scale(self.history, at, decision.applied - self.current)
            self.current = decision.applied
        self.log.append(decision)
        return decision


# --- the ratio formula and the tolerance ------------------------------------------------------


def test_double_the_target_doubles_the_replicas() -> None:
    # Documented: current 200m against a 100m target doubles the replicas (200/100 = 2.0).
    d = once(spec(), obs(3, [200, 200, 200]))
    assert (d.recommended, d.desired, d.applied) == (6, 6, 6)
    assert d.reason.startswith("scale 3 -> 6")


def test_half_the_target_halves_the_replicas() -> None:
    # Documented: 50m against 100m halves them (50/100 = 0.5).
    d = once(spec(behavior=NO_WINDOWS), obs(4, [50, 50, 50, 50]))
    assert (d.recommended, d.applied) == (2, 2)


def test_ceil_of_the_ratio() -> None:
    d = once(spec(), obs(3, [150, 150, 150]))  # 1.5 * 3 = 4.5 -> 5
    assert d.applied == 5


@pytest.mark.parametrize(
    ("value", "applied"),
    [(109, 4), (91, 4), (100, 4), (111, 5), (89, 4)],
)
def test_tolerance_of_ten_percent_skips_small_changes(value: float, applied: int) -> None:
    # 0.89 is outside the tolerance but ceil(0.89 * 4) = 4, so it still holds at 4.
    d = once(spec(behavior=NO_WINDOWS), obs(4, [value] * 4))
    assert d.applied == applied


def test_configured_tolerance_per_direction() -> None:
    s = spec(behavior={"scaleUp": {"tolerance": 0}, "scaleDown": {"tolerance": 0.5}})
    assert once(s, obs(4, [103] * 4)).applied == 5  # any excess scales up
    assert "within tolerance" in once(s, obs(4, [60] * 4)).metrics[0].note


def test_per_metric_maximum_wins() -> None:
    s = spec(
        extra_metrics=[
            {"type": "Engine", "engine": {"name": CACHE, "target": {"averageValue": 0.8}}}
        ]
    )
    o = Observation(
        at=T0,
        current=2,
        replicas=[
            ReplicaLoad(name="a", ready=True, values={WAITING: 100, CACHE: 0.96}),
            ReplicaLoad(name="b", ready=True, values={WAITING: 100, CACHE: 0.96}),
        ],
    )
    d = once(s, o)
    # waiting is on target (2); the cache at 0.96 / 0.8 = 1.2 asks for ceil(2.4) = 3.
    assert [r.proposal for r in d.metrics] == [2, 3]
    assert d.applied == 3
    assert CACHE in d.reason


# --- missing metrics and not-yet-ready replicas ------------------------------------------------


def test_missing_metric_counts_as_zero_on_scale_up() -> None:
    # Two replicas at 2x, one silent: (200 + 200 + 0) / 3 = 1.33 -> ceil(1.33 * 3) = 4.
    d = once(spec(), obs(3, [200, 200, None]))
    assert d.applied == 4
    assert "without metrics at 0" in d.metrics[0].note


def test_missing_metric_counts_as_target_on_scale_down() -> None:
    # Two replicas at half, one silent: (50 + 50 + 100) / 3 = 0.67 -> ceil(0.67 * 3) = 2.
    d = once(spec(behavior=NO_WINDOWS), obs(3, [50, 50, None]))
    assert d.applied == 2
    assert "without metrics at target" in d.metrics[0].note


def test_missing_metric_that_would_reverse_the_direction_holds() -> None:
    # One replica at 1.2x, three silent: counted at 0 the ratio drops to 0.3, a reversal.
    d = once(spec(), obs(4, [120, None, None, None]))
    assert d.applied == 4
    assert "no change" in d.metrics[0].note


def test_unready_replicas_count_as_zero_on_scale_up() -> None:
    # Two Ready at 3x plus two starting: (300 + 300 + 0 + 0) / 4 = 1.5 -> ceil(1.5 * 4) = 6.
    d = once(spec(), obs(4, [300, 300], unready=2))
    assert d.applied == 6
    assert "not Ready at 0" in d.metrics[0].note


def test_unready_replicas_are_ignored_on_scale_down() -> None:
    # Two Ready at half, two starting: the starting ones are left out, ceil(0.5 * 2) = 1.
    d = once(spec(behavior=NO_WINDOWS), obs(4, [50, 50], unready=2))
    assert d.applied == 1


def test_unready_replicas_that_bring_the_ratio_into_tolerance_hold() -> None:
    # One Ready at 1.5x, one starting: (150 + 0) / 2 = 0.75 reverses the direction: hold.
    d = once(spec(), obs(2, [150], unready=1))
    assert d.applied == 2


def test_no_metric_at_all_holds_with_a_reason() -> None:
    d = once(spec(), obs(3, [None, None, None]))
    assert d.applied == 3
    assert d.reason.startswith("FailedGetMetrics")


def test_a_broken_metric_never_lets_the_others_scale_down() -> None:
    s = spec(
        behavior=NO_WINDOWS,
        extra_metrics=[
            {
                "type": "Prometheus",
                "prometheus": {
                    "url": "http://prom:9090",
                    "query": "sum(x)",
                    "target": {"averageValue": 1},
                },
            }
        ],
    )
    down = once(s, obs(4, [10] * 4, totals={"promql:sum(x)": None}))
    assert down.applied == 4
    assert "would scale down on partial metrics" in down.reason
    up = once(s, obs(4, [300] * 4, totals={"promql:sum(x)": None}))
    assert up.applied == 8  # 3x on 4 replicas is 12, capped by the scale-up policies (+100%)


def test_prometheus_total_is_divided_by_the_target() -> None:
    s = spec(
        extra_metrics=[
            {
                "type": "Prometheus",
                "prometheus": {
                    "url": "http://prom:9090",
                    "query": "sum(x)",
                    "target": {"averageValue": 4},
                },
            }
        ]
    )
    d = once(s, obs(2, [100, 100], totals={"promql:sum(x)": 22}))
    assert d.metrics[1].proposal == 6  # ceil(22 / 4)
    assert d.applied == 6  # within the default max(+4, +100%) per 15 s


# --- min, max and zero ---------------------------------------------------------------------------


def test_never_above_max() -> None:
    d = once(spec(maximum=5), obs(4, [1000] * 4))
    assert (d.recommended, d.applied) == (40, 5)
    assert "TooManyReplicas" in d.reason


def test_never_below_min() -> None:
    d = once(spec(minimum=2, behavior=NO_WINDOWS), obs(4, [1] * 4))
    assert d.applied == 2
    assert "TooFewReplicas" in d.reason


def test_target_outside_the_bounds_is_brought_back() -> None:
    assert once(spec(maximum=3), obs(5, [100] * 5)).applied == 3
    assert once(spec(minimum=2), obs(1, [100])).applied == 2


def test_target_at_zero_with_a_positive_min_is_left_alone() -> None:
    d = once(spec(minimum=1), obs(0, [], waiting_at_gateway=50))
    assert d.applied == 0
    assert d.reason.startswith("ScalingDisabled")


def test_scale_from_zero_on_requests_waiting_at_the_gateway() -> None:
    s = spec(minimum=0)
    first = once(s, obs(0, [], waiting_at_gateway=3))
    assert first.applied == 1
    assert any(r.metric == GATEWAY_METRIC and r.proposal == 1 for r in first.metrics)
    idle = once(s, obs(0, [], waiting_at_gateway=0))
    assert idle.applied == 0
    unknown = once(s, obs(0, []))
    assert unknown.applied == 0
    assert "nothing asks for one" in unknown.reason


def test_scale_from_zero_says_so_and_where_the_requests_wait() -> None:
    s = spec(minimum=0)
    first = once(s, obs(0, [], waiting_at_gateway=2, gateway_note="gateway gw/ns on east"))
    assert first.applied == 1
    assert first.reason.startswith("scale 0 -> 1: gateway:requests_waiting asks for 1")
    assert "scale from zero: 2 request(s) waiting at gateway gw/ns on east" in first.reason
    idle = once(s, obs(0, [], waiting_at_gateway=0, gateway_note="gateway gw/ns on east"))
    assert idle.applied == 0
    assert "no request waiting at gateway gw/ns on east" in idle.reason


def test_scale_from_zero_unknown_gateway_holds_at_zero_and_says_why() -> None:
    s = spec(minimum=0)
    d = once(s, obs(0, [], gateway_note="no ModelService routes to this deployment"))
    assert d.applied == 0
    assert "nothing asks for one" in d.reason
    assert "gateway:requests_waiting: no ModelService routes to this deployment" in d.reason
    [reading] = [r for r in d.metrics if r.metric == GATEWAY_METRIC]
    assert reading.proposal is None
    # Not consulted once the target has replicas: engine load decides.
    busy = once(s, obs(2, [400, 400], waiting_at_gateway=50, gateway_note="x"))
    assert all(r.metric != GATEWAY_METRIC for r in busy.metrics)


def test_scale_from_zero_gets_one_replica_even_with_percent_only_policies() -> None:
    s = spec(
        minimum=0,
        behavior={
            "scaleUp": {"policies": [{"type": "Percent", "value": 100, "periodSeconds": 60}]}
        },
    )
    assert once(s, obs(0, [], waiting_at_gateway=1)).applied == 1


def test_no_load_at_min_zero_scales_to_zero_after_the_window() -> None:
    driver = Driver(spec(minimum=0), current=1)
    # A new autoscaler seeds its window with the current count, as HPA does.
    assert {driver.tick(t, 0).applied for t in range(0, 300, 15)} == {1}
    assert driver.tick(300, 0).applied == 0


# --- behavior: rate policies --------------------------------------------------------------------


def test_default_scale_up_is_the_larger_of_four_pods_or_double() -> None:
    # Documented default: double every 15 s or add 4 pods, whichever is more.
    driver = Driver(spec(maximum=10), current=1)
    assert driver.tick(0, 10**5).applied == 5  # max(1 + 4, 1 * 2)
    assert driver.tick(5, 10**5).applied == 5  # same period: the +4 is used up
    assert driver.tick(15, 10**5).applied == 10  # a new period from 5: max(9, 10), cap 10


def test_documented_scale_down_with_pods_and_percent_policies() -> None:
    # Documented: Pods 4 / 60 s and Percent 10 / 60 s, selectPolicy Max by default; from 80
    # replicas towards 10, the first step removes 8, the next from 72 removes 8 again (10% is
    # 7.2, rounded up), and below 40 replicas the Pods policy's 4 allows the larger change.
    s = spec(
        maximum=10,
        behavior={
            "scaleDown": {
                "stabilizationWindowSeconds": 0,
                "policies": [
                    {"type": "Pods", "value": 4, "periodSeconds": 60},
                    {"type": "Percent", "value": 10, "periodSeconds": 60},
                ],
            }
        },
    )
    s.max_replicas = 100  # the documented example runs past modelfleet's own bound of 10
    driver = Driver(s, current=80)
    steps = []
    for minute in range(30):
        steps.append(driver.tick(minute * 60, total=950).applied)  # load for 10 replicas
        if driver.current == 10:
            break
    assert steps[:3] == [72, 64, 57]
    assert steps[-1] == 10
    below_40 = [b - a for a, b in itertools.pairwise(steps) if a <= 40]
    assert below_40
    assert all(change == -4 for change in below_40[:-1])


def test_select_policy_min_removes_at_most_five_a_minute() -> None:
    # Documented: adding Pods 5 / 60 s to Percent 10 / 60 s with selectPolicy Min caps the
    # removal at 5 a minute even where 10% would be more.
    s = spec(
        behavior={
            "scaleDown": {
                "stabilizationWindowSeconds": 0,
                "selectPolicy": "Min",
                "policies": [
                    {"type": "Percent", "value": 10, "periodSeconds": 60},
                    {"type": "Pods", "value": 5, "periodSeconds": 60},
                ],
            }
        },
    )
    s.max_replicas = 100
    driver = Driver(s, current=100)
    assert driver.tick(0, 1).applied == 95  # 10% would be 10; Min picks 5
    assert driver.tick(30, 1).applied == 95  # the period's 5 are spent
    assert driver.tick(60, 1).applied == 90


def test_nine_hundred_percent_scales_tenfold_per_period() -> None:
    # Documented: Percent 900 lets 1 replica become 10, then 100, then 1000.
    s = spec(
        behavior={"scaleUp": {"policies": [{"type": "Percent", "value": 900, "periodSeconds": 60}]}}
    )
    s.max_replicas = 1000
    driver = Driver(s, current=1)
    assert [driver.tick(t, 10**9).applied for t in (0, 60, 120)] == [10, 100, 1000]


def test_disabled_scale_down_never_shrinks() -> None:
    driver = Driver(spec(behavior={"scaleDown": {"selectPolicy": "Disabled"}}), current=5)
    assert {driver.tick(t, 1).applied for t in range(0, 3600, 60)} == {5}


def test_disabled_scale_up_never_grows() -> None:
    driver = Driver(spec(behavior={"scaleUp": {"selectPolicy": "Disabled"}}), current=2)
    assert {driver.tick(t, 10**5).applied for t in range(0, 600, 15)} == {2}


# --- behavior: stabilisation --------------------------------------------------------------------


def test_scale_down_waits_for_the_window_and_uses_its_highest_recommendation() -> None:
    # Default 300 s scale-down window: load drops at t=0; the count holds until every
    # recommendation in the window is lower.
    driver = Driver(spec(), current=4)
    driver.tick(-15, 400)  # steady at 4
    held = [driver.tick(t, 100).applied for t in range(0, 285, 15)]
    assert set(held) == {4}
    assert driver.tick(300, 100).applied == 1
    assert "stabilisation" in driver.log[1].reason


def test_scale_up_window_uses_the_lowest_recommendation() -> None:
    s = spec(behavior={"scaleUp": {"stabilizationWindowSeconds": 60}})
    driver = Driver(s, current=2)
    driver.tick(0, 200)  # recommends 2
    assert driver.tick(15, 600).applied == 2  # 6 is asked, but 2 is within the window
    assert driver.tick(45, 600).applied == 2
    assert driver.tick(75, 600).applied == 6  # the window holds only 6s now


def test_flapping_load_does_not_flap_replicas() -> None:
    driver = Driver(spec(), current=2)
    for i in range(80):  # 20 minutes of load alternating every 15 s
        driver.tick(i * 15, 600 if i % 2 == 0 else 40)
    changes = [d for d in driver.log if d.applied != d.current]
    # It grows on the first peak and then holds: the scale-down window always sees a peak.
    assert [(d.current, d.applied) for d in changes] == [(2, 6)]


def test_history_stays_bounded() -> None:
    driver = Driver(spec(), current=3)
    for i in range(1000):
        driver.tick(i * 15, 300)
    # 300 s window / 15 s interval, plus the one just taken.
    assert len(driver.history.recommendations) <= 21
    assert len(driver.history.events) <= 2


def test_decision_records_inputs_and_reason() -> None:
    d = once(spec(), obs(2, [400, 400]))
    dumped = d.model_dump(mode="json", by_alias=True)
    assert dumped["current"] == 2
    assert dumped["ready"] == 2
    assert dumped["metrics"][0]["metric"] == WAITING
    assert dumped["metrics"][0]["value"] == 400
    assert dumped["recommended"] == 8
    assert dumped["applied"] == 6  # max(2 + 4, 2 * 2) in one period
    assert "ScaleUpLimit" in dumped["reason"]


def test_a_fleet_shortfall_stops_further_scale_up_but_not_scale_down() -> None:
    short = once(spec(), obs(4, [400, 400], unready=0, scheduled=2))
    assert short.recommended == 8
    assert short.applied == 4
    assert "FleetShortfall: only 2 of 4" in short.reason
    down = once(spec(behavior=NO_WINDOWS), obs(4, [10, 10], scheduled=2))
    assert down.applied == 1
    assert "FleetShortfall: only 2 of 4 replicas are placed" in down.reason


def test_a_fleet_shortfall_is_reported_while_the_rate_policy_holds_the_count() -> None:
    driver = Driver(spec(), current=1)
    assert driver.tick(0, 10**5).applied == 5  # max(1 + 4, 1 * 2)
    # Next decision, inside the scale-up period: the policy holds 5, and only 3 are placed.
    o = obs(5, [10**5] * 3, at=T0 + timedelta(seconds=5), scheduled=3)
    held, _ = decide(driver.spec, o, driver.history)
    assert held.applied == 5
    assert "ScaleUpLimit" in held.reason
    assert held.reason.endswith("FleetShortfall: only 3 of 5 replicas are placed")


def test_decision_keeps_why_each_replica_could_not_be_read() -> None:
    o = obs(3, [200, 200])
    o.replicas.append(ReplicaLoad(name="r2", ready=True, error="GET x: HTTP 503 " + "y" * 500))
    d = once(spec(), o)
    assert d.applied == 4  # the silent replica counts as 0 on a scale-up
    assert list(d.errors) == ["r2"]
    assert d.errors["r2"].startswith("GET x: HTTP 503")
    assert len(d.errors["r2"]) == 200


def test_records_from_a_newer_worker_are_read_with_unknown_fields_ignored() -> None:
    d = once(spec(), obs(2, [400, 400]))
    wire = d.model_dump(mode="json", by_alias=True)
    wire["addedLater"] = {"x": 1}
    wire["metrics"][0]["alsoNew"] = True
    assert Decision.model_validate(wire) == d

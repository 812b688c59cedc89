"""The simulated gateway's BackendTrafficPolicy decisions (passive health check as Envoy's
outlier detection, retries), and that they read the front door modelfleet renders the way Envoy
Gateway would: pure functions and a detector on an explicit clock."""

from __future__ import annotations

from typing import Any

import pytest

from modelfleet.api.services import OutlierDetection, ServiceRetries
from modelfleet.rendering.front_door import FrontDoor, render_front_door, traffic_policy
from modelfleet.sim.serving.traffic_policy import (
    MAX_EJECTION_SECONDS,
    HostOutcome,
    OutlierDetector,
    PassiveHealthCheck,
    RetryPolicy,
    TrafficPolicy,
    parse_duration,
    policy_for,
)

FAIL = HostOutcome(500)
OK = HostOutcome(200)
REFUSED = HostOutcome(None)


def _detector(**kw: Any) -> OutlierDetector:
    check = PassiveHealthCheck(
        **{
            "consecutive_5xx": 3,
            "interval": 1.0,
            "base_ejection_time": 10.0,
            "max_ejection_percent": 50,
            **kw,
        }
    )
    detector = OutlierDetector(check, started=0.0)
    detector.sync(["a", "b"], 0.0)
    return detector


def _fail(detector: OutlierDetector, host: str, times: int, now: float) -> bool:
    return any([detector.record(host, FAIL, now) for _ in range(times)])


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30.0), ("1m30s", 90.0), ("250ms", 0.25), ("1h", 3600.0), ("2.5s", 2.5)],
)
def test_durations_read_like_gateway_api_durations(text: str, seconds: float) -> None:
    assert parse_duration(text, 7.0) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "10", "s", "10 s", "1d", None, 10])
def test_an_unreadable_duration_keeps_the_default(bad: Any) -> None:
    assert parse_duration(bad, 7.0) == 7.0


def test_consecutive_5xx_eject_and_a_success_ends_the_run() -> None:
    detector = _detector()
    assert not _fail(detector, "a", 2, 0.1)
    assert not detector.record("a", OK, 0.2)  # the run ends: two more 5xx do not eject
    assert not _fail(detector, "a", 2, 0.3)
    assert detector.record("a", FAIL, 0.4)  # the third in a row does
    assert detector.ejected("a", 0.5)
    assert detector.available(["a", "b"], 0.5) == ["b"]
    assert detector.ejections_enforced_total == 1


def test_connection_failures_count_as_5xx_unless_split() -> None:
    joined = _detector()
    assert not joined.record("a", REFUSED, 0.1)
    assert not joined.record("a", FAIL, 0.2)
    assert joined.record("a", REFUSED, 0.3)
    split = _detector(split_external_local_origin_errors=True, consecutive_local_origin_failures=2)
    assert not split.record("a", REFUSED, 0.1)
    assert not split.record("a", FAIL, 0.2)  # an answer means the connection worked ...
    assert not split.record("a", REFUSED, 0.3)  # ... so this local run starts afresh
    assert split.record("a", REFUSED, 0.4)  # and trips its own threshold at two


def test_max_ejection_percent_keeps_the_last_half_in() -> None:
    detector = _detector()
    assert _fail(detector, "a", 3, 1.0)
    # "b" fails too, but one of two hosts (50 %) is already out: the ejection overflows.
    assert not _fail(detector, "b", 3, 1.1)
    assert detector.available(["a", "b"], 1.2) == ["b"]
    assert detector.ejections_overflow == 1
    off = _detector(max_ejection_percent=0)
    assert not _fail(off, "a", 3, 1.0)


def test_an_ejection_ends_on_an_interval_tick_and_grows_with_each_ejection() -> None:
    detector = _detector()
    assert _fail(detector, "a", 3, 2.5)
    assert detector.ejected("a", 12.4)  # 10 s from 2.5 s: back on the tick at 13 s
    assert detector.ejected("a", 12.99)
    assert not detector.ejected("a", 13.0)
    assert _fail(detector, "a", 3, 13.2)  # still broken: ejected again, for twice as long
    assert detector.ejected("a", 33.1)
    assert not detector.ejected("a", 34.0)
    assert _fail(detector, "a", 3, 34.1)  # three times as long
    assert detector.ejected("a", 64.0)
    assert not detector.ejected("a", 65.0)


def test_the_multiplier_decays_while_the_host_serves_and_is_capped() -> None:
    detector = _detector()
    assert _fail(detector, "a", 3, 0.5)
    assert not detector.ejected("a", 11.0)
    assert _fail(detector, "a", 3, 11.5)  # multiplier 2
    assert not detector.ejected("a", 32.0)
    # Five healthy ticks later the multiplier has decayed from 2 to 0: the next ejection
    # lasts the base time again.
    assert _fail(detector, "a", 3, 37.5)
    assert detector.ejected("a", 47.0)
    assert not detector.ejected("a", 48.0)
    capped = _detector(base_ejection_time=200.0)
    now = 0.0
    lasted = []
    for _ in range(4):
        assert _fail(capped, "a", 3, now)
        start = now
        while capped.ejected("a", now):
            now += 1.0
        lasted.append(now - start)
    # 200 s, then 300 s (Envoy's cap) however often it is ejected again.
    assert lasted == [200.0, MAX_EJECTION_SECONDS, MAX_EJECTION_SECONDS, MAX_EJECTION_SECONDS]


def test_a_host_that_leaves_the_route_takes_its_state() -> None:
    detector = _detector()
    assert _fail(detector, "a", 3, 0.5)
    detector.sync(["b"], 1.0)
    detector.sync(["a", "b"], 1.5)
    assert not detector.ejected("a", 1.6)


def test_retry_triggers_and_status_codes() -> None:
    default = RetryPolicy()
    assert default.retries_status(503)
    assert not default.retries_status(500)
    assert default.retries_failure()
    codes = RetryPolicy.parse(
        {
            "numRetries": 1,
            "retryOn": {"triggers": ["retriable-status-codes"], "httpStatusCodes": [500]},
        }
    )
    assert codes.num_retries == 1
    assert codes.retries_status(500)
    assert not codes.retries_status(503)
    assert not codes.retries_failure()
    gateway = RetryPolicy.parse({"retryOn": {"triggers": ["gateway-error"]}})
    assert gateway.retries_status(502)
    assert not gateway.retries_status(500)
    assert RetryPolicy.parse({"retryOn": {"triggers": ["5xx"]}}).retries_status(500)


def test_retry_back_off_is_fully_jittered_and_capped() -> None:
    retry = RetryPolicy.parse({"perRetry": {"backOff": {"baseInterval": "100ms"}}})
    assert retry.backoff(1, 0.0) == 0.0
    assert retry.backoff(1, 0.999) < 0.1
    assert retry.backoff(3, 0.5) == pytest.approx(0.2)
    assert retry.backoff(20, 0.999) < 1.0  # capped at ten times the base


def _policy(name: str, ns: str, kind: str, target: str, ts: str, n: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": ts},
        "spec": {
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": kind, "name": target}],
            "healthCheck": {"passive": {"consecutive5XxErrors": n}},
        },
    }


def test_the_route_policy_beats_the_gateway_policy_and_the_oldest_wins() -> None:
    on_gateway = _policy("g", "sys", "Gateway", "gw", "t1", 7)
    on_route_new = _policy("r2", "ml", "HTTPRoute", "svc", "t3", 9)
    on_route_old = _policy("r1", "ml", "HTTPRoute", "svc", "t2", 4)
    elsewhere = _policy("x", "other", "HTTPRoute", "svc", "t0", 1)
    policies = [on_gateway, on_route_new, on_route_old, elsewhere]
    chosen = policy_for(policies, ("ml", "svc"), ("sys", "gw"))
    assert chosen.passive is not None
    assert chosen.passive.consecutive_5xx == 4
    fallback = policy_for(policies, ("ml", "other-route"), ("sys", "gw"))
    assert fallback.passive is not None
    assert fallback.passive.consecutive_5xx == 7
    assert policy_for([elsewhere], ("ml", "svc"), ("sys", "gw")) == TrafficPolicy()


def test_the_rendered_front_door_policy_reads_as_the_service_spec_says() -> None:
    objects = render_front_door(
        FrontDoor(cluster="c", gateway_name="gw", gateway_namespace="sys"), "ml", "svc", {}, []
    )
    route = next(o for o in objects if o["kind"] == "HTTPRoute")
    policies = [o for o in objects if o["kind"] == "BackendTrafficPolicy"]
    namespace = route["metadata"]["namespace"]
    read = policy_for(policies, (namespace, route["metadata"]["name"]), ("sys", "gw"))
    assert read.passive == PassiveHealthCheck(
        consecutive_5xx=3,
        consecutive_gateway_errors=0,
        interval=1.0,
        base_ejection_time=10.0,
        max_ejection_percent=50,
    )
    assert read.retry is not None
    assert read.retry.num_retries == 2
    assert read.retry.status_codes == {500, 502, 503, 504}
    assert read.retry.retries_failure()
    assert read.retry.base_interval == pytest.approx(0.025)


def test_tuned_and_switched_off_policies_render_as_asked() -> None:
    tuned = traffic_policy(
        "mf-ml",
        "svc",
        OutlierDetection(consecutive_errors=5, base_ejection_seconds=30, max_ejection_percent=34),
        ServiceRetries(attempts=0),
    )
    assert tuned["spec"]["targetRefs"][0]["kind"] == "HTTPRoute"
    assert "retry" not in tuned["spec"]
    read = TrafficPolicy.parse(tuned["spec"])
    assert read.passive is not None
    assert (read.passive.consecutive_5xx, read.passive.base_ejection_time) == (5, 30.0)
    assert read.passive.max_ejection_percent == 34
    assert read.retry is None

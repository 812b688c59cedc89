"""How reports change the Fleet's cluster records (``fleet.records``): when a NotReady grace
starts, where a cache stands, and which clusters keep a class in use."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from modelfleet.api.clusters import InferenceCluster
from modelfleet.contracts.cache_payloads import CacheReport
from modelfleet.contracts.fleet_payloads import ClusterReport
from modelfleet.contracts.status import ClusterRecord
from modelfleet.fleet.records import class_users, take_cache_report, take_report

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def record(name: str, class_name: str = "h100", *, ready: bool = False) -> ClusterRecord:
    spec = InferenceCluster.model_validate(
        {
            "kind": "InferenceCluster",
            "metadata": {"name": name},
            "spec": {
                "cluster": {"source": "Existing"},
                "nodePools": [{"name": "big", "className": class_name, "nodeCount": 1}],
            },
        }
    )
    return ClusterRecord(spec=spec, ready=ready)


def test_a_ready_report_clears_the_grace_and_starts_none() -> None:
    r = record("east")
    r.not_ready_since = T0
    grace = take_report(r, ClusterReport(name="east", ready=True, gateway_address="10.0.0.9"), T0)
    assert grace is None
    assert (r.ready, r.not_ready_since, r.gateway_address) == (True, None, "10.0.0.9")


def test_leaving_ready_starts_the_grace_from_the_first_failed_probe() -> None:
    r = record("east", ready=True)
    silent = T0 - timedelta(seconds=40)
    report = ClusterReport(
        name="east", ready=False, reason="probe failed", unreachable_since=silent
    )
    assert take_report(r, report, T0) == silent
    assert (r.ready, r.reason, r.not_ready_since) == (False, "probe failed", silent)


def test_staying_not_ready_keeps_the_grace_already_running() -> None:
    r = record("east")
    r.not_ready_since = T0
    later = T0 + timedelta(minutes=1)
    assert take_report(r, ClusterReport(name="east", ready=False), later) is None
    assert r.not_ready_since == T0


def test_a_cache_report_changes_only_the_clusters_where_it_moved() -> None:
    records = {"east": record("east"), "west": record("west"), "north": record("north")}
    records["west"].caches["ml/llama"] = "Ready"
    records["north"].caches["ml/llama"] = "Hydrating 40%"
    report = CacheReport(namespace="ml", name="llama", clusters={"east": "Ready", "west": "Ready"})
    assert take_cache_report(records, report) == ["east", "north"]
    assert records["east"].caches == {"ml/llama": "Ready"}
    assert records["north"].caches == {}  # left out of the report: no longer staged there


def test_class_users_are_the_clusters_with_a_pool_of_that_class() -> None:
    records = [record("west", "h100"), record("east", "h100"), record("north", "l4")]
    assert class_users(records, "h100") == ["east", "west"]
    assert class_users(records, "a100") == []

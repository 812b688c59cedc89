"""The per-cluster replica watch's pure parts: what a scan observes of each watched replica
(``adapters.kube_scan``) and how the cluster judges it over time (``rollout.cluster_watch``)."""

from __future__ import annotations

from typing import Any

from modelfleet.adapters.kube_scan import changed_scans, index_objects, kinds_of, observe
from modelfleet.contracts.kube_payloads import ObjectRef
from modelfleet.contracts.watch_payloads import NewsKind, ReplicaScan, WatchedReplica
from modelfleet.rendering.readiness import ReadinessRole, ReadinessRule
from modelfleet.rollout.cluster_watch import judge, registered

NS = "mf-ml"
DEPLOY = ObjectRef(api_version="apps/v1", kind="Deployment", namespace=NS, name="m-a-vllm")
POOL = ObjectRef(
    api_version="inference.networking.k8s.io/v1", kind="InferencePool", namespace=NS, name="m-a"
)
RULE = ReadinessRule(
    api_version="apps/v1",
    kind="Deployment",
    namespace=NS,
    name="m-a-vllm",
    role=ReadinessRole.WORKLOAD,
)


def watched(**update: Any) -> WatchedReplica:
    entry = WatchedReplica(
        key="ml/m-a", workflow_id="replica/ml/m-a", refs=[DEPLOY, POOL], rules=[RULE]
    )
    return entry.model_copy(update=update)


def deployment(generation: int = 1, available: str = "True", **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "m-a-vllm", "namespace": NS, "generation": generation, **meta},
        "status": {
            "observedGeneration": generation,
            "conditions": [{"type": "Available", "status": available, "reason": "Why"}],
        },
    }


def pool(generation: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": "m-a", "namespace": NS, "generation": generation}}


def objects(*deploys: dict[str, Any], pools: tuple[dict[str, Any], ...] = ()) -> Any:
    out = index_objects("apps/v1", "Deployment", deploys)
    out.update(index_objects("inference.networking.k8s.io/v1", "InferencePool", pools))
    return out


def test_kinds_to_list_are_those_applied_or_judged_once_each() -> None:
    assert kinds_of([watched(), watched(key="ml/m-b")]) == [
        ("apps/v1", "Deployment"),
        ("inference.networking.k8s.io/v1", "InferencePool"),
    ]


def test_a_healthy_replica_is_ready_and_its_first_scan_takes_the_generation_baseline() -> None:
    scan = observe(watched(), objects(deployment(generation=4), pools=(pool(2),)))
    assert scan.ready
    assert not scan.missing
    assert not scan.drifted
    assert scan.generations == [4, 2]


def test_missing_and_terminating_objects_are_named() -> None:
    gone = observe(watched(), objects(deployment()))
    assert gone.missing == [str(POOL)]
    terminating = deployment(deletionTimestamp="2026-01-01T00:00:00Z")
    both = observe(watched(), objects(terminating, pools=(pool(),)))
    assert both.missing == [str(DEPLOY)]


def test_a_generation_that_moved_since_the_baseline_is_drift() -> None:
    entry = watched(generations=[1, 1])
    scan = observe(entry, objects(deployment(generation=2), pools=(pool(1),)))
    assert scan.drifted == [str(DEPLOY)]
    assert scan.generations == [1, 1]  # the baseline stands until the replica registers again


def test_readiness_is_the_rule_of_rendering_readiness() -> None:
    not_yet = observe(watched(), objects(deployment(available="False"), pools=(pool(),)))
    assert not not_yet.ready
    assert not_yet.reported
    assert "not Available" in not_yet.reason
    stale = deployment()
    stale["status"]["observedGeneration"] = 0
    behind = observe(watched(), objects(stale, pools=(pool(),)))
    assert not behind.ready
    assert not behind.reported


def test_only_changed_or_unhealthy_replicas_come_back() -> None:
    live = objects(deployment(), pools=(pool(),))
    first = observe(watched(), live)
    settled = watched(digest=first.digest, generations=first.generations)
    assert changed_scans([settled], live) == []
    # Unchanged but not healthy: told every scan, so failed scans can be counted.
    broken = objects(deployment(available="False"), pools=(pool(),))
    sick = observe(settled, broken)
    again = settled.model_copy(update={"digest": sick.digest})
    assert [s.key for s in changed_scans([again], broken)] == ["ml/m-a"]
    # Not baselined yet: always reported.
    assert len(changed_scans([watched(digest=first.digest)], live)) == 1


def scan(**fields: Any) -> ReplicaScan:
    return ReplicaScan.model_validate(
        {"key": "ml/m-a", "ready": True, "digest": "d", "generations": [1, 1], **fields}
    )


def test_a_healthy_replica_that_stays_healthy_hears_nothing() -> None:
    kept, news = judge(watched(), scan())
    assert news is None
    assert kept.generations == [1, 1]
    assert kept.digest == "d"


def test_unhealthy_only_after_threshold_consecutive_failed_scans() -> None:
    entry = watched(threshold=3)
    for count in (1, 2):
        entry, news = judge(entry, scan(ready=False, reason="not Available", digest="x"))
        assert news is None
        assert entry.failed_scans == count
    entry, news = judge(entry, scan(ready=False, reason="not Available", digest="x"))
    assert news is not None
    assert news.kind is NewsKind.UNHEALTHY
    assert news.reason == "not Available"
    assert not entry.healthy
    # Told once; a different reason is news again.
    entry, news = judge(entry, scan(ready=False, reason="not Available", digest="x"))
    assert news is None
    _, news = judge(entry, scan(ready=False, reason="pods crash", digest="y"))
    assert news is not None
    assert news.reason == "pods crash"


def test_a_success_resets_the_count() -> None:
    entry, _ = judge(watched(threshold=2), scan(ready=False, reason="no", digest="x"))
    entry, news = judge(entry, scan())
    assert news is None
    assert entry.failed_scans == 0
    entry, news = judge(entry, scan(ready=False, reason="no", digest="x"))
    assert news is None


def test_the_cluster_reporting_the_condition_false_is_unhealthy_at_once() -> None:
    _, news = judge(watched(), scan(ready=False, reported=True, reason="False", digest="x"))
    assert news is not None
    assert news.kind is NewsKind.UNHEALTHY


def test_a_degraded_replica_is_told_when_it_is_healthy_again() -> None:
    kept, news = judge(watched(healthy=False), scan())
    assert news is not None
    assert news.kind is NewsKind.HEALTHY
    assert kept.healthy


def test_missing_or_edited_objects_ask_for_a_repair_once_per_finding() -> None:
    entry, news = judge(watched(), scan(missing=[str(POOL)], digest="m"))
    assert news is not None
    assert news.kind is NewsKind.REPAIR
    assert str(POOL) in news.reason
    entry, news = judge(entry, scan(missing=[str(POOL)], digest="m"))
    assert news is None
    _, news = judge(entry, scan(drifted=[str(DEPLOY)], digest="e"))
    assert news is not None
    assert "edited outside modelfleet" in news.reason


def test_a_registration_starts_afresh_whatever_the_sender_set() -> None:
    entry = registered(watched(generations=[3, 3], digest="d", failed_scans=2))
    assert (entry.generations, entry.digest, entry.failed_scans) == ([], "", 0)

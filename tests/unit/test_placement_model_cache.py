"""Placement of a deployment that references a ModelCache: new replicas go only to clusters where
the Fleet was told the cache is Ready, every other cluster says why (the cache's state there),
replicas already placed stay, and an offline plan (caches unknown) is not restricted."""

from __future__ import annotations

from dataclasses import replace

from placement_builders import deployment, existing
from test_placement_fleet import CLASSES, observed

from modelfleet.api.deployments import ModelDeployment
from modelfleet.scheduling.fleet_placement import ObservedCluster, live_snapshot, place_in_fleet
from modelfleet.scheduling.placement import place
from modelfleet.scheduling.snapshot import snapshot_from_manifests


def _cached(dep: ModelDeployment, cache: str = "weights") -> ModelDeployment:
    doc = dep.to_wire()
    doc["spec"]["template"]["spec"]["modelCacheRef"] = {"name": cache}
    return ModelDeployment.model_validate(doc)


def _with_caches(cluster: ObservedCluster, **caches: str) -> ObservedCluster:
    return replace(cluster, caches={f"ml-team/{k}": v for k, v in caches.items()})


def test_new_replicas_go_only_where_the_cache_is_ready_and_the_others_say_why() -> None:
    dep = _cached(deployment(replicas=3))
    fleet = {
        "a": _with_caches(observed("a"), weights="Hydrating 40%"),
        "b": _with_caches(observed("b"), weights="Ready"),
        "c": observed("c"),  # the cache's selector leaves c out: nothing reported there
        "d": _with_caches(observed("d"), weights="Failed: attempt 1 failed: 401"),
    }
    placement = place_in_fleet(dep, desired=3, classes=CLASSES, clusters=fleet, replicas=[])
    assert sorted(r.spec.cluster_name for r in placement.placed) == ["b", "b"]
    assert placement.rejections["a"] == (
        "model cache weights not ready on this cluster (Hydrating 40%)"
    )
    assert placement.rejections["c"].startswith("model cache weights not staged on this cluster")
    assert "(Failed: attempt 1 failed: 401)" in placement.rejections["d"]
    assert "model cache weights not ready on this cluster (Hydrating 40%)" in placement.summary
    # The placed replicas carry the reference, so they mount and wait for the cache.
    assert all(r.spec.model_cache_ref is not None for r in placement.placed)


def test_another_caches_readiness_or_namespace_does_not_count() -> None:
    dep = _cached(deployment(replicas=1))
    fleet = {
        "a": replace(
            observed("a"), caches={"ml-team/other": "Ready", "other-team/weights": "Ready"}
        ),
    }
    placement = place_in_fleet(dep, desired=1, classes=CLASSES, clusters=fleet, replicas=[])
    assert placement.placed == []
    assert placement.rejections["a"].startswith("model cache weights not staged")


def test_a_deployment_without_a_cache_ignores_cache_facts() -> None:
    dep = deployment(replicas=1)
    fleet = {"a": _with_caches(observed("a"), weights="Hydrating 10%")}
    placement = place_in_fleet(dep, desired=1, classes=CLASSES, clusters=fleet, replicas=[])
    assert [r.spec.cluster_name for r in placement.placed] == ["a"]


def test_replicas_already_placed_stay_while_the_cache_rehydrates() -> None:
    dep = _cached(deployment(replicas=1))
    fleet = {"a": _with_caches(observed("a"), weights="Hydrating 5%")}
    placement = place_in_fleet(
        dep, desired=1, classes=CLASSES, clusters=fleet, replicas=[existing(dep, "a", 0)]
    )
    assert [r.spec.cluster_name for r in placement.kept] == ["a"]
    assert placement.victims == []


def test_the_live_snapshot_carries_cache_facts_and_an_offline_one_does_not() -> None:
    live = live_snapshot(CLASSES, {"a": _with_caches(observed("a"), weights="Ready")})
    assert live.clusters[0].caches == {"ml-team/weights": "Ready"}
    offline = snapshot_from_manifests(list(CLASSES.values()), [observed("a").spec])
    assert offline.clusters[0].caches is None
    # An offline plan cannot know where a cache is staged, so it does not restrict placement.
    planned = place(_cached(deployment(replicas=1)), offline, [])
    assert [r.spec.cluster_name for r in planned.placed] == ["a"]

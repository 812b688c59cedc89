"""The orphan decision after a dark spell: only replicas the ledger does not hold on the cluster."""

from __future__ import annotations

from modelfleet.cluster.orphans import REPLICA_KINDS, orphaned


def test_replicas_the_ledger_holds_are_kept_and_the_others_are_orphans() -> None:
    found = [("ns", "m-1"), ("ns", "m-2"), ("other", "m-1")]
    assert orphaned(found, ["ns/m-1"]) == [("ns", "m-2"), ("other", "m-1")]


def test_a_replica_of_the_same_name_in_another_namespace_is_not_confused() -> None:
    assert orphaned([("a", "m-1")], ["b/m-1"]) == [("a", "m-1")]
    assert orphaned([("a", "m-1")], ["a/m-1", "b/m-1"]) == []


def test_nothing_found_or_everything_held_deletes_nothing() -> None:
    assert orphaned([], ["ns/m-1"]) == []
    assert orphaned([("ns", "m-1"), ("ns", "m-2")], ["ns/m-2", "ns/m-1", "ns/m-3"]) == []


def test_an_empty_ledger_orphans_every_replica_found_once_and_sorted() -> None:
    found = [("ns", "m-2"), ("ns", "m-1"), ("ns", "m-2")]
    assert orphaned(found, []) == [("ns", "m-1"), ("ns", "m-2")]


def test_the_swept_kinds_cover_a_replicas_workloads_routing_claims_and_pods() -> None:
    kinds = {kind for _, kind in REPLICA_KINDS}
    expected = {"Deployment", "LeaderWorkerSet", "InferencePool", "HTTPRoute", "Pod", "Service"}
    assert expected | {"ResourceClaimTemplate"} <= kinds
    assert "Namespace" not in kinds  # shared by every replica of a namespace: never swept

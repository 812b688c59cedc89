"""The per-cluster replica watch's pure parts: what a scan observes of each watched replica
(``adapters.kube_scan``) and how the cluster judges it over time (``cluster.watch_decide``)."""

from __future__ import annotations

from typing import Any

from modelfleet.adapters.kube_scan import Listed, by_replica, changed_scans, observe
from modelfleet.api.naming import LABEL_NAMESPACE, LABEL_REPLICA
from modelfleet.cluster.watch_decide import judge, registered
from modelfleet.contracts.watch_payloads import NewsKind, ReplicaScan, WatchedReplica

NS = "mf-ml"
LABELS = {LABEL_NAMESPACE: "ml", LABEL_REPLICA: "m-a"}


def watched(**update: Any) -> WatchedReplica:
    entry = WatchedReplica(key="ml/m-a", workflow_id="replica/ml/m-a", objects=3, acknowledged=True)
    return entry.model_copy(update=update)


def meta(name: str, generation: int | None = 1, **more: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "namespace": NS, "labels": dict(LABELS), **more}
    if generation is not None:
        out["generation"] = generation
    return out


def deployment(
    name: str = "m-a-vllm", generation: int = 1, available: str = "True", **more: Any
) -> Listed:
    obj = {
        "metadata": meta(name, generation, **more),
        "status": {
            "observedGeneration": generation,
            "conditions": [{"type": "Available", "status": available, "reason": "Why"}],
        },
    }
    return ("apps/v1", "Deployment", obj)


def pool(generation: int = 1) -> Listed:
    return (
        "inference.networking.k8s.io/v1",
        "InferencePool",
        {"metadata": meta("m-a", generation)},
    )


def config() -> Listed:
    return ("v1", "ConfigMap", {"metadata": meta("m-a-epp", None)})


def healthy() -> list[Listed]:
    return [deployment(), pool(), config()]


def test_objects_are_grouped_by_their_replica_labels() -> None:
    other = ("v1", "ConfigMap", {"metadata": {"name": "x", "labels": {LABEL_REPLICA: "b"}}})
    grouped = by_replica([*healthy(), other])
    assert list(grouped) == ["ml/m-a"]
    assert len(grouped["ml/m-a"]) == 3


def test_a_healthy_replica_is_ready_and_its_first_complete_scan_takes_the_baseline() -> None:
    scan = observe(watched(), healthy())
    assert scan.ready
    assert (scan.missing, scan.changed) == (0, False)
    assert scan.baseline
    # Incomplete: no baseline (what is missing would be baked in), and the count says so.
    partial = observe(watched(), [deployment(), config()])
    assert (partial.missing, partial.baseline) == (1, "")


def test_terminating_objects_count_as_missing() -> None:
    gone = deployment(deletionTimestamp="2026-01-01T00:00:00Z")
    scan = observe(watched(), [gone, pool(), config()])
    assert scan.missing == 1
    assert not scan.ready  # its only workload is going


def test_an_edited_spec_or_a_re_created_object_differs_from_the_baseline() -> None:
    baseline = observe(watched(), healthy()).baseline
    entry = watched(baseline=baseline)
    assert not observe(entry, healthy()).changed
    edited = observe(entry, [deployment(generation=2), pool(), config()])
    assert edited.changed
    assert edited.baseline == baseline  # the baseline stands until the replica registers again
    renamed = observe(
        entry, [deployment(), pool(), ("v1", "ConfigMap", {"metadata": meta("x", None)})]
    )
    assert renamed.changed


def owned(manager: str, labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    """A managedFields entry: ``manager`` owns these label and annotation keys."""
    fields: dict[str, Any] = {}
    if labels:
        fields["f:labels"] = {".": {}, **{f"f:{k}": {} for k in labels}}
    if annotations:
        fields["f:annotations"] = {".": {}, **{f"f:{k}": {} for k in annotations}}
    return {"manager": manager, "operation": "Apply", "fieldsV1": {"f:metadata": fields}}


def labelled(
    ours: dict[str, str], theirs: dict[str, str], annotations: dict[str, str] | None = None
) -> Listed:
    """The replica's Deployment with labels modelfleet applied and labels another writer owns
    (and controller annotations, owned by the controller manager)."""
    api_version, kind, obj = deployment()
    m = obj["metadata"]
    m["labels"] = {**LABELS, **ours, **theirs}
    m["annotations"] = {"modelfleet.dev/spec": "abc", **(annotations or {})}
    m["managedFields"] = [
        owned("modelfleet", {**LABELS, **ours}, {"modelfleet.dev/spec": "abc"}),
        owned("kubectl-label", theirs, {}),
        owned("kube-controller-manager", {}, annotations or {}),
    ]
    return (api_version, kind, obj)


def test_labels_and_annotations_modelfleet_owns_are_part_of_the_baseline() -> None:
    before = [labelled({"app": "m"}, {}), pool(), config()]
    entry = watched(baseline=observe(watched(), before).baseline)
    # `kubectl label --overwrite app=x`: the value changes and kubectl takes the key over.
    taken = labelled({}, {"app": "x"})
    assert observe(entry, [taken, pool(), config()]).changed
    # `kubectl label app-`: gone from the object and from our fields.
    assert observe(entry, [labelled({}, {}), pool(), config()]).changed
    # What others add is theirs: a team's label, the controller's revision annotation.
    added = labelled({"app": "m"}, {"team": "a"}, {"deployment.kubernetes.io/revision": "2"})
    assert not observe(entry, [added, pool(), config()]).changed


def test_kinds_without_a_generation_are_compared_by_content() -> None:
    def epp_config(data: str) -> Listed:
        return ("v1", "ConfigMap", {"metadata": meta("m-a-epp", None), "data": {"c": data}})

    entry = watched(baseline=observe(watched(), [deployment(), pool(), epp_config("a")]).baseline)
    assert not observe(entry, [deployment(), pool(), epp_config("a")]).changed
    assert observe(entry, [deployment(), pool(), epp_config("b")]).changed


def test_a_baseline_of_the_older_form_is_taken_anew_not_read_as_a_change() -> None:
    first = observe(watched(), healthy())
    older = watched(digest=first.digest, baseline="0123456789abcdef")
    (rebased,) = changed_scans([older], healthy())
    assert not rebased.changed
    assert rebased.baseline == first.baseline
    # Once kept, the replica is quiet again.
    settled = watched(digest=rebased.digest, baseline=rebased.baseline)
    assert changed_scans([settled], healthy()) == []


def test_readiness_is_the_rule_of_rendering_readiness_for_every_workload() -> None:
    picker = deployment("m-a-epp", available="False")
    not_yet = observe(watched(objects=4), [*healthy(), picker])
    assert not not_yet.ready
    assert not_yet.reported
    assert "m-a-epp not Available" in not_yet.reason
    stale = deployment()
    stale[2]["status"]["observedGeneration"] = 0
    behind = observe(watched(), [stale, pool(), config()])
    assert not behind.ready
    assert not behind.reported


def test_only_changed_baselining_or_unhealthy_replicas_come_back() -> None:
    first = observe(watched(), healthy())
    settled = watched(digest=first.digest, baseline=first.baseline)
    assert changed_scans([settled], healthy()) == []
    # Unchanged but not healthy: told every scan, so failed scans can be counted.
    broken = [deployment(available="False"), pool(), config()]
    sick = observe(settled, broken)
    again = settled.model_copy(update={"digest": sick.digest})
    assert [s.key for s in changed_scans([again], broken)] == ["ml/m-a"]
    # Not baselined yet: always reported.
    assert len(changed_scans([watched(digest=first.digest)], healthy())) == 1
    # A replica with nothing left on the cluster is reported missing everything.
    (empty,) = changed_scans([settled], [])
    assert empty.missing == 3


def scan(**fields: Any) -> ReplicaScan:
    return ReplicaScan.model_validate(
        {"key": "ml/m-a", "ready": True, "digest": "d", "baseline": "b", **fields}
    )


def test_a_healthy_replica_that_stays_healthy_hears_nothing() -> None:
    kept, news = judge(watched(), scan())
    assert news is None
    assert kept.baseline == "b"
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
    entry, news = judge(watched(), scan(missing=1, digest="m"))
    assert news is not None
    assert news.kind is NewsKind.REPAIR
    assert news.reason == "1 of its 3 objects missing"
    entry, news = judge(entry, scan(missing=1, digest="m"))
    assert news is None
    _, news = judge(entry, scan(changed=True, digest="e"))
    assert news is not None
    assert "re-created or edited outside modelfleet" in news.reason


def test_a_registration_starts_afresh_whatever_the_sender_set() -> None:
    entry = registered(watched(baseline="b", digest="d", failed_scans=2))
    assert (entry.baseline, entry.digest, entry.failed_scans) == ("", "", 0)
    assert not entry.acknowledged


def test_the_first_scan_after_a_registration_always_tells_the_replica_something() -> None:
    entry, news = judge(watched(acknowledged=False), scan())
    assert news is not None
    assert news.kind is NewsKind.WATCHING
    assert entry.acknowledged
    # Other news is acknowledgement enough.
    _, news = judge(watched(acknowledged=False), scan(missing=1, digest="m"))
    assert news is not None
    assert news.kind is NewsKind.REPAIR


def test_a_replica_told_its_cluster_was_unreachable_hears_the_next_answering_scan() -> None:
    first = observe(watched(), healthy())
    settled = watched(digest=first.digest, baseline=first.baseline)
    # Healthy and unchanged, yet reported: it waits (Unknown) for this scan's word.
    told = settled.model_copy(update={"unreachable": True})
    assert changed_scans([settled], healthy()) == []
    (seen,) = changed_scans([told], healthy())
    kept, news = judge(told, seen)
    assert news is not None
    assert news.kind is NewsKind.HEALTHY
    assert not kept.unreachable
    # Found unhealthy on return (same digest as before): told that at once the threshold is met,
    # and until then it stays waiting for a word.
    sick = told.model_copy(update={"threshold": 2})
    sick, news = judge(sick, scan(ready=False, reason="not Available", digest=told.digest))
    assert news is None
    assert sick.unreachable
    sick, news = judge(sick, scan(ready=False, reason="not Available", digest=told.digest))
    assert news is not None
    assert news.kind is NewsKind.UNHEALTHY
    assert not sick.unreachable

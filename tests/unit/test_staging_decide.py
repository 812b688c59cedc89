"""The ModelCache staging decisions (``cache.decide``): from the record and an observation of
one cluster, what to do next, through a whole hydration (volume, Job, progress, success, clean
up), a failure with back-off, a revision change, a lost volume, and removal that keeps a volume
a workload mounts unless forced."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from modelfleet.api.kinds import parse_resource
from modelfleet.cache.decide import (
    Act,
    RetryPolicy,
    Want,
    failed_attempt,
    overall,
    plan_cluster,
    plan_removal,
    targets_for,
)
from modelfleet.contracts.cache_payloads import (
    CacheObservation,
    CachePhase,
    CacheTarget,
    ClusterCache,
)

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
WANT = Want(digest="d1", job="job-d1", bytes_total=100)
RETRY = RetryPolicy(first_seconds=10, max_seconds=60)


def obs(**kw: object) -> CacheObservation:
    return CacheObservation.model_validate(kw)


def cache(selector: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    doc = {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "ModelCache",
        "metadata": {"name": "weights", "namespace": "ml"},
        "spec": {"source": "HuggingFace", "huggingFace": {"repo": "org/m", "sizeGiB": 1}},
    }
    if selector is not None:
        doc["spec"]["clusterSelector"] = {"matchLabels": selector}  # type: ignore[index]
    return parse_resource(doc)


def test_targets_follow_the_selector_and_all_clusters_without_one() -> None:
    targets = [
        CacheTarget(cluster="b", labels={"region": "eu"}),
        CacheTarget(cluster="a", labels={"region": "us"}),
    ]
    assert [t.cluster for t in targets_for(cache(), targets)] == ["a", "b"]
    assert [t.cluster for t in targets_for(cache({"region": "eu"}), targets)] == ["b"]
    assert targets_for(cache({"region": "ap"}), targets) == []


def test_a_whole_hydration_from_nothing_to_ready_and_cleaned() -> None:
    state = ClusterCache(cluster="a")
    plan = plan_cluster(state, obs(), WANT, T0, RETRY)
    assert plan.acts == (Act.APPLY_CLAIM,)
    assert plan.state.phase is CachePhase.PENDING

    plan = plan_cluster(
        plan.state, obs(claim="Pending", claim_message="class x missing"), WANT, T0, RETRY
    )
    assert plan.acts == ()
    assert plan.state.message == "class x missing"

    plan = plan_cluster(plan.state, obs(claim="Bound"), WANT, T0, RETRY)
    assert plan.acts == (Act.APPLY_JOB,)
    assert plan.state.phase is CachePhase.HYDRATING
    assert plan.state.job == "job-d1"

    plan = plan_cluster(
        plan.state,
        obs(claim="Bound", job="Active", bytes_done=40, bytes_total=100),
        WANT,
        T0,
        RETRY,
    )
    assert plan.acts == ()
    assert plan.state.summary() == "Hydrating 40%"

    plan = plan_cluster(
        plan.state, obs(claim="Bound", job="Succeeded", secret=True), WANT, T0, RETRY
    )
    assert plan.acts == (Act.DELETE_JOB, Act.DELETE_SECRET)
    assert plan.state.phase is CachePhase.READY
    assert plan.state.staged == "d1"
    assert plan.state.summary() == "Ready"

    # Once the Job and the Secret are gone, nothing more to do: Ready stays latched.
    plan = plan_cluster(plan.state, obs(claim="Bound"), WANT, T0, RETRY)
    assert plan.acts == ()
    assert plan.state.phase is CachePhase.READY


def test_a_failed_download_backs_off_doubling_and_then_retries() -> None:
    state = ClusterCache(cluster="a", digest="d1", job="job-d1", phase=CachePhase.HYDRATING)
    failed = obs(claim="Bound", job="Failed", job_message="Connection reset by peer")
    plan = plan_cluster(state, failed, WANT, T0, RETRY)
    assert plan.acts == (Act.DELETE_JOB,)
    assert plan.state.phase is CachePhase.FAILED
    assert plan.state.attempts == 1
    assert "Connection reset by peer" in plan.state.message
    assert plan.state.retry_at == T0 + timedelta(seconds=10)
    # Within the back-off no new Job is started.
    waiting = plan_cluster(plan.state, obs(claim="Bound"), WANT, T0 + timedelta(seconds=5), RETRY)
    assert waiting.acts == ()
    assert waiting.state.phase is CachePhase.FAILED
    # After it, a new attempt starts.
    again = plan_cluster(plan.state, obs(claim="Bound"), WANT, T0 + timedelta(seconds=11), RETRY)
    assert again.acts == (Act.APPLY_JOB,)
    assert again.state.phase is CachePhase.HYDRATING
    assert "attempt 2" in again.state.message
    # The next failure waits twice as long, capped.
    second = failed_attempt(again.state, "401", T0, RETRY)
    assert second.retry_at == T0 + timedelta(seconds=20)
    assert failed_attempt(second.model_copy(update={"attempts": 9}), "x", T0, RETRY).retry_at == (
        T0 + timedelta(seconds=60)
    )


def test_a_revision_change_rehydrates_a_ready_cluster() -> None:
    ready = ClusterCache(cluster="a", digest="d1", staged="d1", phase=CachePhase.READY)
    new = Want(digest="d2", job="job-d2", bytes_total=100)
    plan = plan_cluster(ready, obs(claim="Bound"), new, T0, RETRY)
    assert plan.acts == (Act.APPLY_JOB,)
    assert plan.state.phase is CachePhase.HYDRATING
    assert plan.state.digest == "d2"
    assert plan.state.staged == "d1"  # the old weights are still what the volume holds


def test_a_revision_change_mid_download_removes_the_old_job_first() -> None:
    busy = ClusterCache(
        cluster="a", digest="d1", job="job-d1", phase=CachePhase.HYDRATING, attempts=2
    )
    new = Want(digest="d2", job="job-d2", bytes_total=100)
    plan = plan_cluster(busy, obs(claim="Bound"), new, T0, RETRY)
    assert plan.acts == (Act.DELETE_JOB,)
    assert plan.state.digest == "d2"
    assert plan.state.attempts == 0
    follow = plan_cluster(plan.state, obs(claim="Bound"), new, T0, RETRY)
    assert follow.acts == (Act.APPLY_JOB,)


def test_a_lost_volume_is_recreated_and_hydrated_again() -> None:
    ready = ClusterCache(cluster="a", digest="d1", staged="d1", phase=CachePhase.READY)
    plan = plan_cluster(ready, obs(claim="Absent"), WANT, T0, RETRY)
    assert plan.acts == (Act.APPLY_CLAIM,)
    assert plan.state.staged == ""
    assert plan.state.phase is CachePhase.PENDING


def test_removal_keeps_a_mounted_volume_unless_forced() -> None:
    ready = ClusterCache(cluster="a", staged="d1", phase=CachePhase.READY)
    mounted = obs(claim="Bound", mounted_by=["Deployment qwen-abc"])
    kept = plan_removal(ready, mounted, T0, force=False)
    assert Act.DELETE_CLAIM not in kept.acts
    assert not kept.gone
    assert "mounted by Deployment qwen-abc" in kept.state.message
    forced = plan_removal(ready, mounted, T0, force=True)
    assert forced.acts == (Act.DELETE_CLAIM,)
    free = plan_removal(ready, obs(claim="Bound", job="Active", secret=True), T0, force=False)
    assert free.acts == (Act.DELETE_JOB, Act.DELETE_SECRET, Act.DELETE_CLAIM)
    assert plan_removal(ready, obs(), T0, force=False).gone


def test_the_overall_phase_reads_like_modelplanes_artifact_ready() -> None:
    r = ClusterCache(cluster="a", phase=CachePhase.READY)
    h = ClusterCache(cluster="b", phase=CachePhase.HYDRATING)
    f = ClusterCache(cluster="c", phase=CachePhase.FAILED)
    assert overall([], deleting=False) == ("NoClusters", 0)
    assert overall([r, r], deleting=False) == ("Staged", 2)
    assert overall([r, h], deleting=False) == ("Hydrating", 1)
    assert overall([r, f], deleting=False) == ("Partial", 1)
    assert overall([f, h], deleting=False) == ("Failed", 0)
    assert overall([r], deleting=True) == ("Deleting", 1)

"""Gang schedulers per cluster (issue 26 item 2): ``InferenceCluster.spec.scheduler`` is
validated with field-named errors, and rendering wraps each gang for KAI (schedulerName, queue
label, one PodGroup per gang sized to it) or Kueue (the queue-name label, a LocalQueue in the
workload namespace), deterministically, leaving clusters without a scheduler unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from render_factories import gang, replica, standalone
from render_helpers import of_kind, one, render

from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.kinds import parse_resource
from modelfleet.api.manifest_errors import InvalidResourceError
from modelfleet.rendering.cluster_settings import cluster_facts
from modelfleet.rendering.replica_manifests import SHARED_KINDS, Step


def cluster(scheduler: dict[str, Any] | None = None) -> InferenceCluster:
    spec: dict[str, Any] = {
        "cluster": {"source": "Existing"},
        "nodePools": [{"name": "h100", "className": "h100"}],
    }
    if scheduler is not None:
        spec["scheduler"] = scheduler
    parsed = parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "InferenceCluster",
            "metadata": {"name": "c1"},
            "spec": spec,
        }
    )
    assert isinstance(parsed, InferenceCluster)
    return parsed


KAI = {"type": "KAI", "kai": {"queue": "team-a"}}
KUEUE = {"type": "Kueue", "kueue": {"localQueue": "inference", "clusterQueue": "team-a"}}


@pytest.mark.parametrize(
    ("scheduler", "field", "reason"),
    [
        ({"type": "KAI"}, "spec.scheduler.kai", "required when type is KAI"),
        ({"type": "Kueue"}, "spec.scheduler.kueue", "required when type is Kueue"),
        (
            {"type": "None", "kai": {"queue": "q"}},
            "spec.scheduler.kai",
            "must not be set when type is None",
        ),
        (
            {"type": "KAI", "kai": {"queue": "Team_A"}},
            "spec.scheduler.kai.queue",
            "invalid queue name",
        ),
        (
            {"type": "Kueue", "kueue": {"localQueue": "lq", "clusterQueue": "CQ!"}},
            "spec.scheduler.kueue.clusterQueue",
            "invalid ClusterQueue name",
        ),
        ({"type": "Volcano"}, "spec.scheduler.type", "Input should be"),
    ],
)
def test_a_malformed_scheduler_is_rejected_naming_the_field(
    scheduler: dict[str, Any], field: str, reason: str
) -> None:
    with pytest.raises(InvalidResourceError) as caught:
        cluster(scheduler)
    message = str(caught.value)
    assert field in message, message
    assert reason in message, message


def test_no_scheduler_renders_exactly_as_before() -> None:
    gangs = replica(gang(copies=2))
    assert render(gangs, cluster_facts(cluster())) == render(gangs)
    assert render(gangs, cluster_facts(cluster({"type": "None"}))) == render(gangs)


def test_kai_gives_every_gang_a_podgroup_sized_to_it_and_every_pod_the_scheduler() -> None:
    rendered = render(replica(gang(nodes=3, copies=2)), cluster_facts(cluster(KAI)))
    lws = one(rendered, "LeaderWorkerSet")
    groups = of_kind(rendered, "PodGroup")
    name = lws["metadata"]["name"]
    assert [g["metadata"]["name"] for g in groups] == [f"{name}-0", f"{name}-1"]
    for group in groups:
        assert group["apiVersion"] == "scheduling.run.ai/v2alpha2"
        assert group["spec"] == {"minMember": 4, "queue": "team-a"}  # leader + 3 workers
        assert group["metadata"]["namespace"] == lws["metadata"]["namespace"]
        assert group["metadata"]["labels"]["kai.scheduler/queue"] == "team-a"
    lwt = lws["spec"]["leaderWorkerTemplate"]
    for template in (lwt["leaderTemplate"], lwt["workerTemplate"]):
        assert template["spec"]["schedulerName"] == "kai-scheduler"
        assert template["metadata"]["labels"]["kai.scheduler/queue"] == "team-a"
    # PodGroups are applied before the gang whose pods join them; readiness is the workload's.
    kinds = [m["kind"] for m in rendered.step(Step.WORKLOADS).manifests]
    assert kinds.index("LeaderWorkerSet") > kinds.index("PodGroup")
    assert [r.kind for r in rendered.readiness].count("PodGroup") == 0


def test_kai_standalone_pods_name_the_scheduler_without_a_podgroup() -> None:
    rendered = render(replica(standalone(copies=3)), cluster_facts(cluster(KAI)))
    assert of_kind(rendered, "PodGroup") == []
    (engine,) = rendered.step(Step.WORKLOADS).manifests
    pod = engine["spec"]["template"]
    assert pod["spec"]["schedulerName"] == "kai-scheduler"
    assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "team-a"


def test_kueue_labels_the_gang_and_puts_a_local_queue_in_the_namespace() -> None:
    rendered = render(replica(gang(copies=2)), cluster_facts(cluster(KUEUE)))
    lws = one(rendered, "LeaderWorkerSet")
    assert lws["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "inference"
    # Kueue's LWS integration reads the LWS label and gates the pods itself.
    lwt = lws["spec"]["leaderWorkerTemplate"]
    assert "schedulerName" not in lwt["leaderTemplate"]["spec"]
    queue = one(rendered, "LocalQueue")
    assert queue["metadata"]["namespace"] == rendered.namespace
    assert queue["spec"] == {"clusterQueue": "team-a"}
    assert "modelfleet.dev/replica" not in queue["metadata"]["labels"]
    assert queue in rendered.step(Step.NAMESPACE).manifests
    assert "LocalQueue" in SHARED_KINDS


def test_kueue_labels_standalone_pods_for_its_pod_integration() -> None:
    rendered = render(replica(standalone()), cluster_facts(cluster(KUEUE)))
    (deployment,) = rendered.step(Step.WORKLOADS).manifests
    assert deployment["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "inference"
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "inference"
    # The endpoint picker is not a GPU workload: Kueue leaves it alone.
    epp = next(m for m in rendered.step(Step.ROUTING).manifests if m["kind"] == "Deployment")
    assert "kueue.x-k8s.io/queue-name" not in epp["metadata"]["labels"]


def test_wrapped_renders_are_deterministic() -> None:
    for scheduler in (KAI, KUEUE):
        facts = cluster_facts(cluster(scheduler))
        first = render(replica(gang(copies=2)), facts).model_dump_json()
        assert render(replica(gang(copies=2)), facts).model_dump_json() == first

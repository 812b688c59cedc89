"""The controller's pure decisions: what to do for an object, what its status says, who leads,
and the work queue's dedupe."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from modelfleet.api.classes import InferenceClass
from modelfleet.api.kinds import parse_resource
from modelfleet.api.meta import Condition
from modelfleet.contracts.status import DeploymentStatus
from modelfleet.controller import conditions, election
from modelfleet.controller.decide import (
    FINALIZER,
    AddFinalizer,
    Hand,
    Invalid,
    Key,
    Nothing,
    Teardown,
    decide,
    deployment_change,
    document,
    missing_classes,
    scale_target,
    scale_writers,
    scaled_by_autoscaler,
    scaler_conflict,
)
from modelfleet.controller.workqueue import WorkQueue

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((QUICKSTART / name).read_text()) if d]


def served(doc: dict[str, Any], **meta: Any) -> dict[str, Any]:
    """``doc`` as the management cluster returns it."""
    obj = copy.deepcopy(doc)
    obj["metadata"].update(
        {
            "uid": "u-1",
            "resourceVersion": "17",
            "generation": 3,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
            **meta,
        }
    )
    obj["status"] = {"phase": "Ready"}
    return obj


DEPLOYMENT = _docs("qwen3-8b.yaml")[0]
CLASSES = [parse_resource(d) for d in _docs("classes.yaml")]


def test_an_object_without_the_finalizer_gets_it_first() -> None:
    action = decide(served(DEPLOYMENT, finalizers=["other/keep"]))
    assert action == AddFinalizer(["other/keep", FINALIZER])


def test_a_valid_object_is_handed_over_with_its_generation_and_without_server_fields() -> None:
    action = decide(served(DEPLOYMENT, finalizers=[FINALIZER]), [])
    assert isinstance(action, Hand)
    assert action.generation == 3
    assert action.resource.name == "qwen3-8b"
    assert action.resource.metadata.annotations == {}


def test_document_keeps_labels_and_drops_status_and_server_metadata() -> None:
    doc = document(served(DEPLOYMENT, labels={"team": "ml"}))
    assert "status" not in doc
    assert doc["metadata"] == {"name": "qwen3-8b", "namespace": "ml-team", "labels": {"team": "ml"}}


def test_an_invalid_object_gets_validates_words_and_is_not_handed_over() -> None:
    bad = served(DEPLOYMENT, finalizers=[FINALIZER])
    bad["spec"]["replicas"] = -1
    action = decide(bad)
    assert isinstance(action, Invalid)
    assert action.message.startswith("spec.replicas: ")


def test_a_selector_no_declared_class_can_evaluate_is_invalid() -> None:
    bad = served(DEPLOYMENT, finalizers=[FINALIZER])
    member = bad["spec"]["template"]["spec"]["engines"][0]["members"][0]
    member["nodeSelector"]["devices"][0]["selectors"][0]["cel"] = (
        'device.attributes["gpu.nvidia.com"].nosuch == 3'
    )
    classes = [c for c in CLASSES if isinstance(c, InferenceClass)]
    action = decide(bad, classes)
    assert isinstance(action, Invalid)
    assert "cannot evaluate on any declared InferenceClass" in action.message
    assert action.message.startswith("spec.template.spec.engines[0].members[0].nodeSelector")


def test_deletion_tears_down_only_while_our_finalizer_is_there() -> None:
    deleting = served(
        DEPLOYMENT, finalizers=["a/b", FINALIZER], deletionTimestamp="2026-01-01T00:01:00Z"
    )
    assert decide(deleting) == Teardown(["a/b"])
    deleting["metadata"]["finalizers"] = ["a/b"]
    assert decide(deleting) == Nothing()


def test_only_replicas_changed_is_a_scale_anything_else_an_apply() -> None:
    held = parse_resource(DEPLOYMENT)
    same = parse_resource(DEPLOYMENT)
    assert deployment_change(None, same) == "apply"
    assert deployment_change(held, same) == "unchanged"  # type: ignore[arg-type]
    three = copy.deepcopy(DEPLOYMENT)
    three["spec"]["replicas"] = 3
    assert deployment_change(held, parse_resource(three)) == "scale"  # type: ignore[arg-type]
    image = copy.deepcopy(three)
    member = image["spec"]["template"]["spec"]["engines"][0]["members"][0]
    member["template"]["spec"]["containers"][0]["image"] = "vllm/vllm-openai:v0.24.0"
    assert deployment_change(held, parse_resource(image)) == "apply"  # type: ignore[arg-type]


def test_a_model_autoscaler_and_a_scale_writer_conflict() -> None:
    obj = served(DEPLOYMENT)
    assert scale_writers(obj) == []
    obj["metadata"]["managedFields"].append({"manager": "keda", "subresource": "scale"})
    assert scale_writers(obj) == ["keda"]
    scaler = {
        "metadata": {"name": "qwen-scaler", "namespace": "ml-team"},
        "spec": {"scaleTargetRef": {"name": "qwen3-8b"}},
    }
    elsewhere = copy.deepcopy(scaler)
    elsewhere["metadata"]["namespace"] = "other"
    key = Key("ModelDeployment", "ml-team", "qwen3-8b")
    assert scaled_by_autoscaler(key, [scaler, elsewhere]) == ["qwen-scaler"]
    assert scaler_conflict(["keda"], []) is None
    assert scaler_conflict([], ["qwen-scaler"]) is None
    why = scaler_conflict(["keda"], ["qwen-scaler"])
    assert why is not None
    assert "qwen-scaler" in why
    assert "keda" in why


def _status(phase: str, ready: int, **extra: Any) -> DeploymentStatus:
    return DeploymentStatus(
        namespace="ml-team",
        name="qwen3-8b",
        generation=1,
        desired=2,
        scheduled=2,
        ready=ready,
        updated=2,
        phase=phase,
        **extra,
    )


def test_deployment_status_carries_counts_selector_and_the_schedulers_reason() -> None:
    ready = conditions.deployment_status(_status("Ready", 2), 4, "ml-team", "qwen3-8b")
    assert ready["observedGeneration"] == 4
    assert (ready["replicas"], ready["readyReplicas"]) == (2, 2)
    assert (
        ready["selector"] == "modelfleet.dev/deployment=qwen3-8b,modelfleet.dev/namespace=ml-team"
    )
    by_type = {c["type"]: c for c in ready["conditions"]}
    assert by_type["Ready"]["status"] == "True"
    assert by_type["Degraded"]["status"] == "False"
    pending = _status(
        "Pending",
        0,
        conditions=[
            Condition(
                type="ReplicasScheduled",
                status="False",
                reason="Unschedulable",
                message="no pool satisfies device gpu",
            )
        ],
    )
    out = conditions.deployment_status(pending, 4, "ml-team", "qwen3-8b")
    by_type = {c["type"]: c for c in out["conditions"]}
    assert by_type["Ready"] == {
        "type": "Ready",
        "status": "False",
        "reason": "Unschedulable",
        "message": out["message"],
    }
    assert "no pool satisfies device gpu" in out["message"]
    assert by_type["Progressing"]["status"] == "True"


def test_status_is_written_only_when_it_would_change() -> None:
    wanted = conditions.handed_status(2, "fleet")
    assert conditions.differs(None, wanted)
    assert not conditions.differs({**wanted, "extra": 1}, wanted)
    assert conditions.differs({**wanted, "observedGeneration": 1}, wanted)


NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _lease(holder: str, renewed: datetime, duration: int = 15) -> dict[str, Any]:
    return {"spec": election.lease_spec(holder, duration, renewed, renewed)}


def test_a_free_or_own_lease_is_claimed_a_live_foreign_one_is_not() -> None:
    assert election.claim(None, "a", 15, NOW) == election.lease_spec("a", 15, NOW, NOW)
    own = election.claim(_lease("a", NOW - timedelta(seconds=20)), "a", 15, NOW)
    assert own is not None
    assert own["renewTime"] == election.micro_time(NOW)
    assert election.claim(_lease("b", NOW - timedelta(seconds=14)), "a", 15, NOW) is None
    expired = election.claim(_lease("b", NOW - timedelta(seconds=16)), "a", 15, NOW)
    assert expired is not None
    assert expired["holderIdentity"] == "a"


def test_the_work_queue_dedupes_and_requeues_a_key_changed_while_processed() -> None:
    async def scenario() -> list[str]:
        queue: WorkQueue[str] = WorkQueue()
        queue.add("a")
        queue.add("a")
        queue.add("b")
        assert len(queue) == 2
        first = await queue.get()
        queue.add(first)  # changed while processed: not handed to a second worker
        assert len(queue) == 1
        queue.done(first)
        got = [await queue.get(), await queue.get()]
        queue.add_after("c", 0.01)
        got.append(await asyncio.wait_for(queue.get(), 5))
        return [first, *got]

    assert asyncio.run(scenario()) == ["a", "b", "a", "c"]


def test_a_model_autoscaler_names_its_target_other_kinds_none() -> None:
    scaler = {
        "kind": "ModelAutoscaler",
        "metadata": {"name": "s", "namespace": "ml"},
        "spec": {"scaleTargetRef": {"name": "qwen"}},
    }
    assert scale_target(scaler) == Key("ModelDeployment", "ml", "qwen")
    assert scale_target({**scaler, "kind": "ModelDeployment"}) is None


def test_a_cluster_naming_an_unknown_class_is_not_handed_over() -> None:
    [doc, *_] = _docs("clusters.yaml")
    cluster = parse_resource(doc)
    assert missing_classes(cluster, {"l4"}) is None  # type: ignore[arg-type]
    why = missing_classes(cluster, {"h100x8"})  # type: ignore[arg-type]
    assert why == "spec.nodePools[0].className: InferenceClass 'l4' not found (apply it first)"

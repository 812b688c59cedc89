"""Provisioning alternatives (issue 25 item 2): which of a pool's fallbacks is tried next given
the attempts so far (only a stockout moves on), how each attempt is named in the step log, the
plans of the alternatives, the cluster as created, the API's rules for ``fallbacks`` and the
failure reason once every alternative was stocked out."""

from __future__ import annotations

from typing import Any

import pytest

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.rules import validate
from modelfleet.cluster.alternatives import (
    alternatives,
    as_created,
    attempt_name,
    choice,
    next_alternative,
)
from modelfleet.cluster.failure import failure_reason
from modelfleet.cluster.plan import needed_classes, plan_alternatives, plan_pools
from modelfleet.contracts.cloud_payloads import CloudErrorReason, PoolChoice, error_type

STOCKOUT = CloudErrorReason.STOCKOUT


def gke_class(name: str, machine: str) -> InferenceClass:
    return InferenceClass.model_validate(
        {
            "metadata": {"name": name},
            "spec": {
                "provisioning": {
                    "provider": "GKE",
                    "gke": {
                        "machineType": machine,
                        "accelerator": {"type": "nvidia-h100-80gb", "count": 8},
                    },
                },
                "devices": [
                    {
                        "name": "gpu",
                        "driver": "gpu.nvidia.com",
                        "deviceClassName": "gpu.nvidia.com",
                        "count": 8,
                    }
                ],
            },
        }
    )


def cluster(source: str = "GKE", **pool: Any) -> InferenceCluster:
    block = {"GKE": {"gke": {"project": "p", "region": "us-central1"}}, "Existing": {}}[source]
    return InferenceCluster.model_validate(
        {
            "metadata": {"name": "c"},
            "spec": {
                "cluster": {"source": source, **block},
                "nodePools": [
                    {"name": "gpu", "className": "a3", "zones": ["us-central1-a"], **pool}
                ],
            },
        }
    )


FALLBACKS = [
    {"zones": ["us-central1-b"]},
    {"zones": ["us-central1-c"]},
    {"className": "a2"},
]


def test_the_pool_itself_is_tried_first_and_a_stockout_moves_to_the_next() -> None:
    assert next_alternative(4, []) == 0
    assert next_alternative(4, [STOCKOUT]) == 1
    assert next_alternative(4, [STOCKOUT, STOCKOUT]) == 2
    assert next_alternative(4, [STOCKOUT, STOCKOUT, STOCKOUT]) == 3


def test_nothing_follows_a_success_another_error_or_the_last_stockout() -> None:
    assert next_alternative(4, [STOCKOUT, None]) is None
    # A quota or a permission fails the same way in another zone: a person decides.
    assert next_alternative(4, [CloudErrorReason.QUOTA_EXCEEDED]) is None
    assert next_alternative(4, [STOCKOUT, CloudErrorReason.PERMISSION_DENIED]) is None
    assert next_alternative(4, [None]) is None  # an unclassified failure is not a stockout
    assert next_alternative(2, [STOCKOUT, STOCKOUT]) is None
    assert next_alternative(1, [STOCKOUT]) is None
    assert next_alternative(0, []) is None


def test_each_fallback_replaces_only_what_it_sets() -> None:
    (pool,) = cluster(fallbacks=FALLBACKS).spec.node_pools
    tried = alternatives(pool)
    assert [(t.zones, t.class_name) for t in tried] == [
        (["us-central1-a"], "a3"),
        (["us-central1-b"], "a3"),
        (["us-central1-c"], "a3"),
        (["us-central1-a"], "a2"),
    ]
    assert all(not t.fallbacks for t in tried[1:])
    assert [attempt_name("node pool", pool, t) for t in tried] == [
        "create node pool gpu in us-central1-a as a3",
        "create node pool gpu in us-central1-b as a3",
        "create node pool gpu in us-central1-c as a3",
        "create node pool gpu in us-central1-a as a2",
    ]
    # Without fallbacks the step keeps its name.
    (plain,) = cluster().spec.node_pools
    assert attempt_name("node pool", plain, plain) == "create node pool gpu"
    assert choice(pool, tried[0]) is None
    assert choice(pool, tried[3]) == PoolChoice(zones=["us-central1-a"], class_name="a2")


def test_the_alternatives_are_planned_from_their_classes_and_a_missing_one_waits() -> None:
    spec = cluster(fallbacks=FALLBACKS)
    assert needed_classes(spec) == ["a2", "a3"]
    classes = {"a3": gke_class("a3", "a3-highgpu-8g"), "a2": gke_class("a2", "a2-ultragpu-8g")}
    options, problems = plan_alternatives(spec, classes)
    assert problems == []
    assert [(p.zones, p.machine_type, p.class_name) for p in options["gpu"]] == [
        (["us-central1-a"], "a3-highgpu-8g", "a3"),
        (["us-central1-b"], "a3-highgpu-8g", "a3"),
        (["us-central1-c"], "a3-highgpu-8g", "a3"),
        (["us-central1-a"], "a2-ultragpu-8g", "a2"),
    ]
    assert {p.name for p in options["gpu"]} == {"gpu"}
    _, problems = plan_alternatives(spec, {"a3": classes["a3"]})
    assert problems == ["nodePools[gpu].fallbacks[2]: InferenceClass a2 is not in the fleet"]


def test_the_cluster_as_created_shows_the_fallback_a_pool_was_created_as() -> None:
    spec = cluster(fallbacks=FALLBACKS)
    assert as_created(spec, {}) is spec
    created = as_created(spec, {"gpu": PoolChoice(zones=["us-central1-b"], class_name="a2")})
    (pool,) = created.spec.node_pools
    assert (pool.zones, pool.class_name) == (["us-central1-b"], "a2")
    classes = {"a3": gke_class("a3", "a3-highgpu-8g"), "a2": gke_class("a2", "a2-ultragpu-8g")}
    (plan,), _ = plan_pools(created, classes)
    assert plan.machine_type == "a2-ultragpu-8g"
    assert spec.spec.node_pools[0].class_name == "a3"  # the declared spec is unchanged


def messages(spec: InferenceCluster) -> list[str]:
    return [str(e) for e in validate(spec)]


@pytest.mark.parametrize(
    ("pool", "expected"),
    [
        (
            {"fallbacks": [{}]},
            "spec.nodePools[0].fallbacks[0]: set zones, className or both",
        ),
        (
            {"fallbacks": [{"zones": ["us-central1-a"]}]},
            "spec.nodePools[0].fallbacks[0]: repeats the pool itself (zones us-central1-a, "
            "class a3): an alternative must differ in its zones or its class",
        ),
        (
            {"fallbacks": [{"className": "a2"}, {"className": "a2"}]},
            "spec.nodePools[0].fallbacks[1]: repeats fallback 0 (zones us-central1-a, class a2): "
            "an alternative must differ in its zones or its class",
        ),
        (
            {"fallbacks": [{"zones": ["us-central1-b", "us-central1-b"]}]},
            "spec.nodePools[0].fallbacks[0].zones[1]: duplicate zone 'us-central1-b': zones must "
            "be unique",
        ),
    ],
)
def test_bad_fallbacks_are_refused_naming_the_field_and_the_reason(
    pool: dict[str, Any], expected: str
) -> None:
    assert expected in messages(cluster(**pool))


def test_fallbacks_belong_to_provisioned_pools_only() -> None:
    spec = cluster("Existing", fallbacks=[{"zones": ["b"]}])
    assert (
        "spec.nodePools[0].fallbacks: fallbacks apply only to pools modelfleet provisions "
        "(sources GKE, EKS, AKS), not to source Existing"
    ) in messages(spec)
    assert messages(cluster(fallbacks=FALLBACKS)) == []


def test_a_failure_after_every_alternative_names_each_stocked_out_attempt() -> None:
    tried = [
        "create node pool gpu in us-central1-a as a3",
        "create node pool gpu in us-central1-b as a3",
    ]
    text = failure_reason("c", tried[-1], error_type(STOCKOUT), "zone exhausted.", None, tried)
    assert text.startswith(
        "ProvisioningFailed at create node pool gpu in us-central1-b as a3: Stockout: zone "
        "exhausted; every alternative was stocked out (2 tried: "
    )
    assert "create node pool gpu in us-central1-a as a3; create node pool" in text
    assert "quota increase will not help" in text
    quota = error_type(CloudErrorReason.QUOTA_EXCEEDED)
    text = failure_reason("c", tried[-1], quota, "no quota", None, tried[:1])
    assert "after stockouts at: create node pool gpu in us-central1-a as a3; " in text
    assert "request a quota increase" in text

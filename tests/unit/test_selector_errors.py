"""CEL selectors that compile but fail at evaluation are named per cluster and pool
(``scheduling.selector_errors``), so an empty dry placement says why instead of only "no pool
satisfies"; selectors that evaluate, match or not, are not reported."""

from __future__ import annotations

import pytest
from placement_builders import DRIVER, deployment, gpu, mem_at_least, standalone

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.scheduling.selector_errors import selector_errors

CLASSES = {
    "h100": InferenceClass.model_validate(
        {"kind": "InferenceClass", "metadata": {"name": "h100"}, "spec": {"devices": [gpu()]}}
    )
}


def cluster(name: str) -> InferenceCluster:
    return InferenceCluster.model_validate(
        {
            "kind": "InferenceCluster",
            "metadata": {"name": name},
            "spec": {
                "cluster": {"source": "Existing"},
                "nodePools": [{"name": "big", "className": "h100", "nodeCount": 1}],
            },
        }
    )


CLUSTERS = {"east": cluster("east"), "west": cluster("west")}


@pytest.mark.parametrize(
    ("selector", "error"),
    [
        (f'device.attributes["{DRIVER}"].productName > 5', "type error"),
        (f'device.capacity["{DRIVER}"].memory > 5', "type error"),
        (f'device.capacity["{DRIVER}"].memory.compareTo(quantity("1Gi")) / 0 >= 0', "division"),
        (f'device.attributes["{DRIVER}"].productName + 1 == 2', "type error"),
        (f'device.attributes["{DRIVER}"].productName', "not a bool"),
    ],
)
def test_a_selector_failing_at_evaluation_is_named_per_cluster_and_pool(
    selector: str, error: str
) -> None:
    md = deployment(standalone(1, selector))
    errors = selector_errors(md, CLASSES, CLUSTERS, SelectorEvaluator())
    assert sorted(errors) == ["east", "west"]
    assert errors["east"].startswith("pool 'big': the CEL selector of device 'gpu' fails")
    assert error in errors["east"]
    assert selector in errors["east"]


@pytest.mark.parametrize("selector", [mem_at_least("1Gi"), mem_at_least("1000Gi")])
def test_a_selector_that_evaluates_is_not_reported(selector: str) -> None:
    md = deployment(standalone(1, selector))
    assert selector_errors(md, CLASSES, CLUSTERS, SelectorEvaluator()) == {}


@pytest.mark.parametrize(
    ("selector", "why"),
    [
        (
            f'device.attributes["{DRIVER}"].productName > 5',
            "found no matching overload for '_>_' applied to '(string, int)'",
        ),
        (f'device.attributes["{DRIVER}"].productName', "evaluates to string, not a bool"),
        (f'device.attributes["{DRIVER}"].productName + 1 == 2', "type error"),
        (f'device.capacity["{DRIVER}"].memory > 5', "type error"),
    ],
)
def test_the_live_fleets_reason_is_one_short_line_in_cels_words(selector: str, why: str) -> None:
    md = deployment(standalone(1, selector))
    reason = selector_errors(md, CLASSES, CLUSTERS, SelectorEvaluator())["east"]
    assert why in reason
    assert "\n" not in reason
    assert len(reason) < 400, reason
    for leak in ("celpy", "<class", "Type(", "IntType", "NotImplemented", "argument must be"):
        assert leak not in reason, reason

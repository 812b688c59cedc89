"""Why a deployment's device selectors fail to *evaluate* on a fleet's pools (a type error, a
division by zero), as opposed to not matching: the scheduler counts both as a non-match, so a
placement that finds no pool can name the CEL failure per cluster and pool instead of only
"no pool satisfies device ...".

Layer rule: pure (no I/O, no Temporal, no SDKs); the Fleet workflow calls it to explain an
empty dry placement.
"""

from __future__ import annotations

from collections.abc import Mapping

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelDeployment
from modelfleet.cel.compiler import CelCompileError
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.scheduling.index import device_facts


def selector_errors(
    deployment: ModelDeployment,
    classes: Mapping[str, InferenceClass],
    clusters: Mapping[str, InferenceCluster],
    evaluator: SelectorEvaluator,
) -> dict[str, str]:
    """Per cluster, the first pool on which a selector of ``deployment`` fails to evaluate on
    every device of the pool's class, with the expression and the error."""
    selectors = [
        (device.name, selector.cel)
        for engine in deployment.spec.template.spec.engines
        for member in engine.members
        for device in (member.node_selector.devices if member.node_selector else [])
        for selector in device.selectors
    ]
    errors: dict[str, str] = {}
    for name in sorted(clusters):
        for pool in clusters[name].spec.node_pools:
            cls = classes.get(pool.class_name)
            if cls is None or not cls.spec.devices:
                continue
            why = _failing(selectors, cls, evaluator)
            if why is not None:
                errors[name] = f"pool {pool.name!r}: {why}"
                break
    return errors


def _failing(
    selectors: list[tuple[str, str]], cls: InferenceClass, evaluator: SelectorEvaluator
) -> str | None:
    for request, expression in selectors:
        reasons = []
        for device in cls.spec.devices:
            try:
                reason = evaluator.evaluation_error(expression, device_facts(device))
            except CelCompileError:
                return None  # validation reports syntax errors; nothing to add here
            if reason is None:
                break
            reasons.append(reason)
        else:
            return (
                f"the CEL selector of device {request!r} fails to evaluate "
                f"({reasons[0]}): {expression}"
            )
    return None

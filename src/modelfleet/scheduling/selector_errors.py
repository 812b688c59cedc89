"""Why a deployment's device selectors fail to *evaluate* on a fleet's pools (a type error, a
division by zero), as opposed to not matching: the scheduler counts both as a non-match, so a
placement that finds no pool can name the CEL failure per cluster and pool instead of only
"no pool satisfies device ...".

Layer rule: pure (no I/O, no Temporal, no SDKs); the Fleet workflow calls it to explain an
empty dry placement.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelDeployment
from modelfleet.cel.compiler import CelCompileError, attribute_type_error
from modelfleet.cel.device import DeviceFacts
from modelfleet.cel.evaluator import SelectorEvaluator
from modelfleet.cel.static_types import ATTRIBUTE_KIND_TYPES
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
    devices = [device_facts(device) for device in cls.spec.devices]
    for request, expression in selectors:
        reason = unevaluable(expression, devices, evaluator)
        if reason is not None:
            return (
                f"the CEL selector of device {request!r} fails to evaluate ({reason}): {expression}"
            )
    return None


def unevaluable(
    expression: str, devices: Sequence[DeviceFacts], evaluator: SelectorEvaluator
) -> str | None:
    """Why ``expression`` cannot evaluate on any of ``devices`` (the first device's reason: a
    type error in cel-go's words, given the types of the device's attributes, else the
    evaluation's own error), or None when it evaluates on one of them or there are none.
    Syntax errors are left to validation (None)."""
    reasons = []
    for device in devices:
        try:
            reason = attribute_type_error(expression, attribute_types(device))
            if reason is None:
                reason = evaluator.evaluation_error(expression, device)
        except CelCompileError:
            return None
        if reason is None:
            return None
        reasons.append(reason)
    return reasons[0] if reasons else None


def attribute_types(device: DeviceFacts) -> dict[tuple[str, str], str]:
    """(domain, name) -> CEL type of each attribute of ``device`` (bare names are filed under
    its driver, as CEL sees them)."""
    return dict(_typed(device))


def _typed(device: DeviceFacts) -> Iterator[tuple[tuple[str, str], str]]:
    for name, kind, _ in device.attributes:
        domain, sep, ident = name.partition("/")
        key = (domain, ident) if sep else (device.driver, name)
        yield key, ATTRIBUTE_KIND_TYPES[kind]


def deployment_selectors(deployment: ModelDeployment) -> Iterator[tuple[str, str]]:
    """(field path, expression) of every device selector of ``deployment``."""
    for e, engine in enumerate(deployment.spec.template.spec.engines):
        for m, member in enumerate(engine.members):
            if member.node_selector is None:
                continue
            for d, device in enumerate(member.node_selector.devices):
                for s, selector in enumerate(device.selectors):
                    yield (
                        f"spec.template.spec.engines[{e}].members[{m}].nodeSelector"
                        f".devices[{d}].selectors[{s}].cel",
                        selector.cel,
                    )


def unevaluable_selectors(
    deployment: ModelDeployment, classes: Sequence[InferenceClass], evaluator: SelectorEvaluator
) -> list[tuple[str, str]]:
    """(field path, reason) per device selector of ``deployment`` that cannot evaluate on any
    device of ``classes`` (so could never match), in the words ``modelfleet validate`` prints.
    Nothing when no class declares a device."""
    devices = [device_facts(device) for c in classes for device in c.spec.devices]
    if not devices:
        return []
    names = ", ".join(c.name for c in classes)
    found = []
    for field, expression in deployment_selectors(deployment):
        why = unevaluable(expression, devices, evaluator)
        if why is not None:
            reason = f"cannot evaluate on any declared InferenceClass ({names}): {why}"
            found.append((field, reason if repr(expression) in why else f"{expression}: {reason}"))
    return found

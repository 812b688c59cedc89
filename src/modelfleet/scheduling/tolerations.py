"""Fleet-level taints and a deployment's tolerations, with Kubernetes semantics: an empty
toleration effect matches every effect, ``Exists`` without a key matches every taint, ``Equal``
compares key and value (an empty value matches only an empty value). Every taint on a cluster
must be tolerated.

Layer rule: pure (no I/O, no Temporal, no SDKs).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from modelfleet.api.clusters import Taint, TaintEffect
from modelfleet.api.deployments import Toleration, TolerationOperator

# Effects that keep new replicas away, and the subset that also evicts existing ones.
REPELS_NEW = frozenset({TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE})
EVICTS = frozenset({TaintEffect.NO_EXECUTE})


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    if toleration.effect is not None and toleration.effect is not taint.effect:
        return False
    if toleration.operator is TolerationOperator.EXISTS:
        return not toleration.key or toleration.key == taint.key
    return toleration.key == taint.key and toleration.value == taint.value


def first_untolerated(
    taints: Iterable[Taint],
    tolerations: Sequence[Toleration],
    effects: frozenset[TaintEffect],
) -> Taint | None:
    """The first taint with one of ``effects`` that no toleration covers, or None."""
    for taint in taints:
        if taint.effect in effects and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def describe_taint(taint: Taint) -> str:
    """``key=value:Effect`` (``key:Effect`` without a value), as kubectl prints taints."""
    value = f"={taint.value}" if taint.value else ""
    return f"{taint.key}{value}:{taint.effect.value}"

"""Entry point of the rendering layer: a placed ModelReplica plus the facts of its cluster in,
every Kubernetes manifest that serves it out, grouped into the steps of the rollout saga, with the
readiness rules that decide when it serves.

The whole layer is pure and deterministic: no I/O, no clock, no Temporal, no Kubernetes client;
rendering the same replica twice gives equal output, and manifests are plain JSON-compatible dicts
that can be applied as they are. The ``kubernetes`` package appears in tests only, to check
shapes.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from modelfleet.api.deployments import ModelReplica, ServingMode
from modelfleet.api.meta import Model
from modelfleet.rendering.claims import render_claim_templates
from modelfleet.rendering.context import RenderContext
from modelfleet.rendering.engine_workloads import render_workload
from modelfleet.rendering.engines import RenderError
from modelfleet.rendering.facts import ClusterFacts
from modelfleet.rendering.gang_scheduling import LOCAL_QUEUE_KIND, local_queue, wrap_workload
from modelfleet.rendering.namespace import render_namespace
from modelfleet.rendering.prefill_decode import engine_extras, phase_engines
from modelfleet.rendering.readiness import ReadinessRole, ReadinessRule, rule_for
from modelfleet.rendering.routing import render_routing

# The public API of the rendering layer, importable from this one module.
__all__ = [
    "SHARED_KINDS",
    "ClusterFacts",
    "ReadinessRole",
    "ReadinessRule",
    "RenderError",
    "RenderedReplica",
    "RenderedStep",
    "Step",
    "render_replica",
]


# Kinds of the NAMESPACE step, shared by every replica in the namespace: a replica's teardown
# never deletes them.
SHARED_KINDS = frozenset({"Namespace", LOCAL_QUEUE_KIND})


class Step(StrEnum):
    """Rollout steps in apply order. NAMESPACE is shared with other replicas: never undo it."""

    NAMESPACE = "namespace"
    CLAIMS = "claims"
    WORKLOADS = "workloads"
    ROUTING = "routing"


class RenderedStep(Model):
    step: Step
    manifests: list[dict[str, Any]]


class RenderedReplica(Model):
    replica: str
    cluster: str
    # The workload namespace on the cluster (not the deployment's fleet namespace).
    namespace: str
    # Every step, in apply order; a step may be empty (a replica with no claiming member).
    steps: list[RenderedStep]
    readiness: list[ReadinessRule]

    def manifests(self) -> list[dict[str, Any]]:
        """Every manifest, in apply order."""
        return [manifest for step in self.steps for manifest in step.manifests]

    def step(self, step: Step) -> RenderedStep:
        return next(s for s in self.steps if s.step is step)


def _workloads(ctx: RenderContext, replica: ModelReplica) -> list[list[dict[str, Any]]]:
    """Per engine: its workload wrapped for the cluster's gang scheduler (the workload last)."""
    engines = replica.spec.engines
    if replica.spec.serving.mode is ServingMode.PREFILL_DECODE:
        phase_engines(engines)  # fails early, with the reason, on a malformed P/D replica
        return [
            wrap_workload(ctx, e, render_workload(ctx, e, engine_extras(ctx, e))) for e in engines
        ]
    return [wrap_workload(ctx, e, render_workload(ctx, e)) for e in engines]


def render_replica(replica: ModelReplica, facts: ClusterFacts) -> RenderedReplica:
    """Render ``replica`` for its cluster. Raises ``RenderError`` on a replica that
    ``api.rules`` would have rejected."""
    ctx = RenderContext.of(replica, facts)
    claims = [m for engine in replica.spec.engines for m in render_claim_templates(ctx, engine)]
    wrapped = _workloads(ctx, replica)
    workloads = [objects[-1] for objects in wrapped]
    namespace = [render_namespace(ctx)]
    queue = local_queue(ctx, facts.scheduler)
    if queue is not None:
        namespace.append(queue)
    routing = render_routing(ctx, replica)
    # The endpoint picker's Deployment is the only Deployment among the routing objects.
    epp = next(m for m in routing if m["kind"] == "Deployment")
    readiness = [rule_for(w, ReadinessRole.WORKLOAD) for w in workloads]
    readiness.append(rule_for(epp, ReadinessRole.ENDPOINT_PICKER))
    return RenderedReplica(
        replica=ctx.replica,
        cluster=ctx.cluster,
        namespace=ctx.namespace,
        steps=[
            RenderedStep(step=Step.NAMESPACE, manifests=namespace),
            RenderedStep(step=Step.CLAIMS, manifests=claims),
            RenderedStep(step=Step.WORKLOADS, manifests=[m for objs in wrapped for m in objs]),
            RenderedStep(step=Step.ROUTING, manifests=routing),
        ],
        readiness=readiness,
    )

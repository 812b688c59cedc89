"""The workload of one engine: an ``apps/v1`` Deployment for a Standalone engine, a
``leaderworkerset.x-k8s.io/v1`` LeaderWorkerSet for a Leader + Worker gang. ``replicas`` is the
engine's ``copies`` in both cases.

Pure: builds dicts from the engine, the render context and any extras the serving mode asks for
(see ``prefill_decode``); it does not decide routing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from modelfleet.api.deployments import PlacedEngine
from modelfleet.api.naming import LABEL_LWS_ROLE, LABEL_SERVING, LABEL_WORKLOAD
from modelfleet.rendering.claims import claim_template_for
from modelfleet.rendering.context import RenderContext
from modelfleet.rendering.engines import gang_size, serving_member, worker_member
from modelfleet.rendering.names import workload_name
from modelfleet.rendering.pods import SERVING_PORT, EnvEntry, PodShape, env_value, pod_template

DEPLOYMENT_API_VERSION = "apps/v1"
LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"

# Every rank learns the leader's address and its own rank. These reference variables that the
# LWS webhook prepends to each container's env, so ``$(...)`` expands; they go first so that the
# user's own values may reference them in turn.
GANG_ENV: tuple[EnvEntry, ...] = (
    env_value("MODELPLANE_LEADER_ADDRESS", "$(LWS_LEADER_ADDRESS)"),
    env_value("MODELPLANE_RANK", "$(LWS_WORKER_INDEX)"),
)


# Workers are created together with the leader, not after it is Ready. The leader's readiness is
# the engine's /health, which a multi-node engine only answers once every rank has joined; with
# LeaderReady the workers would wait for a leader that waits for them.
GANG_STARTUP_POLICY = "LeaderCreated"


@dataclass(frozen=True)
class EngineExtras:
    """What a serving mode adds to an engine's pods (Unified adds nothing)."""

    # Labels, port and sidecars of the serving pod (the Standalone pod or the gang's leader).
    serving_labels: Mapping[str, str] = field(default_factory=dict)
    serving_port: int = SERVING_PORT
    serving_port_name: str = "http"
    serving_sidecars: tuple[dict[str, Any], ...] = ()
    # Env for every pod of the engine, unless the user set the same name.
    default_env: tuple[EnvEntry, ...] = ()


def _serving_shape(
    ctx: RenderContext,
    engine: PlacedEngine,
    extras: EngineExtras,
    labels: Mapping[str, str],
    leading_env: tuple[EnvEntry, ...] = (),
) -> PodShape:
    """The serving pod of ``engine`` (the Standalone pod or the gang's leader): the one the
    InferencePool selects, with the serving mode's port, env and sidecars."""
    return PodShape(
        labels={**extras.serving_labels, LABEL_SERVING: ctx.replica, **labels},
        serving_port=extras.serving_port,
        serving_port_name=extras.serving_port_name,
        leading_env=leading_env,
        default_env=extras.default_env,
        sidecars=extras.serving_sidecars,
        claim_template=claim_template_for(ctx, engine, serving_member(engine)),
        pool_label=ctx.facts.pool_label(serving_member(engine).node_pool_name),
        model_cache_claim=ctx.model_cache_claim,
    )


def _deployment(ctx: RenderContext, engine: PlacedEngine, extras: EngineExtras) -> dict[str, Any]:
    name = workload_name(ctx.replica, engine.name)
    member = serving_member(engine)
    shape = _serving_shape(ctx, engine, extras, {LABEL_WORKLOAD: name})
    return {
        "apiVersion": DEPLOYMENT_API_VERSION,
        "kind": "Deployment",
        "metadata": ctx.metadata(name),
        "spec": {
            "replicas": engine.copies,
            "selector": {"matchLabels": {LABEL_WORKLOAD: name}},
            "template": pod_template(member, shape),
        },
    }


def _leader_worker_set(
    ctx: RenderContext, engine: PlacedEngine, extras: EngineExtras
) -> dict[str, Any]:
    name = workload_name(ctx.replica, engine.name)
    leader = serving_member(engine)
    worker = worker_member(engine)
    leader_shape = _serving_shape(ctx, engine, extras, {LABEL_LWS_ROLE: "leader"}, GANG_ENV)
    # Workers get no serving label: the InferencePool selects on it, and a worker must never
    # receive requests. Nor a port or probe: only the leader serves HTTP.
    worker_shape = PodShape(
        leading_env=GANG_ENV,
        default_env=extras.default_env,
        claim_template=claim_template_for(ctx, engine, worker),
        pool_label=ctx.facts.pool_label(worker.node_pool_name),
        model_cache_claim=ctx.model_cache_claim,
    )
    return {
        "apiVersion": LWS_API_VERSION,
        "kind": "LeaderWorkerSet",
        "metadata": ctx.metadata(name),
        "spec": {
            "replicas": engine.copies,
            "startupPolicy": GANG_STARTUP_POLICY,
            "leaderWorkerTemplate": {
                "size": gang_size(engine),
                # A lost rank cannot rejoin a running collective; restart the whole gang.
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": pod_template(leader, leader_shape),
                "workerTemplate": pod_template(worker, worker_shape),
            },
        },
    }


def render_workload(
    ctx: RenderContext, engine: PlacedEngine, extras: EngineExtras | None = None
) -> dict[str, Any]:
    extras = extras or EngineExtras()
    if engine.is_gang:
        return _leader_worker_set(ctx, engine, extras)
    return _deployment(ctx, engine, extras)

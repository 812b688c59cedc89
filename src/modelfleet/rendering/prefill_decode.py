"""PrefillDecode serving: what disaggregation adds on top of the Unified rendering.

- The two engines are told apart by ``phase``, never by name.
- Their serving pods carry the llm-d role labels the endpoint picker filters on.
- The decode pods get the llm-d P/D sidecar, which takes the pool-wide port 8000 and forwards to
  the decode engine, moved to the user's ``--port`` (8001 by default).
- Every pod of both engines learns its NIXL side channel (pod IP, port 5557) unless the user
  already set it.
- The endpoint picker runs the disaggregated profile set.

NIXL's shared memory: Modelplane adds a ``nixl-shm`` memory volume but mounts it only when nothing
is mounted at /dev/shm, and its pods always mount ``dshm`` there, so the volume is dead weight.
Here every pod already has /dev/shm backed by the ``dshm`` memory emptyDir (see ``pods``), which
is exactly what NIXL needs, so no second volume is rendered.

Pure: no I/O. The user writes the engine's KV-transfer flags; nothing here injects engine flags.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from modelfleet.api.deployments import Phase, PlacedEngine
from modelfleet.rendering.args import int_flag
from modelfleet.rendering.context import RenderContext
from modelfleet.rendering.engine_workloads import EngineExtras
from modelfleet.rendering.engines import RenderError, serving_member
from modelfleet.rendering.epp_config import (
    CONFIG_KIND,
    plugin,
    scheduling_profile,
    scoring_plugins,
)
from modelfleet.rendering.pods import (
    SERVING_PORT,
    EnvEntry,
    container_port,
    env_field,
    env_value,
    readiness_probe,
)

ROLE_LABEL = "llm-d.ai/role"
INFERENCE_SERVING_LABEL = "llm-d.ai/inference-serving"
APP_LABEL = "app"

SIDECAR_NAME = "pd-sidecar"
DEFAULT_DECODE_ENGINE_PORT = 8001

NIXL_HOST_ENV = "VLLM_NIXL_SIDE_CHANNEL_HOST"
NIXL_PORT_ENV = "VLLM_NIXL_SIDE_CHANNEL_PORT"
NIXL_SIDE_CHANNEL_PORT = 5557
NIXL_ENV: tuple[EnvEntry, ...] = (
    env_field(NIXL_HOST_ENV, "status.podIP"),
    env_value(NIXL_PORT_ENV, str(NIXL_SIDE_CHANNEL_PORT)),
)

PREFILL_FILTER = "prefill-filter"
DECODE_FILTER = "decode-filter"
PD_DECIDER = "prefix-based-pd-decider"
# Prompts with fewer uncached tokens than this are prefilled on the decode pod itself. The
# decider's own default of 0 would never split a request.
NON_CACHED_TOKENS = 16


@dataclass(frozen=True)
class PhaseEngines:
    prefill: PlacedEngine
    decode: PlacedEngine


def phase_engines(engines: Sequence[PlacedEngine]) -> PhaseEngines:
    """The Prefill and the Decode engine, chosen by ``phase``."""
    by_phase: dict[Phase, list[PlacedEngine]] = {phase: [] for phase in Phase}
    for engine in engines:
        if engine.phase is not None:
            by_phase[engine.phase].append(engine)
    prefill, decode = by_phase[Phase.PREFILL], by_phase[Phase.DECODE]
    if len(engines) != 2 or len(prefill) != 1 or len(decode) != 1:
        raise RenderError(
            "serving mode PrefillDecode needs exactly 2 engines: one with phase Prefill and one "
            "with phase Decode"
        )
    return PhaseEngines(prefill=prefill[0], decode=decode[0])


def decode_engine_port(engine: PlacedEngine) -> int:
    """The port the decode engine listens on: the user's ``--port``, 8001 when absent."""
    port = int_flag(
        serving_member(engine).container,
        ("--port",),
        DEFAULT_DECODE_ENGINE_PORT,
        low=1,
        high=65535,
    )
    if port == SERVING_PORT:
        raise RenderError(
            f"the decode engine {engine.name!r} must not listen on port {SERVING_PORT}: the P/D "
            f"sidecar serves there; pass another --port (default {DEFAULT_DECODE_ENGINE_PORT})"
        )
    return port


def pd_sidecar(image: str, engine_port: int) -> dict[str, Any]:
    """The llm-d P/D sidecar, as a native sidecar so it starts before and stops after the
    engine. It serves the pool-wide port and proxies to the engine on ``engine_port``."""
    return {
        "name": SIDECAR_NAME,
        "image": image,
        "args": [
            # The pool's endpoints speak plain HTTP (the InferencePool's default appProtocol).
            "--secure-proxy=false",
            "--kv-connector=nixlv2",
            f"--vllm-port={engine_port}",
        ],
        "ports": [container_port("http", SERVING_PORT)],
        "readinessProbe": readiness_probe(SERVING_PORT),
        "restartPolicy": "Always",
    }


def engine_extras(ctx: RenderContext, engine: PlacedEngine) -> EngineExtras:
    """Labels, ports, sidecar and NIXL env for one engine of a PrefillDecode replica."""
    if engine.phase is None:
        raise RenderError(f"engine {engine.name!r} has no phase under PrefillDecode")
    labels = {
        ROLE_LABEL: engine.phase.value.lower(),
        INFERENCE_SERVING_LABEL: "true",
        APP_LABEL: ctx.replica,
    }
    if engine.phase is Phase.PREFILL:
        return EngineExtras(serving_labels=labels, default_env=NIXL_ENV)
    port = decode_engine_port(engine)
    return EngineExtras(
        serving_labels=labels,
        serving_port=port,
        serving_port_name="engine",
        serving_sidecars=(pd_sidecar(ctx.facts.pd_sidecar_image, port),),
        default_env=NIXL_ENV,
    )


def disaggregated_config(block_size: int, api_version: str) -> dict[str, Any]:
    """The EPP config that splits requests between prefill and decode pods."""
    return {
        "apiVersion": api_version,
        "kind": CONFIG_KIND,
        "plugins": [
            *scoring_plugins(block_size),
            plugin("disagg-headers-handler"),
            plugin(PREFILL_FILTER),
            plugin(DECODE_FILTER),
            plugin(PD_DECIDER, {"nonCachedTokens": NON_CACHED_TOKENS}),
            plugin("disagg-profile-handler", {"deciders": {"prefill": PD_DECIDER}}),
        ],
        "schedulingProfiles": [
            scheduling_profile("prefill", PREFILL_FILTER),
            scheduling_profile("decode", DECODE_FILTER),
        ],
    }

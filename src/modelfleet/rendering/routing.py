"""The routing surface of one replica, identical in shape for both serving modes:
an InferencePool over the replica's serving pods, the endpoint picker that chooses among them,
and an HTTPRoute on the cluster's Gateway at ``/<deployment namespace>/<replica>/``.

Pure: renders dicts; which pods are "serving" is decided by the workload labels (``workloads``).
"""

from __future__ import annotations

from typing import Any

from modelfleet.api.deployments import ModelReplica, ServingMode
from modelfleet.api.naming import LABEL_SERVING
from modelfleet.rendering.context import RenderContext
from modelfleet.rendering.endpoint_picker import GRPC_PORT, POOL_API_GROUP, render_endpoint_picker
from modelfleet.rendering.epp_config import config_api_version, kv_block_size, unified_config
from modelfleet.rendering.names import endpoint_picker_name, pool_name, route_name
from modelfleet.rendering.pods import SERVING_PORT
from modelfleet.rendering.prefill_decode import disaggregated_config, phase_engines

POOL_API_VERSION = f"{POOL_API_GROUP}/v1"
GATEWAY_API_GROUP = "gateway.networking.k8s.io"
ROUTE_API_VERSION = f"{GATEWAY_API_GROUP}/v1"


def epp_config(ctx: RenderContext, replica: ModelReplica) -> dict[str, Any]:
    """The EndpointPickerConfig for the replica's serving mode. The KV block size comes from the
    engine whose cache the picker reasons about: the decode engine under PrefillDecode, the
    first engine otherwise."""
    api_version = config_api_version(ctx.facts)
    engines = replica.spec.engines
    if replica.spec.serving.mode is ServingMode.PREFILL_DECODE:
        decode = phase_engines(engines).decode
        return disaggregated_config(kv_block_size(decode), api_version)
    return unified_config(kv_block_size(engines[0]), api_version)


def _inference_pool(ctx: RenderContext) -> dict[str, Any]:
    return {
        "apiVersion": POOL_API_VERSION,
        "kind": "InferencePool",
        "metadata": ctx.metadata(pool_name(ctx.replica)),
        "spec": {
            # Only serving pods carry this label: Standalone pods and gang leaders.
            "selector": {"matchLabels": {LABEL_SERVING: ctx.replica}},
            "targetPorts": [{"number": SERVING_PORT}],
            "endpointPickerRef": {
                "name": endpoint_picker_name(ctx.replica),
                "port": {"number": GRPC_PORT},
                # A picker outage degrades to plain load balancing instead of failing requests.
                "failureMode": "FailOpen",
            },
        },
    }


def route_path(ctx: RenderContext) -> str:
    """The path prefix the fleet front door forwards this replica's traffic to."""
    return f"/{ctx.deployment_namespace}/{ctx.replica}/"


def _http_route(ctx: RenderContext) -> dict[str, Any]:
    facts = ctx.facts
    return {
        "apiVersion": ROUTE_API_VERSION,
        "kind": "HTTPRoute",
        "metadata": ctx.metadata(route_name(ctx.replica)),
        "spec": {
            "parentRefs": [
                {
                    "group": GATEWAY_API_GROUP,
                    "kind": "Gateway",
                    "name": facts.gateway_name,
                    "namespace": facts.gateway_namespace,
                }
            ],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": route_path(ctx)}}],
                    # The engine serves the OpenAI API at the root.
                    "filters": [
                        {
                            "type": "URLRewrite",
                            "urlRewrite": {
                                "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}
                            },
                        }
                    ],
                    # Both group and kind must be set: they default to a core Service.
                    "backendRefs": [
                        {
                            "group": POOL_API_GROUP,
                            "kind": "InferencePool",
                            "name": pool_name(ctx.replica),
                        }
                    ],
                    # "0s" switches the request timeout off: generation streams for minutes,
                    # and a gateway default (Envoy's is 15s) would cut responses mid-stream.
                    "timeouts": {"request": "0s"},
                }
            ],
        },
    }


def render_routing(ctx: RenderContext, replica: ModelReplica) -> list[dict[str, Any]]:
    """Routing objects in apply order: the picker first, then the pool that names it, then the
    route that sends traffic to the pool."""
    return [
        *render_endpoint_picker(ctx, epp_config(ctx, replica)),
        _inference_pool(ctx),
        _http_route(ctx),
    ]

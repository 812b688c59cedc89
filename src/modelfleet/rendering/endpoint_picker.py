"""The per-replica endpoint picker (EPP, llm-d router): its ServiceAccount, Role, RoleBinding,
ConfigMap, Deployment and Service, all named ``<replica>-epp`` in the workload namespace.

Pure: takes the already-built EndpointPickerConfig and renders dicts. Which config (Unified or
PrefillDecode) is decided by ``routing``.
"""

from __future__ import annotations

from typing import Any

from modelfleet.api.meta import API_GROUP
from modelfleet.api.naming import LABEL_WORKLOAD
from modelfleet.rendering.context import RenderContext
from modelfleet.rendering.epp_config import CONFIG_KEY, config_checksum, config_text
from modelfleet.rendering.names import endpoint_picker_name, pool_name

# Changes whenever the config does, so that a config change rolls the EPP pod: the EPP reads its
# config file once, at start-up.
CONFIG_CHECKSUM_ANNOTATION = f"{API_GROUP}/epp-config-checksum"
POOL_API_GROUP = "inference.networking.k8s.io"
EPP_API_GROUP = "llm-d.ai"
LEGACY_EPP_API_GROUP = "inference.networking.x-k8s.io"
GRPC_PORT = 9002
HEALTH_PORT = 9003
CONFIG_DIR = "/config"
READ_VERBS = ("get", "watch", "list")


def _service_account(ctx: RenderContext, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": ctx.metadata(name)}


def _role(ctx: RenderContext, name: str) -> dict[str, Any]:
    epp_group = LEGACY_EPP_API_GROUP if ctx.facts.legacy_epp_api_group else EPP_API_GROUP
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": ctx.metadata(name),
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": list(READ_VERBS)},
            {
                "apiGroups": [POOL_API_GROUP],
                "resources": ["inferencepools"],
                "verbs": list(READ_VERBS),
            },
            # The EPP reconciles model rewrites as well as objectives (same group); reading
            # both costs nothing and keeps either from being a silent gap.
            {
                "apiGroups": [epp_group],
                "resources": ["inferenceobjectives", "inferencemodelrewrites"],
                "verbs": list(READ_VERBS),
            },
        ],
    }


def _role_binding(ctx: RenderContext, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": ctx.metadata(name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ctx.namespace}],
    }


def _config_map(ctx: RenderContext, name: str, text: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": ctx.metadata(name),
        "data": {CONFIG_KEY: text},
    }


def _deployment(ctx: RenderContext, name: str, checksum: str) -> dict[str, Any]:
    args = [
        f"--pool-name={pool_name(ctx.replica)}",
        f"--pool-namespace={ctx.namespace}",
        f"--pool-group={POOL_API_GROUP}",
        f"--config-file={CONFIG_DIR}/{CONFIG_KEY}",
        f"--grpc-port={GRPC_PORT}",
    ]
    container = {
        "name": "epp",
        "image": ctx.facts.epp_image,
        "args": args,
        "ports": [
            {"name": "grpc", "containerPort": GRPC_PORT, "protocol": "TCP"},
            {"name": "grpc-health", "containerPort": HEALTH_PORT, "protocol": "TCP"},
        ],
        "volumeMounts": [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": ctx.metadata(name),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {LABEL_WORKLOAD: name}},
            "template": {
                "metadata": {
                    "labels": {LABEL_WORKLOAD: name},
                    "annotations": {CONFIG_CHECKSUM_ANNOTATION: checksum},
                },
                "spec": {
                    "serviceAccountName": name,
                    "containers": [container],
                    "volumes": [{"name": "config", "configMap": {"name": name}}],
                },
            },
        },
    }


def _service(ctx: RenderContext, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": ctx.metadata(name),
        "spec": {
            "selector": {LABEL_WORKLOAD: name},
            "ports": [
                {
                    "name": "grpc-ext-proc",
                    "port": GRPC_PORT,
                    "targetPort": GRPC_PORT,
                    "protocol": "TCP",
                    # The gateway speaks gRPC (ext_proc) to the EPP, which needs HTTP/2.
                    "appProtocol": "http2",
                }
            ],
        },
    }


def render_endpoint_picker(ctx: RenderContext, config: dict[str, Any]) -> list[dict[str, Any]]:
    """The EPP's objects in apply order: identity and permissions, config, then the pod and the
    Service the gateway calls."""
    name = endpoint_picker_name(ctx.replica)
    text = config_text(config)
    return [
        _service_account(ctx, name),
        _role(ctx, name),
        _role_binding(ctx, name),
        _config_map(ctx, name, text),
        _deployment(ctx, name, config_checksum(text)),
        _service(ctx, name),
    ]

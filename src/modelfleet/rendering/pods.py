"""The pod template of one engine member: the user's container, passed through verbatim, and
what modelfleet puts around it (serving port and probe, device claim, pool pin, GPU toleration,
shared memory, managed labels, injected env, sidecars).

Pure: a PlacedMember and a PodShape in, a JSON-compatible dict out. It knows nothing about
Deployments, LeaderWorkerSets or routing; callers decide the shape.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from modelfleet.api.deployments import PlacedMember
from modelfleet.api.naming import LABEL_POOL
from modelfleet.rendering.context import sorted_map
from modelfleet.rendering.model_cache import CACHE_MOUNT_PATH, CACHE_VOLUME

# The pool-wide port: the InferencePool's targetPorts and every serving pod agree on it.
SERVING_PORT = 8000
HEALTH_PATH = "/health"
# One pod-level claim covers all of a member's device requests.
DEVICES_CLAIM = "devices"
SHM_VOLUME = "dshm"
SHM_PATH = "/dev/shm"
# Tolerated even by claimless members: GPU node pools carry this taint, and a claimless leader
# still has to land on its GPU pool next to its workers.
GPU_TOLERATION: dict[str, str] = {
    "key": "nvidia.com/gpu",
    "operator": "Exists",
    "effect": "NoSchedule",
}

EnvEntry = dict[str, Any]


def env_value(name: str, value: str) -> EnvEntry:
    return {"name": name, "value": value}


def env_field(name: str, field_path: str) -> EnvEntry:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}


def readiness_probe(port: int) -> dict[str, Any]:
    # Readiness only, no liveness: loading weights can take many minutes, during which the pod
    # must stay out of the pool but must not be killed.
    return {
        "httpGet": {"path": HEALTH_PATH, "port": port},
        "initialDelaySeconds": 30,
        "periodSeconds": 10,
        "timeoutSeconds": 5,
    }


def container_port(name: str, port: int) -> dict[str, Any]:
    return {"name": name, "containerPort": port, "protocol": "TCP"}


@dataclass(frozen=True)
class PodShape:
    """What the renderer adds to one member's pod, beyond what every pod gets."""

    # Managed pod labels; they win over the user's template labels on a key clash.
    labels: Mapping[str, str] = field(default_factory=dict)
    # The port the engine serves on, with a readiness probe; None for pods that do not serve.
    serving_port: int | None = None
    serving_port_name: str = "http"
    # Env placed before the user's (it may be referenced by the user's values).
    leading_env: tuple[EnvEntry, ...] = ()
    # Env placed after the user's, each only when the user did not set that name.
    default_env: tuple[EnvEntry, ...] = ()
    # Native sidecars: init containers with restartPolicy Always.
    sidecars: tuple[dict[str, Any], ...] = ()
    # The ResourceClaimTemplate to claim devices from; None for a claimless member.
    claim_template: str | None = None
    # The node label that pins the pod to its pool (configurable per pool on the cluster).
    pool_label: str = LABEL_POOL
    # The ModelCache volume, mounted read-only at /mnt/models (Modelplane's contract).
    model_cache_claim: str | None = None


def _engine_env(member: PlacedMember, shape: PodShape) -> list[EnvEntry]:
    user = [var.to_wire() for var in member.container.env or []]
    user_names = {var["name"] for var in user}
    defaults = [var for var in shape.default_env if var["name"] not in user_names]
    # Copies: the shape's entries are shared by every pod rendered from it, and a manifest must
    # be a tree of its own that a caller may mutate.
    return [*copy.deepcopy(shape.leading_env), *user, *copy.deepcopy(defaults)]


def _engine_container(member: PlacedMember, shape: PodShape) -> dict[str, Any]:
    user = member.container
    container: dict[str, Any] = {"name": user.name, "image": user.image}
    if user.command is not None:
        container["command"] = list(user.command)
    if user.args is not None:
        container["args"] = list(user.args)
    env = _engine_env(member, shape)
    if env:
        container["env"] = env
    if shape.serving_port is not None:
        container["ports"] = [container_port(shape.serving_port_name, shape.serving_port)]
        container["readinessProbe"] = readiness_probe(shape.serving_port)
    if shape.claim_template is not None:
        container["resources"] = {"claims": [{"name": DEVICES_CLAIM}]}
    container["volumeMounts"] = [{"name": SHM_VOLUME, "mountPath": SHM_PATH}]
    if shape.model_cache_claim is not None:
        # Read-only: many replicas share the volume, and none may change the weights.
        container["volumeMounts"].append(
            {"name": CACHE_VOLUME, "mountPath": CACHE_MOUNT_PATH, "readOnly": True}
        )
    return container


def _template_metadata(member: PlacedMember, shape: PodShape) -> dict[str, Any]:
    user = member.template.metadata
    metadata: dict[str, Any] = {}
    labels = {**user.labels, **shape.labels}
    if labels:
        metadata["labels"] = sorted_map(labels)
    if user.annotations:
        metadata["annotations"] = sorted_map(user.annotations)
    return metadata


def pod_template(member: PlacedMember, shape: PodShape) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if shape.sidecars:
        spec["initContainers"] = copy.deepcopy(list(shape.sidecars))
    spec["containers"] = [_engine_container(member, shape)]
    pull_secrets = member.template.spec.image_pull_secrets
    if pull_secrets:
        spec["imagePullSecrets"] = [secret.to_wire() for secret in pull_secrets]
    spec["nodeSelector"] = {shape.pool_label: member.node_pool_name}
    if shape.claim_template is not None:
        spec["resourceClaims"] = [
            {"name": DEVICES_CLAIM, "resourceClaimTemplateName": shape.claim_template}
        ]
    spec["tolerations"] = [dict(GPU_TOLERATION)]
    # /dev/shm defaults to 64Mi in a container; NCCL and NIXL need far more, so it is backed by
    # memory without a size limit (the pod's memory accounting still applies).
    spec["volumes"] = [{"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}}]
    if shape.model_cache_claim is not None:
        spec["volumes"].append(
            {
                "name": CACHE_VOLUME,
                "persistentVolumeClaim": {"claimName": shape.model_cache_claim, "readOnly": True},
            }
        )
    template: dict[str, Any] = {}
    metadata = _template_metadata(member, shape)
    if metadata:
        template["metadata"] = metadata
    template["spec"] = spec
    return template

"""Which ModelServices would route to a deployment that has no replica yet (scale from zero):
the labels every endpoint of the deployment will carry, and selectors on labels that depend on
placement (cluster, region, replica index) taking any value."""

from __future__ import annotations

from typing import Any

from modelfleet.activities.autoscaler import endpoint_labels, would_route
from modelfleet.api.deployments import ModelDeployment
from modelfleet.api.services import ModelService
from modelfleet.scheduling.stamp import replica_labels


def deployment(labels: dict[str, str]) -> ModelDeployment:
    return ModelDeployment.model_validate(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelDeployment",
            "metadata": {"name": "qwen", "namespace": "ml"},
            "spec": {
                "replicas": 0,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "engines": [
                            {
                                "name": "vllm",
                                "members": [
                                    {
                                        "role": "Standalone",
                                        "template": {
                                            "spec": {
                                                "containers": [
                                                    {"name": "engine", "image": "vllm/x:1"}
                                                ]
                                            }
                                        },
                                    }
                                ],
                            }
                        ]
                    },
                },
            },
        }
    )


def service(*selectors: dict[str, str]) -> ModelService:
    endpoints: list[dict[str, Any]] = [{"selector": {"matchLabels": s}} for s in selectors]
    return ModelService.model_validate(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelService",
            "metadata": {"name": "svc", "namespace": "ml"},
            "spec": {"endpoints": endpoints},
        }
    )


def test_endpoint_labels_are_what_every_replica_is_stamped_with() -> None:
    md = deployment({"model": "qwen3-8b", "tier": "gold"})
    labels = endpoint_labels(md)
    stamped = replica_labels(md, "east", 3)
    # Every fixed label is on a stamped replica with the same value; the rest are placement's.
    assert {k: stamped[k] for k in labels} == labels
    assert set(stamped) - set(labels) == {"modelfleet.dev/cluster", "modelfleet.dev/replica-index"}


def test_services_that_would_take_the_first_replica() -> None:
    labels = endpoint_labels(deployment({"model": "qwen3-8b"}))
    assert would_route(service({"model": "qwen3-8b"}), labels)
    assert would_route(service({"modelfleet.dev/deployment": "qwen"}), labels)
    # A selector pinned to a cluster or region may take it, wherever it lands.
    assert would_route(service({"model": "qwen3-8b", "modelfleet.dev/cluster": "west"}), labels)
    assert would_route(service({"model": "qwen3-8b", "region": "eu"}), labels)
    # Any one entry is enough.
    assert would_route(service({"model": "llama"}, {"model": "qwen3-8b"}), labels)
    assert not would_route(service({"model": "llama"}), labels)
    assert not would_route(service({"model": "qwen3-8b", "tier": "gold"}), labels)
    assert not would_route(service({"modelfleet.dev/deployment": "other"}), labels)

"""Cross-field validation rules: every rule Modelplane's XRDs enforce with CEL, plus modelfleet's
own (rollout strategy, CEL syntax, typed device attributes). Each rule yields a ``FieldError``
with the exact field path, so a user sees every problem at once.

This module holds the entry point and the metadata rules every kind shares; each kind's own rules
live beside it (``class_rules``, ``cluster_rules``, ``workload_rules``, ``serving_rules``,
``autoscalers``, ``parity_rules``). Pure: no I/O. The kinds' rules use the CEL layer's compiler
and quantity parsers so that what validates here is exactly what the scheduler can evaluate.
"""

from __future__ import annotations

from collections.abc import Iterable

from modelfleet.api.autoscalers import ModelAutoscaler, autoscaler_rules
from modelfleet.api.class_rules import inference_class_rules
from modelfleet.api.classes import InferenceClass
from modelfleet.api.cluster_rules import inference_cluster_rules
from modelfleet.api.clusters import InferenceCluster
from modelfleet.api.deployments import ModelDeployment, ModelReplica
from modelfleet.api.field_rules import annotation_errors, label_errors
from modelfleet.api.manifest_errors import FieldError
from modelfleet.api.meta import Resource
from modelfleet.api.parity_rules import parity_rules
from modelfleet.api.services import InferenceGateway, ModelEndpoint, ModelService
from modelfleet.api.serving_rules import (
    inference_gateway_rules,
    model_endpoint_rules,
    model_service_rules,
)
from modelfleet.api.workload_rules import model_deployment_rules, model_replica_rules

__all__ = ["validate"]


def validate(resource: Resource) -> list[FieldError]:
    """Every rule broken by ``resource`` (empty when it is valid)."""
    errors: list[FieldError] = []
    if resource.NAMESPACED is False and resource.metadata.namespace is not None:
        errors.append(
            FieldError(
                ("metadata", "namespace"),
                f"{resource.KIND} is fleet-scoped and must not set a namespace",
            )
        )
    errors.extend(label_errors(("metadata", "labels"), resource.metadata.labels, reserved_ok=True))
    errors.extend(annotation_errors(("metadata", "annotations"), resource.metadata.annotations))
    errors.extend(_kind_rules(resource))
    return errors


def _kind_rules(resource: Resource) -> Iterable[FieldError]:
    """The rules of ``resource``'s own kind."""
    match resource:
        case InferenceClass():
            return inference_class_rules(resource)
        case InferenceCluster():
            return inference_cluster_rules(resource)
        case ModelDeployment():
            return model_deployment_rules(resource)
        case ModelReplica():
            return model_replica_rules(resource)
        case ModelEndpoint():
            return model_endpoint_rules(resource)
        case ModelService():
            return model_service_rules(resource)
        case ModelAutoscaler():
            return autoscaler_rules(resource)
        case InferenceGateway():
            return inference_gateway_rules(resource)
    return parity_rules(resource)

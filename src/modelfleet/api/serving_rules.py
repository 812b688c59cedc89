"""The cross-field rules of the serving kinds: a ModelEndpoint's URL and rewrite path, a
ModelService's selectors, the one InferenceGateway's name, listeners and front-door clusters.
Pure: it may touch the API's models; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlparse

from modelfleet.api.field_rules import label_errors
from modelfleet.api.manifest_errors import FieldError
from modelfleet.api.services import DEFAULT_GATEWAY, InferenceGateway, ModelEndpoint, ModelService

__all__ = ["inference_gateway_rules", "model_endpoint_rules", "model_service_rules"]


def model_endpoint_rules(me: ModelEndpoint) -> Iterator[FieldError]:
    url = urlparse(me.spec.url)
    if url.scheme not in ("http", "https") or not url.hostname:
        yield FieldError(
            ("spec", "url"), f"must be an http(s) URL with a host (got {me.spec.url!r})"
        )
    if not me.spec.rewrite_path.startswith("/"):
        yield FieldError(("spec", "rewritePath"), "must start with '/'")


def model_service_rules(ms: ModelService) -> Iterator[FieldError]:
    for i, ep in enumerate(ms.spec.endpoints):
        yield from label_errors(
            ("spec", "endpoints", i, "selector", "matchLabels"),
            ep.selector.match_labels,
            reserved_ok=True,
        )


def inference_gateway_rules(ig: InferenceGateway) -> Iterator[FieldError]:
    if ig.name != DEFAULT_GATEWAY:
        yield FieldError(
            ("metadata", "name"), f"the fleet has one InferenceGateway, named {DEFAULT_GATEWAY!r}"
        )
    if not ig.spec.listeners:
        yield FieldError(("spec", "listeners"), "at least one HTTP listener is required")
    seen: set[str] = set()
    for i, listener in enumerate(ig.spec.listeners):
        if listener.name in seen:
            yield FieldError(("spec", "listeners", i, "name"), "duplicate listener name")
        seen.add(listener.name)
    doors = {ig.spec.cluster}
    for i, cluster in enumerate(ig.spec.additional_clusters):
        if cluster in doors:
            yield FieldError(
                ("spec", "additionalClusters", i),
                f"cluster {cluster!r} is already a front door"
                + (" (it is spec.cluster)" if cluster == ig.spec.cluster else ""),
            )
        doors.add(cluster)

"""``SelfSubjectAccessReview`` (authorization.k8s.io/v1): the create-only review ``kubectl auth
can-i`` posts. Simulated clusters have no RBAC, so every review is allowed, except what the
cluster's ``deny_access`` fault rules deny (for tests of a client's permission checks).

Development/test emulator only: product code never imports ``modelfleet.sim``. Pure: a review
body and the fault config in, the answered review out; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelfleet.sim.apiserver import status_errors
from modelfleet.sim.faults import FaultConfig

__all__ = ["REVIEW_KEY", "answer_review"]

REVIEW_KEY = "selfsubjectaccessreviews.authorization.k8s.io"


def answer_review(body: Mapping[str, Any], faults: FaultConfig) -> dict[str, Any]:
    """The review with ``status`` filled in (allowed, or denied with the rule's reason)."""
    spec = body.get("spec")
    if not isinstance(spec, Mapping):
        raise status_errors.bad_request("SelfSubjectAccessReview: spec is required")
    attrs = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if isinstance(attrs, Mapping):
        verb = str(attrs.get("verb") or "")
        plural = str(attrs.get("resource") or "")
        group = str(attrs.get("group") or "")
        sub = str(attrs.get("subresource") or "")
        resource = f"{plural}.{group}" if group else plural
        if sub:
            resource = f"{resource}/{sub}"
    elif isinstance(non_resource, Mapping):
        verb = str(non_resource.get("verb") or "")
        resource = str(non_resource.get("path") or "")
    else:
        raise status_errors.bad_request(
            "SelfSubjectAccessReview: exactly one of resourceAttributes or "
            "nonResourceAttributes must be set"
        )
    rule = faults.access_denied(verb, resource)
    status: dict[str, Any] = {"allowed": rule is None}
    if rule is None:
        status["reason"] = "the simulated cluster allows every request"
    else:
        status["denied"] = True
        status["reason"] = f"denied by the simulated cluster's deny_access rule {rule!r}"
    meta = dict(body.get("metadata") or {})
    meta.setdefault("creationTimestamp", None)
    return {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": meta,
        "spec": dict(spec),
        "status": status,
    }

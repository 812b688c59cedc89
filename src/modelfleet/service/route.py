"""A ModelService's route on its front doors: what one door is given (``RoutePlan``: the rendered
manifests, the provider keys, the objects to own and a digest of their content) and what each door
holds (``DoorBook``: the objects applied there, their digest, the door's address and why its last
apply failed). Pure: it may touch the resource API, the contracts' payloads and
``rendering.front_door``; no Temporal, no I/O (the workflow applies and deletes).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from modelfleet.api.naming import workload_namespace
from modelfleet.api.services import ModelService
from modelfleet.contracts.health_watch import ROUTE_DIGEST_ANNOTATION, DoorCheck
from modelfleet.contracts.kube_payloads import ObjectRef
from modelfleet.contracts.wire import WireModel
from modelfleet.rendering.front_door import (
    EndpointRecord,
    FrontDoor,
    api_keys_secret_name,
    front_door_route,
    provider_tokens,
    render_front_door,
)

__all__ = ["DoorBook", "RoutePlan", "plan_route"]


@dataclass(frozen=True)
class RoutePlan:
    manifests: list[dict[str, Any]]
    # Provider key per secret name (the secrets the route's backends read).
    tokens: dict[str, str]
    # Secrets first: deletion runs in reverse, so the route goes before what it uses.
    refs: list[ObjectRef]
    # Weights change the route without changing which objects exist: the content's digest.
    digest: str

    def backends(self) -> dict[str, int]:
        """The route's backends and their weights."""
        route = front_door_route(self.manifests)["spec"]["rules"][0]
        return {b["name"]: b["weight"] for b in route["backendRefs"]}


def plan_route(
    door: FrontDoor,
    spec: ModelService,
    weights: Mapping[str, int],
    endpoints: Sequence[EndpointRecord],
) -> RoutePlan:
    manifests = render_front_door(
        door,
        spec.namespace,
        spec.name,
        weights,
        endpoints,
        auth=spec.spec.auth is not None,
        outlier=spec.spec.outlier_detection,
        retries=spec.spec.retries,
    )
    tokens = provider_tokens(spec.name, weights, endpoints)
    namespace = workload_namespace(spec.namespace)
    secrets = [
        ObjectRef(api_version="v1", kind="Secret", name=name, namespace=namespace)
        for name in ([api_keys_secret_name(spec.name)] if spec.spec.auth else []) + sorted(tokens)
    ]
    refs = secrets + [ObjectRef.of(m) for m in manifests if m["kind"] != "Namespace"]
    digest = hashlib.sha256(json.dumps(manifests, sort_keys=True).encode()).hexdigest()
    # The route says which plan it carries: a health watch compares it at its bound (drift).
    route = next(m for m in manifests if m["kind"] == "HTTPRoute")
    route["metadata"].setdefault("annotations", {})[ROUTE_DIGEST_ANNOTATION] = digest
    return RoutePlan(manifests=manifests, tokens=tokens, refs=refs, digest=digest)


class DoorBook(WireModel):
    """Per front-door cluster: the objects applied there, their content digest, the door's own
    address, and why its last apply failed (absent: it did not). Part of the service's state
    (``service.state``), carried across continue-as-new: a door that already carries a route
    is not written to again, and a delete after a continue-as-new still finds every door.
    Bounded by the gateway's front-door clusters."""

    applied: dict[str, list[ObjectRef]] = {}
    digests: dict[str, str] = {}
    address: dict[str, str] = {}
    error: dict[str, str] = {}

    def current(self, cluster: str, plan: RoutePlan) -> bool:
        """The door already carries exactly ``plan`` (and its address is known)."""
        return (
            self.applied.get(cluster) == plan.refs
            and self.digests.get(cluster) == plan.digest
            and cluster in self.address
        )

    def stale(self, cluster: str, plan: RoutePlan) -> list[ObjectRef]:
        """The objects applied on ``cluster`` that ``plan`` no longer has."""
        keep = set(map(str, plan.refs))
        return [r for r in self.applied.get(cluster, []) if str(r) not in keep]

    def record(self, cluster: str, plan: RoutePlan) -> None:
        self.applied[cluster] = plan.refs
        self.digests[cluster] = plan.digest

    def checks(self, clusters: Sequence[str]) -> list[DoorCheck]:
        """What a health watch reads at its bound: the route of each door in ``clusters``
        that carries an applied route (and did not fail its last apply)."""
        out = []
        for cluster in clusters:
            routes = [r for r in self.applied.get(cluster, []) if r.kind == "HTTPRoute"]
            if routes and cluster in self.digests and cluster not in self.error:
                out.append(
                    DoorCheck(cluster=cluster, route=routes[0], digest=self.digests[cluster])
                )
        return out

    def drifted(self, cluster: str) -> None:
        """The door no longer holds what was applied there: its next reconcile applies it
        again (its objects and address are kept, so nothing is forgotten meanwhile)."""
        self.digests.pop(cluster, None)

    def forget(self, cluster: str) -> None:
        for table in (self.applied, self.digests, self.address, self.error):
            table.pop(cluster, None)

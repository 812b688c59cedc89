"""The gateway side of a simulated cluster, as its Gateway API implementation and inference
extension would act: Gateways get an address and Accepted/Programmed, HTTPRoutes and
InferencePools get accepted parent statuses.

Development/test emulator only: product code never imports ``modelfleet.sim``. Writes statuses
through the cluster's store (:class:`~.context.ClusterContext`); no traffic is routed (serving
engines and a gateway that routes belong in ``modelfleet.sim.serving``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from modelfleet.sim.apiserver.object_table import now_rfc3339
from modelfleet.sim.controllers.context import ClusterContext
from modelfleet.sim.controllers.object_helpers import condition, merge_conditions
from modelfleet.sim.infrastructure import GATEWAY_CONTROLLER, GATEWAY_NAME, SYSTEM_NAMESPACE

__all__ = ["GatewayController"]


class GatewayController:
    """Statuses of Gateways, HTTPRoutes and InferencePools."""

    def __init__(self, ctx: ClusterContext, gateway_address: str) -> None:
        self._ctx = ctx
        self.gateway_address = gateway_address

    async def reconcile_gateway(self, namespace: str, name: str) -> None:
        gateway = self._ctx.peek("gateway", namespace, name)
        if gateway is None:
            return
        status = gateway.get("status") or {}
        if status.get("addresses"):
            return
        # Any other Gateway someone creates gets a neighbour of the cluster's address, so that
        # addresses stay deterministic and never collide with the serving gateway's.
        address = (
            self.gateway_address
            if (namespace, name) == (SYSTEM_NAMESPACE, GATEWAY_NAME)
            else self.gateway_address.rsplit(".", 1)[0] + f".{10 + len(name) % 200}"
        )
        now = now_rfc3339()
        await self._ctx.write_status(
            "gateway",
            gateway,
            {
                "addresses": [{"type": "IPAddress", "value": address}],
                "conditions": merge_conditions(
                    status.get("conditions"),
                    [
                        condition("Accepted", True, "Accepted", "simulated gateway"),
                        condition("Programmed", True, "Programmed", "simulated gateway"),
                    ],
                    now,
                ),
            },
        )

    def _parent_status(
        self,
        parent_ref: Mapping[str, Any],
        old: Sequence[Mapping[str, Any]] | None,
        now: str,
        generation: int | None = None,
    ) -> dict[str, Any]:
        conditions = [
            condition("Accepted", True, "Accepted", "simulated"),
            condition("ResolvedRefs", True, "ResolvedRefs", "simulated"),
        ]
        if generation is not None:
            # As Gateway API controllers do: the route generation this status describes.
            for c in conditions:
                c["observedGeneration"] = generation
        return {
            "parentRef": dict(parent_ref),
            "controllerName": GATEWAY_CONTROLLER,
            "conditions": merge_conditions(old, conditions, now),
        }

    async def reconcile_route(self, namespace: str, name: str) -> None:
        route = self._ctx.peek("route", namespace, name)
        if route is None:
            return
        now = now_rfc3339()
        old = {
            str(p.get("parentRef")): p.get("conditions")
            for p in (route.get("status") or {}).get("parents") or []
        }
        parents = []
        for ref in (route.get("spec") or {}).get("parentRefs") or []:
            parent = {
                "group": "gateway.networking.k8s.io",
                "kind": "Gateway",
                "namespace": namespace,
                **ref,
            }
            generation = (route.get("metadata") or {}).get("generation")
            parents.append(
                self._parent_status(
                    parent,
                    old.get(str(parent)),
                    now,
                    int(generation) if generation is not None else None,
                )
            )
        await self._ctx.write_status("route", route, {"parents": parents})

    async def reconcile_pool(self, namespace: str, name: str) -> None:
        pool = self._ctx.peek("pool", namespace, name)
        if pool is None:
            return
        gateways: list[dict[str, Any]] = []
        for route in self._ctx.store.list_objects(self._ctx.rt("route"), namespace=namespace).items:
            spec = route.get("spec") or {}
            refs_pool = any(
                b.get("kind") == "InferencePool" and b.get("name") == name
                for rule in spec.get("rules") or []
                for b in rule.get("backendRefs") or []
            )
            if not refs_pool:
                continue
            for ref in spec.get("parentRefs") or []:
                parent = {
                    "group": "gateway.networking.k8s.io",
                    "kind": "Gateway",
                    "namespace": str(ref.get("namespace") or namespace),
                    "name": str(ref.get("name")),
                }
                if parent not in gateways:
                    gateways.append(parent)
        if not gateways:
            # Until a route attaches it, report it against the cluster's gateway, which is where
            # every modelfleet route goes; it keeps "accepted" meaningful in isolation.
            gateways = [
                {
                    "group": "gateway.networking.k8s.io",
                    "kind": "Gateway",
                    "namespace": SYSTEM_NAMESPACE,
                    "name": GATEWAY_NAME,
                }
            ]
        now = now_rfc3339()
        old = {
            str(p.get("parentRef")): p.get("conditions")
            for p in (pool.get("status") or {}).get("parents") or []
        }
        parents = [self._parent_status(g, old.get(str(g)), now) for g in gateways]
        await self._ctx.write_status("pool", pool, {"parents": parents})

"""A local fake of Azure Resource Manager's ``Microsoft.ContainerService`` API, for the official
``azure-mgmt-containerservice`` client (``ContainerServiceClient(base_url="http://127.0.0.1:PORT")``).

Served, under ``/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.ContainerService``:
``managedClusters/{name}`` (PUT, GET, DELETE), its ``agentPools`` (list) and ``agentPools/{pool}``
(PUT, GET, DELETE), and ``managedClusters/{name}/listClusterUserCredential`` (POST); plus the
long-running operations' status at ``/subscriptions/{sub}/providers/Microsoft.ContainerService/
locations/{location}/operations/{id}``.

As ARM does: a PUT answers 201 (created) or 200 (updated) with the resource in
``provisioningState`` Creating/Updating and an ``Azure-AsyncOperation`` header; a DELETE answers
202 with ``Azure-AsyncOperation`` and ``Location``. The operation's status goes InProgress ->
Succeeded (or Failed with an ARM ``error``) over ``polls`` reads of it or of the resource, and
only then does the resource change: a finished cluster gets an emulated API server (its FQDN
its URL), a finished agent pool its Nodes and ResourceSlices, a finished delete removes them.
While an operation runs on a cluster, another mutating call on it is refused (409
``OperationNotAllowed``), as AKS does. Errors on demand come from ``CloudFaults`` (operations
named by their ARM operation IDs, ``AgentPools_CreateOrUpdate`` and the like), answered in ARM's
shapes (``arm``).

Every call must carry ``Authorization: Bearer <token>`` when built with ``token`` (401
``InvalidAuthenticationToken`` otherwise), so a test can tell the worker used its credential.

Development/test emulator only: product code never imports ``modelfleet.sim``, and this module
imports nothing of the product. Binds one loopback port; all state is in memory.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from modelfleet.sim.clouds.arm import (
    API_VERSION,
    CALL_ERRORS,
    OPERATION_ERRORS,
    PROVIDER,
    ArmError,
    Operation,
    agent_pool_json,
    arm_error,
    node_pool,
    now,
    operation_json,
    quota_family,
    refused,
    user_kubeconfig,
)
from modelfleet.sim.clouds.faults import (
    CloudFaults,
    ErrorKind,
    FaultStage,
    Stockouts,
    admin_faults,
    admin_stockouts,
)
from modelfleet.sim.clouds.kube import CloudKube

__all__ = ["FakeAKS"]


@dataclass
class _Cluster:
    body: dict[str, Any]
    pools: dict[str, dict[str, Any]] = field(default_factory=dict)


class FakeAKS:
    """The ARM ContainerService fake. Call :meth:`app` and serve it (see ``SimulatedClouds``)."""

    def __init__(self, kube: CloudKube, *, polls: int = 2, token: str | None = None) -> None:
        self.kube = kube
        self.polls = polls
        self.token = token
        self.faults = CloudFaults()
        self.stockouts = Stockouts()
        self.clusters: dict[tuple[str, str, str], _Cluster] = {}
        self.operations: dict[str, Operation] = {}
        # Every mutating call ("AgentPools_CreateOrUpdate gpua100"), for tests.
        self.calls: list[str] = []
        # Reads ("ManagedClusters_ListClusterUserCredential NAME") held until their event is set.
        self.stall: dict[str, asyncio.Event] = {}
        self._ids = itertools.count(1)
        self._base = ""

    # -- inspection (tests) -----------------------------------------------------------------

    def cluster_names(self) -> list[str]:
        return sorted(name for _, _, name in self.clusters)

    def _entry(self, cluster: str) -> _Cluster | None:
        for (_, _, name), entry in self.clusters.items():
            if name == cluster:
                return entry
        return None

    def pool_names(self, cluster: str) -> list[str]:
        entry = self._entry(cluster)
        return sorted(entry.pools) if entry is not None else []

    def pool(self, cluster: str, pool: str) -> dict[str, Any]:
        entry = self._entry(cluster)
        if entry is None:
            raise KeyError(cluster)
        return entry.pools[pool]

    def cluster(self, cluster: str) -> dict[str, Any]:
        entry = self._entry(cluster)
        if entry is None:
            raise KeyError(cluster)
        return entry.body

    # -- the app ----------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._errors])
        rg = "/subscriptions/{sub}/resourceGroups/{rg}/" + PROVIDER
        mc = rg + "/managedClusters/{cluster}"
        app.router.add_put(mc, self._put_cluster)
        app.router.add_get(mc, self._get_cluster)
        app.router.add_delete(mc, self._delete_cluster)
        app.router.add_get(rg + "/managedClusters", self._list_clusters)
        app.router.add_post(mc + "/listClusterUserCredential", self._user_credential)
        app.router.add_get(mc + "/agentPools", self._list_pools)
        app.router.add_put(mc + "/agentPools/{pool}", self._put_pool)
        app.router.add_get(mc + "/agentPools/{pool}", self._get_pool)
        app.router.add_delete(mc + "/agentPools/{pool}", self._delete_pool)
        app.router.add_get(
            "/subscriptions/{sub}/" + PROVIDER + "/locations/{location}/operations/{op}",
            self._get_operation,
        )
        app.router.add_route("*", "/_admin/faults", self._admin)
        app.router.add_route("*", "/_admin/stockouts", self._admin_stockouts)
        return app

    async def _admin(self, request: web.Request) -> web.StreamResponse:
        return await admin_faults(request, self.faults)

    async def _admin_stockouts(self, request: web.Request) -> web.StreamResponse:
        return await admin_stockouts(request, self.stockouts)

    @web.middleware
    async def _errors(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path.startswith("/_admin/"):
            admin: web.StreamResponse = await handler(request)
            return admin
        self._base = f"{request.scheme}://{request.host}"
        refusal = refused(request, self.token)
        if refusal is not None:
            return refusal
        try:
            response: web.StreamResponse = await handler(request)
            return response
        except ArmError as exc:
            return arm_error(exc.status, exc.code, exc.message)

    # -- helpers ----------------------------------------------------------------------------

    def _key(self, request: web.Request) -> tuple[str, str, str]:
        m = request.match_info
        # Resource group names are case-insensitive in ARM.
        return (m["sub"], m["rg"].lower(), m["cluster"])

    def _scope(self, request: web.Request) -> str:
        sub, rg, cluster = self._key(request)
        return f"/subscriptions/{sub}/resourceGroups/{rg}/{PROVIDER}/managedClusters/{cluster}"

    def _cluster(self, request: web.Request) -> _Cluster:
        entry = self.clusters.get(self._key(request))
        if entry is None:
            raise ArmError(
                404,
                "ResourceNotFound",
                f"The Resource 'Microsoft.ContainerService/managedClusters/"
                f"{request.match_info['cluster']}' under resource group "
                f"'{request.match_info['rg']}' was not found.",
            )
        return entry

    def _fault(self, operation: str, target: str, words: dict[str, str]) -> ErrorKind | None:
        self.calls.append(f"{operation} {target}")
        kind = self.faults.take(operation, target, FaultStage.CALL)
        if kind is not None:
            status, code, message = CALL_ERRORS[kind]
            raise ArmError(status, code, message.format(**words))
        return self.faults.take(operation, target, FaultStage.OPERATION)

    def _busy(self, key: tuple[str, str, str], kind: str, pool: str | None) -> Operation | None:
        """The running operation of the same kind on the same target (a repeated call joins
        it); any other running operation on the cluster refuses the call."""
        for op in self.operations.values():
            if op.key != key or op.status != "InProgress":
                continue
            if op.kind == kind and op.pool == pool:
                return op
            raise ArmError(
                409,
                "OperationNotAllowed",
                f"Operation is not allowed because there's an in progress {op.kind} operation "
                f"on managed cluster {key[2]}. Please wait for it to finish.",
            )
        return None

    def _start(
        self,
        request: web.Request,
        kind: str,
        pool: str | None,
        fault: ErrorKind | None,
        words: dict[str, str],
    ) -> Operation:
        key = self._key(request)
        entry = self.clusters.get(key)
        location = str((entry.body if entry else {}).get("location", "westeurope"))
        op_id = f"{next(self._ids):08d}-0000-4000-8000-{kind.replace('-', '')[:12]:0>12}"
        op = Operation(op_id, location, key[0], kind, key, pool, fault, words)
        self.operations[op_id] = op
        return op

    def _headers(self, op: Operation) -> dict[str, str]:
        url = (
            f"{self._base}/subscriptions/{op.subscription}/{PROVIDER}/locations/"
            f"{op.location}/operations/{op.id}?api-version={API_VERSION}"
        )
        return {"Azure-AsyncOperation": url}

    async def _tick(self, key: tuple[str, str, str], pool: str | None = None) -> None:
        """A read of a resource advances the operations running on it (Azure works on them
        whether or not anyone polls)."""
        for op in list(self.operations.values()):
            if op.key == key and op.status == "InProgress" and (pool is None or op.pool == pool):
                await self._advance(op)

    async def _advance(self, op: Operation) -> None:
        if op.status != "InProgress":
            return
        op.polls += 1
        if op.polls <= self.polls:
            return
        op.end = now()
        entry = self.clusters.get(op.key)
        if op.fault is not None:
            code, message = OPERATION_ERRORS.get(
                op.fault, (CALL_ERRORS[op.fault][1], CALL_ERRORS[op.fault][2])
            )
            op.status, op.error = "Failed", (code, message.format(**op.words))
            if entry is not None:
                target = entry.pools.get(op.pool, {}) if op.pool else entry.body
                if target:
                    target["properties"]["provisioningState"] = "Failed"
            return
        op.status = "Succeeded"
        if entry is None:
            return
        cluster = op.key[2]
        if op.kind == "create-cluster":
            url = await self.kube.create_cluster(cluster)
            props = entry.body["properties"]
            props["provisioningState"] = "Succeeded"
            props["fqdn"] = urlsplit(url).netloc
            props["powerState"] = {"code": "Running"}
            for pool in entry.pools.values():
                await self._register(cluster, pool)
        elif op.kind == "put-pool" and op.pool in entry.pools:
            pool = entry.pools[op.pool]
            if self.kube.size(cluster, op.pool) and op.pool is not None:
                await self.kube.resize_pool(cluster, op.pool, int(pool["properties"]["count"]))
                pool["properties"]["provisioningState"] = "Succeeded"
            else:
                await self._register(cluster, pool)
        elif op.kind == "delete-pool" and op.pool is not None:
            entry.pools.pop(op.pool, None)
            await self.kube.remove_pool(cluster, op.pool)
        elif op.kind == "delete-cluster":
            self.clusters.pop(op.key, None)
            await self.kube.delete_cluster(cluster)

    async def _register(self, cluster: str, pool: dict[str, Any]) -> None:
        props = pool["properties"]
        props["provisioningState"] = "Succeeded"
        props["powerState"] = {"code": "Running"}
        if props.get("mode") == "System":
            return
        await self.kube.add_pool(cluster, node_pool(pool))

    # -- managed clusters -------------------------------------------------------------------

    async def _put_cluster(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        key = self._key(request)
        name = key[2]
        location = str(body.get("location") or "")
        props = dict(body.get("properties") or {})
        profiles = list(props.pop("agentPoolProfiles", None) or [])
        if not location or not profiles:
            raise ArmError(
                400,
                "InvalidParameter",
                "The managed cluster needs a location and at least one agent pool profile.",
            )
        words = {
            "location": location,
            "vm": str(profiles[0].get("vmSize", "")),
            "family": "standardDSv5Family",
            "scope": self._scope(request),
        }
        fault = self._fault("ManagedClusters_CreateOrUpdate", name, words)
        existing = self.clusters.get(key)
        if existing is not None:
            joined = self._busy(key, "create-cluster", None)
            if joined is None:
                raise ArmError(
                    409,
                    "OperationNotAllowed",
                    "Updating a managed cluster is not supported by this emulator.",
                )
            return web.json_response(existing.body, status=200, headers=self._headers(joined))
        pools = {}
        for profile in profiles:
            pool_name = str(profile.get("name", ""))
            pool_props = {k: v for k, v in profile.items() if k != "name"}
            pool_props["provisioningState"] = "Creating"
            pools[pool_name] = agent_pool_json(self._scope(request), pool_name, pool_props)
        cluster = {
            "id": self._scope(request),
            "name": name,
            "type": "Microsoft.ContainerService/ManagedClusters",
            "location": location,
            "tags": dict(body.get("tags") or {}),
            "identity": body.get("identity") or {"type": "SystemAssigned"},
            "properties": {
                **props,
                "provisioningState": "Creating",
                "currentKubernetesVersion": props.get("kubernetesVersion", "1.34"),
                "nodeResourceGroup": f"MC_{key[1]}_{name}_{location}",
                "agentPoolProfiles": [{"name": n, **p["properties"]} for n, p in pools.items()],
            },
        }
        self.clusters[key] = _Cluster(cluster, pools)
        op = self._start(request, "create-cluster", None, fault, words)
        return web.json_response(cluster, status=201, headers=self._headers(op))

    async def _get_cluster(self, request: web.Request) -> web.StreamResponse:
        key = self._key(request)
        await self._tick(key)
        entry = self._cluster(request)
        body = dict(entry.body)
        body["properties"] = {
            **entry.body["properties"],
            "agentPoolProfiles": [
                {"name": n, **p["properties"]} for n, p in sorted(entry.pools.items())
            ],
        }
        return web.json_response(body)

    async def _list_clusters(self, request: web.Request) -> web.StreamResponse:
        m = request.match_info
        items = [
            c.body
            for (sub, rg, _), c in sorted(self.clusters.items())
            if (sub, rg) == (m["sub"], m["rg"].lower())
        ]
        return web.json_response({"value": items})

    async def _delete_cluster(self, request: web.Request) -> web.StreamResponse:
        key = self._key(request)
        words = {"location": "", "vm": "", "family": "", "scope": self._scope(request)}
        fault = self._fault("ManagedClusters_Delete", key[2], words)
        entry = self.clusters.get(key)
        if entry is None:
            # ARM answers a DELETE of nothing with 204.
            return web.Response(status=204)
        op = self._busy(key, "delete-cluster", None)
        if op is None:
            entry.body["properties"]["provisioningState"] = "Deleting"
            op = self._start(request, "delete-cluster", None, fault, words)
        headers = self._headers(op)
        headers["Location"] = headers["Azure-AsyncOperation"]
        return web.Response(status=202, headers=headers)

    async def _user_credential(self, request: web.Request) -> web.StreamResponse:
        call = f"ManagedClusters_ListClusterUserCredential {request.match_info['cluster']}"
        gate = self.stall.get(call)
        if gate is not None:
            await gate.wait()
        entry = self._cluster(request)
        name = self._key(request)[2]
        if entry.body["properties"].get("provisioningState") != "Succeeded":
            raise ArmError(
                409,
                "OperationNotAllowed",
                f"Managed cluster {name} is not in Succeeded state; credentials are not ready.",
            )
        value = user_kubeconfig(
            self.kube.url(name),
            self._key(request)[1],
            name,
            f"sim-aks-user-token-{name}-{next(self._ids)}",
        )
        return web.json_response({"kubeconfigs": [{"name": "clusterUser", "value": value}]})

    # -- agent pools ------------------------------------------------------------------------

    async def _list_pools(self, request: web.Request) -> web.StreamResponse:
        await self._tick(self._key(request))
        entry = self._cluster(request)
        return web.json_response({"value": [entry.pools[n] for n in sorted(entry.pools)]})

    async def _get_pool(self, request: web.Request) -> web.StreamResponse:
        pool = request.match_info["pool"]
        await self._tick(self._key(request), pool)
        entry = self._cluster(request)
        if pool not in entry.pools:
            raise ArmError(
                404,
                "NotFound",
                f"Agent pool {pool} of managed cluster {self._key(request)[2]} was not found.",
            )
        return web.json_response(entry.pools[pool])

    async def _put_pool(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        pool = request.match_info["pool"]
        key = self._key(request)
        props = dict(body.get("properties") or {})
        entry = self.clusters.get(key)
        location = str((entry.body if entry else {}).get("location", ""))
        vm = str(props.get("vmSize", ""))
        words = {
            "location": location,
            "vm": vm,
            "family": quota_family(vm),
            "scope": f"{self._scope(request)}/agentPools/{pool}",
        }
        fault = self._fault("AgentPools_CreateOrUpdate", pool, words)
        entry = self._cluster(request)
        state = entry.body["properties"].get("provisioningState")
        if state != "Succeeded":
            raise ArmError(
                409,
                "OperationNotAllowed",
                f"Managed cluster {key[2]} is in {state} state; agent pools can be changed once "
                "it has Succeeded.",
            )
        if not vm:
            raise ArmError(400, "InvalidParameter", "properties.vmSize is required.")
        if props.get("enableAutoScaling") and not (
            int(props.get("minCount", 0)) <= int(props.get("count", 0)) <= int(props["maxCount"])
        ):
            raise ArmError(
                400,
                "InvalidParameter",
                "The value of parameter agentPoolProfile.count should be within minCount and "
                "maxCount when autoscaling is enabled.",
            )
        joined = self._busy(key, "put-pool", pool)
        if joined is not None:
            return web.json_response(entry.pools[pool], status=200, headers=self._headers(joined))
        existed = pool in entry.pools
        zones = [str(z) for z in props.get("availabilityZones") or []]
        if fault is None and not existed and self.stockouts.exhausted(zones, vm) is not None:
            # Accepted, then the scale set cannot allocate the VM size in the zone.
            fault = ErrorKind.STOCKOUT
        props["provisioningState"] = "Updating" if existed else "Creating"
        entry.pools[pool] = agent_pool_json(self._scope(request), pool, props)
        op = self._start(request, "put-pool", pool, fault, words)
        return web.json_response(
            entry.pools[pool], status=200 if existed else 201, headers=self._headers(op)
        )

    async def _delete_pool(self, request: web.Request) -> web.StreamResponse:
        pool = request.match_info["pool"]
        key = self._key(request)
        words = {"location": "", "vm": "", "family": "", "scope": self._scope(request)}
        fault = self._fault("AgentPools_Delete", pool, words)
        entry = self._cluster(request)
        if pool not in entry.pools:
            return web.Response(status=204)
        op = self._busy(key, "delete-pool", pool)
        if op is None:
            entry.pools[pool]["properties"]["provisioningState"] = "Deleting"
            op = self._start(request, "delete-pool", pool, fault, words)
        headers = self._headers(op)
        headers["Location"] = headers["Azure-AsyncOperation"]
        return web.Response(status=202, headers=headers)

    async def _get_operation(self, request: web.Request) -> web.StreamResponse:
        op = self.operations.get(request.match_info["op"])
        if op is None:
            raise ArmError(404, "NotFound", f"Operation {request.match_info['op']} not found.")
        await self._advance(op)
        return web.json_response(operation_json(op))

"""A local fake of the GKE container v1 REST API, for the official ``google-cloud-container``
client on its REST transport (``client_options={"api_endpoint": "http://127.0.0.1:PORT"}``).

Served: ``projects/*/locations/*/clusters`` and ``.../clusters/*/nodePools`` (create, get, list,
delete; ``:setSize`` and ``:setAutoscaling`` on a pool) and ``projects/*/locations/*/operations/*``
(get). Long-running operations go PENDING ->
RUNNING -> DONE over ``polls_per_operation`` reads, and only then does the resource change state
(PROVISIONING -> RUNNING; a finished cluster gets an emulated API server, a finished node pool
its Nodes and ResourceSlices). While a cluster has an operation in flight, another mutating call
on it is refused with FAILED_PRECONDITION, as GKE does. Errors on demand come from
:class:`~modelfleet.sim.clouds.faults.CloudFaults`, answered in Google's JSON error shape
(``error.code/status/message``, ``errors[].reason``, an ``ErrorInfo`` detail) or, at the
operation stage, as a DONE operation carrying a ``google.rpc.Status``.

When built with ``token``, every call must carry ``Authorization: Bearer <token>`` (401
otherwise), so a test can tell that the worker minted and used credentials.

Development/test emulator only: product code never imports ``modelfleet.sim``. Binds one
loopback port; all state is in memory.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from modelfleet.sim.clouds.faults import (
    CloudFaults,
    ErrorKind,
    FaultStage,
    Stockouts,
    admin_faults,
    admin_stockouts,
)
from modelfleet.sim.clouds.google_errors import (
    ERRORS,
    MESSAGES,
    OPERATION_CODES,
    FailError,
    google_error,
)
from modelfleet.sim.clouds.kube import CloudKube, CloudNodePool

__all__ = ["FakeGKE"]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _PreconditionError(Exception):
    pass


@dataclass
class _Operation:
    name: str
    location: str
    project: str
    kind: str  # CREATE_CLUSTER, CREATE_NODE_POOL, DELETE_CLUSTER, DELETE_NODE_POOL
    cluster: str
    pool: str | None
    fault: ErrorKind | None
    polls: int = 0
    done: bool = False
    error: ErrorKind | None = None
    start: str = field(default_factory=_now)
    end: str | None = None
    # What an update operation sets (setSize's nodeCount, setAutoscaling's autoscaling).
    change: dict[str, Any] = field(default_factory=dict)
    # The error's own words when they name something (the stocked-out zone).
    message: str | None = None


@dataclass
class _Cluster:
    body: dict[str, Any]
    pools: dict[str, dict[str, Any]] = field(default_factory=dict)


class FakeGKE:
    """The container v1 API fake. Call :meth:`app` and serve it (see ``SimulatedClouds``)."""

    def __init__(
        self, kube: CloudKube, *, polls_per_operation: int = 2, token: str | None = None
    ) -> None:
        self.kube = kube
        self.polls = polls_per_operation
        self.token = token
        self.faults = CloudFaults()
        self.stockouts = Stockouts()
        self.clusters: dict[tuple[str, str, str], _Cluster] = {}
        self.operations: dict[str, _Operation] = {}
        self.calls: list[str] = []
        # Calls ("getCluster NAME") held until their event is set: a test's way to have a
        # worker die while it waits on the cloud.
        self.stall: dict[str, asyncio.Event] = {}
        self._ids = itertools.count(1)

    # -- inspection (tests) -----------------------------------------------------------------

    def cluster_names(self) -> list[str]:
        return sorted(c for _, _, c in self.clusters)

    def pool_names(self, cluster: str) -> list[str]:
        for (_, _, name), entry in self.clusters.items():
            if name == cluster:
                return sorted(entry.pools)
        return []

    def pool(self, cluster: str, pool: str) -> dict[str, Any]:
        for (_, _, name), entry in self.clusters.items():
            if name == cluster:
                return entry.pools[pool]
        raise KeyError(cluster)

    # -- the app ----------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._errors])
        base = "/v1/projects/{project}/locations/{location}"
        app.router.add_post(base + "/clusters", self._create_cluster)
        app.router.add_get(base + "/clusters", self._list_clusters)
        app.router.add_get(base + "/clusters/{cluster}", self._get_cluster)
        app.router.add_delete(base + "/clusters/{cluster}", self._delete_cluster)
        app.router.add_post(base + "/clusters/{cluster}/nodePools", self._create_pool)
        app.router.add_get(base + "/clusters/{cluster}/nodePools", self._list_pools)
        app.router.add_get(base + "/clusters/{cluster}/nodePools/{pool}", self._get_pool)
        app.router.add_delete(base + "/clusters/{cluster}/nodePools/{pool}", self._delete_pool)
        pool_verb = base + "/clusters/{cluster}/nodePools/{pool:[^/:]+}:"
        app.router.add_post(pool_verb + "setSize", self._set_size)
        app.router.add_post(pool_verb + "setAutoscaling", self._set_autoscaling)
        app.router.add_get(base + "/operations/{operation}", self._get_operation)
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
        if self.token is not None and request.headers.get("Authorization") != (
            f"Bearer {self.token}"
        ):
            return google_error(401, "UNAUTHENTICATED", "Request had invalid authentication", "")
        try:
            response: web.StreamResponse = await handler(request)
            return response
        except FailError as exc:
            status, code, _, reason = ERRORS[exc.kind]
            return google_error(status, code, exc.message, reason)
        except _PreconditionError as exc:
            return google_error(400, "FAILED_PRECONDITION", str(exc), "failedPrecondition")
        except KeyError as exc:
            return google_error(404, "NOT_FOUND", f"Not found: {exc.args[0]}.", "notFound")

    # -- helpers ----------------------------------------------------------------------------

    def _key(self, request: web.Request) -> tuple[str, str, str]:
        m = request.match_info
        return (m["project"], m["location"], m["cluster"])

    def _cluster(self, request: web.Request) -> _Cluster:
        key = self._key(request)
        entry = self.clusters.get(key)
        if entry is None:
            raise KeyError(f"projects/{key[0]}/locations/{key[1]}/clusters/{key[2]}")
        return entry

    def _fault(self, operation: str, target: str) -> ErrorKind | None:
        self.calls.append(f"{operation} {target}")
        kind = self.faults.take(operation, target, FaultStage.CALL)
        if kind is not None:
            raise FailError(kind)
        return self.faults.take(operation, target, FaultStage.OPERATION)

    def _busy(self, project: str, location: str, cluster: str) -> None:
        for op in self.operations.values():
            if (op.project, op.location, op.cluster) == (project, location, cluster) and (
                not op.done
            ):
                raise _PreconditionError(
                    f"Cluster is running incompatible operation "
                    f"projects/{project}/locations/{location}/operations/{op.name}."
                )

    def _start(
        self, request: web.Request, kind: str, cluster: str, pool: str | None, fault: Any
    ) -> _Operation:
        m = request.match_info
        name = f"operation-{next(self._ids)}-{kind.lower().replace('_', '-')}"
        op = _Operation(name, m["location"], m["project"], kind, cluster, pool, fault)
        self.operations[name] = op
        return op

    def _op_json(self, op: _Operation) -> dict[str, Any]:
        status = "DONE" if op.done else ("PENDING" if op.polls == 0 else "RUNNING")
        base = f"projects/{op.project}/locations/{op.location}"
        target = f"{base}/clusters/{op.cluster}" + (f"/nodePools/{op.pool}" if op.pool else "")
        out: dict[str, Any] = {
            "name": op.name,
            "zone": op.location,
            "location": op.location,
            "operationType": op.kind,
            "status": status,
            "selfLink": f"https://container.googleapis.com/v1/{base}/operations/{op.name}",
            "targetLink": f"https://container.googleapis.com/v1/{target}",
            "startTime": op.start,
        }
        if op.end:
            out["endTime"] = op.end
        if op.error is not None:
            number = OPERATION_CODES.get(op.error, ERRORS[op.error][2])
            message = op.message or MESSAGES[op.error]
            out["error"] = {"code": number, "message": message}
            out["statusMessage"] = message
        return out

    async def _advance(self, op: _Operation) -> None:
        """One poll of the operation; at the last it finishes and the resource changes."""
        if op.done:
            return
        op.polls += 1
        if op.polls <= self.polls:
            return
        op.done, op.end = True, _now()
        entry = self.clusters.get((op.project, op.location, op.cluster))
        if op.fault is not None:
            op.error = op.fault
            if entry is not None:
                target = entry.pools.get(op.pool, {}) if op.pool else entry.body
                if target:
                    target["status"] = "ERROR"
                    target["statusMessage"] = op.message or MESSAGES[op.fault]
            return
        if entry is None:
            return
        if op.kind == "CREATE_CLUSTER":
            url = await self.kube.create_cluster(op.cluster)
            entry.body["status"] = "RUNNING"
            # A plain-http emulator: the endpoint carries its scheme (a real one is an IP).
            entry.body["endpoint"] = url
            for pool in list(entry.pools.values()):
                await self._register(op.cluster, pool)
        elif op.kind == "CREATE_NODE_POOL" and op.pool in entry.pools:
            await self._register(op.cluster, entry.pools[op.pool])
        elif op.kind == "DELETE_NODE_POOL" and op.pool is not None:
            entry.pools.pop(op.pool, None)
            await self.kube.remove_pool(op.cluster, op.pool)
        elif op.kind == "SET_NODE_POOL_SIZE" and op.pool is not None:
            # GKE resizes the pool's instance groups; the NodePool keeps its initialNodeCount.
            await self.kube.resize_pool(op.cluster, op.pool, int(op.change.get("nodeCount", 0)))
        elif op.kind == "SET_NODE_POOL_AUTOSCALING" and op.pool in entry.pools:
            scaling = op.change.get("autoscaling") or {}
            entry.pools[op.pool]["autoscaling"] = scaling
            if scaling.get("enabled"):
                # The autoscaler keeps the pool within its new bounds.
                size = self.kube.size(op.cluster, op.pool)
                low = int(scaling.get("minNodeCount", 0))
                high = int(scaling.get("maxNodeCount", size))
                await self.kube.resize_pool(op.cluster, op.pool, min(max(size, low), high))
        elif op.kind == "DELETE_CLUSTER":
            self.clusters.pop((op.project, op.location, op.cluster), None)
            await self.kube.delete_cluster(op.cluster)

    async def _register(self, cluster: str, pool: dict[str, Any]) -> None:
        pool["status"] = "RUNNING"
        config = pool.get("config", {})
        accelerators = config.get("accelerators") or [{}]
        taints = [
            {
                "key": t["key"],
                "value": t.get("value", ""),
                "effect": _EFFECTS.get(t.get("effect", ""), "NoSchedule"),
            }
            for t in config.get("taints", [])
        ]
        accelerator = accelerators[0].get("acceleratorType")
        if accelerator and not any(t["key"] == "nvidia.com/gpu" for t in taints):
            # GKE taints GPU node pools itself.
            taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
        cloud_labels = {"cloud.google.com/gke-nodepool": pool["name"]}
        if accelerator:
            cloud_labels["cloud.google.com/gke-accelerator"] = accelerator
        await self.kube.add_pool(
            cluster,
            CloudNodePool(
                name=pool["name"],
                machine=config.get("machineType", "e2-medium"),
                accelerator=accelerator,
                node_count=int(pool.get("initialNodeCount", 0)),
                labels=dict(config.get("labels", {})),
                taints=taints,
                zones=list(pool.get("locations", [])),
                cloud_labels=cloud_labels,
            ),
        )

    # -- handlers ---------------------------------------------------------------------------

    async def _create_cluster(self, request: web.Request) -> web.StreamResponse:
        body = (await request.json()).get("cluster") or {}
        m = request.match_info
        name = str(body.get("name", ""))
        if not name:
            raise FailError(ErrorKind.INVALID, "Cluster.name must be set.")
        fault = self._fault("createCluster", name)
        key = (m["project"], m["location"], name)
        if key in self.clusters:
            raise FailError(
                ErrorKind.CONFLICT,
                f"Already exists: projects/{key[0]}/locations/{key[1]}/clusters/{name}.",
            )
        pools = {
            p["name"]: {**_normalised(p), "status": "PROVISIONING"}
            for p in body.pop("nodePools", [])
        }
        cluster = {
            **body,
            "location": m["location"],
            "status": "PROVISIONING",
            "selfLink": f"https://container.googleapis.com/v1/projects/{key[0]}/locations/"
            f"{key[1]}/clusters/{name}",
            "currentMasterVersion": body.get("initialClusterVersion", "1.35"),
            "masterAuth": {"clusterCaCertificate": _FAKE_CA},
            "createTime": _now(),
        }
        self.clusters[key] = _Cluster(cluster, pools)
        op = self._start(request, "CREATE_CLUSTER", name, None, fault)
        return web.json_response(self._op_json(op))

    def _cluster_json(self, entry: _Cluster) -> dict[str, Any]:
        return {**entry.body, "nodePools": list(entry.pools.values())}

    async def _get_cluster(self, request: web.Request) -> web.StreamResponse:
        call = f"getCluster {request.match_info['cluster']}"
        self.calls.append(call)
        gate = self.stall.get(call)
        if gate is not None:
            await gate.wait()
        return web.json_response(self._cluster_json(self._cluster(request)))

    async def _list_clusters(self, request: web.Request) -> web.StreamResponse:
        m = request.match_info
        items = [
            self._cluster_json(c)
            for (p, loc, _), c in sorted(self.clusters.items())
            if p == m["project"] and loc in (m["location"], "-")
        ]
        return web.json_response({"clusters": items})

    async def _delete_cluster(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["cluster"]
        fault = self._fault("deleteCluster", name)
        entry = self._cluster(request)
        self._busy(*self._key(request))
        entry.body["status"] = "STOPPING"
        op = self._start(request, "DELETE_CLUSTER", name, None, fault)
        return web.json_response(self._op_json(op))

    async def _create_pool(self, request: web.Request) -> web.StreamResponse:
        body = (await request.json()).get("nodePool") or {}
        name = str(body.get("name", ""))
        if not name:
            raise FailError(ErrorKind.INVALID, "NodePool.name must be set.")
        cluster = request.match_info["cluster"]
        fault = self._fault("createNodePool", name)
        entry = self._cluster(request)
        if name in entry.pools:
            raise FailError(ErrorKind.CONFLICT, f"Already exists: nodePools/{name}.")
        if entry.body.get("status") != "RUNNING":
            raise _PreconditionError(f"Cluster {cluster} is not RUNNING.")
        self._busy(*self._key(request))
        entry.pools[name] = {**_normalised(body), "status": "PROVISIONING"}
        op = self._start(request, "CREATE_NODE_POOL", cluster, name, fault)
        machine = (body.get("config") or {}).get("machineType")
        zone = self.stockouts.exhausted(list(body.get("locations") or []), machine)
        if fault is None and zone is not None:
            # GKE accepts the pool, then its instance group finds no machines in the zone.
            op.fault = ErrorKind.STOCKOUT
            op.message = (
                "Google Compute Engine: ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS: The zone "
                f"'projects/{request.match_info['project']}/zones/{zone}' does not have enough "
                f"resources available to fulfill the request. '(resource type:compute)'."
            )
        return web.json_response(self._op_json(op))

    async def _get_pool(self, request: web.Request) -> web.StreamResponse:
        entry = self._cluster(request)
        pool = request.match_info["pool"]
        if pool not in entry.pools:
            raise KeyError(f"nodePools/{pool}")
        return web.json_response(entry.pools[pool])

    async def _list_pools(self, request: web.Request) -> web.StreamResponse:
        entry = self._cluster(request)
        return web.json_response({"nodePools": list(entry.pools.values())})

    async def _delete_pool(self, request: web.Request) -> web.StreamResponse:
        pool = request.match_info["pool"]
        cluster = request.match_info["cluster"]
        fault = self._fault("deleteNodePool", pool)
        entry = self._cluster(request)
        if pool not in entry.pools:
            raise KeyError(f"nodePools/{pool}")
        self._busy(*self._key(request))
        entry.pools[pool]["status"] = "STOPPING"
        op = self._start(request, "DELETE_NODE_POOL", cluster, pool, fault)
        return web.json_response(self._op_json(op))

    async def _update_pool(self, request: web.Request, kind: str, call: str) -> web.StreamResponse:
        body = await request.json()
        pool = request.match_info["pool"]
        cluster = request.match_info["cluster"]
        fault = self._fault(call, pool)
        entry = self._cluster(request)
        if pool not in entry.pools:
            raise KeyError(f"nodePools/{pool}")
        self._busy(*self._key(request))
        op = self._start(request, kind, cluster, pool, fault)
        op.change = dict(body)
        return web.json_response(self._op_json(op))

    async def _set_size(self, request: web.Request) -> web.StreamResponse:
        return await self._update_pool(request, "SET_NODE_POOL_SIZE", "setNodePoolSize")

    async def _set_autoscaling(self, request: web.Request) -> web.StreamResponse:
        return await self._update_pool(
            request, "SET_NODE_POOL_AUTOSCALING", "setNodePoolAutoscaling"
        )

    async def _get_operation(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["operation"]
        op = self.operations.get(name)
        if op is None:
            raise KeyError(f"operations/{name}")
        await self._advance(op)
        return web.json_response(self._op_json(op))


_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "NO_EXECUTE": "NoExecute",
    "PREFER_NO_SCHEDULE": ("PreferNoSchedule"),
}
# Base64 of a PEM header: the shape of masterAuth.clusterCaCertificate, not a usable CA.
_FAKE_CA = (
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCnNpbXVsYXRlZAotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg=="
)


# The SDK sends enums as numbers (``enum-encoding=int``); the API stores and returns names.
_TAINT_EFFECTS = {1: "NO_SCHEDULE", 2: "PREFER_NO_SCHEDULE", 3: "NO_EXECUTE"}
_DRIVER_VERSIONS = {1: "INSTALLATION_DISABLED", 2: "DEFAULT", 3: "LATEST"}


def _normalised(pool: dict[str, Any]) -> dict[str, Any]:
    config = pool.get("config") or {}
    for taint in config.get("taints", []):
        taint["effect"] = _TAINT_EFFECTS.get(taint.get("effect"), taint.get("effect"))
    for accelerator in config.get("accelerators", []):
        driver = accelerator.get("gpuDriverInstallationConfig") or {}
        if "gpuDriverVersion" in driver:
            version = driver["gpuDriverVersion"]
            driver["gpuDriverVersion"] = _DRIVER_VERSIONS.get(version, version)
    return pool

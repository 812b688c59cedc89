"""The emulator's admin endpoints, beside the cluster APIs: list, add and remove simulated
clusters; read and change a cluster's faults; read and reset its counters::

    /_admin/clusters                           GET list, POST {"name", "faults"} adds a cluster
    /_admin/clusters/<c>                       GET info, DELETE removes the cluster
    /_admin/clusters/<c>/faults                GET, PUT (replace), PATCH (JSON merge)
    /_admin/clusters/<c>/stats                 GET counters, DELETE resets them

Development/test emulator only: product code never imports ``modelfleet.sim``. Changes the
server's in-memory clusters; no other I/O.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from modelfleet.sim.apiserver import status_errors
from modelfleet.sim.apiserver.responses import error_response, json_response
from modelfleet.sim.apiserver.status_errors import ApiError
from modelfleet.sim.faults import FaultConfig

if TYPE_CHECKING:
    from modelfleet.sim.apiserver.server import FleetApiServer, SimCluster

__all__ = ["CLUSTER_NAME", "AddClusterRequest", "AdminRoutes"]

CLUSTER_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


class AddClusterRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=CLUSTER_NAME.pattern, max_length=63)
    faults: FaultConfig | None = None


class AdminRoutes:
    """The ``/_admin`` handlers of one server."""

    def __init__(self, server: FleetApiServer) -> None:
        self._server = server

    def add_routes(self, app: web.Application) -> None:
        base = "/_admin/clusters"
        app.router.add_route("GET", base, self.list)
        app.router.add_route("POST", base, self.add)
        app.router.add_route("GET", base + "/{cluster}", self.get)
        app.router.add_route("DELETE", base + "/{cluster}", self.delete)
        app.router.add_route("GET", base + "/{cluster}/faults", self.faults_get)
        app.router.add_route("PUT", base + "/{cluster}/faults", self.faults_put)
        app.router.add_route("PATCH", base + "/{cluster}/faults", self.faults_patch)
        app.router.add_route("GET", base + "/{cluster}/stats", self.stats)
        app.router.add_route("DELETE", base + "/{cluster}/stats", self.stats_reset)

    def _cluster(self, request: web.Request) -> SimCluster:
        name = request.match_info["cluster"]
        cluster = self._server.clusters.get(name)
        if cluster is None:
            raise ApiError(404, "NotFound", f'cluster "{name}" not found')
        return cluster

    async def _json(self, request: web.Request) -> Any:
        try:
            return await request.json(loads=json.loads)
        except ValueError as exc:
            raise status_errors.bad_request(f"invalid JSON body: {exc}") from None

    async def list(self, request: web.Request) -> web.StreamResponse:
        infos = [
            self._server.info(c).model_dump(mode="json") for c in self._server.clusters.values()
        ]
        return json_response({"clusters": infos})

    async def add(self, request: web.Request) -> web.StreamResponse:
        try:
            body = AddClusterRequest.model_validate(await self._json(request))
            if body.name in self._server.clusters:
                raise ApiError(409, "AlreadyExists", f'cluster "{body.name}" already exists')
            cluster = self._server.add_cluster(body.name, body.faults)
        except ValidationError as exc:
            return error_response(status_errors.bad_request(str(exc)))
        except ApiError as err:
            return error_response(err)
        return json_response(self._server.info(cluster).model_dump(mode="json"), status=201)

    async def get(self, request: web.Request) -> web.StreamResponse:
        try:
            return json_response(self._server.info(self._cluster(request)).model_dump(mode="json"))
        except ApiError as err:
            return error_response(err)

    async def delete(self, request: web.Request) -> web.StreamResponse:
        try:
            cluster = self._cluster(request)
        except ApiError as err:
            return error_response(err)
        self._server.remove_cluster(cluster.name)
        return json_response(
            status_errors.status_object(200, "", f'cluster "{cluster.name}" removed')
        )

    async def faults_get(self, request: web.Request) -> web.StreamResponse:
        try:
            cluster = self._cluster(request)
        except ApiError as err:
            return error_response(err)
        return json_response(cluster.faults.config.model_dump(mode="json"))

    async def faults_put(self, request: web.Request) -> web.StreamResponse:
        return await self._faults_write(request, replace=True)

    async def faults_patch(self, request: web.Request) -> web.StreamResponse:
        return await self._faults_write(request, replace=False)

    async def _faults_write(self, request: web.Request, *, replace: bool) -> web.StreamResponse:
        try:
            cluster = self._cluster(request)
            body = await self._json(request)
            if not isinstance(body, dict):
                raise status_errors.bad_request("the faults body must be a JSON object")
            cfg = cluster.faults.set_config(body) if replace else cluster.faults.update_config(body)
        except ValidationError as exc:
            return error_response(
                ApiError(
                    422,
                    "Invalid",
                    f"invalid fault config: {exc.error_count()} error(s)",
                    details={
                        "causes": [
                            {
                                "reason": "FieldValueInvalid",
                                "message": e["msg"],
                                "field": ".".join(str(x) for x in e["loc"]),
                            }
                            for e in exc.errors()
                        ]
                    },
                )
            )
        except ApiError as err:
            return error_response(err)
        return json_response(cfg.model_dump(mode="json"))

    async def stats(self, request: web.Request) -> web.StreamResponse:
        try:
            cluster = self._cluster(request)
        except ApiError as err:
            return error_response(err)
        stats = cluster.faults.stats.model_dump(mode="json")
        stats["resource_version"] = cluster.store.resource_version
        stats["writes"] = cluster.store.writes
        return json_response(stats)

    async def stats_reset(self, request: web.Request) -> web.StreamResponse:
        try:
            cluster = self._cluster(request)
        except ApiError as err:
            return error_response(err)
        cluster.faults.reset_stats()
        return json_response(cluster.faults.stats.model_dump(mode="json"))

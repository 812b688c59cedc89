"""The simulated AWS: ``moto`` in server mode (EKS, EC2, IAM, STS), behind a thin HTTP layer that
adds what moto lacks, reached by ``boto3`` with ``endpoint_url``.

moto makes clusters and node groups ACTIVE at once and never fails them. The layer in front of
it (an aiohttp reverse proxy on its own loopback port) passes every request through and, for
the EKS REST API only:
- reports a new cluster / node group as CREATING for ``polls_to_active`` describes, then
  ACTIVE; at that moment the cluster gets an emulated Kubernetes API server (its ``endpoint`` is
  rewritten to it) and the node group its Nodes and ResourceSlices, with the labels and taints
  the request asked for;
- reports a deleted cluster / node group as DELETING for a few describes before moto's 404;
- resizes the node group's Nodes when UpdateNodegroupConfig changes its desired size;
- injects errors on demand (:class:`~modelfleet.sim.clouds.faults.CloudFaults`): at the call, in
  the AWS JSON error shape (``x-amzn-ErrorType`` and a ``message``), or at the operation stage,
  as a CREATE_FAILED node group (FAILED cluster) with a health issue, as EKS reports a
  launch failure or exhausted quota.

Development/test emulator only: product code never imports ``modelfleet.sim``. Binds two
loopback ports (moto's and the layer's); moto keeps its state in this process's memory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.ec2.exceptions import InvalidSubnetIdError
from moto.ec2.models import ec2_backends

from modelfleet.sim.clouds.faults import (
    CloudFaults,
    ErrorKind,
    FaultStage,
    Stockouts,
    admin_faults,
    admin_stockouts,
)
from modelfleet.sim.clouds.kube import CloudKube, CloudNodePool

__all__ = ["FakeEKS"]

_ERRORS: dict[ErrorKind, tuple[int, str, str]] = {
    ErrorKind.QUOTA: (
        400,
        "ResourceLimitExceededException",
        "You have reached the quota for the maximum number of vCPUs (P instances) in this region",
    ),
    ErrorKind.PERMISSION: (
        403,
        "AccessDeniedException",
        "User is not authorized to perform: eks:CreateNodegroup",
    ),
    ErrorKind.CONFLICT: (409, "ResourceInUseException", "Resource already exists"),
    ErrorKind.UNAVAILABLE: (503, "ServiceUnavailableException", "Service is unavailable"),
    ErrorKind.THROTTLED: (429, "ThrottlingException", "Rate exceeded"),
    ErrorKind.INVALID: (400, "InvalidParameterException", "Invalid parameter in the request"),
    ErrorKind.STOCKOUT: (500, "ServerException", "Insufficient capacity; try again later"),
    ErrorKind.BAD_MACHINE_TYPE: (
        400,
        "InvalidParameterException",
        "The instance type is not supported in the requested Availability Zones",
    ),
}
# How an operation-stage failure reads in the node group's health.
_HEALTH: dict[ErrorKind, tuple[str, str]] = {
    ErrorKind.QUOTA: (
        "AsgInstanceLaunchFailures",
        "Could not launch On-Demand Instances. VcpuLimitExceeded - You have requested more vCPU "
        "capacity than your current vCPU limit allows",
    ),
    ErrorKind.PERMISSION: ("AccessDenied", "The node role is not authorized"),
    ErrorKind.INVALID: ("InvalidLaunchTemplate", "The launch template is invalid"),
    ErrorKind.UNAVAILABLE: ("InsufficientFreeAddresses", "Subnet has insufficient addresses"),
    ErrorKind.CONFLICT: ("InstanceLimitExceeded", "Instance limit exceeded"),
    ErrorKind.THROTTLED: ("InternalFailure", "Internal failure"),
    ErrorKind.STOCKOUT: (
        "AsgInstanceLaunchFailures",
        "Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do "
        "not have sufficient capacity of the instance type in the Availability Zone you requested",
    ),
    ErrorKind.BAD_MACHINE_TYPE: (
        "Ec2InstanceTypeDoesNotExist",
        "The instance type of the node group does not exist in the Availability Zone",
    ),
}
_FAKE_CA = (
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCnNpbXVsYXRlZAotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg=="
)
_HOP = {"host", "content-length", "transfer-encoding", "connection"}


@dataclass
class _Pending:
    polls_left: int
    fault: ErrorKind | None
    deleting: bool = False
    body: dict[str, Any] | None = None
    request: dict[str, Any] | None = None
    # The health issue's own words when they name something (the stocked-out zone).
    message: str | None = None
    zones: list[str] | None = None


class FakeEKS:
    """The layer in front of moto. ``moto_url`` is moto's own address."""

    def __init__(self, kube: CloudKube, moto_url: str, *, polls_to_active: int = 2) -> None:
        self.kube = kube
        self.moto_url = moto_url.rstrip("/")
        self.polls = polls_to_active
        self.faults = CloudFaults()
        self.stockouts = Stockouts()
        self.calls: list[str] = []
        # (cluster, nodegroup or "") -> state moto does not model.
        self._pending: dict[tuple[str, str], _Pending] = {}
        self._session: aiohttp.ClientSession | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/_admin/faults", self._admin)
        app.router.add_route("*", "/_admin/stockouts", self._admin_stockouts)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        app.on_cleanup.append(self._close)
        return app

    async def _admin(self, request: web.Request) -> web.StreamResponse:
        return await admin_faults(request, self.faults)

    async def _admin_stockouts(self, request: web.Request) -> web.StreamResponse:
        return await admin_stockouts(request, self.stockouts)

    async def _close(self, _: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    async def reset(self) -> None:
        """Forget everything moto holds (its state is per process, not per server)."""
        await self._forward("POST", "/moto-api/reset", {}, b"")
        self._pending.clear()

    # -- proxy --------------------------------------------------------------------------------

    async def _forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        if self._session is None:
            self._session = aiohttp.ClientSession(auto_decompress=False)
        async with self._session.request(
            method, self.moto_url + path, headers=headers, data=body, allow_redirects=False
        ) as response:
            data = await response.read()
            out_headers = {k: v for k, v in response.headers.items() if k.lower() not in _HOP}
            return response.status, out_headers, data

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        headers["Host"] = request.headers.get("Host", "")
        parts = [p for p in request.path.split("/") if p]
        op, key = _operation(request.method, parts)
        if op in ("CreateCluster", "CreateNodegroup"):
            try:
                sent = json.loads(body or b"{}")
            except ValueError:
                sent = {}
            if op == "CreateCluster":
                key = (str(sent.get("name", "")), "")
            else:
                key = (parts[1], str(sent.get("nodegroupName", "")))
        if op is not None and key is not None:
            self.calls.append(f"{op} {'/'.join(k for k in key if k)}")
            target = key[1] or key[0]
            kind = self.faults.take(op, target, FaultStage.CALL)
            if kind is not None:
                status, etype, message = _ERRORS[kind]
                return web.json_response(
                    {"message": message}, status=status, headers={"x-amzn-ErrorType": etype}
                )
            pending = self._pending.get(key)
            if op.startswith("Describe") and pending is not None and pending.deleting:
                if pending.polls_left > 0 and pending.body is not None:
                    pending.polls_left -= 1
                    return web.json_response(pending.body)
                self._pending.pop(key, None)
        status, out_headers, data = await self._forward(
            request.method, request.path_qs, headers, body
        )
        if op is None or key is None or status >= 300:
            return web.Response(status=status, headers=out_headers, body=data)
        doc = json.loads(data or b"{}")
        if op.startswith("Create"):
            fault = self.faults.take(op, key[1] or key[0], FaultStage.OPERATION)
            sent = json.loads(body or b"{}")
            pending = _Pending(self.polls, fault, request=sent)
            if key[1]:
                pending.zones = _zones(request, list(sent.get("subnets") or []))
                self._stock(pending, list(sent.get("instanceTypes") or []))
            self._pending[key] = pending
            _set_status(doc, "CREATING")
        elif op.startswith("Delete"):
            _set_status(doc, "DELETING")
            self._pending[key] = _Pending(self.polls, None, deleting=True, body=doc)
            if key[1]:
                await self.kube.remove_pool(key[0], key[1])
            else:
                await self.kube.delete_cluster(key[0])
        elif op == "UpdateNodegroupConfig":
            scaling = json.loads(body or b"{}").get("scalingConfig") or {}
            if "desiredSize" in scaling:
                await self.kube.resize_pool(key[0], key[1], int(scaling["desiredSize"]))
        elif op.startswith("Describe"):
            await self._describe(key, doc)
        out_headers.pop("Content-Length", None)
        return web.Response(status=status, headers=out_headers, body=json.dumps(doc).encode())

    async def _describe(self, key: tuple[str, str], doc: dict[str, Any]) -> None:
        pending = self._pending.get(key)
        cluster, group = key
        if pending is not None and not pending.deleting:
            if pending.polls_left > 0:
                pending.polls_left -= 1
                _set_status(doc, "CREATING")
                return
            if pending.fault is not None:
                if group:
                    code, message = _HEALTH[pending.fault]
                    message = pending.message or message
                    doc["nodegroup"]["status"] = "CREATE_FAILED"
                    doc["nodegroup"]["health"] = {
                        "issues": [{"code": code, "message": message, "resourceIds": []}]
                    }
                else:
                    doc["cluster"]["status"] = "FAILED"
                return
            self._pending.pop(key, None)
            if group:
                await self._register(
                    cluster, doc["nodegroup"], pending.request or {}, pending.zones or []
                )
            else:
                await self.kube.create_cluster(cluster)
        if not group and "cluster" in doc and self.kube.exists(cluster):
            doc["cluster"]["endpoint"] = self.kube.url(cluster)
            doc["cluster"]["certificateAuthority"] = {"data": _FAKE_CA}

    def _stock(self, pending: _Pending, types: list[str]) -> None:
        """A node group asking for an instance type a zone of its subnets has none of fails as
        EC2 reports it (its Auto Scaling group cannot launch)."""
        if pending.fault is not None:
            return
        for machine in types or ["m6i.xlarge"]:
            zone = self.stockouts.exhausted(pending.zones or [], machine)
            if zone is None:
                continue
            pending.fault = ErrorKind.STOCKOUT
            pending.message = (
                "Could not launch On-Demand Instances. InsufficientInstanceCapacity - We "
                f"currently do not have sufficient {machine} capacity in the Availability Zone "
                f"you requested ({zone}). Our system will be working on provisioning additional "
                "capacity."
            )
            return

    async def _register(
        self, cluster: str, group: dict[str, Any], request: dict[str, Any], zones: list[str]
    ) -> None:
        scaling = group.get("scalingConfig") or {}
        taints = [
            {
                "key": t["key"],
                "value": t.get("value", ""),
                "effect": _EFFECTS.get(t.get("effect", ""), "NoSchedule"),
            }
            for t in request.get("taints", group.get("taints", []))
        ]
        name = group["nodegroupName"]
        await self.kube.add_pool(
            cluster,
            CloudNodePool(
                name=name,
                machine=(group.get("instanceTypes") or ["m6i.xlarge"])[0],
                accelerator=None,
                node_count=int(scaling.get("desiredSize", 0)),
                labels=dict(group.get("labels") or {}),
                taints=taints,
                zones=zones,
                cloud_labels={"eks.amazonaws.com/nodegroup": name},
            ),
        )


_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "NO_EXECUTE": "NoExecute",
    "PREFER_NO_SCHEDULE": ("PreferNoSchedule"),
}


def _zones(request: web.Request, subnets: list[str]) -> list[str]:
    """The availability zones of ``subnets``, as moto (this process's EC2) holds them; the
    region is the one the request was signed for."""
    auth = request.headers.get("Authorization", "")
    scope = (
        auth.split("Credential=", 1)[1].split(",", 1)[0].split("/") if "Credential=" in auth else []
    )
    region = scope[2] if len(scope) > 2 else "us-east-1"
    backend = ec2_backends[DEFAULT_ACCOUNT_ID][region]
    zones: list[str] = []
    for subnet in subnets:
        try:
            zone = str(backend.get_subnet(subnet).availability_zone)
        except InvalidSubnetIdError:  # moto answers the create itself
            continue
        if zone not in zones:
            zones.append(zone)
    return zones


def _set_status(doc: dict[str, Any], status: str) -> None:
    for field in ("cluster", "nodegroup"):
        if isinstance(doc.get(field), dict):
            doc[field]["status"] = status


def _operation(method: str, parts: list[str]) -> tuple[str | None, tuple[str, str] | None]:
    """The EKS operation a request is, and the (cluster, node group) it is about."""
    if not parts or parts[0] != "clusters":
        return None, None
    if len(parts) == 1 and method == "POST":
        return "CreateCluster", None
    if len(parts) == 2:
        verb = {"GET": "DescribeCluster", "DELETE": "DeleteCluster"}.get(method)
        return verb, (parts[1], "")
    if len(parts) == 3 and parts[2] == "node-groups" and method == "POST":
        return "CreateNodegroup", None
    if len(parts) == 4 and parts[2] == "node-groups":
        verb = {"GET": "DescribeNodegroup", "DELETE": "DeleteNodegroup"}.get(method)
        return verb, (parts[1], parts[3])
    if len(parts) == 5 and parts[2] == "node-groups" and parts[4] == "update-config":
        return "UpdateNodegroupConfig", (parts[1], parts[3])
    return None, None

"""GKE through the official ``google-cloud-container`` client (``ClusterManagerClient``, REST
transport): create/get/delete clusters and node pools from pool plans, read long-running
operations, and build a token kubeconfig on the worker from the cluster's endpoint and CA.

The only module that imports the GKE SDK and google-auth. Endpoint and credentials come from
the worker's :class:`~modelfleet.adapters.cloud_config.CloudSettings`. SDK-level retries are
off: Temporal retries the activity, with backoff and visibly, on the retryable reasons of
:mod:`modelfleet.adapters.cloud_errors`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import google.auth
import google.auth.transport.requests
from google.api_core import exceptions as gexc
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials, Credentials
from google.cloud import container_v1
from google.oauth2 import credentials as oauth2
from google.oauth2 import service_account

from modelfleet.adapters.cloud_config import (
    CloudSettings,
    gke_key_file,
    key_file_project,
    no_project_message,
    remove_token_kubeconfig,
    server_url,
    write_token_kubeconfig,
)
from modelfleet.adapters.cloud_errors import CloudError
from modelfleet.contracts.cloud_payloads import (
    OWNER_LABEL,
    CloudCluster,
    CloudErrorReason,
    PoolPlan,
    PoolShape,
    is_stockout,
)

_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
SYSTEM_POOL = "system"
SYSTEM_MACHINE = "e2-standard-4"
_EFFECT = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}
# google.rpc codes of a failed operation -> reason.
_RPC_REASONS = {
    3: CloudErrorReason.INVALID_ARGUMENT,
    5: CloudErrorReason.NOT_FOUND,
    6: CloudErrorReason.ALREADY_EXISTS,
    7: CloudErrorReason.PERMISSION_DENIED,
    8: CloudErrorReason.QUOTA_EXCEEDED,
    9: CloudErrorReason.OPERATION_FAILED,
    14: CloudErrorReason.UNAVAILABLE,
    16: CloudErrorReason.UNAUTHENTICATED,
}


@dataclass(frozen=True)
class OperationState:
    done: bool
    status: str
    error: CloudError | None = None


def classify(exc: gexc.GoogleAPICallError) -> CloudError:
    """An api-core exception as a cloud error with a reason."""
    reason = (getattr(exc, "reason", None) or "").lower()
    message = exc.message or str(exc)
    code = exc.code
    if is_stockout(message):
        kind = CloudErrorReason.STOCKOUT
    elif code == 429 or reason == "ratelimitexceeded":
        kind = CloudErrorReason.THROTTLED
    elif code is not None and code >= 500:
        kind = CloudErrorReason.UNAVAILABLE
    elif code == 403 and (reason == "quotaexceeded" or "quota" in message.lower()):
        kind = CloudErrorReason.QUOTA_EXCEEDED
    elif code == 403:
        kind = CloudErrorReason.PERMISSION_DENIED
    elif code == 401:
        kind = CloudErrorReason.UNAUTHENTICATED
    elif code == 409:
        kind = CloudErrorReason.ALREADY_EXISTS
    elif code == 404:
        kind = CloudErrorReason.NOT_FOUND
    elif reason == "failedprecondition" or "incompatible operation" in message:
        kind = CloudErrorReason.OPERATION_RUNNING
    else:
        kind = CloudErrorReason.INVALID_ARGUMENT
    return CloudError(kind, _strip_url(message))


def _strip_url(message: str) -> str:
    # api-core prefixes "POST http://host/v1/...?$alt=...: "; the resource is named anyway.
    head, sep, tail = message.partition(": ")
    return tail if sep and head.split(" ")[0] in ("GET", "POST", "DELETE", "PUT") else message


def node_pool(plan: PoolPlan) -> container_v1.NodePool:
    """The GKE node pool a plan says."""
    config = container_v1.NodeConfig(
        machine_type=plan.machine_type or "",
        disk_size_gb=plan.disk_size_gb,
        labels=dict(plan.labels),
        taints=[
            container_v1.NodeTaint(key=t.key, value=t.value, effect=_EFFECT[t.effect.value])
            for t in plan.taints
        ],
        oauth_scopes=_SCOPES,
        image_type="COS_CONTAINERD",
    )
    if plan.accelerator_type:
        config.accelerators = [
            container_v1.AcceleratorConfig(
                accelerator_type=plan.accelerator_type,
                accelerator_count=plan.accelerator_count or 1,
                gpu_driver_installation_config=container_v1.GPUDriverInstallationConfig(
                    gpu_driver_version=container_v1.GPUDriverInstallationConfig.GPUDriverVersion.DEFAULT
                ),
            )
        ]
    pool = container_v1.NodePool(
        name=plan.name,
        config=config,
        initial_node_count=plan.node_count,
        locations=list(plan.zones),
    )
    if plan.max_node_count is not None:
        pool.autoscaling = container_v1.NodePoolAutoscaling(
            enabled=True,
            min_node_count=plan.min_node_count or 0,
            max_node_count=plan.max_node_count,
        )
    return pool


def system_pool() -> container_v1.NodePool:
    return container_v1.NodePool(
        name=SYSTEM_POOL,
        initial_node_count=1,
        config=container_v1.NodeConfig(machine_type=SYSTEM_MACHINE, oauth_scopes=_SCOPES),
        autoscaling=container_v1.NodePoolAutoscaling(
            enabled=True, min_node_count=1, max_node_count=2
        ),
    )


@dataclass(frozen=True)
class _Client:
    client: container_v1.ClusterManagerClient
    credentials: Credentials
    # The project the credentials name (a key's project_id, ADC's project), if any.
    project: str | None


class GKE:
    """One worker's GKE access; clients are built per credentials profile and reused."""

    def __init__(self, settings: CloudSettings) -> None:
        self._settings = settings
        self._clients: dict[str, _Client] = {}
        self._lock = threading.Lock()

    def _credentials(self, profile: str) -> tuple[Credentials, str | None]:
        """The profile's credentials and the project they name (None: they name none)."""
        key_file = gke_key_file(self._settings.credentials_dir, profile)
        if key_file.is_file():
            creds: Credentials = service_account.Credentials.from_service_account_file(  # type: ignore[no-untyped-call]
                str(key_file), scopes=_SCOPES
            )
            return creds, key_file_project(self._settings.credentials_dir, profile)
        if self._settings.gke_token_file is not None:
            token = self._settings.gke_token_file.read_text().strip()
            return oauth2.Credentials(token=token), None  # type: ignore[no-untyped-call]
        found, project = google.auth.default(scopes=_SCOPES)
        # The worker's own setting comes before the environment's default project.
        return found, self._settings.gke_project or project

    def _client(self, profile: str) -> _Client:
        with self._lock:
            entry = self._clients.get(profile)
            if entry is None:
                creds, project = self._credentials(profile)
                options = ClientOptions(api_endpoint=self._settings.gke_endpoint)
                client = container_v1.ClusterManagerClient(
                    transport="rest", credentials=creds, client_options=options
                )
                entry = _Client(client, creds, project)
                self._clients[profile] = entry
            return entry

    def _call(self, where: CloudCluster, method: str, **kwargs: Any) -> Any:
        client = self._client(where.credentials).client
        try:
            return getattr(client, method)(retry=None, timeout=60, **kwargs)
        except gexc.GoogleAPICallError as exc:
            raise classify(exc) from None

    def project(self, c: CloudCluster) -> str:
        """The recipe's project, else the credentials profile's (key, worker setting, ADC)."""
        if c.project:
            return c.project
        found = self._client(c.credentials).project or self._settings.gke_project
        if not found:
            raise CloudError(
                CloudErrorReason.INVALID_ARGUMENT, no_project_message(c.name, c.credentials)
            )
        return found

    def _parent(self, c: CloudCluster) -> str:
        return f"projects/{self.project(c)}/locations/{c.region}"

    def _name(self, c: CloudCluster) -> str:
        return f"{self._parent(c)}/clusters/{c.name}"

    # -- clusters -------------------------------------------------------------------------

    def create_cluster(self, c: CloudCluster) -> str | None:
        """Start creating the cluster with its system pool; the operation name, or None when a
        cluster of that name owned by ``c.owner`` exists already (a retried create)."""
        cluster = container_v1.Cluster(
            name=c.name,
            initial_cluster_version=c.kubernetes_version,
            node_pools=[system_pool()],
            resource_labels={OWNER_LABEL: c.owner},
            release_channel=container_v1.ReleaseChannel(
                channel=container_v1.ReleaseChannel.Channel.REGULAR
            ),
        )
        try:
            op = self._call(c, "create_cluster", parent=self._parent(c), cluster=cluster)
        except CloudError as exc:
            if exc.reason is not CloudErrorReason.ALREADY_EXISTS:
                raise
            self._check_owner(c)
            return None
        return str(op.name)

    def _check_owner(self, c: CloudCluster) -> None:
        found = self.get_cluster(c)
        owner = found.get("owner") if found else None
        if owner != c.owner:
            raise CloudError(
                CloudErrorReason.ALREADY_EXISTS,
                f"cluster {c.name} already exists in {self._parent(c)} and was not created "
                "by this InferenceCluster; pick another name or adopt it as source Existing",
            )

    def get_cluster(self, c: CloudCluster) -> dict[str, str] | None:
        try:
            found = self._call(c, "get_cluster", name=self._name(c))
        except CloudError as exc:
            if exc.reason is CloudErrorReason.NOT_FOUND:
                return None
            raise
        return {
            "status": container_v1.Cluster.Status(found.status).name,
            "endpoint": found.endpoint,
            "ca": found.master_auth.cluster_ca_certificate,
            "owner": found.resource_labels.get(OWNER_LABEL, ""),
            "message": found.status_message,
        }

    def delete_cluster(self, c: CloudCluster) -> str | None:
        """Start deleting (with its node pools); None when it is already gone."""
        try:
            op = self._call(c, "delete_cluster", name=self._name(c))
        except CloudError as exc:
            if exc.reason is CloudErrorReason.NOT_FOUND:
                return None
            raise
        return str(op.name)

    # -- node pools -----------------------------------------------------------------------

    def create_node_pool(self, c: CloudCluster, plan: PoolPlan) -> str | None:
        """Start creating the pool; None when it exists already (ours: the cluster is)."""
        try:
            op = self._call(c, "create_node_pool", parent=self._name(c), node_pool=node_pool(plan))
        except CloudError as exc:
            if exc.reason is CloudErrorReason.ALREADY_EXISTS:
                return None
            raise
        return str(op.name)

    def get_node_pool(self, c: CloudCluster, pool: str) -> str | None:
        """The pool's status name, or None when it does not exist."""
        try:
            found = self._call(c, "get_node_pool", name=f"{self._name(c)}/nodePools/{pool}")
        except CloudError as exc:
            if exc.reason is CloudErrorReason.NOT_FOUND:
                return None
            raise
        return str(container_v1.NodePool.Status(found.status).name)

    def shapes(self, c: CloudCluster) -> list[PoolShape]:
        """Every node pool but the system one. GKE reports no live size on a node pool: the
        count is the one it was created with (the workflow counts registered nodes instead)."""
        found = self._call(c, "list_node_pools", parent=self._name(c))
        out = []
        for pool in found.node_pools:
            if pool.name == SYSTEM_POOL:
                continue
            scaling = pool.autoscaling
            autoscaled = bool(scaling and scaling.enabled)
            out.append(
                PoolShape(
                    name=pool.name,
                    node_count=pool.initial_node_count,
                    min_node_count=scaling.min_node_count if autoscaled else None,
                    max_node_count=scaling.max_node_count if autoscaled else None,
                )
            )
        return out

    def set_autoscaling(self, c: CloudCluster, plan: PoolPlan) -> str:
        """Start setting the pool's autoscaling to the plan's (off when it has no max)."""
        wanted = node_pool(plan).autoscaling or container_v1.NodePoolAutoscaling(enabled=False)
        request = container_v1.SetNodePoolAutoscalingRequest(
            name=f"{self._name(c)}/nodePools/{plan.name}", autoscaling=wanted
        )
        op = self._call(c, "set_node_pool_autoscaling", request=request)
        return str(op.name)

    def set_size(self, c: CloudCluster, plan: PoolPlan) -> str:
        request = container_v1.SetNodePoolSizeRequest(
            name=f"{self._name(c)}/nodePools/{plan.name}", node_count=plan.node_count
        )
        op = self._call(c, "set_node_pool_size", request=request)
        return str(op.name)

    def delete_node_pool(self, c: CloudCluster, pool: str) -> str | None:
        try:
            op = self._call(c, "delete_node_pool", name=f"{self._name(c)}/nodePools/{pool}")
        except CloudError as exc:
            if exc.reason is CloudErrorReason.NOT_FOUND:
                return None
            raise
        return str(op.name)

    # -- operations -----------------------------------------------------------------------

    def operation(self, c: CloudCluster, name: str) -> OperationState:
        op = self._call(c, "get_operation", name=f"{self._parent(c)}/operations/{name}")
        status = container_v1.Operation.Status(op.status).name
        done = op.status == container_v1.Operation.Status.DONE
        error = None
        if done and op.error and op.error.code:
            reason = _RPC_REASONS.get(op.error.code, CloudErrorReason.OPERATION_FAILED)
            if is_stockout(op.error.message):
                # RESOURCE_EXHAUSTED (8) is also quota's code: the words tell them apart.
                reason = CloudErrorReason.STOCKOUT
            error = CloudError(reason, f"operation {name} failed: {op.error.message}")
        return OperationState(done=done, status=status, error=error)

    # -- kubeconfig -----------------------------------------------------------------------

    def forget_kubeconfig(self, c: CloudCluster) -> bool:
        """Remove the cluster's minted kubeconfig (after the cluster is deleted)."""
        return remove_token_kubeconfig(self._settings.credentials_dir, c.name)

    def write_kubeconfig(self, c: CloudCluster) -> Path:
        """Write ``<credentials dir>/<cluster>.yaml`` with a freshly minted access token."""
        found = self.get_cluster(c)
        if found is None or not found["endpoint"]:
            raise CloudError(CloudErrorReason.NOT_FOUND, f"cluster {c.name} has no endpoint yet")
        token = _token(self._client(c.credentials).credentials)
        return write_token_kubeconfig(
            self._settings.credentials_dir,
            c.name,
            server_url(found["endpoint"]),
            found["ca"],
            token,
        )

    def close(self) -> None:
        with self._lock:
            for entry in self._clients.values():
                entry.client.transport.close()  # type: ignore[no-untyped-call]
            self._clients.clear()


def _token(creds: Credentials) -> str:
    if isinstance(creds, AnonymousCredentials):
        return ""
    if not creds.valid:
        creds.refresh(google.auth.transport.requests.Request())  # type: ignore[no-untyped-call]
    return str(creds.token or "")

"""AKS through the official Azure SDK (``azure-mgmt-containerservice``'s ``ContainerServiceClient``
with ``azure-identity`` credentials): create/get/delete managed clusters and agent pools from pool
plans, wait on their long-running operations (``begin_*`` pollers), and write the kubeconfig
``listClusterUserCredential`` returns, on the worker.

The only module that imports the Azure SDK. Endpoint, credentials profile, subscription and
resource group come from the worker's :class:`~modelfleet.adapters.cloud_config.CloudSettings`
(documented there). The SDK's own retries are off: Temporal retries the activity on the retryable
reasons of :mod:`modelfleet.adapters.cloud_errors`, with backoff and visibly.

Requests and responses are ARM JSON (the SDK's models are mappings of it), so what is sent is
what Azure documents, field for field.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from azure.core.credentials import AccessToken, TokenCredential
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.core.pipeline import PipelineRequest
from azure.core.pipeline.policies import SansIOHTTPPolicy
from azure.core.polling import LROPoller
from azure.identity import ClientSecretCredential, DefaultAzureCredential
from azure.mgmt.containerservice import ContainerServiceClient
from azure.mgmt.containerservice import models as aks_models

from modelfleet.adapters.cloud_config import (
    CloudSettings,
    azure_profile,
    no_subscription_message,
    remove_token_kubeconfig,
    write_kubeconfig_file,
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

SYSTEM_POOL = "system"
SYSTEM_VM_SIZE = "Standard_D4s_v5"
# ARM error codes -> reason. Codes not listed fall back on the HTTP status.
_CODES = {
    "QuotaExceeded": CloudErrorReason.QUOTA_EXCEEDED,
    "ErrCode_InsufficientVCPUQuota": CloudErrorReason.QUOTA_EXCEEDED,
    "SkuNotAvailable": CloudErrorReason.STOCKOUT,
    "AllocationFailed": CloudErrorReason.STOCKOUT,
    "ZonalAllocationFailed": CloudErrorReason.STOCKOUT,
    "OverconstrainedAllocationRequest": CloudErrorReason.STOCKOUT,
    "AuthorizationFailed": CloudErrorReason.PERMISSION_DENIED,
    "LinkedAuthorizationFailed": CloudErrorReason.PERMISSION_DENIED,
    "InvalidAuthenticationToken": CloudErrorReason.UNAUTHENTICATED,
    "AuthenticationFailed": CloudErrorReason.UNAUTHENTICATED,
    "ExpiredAuthenticationToken": CloudErrorReason.UNAUTHENTICATED,
    "ResourceNotFound": CloudErrorReason.NOT_FOUND,
    "ResourceGroupNotFound": CloudErrorReason.NOT_FOUND,
    "NotFound": CloudErrorReason.NOT_FOUND,
    "AnotherOperationInProgress": CloudErrorReason.OPERATION_RUNNING,
    "OperationPreempted": CloudErrorReason.OPERATION_RUNNING,
    "EtagMismatch": CloudErrorReason.OPERATION_RUNNING,
    "InvalidParameter": CloudErrorReason.INVALID_ARGUMENT,
    "BadRequest": CloudErrorReason.INVALID_ARGUMENT,
    "VMSizeNotSupported": CloudErrorReason.INVALID_ARGUMENT,
    "TooManyRequests": CloudErrorReason.THROTTLED,
    "SubscriptionRequestsThrottled": CloudErrorReason.THROTTLED,
    "InternalServerError": CloudErrorReason.UNAVAILABLE,
    "ServiceUnavailable": CloudErrorReason.UNAVAILABLE,
}
_DONE = ("Succeeded", "Failed", "Canceled")


def _error_body(exc: HttpResponseError) -> tuple[str, str]:
    """(code, message) of an ARM error response: ``{"error": {"code", "message"}}``, the shape
    of both a refused call and a failed long-running operation's status."""
    code, message = "", ""
    response = exc.response
    if response is not None:
        try:
            body = json.loads(response.text())
        except ValueError:
            body = None
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            code = str(error.get("code") or "")
            message = str(error.get("message") or "")
    if not code and exc.error is not None:
        code = str(exc.error.code or "")
        message = message or str(exc.error.message or "")
    return code, message or str(exc.reason or "") or type(exc).__name__


def classify(exc: HttpResponseError) -> CloudError:
    """An Azure SDK exception as a cloud error with a reason, in Azure's words (ARM messages
    name resources, never tokens)."""
    code, message = _error_body(exc)
    status = exc.status_code or 0
    reason = _CODES.get(code)
    if reason is None:
        # AKS words some quota failures as OperationNotAllowed ("... exceeding approved
        # standardNCADSA100v4Family Cores quota"): the words tell.
        if is_stockout(f"{code} {message}"):
            reason = CloudErrorReason.STOCKOUT
        elif "quota" in message.lower() and status in (400, 403, 409):
            reason = CloudErrorReason.QUOTA_EXCEEDED
        elif status == 429:
            reason = CloudErrorReason.THROTTLED
        elif status >= 500:
            reason = CloudErrorReason.UNAVAILABLE
        elif status == 401:
            reason = CloudErrorReason.UNAUTHENTICATED
        elif status == 403:
            reason = CloudErrorReason.PERMISSION_DENIED
        elif status == 404:
            reason = CloudErrorReason.NOT_FOUND
        elif status == 409:
            reason = CloudErrorReason.OPERATION_RUNNING
        else:
            reason = CloudErrorReason.INVALID_ARGUMENT
    return CloudError(reason, f"{code}: {message}" if code else message)


def taint_string(key: str, value: str, effect: str) -> str:
    """AKS writes node taints as ``key=value:Effect``."""
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"


def agent_pool_properties(c: CloudCluster, plan: PoolPlan) -> dict[str, Any]:
    """The agent pool a plan says, as ARM's ``properties`` (VM size, GPU driver, OS disk, zones,
    autoscaling bounds, labels and taints)."""
    props: dict[str, Any] = {
        "mode": "User",
        "osType": "Linux",
        "type": "VirtualMachineScaleSets",
        "vmSize": plan.vm_size or "",
        "count": plan.node_count,
        "osDiskSizeGB": plan.disk_size_gb,
        "nodeLabels": dict(plan.labels),
        "nodeTaints": [taint_string(t.key, t.value, t.effect.value) for t in plan.taints],
        "tags": {OWNER_LABEL: c.owner},
    }
    if plan.zones:
        props["availabilityZones"] = list(plan.zones)
    if plan.gpu_driver:
        props["gpuProfile"] = {"driver": plan.gpu_driver}
    if plan.max_node_count is not None:
        low = plan.min_node_count or 0
        props["enableAutoScaling"] = True
        props["minCount"] = low
        props["maxCount"] = plan.max_node_count
        props["count"] = min(max(plan.node_count, low), plan.max_node_count)
    else:
        props["enableAutoScaling"] = False
    return props


def managed_cluster_body(c: CloudCluster) -> dict[str, Any]:
    """The managed cluster with its system pool (Standard_D4s_v5, 1..2, as Modelplane's)."""
    return {
        "location": c.region,
        "tags": {OWNER_LABEL: c.owner},
        "identity": {"type": "SystemAssigned"},
        "properties": {
            "kubernetesVersion": c.kubernetes_version,
            "dnsPrefix": c.name,
            "agentPoolProfiles": [
                {
                    "name": SYSTEM_POOL,
                    "mode": "System",
                    "osType": "Linux",
                    "type": "VirtualMachineScaleSets",
                    "vmSize": SYSTEM_VM_SIZE,
                    "count": 1,
                    "enableAutoScaling": True,
                    "minCount": 1,
                    "maxCount": 2,
                }
            ],
            "networkProfile": {
                "networkPlugin": "azure",
                "networkPluginMode": "overlay",
                "podCidr": "10.244.0.0/16",
                "serviceCidr": "10.96.0.0/16",
                "dnsServiceIP": "10.96.0.10",
            },
        },
    }


class _StaticToken:
    """A bearer token read from a file (``MODELFLEET_AKS_TOKEN_FILE``): re-read when asked, so a
    token rotated on disk is picked up; valid for the next hour as far as the SDK knows."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(self._path.read_text().strip(), int(time.time()) + 3600)


class _PlainHttpAllowed(SansIOHTTPPolicy[Any, Any]):
    """Let the bearer token go to an ``http://`` endpoint: only installed when the worker is
    configured with one (the simulated Azure on loopback); Azure itself is always https."""

    def on_request(self, request: PipelineRequest[Any]) -> None:
        request.context["enforce_https"] = False


def _mapping(found: Any) -> dict[str, Any]:
    return dict(found) if isinstance(found, Mapping) else {}


class AKS:
    """One worker's Azure access; clients are built per credentials profile and reused."""

    def __init__(self, settings: CloudSettings) -> None:
        self._settings = settings
        self._clients: dict[str, ContainerServiceClient] = {}
        self._lock = threading.Lock()

    @property
    def resource_group(self) -> str:
        return self._settings.aks_resource_group

    def _credential(self, profile: str) -> tuple[TokenCredential, str | None]:
        """The profile's credential and the subscription it names (None: it names none)."""
        principal = azure_profile(self._settings.credentials_dir, profile)
        if principal is not None and {"tenantId", "clientId", "clientSecret"} <= set(principal):
            credential: TokenCredential = ClientSecretCredential(
                principal["tenantId"], principal["clientId"], principal["clientSecret"]
            )
            return credential, principal.get("subscriptionId")
        subscription = principal.get("subscriptionId") if principal else None
        if self._settings.aks_token_file is not None:
            return _StaticToken(self._settings.aks_token_file), subscription
        return DefaultAzureCredential(), subscription

    def _client(self, c: CloudCluster) -> ContainerServiceClient:
        with self._lock:
            client = self._clients.get(c.credentials)
            if client is None:
                credential, subscription = self._credential(c.credentials)
                subscription = subscription or self._settings.aks_subscription
                if not subscription:
                    raise CloudError(
                        CloudErrorReason.INVALID_ARGUMENT,
                        no_subscription_message(c.name, c.credentials),
                    )
                endpoint = self._settings.aks_endpoint
                options: dict[str, Any] = {
                    "retry_total": 0,
                    "polling_interval": self._settings.poll_seconds,
                    "connection_timeout": 30,
                    "read_timeout": 60,
                }
                if endpoint and endpoint.startswith("http://"):
                    options["per_call_policies"] = [_PlainHttpAllowed()]
                client = ContainerServiceClient(
                    credential, subscription, base_url=endpoint or None, **options
                )
                self._clients[c.credentials] = client
            return client

    def _call(self, c: CloudCluster, fn: Callable[[ContainerServiceClient], Any]) -> Any:
        try:
            return fn(self._client(c))
        except HttpResponseError as exc:
            raise classify(exc) from None
        except (ServiceRequestError, ServiceResponseError) as exc:
            raise CloudError(CloudErrorReason.UNAVAILABLE, type(exc).__name__) from None
        except ClientAuthenticationError as exc:
            # The credential could not get a token (no secret in its message, only the cause).
            raise CloudError(
                CloudErrorReason.UNAUTHENTICATED,
                f"no Azure token for credentials profile {c.credentials!r}: {type(exc).__name__}",
            ) from None

    def wait(self, c: CloudCluster, poller: LROPoller[Any], beat: Callable[[], None]) -> None:
        """Wait for a long-running operation, calling ``beat`` between polls; its failure (the
        operation's ARM error) as a cloud error."""

        def run(_: ContainerServiceClient) -> Any:
            # The poller's thread raises its failure from wait() as well as from result().
            while not poller.done():
                beat()
                poller.wait(self._settings.poll_seconds)
            return poller.result()

        self._call(c, run)

    def _unless_gone(self, c: CloudCluster, fn: Callable[[ContainerServiceClient], Any]) -> Any:
        """:meth:`_call`, with None for a resource that does not exist."""
        try:
            return self._call(c, fn)
        except CloudError as exc:
            if exc.reason is CloudErrorReason.NOT_FOUND:
                return None
            raise

    # -- clusters -------------------------------------------------------------------------

    def get_cluster(self, c: CloudCluster) -> dict[str, Any] | None:
        """The managed cluster as ARM JSON, or None when it does not exist."""
        found = self._unless_gone(
            c, lambda cl: cl.managed_clusters.get(self.resource_group, c.name)
        )
        return None if found is None else _mapping(found)

    def create_cluster(self, c: CloudCluster) -> LROPoller[Any] | None:
        """Start creating the managed cluster with its system pool; None when one of that name
        owned by ``c.owner`` exists already (a retried create: wait on its state instead)."""
        found = self.get_cluster(c)
        if found is not None:
            if (found.get("tags") or {}).get(OWNER_LABEL) != c.owner:
                raise CloudError(
                    CloudErrorReason.ALREADY_EXISTS,
                    f"AKS cluster {c.name} already exists in resource group "
                    f"{self.resource_group} and was not created by this InferenceCluster; pick "
                    "another name or adopt it as source Existing",
                )
            return None
        body = aks_models.ManagedCluster(managed_cluster_body(c))
        try:
            poller: LROPoller[Any] = self._call(
                c,
                lambda cl: cl.managed_clusters.begin_create_or_update(
                    self.resource_group, c.name, body
                ),
            )
        except CloudError as exc:
            if exc.reason is CloudErrorReason.NOT_FOUND:
                raise CloudError(
                    exc.reason,
                    f"{exc.message} (the worker creates AKS clusters in resource group "
                    f"{self.resource_group}: create it, or set MODELFLEET_AKS_RESOURCE_GROUP)",
                ) from None
            raise
        return poller

    def delete_cluster(self, c: CloudCluster) -> LROPoller[Any] | None:
        """Start deleting (with its agent pools); None when it is already gone."""
        if self.get_cluster(c) is None:
            return None
        poller: LROPoller[Any] | None = self._unless_gone(
            c, lambda cl: cl.managed_clusters.begin_delete(self.resource_group, c.name)
        )
        return poller

    # -- agent pools ----------------------------------------------------------------------

    def get_agent_pool(self, c: CloudCluster, pool: str) -> dict[str, Any] | None:
        found = self._unless_gone(
            c, lambda cl: cl.agent_pools.get(self.resource_group, c.name, pool)
        )
        return None if found is None else _mapping(found)

    def put_agent_pool(self, c: CloudCluster, plan: PoolPlan) -> LROPoller[Any]:
        """Create the pool, or update it to the plan (ARM's PUT is both)."""
        body = aks_models.AgentPool({"properties": agent_pool_properties(c, plan)})
        poller: LROPoller[Any] = self._call(
            c,
            lambda cl: cl.agent_pools.begin_create_or_update(
                self.resource_group, c.name, plan.name, body
            ),
        )
        return poller

    def update_agent_pool(self, c: CloudCluster, plan: PoolPlan) -> LROPoller[Any]:
        """Set the pool's size or autoscaling bounds to the plan's; an autoscaled pool keeps the
        size the autoscaler chose, within the new bounds."""
        if plan.max_node_count is not None:
            found = self.get_agent_pool(c, plan.name) or {}
            current = int((found.get("properties") or {}).get("count", plan.node_count))
            plan = plan.model_copy(update={"node_count": current})
        return self.put_agent_pool(c, plan)

    def delete_agent_pool(self, c: CloudCluster, pool: str) -> LROPoller[Any] | None:
        if self.get_agent_pool(c, pool) is None:
            return None
        poller: LROPoller[Any] | None = self._unless_gone(
            c, lambda cl: cl.agent_pools.begin_delete(self.resource_group, c.name, pool)
        )
        return poller

    def shapes(self, c: CloudCluster) -> list[PoolShape]:
        """Every agent pool but the system one, with its live count and autoscaling bounds."""
        found = self._call(c, lambda cl: list(cl.agent_pools.list(self.resource_group, c.name)))
        out = []
        for pool in found:
            entry = _mapping(pool)
            name = str(entry.get("name", ""))
            props = entry.get("properties") or {}
            if name == SYSTEM_POOL or props.get("mode") == "System":
                continue
            autoscaled = bool(props.get("enableAutoScaling"))
            out.append(
                PoolShape(
                    name=name,
                    node_count=int(props.get("count") or 0),
                    min_node_count=int(props.get("minCount") or 0) if autoscaled else None,
                    max_node_count=int(props.get("maxCount") or 0) if autoscaled else None,
                )
            )
        return sorted(out, key=lambda s: s.name)

    # -- kubeconfig -----------------------------------------------------------------------

    def write_kubeconfig(self, c: CloudCluster) -> Path:
        """Write ``<credentials dir>/<cluster>.yaml`` from ``listClusterUserCredential``."""
        found = self._call(
            c,
            lambda cl: cl.managed_clusters.list_cluster_user_credentials(
                self.resource_group, c.name
            ),
        )
        configs = _mapping(found).get("kubeconfigs") or []
        raw = configs[0].get("value") if configs else None
        if not raw:
            raise CloudError(
                CloudErrorReason.NOT_FOUND, f"cluster {c.name} returned no user kubeconfig yet"
            )
        # The SDK hands back the wire form (base64) or bytes, depending on how it decoded.
        text = raw.decode() if isinstance(raw, bytes) else base64.b64decode(str(raw)).decode()
        doc = yaml.safe_load(text)
        if not isinstance(doc, dict) or doc.get("kind") != "Config" or not doc.get("clusters"):
            raise CloudError(
                CloudErrorReason.OPERATION_FAILED,
                f"cluster {c.name}: the user credential is not a kubeconfig",
            )
        return write_kubeconfig_file(self._settings.credentials_dir, c.name, text)

    def forget_kubeconfig(self, c: CloudCluster) -> bool:
        """Remove the cluster's kubeconfig (after the cluster is deleted)."""
        return remove_token_kubeconfig(self._settings.credentials_dir, c.name)

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()


def provisioning_state(found: Mapping[str, Any] | None) -> str | None:
    """``properties.provisioningState`` of an ARM resource (None when there is none)."""
    if found is None:
        return None
    return str((found.get("properties") or {}).get("provisioningState") or "") or None


def settled(state: str | None) -> bool:
    return state in _DONE

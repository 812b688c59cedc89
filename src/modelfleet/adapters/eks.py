"""EKS through ``boto3``: create/describe/delete clusters and managed node groups from pool plans
(instance type, NVIDIA AMI, labels, taints, scaling bounds; a launch template for EFA
interfaces and Capacity Blocks), and a token kubeconfig minted on the worker from a presigned
STS GetCallerIdentity URL, exactly as ``aws eks get-token`` does.

The only module that imports boto3/botocore. Endpoint, credentials profile, IAM roles and
subnets come from the worker's :class:`~modelfleet.adapters.cloud_config.CloudSettings`
(documented there). botocore's own retries are off: Temporal retries the activity on the
retryable reasons, with backoff and visibly.
"""

from __future__ import annotations

import base64
import threading
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from modelfleet.adapters.cloud_config import (
    CloudSettings,
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
    eks_scaling,
    is_stockout,
)

SYSTEM_NODEGROUP = "system"
SYSTEM_INSTANCE = "m6i.xlarge"
_EFFECT = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}
_SCALING = ("minSize", "maxSize", "desiredSize")
# One EFA interface per network card (reference section 4.2); card 0 also carries IP traffic.
_EFA_CARDS = {"p5.48xlarge": 32, "p5e.48xlarge": 32, "p5en.48xlarge": 16, "p4d.24xlarge": 4}
_CODES = {
    "ThrottlingException": CloudErrorReason.THROTTLED,
    "TooManyRequestsException": CloudErrorReason.THROTTLED,
    "RequestLimitExceeded": CloudErrorReason.THROTTLED,
    "ServiceUnavailableException": CloudErrorReason.UNAVAILABLE,
    "ServiceUnavailable": CloudErrorReason.UNAVAILABLE,
    "ServerException": CloudErrorReason.UNAVAILABLE,
    "InternalFailure": CloudErrorReason.UNAVAILABLE,
    "ResourceLimitExceededException": CloudErrorReason.QUOTA_EXCEEDED,
    "InsufficientInstanceCapacity": CloudErrorReason.STOCKOUT,
    "AccessDeniedException": CloudErrorReason.PERMISSION_DENIED,
    "UnauthorizedException": CloudErrorReason.PERMISSION_DENIED,
    "InvalidParameterException": CloudErrorReason.INVALID_ARGUMENT,
    "InvalidRequestException": CloudErrorReason.INVALID_ARGUMENT,
    "ResourceNotFoundException": CloudErrorReason.NOT_FOUND,
    "ResourceInUseException": CloudErrorReason.RESOURCE_IN_USE,
}
_TOKEN_PREFIX = "k8s-aws-v1."


def classify(exc: ClientError | BotoCoreError) -> CloudError:
    if isinstance(exc, BotoCoreError):
        # Connection and endpoint failures: the cloud did not answer.
        return CloudError(CloudErrorReason.UNAVAILABLE, type(exc).__name__)
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    reason = _CODES.get(code)
    if is_stockout(str(error.get("Message", ""))):
        reason = CloudErrorReason.STOCKOUT
    if reason is None:
        reason = (
            CloudErrorReason.UNAVAILABLE if status >= 500 else CloudErrorReason.INVALID_ARGUMENT
        )
    return CloudError(reason, f"{code}: {error.get('Message', '')}")


def nodegroup_failure(group: dict[str, Any]) -> CloudError:
    """Why a node group is CREATE_FAILED, from its health issues."""
    issues = (group.get("health") or {}).get("issues") or []
    text = "; ".join(f"{i.get('code')}: {i.get('message')}" for i in issues) or "no reason given"
    quota = any(
        "limit" in str(i.get("message", "")).lower() or "quota" in str(i.get("message", "")).lower()
        for i in issues
    )
    if is_stockout(text):
        reason = CloudErrorReason.STOCKOUT
    elif quota:
        reason = CloudErrorReason.QUOTA_EXCEEDED
    else:
        reason = CloudErrorReason.OPERATION_FAILED
    return CloudError(reason, f"node group {group.get('nodegroupName')} failed: {text}")


def efa_interfaces(instance_type: str) -> list[dict[str, Any]]:
    cards = _EFA_CARDS.get(instance_type, 1)
    return [
        {
            "NetworkCardIndex": card,
            "DeviceIndex": 0 if card == 0 else 1,
            "InterfaceType": "efa" if card == 0 else "efa-only",
            "DeleteOnTermination": True,
        }
        for card in range(cards)
    ]


def nodegroup_request(
    c: CloudCluster, plan: PoolPlan, node_role: str, subnets: list[str], template: str | None
) -> dict[str, Any]:
    """The CreateNodegroup arguments a plan says."""
    request: dict[str, Any] = {
        "clusterName": c.name,
        "nodegroupName": plan.name,
        "nodeRole": node_role,
        "subnets": subnets,
        "instanceTypes": [plan.instance_type or ""],
        "amiType": plan.ami_type or "AL2023_x86_64_NVIDIA",
        "scalingConfig": dict(zip(_SCALING, eks_scaling(plan), strict=True)),
        "labels": dict(plan.labels),
        "taints": [
            {"key": t.key, "value": t.value, "effect": _EFFECT[t.effect.value]} for t in plan.taints
        ],
        "tags": {OWNER_LABEL: c.owner},
    }
    if template is not None:
        # Disk size lives in the launch template once there is one (EKS rejects both).
        request["launchTemplate"] = {"name": template}
    else:
        request["diskSize"] = plan.disk_size_gb
    if plan.capacity_reservation_id:
        request["capacityType"] = "CAPACITY_BLOCK"
    return request


def launch_template_data(plan: PoolPlan) -> dict[str, Any] | None:
    """A launch template for EFA and/or a Capacity Block, or None when neither is asked."""
    if not plan.efa and not plan.capacity_reservation_id:
        return None
    data: dict[str, Any] = {
        "BlockDeviceMappings": [
            {"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": plan.disk_size_gb}}
        ]
    }
    if plan.efa:
        data["NetworkInterfaces"] = efa_interfaces(plan.instance_type or "")
    if plan.capacity_reservation_id:
        data["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
        data["CapacityReservationSpecification"] = {
            "CapacityReservationTarget": {"CapacityReservationId": plan.capacity_reservation_id}
        }
    return data


def template_name(c: CloudCluster, pool: str) -> str:
    return f"modelfleet-{c.name}-{pool}"


class EKS:
    """One worker's AWS access; sessions are built per credentials profile and region."""

    def __init__(self, settings: CloudSettings) -> None:
        self._settings = settings
        self._clients: dict[tuple[str, str, str], Any] = {}
        self._lock = threading.Lock()
        self._token_lock = threading.Lock()

    def _client(self, c: CloudCluster, service: str) -> Any:
        key = (c.credentials, c.region, service)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                profile = None if c.credentials == "default" else c.credentials
                session = boto3.Session(profile_name=profile, region_name=c.region)
                client = session.client(
                    service,
                    endpoint_url=self._settings.eks_endpoint,
                    config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
                )
                self._clients[key] = client
            return client

    def _call(self, c: CloudCluster, service: str, method: str, **kwargs: Any) -> Any:
        try:
            return getattr(self._client(c, service), method)(**kwargs)
        except (ClientError, BotoCoreError) as exc:
            raise classify(exc) from None

    def _account(self, c: CloudCluster) -> str:
        return str(self._call(c, "sts", "get_caller_identity")["Account"])

    def _role(self, c: CloudCluster, configured: str | None, default: str) -> str:
        return configured or f"arn:aws:iam::{self._account(c)}:role/{default}"

    def _subnets(self, c: CloudCluster, zones: list[str] | None = None) -> list[str]:
        if self._settings.eks_subnets:
            return list(self._settings.eks_subnets)
        found = self._call(
            c,
            "ec2",
            "describe_subnets",
            Filters=[{"Name": "default-for-az", "Values": ["true"]}],
        )["Subnets"]
        chosen = [s for s in found if not zones or s["AvailabilityZone"] in zones] or found
        return sorted(s["SubnetId"] for s in chosen)

    # -- clusters -------------------------------------------------------------------------

    def create_cluster(self, c: CloudCluster) -> bool:
        """Start creating the cluster; False when one owned by ``c.owner`` exists already."""
        try:
            self._call(
                c,
                "eks",
                "create_cluster",
                name=c.name,
                version=c.kubernetes_version,
                roleArn=self._role(c, self._settings.eks_cluster_role, "modelfleet-eks-cluster"),
                resourcesVpcConfig={
                    "subnetIds": self._subnets(c),
                    "endpointPublicAccess": True,
                },
                accessConfig={
                    "authenticationMode": "API_AND_CONFIG_MAP",
                    "bootstrapClusterCreatorAdminPermissions": True,
                },
                tags={OWNER_LABEL: c.owner},
            )
        except CloudError as exc:
            if exc.reason is not CloudErrorReason.RESOURCE_IN_USE:
                raise
            found = self.describe_cluster(c)
            if found is None or (found.get("tags") or {}).get(OWNER_LABEL) != c.owner:
                raise CloudError(
                    CloudErrorReason.ALREADY_EXISTS,
                    f"EKS cluster {c.name} already exists in {c.region} and was not created by "
                    "this InferenceCluster; pick another name or adopt it as source Existing",
                ) from None
            return False
        return True

    def describe_cluster(self, c: CloudCluster) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self._call(c, "eks", "describe_cluster", name=c.name)["cluster"]
        except CloudError as exc:
            if exc.reason is CloudErrorReason.NOT_FOUND:
                return None
            raise
        return found

    def delete_cluster(self, c: CloudCluster) -> bool:
        """Start deleting; False when it is gone. EKS refuses while node groups remain
        (ResourceInUse, retryable): delete them first."""
        try:
            self._call(c, "eks", "delete_cluster", name=c.name)
        except CloudError as exc:
            if exc.reason is CloudErrorReason.NOT_FOUND:
                return False
            raise
        return True

    def nodegroups(self, c: CloudCluster) -> list[str]:
        try:
            names = self._call(c, "eks", "list_nodegroups", clusterName=c.name)["nodegroups"]
        except CloudError as exc:
            if exc.reason is CloudErrorReason.NOT_FOUND:
                return []
            raise
        return sorted(str(n) for n in names)

    # -- node groups ----------------------------------------------------------------------

    def create_nodegroup(self, c: CloudCluster, plan: PoolPlan) -> bool:
        """Start creating the node group; False when it exists already (ours: the cluster is)."""
        template = None
        data = launch_template_data(plan)
        if data is not None:
            template = template_name(c, plan.name)
            self._ensure_template(c, template, data)
        request = nodegroup_request(
            c,
            plan,
            self._role(c, self._settings.eks_node_role, "modelfleet-eks-node"),
            self._subnets(c, plan.zones),
            template,
        )
        try:
            self._call(c, "eks", "create_nodegroup", **request)
        except CloudError as exc:
            if exc.reason is CloudErrorReason.RESOURCE_IN_USE:
                return False
            raise
        return True

    def system_plan(self) -> PoolPlan:
        return PoolPlan(
            name=SYSTEM_NODEGROUP,
            class_name="",
            node_count=1,
            min_node_count=1,
            max_node_count=2,
            instance_type=SYSTEM_INSTANCE,
            ami_type="AL2023_x86_64_STANDARD",
            disk_size_gb=50,
        )

    def _ensure_template(self, c: CloudCluster, name: str, data: dict[str, Any]) -> None:
        try:
            self._call(
                c,
                "ec2",
                "create_launch_template",
                LaunchTemplateName=name,
                LaunchTemplateData=data,
                TagSpecifications=[
                    {
                        "ResourceType": "launch-template",
                        "Tags": [{"Key": OWNER_LABEL, "Value": c.owner}],
                    }
                ],
            )
        except CloudError as exc:
            if "AlreadyExists" not in exc.message:
                raise

    def describe_nodegroup(self, c: CloudCluster, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self._call(
                c, "eks", "describe_nodegroup", clusterName=c.name, nodegroupName=name
            )["nodegroup"]
        except CloudError as exc:
            if exc.reason is CloudErrorReason.NOT_FOUND:
                return None
            raise
        return found

    def shapes(self, c: CloudCluster) -> list[PoolShape]:
        """Every node group but the system one, with its scaling range."""
        out = []
        for name in self.nodegroups(c):
            found = self.describe_nodegroup(c, name)
            if name == SYSTEM_NODEGROUP or found is None:
                continue
            scaling = found.get("scalingConfig") or {}
            out.append(
                PoolShape(
                    name=name,
                    node_count=int(scaling.get("desiredSize", 0)),
                    min_node_count=int(scaling.get("minSize", 0)),
                    max_node_count=int(scaling.get("maxSize", 0)),
                )
            )
        return out

    def update_scaling(self, c: CloudCluster, plan: PoolPlan) -> None:
        """Set the node group's scaling range (and desired size) to what the plan says."""
        low, high, desired = eks_scaling(plan)
        if plan.max_node_count is not None:
            # An autoscaled group keeps the size the autoscaler chose, within the new range.
            found = self.describe_nodegroup(c, plan.name) or {}
            current = int((found.get("scalingConfig") or {}).get("desiredSize", desired))
            desired = min(max(current, low), high)
        self._call(
            c,
            "eks",
            "update_nodegroup_config",
            clusterName=c.name,
            nodegroupName=plan.name,
            scalingConfig={"minSize": low, "maxSize": high, "desiredSize": desired},
        )

    def delete_nodegroup(self, c: CloudCluster, name: str) -> bool:
        try:
            self._call(c, "eks", "delete_nodegroup", clusterName=c.name, nodegroupName=name)
        except CloudError as exc:
            if exc.reason is CloudErrorReason.NOT_FOUND:
                return False
            raise
        return True

    def delete_template(self, c: CloudCluster, pool: str) -> None:
        try:
            self._call(
                c, "ec2", "delete_launch_template", LaunchTemplateName=template_name(c, pool)
            )
        except CloudError:
            # Absent (no EFA / capacity block) or already deleted: nothing to clean.
            return

    def launch_templates(self, c: CloudCluster) -> list[str]:
        found = self._call(c, "ec2", "describe_launch_templates")["LaunchTemplates"]
        prefix = f"modelfleet-{c.name}-"
        return sorted(
            t["LaunchTemplateName"] for t in found if t["LaunchTemplateName"].startswith(prefix)
        )

    # -- kubeconfig -----------------------------------------------------------------------

    def token(self, c: CloudCluster) -> str:
        """A bearer token for the cluster: a presigned STS GetCallerIdentity URL carrying the
        cluster name in ``x-k8s-aws-id``, base64url-encoded (``aws eks get-token``)."""
        sts = self._client(c, "sts")

        def add_cluster_header(request: Any, **_: Any) -> None:
            request.headers["x-k8s-aws-id"] = c.name

        event = "before-sign.sts.GetCallerIdentity"
        # The header is per call and the client is shared between activity threads.
        with self._token_lock:
            sts.meta.events.register_first(event, add_cluster_header)
            try:
                url = sts.generate_presigned_url(
                    "get_caller_identity", Params={}, ExpiresIn=60, HttpMethod="GET"
                )
            finally:
                sts.meta.events.unregister(event, add_cluster_header)
        encoded = base64.urlsafe_b64encode(str(url).encode()).decode().rstrip("=")
        return _TOKEN_PREFIX + encoded

    def forget_kubeconfig(self, c: CloudCluster) -> bool:
        """Remove the cluster's minted kubeconfig (after the cluster is deleted)."""
        return remove_token_kubeconfig(self._settings.credentials_dir, c.name)

    def write_kubeconfig(self, c: CloudCluster) -> Path:
        found = self.describe_cluster(c)
        if found is None or not found.get("endpoint"):
            raise CloudError(CloudErrorReason.NOT_FOUND, f"cluster {c.name} has no endpoint yet")
        ca = (found.get("certificateAuthority") or {}).get("data")
        return write_token_kubeconfig(
            self._settings.credentials_dir,
            c.name,
            server_url(str(found["endpoint"])),
            ca,
            self.token(c),
        )

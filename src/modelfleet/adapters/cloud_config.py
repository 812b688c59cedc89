"""Worker-side cloud settings and credentials: which GKE / EKS / AKS endpoint a worker talks to and
with which credentials, plus the kubeconfig files it writes for the clusters it provisions.

Everything here is read from the worker's environment and credentials directory; none of it is
ever put in a workflow payload, a history, a log line or an error message.

Settings (environment variables of the worker process):

- ``MODELFLEET_GKE_ENDPOINT``: the container API endpoint (default: Google's). A value with a
  scheme (``http://127.0.0.1:PORT``) is used verbatim; that is how the simulated cloud is reached.
- GKE credentials for profile ``P`` (``spec.cluster.gke.credentials.name``), first found wins:
  ``<credentials dir>/gcp/P.json`` (a service-account key), then ``MODELFLEET_GKE_TOKEN_FILE``
  (a file holding an OAuth access token), then Application Default Credentials.
- The GKE project, when ``spec.cluster.gke.project`` is not given: the ``project_id`` of the
  profile's service-account key, then ``MODELFLEET_GKE_PROJECT``, then the project Application
  Default Credentials name. None of them: provisioning fails, naming the three places.
- ``MODELFLEET_EKS_ENDPOINT``: one endpoint for EKS, EC2 and STS (default: AWS's regional ones).
- EKS credentials for profile ``P``: the AWS shared-config profile ``P`` unless ``P`` is
  ``default``, in which case the standard chain (environment, ``~/.aws``, instance role).
- ``MODELFLEET_EKS_CLUSTER_ROLE_ARN`` / ``MODELFLEET_EKS_NODE_ROLE_ARN``: the IAM roles (default
  ``arn:aws:iam::<account>:role/modelfleet-eks-cluster`` / ``...-eks-node``, the account from
  STS); ``MODELFLEET_EKS_SUBNETS`` (comma-separated; default: the default VPC's default subnets).
- ``MODELFLEET_AKS_ENDPOINT``: the Azure Resource Manager endpoint (default: Azure's public
  cloud, ``https://management.azure.com``). An ``http://`` value (the simulated Azure) is allowed
  to carry the bearer token over plain HTTP; nothing else is.
- AKS credentials for profile ``P`` (``spec.cluster.aks.credentials.name``), first found wins:
  ``<credentials dir>/azure/P.json`` (a service principal: ``tenantId``, ``clientId``,
  ``clientSecret``, and optionally ``subscriptionId``), then ``MODELFLEET_AKS_TOKEN_FILE`` (a file
  holding an ARM access token), then ``DefaultAzureCredential`` (environment, managed identity,
  Azure CLI).
- The AKS subscription: the profile's ``subscriptionId``, then ``MODELFLEET_AKS_SUBSCRIPTION_ID``.
  None: provisioning fails, naming both places. ``MODELFLEET_AKS_RESOURCE_GROUP``: the resource
  group the clusters are created in (default ``modelfleet``; it must exist).
- ``MODELFLEET_CLOUD_POLL_SECONDS``: how often long-running operations are polled (default 10).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ENV_GKE_ENDPOINT = "MODELFLEET_GKE_ENDPOINT"
ENV_GKE_TOKEN_FILE = "MODELFLEET_GKE_TOKEN_FILE"
ENV_GKE_PROJECT = "MODELFLEET_GKE_PROJECT"
ENV_EKS_ENDPOINT = "MODELFLEET_EKS_ENDPOINT"
ENV_EKS_CLUSTER_ROLE = "MODELFLEET_EKS_CLUSTER_ROLE_ARN"
ENV_EKS_NODE_ROLE = "MODELFLEET_EKS_NODE_ROLE_ARN"
ENV_EKS_SUBNETS = "MODELFLEET_EKS_SUBNETS"
ENV_AKS_ENDPOINT = "MODELFLEET_AKS_ENDPOINT"
ENV_AKS_TOKEN_FILE = "MODELFLEET_AKS_TOKEN_FILE"
ENV_AKS_SUBSCRIPTION = "MODELFLEET_AKS_SUBSCRIPTION_ID"
ENV_AKS_RESOURCE_GROUP = "MODELFLEET_AKS_RESOURCE_GROUP"
DEFAULT_AKS_RESOURCE_GROUP = "modelfleet"
ENV_POLL = "MODELFLEET_CLOUD_POLL_SECONDS"


@dataclass(frozen=True)
class CloudSettings:
    credentials_dir: Path
    gke_endpoint: str | None = None
    gke_token_file: Path | None = None
    gke_project: str | None = None
    eks_endpoint: str | None = None
    eks_cluster_role: str | None = None
    eks_node_role: str | None = None
    eks_subnets: tuple[str, ...] = ()
    aks_endpoint: str | None = None
    aks_token_file: Path | None = None
    aks_subscription: str | None = None
    aks_resource_group: str = DEFAULT_AKS_RESOURCE_GROUP
    poll_seconds: float = 10.0

    @classmethod
    def from_env(cls, credentials_dir: Path) -> CloudSettings:
        env = os.environ
        token = env.get(ENV_GKE_TOKEN_FILE)
        aks_token = env.get(ENV_AKS_TOKEN_FILE)
        subnets = tuple(s.strip() for s in env.get(ENV_EKS_SUBNETS, "").split(",") if s.strip())
        return cls(
            credentials_dir=credentials_dir,
            gke_endpoint=env.get(ENV_GKE_ENDPOINT) or None,
            gke_token_file=Path(token) if token else None,
            gke_project=env.get(ENV_GKE_PROJECT) or None,
            eks_endpoint=env.get(ENV_EKS_ENDPOINT) or None,
            eks_cluster_role=env.get(ENV_EKS_CLUSTER_ROLE) or None,
            eks_node_role=env.get(ENV_EKS_NODE_ROLE) or None,
            eks_subnets=subnets,
            aks_endpoint=env.get(ENV_AKS_ENDPOINT) or None,
            aks_token_file=Path(aks_token) if aks_token else None,
            aks_subscription=env.get(ENV_AKS_SUBSCRIPTION) or None,
            aks_resource_group=env.get(ENV_AKS_RESOURCE_GROUP) or DEFAULT_AKS_RESOURCE_GROUP,
            poll_seconds=float(env.get(ENV_POLL) or 10.0),
        )


def gke_key_file(credentials_dir: Path, profile: str) -> Path:
    return credentials_dir / "gcp" / f"{profile}.json"


def key_file_project(credentials_dir: Path, profile: str) -> str | None:
    """The ``project_id`` of the profile's service-account key, if it has one (read as JSON
    only: the key's secret parts are never looked at here)."""
    doc = _json_object(gke_key_file(credentials_dir, profile))
    project = doc.get("project_id") if doc is not None else None
    return project if isinstance(project, str) and project else None


def _json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object ``path`` holds; None when it is missing, unreadable or not an object."""
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def no_project_message(cluster: str, profile: str) -> str:
    return (
        f"cluster {cluster}: no GKE project: set spec.cluster.gke.project, or give credentials "
        f"profile {profile!r} one (project_id in gcp/{profile}.json in the worker's credentials "
        f"directory, {ENV_GKE_PROJECT} on the worker, or Application Default Credentials with "
        "a project)"
    )


def write_token_kubeconfig(
    credentials_dir: Path, cluster: str, server: str, ca_data: str | None, token: str
) -> Path:
    """``<credentials dir>/<cluster>.yaml`` (mode 0600), where the Kubernetes activities look.
    The CA is only meaningful (and only written) for an https endpoint."""
    entry: dict[str, Any] = {"server": server}
    if ca_data and server.startswith("https://"):
        entry["certificate-authority-data"] = ca_data
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": entry}],
        "users": [{"name": cluster, "user": {"token": token}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": cluster}}],
        "current-context": cluster,
    }
    return write_kubeconfig_file(credentials_dir, cluster, yaml.safe_dump(doc, sort_keys=False))


def azure_profile_file(credentials_dir: Path, profile: str) -> Path:
    return credentials_dir / "azure" / f"{profile}.json"


def azure_profile(credentials_dir: Path, profile: str) -> dict[str, str] | None:
    """The profile's service principal (``tenantId``, ``clientId``, ``clientSecret``,
    ``subscriptionId``) as strings, or None when the profile has no file. Never logged."""
    doc = _json_object(azure_profile_file(credentials_dir, profile))
    if doc is None:
        return None
    return {str(k): str(v) for k, v in doc.items() if isinstance(v, str) and v}


def no_subscription_message(cluster: str, profile: str) -> str:
    return (
        f"cluster {cluster}: no Azure subscription: give credentials profile {profile!r} one "
        f"(subscriptionId in azure/{profile}.json in the worker's credentials directory) or set "
        f"{ENV_AKS_SUBSCRIPTION} on the worker"
    )


def write_kubeconfig_file(credentials_dir: Path, cluster: str, content: str) -> Path:
    """``<credentials dir>/<cluster>.yaml`` (mode 0600) holding a kubeconfig the cloud minted
    (AKS's listClusterUserCredential, or :func:`write_token_kubeconfig`'s)."""
    credentials_dir.mkdir(parents=True, exist_ok=True)
    target = credentials_dir / f"{cluster}.yaml"
    partial = target.with_suffix(".yaml.tmp")
    partial.write_text(content)
    partial.chmod(0o600)
    # Atomic, so a probe never reads a half-written file.
    partial.replace(target)
    return target


def remove_token_kubeconfig(credentials_dir: Path, cluster: str) -> bool:
    """Remove the kubeconfig :func:`write_token_kubeconfig` wrote for ``cluster`` (its cloud
    cluster is gone: the minted token must not outlive it on disk); whether one was there."""
    target = credentials_dir / f"{cluster}.yaml"
    target.with_suffix(".yaml.tmp").unlink(missing_ok=True)
    try:
        target.unlink()
    except FileNotFoundError:
        return False
    return True


def server_url(endpoint: str) -> str:
    """A real endpoint is a bare host (GKE) or an https URL (EKS); one with a scheme is kept."""
    return endpoint if "://" in endpoint else f"https://{endpoint}"

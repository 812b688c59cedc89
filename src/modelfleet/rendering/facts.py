"""What the renderer needs to know about a workload cluster beyond the replica itself.

Pure data: the adapter that talks to the cluster (or the CLI, for an offline render) fills it in;
the renderer only reads it. Defaults describe the serving stack modelfleet installs, so a render
without any facts targets a standard cluster.
"""

from __future__ import annotations

from pydantic import Field

from modelfleet.api.clusters import NamespaceMode
from modelfleet.api.meta import DNSLabel, Model
from modelfleet.api.naming import LABEL_POOL
from modelfleet.api.schedulers import GangScheduler

DEFAULT_GATEWAY_NAME = "inference-gateway"
DEFAULT_GATEWAY_NAMESPACE = "modelfleet-system"
# Pinned, never floating tags: a render must mean the same thing tomorrow.
DEFAULT_EPP_IMAGE = "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.9.0"
DEFAULT_PD_SIDECAR_IMAGE = "ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0"


class ClusterFacts(Model):
    """The workload cluster's serving stack as the renderer sees it."""

    # The Gateway every replica's HTTPRoute attaches to.
    gateway_name: str = Field(default=DEFAULT_GATEWAY_NAME, min_length=1, max_length=253)
    gateway_namespace: DNSLabel = DEFAULT_GATEWAY_NAMESPACE
    epp_image: str = Field(default=DEFAULT_EPP_IMAGE, min_length=1)
    pd_sidecar_image: str = Field(default=DEFAULT_PD_SIDECAR_IMAGE, min_length=1)
    # Clusters whose CRDs predate the move of the EPP APIs to llm-d.ai still serve them under
    # inference.networking.x-k8s.io. The InferencePool is inference.networking.k8s.io/v1 either way.
    legacy_epp_api_group: bool = False
    # The node label that pins a pod to its pool, per pool; pools not listed use the default.
    default_pool_label: str = Field(default=LABEL_POOL, min_length=1)
    pool_labels: dict[str, str] = Field(default_factory=dict)
    # PerTenant: workloads go into ``mf-<deployment namespace>``; Deployment: into a namespace
    # named like the deployment's own.
    namespace_mode: NamespaceMode = NamespaceMode.PER_TENANT
    # The cluster's gang scheduler (None: the default scheduler); see ``gang_scheduling``.
    scheduler: GangScheduler | None = None

    def pool_label(self, pool: str) -> str:
        """The node label whose value is ``pool`` on that pool's nodes."""
        return self.pool_labels.get(pool, self.default_pool_label)

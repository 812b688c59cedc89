"""The InferenceCluster workflow's state that outlives a run, carried whole across
continue-as-new, and its input: settings beside the state.

What a run observes afresh (the probe's reason, gateway and pools, the access and stack
verdicts, the conditions) is not here: the first probe of a run finds it again.

Pure: pydantic models only. Bounded: the watched replicas by the replicas placed on the cluster,
the provisioning steps by ``cluster.steps``.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from modelfleet.api.clusters import InferenceCluster
from modelfleet.contracts.cloud_payloads import ProvisioningState
from modelfleet.contracts.watch_payloads import WatchedReplica
from modelfleet.contracts.wire import WireModel


class ClusterState(WireModel):
    """Everything the cluster workflow knows that outlives a run."""

    spec: InferenceCluster
    # When the resource was created: the first run's start (None until that run sets it).
    created: datetime | None = None
    # Probes failed in a row, and whether the cluster is placeable.
    failed_probes: int = 0
    # The first of those failed probes (None while the last one succeeded): the Fleet counts
    # the NotReady grace from here, so failover has a bound from when the cluster went silent.
    unreachable_since: datetime | None = None
    ready: bool = False
    # It went NotReady after being Ready and has not been swept since (``cluster.sweep``): a
    # return in a later run still sweeps.
    sweep_pending: bool = False
    # GKE/EKS: what provisioning created so far.
    provisioning: ProvisioningState = Field(default_factory=ProvisioningState)
    # The Ready replicas this cluster watches (``cluster.watch``), by ``namespace/replica``.
    watched: dict[str, WatchedReplica] = Field(default_factory=dict)


class ClusterInput(WireModel):
    state: ClusterState
    # Settings, passed on unchanged to the next run.
    probe_interval_seconds: int = 15
    # Consecutive failed probes before the cluster is reported NotReady.
    failure_threshold: int = 3
    # How often a Ready cluster sweeps the objects of replicas the ledger no longer holds there
    # (besides on its return from NotReady): what a crashed teardown left is removed this late.
    sweep_resync_seconds: int = Field(default=600, ge=1)
    # How long a delete waits for the cluster's replicas to move elsewhere.
    drain_timeout_seconds: int = 600
    # The deadline of each provisioning step, retries included.
    provision_deadline_seconds: int = 3600
    # How soon a cloud step whose worker died is retried (it resumes the cloud operation). A
    # step heartbeats every few seconds from a helper thread however slow its SDK call.
    cloud_heartbeat_seconds: int = 30

    @classmethod
    def of(cls, spec: InferenceCluster, **settings: int) -> ClusterInput:
        """A first run's input."""
        return cls(state=ClusterState(spec=spec), **settings)

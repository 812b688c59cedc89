"""Taking and renewing the controller's Lease on the management cluster (leader election; the
decision of whether the lease may be claimed is ``election.claim``'s).

May touch: the management cluster, through ``in_thread``; logging.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from modelfleet.adapters.management import KubeError, ManagementCluster
from modelfleet.controller import election
from modelfleet.controller.support import ControllerSettings, in_thread

log = logging.getLogger("modelfleet.controller")


async def try_lead(api: ManagementCluster, s: ControllerSettings) -> bool:
    """Take or renew the Lease: True when this controller leads now."""
    try:
        lease = await in_thread(
            lambda: api.get(election.LEASE_API_VERSION, "Lease", s.lease_name, s.lease_namespace)
        )
        spec = election.claim(lease, s.identity, s.lease_seconds, datetime.now(UTC))
        if spec is None:
            return False
        manifest: dict[str, Any] = {
            "apiVersion": election.LEASE_API_VERSION,
            "kind": "Lease",
            "metadata": {"name": s.lease_name, "namespace": s.lease_namespace},
            "spec": spec,
        }
        if lease is None:
            await in_thread(lambda: api.create(manifest))
        else:
            manifest["metadata"]["resourceVersion"] = lease["metadata"]["resourceVersion"]
            await in_thread(lambda: api.replace(manifest))
        return True
    except KubeError as exc:
        log.info("lease %s/%s not taken: %s", s.lease_namespace, s.lease_name, exc)
        return False


__all__ = ["try_lead"]

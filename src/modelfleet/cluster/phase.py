"""The phase an InferenceCluster reports (``status``, ``get clusters``, ModelfleetPhase), decided
from what its workflow knows, in one place. Pure: no Temporal, no I/O."""

from __future__ import annotations

from typing import Literal

Phase = Literal["Deleting", "Ready", "Failed", "Provisioning", "NotReady"]


def cluster_phase(
    *,
    deleting: bool,
    ready: bool,
    provisioned_by_modelfleet: bool,
    provisioned: bool,
    provisioning_failed: bool,
    provisioning: bool,
) -> Phase:
    """Deleting wins over everything; a Ready probe over the provisioning story; a cluster that
    modelfleet provisions and has not finished is Failed (its saga gave up) or Provisioning (it
    runs); anything else is NotReady (an adopted cluster not yet probed Ready, or a provisioned
    one whose probes fail)."""
    if deleting:
        return "Deleting"
    if ready:
        return "Ready"
    if provisioned_by_modelfleet and not provisioned:
        if provisioning_failed:
            return "Failed"
        if provisioning:
            return "Provisioning"
    return "NotReady"

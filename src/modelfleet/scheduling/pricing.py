"""What provisioned capacity costs per hour, for ``modelfleet plan`` on an InferenceCluster: a
small table of on-demand list prices for the machine types the examples and the provisioning
defaults use, and the estimate for a set of pools.

The prices are public on-demand list prices (USD per hour, Linux, no discounts, commitments,
Spot or Capacity Block rates, disks or network), as recorded on ``PRICES_RECORDED``. They are an
order-of-magnitude aid for a plan, not a quote: clouds change them, and they differ by region
(the region is shown next to each estimate for that reason). A machine type missing here is
reported as unpriced rather than guessed.

Layer rule: pure (no I/O, no clock); the caller passes what is to be created.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PRICES_RECORDED = "2026-11-23"

# (provider, machine type) -> USD per node-hour. GKE: us-central1; EKS: us-east-2.
LIST_PRICES: dict[tuple[str, str], float] = {
    # GKE (Compute Engine machine types; A3 prices include the 8 attached H100 GPUs)
    ("GKE", "a3-highgpu-8g"): 88.49,
    ("GKE", "e2-standard-4"): 0.134,  # the system pool every provisioned cluster gets
    # EKS (EC2 instance types)
    ("EKS", "p5en.48xlarge"): 84.80,
    ("EKS", "p5.48xlarge"): 55.04,
    ("EKS", "m6i.xlarge"): 0.192,  # the system node group every provisioned cluster gets
}
# The control plane fee per cluster-hour (standard tier / standard support).
CONTROL_PLANE: dict[str, float] = {"GKE": 0.10, "EKS": 0.10}
# The small system pool provisioning creates beside the declared pools: (name, machine type,
# initial nodes), as the GKE and EKS adapters create it (a unit test holds them together).
SYSTEM_POOLS: dict[str, tuple[str, str, int]] = {
    "GKE": ("system", "e2-standard-4", 1),
    "EKS": ("system", "m6i.xlarge", 1),
}


@dataclass(frozen=True, slots=True)
class PricedPool:
    """One pool to create: ``nodes`` machines of ``machine`` at ``hourly`` each (None: no list
    price known)."""

    name: str
    machine: str
    nodes: int
    hourly: float | None

    @property
    def total(self) -> float | None:
        return None if self.hourly is None else self.hourly * self.nodes


@dataclass(frozen=True, slots=True)
class Estimate:
    provider: str
    pools: tuple[PricedPool, ...]
    control_plane: float

    @property
    def known(self) -> float:
        """The hourly cost of everything priced (control plane included)."""
        return self.control_plane + sum(p.total or 0.0 for p in self.pools)

    @property
    def unpriced(self) -> tuple[str, ...]:
        """Machine types with no list price in the table."""
        return tuple(dict.fromkeys(p.machine for p in self.pools if p.hourly is None))


def hourly_price(provider: str, machine: str) -> float | None:
    return LIST_PRICES.get((provider, machine))


def estimate(provider: str, pools: Sequence[tuple[str, str, int]]) -> Estimate:
    """The hourly estimate for ``(pool name, machine type, node count)`` pools of one cluster
    of ``provider`` ("GKE" or "EKS"), its system pool and control plane fee included."""
    system = SYSTEM_POOLS.get(provider)
    every = [system, *pools] if system is not None else list(pools)
    priced = tuple(
        PricedPool(name, machine, nodes, hourly_price(provider, machine))
        for name, machine, nodes in every
    )
    return Estimate(provider, priced, CONTROL_PLANE.get(provider, 0.0))

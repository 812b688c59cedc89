"""What provisioned capacity costs per hour, for ``modelfleet plan`` on an InferenceCluster: the
price of a node, and the estimate for a set of pools.

A node's price comes, in this order, from its InferenceClass (``spec.provisioning.hourlyPrice``:
what the platform team says it pays, which no table can know), else from a small table of
on-demand list prices for the machine types the examples and the provisioning defaults use,
labelled with the date they were recorded, else it is unknown and left out of the estimate
(never guessed). Every estimate says where each price came from.

The table holds public on-demand prices (USD per hour, Linux, no discounts, commitments, Spot
or Capacity Block rates, disks or network) as recorded on ``PRICES_RECORDED``. Figures that could
not be checked against the provider's price list when recorded (the GPU machines' prices move
often and differ by region) are kept as estimates and labelled so. They are an order-of-magnitude
aid for a plan, not a quote: set the class's price for a figure you can trust.

Layer rule: pure (no I/O, no clock); the caller passes what is to be created.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

PRICES_RECORDED = "2026-11-23"


class PriceSource(StrEnum):
    CLASS = "class"  # the InferenceClass's spec.provisioning.hourlyPrice
    LIST = "list"  # the provider's on-demand list price, as recorded
    ESTIMATE = "estimate"  # recorded, but not confirmed against the provider's price list
    UNKNOWN = "unknown"


# (provider, machine type) -> USD per node-hour. GKE: us-central1; EKS: us-east-2; AKS: eastus.
LIST_PRICES: dict[tuple[str, str], float] = {
    # GKE (Compute Engine machine types; A3 prices include the 8 attached H100 GPUs)
    ("GKE", "a3-highgpu-8g"): 88.49,
    ("GKE", "e2-standard-4"): 0.134,  # the system pool every provisioned cluster gets
    # EKS (EC2 instance types)
    ("EKS", "p5en.48xlarge"): 84.80,
    ("EKS", "p5.48xlarge"): 55.04,
    ("EKS", "m6i.xlarge"): 0.192,  # the system node group every provisioned cluster gets
    # AKS (Azure VM sizes, Linux pay-as-you-go)
    ("AKS", "Standard_ND96isr_H100_v5"): 98.32,
    ("AKS", "Standard_NC24ads_A100_v4"): 3.673,
    ("AKS", "Standard_NV36ads_A10_v5"): 3.20,
    ("AKS", "Standard_D4s_v5"): 0.192,  # the system pool every provisioned cluster gets
}
# Entries above not confirmed against the provider's price list when recorded: shown as
# estimates. (p5en.48xlarge was extrapolated from p5 rates, not read from a price list.)
UNCONFIRMED: frozenset[tuple[str, str]] = frozenset(
    {
        ("GKE", "a3-highgpu-8g"),
        ("EKS", "p5en.48xlarge"),
        ("EKS", "p5.48xlarge"),
        ("AKS", "Standard_ND96isr_H100_v5"),
        ("AKS", "Standard_NC24ads_A100_v4"),
        ("AKS", "Standard_NV36ads_A10_v5"),
    }
)
# The control plane fee per cluster-hour (standard tier / standard support; AKS clusters are
# created in the Free tier, which has none).
CONTROL_PLANE: dict[str, float] = {"GKE": 0.10, "EKS": 0.10, "AKS": 0.0}
# The small system pool provisioning creates beside the declared pools: (name, machine type,
# initial nodes), as the GKE and EKS adapters create it (a unit test holds them together).
SYSTEM_POOLS: dict[str, tuple[str, str, int]] = {
    "GKE": ("system", "e2-standard-4", 1),
    "EKS": ("system", "m6i.xlarge", 1),
    "AKS": ("system", "Standard_D4s_v5", 1),
}


@dataclass(frozen=True, slots=True)
class PricedPool:
    """One pool to create: ``nodes`` machines of ``machine`` at ``hourly`` each (None: no price
    known), and where that price came from."""

    name: str
    machine: str
    nodes: int
    hourly: float | None
    source: PriceSource = PriceSource.UNKNOWN

    @property
    def label(self) -> str:
        """Where the price came from, as ``plan`` shows it."""
        return price_label(self.source)

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
        """Machine types with no price: not set on the class, not in the table."""
        return tuple(dict.fromkeys(p.machine for p in self.pools if p.hourly is None))

    @property
    def sources(self) -> tuple[PriceSource, ...]:
        """Where the priced pools' prices came from (each once, in pool order)."""
        return tuple(dict.fromkeys(p.source for p in self.pools if p.hourly is not None))


def price_label(source: PriceSource) -> str:
    if source is PriceSource.LIST:
        return f"list price, {PRICES_RECORDED}"
    if source is PriceSource.ESTIMATE:
        return f"estimate, {PRICES_RECORDED}"
    return str(source)


def hourly_price(
    provider: str, machine: str, class_price: float | None = None
) -> tuple[float | None, PriceSource]:
    """A node's price per hour and where it came from: the class's own price first, then the
    table (confirmed or estimated), else unknown."""
    if class_price is not None:
        return class_price, PriceSource.CLASS
    listed = LIST_PRICES.get((provider, machine))
    if listed is None:
        return None, PriceSource.UNKNOWN
    unconfirmed = (provider, machine) in UNCONFIRMED
    return listed, PriceSource.ESTIMATE if unconfirmed else PriceSource.LIST


def estimate(
    provider: str,
    pools: Sequence[tuple[str, str, int]],
    class_prices: Mapping[str, float] | None = None,
) -> Estimate:
    """The hourly estimate for ``(pool name, machine type, node count)`` pools of one cluster
    of ``provider`` ("GKE", "EKS" or "AKS"), its system pool and control plane fee included.
    ``class_prices``: pool name -> the price its class sets, which wins over the table."""
    system = SYSTEM_POOLS.get(provider)
    every = [system, *pools] if system is not None else list(pools)
    own = class_prices or {}
    priced = []
    for index, (name, machine, nodes) in enumerate(every):
        # The system pool has no class: it is always priced from the table.
        is_system = system is not None and index == 0
        price, source = hourly_price(provider, machine, None if is_system else own.get(name))
        priced.append(PricedPool(name, machine, nodes, price, source))
    return Estimate(provider, tuple(priced), CONTROL_PLANE.get(provider, 0.0))

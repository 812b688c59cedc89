"""``modelfleet plan`` on InferenceClusters: for each GKE, EKS or AKS cluster in the manifests, the
pools provisioning would create (from the same pure plan the cluster workflow carries out), with
machine types, node counts and autoscaling bounds, and an hourly cost estimate: each pool at its
class's own ``provisioning.hourlyPrice`` when set, else at the dated price table of
:mod:`modelfleet.scheduling.pricing` (labelled list price or estimate), else unknown and left out
of the total. Offline: nothing is asked of a cloud.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.markup import escape

from modelfleet.api.classes import InferenceClass
from modelfleet.api.clusters import ClusterSource, InferenceCluster
from modelfleet.api.meta import Resource
from modelfleet.cli.output import console, print_table
from modelfleet.cluster.plan import plan_pools
from modelfleet.contracts.cloud_payloads import PoolPlan
from modelfleet.scheduling.pricing import (
    PRICES_RECORDED,
    SYSTEM_POOLS,
    Estimate,
    PricedPool,
    PriceSource,
    estimate,
)

REGION_OF_PRICES = {"GKE": "us-central1", "EKS": "us-east-2", "AKS": "eastus"}


@dataclass(frozen=True)
class ClusterPlan:
    cluster: InferenceCluster
    pools: list[PoolPlan]
    problems: list[str]
    initial: Estimate  # at the node counts provisioning starts with
    largest: Estimate  # every autoscaled pool at its maximum

    @property
    def provider(self) -> str:
        return self.cluster.spec.cluster.source.value

    @property
    def where(self) -> str:
        access = self.cluster.spec.cluster
        if access.gke is not None:
            return f"project {access.gke.project}, region {access.gke.region}"
        if access.eks is not None:
            return f"region {access.eks.region}"
        if access.aks is not None:
            return f"location {access.aks.location}"
        return ""


def _machine(plan: PoolPlan) -> str:
    return plan.machine_type or plan.instance_type or plan.vm_size or ""


def plan_clusters(resources: Sequence[Resource]) -> list[ClusterPlan]:
    """A plan per GKE, EKS or AKS cluster in ``resources`` (Existing clusters create nothing)."""
    classes = {r.name: r for r in resources if isinstance(r, InferenceClass)}
    out = []
    for cluster in (r for r in resources if isinstance(r, InferenceCluster)):
        if cluster.spec.cluster.source is ClusterSource.EXISTING:
            continue
        pools, problems = plan_pools(cluster, classes)
        provider = cluster.spec.cluster.source.value
        prices = _class_prices(pools, classes)
        initial = estimate(provider, [(p.name, _machine(p), p.node_count) for p in pools], prices)
        largest = estimate(
            provider,
            [(p.name, _machine(p), max(p.max_node_count or 0, p.node_count)) for p in pools],
            prices,
        )
        out.append(ClusterPlan(cluster, pools, problems, initial, largest))
    return out


def _class_prices(
    pools: Sequence[PoolPlan], classes: dict[str, InferenceClass]
) -> dict[str, float]:
    """Pool name -> the hourly price its class sets (pools whose class sets none are absent)."""
    out = {}
    for pool in pools:
        klass = classes.get(pool.class_name)
        prov = klass.spec.provisioning if klass is not None else None
        if prov is not None and prov.hourly_price is not None:
            out[pool.name] = prov.hourly_price
    return out


def _accelerator(plan: PoolPlan) -> str:
    if plan.accelerator_type:
        return f" + {plan.accelerator_count} {plan.accelerator_type}"
    return " + EFA" if plan.efa else ""


def _bounds(plan: PoolPlan) -> str:
    if plan.max_node_count is None:
        return "-"
    return f"{plan.min_node_count if plan.min_node_count is not None else 0}-{plan.max_node_count}"


def _declared(plan: ClusterPlan) -> list[PricedPool]:
    """The priced declared pools (the estimate lists the system pool first)."""
    return list(plan.initial.pools[len(plan.initial.pools) - len(plan.pools) :])


def _money(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if value < 1 else f"{value:,.2f}"


def print_cluster_plan(plan: ClusterPlan) -> None:
    name, provider = plan.cluster.name, plan.provider
    console.print(f"[bold]cluster {name}: {provider} ({plan.where}) would be created[/]")
    if plan.problems:
        for problem in plan.problems:
            console.print(f"  [yellow]cannot plan[/] {escape(problem)}", soft_wrap=True)
        console.print(
            "  (the cluster would wait in Provisioning, WaitingForClasses, until that is fixed)"
        )
    rows = []
    if provider in SYSTEM_POOLS:
        system = plan.initial.pools[0]
        rows.append(
            [
                system.name,
                "(system)",
                system.machine,
                str(system.nodes),
                "1-2",
                _money(system.hourly),
                _money(system.total),
                system.label,
            ]
        )
    for pool, cost in zip(plan.pools, _declared(plan), strict=True):
        rows.append(
            [
                pool.name,
                pool.class_name,
                _machine(pool) + _accelerator(pool),
                str(pool.node_count),
                _bounds(pool),
                _money(cost.hourly),
                _money(cost.total),
                cost.label,
            ]
        )
    print_table(
        ["POOL", "CLASS", "MACHINE", "NODES", "AUTOSCALING", "$/NODE-H", "$/H", "PRICE"], rows
    )
    region = REGION_OF_PRICES.get(provider, "")
    console.print(
        f"  control plane ${plan.initial.control_plane:.2f}/h; estimated "
        f"[bold]${plan.initial.known:,.2f}/hour[/] as created"
        + (
            f", up to ${plan.largest.known:,.2f}/hour with every pool at its maximum size"
            if plan.largest.known > plan.initial.known
            else ""
        )
    )
    sources = plan.initial.sources
    if PriceSource.CLASS in sources:
        console.print(
            "  (class: the InferenceClass's provisioning.hourlyPrice, as your account pays it)",
            soft_wrap=True,
        )
    if PriceSource.LIST in sources or PriceSource.ESTIMATE in sources:
        console.print(
            f"  (list price / estimate: on-demand in {region} as recorded on {PRICES_RECORDED}, "
            "an estimate where not confirmed against the provider's price list; no disks, "
            "network, discounts or reservations; set provisioning.hourlyPrice on a class to "
            "price it yourself)",
            soft_wrap=True,
        )
    if plan.initial.unpriced:
        console.print(
            f"  [yellow]price unknown for {', '.join(plan.initial.unpriced)}[/]: not in the "
            "estimate (set provisioning.hourlyPrice on its class)",
            soft_wrap=True,
        )
    console.print()


def cluster_plan_document(plan: ClusterPlan) -> dict[str, Any]:
    """The stable ``-o json|yaml`` shape of one cluster's plan."""
    return {
        "name": plan.cluster.name,
        "source": plan.provider,
        "pools": [
            {
                "name": p.name,
                "className": p.class_name,
                "machineType": _machine(p),
                "nodes": p.node_count,
                "minNodes": p.min_node_count,
                "maxNodes": p.max_node_count,
                "hourlyPerNode": cost.hourly,
                "priceSource": cost.source.value,
            }
            for p, cost in zip(plan.pools, _declared(plan), strict=True)
        ],
        "problems": list(plan.problems),
        "hourlyCost": round(plan.initial.known, 2),
        "hourlyCostAtMax": round(plan.largest.known, 2),
        "unpriced": list(plan.initial.unpriced),
        "pricesRecorded": PRICES_RECORDED,
    }

"""The second front door: on an install with a management cluster (``MODELFLEET_MANAGEMENT_
KUBECONFIG`` set, the kubeconfig the controller watches), ``modelfleet apply`` writes the
resources there (server-side apply, field manager ``modelfleet-cli``) and the controller hands
them to the workflows, so the CLI and a GitOps tool never fight over the same workflow.
``delete`` and ``scale`` refuse in one line (the object on the management cluster would bring
a deleted or rescaled resource back). ``get`` and ``describe`` read the workflows, which hold
what the controller handed them: both front doors show one truth.
"""

from __future__ import annotations

import os
from pathlib import Path

from modelfleet.api.meta import Resource
from modelfleet.cli.errors import CliError
from modelfleet.cli.output import console
from modelfleet.cli.targets import resource_name

ENV_MANAGEMENT = "MODELFLEET_MANAGEMENT_KUBECONFIG"
FIELD_MANAGER = "modelfleet-cli"


def management_kubeconfig() -> Path | None:
    """The management cluster's kubeconfig when this install has one."""
    value = os.environ.get(ENV_MANAGEMENT, "").strip()
    return Path(value) if value else None


def refuse_when_managed(verb: str) -> None:
    """``delete``/``scale`` on a managed install: one line saying what to do instead."""
    path = management_kubeconfig()
    if path is not None:
        raise CliError(
            f"this install is driven from its management cluster ({ENV_MANAGEMENT}={path}): "
            f"{verb} the object there (kubectl --kubeconfig {path} {verb} ...), or unset "
            f"{ENV_MANAGEMENT}"
        )


def apply_to_management(path: Path, resources: list[Resource]) -> int:
    """Write each resource to the management cluster; returns how many were refused."""
    from modelfleet.adapters.management import KubeError, ManagementCluster

    try:
        cluster = ManagementCluster(path)
    except KubeError as exc:
        raise CliError(f"management cluster: {exc}") from None
    failures = 0
    with cluster:
        for resource in resources:
            ref = resource_name(resource.KIND, resource.name)
            try:
                outcome = cluster.apply_as(resource.to_wire(), FIELD_MANAGER)
            except KubeError as exc:
                failures += 1
                console.print(f"[red]error[/]: {ref}: {exc}", soft_wrap=True, markup=True)
                continue
            console.print(f"{ref} {outcome} [dim](management cluster {cluster.server})[/]")
    return failures

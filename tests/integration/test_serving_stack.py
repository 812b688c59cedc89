"""The serving stack: a cluster missing a CRD our manifests need (LeaderWorkerSet) stays out of
placement with a reason naming it; once its pinned manifest is served by a local HTTP server,
the worker installs it (httpx + server-side apply), and the cluster becomes Ready."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml
from aiohttp import web
from cloud_support import CloudStack, cloud_environment, renamed
from integration_support import QUICKSTART, wait_for

from modelfleet.api.loading import load_paths
from modelfleet.cli.apply import apply_resource
from modelfleet.contracts.ids import FLEET_ID
from modelfleet.contracts.stack_payloads import DEFAULT_STACK
from modelfleet.contracts.status import ClusterStatus
from modelfleet.fleet.workflow import FleetWorkflow

LWS = next(c for c in DEFAULT_STACK if c.kind == "LeaderWorkerSet")
LWS_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "leaderworkersets.leaderworkerset.x-k8s.io"},
    "spec": {
        "group": "leaderworkerset.x-k8s.io",
        "scope": "Namespaced",
        "names": {
            "plural": "leaderworkersets",
            "singular": "leaderworkerset",
            "kind": "LeaderWorkerSet",
            "listKind": "LeaderWorkerSetList",
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
                "subresources": {"status": {}},
            }
        ],
    },
}


@pytest_asyncio.fixture(scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Path, str]]:
    """A local HTTP server over an (initially empty) release directory."""
    root = tmp_path_factory.mktemp("releases")
    app = web.Application()
    app.router.add_static("/", root)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield root, f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@pytest_asyncio.fixture(scope="module")
async def env(
    served: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[CloudStack]:
    async with cloud_environment(tmp_path_factory.mktemp("stack"), stack_source=served[1]) as s:
        yield s


async def test_missing_crd_keeps_the_cluster_out_until_installed_from_pinned_manifests(
    env: CloudStack, served: tuple[Path, str]
) -> None:
    loaded = load_paths([str(QUICKSTART / "classes.yaml"), str(QUICKSTART / "clusters.yaml")])
    classes = {r.name: r for r in loaded.resources if r.KIND == "InferenceClass"}
    cluster = renamed(next(r for r in loaded.resources if r.name == "l4-dev"), "no-lws")
    await env.fleet.add_cluster(cluster, classes)  # type: ignore[arg-type]
    env.fleet.store("no-lws").registry.remove("leaderworkerset.x-k8s.io", "v1", "leaderworkersets")
    # The worker reads Existing clusters' kubeconfigs from its credentials directory.
    (env.credentials / "no-lws.yaml").write_bytes(env.fleet.kubeconfig("no-lws").read_bytes())
    for klass in classes.values():
        await apply_resource(env.client, klass)  # type: ignore[arg-type]
    await apply_resource(env.client, cluster)

    async def named_missing() -> ClusterStatus | None:
        status = await env.cluster("no-lws")
        return status if "ServingStackMissing" in status.reason else None

    status = await wait_for(named_missing, 60, "the missing LeaderWorkerSet to be reported")
    assert not status.ready
    assert "LeaderWorkerSet v0.7.0 (leaderworkerset.x-k8s.io/v1 LeaderWorkerSet)" in status.reason
    assert "HTTP 404" in status.reason
    # The same as a typed condition, for `describe` and scripts.
    conditions = {c.type: c for c in status.conditions}
    stack = conditions["ServingStack"]
    assert (stack.status, stack.reason) == ("False", "ServingStackMissing")
    assert stack.message.startswith("LeaderWorkerSet v0.7.0 (leaderworkerset.x-k8s.io/v1")
    assert "Gateway API" not in stack.message, "only the missing piece is named"
    assert conditions["Reachable"].status == "True"
    view = await env.client.get_workflow_handle(FLEET_ID).query(FleetWorkflow.view)
    (record,) = [c for c in view.clusters if c.spec.name == "no-lws"]
    assert not record.ready, "a cluster without its stack must not take placements"

    # Publish the pinned release; the next probe installs it.
    manifest = served[0] / str(LWS.manifest)
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(yaml.safe_dump(LWS_CRD))
    ready = await env.wait_phase("no-lws", "Ready", limit=90)
    assert ready.reason == "probe ok"
    stack = next(c for c in ready.conditions if c.type == "ServingStack")
    assert (stack.status, stack.reason) == ("True", "ServingStackReady")
    crd = await env.fleet.store("no-lws").get(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "leaderworkersets.leaderworkerset.x-k8s.io",
    )
    assert crd["metadata"]["managedFields"][0]["manager"] == "modelfleet"

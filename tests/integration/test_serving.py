"""Serving traffic end to end on the dev server and the simulated quickstart fleet: replicas
publish ModelEndpoints when Ready, a ModelService routes across them through the front door on
the InferenceGateway's cluster, and the official ``openai`` client talks to the service address.
Waits are on conditions (bounded), never on time."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import math
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import openai
import pytest
import yaml
from aiohttp import web
from integration_support import QUICKSTART, Stack, delete_deployment, deployment, wait_for
from test_no_secrets import haystack

from modelfleet.api.deployments import ClusterSelector, ModelDeployment
from modelfleet.api.kinds import parse_resource
from modelfleet.api.loading import load_paths, load_text
from modelfleet.api.services import ModelService
from modelfleet.applying.serving import apply_serving, delete_serving
from modelfleet.cli import columns
from modelfleet.cli.apply import ORDER, apply_resource
from modelfleet.cli.manifests import as_document
from modelfleet.cli.resources import directory_endpoints, fetch, service_status
from modelfleet.cli.serving_inspect import describe_service
from modelfleet.contracts.ids import service_id
from modelfleet.contracts.serving_payloads import ServiceStatus
from modelfleet.sim.serving.engine import EngineProfile, EngineState
from modelfleet.sim.serving.openai_api import SERVED_BY_HEADER, handle_engine

MODEL = "qwen"  # the quickstart's --served-model-name
PROBE_SECONDS = 1.0
LABEL_DEPLOYMENT = "modelfleet.dev/deployment"


def _deployment(name: str, ns: str, region: str) -> ModelDeployment:
    md = deployment(name, ns)
    md.spec.template.spec.cluster_selector = ClusterSelector(match_labels={"region": region})
    return md


def _service(name: str, ns: str, entries: list[dict[str, Any]], **spec: Any) -> ModelService:
    doc = {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "ModelService",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"endpoints": entries, **spec},
    }
    resource = parse_resource(doc)
    assert isinstance(resource, ModelService)
    return resource


def _selects(deployment_name: str, weight: int | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"selector": {"matchLabels": {LABEL_DEPLOYMENT: deployment_name}}}
    if weight is not None:
        entry["weight"] = weight
    return entry


async def _gateway(stack: Stack) -> None:
    gateway = parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "InferenceGateway",
            "metadata": {"name": "default"},
            "spec": {"cluster": "l4-dev"},
        }
    )
    await apply_resource(stack.client, gateway)


async def _wait_service(
    stack: Stack, ns: str, name: str, check: Callable[[ServiceStatus], bool], what: str
) -> ServiceStatus:
    async def probe() -> ServiceStatus | None:
        status = await stack.service_status(ns, name)
        return status if check(status) else None

    return await wait_for(probe, 60, f"service {ns}/{name}: {what}")


def _in_rotation(*deployments: str) -> Callable[[ServiceStatus], bool]:
    def check(status: ServiceStatus) -> bool:
        live = {e.name.rsplit("-", 1)[0] for e in status.endpoints if e.weight > 0}
        return status.address is not None and live == set(deployments)

    return check


async def _served_by(address: str, n: int, headers: dict[str, str] | None = None) -> list[str]:
    """``n`` chat completions through the service; the deployment that served each."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    gate = asyncio.Semaphore(16)
    async with httpx.AsyncClient(timeout=30, headers=headers) as client:

        async def one() -> str:
            async with gate:
                response = await client.post(f"{address}/v1/chat/completions", json=body)
            assert response.status_code == 200, response.text
            # Pod names start with the replica name, which starts with the deployment name
            # (no dash in the names used here); the external server calls itself
            # "external-provider".
            return response.headers[SERVED_BY_HEADER].split("-", 1)[0]

        return list(await asyncio.gather(*(one() for _ in range(n))))


def _binomial_bounds(n: int, p: float, z: float = 3.29) -> tuple[float, float]:
    """Two-sided 99.9% normal-approximation bounds for a binomial count."""
    spread = z * math.sqrt(n * p * (1 - p))
    return n * p - spread, n * p + spread


PROVIDER_KEY = "sk-provider-4d2a9e61"


@pytest.fixture
async def local_provider() -> AsyncIterator[str]:
    """An OpenAI-compatible server outside the fleet, as an external provider would be: it
    wants its own key."""
    engine = EngineState(model=MODEL, pod="external-provider", profile=EngineProfile())

    async def handler(request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {PROVIDER_KEY}":
            return web.json_response({"error": {"message": "bad key"}}, status=401)
        return await handle_engine(request, engine)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}/"
    await runner.cleanup()


async def test_quickstart_chat_through_the_service_address_streaming_and_not(
    stack: Stack,
) -> None:
    """The quickstart as shipped: its deployment (two replicas), its ModelService and the
    InferenceGateway, applied like ``modelfleet apply -f examples/quickstart``."""
    result = load_paths([str(QUICKSTART / "qwen3-8b.yaml"), str(QUICKSTART / "gateway.yaml")])
    assert not result.errors
    for resource in sorted(result.resources, key=lambda r: ORDER[r.KIND]):
        await apply_resource(stack.client, resource)
    ns, name, md = "ml-team", "qwen", "qwen3-8b"
    await stack.wait_status(ns, md, lambda s: s.phase == "Ready" and s.ready == 2)

    def both_in_rotation(s: ServiceStatus) -> bool:
        return s.address is not None and sum(1 for e in s.endpoints if e.weight) == 2

    status = await _wait_service(stack, ns, name, both_in_rotation, "both replicas in rotation")
    assert status.address is not None
    assert status.address.endswith(f"/{ns}/{name}")
    assert status.gateway_cluster == "l4-dev"
    assert {c.type: c.status for c in status.conditions} == {
        "EndpointsResolved": "True",
        "RoutingReady": "True",
    }
    assert len(status.endpoints) == 2
    assert all(e.healthy and e.weight == 1 for e in status.endpoints)
    names = {e.name for e in status.endpoints}
    client = openai.AsyncOpenAI(base_url=f"{status.address}/v1", api_key="none", max_retries=0)
    models = await client.models.list()
    assert [m.id for m in models.data] == [MODEL]
    raw = await client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "Say hello"}], max_tokens=6
    )
    answer = raw.parse()
    assert answer.choices[0].message.content
    assert answer.usage is not None
    assert answer.usage.completion_tokens == 6
    assert raw.headers[SERVED_BY_HEADER].rsplit("-", 4)[0] in names
    stream = await client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Say hello"}],
        max_tokens=6,
        stream=True,
    )
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == answer.choices[0].message.content

    # Published endpoints carry the replica's labels, its deployment, cluster and region.
    listed = await directory_endpoints(stack.client, ns)
    assert {e.name for e in listed} == names
    regions = {"l4-dev": "us-central", "h100-east": "us-east", "h200-west": "us-west"}
    for e in listed:
        assert e.labels["model"] == md
        assert e.labels["modelfleet.dev/deployment"] == md
        assert e.labels["region"] == regions[e.labels["modelfleet.dev/cluster"]]
        assert e.url.endswith(f"/{ns}/{e.name}/v1")
        assert e.rewrite_path == f"/{ns}/{e.name}/"

    # What `get services|endpoints` and `describe service` show.
    services = await fetch(stack.client, "ModelService", ns)
    header = columns.header("ModelService", wide=False, all_namespaces=False)
    rows = [
        dict(zip(header, columns.row(i, wide=False, all_namespaces=False), strict=True))
        for i in services
    ]
    assert [(r["NAME"], r["ADDRESS"], r["IN-ROTATION"]) for r in rows] == [
        (name, status.address, "2/2")
    ]
    assert "Ready" in rows[0]["PHASE"]
    # Its manifest (spec as applied, plus status) loads back as the service that was applied.
    applied = [r.to_wire() for r in result.resources if isinstance(r, ModelService)]
    loaded = load_text(yaml.safe_dump(as_document(services, single=True)), "<get -o yaml>")
    assert not loaded.errors, loaded.errors
    assert [r.to_wire() for r in loaded.resources] == applied
    endpoints = await fetch(stack.client, "ModelEndpoint", ns)
    assert sorted(e.name for e in endpoints) == sorted(names)
    assert {e.status["source"] for e in endpoints} == {"replica"}
    described = await service_status(stack.client, ns, name)
    describe_service(stack.env.settings, described)
    assert sorted(described.backends.values()) == [1, 1]

    # Deleting the service removes its route: the address stops answering.
    await delete_serving(stack.client, "ModelService", ns, name, wait=True)
    async with httpx.AsyncClient() as http:
        gone = await http.get(f"{status.address}/v1/models")
    assert gone.status_code == 404
    routes = await stack.fleet.store("l4-dev").list(
        "gateway.networking.k8s.io/v1", "HTTPRoute", namespace=f"mf-{ns}"
    )
    assert {r["metadata"]["name"] for r in routes} <= names  # only replicas' own routes left

    # Deleting the deployment withdraws its endpoints.
    await delete_deployment(stack, ns, md)
    assert await directory_endpoints(stack.client, ns) == []


async def _leave_nothing(stack: Stack, ns: str, service: str, deployments: list[str]) -> None:
    """Best-effort clean-up after a failed test (its own failure is what the run reports)."""
    with contextlib.suppress(Exception):
        await delete_serving(stack.client, "ModelService", ns, service, wait=True)
    for name in deployments:
        with contextlib.suppress(Exception):
            await delete_deployment(stack, ns, name)


async def test_weights_split_traffic_and_shift_on_reapply(stack: Stack) -> None:
    ns = "serve-canary"
    # A failure half-way must not leave the deployments holding capacity the tests after this
    # one (same stack) need: cleaned up on the way out too, then.
    done = False
    try:
        await _gateway(stack)
        await asyncio.gather(
            stack.apply_ready(_deployment("stable", ns, "us-central")),
            stack.apply_ready(_deployment("canary", ns, "us-east")),
        )
        svc = _service("split", ns, [_selects("stable", 90), _selects("canary", 10)])
        await apply_serving(stack.client, svc, probe_interval_seconds=PROBE_SECONDS)
        status = await _wait_service(
            stack, ns, "split", _in_rotation("stable", "canary"), "both in rotation"
        )
        assert sorted(status.backends.values()) == [1, 9]
        assert status.address is not None
        served = collections.Counter(await _served_by(status.address, 1000))
        low, high = _binomial_bounds(1000, 0.9)
        assert low <= served["stable"] <= high, served
        assert served["stable"] + served["canary"] == 1000

        svc = _service("split", ns, [_selects("stable", 50), _selects("canary", 50)])
        await apply_serving(stack.client, svc, probe_interval_seconds=PROBE_SECONDS)
        await _wait_service(
            stack, ns, "split", lambda s: sorted(s.backends.values()) == [1, 1], "weights 50/50"
        )
        served = collections.Counter(await _served_by(status.address, 1000))
        low, high = _binomial_bounds(1000, 0.5)
        assert low <= served["stable"] <= high, served

        # A replica killed: its pod comes back never ready, so its endpoint leaves the route and
        # traffic keeps flowing through the other; once it recovers it returns.
        store = stack.fleet.store("h100-east")
        workload_ns = f"mf-{ns}"

        async def kill_canary_pods() -> None:
            for pod in await store.list("v1", "Pod", namespace=workload_ns):
                if pod["metadata"]["name"].startswith("canary-"):
                    await store.delete("v1", "Pod", pod["metadata"]["name"], namespace=workload_ns)

        stack.fleet.update_faults("h100-east", {"never_ready": ["canary-*"]})
        try:
            await kill_canary_pods()
            status = await _wait_service(stack, ns, "split", _in_rotation("stable"), "canary out")
            out = [e for e in status.endpoints if e.name.startswith("canary-")]
            assert all(not e.healthy for e in out)
            assert all(e.reason for e in out)
            assert status.address is not None
            assert set(await _served_by(status.address, 50)) == {"stable"}
        finally:
            stack.fleet.update_faults("h100-east", {"never_ready": []})
        await kill_canary_pods()
        await _wait_service(stack, ns, "split", _in_rotation("stable", "canary"), "canary back")
        await delete_serving(stack.client, "ModelService", ns, "split", wait=True)
        await asyncio.gather(
            delete_deployment(stack, ns, "stable"), delete_deployment(stack, ns, "canary")
        )
        done = True
    finally:
        if not done:
            await _leave_nothing(stack, ns, "split", ["stable", "canary"])


async def test_external_endpoint_gets_its_share_and_keys_are_enforced(
    stack: Stack, local_provider: str
) -> None:
    ns = "serve-mixed"
    await _gateway(stack)
    await stack.apply_ready(_deployment("inhouse", ns, "us-central"))
    external = parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "ModelEndpoint",
            "metadata": {"name": "provider", "namespace": ns, "labels": {"provider": "local"}},
            "spec": {
                "url": local_provider,
                "rewritePath": "/",
                "authSecretRef": {"name": "provider-key"},
            },
        }
    )
    secrets = stack.env.kubeconfig_dir / "secrets"
    secrets.mkdir(exist_ok=True)
    (secrets / "provider-key").write_text(f"{PROVIDER_KEY}\n")
    await apply_resource(stack.client, external)
    key = "sk-serving-7b1e2f9c"
    (secrets / "mixed-keys").write_text(f"{key}\nsk-other-key\n")
    svc = _service(
        "mixed",
        ns,
        [_selects("inhouse"), {"selector": {"matchLabels": {"provider": "local"}}}],
        auth={"apiKeysSecretRef": {"name": "mixed-keys"}},
    )
    await apply_serving(stack.client, svc, probe_interval_seconds=PROBE_SECONDS)

    def both(status: ServiceStatus) -> bool:
        return status.address is not None and len([e for e in status.endpoints if e.weight]) == 2

    status = await _wait_service(stack, ns, "mixed", both, "in-house and external in rotation")
    assert status.auth
    assert status.address is not None
    url = f"{status.address}/v1/chat/completions"
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_tokens": 1}
    async with httpx.AsyncClient() as client:
        assert (await client.post(url, json=body)).status_code == 401
        wrong = await client.post(url, json=body, headers={"Authorization": "Bearer sk-wrong"})
        assert wrong.status_code == 401
    openai_client = openai.AsyncOpenAI(base_url=f"{status.address}/v1", api_key=key, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        await openai.AsyncOpenAI(
            base_url=f"{status.address}/v1", api_key="sk-nope", max_retries=0
        ).models.list()
    assert [m.id for m in (await openai_client.models.list()).data] == [MODEL]
    served = collections.Counter(
        await _served_by(status.address, 400, headers={"Authorization": f"Bearer {key}"})
    )
    low, high = _binomial_bounds(400, 0.5)
    assert low <= served["external"] <= high, served  # "external-provider" pod name
    assert served["external"] + served["inhouse"] == 400

    # The key is nowhere in any history (payloads decoded too); its secret's name is.
    seen = b""
    async for execution in stack.client.list_workflows():
        handle = stack.client.get_workflow_handle(execution.id, run_id=execution.run_id)
        blob = haystack(json.loads((await handle.fetch_history()).to_json()))
        for secret in (key, PROVIDER_KEY):
            leaked = secret.encode() in blob  # not asserted directly: pytest prints the blob
            assert not leaked, f"a key appears in the history of {execution.id}"
        seen += blob if execution.id == service_id(ns, "mixed") else b""
    assert b"mixed-keys" in seen

    await delete_serving(stack.client, "ModelService", ns, "mixed", wait=True)
    await delete_serving(stack.client, "ModelEndpoint", ns, "provider", wait=True)
    await delete_deployment(stack, ns, "inhouse")

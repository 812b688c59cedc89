"""The global address: the pure plan (``rendering.global_address``), the Cloudflare adapter
(``adapters.global_lb``) against the simulated load balancer over real HTTP, and the stand-in's
own behaviour: health-checked origins, the edge relaying to a healthy one and failing over on a
connection that breaks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from aiohttp import web

from modelfleet.adapters.global_lb import CloudflareLoadBalancing, GlobalLBError
from modelfleet.api.kinds import parse_resource
from modelfleet.api.manifest_errors import InvalidResourceError
from modelfleet.api.rules import validate
from modelfleet.api.services import GlobalAddress, GlobalHealthCheck, InferenceGateway
from modelfleet.contracts.serving_payloads import FrontDoorHealth
from modelfleet.rendering.global_address import GlobalOrigin, global_plan, pool_name
from modelfleet.service.doors import doors_to_apply
from modelfleet.sim.serving.global_lb import GlobalLoadBalancer

ACCOUNT = "a" * 32
ZONE_ID = "b" * 32
TOKEN = "test-token"


def _settings(steering: str = "random") -> GlobalAddress:
    return GlobalAddress.model_validate(
        {
            "accountId": ACCOUNT,
            "zoneId": ZONE_ID,
            "zone": "fleet.example",
            "apiTokenSecretRef": {"name": "cf"},
            "steering": steering,
            "healthCheck": GlobalHealthCheck(interval_seconds=1, timeout_seconds=1).to_wire(),
        }
    )


def test_plan_names_one_pool_per_door_in_order() -> None:
    origins = [
        GlobalOrigin(cluster="l4-dev", host="10.0.0.1", port=8080),
        GlobalOrigin(cluster="h100-east", host="10.0.0.2", port=80, enabled=False),
    ]
    plan = global_plan("team", "chat", _settings("off"), origins, auth=False)
    assert plan.hostname == "chat.team.fleet.example"
    assert plan.monitor["path"] == "/team/chat/v1/models"
    assert plan.monitor["expected_codes"] == "200"
    assert list(plan.pools) == [
        "chat_team_fleet_example__l4-dev",
        "chat_team_fleet_example__h100-east",
    ]
    assert plan.pools["chat_team_fleet_example__h100-east"]["origins"][0]["enabled"] is False
    assert plan.load_balancer["fallback_pool"] == "chat_team_fleet_example__l4-dev"
    assert plan.load_balancer["steering_policy"] == "off"
    protected = global_plan("team", "chat", _settings(), origins, auth=True)
    assert protected.monitor["expected_codes"] == "401"


def _gateway(spec: dict[str, object]) -> InferenceGateway:
    resource = parse_resource(
        {
            "apiVersion": "modelfleet.dev/v1alpha1",
            "kind": "InferenceGateway",
            "metadata": {"name": "default"},
            "spec": spec,
        }
    )
    assert isinstance(resource, InferenceGateway)
    return resource


def test_gateway_front_doors_and_their_errors() -> None:
    single = _gateway({"cluster": "l4-dev"})
    assert single.front_door_clusters == ["l4-dev"]
    assert single.spec.global_address is None
    several = _gateway({"cluster": "l4-dev", "additionalClusters": ["h100-east", "h200-west"]})
    assert several.front_door_clusters == ["l4-dev", "h100-east", "h200-west"]
    assert validate(several) == []
    with pytest.raises(InvalidResourceError) as repeated:
        _gateway({"cluster": "l4-dev", "additionalClusters": ["l4-dev", "b", "b"]})
    assert str(repeated.value) == (
        "InferenceGateway default is invalid: spec.additionalClusters[0]: cluster 'l4-dev' is "
        "already a front door (it is spec.cluster); spec.additionalClusters[2]: cluster 'b' is "
        "already a front door"
    )
    with pytest.raises(InvalidResourceError) as bad:
        _gateway(
            {
                "cluster": "l4-dev",
                "globalAddress": {"accountId": "x", "zoneId": ZONE_ID, "zone": "fleet.example",
                                  "apiTokenSecretRef": {"name": "cf"}},
            }
        )  # fmt: skip
    assert "spec.globalAddress.accountId" in str(bad.value), str(bad.value)


async def _origin(name: str) -> tuple[web.AppRunner, int]:
    async def answer(request: web.Request) -> web.Response:
        return web.json_response({"origin": name, "host": request.host, "path": request.path})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    port = int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]
    return runner, port


@pytest.fixture
async def lb() -> AsyncIterator[GlobalLoadBalancer]:
    balancer = GlobalLoadBalancer(
        account_id=ACCOUNT, zone_id=ZONE_ID, zone_name="fleet.example", token=TOKEN, seed=1
    )
    await balancer.start()
    try:
        yield balancer
    finally:
        await balancer.stop()


async def _until(check: Callable[[], bool], limit: float = 10.0) -> None:
    deadline = time.monotonic() + limit
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_the_edge_fails_over_and_health_checks_take_a_door_out_and_back(
    lb: GlobalLoadBalancer,
) -> None:
    east_runner, east_port = await _origin("east")
    west_runner, west_port = await _origin("west")
    origins = [
        GlobalOrigin(cluster="east", host="127.0.0.1", port=east_port),
        GlobalOrigin(cluster="west", host="127.0.0.1", port=west_port),
    ]
    plan = global_plan("team", "chat", _settings(), origins, auth=False)
    api = CloudflareLoadBalancing(TOKEN, ACCOUNT, ZONE_ID, endpoint=lb.api_url)
    try:
        ids = await asyncio.to_thread(api.ensure, plan)
        # Idempotent: a second sync changes nothing and finds the same pools.
        assert await asyncio.to_thread(api.ensure, plan) == ids
        east_pool = ids[pool_name(plan.hostname, "east")]

        async def health() -> bool:
            [seen] = await asyncio.to_thread(api.health, east_pool)
            return seen.healthy

        async with httpx.AsyncClient(proxy=lb.edge_url, timeout=5) as client:
            url = f"http://{plan.hostname}/team/chat/v1/models"
            served = [(await client.get(url)).json()["origin"] for _ in range(40)]
            assert set(served) == {"east", "west"}
            # The origin sees the caller's host and path.
            answer = (await client.get(url)).json()
            assert answer["host"] == plan.hostname
            assert answer["path"] == "/team/chat/v1/models"

            # East goes away: not one request fails (the edge sends a refused connection on to
            # west), and the monitor takes east out within a check or two.
            await east_runner.cleanup()
            down_at = time.monotonic()
            served = [(await client.get(url)).json()["origin"] for _ in range(40)]
            assert served == ["west"] * 40
            while await health():
                assert time.monotonic() - down_at < 5, "east never marked unhealthy"
                await asyncio.sleep(0.1)
            assert lb.failovers > 0

            # An unknown host is Cloudflare's 530/1016.
            missing = await client.get("http://nope.fleet.example/")
            assert missing.status_code == 530
    finally:
        await west_runner.cleanup()
        api.close()


async def test_api_errors_are_cloudflare_shaped_and_removal_is_complete(
    lb: GlobalLoadBalancer,
) -> None:
    runner, port = await _origin("only")
    plan = global_plan(
        "team", "chat", _settings(), [GlobalOrigin(cluster="c", host="127.0.0.1", port=port)],
        auth=False,
    )  # fmt: skip
    try:
        # The adapter is synchronous (activities run it in a thread): so here too, off the
        # loop the simulated balancer serves on.
        with CloudflareLoadBalancing("wrong", ACCOUNT, ZONE_ID, endpoint=lb.api_url) as bad:
            with pytest.raises(GlobalLBError) as denied:
                await asyncio.to_thread(bad.ensure, plan)
            assert "10000: Authentication error" in denied.value.message
            assert "wrong" not in denied.value.message
            assert not denied.value.retryable
        other_zone = plan.model_copy(
            update={"load_balancer": {**plan.load_balancer, "name": "chat.elsewhere.test"}}
        )
        with CloudflareLoadBalancing(TOKEN, ACCOUNT, ZONE_ID, endpoint=lb.api_url) as api:
            with pytest.raises(GlobalLBError) as outside:
                await asyncio.to_thread(api.ensure, other_zone)
            assert "not in zone fleet.example" in outside.value.message
            await asyncio.to_thread(api.ensure, plan)
            assert await asyncio.to_thread(api.remove, plan.hostname) == 3  # lb, pool, monitor
            assert await asyncio.to_thread(api.remove, plan.hostname) == 0
        await _until(lambda: not lb.health)
    finally:
        await runner.cleanup()


def test_doors_known_unreachable_are_skipped_but_misrouted_ones_are_written() -> None:
    health = {
        "dark": FrontDoorHealth(cluster="dark", healthy=False, reason="TCP connection failed"),
        "stale": FrontDoorHealth(
            cluster="stale", healthy=False, reason="HTTP response code is not expected"
        ),
        "notready": FrontDoorHealth(cluster="notready", enabled=False, reason="cluster not Ready"),
        "fine": FrontDoorHealth(cluster="fine", healthy=True),
    }
    clusters = ["dark", "stale", "notready", "fine", "new"]
    assert doors_to_apply(clusters, clusters, health) == ["stale", "fine", "new"]
    # A door that never got the route gets it, down or not.
    assert doors_to_apply(clusters, ["fine"], health) == clusters

"""How the CLI reads the Fleet: the class catalog once per command, replicas in bounded pages,
and a cluster's replicas through the Fleet's own filter rather than every page of the fleet."""

from __future__ import annotations

from typing import Any

import pytest

from modelfleet.cli import clusters, resources
from modelfleet.contracts.fleet_payloads import ReplicaPage, ReplicaPageRequest
from modelfleet.fleet.workflow import FleetWorkflow


class FakeClient:
    def get_workflow_handle(self, workflow_id: str) -> str:
        return workflow_id


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Every query the CLI sends, by name and argument; the Fleet answers with two pages."""
    log: list[tuple[str, Any]] = []
    pages = {"": ReplicaPage(replicas=[], next_after="ml/m-1"), "ml/m-1": ReplicaPage()}

    async def query(handle: Any, name: Any, *args: Any, what: str, **_: Any) -> Any:
        log.append((name.__name__, args[0] if args else None))
        if name is FleetWorkflow.replica_page:
            request: ReplicaPageRequest = args[0]
            return pages[request.after]
        return []

    monkeypatch.setattr(resources, "query", query)
    return log


async def test_the_view_and_the_catalog_come_from_one_read_of_each(
    asked: list[tuple[str, Any]],
) -> None:
    view, classes = await resources.fleet_state(FakeClient())  # type: ignore[arg-type]
    assert (view.classes, classes) == ([], {})
    names = [n for n, _ in asked]
    assert names.count("classes") == 1
    assert names.count("clusters") == 1
    # Paged until the Fleet says there is no more.
    assert [a.after for n, a in asked if n == "replica_page"] == ["", "ml/m-1"]


async def test_without_replicas_no_page_is_asked(asked: list[tuple[str, Any]]) -> None:
    await resources.fleet_state(FakeClient(), replicas=False)  # type: ignore[arg-type]
    assert "replica_page" not in [n for n, _ in asked]


async def test_a_clusters_replicas_are_asked_by_cluster(asked: list[tuple[str, Any]]) -> None:
    await clusters.replicas_on(FakeClient(), "east")  # type: ignore[arg-type]
    requests = [a for n, a in asked if n == "replica_page"]
    assert [r.cluster for r in requests] == ["east", "east"]
    # Only the pages: no catalog, no cluster list.
    assert [n for n, _ in asked] == ["replica_page", "replica_page"]

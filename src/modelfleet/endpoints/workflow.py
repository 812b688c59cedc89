"""The endpoint directory (ID ``endpoints``): every ModelEndpoint of the fleet — published by
Ready replicas, authored by users for external providers — the fleet's InferenceGateway, and
which ModelService watches which endpoints. A change is pushed to exactly the services whose
selectors it concerns (signal ``endpoints_changed`` with their full, bounded set), so services
react to deployments instead of polling.

Deterministic orchestration only: no I/O. Its state (``endpoints.state``) is carried whole
across continue-as-new, in compact form on the wire.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from modelfleet.api.services import InferenceGateway
    from modelfleet.contracts.serving_payloads import (
        ENDPOINT_DIRECTORY_WORKFLOW,
        EndpointKey,
        EndpointsChanged,
        WatchMatch,
        WatchRequest,
        WatchResult,
    )
    from modelfleet.contracts.versioning import declared
    from modelfleet.endpoints.state import EndpointsInput
    from modelfleet.rendering.front_door import EndpointRecord


def _selected_by(watch: WatchRequest, namespace: str, labels: dict[str, str]) -> list[int]:
    """The indices of ``watch``'s entries whose selector matches ``labels`` in ``namespace``."""
    if namespace != watch.namespace:
        return []
    return [
        i
        for i, entry in enumerate(watch.entries)
        if all(labels.get(k) == v for k, v in entry.selector.match_labels.items())
    ]


def _selects(watch: WatchRequest, endpoint: EndpointRecord) -> bool:
    return bool(_selected_by(watch, endpoint.namespace, endpoint.labels))


@workflow.defn(
    name=ENDPOINT_DIRECTORY_WORKFLOW, versioning_behavior=declared(VersioningBehavior.AUTO_UPGRADE)
)
class EndpointDirectoryWorkflow:
    @workflow.init
    def __init__(self, arg: EndpointsInput) -> None:
        self._state = arg.state
        # Watchers to signal: drained before every continue-as-new, so never carried.
        self._pending: set[str] = set()

    # --- updates ---------------------------------------------------------------------------

    @workflow.update
    def put(self, record: EndpointRecord) -> None:
        old = self._state.endpoints.get(record.key)
        # The directory keeps when it first saw the key (AGE); a re-put changes nothing else.
        born = old.created if old is not None and old.created is not None else workflow.now()
        record = record.model_copy(update={"created": born})
        if old == record:
            return
        self._state.endpoints[record.key] = record
        self._touch(record, old)

    @workflow.update
    def withdraw(self, key: EndpointKey) -> bool:
        old = self._state.endpoints.pop(f"{key.namespace}/{key.name}", None)
        if old is None:
            return False
        self._touch(old)
        return True

    @workflow.update
    def put_gateway(self, gateway: InferenceGateway) -> None:
        if self._state.gateway is None or self._state.gateway.name != gateway.name:
            self._state.gateway_created = workflow.now()
        if gateway != self._state.gateway:
            self._state.gateway = gateway
            self._state.revision += 1
            self._pending.update(self._state.watches)

    @workflow.update
    def watch(self, request: WatchRequest) -> WatchResult:
        self._state.watches[request.watcher] = request
        return WatchResult(
            endpoints=self._matching(request),
            gateway=self._state.gateway,
            revision=self._state.revision,
        )

    @workflow.update
    def unwatch(self, watcher: str) -> None:
        self._state.watches.pop(watcher, None)
        self._pending.discard(watcher)

    # --- queries ---------------------------------------------------------------------------

    @workflow.query
    def list_endpoints(self, namespace: str) -> list[EndpointRecord]:
        """Every endpoint of ``namespace`` ("" for all), by key."""
        return [
            self._state.endpoints[k]
            for k in sorted(self._state.endpoints)
            if not namespace or self._state.endpoints[k].namespace == namespace
        ]

    @workflow.query
    def selecting(self, endpoint: EndpointRecord) -> list[WatchMatch]:
        """The services whose entries would select ``endpoint`` (by its namespace and labels),
        whether or not it is published: what a replica about to join is checked against."""
        matches = []
        for watcher in sorted(self._state.watches):
            entries = _selected_by(
                self._state.watches[watcher], endpoint.namespace, endpoint.labels
            )
            if entries:
                matches.append(WatchMatch(watcher=watcher, entries=entries))
        return matches

    @workflow.query
    def gateway(self) -> InferenceGateway | None:
        return self._state.gateway

    @workflow.query
    def gateway_created(self) -> datetime | None:
        """When the fleet's gateway was first applied (``get gateways``' AGE). A query only."""
        return self._state.gateway_created

    # --- run -------------------------------------------------------------------------------

    @workflow.run
    async def run(self, arg: EndpointsInput) -> None:
        while True:
            await workflow.wait_condition(
                lambda: bool(self._pending) or workflow.info().is_continue_as_new_suggested()
            )
            while self._pending:
                watcher = min(self._pending)
                self._pending.discard(watcher)
                await self._notify(watcher)
            if workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                if not self._pending:
                    workflow.continue_as_new(EndpointsInput(state=self._state))

    def _matching(self, watch: WatchRequest) -> list[EndpointRecord]:
        return [
            self._state.endpoints[k]
            for k in sorted(self._state.endpoints)
            if _selects(watch, self._state.endpoints[k])
        ]

    def _touch(self, *records: EndpointRecord | None) -> None:
        self._state.revision += 1
        present: Iterable[EndpointRecord] = [r for r in records if r is not None]
        for watcher, watch in self._state.watches.items():
            if any(_selects(watch, r) for r in present):
                self._pending.add(watcher)

    async def _notify(self, watcher: str) -> None:
        watch = self._state.watches.get(watcher)
        if watch is None:
            return
        handle = workflow.get_external_workflow_handle(watcher)
        change = EndpointsChanged(
            endpoints=self._matching(watch),
            gateway=self._state.gateway,
            revision=self._state.revision,
        )
        try:
            await handle.signal("endpoints_changed", change)
        except ApplicationError:
            # The service is gone (deleted while we held its watch): forget it.
            self._state.watches.pop(watcher, None)

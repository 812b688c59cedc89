"""The AcceptedResource workflow (ID ``accepted/<kind>/<ns>/<name>``): holds one document that
modelfleet accepts for Modelplane parity but does not act upon, so that it is applied, listed by
``get`` and deleted like any other resource, and its reason is shown, never silently dropped.

It acts on nothing: it re-validates what it is given, keeps it, answers ``status`` and waits for
``delete``. Deterministic orchestration only; validation is the pure ``api`` layer.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import VersioningBehavior

with workflow.unsafe.imports_passed_through():
    from modelfleet.accepted.state import AcceptedDocument, AcceptedInput
    from modelfleet.api.kinds import parse_resource
    from modelfleet.api.meta import Resource
    from modelfleet.api.support import not_acted_upon
    from modelfleet.contracts import search
    from modelfleet.contracts.accepted import AcceptedStatus
    from modelfleet.contracts.versioning import declared

NOT_ACTED_UPON_PHASE = "NotActedUpon"


@workflow.defn(
    name="AcceptedResource", versioning_behavior=declared(VersioningBehavior.AUTO_UPGRADE)
)
class AcceptedResourceWorkflow:
    @workflow.init
    def __init__(self, arg: AcceptedInput) -> None:
        self._state = arg.state
        if self._state.created is None:
            self._state.created = workflow.info().start_time
        # The parsed form of ``state.document``, which is what is carried.
        self._resource: Resource = parse_resource(self._state.document)
        self._state.document = self._resource.to_wire()

    @workflow.update
    def apply(self, arg: AcceptedDocument) -> AcceptedStatus:
        self._resource = parse_resource(arg.document)
        self._state.document = self._resource.to_wire()
        workflow.set_current_details(f"**{NOT_ACTED_UPON_PHASE}** · {self._reason()}")
        return self._status()

    @apply.validator
    def _check_apply(self, arg: AcceptedDocument) -> None:
        # Raises InvalidResourceError (every broken rule) for an invalid document.
        resource = parse_resource(arg.document)
        if resource.ref != self._resource.ref:
            raise ValueError(f"this workflow holds {self._resource.ref}, not {resource.ref}")

    @workflow.update
    def delete(self) -> AcceptedStatus:
        self._state.deleting = True
        return self._status()

    @workflow.query
    def status(self) -> AcceptedStatus:
        return self._status()

    @workflow.run
    async def run(self, arg: AcceptedInput) -> AcceptedStatus:
        workflow.upsert_search_attributes(
            [
                search.KIND.value_set(self._resource.KIND),
                search.NAMESPACE.value_set(self._resource.namespace),
                search.NAME.value_set(self._resource.name),
                search.PHASE.value_set(NOT_ACTED_UPON_PHASE),
            ]
        )
        workflow.set_current_details(f"**{NOT_ACTED_UPON_PHASE}** · {self._reason()}")
        # Only applies add history; a long-lived document re-applied often continues as new.
        await workflow.wait_condition(
            lambda: self._state.deleting or workflow.info().is_continue_as_new_suggested()
        )
        await workflow.wait_condition(workflow.all_handlers_finished)
        if not self._state.deleting:
            workflow.continue_as_new(AcceptedInput(state=self._state))
        workflow.upsert_search_attributes([search.PHASE.value_set("Deleted")])
        return self._status()

    def _reason(self) -> str:
        return not_acted_upon(self._resource) or "NotActedUpon: accepted and kept"

    def _status(self) -> AcceptedStatus:
        return AcceptedStatus(
            kind=self._resource.KIND,
            namespace=self._resource.namespace,
            name=self._resource.name,
            reason=self._reason(),
            deleting=self._state.deleting,
            document=self._state.document,
            created=self._state.created,
        )

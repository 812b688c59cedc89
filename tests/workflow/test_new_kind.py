"""A new kind in three files, as cli/kinds.py promises: an API model module, an entity package
with its workflow, and a spec built with ``entity_kind``. The test writes the first two into a
temporary directory on ``modelfleet``'s and ``modelfleet.api``'s package paths (nothing lists
them), declares the third, and then drives the kind the way the CLI does against the real dev
server: parsed, registered on a worker found by discovery, applied, read back by ``get``,
changed, and deleted."""

from __future__ import annotations

import asyncio
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

import modelfleet
import modelfleet.api
from modelfleet.api import kinds as api_kinds
from modelfleet.cli import kinds
from modelfleet.worker.entities import entity_workflows

MODEL = '''
    """A throwaway kind: its model is all api/ needs."""
    from typing import ClassVar, Literal

    from modelfleet.api.meta import Model, Resource


    class WidgetSpec(Model):
        size: int = 1


    class ModelWidget(Resource):
        KIND: ClassVar[str] = "ModelWidget"
        NAMESPACED: ClassVar[bool] = True
        SHORT_NAMES: ClassVar[tuple[str, ...]] = ("mw",)
        kind: Literal["ModelWidget"] = "ModelWidget"
        spec: WidgetSpec = WidgetSpec()
'''

WORKFLOW = '''
    """The throwaway kind's entity workflow, following the entity convention."""
    from pydantic import BaseModel
    from temporalio import workflow

    from modelfleet.api.{module} import ModelWidget
    from modelfleet.contracts import search


    class WidgetStatus(BaseModel):
        phase: str
        applied: int


    @workflow.defn(name="ModelWidget")
    class WidgetWorkflow:
        def __init__(self) -> None:
            self._spec: ModelWidget | None = None
            self._applied = 0
            self._deleted = False

        @workflow.run
        async def run(self, spec: ModelWidget) -> None:
            self._spec = self._spec or spec
            workflow.upsert_search_attributes(
                [
                    search.KIND.value_set("ModelWidget"),
                    search.NAMESPACE.value_set(spec.namespace),
                    search.NAME.value_set(spec.name),
                ]
            )
            await workflow.wait_condition(lambda: self._deleted)

        @workflow.update
        async def apply(self, spec: ModelWidget) -> None:
            self._spec = spec
            self._applied += 1

        @workflow.update
        async def delete(self) -> None:
            self._deleted = True

        @workflow.query
        def spec(self) -> ModelWidget | None:
            return self._spec

        @workflow.query
        def status(self) -> WidgetStatus:
            return WidgetStatus(phase="Ready", applied=self._applied)
'''


@pytest.fixture
def three_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[type]:
    """The model and the entity package written where discovery looks; the kind's model."""
    api_dir, package_dir = tmp_path / "api", tmp_path / "modelfleet" / "widget"
    api_dir.mkdir()
    package_dir.mkdir(parents=True)
    module = f"widgets_{uuid.uuid4().hex[:8]}"
    module_path = f"modelfleet.api.{module}"
    (api_dir / f"{module}.py").write_text(textwrap.dedent(MODEL))
    (package_dir / "__init__.py").write_text('"""The throwaway entity."""\n')
    (package_dir / "workflow.py").write_text(textwrap.dedent(WORKFLOW).replace("{module}", module))
    monkeypatch.setattr(modelfleet.api, "__path__", [*modelfleet.api.__path__, str(api_dir)])
    monkeypatch.setattr(
        modelfleet, "__path__", [*modelfleet.__path__, str(tmp_path / "modelfleet")]
    )
    discovered = api_kinds._discovered_kinds()
    monkeypatch.setattr(api_kinds, "KINDS", discovered)
    yield discovered["ModelWidget"]
    for name in [n for n in sys.modules if n.startswith(("modelfleet.widget", module_path))]:
        del sys.modules[name]


def _widget_spec(model: type, widget_workflow: Any) -> kinds.KindSpec:
    """The third file: the kind's spec, as it would sit in cli/kinds.py."""
    return kinds.entity_kind(
        model,
        widget_workflow,
        input_of=lambda r: r,
        workflow_id=lambda ns, name: f"widget/{ns}/{name}",
        aliases=("widget", "widgets"),
        apply_rank=4,
        delete_rank=1,
        columns=("NAME", "SIZE", "AGE"),
        row=lambda item, age, wide: [item.name, str(item.manifest["spec"]["size"]), age],
    )


async def _until(what: str, check: Any) -> Any:
    """Poll ``check`` until it returns something truthy; fail after a bound that only a hang
    reaches (the dev server answers these in well under a second)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = await check()
        if found:
            return found
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_kind_added_in_three_files_is_parsed_run_read_and_deleted(
    three_files: type, dev_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = three_files
    document = {
        "apiVersion": "modelfleet.dev/v1alpha1",
        "kind": "ModelWidget",
        "metadata": {"name": "w1", "namespace": "tools"},
        "spec": {"size": 3},
    }
    resource = api_kinds.parse_resource(document)
    assert type(resource) is model

    workflows = entity_workflows()
    widget_workflow = next(w for w in workflows if w.__name__ == "WidgetWorkflow")
    assert {"DeploymentWorkflow", "FleetWorkflow"} <= {w.__name__ for w in workflows}

    spec = _widget_spec(model, widget_workflow)
    monkeypatch.setitem(kinds.REGISTRY, "ModelWidget", spec)
    assert kinds.resolve("mw") == "ModelWidget"
    assert kinds.apply_order()["ModelWidget"] == 4

    task_queue = "modelfleet"  # the queue the CLI's apply starts entity workflows on
    async with Worker(
        dev_client,
        task_queue=task_queue,
        workflows=[widget_workflow],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        assert spec.apply is not None
        assert spec.fetch is not None
        assert spec.delete is not None
        workflow_id = await spec.apply(dev_client, resource, None, None)
        assert workflow_id == "widget/tools/w1"

        named = await spec.fetch(dev_client, "tools", {"w1"})
        assert [(f.name, f.namespace, f.manifest["spec"]["size"]) for f in named] == [
            ("w1", "tools", 3)
        ]
        assert named[0].status == {"phase": "Ready", "applied": 1}

        document["spec"] = {"size": 5}
        await spec.apply(dev_client, api_kinds.parse_resource(document), None, None)

        async def listed() -> list[Any]:  # visibility lags the apply
            found = await spec.fetch(dev_client, None, set())
            return [f for f in found if f.manifest["spec"]["size"] == 5]

        (item,) = await _until("the widget listed by visibility", listed)
        assert item.status == {"phase": "Ready", "applied": 2}
        assert spec.row(item, "1s", False) == ["w1", "5", "1s"]

        await spec.delete(dev_client, "tools", "w1", True, False)
        assert await spec.fetch(dev_client, "tools", {"w1"}) == []

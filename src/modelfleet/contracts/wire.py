"""The base of every workflow and activity payload: a model that ignores fields it does not know.

During a rolling upgrade old and new workers run side by side, and a payload written by one is
read by the other (an activity input, an Update, a query result, a continue-as-new input replayed
from history). So a payload model must accept

* an old-shaped payload, with a field missing: the field's default applies (every field added
  to a contract gets a default), and
* a new-shaped payload, with a field it does not know: the field is dropped.

User manifests are the opposite: :class:`modelfleet.api.meta.Model` rejects unknown fields, so a
typo in a manifest is an error naming the field. Contracts embed such resources (a
ModelDeployment in a placement request, ModelReplicas in its answer). An unknown field inside an
embedded resource is treated like one in the payload itself: ignored, at any depth. The resource
was validated strictly where it entered the system (``modelfleet apply``, the workflow's update
validator); what travels between workers is a copy that a newer worker may have extended.

How: a WireModel's own config ignores unknown fields, and a payload is validated with
``extra="ignore"`` from its top, which pydantic-core applies to every model below it, the strict
resources included. The data converter does so for every payload that holds a WireModel
(``modelfleet.worker.converter``); ``model_validate`` and ``model_validate_json`` of a WireModel
do so when called directly. So a payload validates in one pass in pydantic-core, with no Python
callback per nested model: the Fleet's carried state holds ~1,300 nested WireModels, and a
per-model callback made decoding it 2-5x slower. Constructing a WireModel by its fields
(``PlaceRequest(deployment=...)``) validates them as their types say.

Not tolerated across versions: a new value of an enum (a phase, a step) and a new required
field. Add enum values only once every worker knows them; give every new field a default.

Layer rule: pure pydantic. ``contracts`` may import ``api``, ``scheduling`` and ``rendering``
(the models it carries), never activities, adapters, workflows or an SDK.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import ConfigDict
from pydantic.config import ExtraValues

from modelfleet.api.meta import Model


class WireModel(Model):
    """Base of every payload between workflows, activities and clients: camelCase aliases and
    snake_case names both accepted, unknown fields ignored, also inside embedded resources."""

    model_config = ConfigDict(extra="ignore")

    @classmethod
    def model_validate(
        cls,
        obj: Any,
        *,
        strict: bool | None = None,
        extra: ExtraValues | None = None,
        from_attributes: bool | None = None,
        context: Any | None = None,
        by_alias: bool | None = None,
        by_name: bool | None = None,
    ) -> Self:
        """As pydantic's, with unknown fields ignored at every depth unless ``extra`` says."""
        return super().model_validate(
            obj,
            strict=strict,
            extra=extra or "ignore",
            from_attributes=from_attributes,
            context=context,
            by_alias=by_alias,
            by_name=by_name,
        )

    @classmethod
    def model_validate_json(
        cls,
        json_data: str | bytes | bytearray,
        *,
        strict: bool | None = None,
        extra: ExtraValues | None = None,
        context: Any | None = None,
        by_alias: bool | None = None,
        by_name: bool | None = None,
    ) -> Self:
        """As pydantic's, with unknown fields ignored at every depth unless ``extra`` says."""
        return super().model_validate_json(
            json_data,
            strict=strict,
            extra=extra or "ignore",
            context=context,
            by_alias=by_alias,
            by_name=by_name,
        )

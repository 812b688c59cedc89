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

Not tolerated across versions: a new value of an enum (a phase, a step) and a new required
field. Add enum values only once every worker knows them; give every new field a default.

Layer rule: pure pydantic. ``contracts`` may import ``api``, ``scheduling`` and ``rendering``
(the models it carries), never activities, adapters, workflows or an SDK.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import ConfigDict, ValidationError, ValidatorFunctionWrapHandler, model_validator

from modelfleet.api.meta import Model


class WireModel(Model):
    """Base of every payload between workflows, activities and clients: camelCase aliases and
    snake_case names both accepted, unknown fields ignored, also inside embedded resources."""

    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="wrap")
    @classmethod
    def _ignore_unknown_in_embedded_resources(
        cls, data: Any, handler: ValidatorFunctionWrapHandler
    ) -> Self:
        # The fast path validates as usual; only a payload carrying an unknown field inside an
        # embedded strict resource takes the second pass, which overrides ``extra`` for every
        # model below this one.
        try:
            return handler(data)  # type: ignore[no-any-return]
        except ValidationError as err:
            if not all(e["type"] == "extra_forbidden" for e in err.errors()):
                raise
        return cls.model_validate(data, extra="ignore")

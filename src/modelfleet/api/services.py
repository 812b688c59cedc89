"""ModelEndpoint (a reachable OpenAI-compatible endpoint) and ModelService (a weighted,
label-selected front door over endpoints). Pure models, no I/O.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from modelfleet.api.meta import Model, Resource


class ModelEndpointSpec(Model):
    url: str = Field(min_length=1, max_length=2048)
    rewrite_path: str = "/"


class ModelEndpoint(Resource):
    KIND: ClassVar[str] = "ModelEndpoint"
    NAMESPACED: ClassVar[bool] = True
    kind: Literal["ModelEndpoint"] = "ModelEndpoint"
    spec: ModelEndpointSpec


class LabelSelector(Model):
    match_labels: dict[str, str] = Field(min_length=1)


class ServiceEndpoint(Model):
    selector: LabelSelector
    weight: int = Field(default=1, ge=1, le=1_000_000)


class ModelServiceSpec(Model):
    endpoints: list[ServiceEndpoint] = Field(min_length=1)


class ModelService(Resource):
    KIND: ClassVar[str] = "ModelService"
    NAMESPACED: ClassVar[bool] = True
    kind: Literal["ModelService"] = "ModelService"
    spec: ModelServiceSpec

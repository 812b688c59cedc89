"""ModelAutoscaler: scales a ModelDeployment on engine load, with the semantics and defaults of
Kubernetes' HorizontalPodAutoscaler (``autoscaling/v2``): a target per metric averaged over the
Ready replicas, a tolerance, stabilisation windows and rate policies per direction.

The model and its cross-field rules live together here (one concern: what a valid autoscaler
is); ``api.rules.validate`` calls ``autoscaler_rules``. Pure: pydantic and the standard library.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from enum import StrEnum
from typing import ClassVar, Literal
from urllib.parse import urlparse

from pydantic import Field

from modelfleet.api.manifest_errors import FieldError, Path
from modelfleet.api.meta import DNSLabel, Model, Resource

# The ModelDeployment's own bound on spec.replicas: the autoscaler may never ask for more.
MAX_REPLICAS = 10
# HPA's bounds (apis/autoscaling validation).
MAX_STABILIZATION_WINDOW_SECONDS = 3600
MAX_PERIOD_SECONDS = 1800
# HPA's cluster-wide default tolerance (--horizontal-pod-autoscaler-tolerance).
DEFAULT_TOLERANCE = 0.1
# HPA's default sync period (--horizontal-pod-autoscaler-sync-period).
DEFAULT_INTERVAL_SECONDS = 15

# Prometheus metric names (the exposition format's grammar; vLLM's use ':').
_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


class ScaleTargetRef(Model):
    kind: Literal["ModelDeployment"] = "ModelDeployment"
    name: DNSLabel


class MetricTarget(Model):
    """HPA's ``AverageValue`` target: the value one replica should carry on average."""

    type: Literal["AverageValue"] = "AverageValue"
    average_value: float = Field(gt=0)


class EngineMetric(Model):
    """A metric every Ready replica's engine exports on ``/metrics`` (e.g. vLLM's
    ``vllm:num_requests_waiting``); samples of that name in one scrape are summed, and a
    replica with several serving pods counts the mean of its pods."""

    name: str = Field(min_length=1, max_length=200)
    target: MetricTarget


class PrometheusMetric(Model):
    """A PromQL query whose scalar result is the deployment's total load; like HPA's External
    metric with an ``AverageValue`` target, desired replicas = ceil(total / averageValue)."""

    url: str = Field(min_length=1, max_length=2048)
    query: str = Field(min_length=1, max_length=4096)
    target: MetricTarget


class MetricSourceType(StrEnum):
    ENGINE = "Engine"
    PROMETHEUS = "Prometheus"


class MetricSpec(Model):
    type: MetricSourceType
    engine: EngineMetric | None = None
    prometheus: PrometheusMetric | None = None

    @property
    def label(self) -> str:
        """A short name for the metric, as decisions and the CLI show it."""
        if self.engine is not None:
            return self.engine.name
        if self.prometheus is not None:
            return f"promql:{self.prometheus.query}"
        return self.type.value

    @property
    def target_value(self) -> float:
        source = self.engine or self.prometheus
        return source.target.average_value if source is not None else 1.0


class PolicyType(StrEnum):
    PODS = "Pods"
    PERCENT = "Percent"


class SelectPolicy(StrEnum):
    MAX = "Max"
    MIN = "Min"
    DISABLED = "Disabled"


class ScalingPolicy(Model):
    type: PolicyType
    value: int = Field(gt=0)
    period_seconds: int = Field(gt=0, le=MAX_PERIOD_SECONDS)


class ScalingRules(Model):
    """One direction's rules. Unset fields take HPA's defaults for that direction."""

    stabilization_window_seconds: int | None = Field(
        default=None, ge=0, le=MAX_STABILIZATION_WINDOW_SECONDS
    )
    select_policy: SelectPolicy | None = None
    policies: list[ScalingPolicy] | None = Field(default=None, min_length=1, max_length=10)
    # HPA's per-direction tolerance (autoscaling/v2, Kubernetes 1.33+); 0.1 when unset.
    tolerance: float | None = Field(default=None, ge=0)


class Behavior(Model):
    scale_up: ScalingRules | None = None
    scale_down: ScalingRules | None = None


class ModelAutoscalerSpec(Model):
    scale_target_ref: ScaleTargetRef
    # 0 lets the autoscaler park the deployment at zero replicas (see docs/autoscaling.md).
    min_replicas: int = Field(default=1, ge=0, le=MAX_REPLICAS)
    max_replicas: int = Field(ge=1, le=MAX_REPLICAS)
    metrics: list[MetricSpec] = Field(min_length=1, max_length=8)
    behavior: Behavior = Field(default_factory=Behavior)
    # How often load is read and a decision taken (HPA's sync period).
    interval_seconds: int = Field(default=DEFAULT_INTERVAL_SECONDS, ge=5, le=600)


class ModelAutoscaler(Resource):
    KIND: ClassVar[str] = "ModelAutoscaler"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ("ma",)
    BORROWED_SHORT_NAMES: ClassVar[tuple[str, ...]] = ("hpa",)
    NAMESPACED: ClassVar[bool] = True
    kind: Literal["ModelAutoscaler"] = "ModelAutoscaler"
    spec: ModelAutoscalerSpec


# --- HPA's defaults (autoscaling/v2 defaulting), resolved ---------------------------------


class ResolvedRules(Model):
    """One direction's rules with every default filled in: what the decision function reads."""

    stabilization_window_seconds: int
    select_policy: SelectPolicy
    policies: list[ScalingPolicy]
    tolerance: float


def default_scale_up() -> ResolvedRules:
    """HPA's scale-up default: no window; add the larger of 4 pods or 100% every 15 s."""
    return ResolvedRules(
        stabilization_window_seconds=0,
        select_policy=SelectPolicy.MAX,
        policies=[
            ScalingPolicy(type=PolicyType.PODS, value=4, period_seconds=15),
            ScalingPolicy(type=PolicyType.PERCENT, value=100, period_seconds=15),
        ],
        tolerance=DEFAULT_TOLERANCE,
    )


def default_scale_down() -> ResolvedRules:
    """HPA's scale-down default: a 300 s window; remove up to 100% every 15 s."""
    return ResolvedRules(
        stabilization_window_seconds=300,
        select_policy=SelectPolicy.MAX,
        policies=[ScalingPolicy(type=PolicyType.PERCENT, value=100, period_seconds=15)],
        tolerance=DEFAULT_TOLERANCE,
    )


def resolve(rules: ScalingRules | None, defaults: ResolvedRules) -> ResolvedRules:
    """Fill unset fields from ``defaults`` field by field, as HPA's defaulting does."""
    if rules is None:
        return defaults
    return ResolvedRules(
        stabilization_window_seconds=(
            rules.stabilization_window_seconds
            if rules.stabilization_window_seconds is not None
            else defaults.stabilization_window_seconds
        ),
        select_policy=rules.select_policy or defaults.select_policy,
        policies=list(rules.policies) if rules.policies is not None else defaults.policies,
        tolerance=rules.tolerance if rules.tolerance is not None else defaults.tolerance,
    )


# --- cross-field rules ----------------------------------------------------------------------


def autoscaler_rules(ma: ModelAutoscaler) -> Iterator[FieldError]:
    """Every cross-field rule a ModelAutoscaler breaks, with its field path."""
    spec = ma.spec
    if spec.min_replicas > spec.max_replicas:
        yield FieldError(
            ("spec", "minReplicas"),
            f"must not exceed maxReplicas ({spec.min_replicas} > {spec.max_replicas})",
        )
    seen: dict[tuple[str, str], int] = {}
    for i, metric in enumerate(spec.metrics):
        path: Path = ("spec", "metrics", i)
        yield from _metric(path, metric)
        key = (metric.type.value, metric.label)
        if key in seen:
            yield FieldError(path, f"duplicate metric {metric.label!r} (also metrics[{seen[key]}])")
        else:
            seen[key] = i


def _metric(path: Path, metric: MetricSpec) -> Iterator[FieldError]:
    blocks = {
        MetricSourceType.ENGINE: metric.engine,
        MetricSourceType.PROMETHEUS: metric.prometheus,
    }
    for kind, block in blocks.items():
        field = kind.value.lower()
        if kind is metric.type and block is None:
            yield FieldError((*path, field), f"required when type is {kind.value}")
        if kind is not metric.type and block is not None:
            yield FieldError((*path, field), f"must not be set when type is {metric.type.value}")
    if metric.engine is not None and not _METRIC_NAME.match(metric.engine.name):
        yield FieldError(
            (*path, "engine", "name"),
            f"not a Prometheus metric name (got {metric.engine.name!r}; letters, digits, '_' "
            "and ':', not starting with a digit)",
        )
    if metric.prometheus is not None:
        url = urlparse(metric.prometheus.url)
        if url.scheme not in ("http", "https") or not url.hostname:
            yield FieldError(
                (*path, "prometheus", "url"),
                f"must be an http(s) URL with a host (got {metric.prometheus.url!r})",
            )
        elif url.username or url.password:
            yield FieldError(
                (*path, "prometheus", "url"),
                "must not carry credentials (configure them on the worker, never in a manifest)",
            )

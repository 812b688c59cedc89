"""The validation rules of ``api.rules`` (and ``api.parity_rules``) that a CRD can enforce at
admission, as CEL (``x-kubernetes-validations``), keyed by the model whose schema node carries
them. Pure data, no I/O.

Each rule's ``message`` (or ``messageExpression``) is the reason ``modelfleet validate`` prints
for the same broken rule and ``fieldPath`` the field it names, so ``kubectl apply`` and
``modelfleet validate`` say the same thing. Only rules CEL states directly are here: what needs
modelfleet's own parsers (CEL device selectors, quantities, semantic versions, URLs) or other
objects (classes, clusters) is judged by the controller and reported as a condition.

Rules see the object after the schema's defaults are applied, as the apiserver evaluates them;
they test optional fields with ``has()`` all the same, so that they hold for any input.
"""

from __future__ import annotations

from modelfleet.api.autoscalers import MetricSourceType
from modelfleet.api.caches import CacheSource
from modelfleet.api.classes import Provider
from modelfleet.api.clusters import ClusterSource
from modelfleet.api.services import DEFAULT_GATEWAY

Rule = dict[str, str]


def _rule(rule: str, message: str, field: str = "", *, expression: bool = False) -> Rule:
    out = {"rule": rule, ("messageExpression" if expression else "message"): message}
    if field:
        out["fieldPath"] = field
    return out


def _blocks(
    discriminator: str, fields: dict[str, str], *, optional: tuple[str, ...] = ()
) -> list[Rule]:
    """The "one sibling block per choice" rules (``source: GKE`` needs ``gke`` and no other
    block): each block is required when chosen (unless in ``optional``) and forbidden when
    another value is."""
    rules = []
    for value, field in fields.items():
        if value not in optional:
            rules.append(
                _rule(
                    f"self.{discriminator} != '{value}' || has(self.{field})",
                    f"required when {discriminator} is {value}",
                    f".{field}",
                )
            )
        rules.append(
            _rule(
                f"!has(self.{field}) || self.{discriminator} == '{value}'",
                f"'must not be set when {discriminator} is ' + self.{discriminator}",
                f".{field}",
                expression=True,
            )
        )
    return rules


def _min_not_above_max(low: str, high: str) -> Rule:
    return _rule(
        f"!has(self.{low}) || !has(self.{high}) || self.{low} <= self.{high}",
        f"'must not exceed {high} (' + string(self.{low}) + ' > ' + string(self.{high}) + ')'",
        f".{low}",
        expression=True,
    )


_ROLE = "(has(self.role) ? self.role : 'Standalone')"
_MODE = "(has(self.serving) && has(self.serving.mode) ? self.serving.mode : 'Unified')"
_OPERATOR = "(has(self.operator) ? self.operator : 'Equal')"

_ENGINES_FOR_MODE = [
    _rule(
        f"{_MODE} != 'PrefillDecode' || (size(self.engines) == 2 && "
        "self.engines.exists(e, has(e.phase) && e.phase == 'Prefill') && "
        "self.engines.exists(e, has(e.phase) && e.phase == 'Decode'))",
        "serving mode PrefillDecode needs exactly 2 engines: one with phase Prefill and one "
        "with phase Decode",
        ".engines",
    ),
    _rule(
        f"{_MODE} == 'PrefillDecode' || self.engines.all(e, !has(e.phase))",
        "phase is only allowed when serving.mode is PrefillDecode",
        ".engines",
    ),
]

_ENGINE_SHAPE = _rule(
    "(size(self.members) == 1 && (!has(self.members[0].role) || "
    "self.members[0].role == 'Standalone')) || (size(self.members) == 2 && "
    "self.members.exists_one(m, has(m.role) && m.role == 'Leader') && "
    "self.members.exists_one(m, has(m.role) && m.role == 'Worker'))",
    "an engine is either exactly one Standalone member, or exactly one Leader and one Worker",
    ".members",
)

# Model name (its class, as pydantic names its schema) -> its rules.
RULES: dict[str, list[Rule]] = {
    # --- ModelDeployment / ModelReplica
    "Strategy": [
        _rule(
            "!(has(self.maxSurge) && self.maxSurge == 0 && has(self.maxUnavailable) && "
            "self.maxUnavailable == 0)",
            "maxSurge and maxUnavailable must not both be 0 (a rollout could never progress)",
        )
    ],
    "ModelDeploymentSpec": [
        _rule(
            "!has(self.strategy) || !has(self.strategy.borrow) || "
            "self.strategy.borrow != 'Fleet' || (has(self.template.spec.homeSelector) && "
            "has(self.template.spec.homeSelector.matchLabels) && "
            "size(self.template.spec.homeSelector.matchLabels) > 0)",
            "Fleet needs spec.template.spec.homeSelector.matchLabels (where replicas normally "
            "run; the roll borrows other clusters its clusterSelector allows)",
            ".strategy.borrow",
        )
    ],
    "CanaryStrategy": [
        # maxItems 10: every adjacent pair, by index (CEL has no range over a list's indices).
        _rule(
            "[1, 2, 3, 4, 5, 6, 7, 8, 9].all(i, i >= size(self.steps) || "
            "self.steps[i - 1] < self.steps[i])",
            "steps must increase (percentages of the replicas)",
            ".steps",
        ),
        _rule(
            "size(self.steps) == 0 || self.steps[size(self.steps) - 1] == 100",
            "the last step must be 100 (every replica)",
            ".steps",
        ),
    ],
    "CanaryAnalysis": [
        _rule(
            "has(self.ttftP95Seconds) || has(self.ttftP95Ratio) || has(self.itlP95Seconds) || "
            "has(self.itlP95Ratio) || has(self.maxErrorPercent)",
            "set at least one of ttftP95Seconds, ttftP95Ratio, itlP95Seconds, itlP95Ratio, "
            "maxErrorPercent",
        )
    ],
    "DeploymentTemplateSpec": _ENGINES_FOR_MODE,
    "ModelReplicaSpec": _ENGINES_FOR_MODE,
    "Engine": [
        _ENGINE_SHAPE,
        _rule(
            "self.members.exists(m, has(m.nodeSelector))",
            "at least one member must have a nodeSelector (otherwise the engine claims no "
            "hardware)",
            ".members",
        ),
    ],
    "PlacedEngine": [
        _ENGINE_SHAPE,
        _rule(
            "self.members.exists(m, has(m.deviceRequests))",
            "at least one member must carry deviceRequests",
            ".members",
        ),
    ],
    "Member": [
        _rule(
            f"!has(self.worker) || {_ROLE} == 'Worker'",
            f"'only a Worker member may set worker (this member is ' + {_ROLE} + ')'",
            ".worker",
            expression=True,
        )
    ],
    "PlacedMember": [
        _rule(
            f"!has(self.worker) || {_ROLE} == 'Worker'",
            "only a Worker member may set worker",
            ".worker",
        )
    ],
    "Container": [
        _rule(
            "self.name == 'engine'",
            "\"the container must be named 'engine' (got '\" + self.name + \"')\"",
            ".name",
            expression=True,
        )
    ],
    "EnvVar": [
        _rule(
            "!(has(self.value) && has(self.valueFrom))",
            "set either value or valueFrom, not both",
        )
    ],
    "EnvVarSource": [
        _rule(
            "[has(self.secretKeyRef), has(self.configMapKeyRef), has(self.fieldRef)]"
            ".filter(x, x).size() == 1",
            "exactly one of secretKeyRef, configMapKeyRef or fieldRef must be set",
        )
    ],
    "Toleration": [
        _rule(
            f"{_OPERATOR} != 'Equal' || (has(self.key) && self.key != '')",
            "operator Equal requires a non-empty key",
            ".key",
        ),
        _rule(
            f"{_OPERATOR} != 'Exists' || !has(self.value) || self.value == ''",
            "operator Exists must not set a value",
            ".value",
        ),
    ],
    # --- InferenceClass / InferenceCluster
    "Provisioning": _blocks("provider", {p.value: p.name.lower() for p in Provider}),
    "ClusterAccess": _blocks(
        "source",
        {s.value: s.name.lower() for s in ClusterSource},
        optional=(ClusterSource.EXISTING.value,),
    ),
    "NodePool": [_min_not_above_max("minNodeCount", "maxNodeCount")],
    "PoolFallback": [
        _rule("has(self.zones) || has(self.className)", "set zones, className or both")
    ],
    "GKEPool": [_min_not_above_max("minNodeCount", "maxNodeCount")],
    "EKSPool": [_min_not_above_max("minNodeCount", "maxNodeCount")],
    "AKSPool": [_min_not_above_max("minNodeCount", "maxNodeCount")],
    "NebiusPool": [_min_not_above_max("minNodeCount", "maxNodeCount")],
    "VultrPool": [_min_not_above_max("minNodeCount", "maxNodeCount")],
    "Fabric": [
        _rule(
            "!has(self.infiniband) || (has(self.type) && self.type == 'InfiniBand')",
            "only allowed when fabric type is InfiniBand",
            ".infiniband",
        )
    ],
    # --- serving
    "ModelEndpointSpec": [
        _rule(
            "!has(self.rewritePath) || self.rewritePath.startsWith('/')",
            "must start with '/'",
            ".rewritePath",
        )
    ],
    "Traefik": [
        _rule(
            "!has(self.loadBalancer) || self.loadBalancer != 'MetalLB' || has(self.metallb)",
            "required when loadBalancer is MetalLB",
            ".metallb",
        )
    ],
    # --- ModelAutoscaler / ModelCache
    "ModelAutoscalerSpec": [_min_not_above_max("minReplicas", "maxReplicas")],
    "MetricSpec": _blocks("type", {t.value: t.value.lower() for t in MetricSourceType}),
    "ModelCacheSpec": [
        _rule(
            f"self.source != '{CacheSource.HUGGING_FACE.value}' || has(self.huggingFace)",
            f"required when source is {CacheSource.HUGGING_FACE.value}",
            ".huggingFace",
        ),
        _rule(
            f"self.source != '{CacheSource.URI.value}' || has(self.uri)",
            f"required when source is {CacheSource.URI.value}",
            ".uri",
        ),
    ],
}

# Kind -> rules on the whole object (where only ``metadata.name`` may be read).
ROOT_RULES: dict[str, list[Rule]] = {
    "InferenceGateway": [
        _rule(
            f"self.metadata.name == '{DEFAULT_GATEWAY}'",
            f"the fleet has one InferenceGateway, named {DEFAULT_GATEWAY!r}",
            ".metadata.name",
        )
    ],
}

# The two shapes of an InferenceGateway's spec (modelfleet's, naming a workload cluster, and
# Modelplane's, naming a backend) share one schema: one of the two must be chosen.
GATEWAY_SHAPE_RULES: list[Rule] = [
    _rule(
        "has(self.cluster) || has(self.backend)",
        "required field is missing",
        ".cluster",
    ),
    _rule(
        "has(self.backend) == false || has(self.cluster) == false",
        "unknown field (check the spelling; unknown fields are not ignored)",
        ".backend",
    ),
]

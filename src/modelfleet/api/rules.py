"""Cross-field validation rules: every rule Modelplane's XRDs enforce with CEL, plus modelfleet's
own (rollout strategy, CEL syntax, typed device attributes). Each rule yields a ``FieldError``
with the exact field path, so a user sees every problem at once.

Pure: no I/O. Uses the scheduling layer's CEL and quantity parsers so that what validates here
is exactly what the scheduler can evaluate.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from urllib.parse import urlparse

from modelfleet.api.autoscalers import ModelAutoscaler, autoscaler_rules
from modelfleet.api.classes import ClassDevice, DeviceAttribute, DeviceClaim, InferenceClass
from modelfleet.api.clusters import ClusterSource, FabricType, InferenceCluster, NodePool
from modelfleet.api.deployments import (
    BorrowPolicy,
    CanaryStrategy,
    ClusterSelector,
    Engine,
    EnvVar,
    ModelDeployment,
    ModelReplica,
    Phase,
    Role,
    ServingMode,
    TemplateMeta,
    Toleration,
    TolerationOperator,
)
from modelfleet.api.infrastructure import AKS_POOL_NAME
from modelfleet.api.manifest_errors import FieldError, Path
from modelfleet.api.meta import (
    RESERVED_LABEL_PREFIXES,
    Resource,
    label_key_problem,
    label_value_problem,
)
from modelfleet.api.parity_rules import parity_rules
from modelfleet.api.schedulers import scheduler_rules
from modelfleet.api.services import DEFAULT_GATEWAY, InferenceGateway, ModelEndpoint, ModelService
from modelfleet.cel.compiler import CelCompileError, check_selector
from modelfleet.cel.quantity import Quantity
from modelfleet.cel.semver import Semver

_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def validate(resource: Resource) -> list[FieldError]:
    """Every rule broken by ``resource`` (empty when it is valid)."""
    errors: list[FieldError] = []
    if resource.NAMESPACED is False and resource.metadata.namespace is not None:
        errors.append(
            FieldError(
                ("metadata", "namespace"),
                f"{resource.KIND} is fleet-scoped and must not set a namespace",
            )
        )
    errors.extend(_labels(("metadata", "labels"), resource.metadata.labels, reserved_ok=True))
    errors.extend(_annotations(("metadata", "annotations"), resource.metadata.annotations))
    errors.extend(_kind_rules(resource))
    return errors


def _kind_rules(resource: Resource) -> Iterable[FieldError]:
    """The rules of ``resource``'s own kind."""
    match resource:
        case InferenceClass():
            return _inference_class(resource)
        case InferenceCluster():
            return _inference_cluster(resource)
        case ModelDeployment():
            return _model_deployment(resource)
        case ModelReplica():
            return _model_replica(resource)
        case ModelEndpoint():
            return _model_endpoint(resource)
        case ModelService():
            return _model_service(resource)
        case ModelAutoscaler():
            return autoscaler_rules(resource)
        case InferenceGateway():
            return _inference_gateway(resource)
    return parity_rules(resource)


# --- shared ----------------------------------------------------------------------------------


def _duplicates(path: Path, keys: Sequence[object], what: str) -> Iterator[FieldError]:
    counts = Counter(keys)
    for i, key in enumerate(keys):
        if counts[key] > 1 and keys.index(key) != i:
            yield FieldError((*path, i), f"duplicate {what} {key!r}: {what}s must be unique")


def _labels(path: Path, labels: dict[str, str], *, reserved_ok: bool) -> Iterator[FieldError]:
    for key, value in labels.items():
        problem = label_key_problem(key)
        if problem:
            yield FieldError((*path, key), f"invalid label key {key!r}: {problem}")
        elif not reserved_ok and key.startswith(RESERVED_LABEL_PREFIXES):
            yield FieldError(
                (*path, key),
                f"label key {key!r} uses a reserved prefix "
                f"({', '.join(RESERVED_LABEL_PREFIXES)} are set by modelfleet)",
            )
        value_problem = label_value_problem(value)
        if value_problem:
            yield FieldError((*path, key), f"invalid label value {value!r}: {value_problem}")


def _annotations(path: Path, annotations: dict[str, str]) -> Iterator[FieldError]:
    for key, value in annotations.items():
        problem = label_key_problem(key)
        if problem:
            yield FieldError((*path, key), f"invalid annotation key {key!r}: {problem}")
        if len(value) > 8192:
            yield FieldError(
                (*path, key), f"annotation value must be at most 8192 characters ({len(value)})"
            )


def _template_meta(path: Path, meta: TemplateMeta) -> Iterator[FieldError]:
    yield from _labels((*path, "labels"), meta.labels, reserved_ok=False)
    yield from _annotations((*path, "annotations"), meta.annotations)


def _tolerations(path: Path, tolerations: list[Toleration]) -> Iterator[FieldError]:
    for i, t in enumerate(tolerations):
        if t.operator is TolerationOperator.EQUAL and not t.key:
            yield FieldError((*path, i, "key"), "operator Equal requires a non-empty key")
        if t.operator is TolerationOperator.EXISTS and t.value:
            yield FieldError((*path, i, "value"), "operator Exists must not set a value")


def _env(path: Path, env: list[EnvVar] | None) -> Iterator[FieldError]:
    for i, var in enumerate(env or []):
        if var.value is not None and var.value_from is not None:
            yield FieldError((*path, i), "set either value or valueFrom, not both")
        if var.value_from is not None:
            sources = [
                s
                for s in (
                    var.value_from.secret_key_ref,
                    var.value_from.config_map_key_ref,
                    var.value_from.field_ref,
                )
                if s is not None
            ]
            if len(sources) != 1:
                yield FieldError(
                    (*path, i, "valueFrom"),
                    "exactly one of secretKeyRef, configMapKeyRef or fieldRef must be set",
                )
    yield from _duplicates(path, [v.name for v in env or []], "env var name")


def _cel(path: Path, expression: str) -> Iterator[FieldError]:
    try:
        check_selector(expression)
    except CelCompileError as exc:
        yield FieldError(path, f"invalid CEL selector: {exc}")


# --- InferenceClass ---------------------------------------------------------------------------


def _qualified_name_problem(name: str) -> str | None:
    domain, sep, ident = name.rpartition("/")
    if sep and (not domain or len(domain) > 63 or not _DNS_SUBDOMAIN.match(domain)):
        return "domain prefix must be a DNS subdomain of at most 63 characters"
    if not _C_IDENTIFIER.match(ident) or len(ident) > 32:
        return "name must be a C identifier of at most 32 characters"
    return None


def _attribute(path: Path, attr: DeviceAttribute) -> Iterator[FieldError]:
    set_fields = [f for f in ("string", "version", "bool", "int") if getattr(attr, f) is not None]
    if len(set_fields) != 1:
        yield FieldError(
            path,
            "exactly one of string, version, bool or int must be set"
            + (f" (got {', '.join(set_fields)})" if set_fields else ""),
        )
    elif attr.version is not None:
        try:
            Semver.parse(attr.version)
        except ValueError as exc:
            yield FieldError((*path, "version"), f"not a strict semantic version: {exc}")


def _device(path: Path, device: ClassDevice) -> Iterator[FieldError]:
    if device.claim is DeviceClaim.DRA and not device.device_class_name:
        yield FieldError(
            (*path, "deviceClassName"), "required when claim is DRA (the DeviceClass to claim)"
        )
    for name, attr in device.attributes.items():
        problem = _qualified_name_problem(name)
        if problem:
            yield FieldError((*path, "attributes", name), f"invalid attribute name: {problem}")
        yield from _attribute((*path, "attributes", name), attr)
    for name, cap in device.capacity.items():
        problem = _qualified_name_problem(name)
        if problem:
            yield FieldError((*path, "capacity", name), f"invalid capacity name: {problem}")
        try:
            Quantity.parse(cap.value)
        except ValueError as exc:
            yield FieldError((*path, "capacity", name, "value"), f"invalid quantity: {exc}")


def _inference_class(ic: InferenceClass) -> Iterator[FieldError]:
    spec = ("spec",)
    prov = ic.spec.provisioning
    if prov is not None:
        for provider, block in prov.blocks().items():
            field = provider.name.lower()
            if provider is prov.provider and block is None:
                yield FieldError(
                    (*spec, "provisioning", field), f"required when provider is {provider.value}"
                )
            if provider is not prov.provider and block is not None:
                yield FieldError(
                    (*spec, "provisioning", field),
                    f"must not be set when provider is {prov.provider.value}",
                )
    devices = ic.spec.devices
    yield from _duplicates((*spec, "devices"), [d.name for d in devices], "device name")
    for i, device in enumerate(devices):
        yield from _device((*spec, "devices", i), device)


# --- InferenceCluster -------------------------------------------------------------------------


def _inference_cluster(cl: InferenceCluster) -> Iterator[FieldError]:
    spec = ("spec",)
    access = cl.spec.cluster
    source = access.source
    for candidate in ClusterSource:
        field = candidate.name.lower()
        block = access.block(candidate)
        if candidate is source and block is None and candidate is not ClusterSource.EXISTING:
            yield FieldError((*spec, "cluster", field), f"required when source is {source.value}")
        if candidate is not source and block is not None:
            yield FieldError(
                (*spec, "cluster", field), f"must not be set when source is {source.value}"
            )
    yield from scheduler_rules((*spec, "scheduler"), cl.spec.scheduler)
    taints = cl.spec.taints
    yield from _duplicates(
        (*spec, "taints"), [(t.key, t.effect.value) for t in taints], "taint (key, effect)"
    )
    for i, taint in enumerate(taints):
        problem = label_key_problem(taint.key)
        if problem:
            yield FieldError((*spec, "taints", i, "key"), f"invalid taint key: {problem}")
    pools = cl.spec.node_pools
    yield from _duplicates((*spec, "nodePools"), [p.name for p in pools], "node pool name")
    provisioned = source in (ClusterSource.GKE, ClusterSource.EKS)
    for i, pool in enumerate(pools):
        path = (*spec, "nodePools", i)
        if (
            pool.min_node_count is not None
            and pool.max_node_count is not None
            and pool.min_node_count > pool.max_node_count
        ):
            yield FieldError(
                (*path, "minNodeCount"),
                f"must not exceed maxNodeCount ({pool.min_node_count} > {pool.max_node_count})",
            )
        if provisioned and not pool.zones:
            yield FieldError((*path, "zones"), f"required for pools that {source.value} provisions")
        if source is ClusterSource.AKS and not AKS_POOL_NAME.match(pool.name):
            yield FieldError(
                (*path, "name"),
                "AKS pool names are a lowercase letter then at most 11 lowercase letters or "
                f"digits (got {pool.name!r})",
            )
        if pool.node_label is not None:
            problem = label_key_problem(pool.node_label)
            if problem:
                yield FieldError((*path, "nodeLabel"), f"invalid label key: {problem}")
        if pool.capacity_block is not None and source is not ClusterSource.EKS:
            yield FieldError((*path, "capacityBlock"), "capacity blocks exist only on EKS")
        yield from _fallbacks(path, pool, source)
        fabric = pool.fabric
        if fabric is not None:
            if fabric.infiniband is not None and fabric.type is not FabricType.INFINIBAND:
                yield FieldError(
                    (*path, "fabric", "infiniband"), "only allowed when fabric type is InfiniBand"
                )
            if fabric.type is FabricType.EFA and source not in (
                ClusterSource.EKS,
                ClusterSource.EXISTING,
            ):
                yield FieldError((*path, "fabric", "type"), "EFA is only available on EKS")
            if (
                fabric.type is FabricType.INFINIBAND
                and source is ClusterSource.NEBIUS
                and fabric.infiniband is None
            ):
                yield FieldError(
                    (*path, "fabric", "infiniband"),
                    "required on Nebius: the InfiniBand fabric the GPU cluster joins",
                )
            if fabric.type is FabricType.INFINIBAND and provisioned:
                yield FieldError(
                    (*path, "fabric", "type"),
                    f"InfiniBand pools cannot be provisioned on {source.value}; "
                    "use source Existing",
                )


def _fallbacks(path: Path, pool: NodePool, source: ClusterSource) -> Iterator[FieldError]:
    if not pool.fallbacks:
        return
    where = (*path, "fallbacks")
    if source not in (ClusterSource.GKE, ClusterSource.EKS, ClusterSource.AKS):
        yield FieldError(
            where,
            "fallbacks apply only to pools modelfleet provisions (sources GKE, EKS, AKS), "
            f"not to source {source.value}",
        )
        return
    if pool.capacity_block is not None:
        yield FieldError(
            where,
            "a pool on a Capacity Block cannot fall back: the reservation holds one instance "
            "type in one zone",
        )
        return
    # Each alternative as it would be created; one equal to the pool or an earlier one would
    # only repeat a stocked-out attempt.
    seen = [(sorted(pool.zones), pool.class_name)]
    for i, fallback in enumerate(pool.fallbacks):
        if fallback.zones is None and fallback.class_name is None:
            yield FieldError((*where, i), "set zones, className or both")
            continue
        zones = fallback.zones if fallback.zones is not None else pool.zones
        if fallback.zones is not None:
            yield from _duplicates((*where, i, "zones"), fallback.zones, "zone")
        key = (sorted(zones), fallback.class_name or pool.class_name)
        if key in seen:
            same = "the pool itself" if seen.index(key) == 0 else f"fallback {seen.index(key) - 1}"
            yield FieldError(
                (*where, i),
                f"repeats {same} (zones {', '.join(key[0]) or 'unset'}, class {key[1]}): "
                "an alternative must differ in its zones or its class",
            )
        seen.append(key)


# --- ModelDeployment / ModelReplica -----------------------------------------------------------


def _engine_shape(path: Path, roles: Iterable[Role]) -> Iterator[FieldError]:
    counts = Counter(roles)
    standalone_ok = counts == Counter({Role.STANDALONE: 1})
    gang_ok = counts == Counter({Role.LEADER: 1, Role.WORKER: 1})
    if not (standalone_ok or gang_ok):
        got = ", ".join(f"{n} {r.value}" for r, n in sorted(counts.items())) or "none"
        yield FieldError(
            (*path, "members"),
            "an engine is either exactly one Standalone member, or exactly one Leader and one "
            f"Worker (got {got})",
        )


def _serving_rules(
    path: Path, mode: ServingMode, phases: Sequence[Phase | None]
) -> Iterator[FieldError]:
    if mode is ServingMode.PREFILL_DECODE:
        if len(phases) != 2 or sorted(p.value for p in phases if p) != ["Decode", "Prefill"]:
            yield FieldError(
                (*path, "engines"),
                "serving mode PrefillDecode needs exactly 2 engines: one with phase Prefill "
                "and one with phase Decode",
            )
    else:
        for i, phase in enumerate(phases):
            if phase is not None:
                yield FieldError(
                    (*path, "engines", i, "phase"),
                    "phase is only allowed when serving.mode is PrefillDecode",
                )


def _pod_template(path: Path, meta: TemplateMeta, env: list[EnvVar] | None) -> Iterator[FieldError]:
    yield from _template_meta((*path, "metadata"), meta)
    yield from _env((*path, "spec", "containers", 0, "env"), env)


def _flag_value(tokens: Sequence[str], flag: str) -> str | None:
    """The last value of ``--flag=V`` or ``--flag V`` in ``tokens``."""
    value = None
    for i, token in enumerate(tokens):
        if token.startswith(f"{flag}="):
            value = token.split("=", 1)[1]
        elif token == flag and i + 1 < len(tokens):
            value = tokens[i + 1]
    return value


def _decode_port(path: Path, engines: Sequence[Engine]) -> Iterator[FieldError]:
    """The P/D sidecar owns port 8000 on decode pods, so the decode engine needs another."""
    for i, engine in enumerate(engines):
        if engine.phase is not Phase.DECODE:
            continue
        for j, member in enumerate(engine.members):
            if member.role is Role.WORKER:
                continue
            c = member.container
            tokens = [*(c.command or []), *(c.args or [])]
            # A shell command line is one token: look inside it too.
            tokens = [t for token in tokens for t in token.split()]
            port = _flag_value(tokens, "--port")
            if port is None or port == "8000":
                yield FieldError(
                    (*path, "engines", i, "members", j, "template", "spec", "containers", 0),
                    "under PrefillDecode the decode engine must listen on a --port other than "
                    "8000, which the P/D sidecar owns (add e.g. --port=8001 to its args)",
                )


def _canary(path: tuple[str | int, ...], canary: CanaryStrategy) -> Iterator[FieldError]:
    steps = canary.steps
    if any(b <= a for a, b in itertools.pairwise(steps)):
        yield FieldError((*path, "steps"), "steps must increase (percentages of the replicas)")
    if steps and steps[-1] != 100:
        yield FieldError((*path, "steps"), "the last step must be 100 (every replica)")
    a = canary.analysis
    thresholds = (
        a.ttft_p95_seconds,
        a.ttft_p95_ratio,
        a.itl_p95_seconds,
        a.itl_p95_ratio,
        a.max_error_percent,
    )
    if all(t is None for t in thresholds):
        yield FieldError(
            (*path, "analysis"),
            "set at least one of ttftP95Seconds, ttftP95Ratio, itlP95Seconds, itlP95Ratio, "
            "maxErrorPercent",
        )


def _model_deployment(md: ModelDeployment) -> Iterator[FieldError]:
    spec = md.spec
    if spec.strategy.max_surge == 0 and spec.strategy.unavailable(spec.replicas) == 0:
        yield FieldError(
            ("spec", "strategy"),
            "maxSurge and maxUnavailable must not both be 0 (a rollout could never progress)",
        )
    if spec.strategy.canary is not None:
        yield from _canary(("spec", "strategy", "canary"), spec.strategy.canary)
    tpl = ("spec", "template")
    yield from _template_meta((*tpl, "metadata"), spec.template.metadata)
    tspec = spec.template.spec
    ts = (*tpl, "spec")
    yield from _home_selector(spec.strategy.borrow, ts, tspec.home_selector)
    yield from _tolerations((*ts, "tolerations"), tspec.tolerations)
    engines = tspec.engines
    yield from _duplicates((*ts, "engines"), [e.name for e in engines], "engine name")
    yield from _serving_rules(ts, tspec.serving.mode, [e.phase for e in engines])
    if tspec.serving.mode is ServingMode.PREFILL_DECODE:
        yield from _decode_port(ts, engines)
    for i, engine in enumerate(engines):
        ep = (*ts, "engines", i)
        yield from _engine_shape(ep, [m.role for m in engine.members])
        if all(m.node_selector is None for m in engine.members):
            yield FieldError(
                (*ep, "members"),
                "at least one member must have a nodeSelector (otherwise the engine claims "
                "no hardware)",
            )
        for j, member in enumerate(engine.members):
            mp = (*ep, "members", j)
            if member.worker is not None and member.role is not Role.WORKER:
                yield FieldError(
                    (*mp, "worker"),
                    f"only a Worker member may set worker (this member is {member.role.value})",
                )
            if member.node_selector is not None:
                devices = member.node_selector.devices
                dp = (*mp, "nodeSelector", "devices")
                yield from _duplicates(dp, [d.name for d in devices], "device name")
                for k, device in enumerate(devices):
                    for s, sel in enumerate(device.selectors):
                        yield from _cel((*dp, k, "selectors", s, "cel"), sel.cel)
            yield from _pod_template(
                (*mp, "template"),
                member.template.metadata,
                member.container.env,
            )


def _home_selector(
    borrow: BorrowPolicy, path: Path, home: ClusterSelector | None
) -> Iterator[FieldError]:
    """Valid labels; and borrowing needs a home to borrow from: without a homeSelector every
    cluster the clusterSelector allows is already where the deployment normally runs."""
    if borrow is BorrowPolicy.FLEET and (home is None or not home.match_labels):
        yield FieldError(
            ("spec", "strategy", "borrow"),
            "Fleet needs spec.template.spec.homeSelector.matchLabels (where replicas normally "
            "run; the roll borrows other clusters its clusterSelector allows)",
        )
    for key, value in (home.match_labels if home else {}).items():
        lp = (*path, "homeSelector", "matchLabels", key)
        problem = label_key_problem(key)
        if problem:
            yield FieldError(lp, f"invalid label key {key!r}: {problem}")
        value_problem = label_value_problem(value)
        if value_problem:
            yield FieldError(lp, f"invalid label value {value!r}: {value_problem}")


def _model_replica(mr: ModelReplica) -> Iterator[FieldError]:
    spec = ("spec",)
    engines = mr.spec.engines
    yield from _duplicates((*spec, "engines"), [e.name for e in engines], "engine name")
    yield from _serving_rules(spec, mr.spec.serving.mode, [e.phase for e in engines])
    for i, engine in enumerate(engines):
        ep = (*spec, "engines", i)
        yield from _engine_shape(ep, [m.role for m in engine.members])
        if all(m.device_requests is None for m in engine.members):
            yield FieldError((*ep, "members"), "at least one member must carry deviceRequests")
        for j, member in enumerate(engine.members):
            mp = (*ep, "members", j)
            if member.worker is not None and member.role is not Role.WORKER:
                yield FieldError((*mp, "worker"), "only a Worker member may set worker")
            for k, req in enumerate(member.device_requests or []):
                for s, sel in enumerate(req.selectors):
                    yield from _cel((*mp, "deviceRequests", k, "selectors", s, "cel"), sel.cel)


# --- ModelEndpoint / ModelService ---------------------------------------------------------------


def _model_endpoint(me: ModelEndpoint) -> Iterator[FieldError]:
    url = urlparse(me.spec.url)
    if url.scheme not in ("http", "https") or not url.hostname:
        yield FieldError(
            ("spec", "url"), f"must be an http(s) URL with a host (got {me.spec.url!r})"
        )
    if not me.spec.rewrite_path.startswith("/"):
        yield FieldError(("spec", "rewritePath"), "must start with '/'")


def _model_service(ms: ModelService) -> Iterator[FieldError]:
    for i, ep in enumerate(ms.spec.endpoints):
        yield from _labels(
            ("spec", "endpoints", i, "selector", "matchLabels"),
            ep.selector.match_labels,
            reserved_ok=True,
        )


def _inference_gateway(ig: InferenceGateway) -> Iterator[FieldError]:
    if ig.name != DEFAULT_GATEWAY:
        yield FieldError(
            ("metadata", "name"), f"the fleet has one InferenceGateway, named {DEFAULT_GATEWAY!r}"
        )
    if not ig.spec.listeners:
        yield FieldError(("spec", "listeners"), "at least one HTTP listener is required")
    seen: set[str] = set()
    for i, listener in enumerate(ig.spec.listeners):
        if listener.name in seen:
            yield FieldError(("spec", "listeners", i, "name"), "duplicate listener name")
        seen.add(listener.name)
    doors = {ig.spec.cluster}
    for i, cluster in enumerate(ig.spec.additional_clusters):
        if cluster in doors:
            yield FieldError(
                ("spec", "additionalClusters", i),
                f"cluster {cluster!r} is already a front door"
                + (" (it is spec.cluster)" if cluster == ig.spec.cluster else ""),
            )
        doors.add(cluster)

"""The cross-field rules of a ModelDeployment and a ModelReplica: rollout strategy and canary
steps, home selector and borrowing, engine shapes (Standalone or Leader and Worker), serving modes
(PrefillDecode's phases and the decode engine's port), device selectors in CEL, and the pod
templates' labels, annotations, tolerations and env. Pure: it may touch the API's models and the
CEL layer's compiler (so what validates is what the scheduler can evaluate); no I/O.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

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
from modelfleet.api.field_rules import annotation_errors, duplicate_errors, label_errors
from modelfleet.api.manifest_errors import FieldError, Path
from modelfleet.api.meta import (
    label_key_problem,
    label_value_problem,
)
from modelfleet.cel.compiler import CelCompileError, check_selector

__all__ = ["model_deployment_rules", "model_replica_rules"]


def _template_meta(path: Path, meta: TemplateMeta) -> Iterator[FieldError]:
    yield from label_errors((*path, "labels"), meta.labels, reserved_ok=False)
    yield from annotation_errors((*path, "annotations"), meta.annotations)


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
    yield from duplicate_errors(path, [v.name for v in env or []], "env var name")


def _cel(path: Path, expression: str) -> Iterator[FieldError]:
    try:
        check_selector(expression)
    except CelCompileError as exc:
        yield FieldError(path, f"invalid CEL selector: {exc}")


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


def model_deployment_rules(md: ModelDeployment) -> Iterator[FieldError]:
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
    yield from duplicate_errors((*ts, "engines"), [e.name for e in engines], "engine name")
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
                yield from duplicate_errors(dp, [d.name for d in devices], "device name")
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


def model_replica_rules(mr: ModelReplica) -> Iterator[FieldError]:
    spec = ("spec",)
    engines = mr.spec.engines
    yield from duplicate_errors((*spec, "engines"), [e.name for e in engines], "engine name")
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

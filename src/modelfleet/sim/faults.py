"""Fault injection for simulated clusters.

Development/test emulator only: product code never imports ``modelfleet.sim``. This module keeps
per-cluster fault settings and counters in memory and provides the aiohttp middleware that
applies them to a cluster's API routes. It touches nothing outside the process.

API-level faults (applied by :func:`fault_middleware`, in this order):

* ``dark``: the cluster stops answering. ``dark_mode="hang"`` (default) accepts the request and
  never answers while the cluster stays dark, and open watch streams stop delivering events
  (they resume, in order, when the cluster is lit again), so a client sees its own read timeout
  (``urllib3.exceptions.ReadTimeoutError``/``MaxRetryError`` for the official client; without a
  client timeout the call blocks, as against a black-holed apiserver). If the cluster is lit again
  while a request is held, the request is then served normally. ``dark_mode="reset"`` aborts the
  TCP connection without a response, which clients see as a connection error
  (``ProtocolError``/``RemoteDisconnected``, after their own retries); open watch streams are
  cut the same way when their next event or bookmark is due. Dark applies to every
  request of the cluster regardless of the filters below.
* ``latency_seconds`` (+ uniform ``latency_jitter_seconds``): added before the request is served.
* ``error_rate_429``: answer ``429 TooManyRequests`` with a ``Retry-After: <retry_after_seconds>``
  header and ``details.retryAfterSeconds``.
* ``error_rate_500``: answer ``500 InternalError``.

Latency and error faults apply only to requests matching ``verbs`` and ``resources`` (empty means
all). One random draw per matching request decides 429 vs 500 vs pass, from a ``random.Random``
seeded with ``seed``; replacing or updating the config re-seeds it, so a given config and request
sequence always produce the same faults.

Workload-level faults (``never_ready``, ``crash_after_ready_seconds``, ``crash_after_ready``, and
for download Jobs ``download_mib_per_second``, ``fail_downloads``, ``download_error``) are carried
here for the workload simulator to read; the API server ignores them.

Per-image faults (``image_faults``: an fnmatch glob over container image references -> an
:class:`ImageFault`) make every engine started from a matching image misbehave the same way,
whatever deployment runs it, so a user can ``apply`` a deployment with a bad image and watch:
``reject_args`` (the engine exits at start with argparse's error), ``crash_after_seconds`` (it
crashes that long after each start; minutes make a slow crasher), ``ttft_factor`` (its time to
first token is that many times the engine's), ``tpot_factor`` (the time between its output
tokens is that many times the engine's), ``error_rate_5xx`` (that share of its completions
answer 500) and ``pull_error`` (the image cannot be pulled: the kubelet alternates
``ErrImagePull`` and ``ImagePullBackOff`` with its growing back-off, in containerd's words for a
missing image, a registry refusing the credentials, a rate limit or a registry that does not
answer). The kubelet reads the first two when a container starts and the pull error when a pod
starts; the serving plane reads the error rate and the two factors on every request, so
clearing them heals running engines.

``deny_access`` makes ``SelfSubjectAccessReview`` (``kubectl auth can-i``) answer "no" for the
matching ``"VERB RESOURCE"`` globs (``"delete pods"``, ``"* secrets"``, ``"create
deployments.apps"``), for tests of a client's RBAC checks; the requests themselves still succeed.

Admin routes are never faulted: the middleware only acts where the resolver returns a target.
"""

from __future__ import annotations

import asyncio
import fnmatch
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import web
from aiohttp.typedefs import Middleware
from pydantic import BaseModel, ConfigDict, Field, model_validator

from modelfleet.sim.apiserver import status_errors
from modelfleet.sim.apiserver.patch_formats import merge_patch
from modelfleet.sim.apiserver.responses import error_response

__all__ = [
    "DarkMode",
    "FaultConfig",
    "FaultInjector",
    "FaultStats",
    "FaultTarget",
    "ImageFault",
    "Verb",
    "fault_middleware",
]

Verb = Literal[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "apply",
    "delete",
    "deletecollection",
    "discovery",
]
DarkMode = Literal["hang", "reset"]


PullError = Literal["not-found", "unauthorized", "rate-limited", "timeout"]


class ImageFault(BaseModel):
    """How an engine started from a matching image misbehaves."""

    model_config = ConfigDict(extra="forbid")

    # Flags (fnmatch globs over the ``--flag`` part of each argument, e.g. "--enable-foo" or
    # "*" for any) the engine does not know: it exits with code 2 at start, never Ready.
    reject_args: list[str] = Field(default_factory=list)
    # Seconds after each start (Ready) at which the engine crashes; it restarts with the
    # kubelet's back-off, serves again and crashes again. Minutes make a slow crasher.
    crash_after_seconds: float | None = Field(default=None, ge=0.0)
    # The share of completion requests answered ``500 InternalServerError``.
    error_rate_5xx: float = Field(default=0.0, ge=0.0, le=1.0)
    # Every completion's time to first token is this many times the engine's (a slow image:
    # a regression in prefill); its TTFT histogram shows it.
    ttft_factor: float = Field(default=1.0, ge=1.0, le=10_000.0)
    # The image cannot be pulled: not in the registry, refused to the node's credentials,
    # rate-limited (429 toomanyrequests) or the registry does not answer (i/o timeout). The
    # first two never heal by themselves; the last two do once the registry recovers.
    pull_error: PullError | None = None
    # The time between a completion's output tokens is this many times the engine's (a
    # regression in decoding); its time-per-output-token histogram shows it.
    tpot_factor: float = Field(default=1.0, ge=1.0, le=10_000.0)


class FaultConfig(BaseModel):
    """Faults of one cluster. Send it (or a partial dict) to the admin endpoint to change it."""

    model_config = ConfigDict(extra="forbid")

    seed: int = 0
    error_rate_500: float = Field(default=0.0, ge=0.0, le=1.0)
    error_rate_429: float = Field(default=0.0, ge=0.0, le=1.0)
    retry_after_seconds: int = Field(default=1, ge=0)
    latency_seconds: float = Field(default=0.0, ge=0.0)
    latency_jitter_seconds: float = Field(default=0.0, ge=0.0)
    dark: bool = False
    dark_mode: DarkMode = "hang"
    # Filters for latency and error faults; empty means every verb / resource. Resources are
    # fnmatch globs over "plural", "plural.group" and "plural/subresource" (e.g. "pods",
    # "leaderworkersets.*", "*/status").
    verbs: list[Verb] = Field(default_factory=list)
    resources: list[str] = Field(default_factory=list)
    # Workload-level faults, read by the workload simulator (names are fnmatch globs over
    # workload names, or "namespace/name").
    never_ready: list[str] = Field(default_factory=list)
    crash_after_ready_seconds: float | None = Field(default=None, ge=0.0)
    crash_after_ready: list[str] = Field(default_factory=lambda: ["*"])
    # Access reviews answered "denied": "VERB RESOURCE" fnmatch globs (RESOURCE as for resources).
    deny_access: list[str] = Field(default_factory=list)
    # Downloads (Job pods that stage model weights): the cluster's download bandwidth, and Jobs
    # (fnmatch globs over Job names or "namespace/name") whose pods fail half-way with
    # ``download_error`` ("auth": 401 from the hub, "network": connection reset by peer).
    download_mib_per_second: float = Field(default=1024.0, gt=0.0)
    fail_downloads: list[str] = Field(default_factory=list)
    download_error: Literal["auth", "network"] = "network"
    # Engine faults by image: fnmatch globs over container image references ("repo:tag"); the
    # first matching glob (in the order given) applies.
    image_faults: dict[str, ImageFault] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _rates_fit(self) -> FaultConfig:
        if self.error_rate_500 + self.error_rate_429 > 1.0 + 1e-9:
            raise ValueError("error_rate_500 + error_rate_429 must not exceed 1")
        return self

    def applies_to(self, verb: str, resource: str) -> bool:
        if self.verbs and verb not in self.verbs:
            return False
        if not self.resources:
            return True
        names = _resource_names(resource)
        return any(fnmatch.fnmatchcase(n, pat) for pat in self.resources for n in names)

    def access_denied(self, verb: str, resource: str) -> str | None:
        """The ``deny_access`` rule that denies ``verb`` on ``resource``, or None."""
        names = _resource_names(resource)
        for rule in self.deny_access:
            verb_glob, _, resource_glob = rule.strip().partition(" ")
            resource_glob = resource_glob.strip() or "*"
            if fnmatch.fnmatchcase(verb, verb_glob) and any(
                fnmatch.fnmatchcase(n, resource_glob) for n in names
            ):
                return rule
        return None

    def workload_never_ready(self, name: str, namespace: str = "") -> bool:
        return _glob_any(self.never_ready, name, namespace)

    def download_fails(self, job: str, namespace: str = "") -> bool:
        return _glob_any(self.fail_downloads, job, namespace)

    def image_fault(self, image: str) -> ImageFault | None:
        """The fault of engines started from ``image``, or None."""
        for pattern, fault in self.image_faults.items():
            if fnmatch.fnmatchcase(image, pattern):
                return fault
        return None

    def workload_crashes(self, name: str, namespace: str = "") -> bool:
        return self.crash_after_ready_seconds is not None and _glob_any(
            self.crash_after_ready, name, namespace
        )


def _glob_any(patterns: list[str], name: str, namespace: str) -> bool:
    qualified = f"{namespace}/{name}" if namespace else name
    return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(qualified, p) for p in patterns)


def _resource_names(resource: str) -> list[str]:
    """``resource`` is "plural[.group][/subresource]"; match on each form."""
    base, _, sub = resource.partition("/")
    plural = base.split(".", 1)[0]
    names = [base, plural]
    if sub:
        names += [resource, f"{plural}/{sub}"]
    return names


class FaultStats(BaseModel):
    """Counters kept by the server for one cluster (exposed at ``/_admin/.../stats``)."""

    requests: int = 0
    by_verb: dict[str, int] = Field(default_factory=dict)
    served: int = 0
    injected_500: int = 0
    injected_429: int = 0
    delayed: int = 0
    injected_latency_seconds: float = 0.0
    dark_held: int = 0
    dark_reset: int = 0
    # Time from the middleware receiving a request to the handler returning, as measured by the
    # server's own monotonic clock (watch streams excluded: they last as long as the watch).
    request_seconds_total: float = 0.0
    request_seconds_max: float = 0.0


@dataclass(frozen=True)
class FaultTarget:
    """What the middleware needs to know about a request to a cluster route."""

    injector: FaultInjector
    verb: str
    resource: str


class FaultInjector:
    """Live fault configuration, RNG and counters of one cluster."""

    def __init__(self, config: FaultConfig | None = None) -> None:
        self._config = config or FaultConfig()
        self._rng = random.Random(self._config.seed)
        self.stats = FaultStats()
        self._stopping = False
        self._waiters: set[asyncio.Future[None]] = set()
        self._held_watchers: list[tuple[int, asyncio.Future[None]]] = []

    @property
    def config(self) -> FaultConfig:
        return self._config

    def set_config(self, config: FaultConfig | Mapping[str, Any]) -> FaultConfig:
        """Replace the whole config (missing fields take defaults); re-seeds the RNG."""
        cfg = config if isinstance(config, FaultConfig) else FaultConfig.model_validate(config)
        self._config = cfg
        self._rng = random.Random(cfg.seed)
        if not cfg.dark:
            self._wake_all()
        return cfg

    def update_config(self, changes: Mapping[str, Any]) -> FaultConfig:
        """JSON-merge ``changes`` into the current config; re-seeds the RNG."""
        merged = merge_patch(self._config.model_dump(mode="json"), dict(changes))
        return self.set_config(FaultConfig.model_validate(merged))

    def reset_stats(self) -> None:
        self.stats = FaultStats()

    def stop(self) -> None:
        """Release held requests for server shutdown (they then get their connection reset)."""
        self._stopping = True
        self._wake_all()

    def _wake_all(self) -> None:
        for fut in list(self._waiters):
            if not fut.done():
                fut.set_result(None)
        self._waiters.clear()

    @property
    def held(self) -> int:
        """Requests currently held by a dark cluster."""
        return len(self._waiters)

    async def wait_held(self, count: int = 1) -> None:
        """Return once at least ``count`` requests are being held by the dark cluster."""
        if self.held >= count:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._held_watchers.append((count, fut))
        await fut

    def _notify_held(self) -> None:
        for entry in list(self._held_watchers):
            count, fut = entry
            if fut.done():
                self._held_watchers.remove(entry)
            elif self.held >= count:
                fut.set_result(None)
                self._held_watchers.remove(entry)

    async def _hold(self) -> bool:
        """Wait while dark; True if the request may proceed, False if the server is stopping."""
        loop = asyncio.get_running_loop()
        while self._config.dark and not self._stopping:
            fut: asyncio.Future[None] = loop.create_future()
            self._waiters.add(fut)
            self._notify_held()
            try:
                await fut
            finally:
                self._waiters.discard(fut)
        return not self._stopping

    async def dark_gate(self, request: web.Request) -> bool:
        """Apply ``dark`` to a request or an open watch stream.

        Returns True at once when the cluster is lit, and after the hold when a held request may
        proceed (the cluster was lit again). Returns False after aborting the connection (reset
        mode, or server shutdown while held); the caller must then stop.
        """
        if not self._config.dark:
            return True
        if self._config.dark_mode == "reset":
            self.stats.dark_reset += 1
            _abort(request)
            return False
        self.stats.dark_held += 1
        if await self._hold():
            return True
        _abort(request)
        return False

    def draw(self, verb: str, resource: str) -> tuple[float, int]:
        """(latency seconds, error code or 0) for one request; consumes the RNG."""
        cfg = self._config
        if not cfg.applies_to(verb, resource):
            return 0.0, 0
        delay = cfg.latency_seconds
        if cfg.latency_jitter_seconds:
            delay += self._rng.uniform(0.0, cfg.latency_jitter_seconds)
        code = 0
        if cfg.error_rate_429 or cfg.error_rate_500:
            r = self._rng.random()
            if r < cfg.error_rate_429:
                code = 429
            elif r < cfg.error_rate_429 + cfg.error_rate_500:
                code = 500
        return delay, code


def _abort(request: web.Request) -> None:
    transport = request.transport
    if transport is not None:
        transport.abort()


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def fault_middleware(
    resolve: Callable[[web.Request], FaultTarget | None],
) -> Middleware:
    """Middleware applying faults to requests for which ``resolve`` returns a target."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        target = resolve(request)
        if target is None:
            return await handler(request)
        inj = target.injector
        stats = inj.stats
        started = time.monotonic()
        stats.requests += 1
        stats.by_verb[target.verb] = stats.by_verb.get(target.verb, 0) + 1
        cfg = inj.config
        if cfg.dark and not await inj.dark_gate(request):
            raise web.HTTPServiceUnavailable()  # never reaches the client: the socket is gone
        delay, code = inj.draw(target.verb, target.resource)
        if delay > 0:
            stats.delayed += 1
            stats.injected_latency_seconds += delay
            await asyncio.sleep(delay)
        if code == 429:
            stats.injected_429 += 1
            response: web.StreamResponse = error_response(
                status_errors.too_many_requests(inj.config.retry_after_seconds)
            )
        elif code == 500:
            stats.injected_500 += 1
            response = error_response(status_errors.internal_error("injected fault"))
        else:
            stats.served += 1
            response = await handler(request)
        if target.verb != "watch":
            elapsed = time.monotonic() - started
            stats.request_seconds_total += elapsed
            stats.request_seconds_max = max(stats.request_seconds_max, elapsed)
        return response

    return middleware

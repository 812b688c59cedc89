"""Which member of an engine does what. An engine is either one Standalone member or a Leader
plus a Worker gang (``api.rules`` enforces that); the renderer only ever asks these questions.
Pure.
"""

from __future__ import annotations

from modelfleet.api.deployments import PlacedEngine, PlacedMember, Role


class RenderError(ValueError):
    """The replica cannot be rendered; ``api.rules`` should have rejected it earlier."""


def _member(engine: PlacedEngine, role: Role) -> PlacedMember | None:
    return next((m for m in engine.members if m.role is role), None)


def serving_member(engine: PlacedEngine) -> PlacedMember:
    """The member whose pods receive traffic: the Standalone member, or the gang's Leader."""
    member = _member(engine, Role.LEADER) or _member(engine, Role.STANDALONE)
    if member is None:
        raise RenderError(f"engine {engine.name!r} has neither a Standalone nor a Leader member")
    return member


def worker_member(engine: PlacedEngine) -> PlacedMember:
    member = _member(engine, Role.WORKER)
    if member is None:
        raise RenderError(f"gang engine {engine.name!r} has no Worker member")
    return member


def gang_size(engine: PlacedEngine) -> int:
    """Pods per gang: the leader plus one per worker node (one worker when unspecified)."""
    worker = worker_member(engine).worker
    return 1 + (worker.nodes if worker is not None else 1)

"""``describe`` of a deployment lists its borrowed replicas (issue 25, item 1): where each runs
and what was full at home, and says they return home when room appears there."""

from __future__ import annotations

from modelfleet.cli.describers import _deployment
from modelfleet.cli.output import console
from modelfleet.cli.targets import Namespace
from modelfleet.contracts.status import (
    DeploymentStatus,
    ReplicaPhase,
    ReplicaStatus,
    ReplicaStep,
)
from modelfleet.worker.settings import TemporalSettings

FULL = "pool 'gpu-l4' has 0 free nodes, needs 1 on l4-dev"


def _status(*replicas: ReplicaStatus) -> DeploymentStatus:
    return DeploymentStatus(
        namespace="ml",
        name="chat",
        generation=2,
        desired=2,
        scheduled=2,
        ready=2,
        updated=2,
        phase="Ready",
        replicas=list(replicas),
    )


def _replica(name: str, cluster: str, borrowed: str = "") -> ReplicaStatus:
    return ReplicaStatus(
        name=name,
        cluster=cluster,
        index=0,
        phase=ReplicaPhase.READY,
        step=ReplicaStep.SERVING,
        borrowed=borrowed,
    )


def _described(status: DeploymentStatus) -> str:
    with console.capture() as captured:
        _deployment(TemporalSettings(), Namespace("ml", "-n"), "chat", status, [])
    return captured.get()


def test_borrowed_replicas_are_listed_with_why() -> None:
    out = _described(_status(_replica("chat-a", "l4-dev"), _replica("chat-b", "h100-east", FULL)))
    assert "Borrowed" in out
    assert f"chat-b on h100-east: {FULL}" in out
    assert "chat-a on" not in out


def test_no_borrowed_section_when_every_replica_is_home() -> None:
    assert "Borrowed" not in _described(_status(_replica("chat-a", "l4-dev")))

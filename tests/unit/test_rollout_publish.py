"""What the deployment workflow publishes besides its status (``deployment.report``): the
memo's held-back reason, only while the spec's own template is the one held back, and the UI's
current details."""

from __future__ import annotations

from rollout_builders import spec, state_with, status

from modelfleet.deployment import decisions as rollout
from modelfleet.deployment.decisions import template_hash

NEW = spec(2, image="vllm:2")


def test_the_held_back_reason_is_published_while_the_spec_template_is_held() -> None:
    why = "rolled back to the last good template: crash-looping 30 s after Ready"
    state = state_with(NEW, held=template_hash(NEW), held_reason=why)
    assert rollout.held_back(state) == why


def test_a_reason_left_from_an_older_template_is_not_published() -> None:
    older = spec(2, image="vllm:1")
    state = state_with(NEW, held=template_hash(older), held_reason="rolled back: old news")
    assert rollout.held_back(state) == ""


def test_details_give_phase_ready_count_and_summary() -> None:
    state = state_with(NEW, status(NEW, "r-0", "east"), summary="rollout blocked")
    shown = rollout.details(rollout.report(state))
    assert shown.startswith(f"**{rollout.report(state).phase}** · 1/2 ready")
    assert shown.endswith("\n\nrollout blocked")

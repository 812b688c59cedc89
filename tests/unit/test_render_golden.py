"""Golden manifests for the reference replicas, and byte-for-byte determinism."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from render_factories import GOLDEN_CASES
from render_helpers import GOLDEN_DIR, assert_golden, render, to_yaml

from modelfleet.api.deployments import ModelReplica


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_matches_golden(case: str) -> None:
    assert_golden(case, to_yaml(render(GOLDEN_CASES[case]())))


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_rendering_is_byte_identical_across_runs(case: str) -> None:
    build: Callable[[], ModelReplica] = GOLDEN_CASES[case]
    first = to_yaml(render(build()))
    # A replica that went over the wire (dumped and re-read) renders the same bytes.
    round_tripped = ModelReplica.model_validate(build().to_wire())
    assert to_yaml(render(round_tripped)) == first
    assert to_yaml(render(build())) == first


def test_every_golden_file_has_a_case() -> None:
    """A renamed case must not leave a stale golden file behind."""
    assert {p.stem for p in GOLDEN_DIR.glob("*.yaml")} == set(GOLDEN_CASES)


def test_user_label_order_does_not_change_the_output() -> None:
    from render_factories import engine, gpus, member, replica

    def build(labels: dict[str, str]) -> str:
        return to_yaml(render(replica(engine("main", member(requests=[gpus(1)], labels=labels)))))

    assert build({"a": "1", "b": "2", "team": "x"}) == build({"team": "x", "b": "2", "a": "1"})

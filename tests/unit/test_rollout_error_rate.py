"""A replacement proves itself by its engines' answers too (issue 27, item 3): once Ready for
minReadySeconds, what its engines answered meanwhile (``engine.errors``) is read, and more than
``maxErrorPercent`` 5xx of at least ``ERROR_SAMPLE`` requests rolls the deployment back with the
figures; too few requests, unreadable metrics or a check turned off let the roll go on."""

from __future__ import annotations

from rollout_builders import Driver, fleet_with, serving, spec, state_with, status

from modelfleet.deployment import decisions as rollout
from modelfleet.deployment.decisions import DeploymentState
from modelfleet.deployment.failures import ERROR_SAMPLE

OLD = spec(2, image="vllm:1")
NEW = spec(2, image="vllm:2")


def running_on(md: object, *clusters: str) -> DeploymentState:
    return state_with(md, *(status(md, f"{c}-old", c) for c in clusters))  # type: ignore[arg-type]


def _roll(new: object = NEW, **answers: tuple[int, int]) -> Driver:
    state = running_on(OLD, "east", "west").model_copy(update={"dirty": False})
    state = state.model_copy(update={"last_good": OLD})
    driver = Driver(
        rollout.applied(state, new),  # type: ignore[arg-type]
        fleet_with(state, east=1, west=1, north=1),
        answers={image.replace("_", ":"): figure for image, figure in answers.items()},
    )
    assert driver.run() == "rest"
    return driver


def test_a_replacement_answering_5xx_while_proving_itself_is_rolled_back() -> None:
    driver = _roll(vllm_2=(60, 12))
    assert "errors r01-north: 12/60" in driver.log
    # The old replicas were not touched by the roll: it stopped at its first replacement.
    roll = driver.log[: driver.log.index("end")]
    assert not any(line.startswith("teardown") for line in roll), roll
    state = driver.state
    assert state.held == rollout.template_hash(NEW)
    assert "its engines answered 12 of 60 requests with 5xx (20%, above maxErrorPercent 5%)" in (
        state.held_reason
    )
    assert state.revisions[-1].outcome.startswith("rolled back:")
    assert "12 of 60" in state.revisions[-1].outcome
    assert set(serving(state).values()) == {rollout.template_hash(OLD)}
    assert any(
        "r01-north proved itself for minReadySeconds: 12 of 60" in e.message for e in state.log
    )


def test_a_clean_or_quiet_replacement_goes_on() -> None:
    for figure in [(200, 10), (ERROR_SAMPLE - 1, ERROR_SAMPLE - 1), (0, 0)]:
        driver = _roll(vllm_2=figure)
        assert not driver.state.held, (figure, driver.state.held_reason)
        assert set(serving(driver.state).values()) == {rollout.template_hash(NEW)}, figure


def test_the_check_turned_off_reads_nothing() -> None:
    driver = _roll(spec(2, image="vllm:2", max_error_percent=100), vllm_2=(60, 60))
    assert not any(line.startswith("errors") for line in driver.log)
    assert set(serving(driver.state).values()) == {
        rollout.template_hash(spec(2, image="vllm:2", max_error_percent=100))
    }


def test_a_scale_up_of_the_template_it_runs_is_not_judged() -> None:
    one = spec(1, image="vllm:1")
    state = running_on(one, "east").model_copy(update={"last_good": one, "dirty": False})
    driver = Driver(
        rollout.scaled(state, 2), fleet_with(state, east=1, west=1), answers={"vllm:1": (60, 60)}
    )
    assert driver.run() == "rest"
    assert not any(line.startswith("errors") for line in driver.log)
    assert len(serving(driver.state)) == 2

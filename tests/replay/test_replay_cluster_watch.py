"""The per-cluster replica watch's goldens (``record_cluster_watch_history.py``) tell the story
they were recorded for; ``test_replay.py`` replays them with every other golden."""

from __future__ import annotations

from test_replay import activities, commands, holds_patch, load, signals

from modelfleet.contracts.activity_names import KUBE_CHECK_READY
from modelfleet.replica.serving import PATCH_VERIFY_BASELINE


def test_the_watched_replica_golden_registers_repairs_on_news_and_never_polls() -> None:
    history = load("watched-replica.json")
    steps = commands(history)
    assert KUBE_CHECK_READY not in activities(history)
    assert "replica_health" in signals(history)
    # Registered at Ready, told of the missing Deployment: compared, re-applied, registered
    # again; unregistered before the teardown deletes anything.
    first = steps.index("watch_replica")
    assert steps[first + 1 : first + 3] == ["kube.drift", "kube.apply"]
    assert steps.count("watch_replica") == 2
    # Told healthy again after the repair: Ready (the deployment told) and published again.
    again = steps.index("watch_replica", first + 1)
    assert steps[again + 1 : again + 3] == ["replica_progress", "endpoints.publish_replica"]
    assert steps.index("unwatch_replica") < steps.index("kube.delete")


def test_the_verified_golden_compares_once_after_each_registration_is_acknowledged() -> None:
    history = load("verified-watched-replica.json")
    assert holds_patch(history, PATCH_VERIFY_BASELINE)
    assert not holds_patch(load("watched-replica.json"), PATCH_VERIFY_BASELINE)
    steps = commands(history)
    first = steps.index("watch_replica")
    # Acknowledged: compared, nothing found. Told of the missing Deployment: compared and
    # re-applied, registered again.
    assert steps[first + 1 : first + 4] == ["kube.drift", "kube.drift", "kube.apply"]
    again = steps.index("watch_replica", first + 1)
    # Told healthy after the repair: Ready, published, and that baseline compared too.
    assert steps[again + 1 : again + 4] == [
        "replica_progress",
        "endpoints.publish_replica",
        "kube.drift",
    ]
    assert steps.count("kube.drift") == 3
    assert steps.index("unwatch_replica") < steps.index("kube.delete")

"""The Fleet's change log (``fleet.changes``): what a worker's copy at version V is told changed,
bounded by its cap, and when it must read the fleet whole instead."""

from __future__ import annotations

from modelfleet.fleet.changes import ChangeLog


def test_since_lists_each_changed_key_once_at_its_latest_version() -> None:
    log = ChangeLog(start=10)
    log.replicas(11, ["ns/a", "ns/b"])
    log.cluster(12, "east")
    log.replicas(13, ["ns/a"])
    log.catalog(14)
    since = log.since(11, now=14, limit=100)
    assert not since.too_old
    assert since.replicas == ("ns/a",)  # ns/b changed at 11: the copy has it
    assert since.clusters == ("east",)
    assert since.catalog
    nothing = log.since(14, now=14, limit=100)
    assert (nothing.too_old, nothing.replicas, nothing.clusters, nothing.catalog) == (
        False,
        (),
        (),
        False,
    )


def test_a_copy_from_before_the_run_beyond_the_cap_or_too_far_behind_reads_whole() -> None:
    log = ChangeLog(start=10, cap=3)
    assert log.since(9, now=10, limit=100).too_old  # older than the run
    assert log.since(11, now=10, limit=100).too_old  # newer than the Fleet: another history
    for version, key in enumerate(["ns/a", "ns/b", "ns/c", "ns/d"], start=11):
        log.replicas(version, [key])
    # Four keys, cap three: ns/a (version 11) was forgotten, so only copies at 11 or later
    # can be told what changed.
    assert log.floor == 11
    assert log.since(10, now=14, limit=100).too_old
    assert log.since(11, now=14, limit=100).replicas == ("ns/b", "ns/c", "ns/d")
    assert log.since(11, now=14, limit=2).too_old  # more than the answer may list


def test_the_log_stays_bounded_however_many_changes() -> None:
    log = ChangeLog(start=0, cap=50)
    for version in range(1, 10_001):
        log.replicas(version, [f"ns/r{version % 500}"])
        log.cluster(version, f"c{version % 7}")
    assert len(log._keys) <= 50
    assert len(log.touched) == 7
    assert log.since(9_990, now=10_000, limit=100).replicas == tuple(
        sorted(f"ns/r{v % 500}" for v in range(9_991, 10_001))
    )


def test_changed_since_names_the_clusters_whose_record_changed() -> None:
    log = ChangeLog(start=5)
    log.cluster(7, "east")
    log.replicas(8, ["ns/a"])  # a replica placed on west is not a change of west's record
    assert log.changed_since(6, ["east", "west"]) == ["east"]
    assert log.changed_since(7, ["east", "west"]) == []
    # A version from before the run: nothing is known, everything counts as changed.
    assert log.changed_since(4, ["east", "west"]) == ["east", "west"]

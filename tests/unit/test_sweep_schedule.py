"""When a cluster sweeps its orphans (``cluster.sweep_schedule``): on return from a dark spell,
at the next probes while a replica it kept may be on its way out (bounded), and on a resync."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from modelfleet.cluster.sweep_schedule import (
    FOLLOW_UPS,
    SweepKind,
    SweepSchedule,
    still_held,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RESYNC = timedelta(minutes=10)
PROBE = timedelta(seconds=15)


def _back_from_dark() -> SweepSchedule:
    s = SweepSchedule(resync=RESYNC).observe(True, T0)
    s = s.observe(False, T0 + PROBE)
    return s.observe(True, T0 + 2 * PROBE)


def test_still_held_is_what_was_found_and_is_in_the_ledger() -> None:
    found = [("ns", "a"), ("ns", "b"), ("other", "a")]
    assert still_held(found, ["ns/a", "ns/c", "other/b"]) == frozenset({"ns/a"})
    assert still_held([], ["ns/a"]) == frozenset()


def test_no_sweep_while_not_ready_nor_on_the_first_ready_probe() -> None:
    s = SweepSchedule(resync=RESYNC).observe(False, T0)
    assert s.due(T0) is None
    s = s.observe(True, T0 + PROBE)
    assert not s.dark, "never Ready before: nothing moved away while it was dark"
    assert s.due(T0 + PROBE) is None


def test_ready_then_not_ready_then_ready_sweeps_on_return_and_retries_a_failure() -> None:
    s = SweepSchedule(resync=RESYNC).observe(True, T0).observe(False, T0 + PROBE)
    assert s.dark
    assert s.due(T0 + PROBE) is None, "nothing is swept while dark"
    s = s.observe(True, T0 + 2 * PROBE)
    assert s.due(T0 + 2 * PROBE) is SweepKind.RETURN
    s = s.failed(SweepKind.RETURN, T0 + 2 * PROBE)
    assert s.dark
    assert s.observe(True, T0 + 3 * PROBE).due(T0 + 3 * PROBE) is SweepKind.RETURN


def test_a_return_that_kept_held_replicas_follows_up_until_they_are_released() -> None:
    s = _back_from_dark().swept(SweepKind.RETURN, T0, frozenset({"ns/racing", "ns/serving"}))
    assert not s.dark
    now = T0 + PROBE
    assert s.observe(True, now).due(now) is SweepKind.FOLLOW_UP
    # The ledger released the racing replica: swept, and the serving one alone stays suspect.
    s = s.swept(SweepKind.FOLLOW_UP, now, frozenset({"ns/serving"}))
    assert s.suspects == frozenset({"ns/serving"})
    assert s.follow_ups_left == FOLLOW_UPS - 1
    # Once every suspect is gone or released, no more follow-ups.
    s = s.swept(SweepKind.FOLLOW_UP, now + PROBE, frozenset({"ns/other-new"}))
    assert s.suspects == frozenset()
    assert s.due(now + 2 * PROBE) is None


def test_follow_ups_are_bounded_when_the_kept_replicas_are_simply_serving() -> None:
    kept = frozenset({"ns/serving"})
    s = _back_from_dark().swept(SweepKind.RETURN, T0, kept)
    now = T0
    runs = 0
    for _ in range(3 * FOLLOW_UPS):
        now += PROBE
        s = s.observe(True, now)
        kind = s.due(now)
        if kind is None:
            continue
        assert kind is SweepKind.FOLLOW_UP
        runs += 1
        # Failed ones count too: a flaky cluster does not follow up for ever.
        s = s.failed(kind, now) if runs % 2 else s.swept(kind, now, kept)
    assert runs == FOLLOW_UPS


def test_a_return_that_kept_nothing_does_not_follow_up() -> None:
    s = _back_from_dark().swept(SweepKind.RETURN, T0, frozenset())
    assert s.observe(True, T0 + PROBE).due(T0 + PROBE) is None


def test_a_ready_cluster_sweeps_on_the_resync_clock_started_at_its_first_probe() -> None:
    s = SweepSchedule(resync=RESYNC, ready=True).observe(True, T0)
    assert s.due(T0 + RESYNC - PROBE) is None
    assert s.due(T0 + RESYNC) is SweepKind.RESYNC
    s = s.swept(SweepKind.RESYNC, T0 + RESYNC, frozenset({"ns/serving"}))
    assert s.suspects == frozenset(), "a resync keeping serving replicas does not follow up"
    assert s.due(T0 + RESYNC + PROBE) is None
    assert s.due(T0 + 2 * RESYNC) is SweepKind.RESYNC
    # A failed resync waits a period rather than listing the cluster at every probe.
    s = s.failed(SweepKind.RESYNC, T0 + 2 * RESYNC)
    assert s.due(T0 + 2 * RESYNC + PROBE) is None
    assert s.due(T0 + 3 * RESYNC) is SweepKind.RESYNC
    # Not while NotReady, however late.
    assert s.observe(False, T0 + 4 * RESYNC).due(T0 + 4 * RESYNC) is None


def test_a_return_sweep_restarts_the_resync_clock() -> None:
    s = _back_from_dark()
    s = s.swept(SweepKind.RETURN, T0 + RESYNC - PROBE, frozenset())
    assert s.due(T0 + RESYNC) is None
    assert s.due(T0 + 2 * RESYNC - PROBE) is SweepKind.RESYNC

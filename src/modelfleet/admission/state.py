"""Who may roll out now: the pure decisions of the RolloutSlots workflow.

A ModelDeployment that has a rollout to do asks for a slot; at most ``slots`` hold one at a
time, the rest wait in arrival order and are told how many are ahead of them. A holder gives its
slot back when its replicas are no longer starting (or it is deleted). So that a slot is never
lost, three things take it back without the holder: a grant that cannot be delivered (its
workflow has ended), a liveness ping that cannot be delivered (the holder was terminated while
others wait), and the lease (``lease_seconds`` after the grant, a rollout stuck that long no
longer blocks the queue).

Pure: no I/O, no clock (the time is an argument), no Temporal. The functions change the state
they are given in place (the workflow takes thousands of requests in one task: copying a
thousand-entry queue per request would make that task quadratic).

May import: ``contracts.wire``, the standard library and pydantic.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import Field

from modelfleet.contracts.wire import WireModel

DEFAULT_SLOTS = 20
DEFAULT_LEASE_SECONDS = 600
# While some wait, a holder that has held this long is pinged (its grant re-sent): a ping that
# cannot be delivered means its workflow ended without giving the slot back.
PING_AFTER = timedelta(seconds=60)


class SlotSettings(WireModel):
    """The bound, from the worker's tuning (``MODELFLEET_ROLLOUT_SLOTS`` and
    ``MODELFLEET_ROLLOUT_SLOT_LEASE_SECONDS``)."""

    slots: int = Field(default=DEFAULT_SLOTS, ge=1)
    lease_seconds: int = Field(default=DEFAULT_LEASE_SECONDS, ge=1)


class SlotNotice(WireModel):
    """What a deployment is told: its slot is granted, or it waits with ``ahead`` before it."""

    granted: bool
    ahead: int = 0


class Outgoing(WireModel):
    to: str  # the deployment's workflow ID
    notice: SlotNotice


class SlotsState(WireModel):
    """Everything the RolloutSlots workflow knows; its continue-as-new input."""

    settings: SlotSettings = SlotSettings()
    # workflow ID -> when its slot was granted (the lease runs from then)
    holders: dict[str, datetime] = {}
    # workflow ID -> when it asked; dicts keep insertion order, so this is the queue
    queue: dict[str, datetime] = {}
    # holder -> when it was last pinged
    pinged: dict[str, datetime] = {}
    # notices not sent yet, oldest first
    outbox: list[Outgoing] = []
    granted_total: int = 0
    expired_total: int = 0


class SlotsView(WireModel):
    """The ``view`` query: the bound, the holders and the queue in order (for ``describe``)."""

    slots: int
    holders: list[str]
    queue: list[str]


def requested(s: SlotsState, who: str, now: datetime) -> None:
    """``who`` asks for a slot: granted if one is free, else queued (asking again while holding
    or waiting is answered again, never counted twice)."""
    if who in s.holders:
        _tell(s, who, SlotNotice(granted=True))
    elif who in s.queue:
        _tell(s, who, SlotNotice(granted=False, ahead=list(s.queue).index(who)))
    elif len(s.holders) < s.settings.slots and not s.queue:
        _grant(s, who, now)
    else:
        s.queue[who] = now
        _tell(s, who, SlotNotice(granted=False, ahead=len(s.queue) - 1))
        filled(s, now)


def released(s: SlotsState, who: str, now: datetime) -> None:
    """``who`` gives its slot back, or stops waiting; the next in line gets the slot."""
    s.holders.pop(who, None)
    s.pinged.pop(who, None)
    s.queue.pop(who, None)
    filled(s, now)


def undeliverable(s: SlotsState, who: str, now: datetime) -> None:
    """A notice to ``who`` could not be delivered: its workflow has ended, so it holds nothing
    and waits for nothing."""
    s.outbox = [o for o in s.outbox if o.to != who]
    released(s, who, now)


def configured(s: SlotsState, settings: SlotSettings, now: datetime) -> None:
    """New settings: a larger bound grants at once; a smaller one lets holders finish."""
    s.settings = settings
    filled(s, now)


def filled(s: SlotsState, now: datetime) -> None:
    """Grant free slots to the queue's head, in order."""
    while s.queue and len(s.holders) < s.settings.slots:
        who = next(iter(s.queue))
        del s.queue[who]
        _grant(s, who, now)


def expired(s: SlotsState, now: datetime) -> None:
    """Take back slots held past the lease; while some wait, ping holders held a while."""
    lease = timedelta(seconds=s.settings.lease_seconds)
    for who, since in list(s.holders.items()):
        if now - since >= lease:
            del s.holders[who]
            s.pinged.pop(who, None)
            s.expired_total += 1
    filled(s, now)
    if not s.queue:
        return
    for who, since in s.holders.items():
        last = max(since, s.pinged.get(who, since))
        if now - last >= PING_AFTER:
            s.pinged[who] = now
            _tell(s, who, SlotNotice(granted=True))


def next_due(s: SlotsState, now: datetime) -> timedelta | None:
    """How long until ``expired`` has something to do (None: nothing held)."""
    if not s.holders:
        return None
    lease = timedelta(seconds=s.settings.lease_seconds)
    due = min(since + lease for since in s.holders.values())
    if s.queue:
        due = min(
            due,
            *(max(since, s.pinged.get(w, since)) + PING_AFTER for w, since in s.holders.items()),
        )
    return max(due - now, timedelta(milliseconds=1))


def taken(s: SlotsState, count: int) -> list[Outgoing]:
    """The next ``count`` notices to send, removed from the outbox. A deployment told twice in
    one batch gets only the last word."""
    batch, s.outbox = s.outbox[:count], s.outbox[count:]
    last: dict[str, Outgoing] = {}
    for o in batch:
        last.pop(o.to, None)
        last[o.to] = o
    return list(last.values())


def view(s: SlotsState) -> SlotsView:
    return SlotsView(slots=s.settings.slots, holders=sorted(s.holders), queue=list(s.queue))


def _grant(s: SlotsState, who: str, now: datetime) -> None:
    s.holders[who] = now
    s.granted_total += 1
    _tell(s, who, SlotNotice(granted=True))


def _tell(s: SlotsState, who: str, notice: SlotNotice) -> None:
    s.outbox.append(Outgoing(to=who, notice=notice))

"""Endpoint records grouped for the endpoint directory's continue-as-new input.

A replica publishes one record (``activities.serving.publish_replica``): its URL is the
cluster's gateway address plus ``/<namespace>/<replica>/v1``, its rewrite path that path, its
name and replica the replica's name, and its labels those of its deployment and cluster. Of
~360 bytes a record, only the name and the creation time differ between the replicas of one
deployment on one cluster; the rest is said once per group here. At 10,000 endpoints the
records as they were are ~3.6 MB, past Temporal's 2 MiB payload limit, and the directory
could no longer continue-as-new; grouped they are about a tenth of that (``test_endpoint_groups``).

Records that do not follow the pattern (user-authored endpoints for external providers) are
kept whole. ``expand_groups(group_endpoints(rs))`` gives back exactly ``rs``, in key order.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from pydantic import Field

from modelfleet.api.meta import Model
from modelfleet.rendering.front_door import EndpointRecord


class EndpointGroup(Model):
    """Replica endpoints of one namespace that share a gateway, labels and key secret."""

    namespace: str
    # The URL up to the path: ``http://<gateway address>``.
    base: str
    labels: dict[str, str] = Field(default_factory=dict)
    auth_secret: str | None = None
    # Per endpoint: the replica's name and when the directory first recorded it.
    members: list[tuple[str, datetime | None]] = Field(default_factory=list)


def _path(namespace: str, name: str) -> str:
    return f"/{namespace}/{name}/"


def _base(record: EndpointRecord) -> str | None:
    """The gateway part of a replica endpoint's URL, or None when the record is not one."""
    path = _path(record.namespace, record.name)
    if record.replica != record.name or record.rewrite_path != path:
        return None
    tail = f"{path}v1"
    if not record.url.endswith(tail) or len(record.url) == len(tail):
        return None
    return record.url[: -len(tail)]


def group_endpoints(
    records: Iterable[EndpointRecord],
) -> tuple[list[EndpointGroup], list[EndpointRecord]]:
    """The replica endpoints in groups, and the other records whole (both in key order)."""
    groups: dict[tuple[str, str, tuple[tuple[str, str], ...], str | None], EndpointGroup] = {}
    whole: list[EndpointRecord] = []
    for record in sorted(records, key=lambda r: r.key):
        base = _base(record)
        if base is None:
            whole.append(record)
            continue
        labels = tuple(sorted(record.labels.items()))
        key = (record.namespace, base, labels, record.auth_secret)
        group = groups.get(key)
        if group is None:
            group = groups[key] = EndpointGroup(
                namespace=record.namespace,
                base=base,
                labels=dict(labels),
                auth_secret=record.auth_secret,
            )
        group.members.append((record.name, record.created))
    return list(groups.values()), whole


def expand_groups(groups: Iterable[EndpointGroup]) -> list[EndpointRecord]:
    """The records the groups stand for."""
    out = []
    for group in groups:
        for name, created in group.members:
            path = _path(group.namespace, name)
            out.append(
                EndpointRecord(
                    namespace=group.namespace,
                    name=name,
                    labels=dict(group.labels),
                    url=f"{group.base}{path}v1",
                    rewrite_path=path,
                    replica=name,
                    auth_secret=group.auth_secret,
                    created=created,
                )
            )
    return out

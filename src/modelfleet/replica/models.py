"""Whether a replica about to join answers for the model names its services expect: what its
engine's ``GET /v1/models`` lists against what each service's healthy endpoints (in the
entries that select the replica) all serve. A request names a model, and any endpoint of the
route may get it, so the names every endpoint serves are the ones callers can rely on.

Pure.
"""

from __future__ import annotations

from modelfleet.contracts.serving_payloads import ServiceModels


def expected_models(service: ServiceModels) -> set[str]:
    """The names every endpoint of the service serves (none when it has no endpoint yet, or
    its endpoints share no name: then there is nothing one replica could be held to)."""
    lists = [set(models) for models in service.served if models]
    if not lists:
        return set()
    common = set(lists[0])
    for models in lists[1:]:
        common &= models
    return common


def model_mismatch(served: list[str], expected: list[ServiceModels]) -> str | None:
    """Why the replica must not join (None: it may): the first service expecting a name it
    does not serve."""
    have = set(served)
    for service in sorted(expected, key=lambda s: s.service):
        want = expected_models(service)
        missing = sorted(want - have)
        if missing:
            lists = ", ".join(sorted(have)) or "no model"
            return (
                f"model mismatch: its engine serves {lists} (GET /v1/models), but service "
                f"{service.service} expects {', '.join(missing)} (what its endpoints serve)"
            )
    return None

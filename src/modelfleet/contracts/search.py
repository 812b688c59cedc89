"""Custom search attributes that make every modelfleet entity findable in the Temporal UI and by
``modelfleet get``. They must be registered on the server before use (``modelfleet dev`` does)."""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

KIND = SearchAttributeKey.for_keyword("ModelfleetKind")
NAMESPACE = SearchAttributeKey.for_keyword("ModelfleetNamespace")
NAME = SearchAttributeKey.for_keyword("ModelfleetName")
CLUSTERS = SearchAttributeKey.for_keyword_list("ModelfleetClusters")
PHASE = SearchAttributeKey.for_keyword("ModelfleetPhase")
# A ModelDeployment's replica counts and creation time (kept across continue-as-new), so that
# ``get deployments`` lists its rows from visibility alone, with no query to a busy workflow.
READY = SearchAttributeKey.for_int("ModelfleetReady")
DESIRED = SearchAttributeKey.for_int("ModelfleetDesired")
UPDATED = SearchAttributeKey.for_int("ModelfleetUpdated")
CREATED = SearchAttributeKey.for_datetime("ModelfleetCreated")

ALL = (KIND, NAMESPACE, NAME, CLUSTERS, PHASE, READY, DESIRED, UPDATED, CREATED)

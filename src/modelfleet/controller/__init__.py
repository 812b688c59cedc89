"""The Kubernetes controller: modelfleet's kinds as a Kubernetes API on a management cluster.

It lists and watches the custom resources there, hands each object's spec to the same workflows
``modelfleet apply`` uses (through ``modelfleet.applying``: update-with-start, idempotent),
tears down through a finalizer, and writes status back at a bounded rate. One replica leads
(a ``coordination.k8s.io/v1`` Lease); the others wait.

This package may touch: the management cluster through ``adapters.management``, the Temporal
client through ``applying`` and workflow queries, asyncio. It may not: print (it logs), parse
command lines (no typer, rich or cli), or import the Kubernetes SDK itself. What to do for an
object and what its status says are pure functions (``decide``, ``conditions``, ``election``).
"""

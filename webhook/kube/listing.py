"""A fresh, paginated list of one kind straight from the apiserver (never the informer cache).

The sidecar decides what may be reclaimed on the apiserver's current truth, not on what a
watch last delivered: a watch that was cut, or is behind, would hide an entry created in the
meantime, and that entry's artifact would look unreferenced. This is that read, paginated as
the informer's reflector lists (``limit`` and ``continue``), so a large catalog costs bounded
pages and one consistent snapshot (every page is served at the first page's resourceVersion).

Any failure raises (a :class:`~webhook.kube.client.ApiError`, ``Gone`` for an expired continue
token, or whatever the transport raised): a partial list is never returned, since a page that
is missing could hold the only claim on an artifact.
"""

from __future__ import annotations

from typing import Any

from policies.model import GroupKind, Obj
from webhook.kube.client import Kube

PAGE_SIZE = 500
"""Objects per page, as the informer cache lists."""


def list_all(kube: Kube, kind: GroupKind, *, page_size: int = PAGE_SIZE, timeout: float | None = None) -> list[Obj]:
    """Every object of ``kind`` in all namespaces, each with ``apiVersion`` and ``kind`` set."""
    resource = kube.resource(kind)
    items: list[Obj] = []
    token = ""
    while True:
        query = [("limit", str(page_size))] + ([("continue", token)] if token else [])
        page: dict[str, Any] = kube.list(kind, query=query, timeout=timeout)
        for item in page.get("items") or ():
            item.setdefault("apiVersion", resource.api_version)
            item.setdefault("kind", kind.kind)
            items.append(item)
        token = str((page.get("metadata") or {}).get("continue") or "")
        if not token:
            return items

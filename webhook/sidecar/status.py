"""Writing a ComponentVersion's status through the main resource.

ComponentVersion has no status subresource (reference: solar-catalog-api.md, section 1), so
``Writer.patch_status`` (which PATCHes ``/status``) cannot be used. The patch is a merge patch of
only what differs, carrying the resourceVersion the decision was computed from: if the object
moved on (someone else wrote, or the cache was behind our own last write) the apiserver answers
409 and the entry is decided again on the next pass from fresh state, never from stale state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.model import GroupKind, Obj
from webhook.kube.client import MERGE_PATCH, Kube
from webhook.kube.writes import merge_patch


def patch_status_main(kube: Kube, kind: GroupKind, obj: Obj, desired: Mapping[str, Any], timeout: float) -> Obj | None:
    """PATCH ``{"metadata": {"resourceVersion"}, "status": <diff>}``; None (no request) when nothing differs.

    Raises ``Conflict`` when ``obj`` is stale and ``NotFound`` when it is gone.
    """
    diff = merge_patch(obj.get("status") or {}, dict(desired))
    if not diff:
        return None
    meta = obj.get("metadata") or {}
    body = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": diff}
    return kube.patch(kind, str(meta["name"]), str(meta.get("namespace", "")), body, MERGE_PATCH, timeout=timeout)

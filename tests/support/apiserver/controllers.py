"""The two kube-controller-manager loops the project depends on: garbage collector and namespace controller.

They run in one background thread, woken by every store change, and act through the same API verbs
as any client, under their real identities, so admission webhooks see exactly the requests a cluster
sends (and may refuse them, in which case the work is retried on the next pass).

Garbage collector (ownerReferences): a dependent whose owners are all gone is deleted in the
background; dangling references to some owners are removed; an owner deleted with Foreground waits
(finalizer `foregroundDeletion`) until its dependents are gone; with Orphan (finalizer `orphan`) its
dependents lose their reference to it and the owner goes.
Namespace controller: a Terminating namespace has all its content deleted, and goes when empty.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from tests.support.apiserver.errors import ApiError
from tests.support.apiserver.operations import FOREGROUND, ORPHAN, Api, Target
from tests.support.apiserver.resources import NAMESPACES
from tests.support.apiserver.store import Event, ObjectKey

GC_USER = "system:serviceaccount:kube-system:generic-garbage-collector"
NAMESPACE_USER = "system:serviceaccount:kube-system:namespace-controller"
RETRY_SECONDS = 0.2


def service_account_user(username: str, groups: tuple[str, ...] = ()) -> dict[str, Any]:
    """userInfo as the token authenticator fills it for a service account."""
    all_groups = list(groups)
    if username.startswith("system:serviceaccount:"):
        namespace = username.split(":")[2]
        all_groups += ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    return {"username": username, "uid": "", "groups": [*all_groups, "system:authenticated"]}


def _relevant(event: Event) -> bool:
    """Only deletions, owned objects, objects being deleted and namespaces can give the controllers work."""
    before = (event.previous or {}).get("metadata", {})
    metadata = event.object["metadata"]
    return (
        event.type == "DELETED"
        or event.key[:2] == NAMESPACES.key
        or bool(metadata.get("ownerReferences") or metadata.get("deletionTimestamp") or before.get("ownerReferences"))
    )


class Controllers:
    """Garbage collector and namespace controller over one `Api`."""

    def __init__(self, api: Api, stopping: threading.Event) -> None:
        self._api = api
        self._stopping = stopping
        self._thread = threading.Thread(target=self._run, name="apiserver-double-controllers", daemon=True)
        self.errors: list[str] = []  # refusals and failures, newest last, for test diagnostics
        self._pending = True

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        seen = 0
        while not self._stopping.is_set():
            with self._api.store.changed:
                if self._api.store.resource_version == seen:
                    self._api.store.changed.wait(RETRY_SECONDS)
                events = self._api.store.events_after(seen)
                seen = self._api.store.resource_version
            if events is not None and not any(_relevant(e) for e in events) and not self._pending:
                continue
            try:
                self._pending = False
                self.reconcile()
            except Exception as exc:  # keep the loop alive; the failure is recorded for the test to see
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def reconcile(self) -> None:
        """One pass of both controllers over a snapshot of the store."""
        snapshot = self._api.store.snapshot()
        by_uid = {obj["metadata"]["uid"]: obj for obj in snapshot.values()}
        for key, obj in snapshot.items():
            self._collect(key, obj, by_uid, snapshot)
        for key, obj in snapshot.items():
            if key[:2] == NAMESPACES.key and obj["metadata"].get("deletionTimestamp"):
                self._finish_namespace(key, obj, snapshot)

    def _target(self, key: ObjectKey) -> Target:
        group, plural, namespace, name = key
        resource = self._api.registry.by_key((group, plural))
        return Target(resource, resource.storage_version, namespace, name)

    def _act(self, what: str, action: Callable[..., Any], *args: Any) -> None:
        try:
            action(*args)
        except ApiError as exc:
            self._pending = True  # refused or conflicted: try again on the next pass even if nothing changes
            self.errors.append(f"{what}: {exc.code} {exc.message}")

    def _collect(self, key: ObjectKey, obj: dict[str, Any], by_uid: dict[str, Any], snapshot: dict[Any, Any]) -> None:
        metadata = obj["metadata"]
        gc = service_account_user(GC_USER)
        refs = metadata.get("ownerReferences") or []
        if refs:
            absent = [r for r in refs if r["uid"] not in by_uid]
            orphaning = [
                r for r in refs if ORPHAN in (by_uid.get(r["uid"], {}).get("metadata", {}).get("finalizers") or [])
            ]
            foreground = [
                r for r in refs if FOREGROUND in (by_uid.get(r["uid"], {}).get("metadata", {}).get("finalizers") or [])
            ]
            if orphaning or (absent and len(absent) + len(foreground) < len(refs)):
                dropped = {r["uid"] for r in [*absent, *orphaning]}
                kept = [r for r in refs if r["uid"] not in dropped]
                patch = {"metadata": {"ownerReferences": kept or None, "resourceVersion": metadata["resourceVersion"]}}
                self._act(f"gc unlink {key}", self._merge, key, patch, gc)
            elif len(absent) + len(foreground) == len(refs) and not metadata.get("deletionTimestamp"):
                options = {"preconditions": {"uid": metadata["uid"]}, "propagationPolicy": "Background"}
                self._act(f"gc delete {key}", self._api.delete, self._target(key), options, gc, {})
        finalizers = metadata.get("finalizers") or []
        if metadata.get("deletionTimestamp") and (FOREGROUND in finalizers or ORPHAN in finalizers):
            uid = metadata["uid"]
            dependents = [
                o for o in snapshot.values() if any(r["uid"] == uid for r in o["metadata"].get("ownerReferences") or [])
            ]
            if not dependents:
                remaining = [f for f in finalizers if f not in (FOREGROUND, ORPHAN)]
                patch = {"metadata": {"finalizers": remaining or None, "resourceVersion": metadata["resourceVersion"]}}
                self._act(f"gc finalize {key}", self._merge, key, patch, gc)

    def _merge(self, key: ObjectKey, patch: dict[str, Any], user: dict[str, Any]) -> None:
        body = json.dumps(patch).encode()
        self._api.patch(self._target(key), body, "application/merge-patch+json", user, {})

    def _finish_namespace(self, key: ObjectKey, namespace: dict[str, Any], snapshot: dict[Any, Any]) -> None:
        name = key[3]
        user = service_account_user(NAMESPACE_USER)
        content = [k for k in snapshot if k[2] == name and k[:2] != NAMESPACES.key]
        for item in content:
            if not snapshot[item]["metadata"].get("deletionTimestamp"):
                options = {"propagationPolicy": "Background"}
                self._act(f"namespace delete {item}", self._api.delete, self._target(item), options, user, {})
        if not content and not namespace["metadata"].get("finalizers"):
            # the `finalize` step: drop spec.finalizers ["kubernetes"], after which the namespace is gone
            self._api.store.write(key, None, namespace["metadata"]["resourceVersion"])

"""The API verbs, independent of HTTP: create, get, list, watch, update, patch, delete.

Each verb follows the order of kube-apiserver's generic registry (staging/.../registry/generic/registry/
store.go and the endpoints handlers): decode, NamespaceLifecycle, mutating admission, strategy
(PrepareForCreate/Update: uid, timestamps, generation, status subresource rules, finalizer rules),
validating admission, then a compare-and-swap write. A write whose CAS fails is retried from a fresh
read unless the client gave a resourceVersion (update) or preconditions (delete): then it is a 409,
so a delete whose precondition loses a race while a webhook deliberates fails as it does in a cluster.
"""

from __future__ import annotations

import base64
import copy
import datetime
import json
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import jsonpatch

from tests.support.apiserver import errors
from tests.support.apiserver.admission import Admission, Attributes
from tests.support.apiserver.conversion import WebhookConverter
from tests.support.apiserver.errors import ApiError
from tests.support.apiserver.resources import NAMESPACES, Registry, ResourceType
from tests.support.apiserver.schema import apply_defaults, invalid_message, prune, validate
from tests.support.apiserver.selectors import matches, parse_field_selector, parse_label_selector
from tests.support.apiserver.store import Event, ObjectKey, Store

Obj = dict[str, Any]
NAME_LABEL = "kubernetes.io/metadata.name"
FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"
NEW_FINALIZERS = (
    "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, "
    "found new finalizers {found}"
)
MAX_PATCH_RETRIES = 5
STOP_POLL_SECONDS = 0.5
GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # utilrand.String's alphabet


@dataclass(frozen=True)
class Target:
    """Where a request points: resource, version, namespace ("" = cluster or all), name, subresource."""

    resource: ResourceType
    version: str
    namespace: str = ""
    name: str = ""
    sub: str = ""


@dataclass
class Response:
    code: int
    body: Obj
    warnings: list[str] = field(default_factory=list)


def now_rfc3339(clock: Callable[[], datetime.datetime]) -> str:
    return clock().astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _without(obj: Obj, *fields: str) -> Obj:
    return {k: v for k, v in obj.items() if k not in fields}


def _finalizers(obj: Obj) -> list[str]:
    return list(obj["metadata"].get("finalizers") or [])


class Api:
    """The verbs over one store, with admission and conversion."""

    def __init__(
        self,
        registry: Registry,
        store: Store,
        admission: Admission,
        converter: WebhookConverter,
        clock: Callable[[], datetime.datetime],
        bookmark_interval: float,
        stopping: threading.Event,
    ) -> None:
        self.registry = registry
        self.store = store
        self.admission = admission
        self.converter = converter
        self.clock = clock
        self.bookmark_interval = bookmark_interval
        self.stopping = stopping

    # ---- helpers -------------------------------------------------------------------------------

    @staticmethod
    def key(resource: ResourceType, namespace: str, name: str) -> ObjectKey:
        return (resource.group, resource.plural, namespace if resource.namespaced else "", name)

    def _to(self, resource: ResourceType, objs: list[Obj], version: str) -> list[Obj]:
        return self.converter.convert(resource, objs, version)

    def _read(self, target: Target) -> Obj:
        found = self.store.get(self.key(target.resource, target.namespace, target.name))
        if found is None:
            raise errors.not_found(target.resource.plural, target.resource.group, target.name)
        return found

    def _check_body(self, target: Target, body: Any) -> Obj:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request was not a JSON object")
        expected = target.resource.api_version(target.version)
        body = {"apiVersion": expected, "kind": target.resource.kind, **body}  # the decoder defaults a missing GVK
        if body.get("apiVersion") != expected or body.get("kind") != target.resource.kind:
            raise errors.bad_request(
                f"the API version in the data ({body.get('apiVersion')}) does not match the expected API version "
                f"({expected})"
                if body.get("apiVersion") != expected
                else f"the kind in the data ({body.get('kind')}) does not match the expected kind "
                f"({target.resource.kind})"
            )
        body = copy.deepcopy(body)
        metadata = body.setdefault("metadata", {})
        if target.resource.namespaced:
            if metadata.get("namespace") and metadata["namespace"] != target.namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            metadata["namespace"] = target.namespace
        else:
            metadata.pop("namespace", None)
        return body

    def namespace_labels(self, namespace: str) -> dict[str, str] | None:
        found = self.store.get(self.key(NAMESPACES, "", namespace))
        return (found or {}).get("metadata", {}).get("labels")

    def _namespace_lifecycle(self, target: Target, operation: str, name: str) -> None:
        """The NamespaceLifecycle admission plugin: the namespace must exist, and accept new content."""
        if not target.resource.namespaced:
            return
        namespace = self.store.get(self.key(NAMESPACES, "", target.namespace))
        if namespace is None:
            raise errors.not_found("namespaces", "", target.namespace)
        if operation == "CREATE" and namespace["metadata"].get("deletionTimestamp"):
            detail = errors.NAMESPACE_TERMINATING.format(namespace=target.namespace)
            raise errors.forbidden(target.resource.plural, target.resource.group, name, detail)

    def _attributes(self, target: Target, operation: str, user: Obj, **kw: Any) -> Attributes:
        return Attributes(
            resource=target.resource,
            version=target.version,
            operation=operation,
            sub=target.sub,
            namespace=target.namespace if target.resource.namespaced else "",
            name=kw.pop("name", target.name),
            object=kw.pop("object", None),
            old_object=kw.pop("old_object", None),
            options=kw.pop("options", {}),
            dry_run=kw.pop("dry_run", False),
            user=user,
        )

    def _structural(self, target: Target, obj: Obj) -> Obj:
        """Prune unknown fields and apply defaults, as the CRD decoder does (also after mutating webhooks)."""
        schema = target.resource.schemas.get(target.version)
        return apply_defaults(prune(obj, schema), schema) if schema else obj

    def _validate_schema(self, target: Target, obj: Obj) -> None:
        problems = validate(obj, target.resource.schemas.get(target.version))
        if problems:
            resource = target.resource
            raise errors.invalid(resource.kind, resource.group, obj["metadata"]["name"], invalid_message(problems))

    # ---- reads ---------------------------------------------------------------------------------

    def get(self, target: Target) -> Response:
        found = self._read(target)
        return Response(200, self._to(target.resource, [found], target.version)[0])

    def list(self, target: Target, params: dict[str, str]) -> Response:
        resource = target.resource
        label_selector = parse_label_selector(params.get("labelSelector", ""))
        field_selector = parse_field_selector(params.get("fieldSelector", ""))
        namespace = target.namespace if resource.namespaced and target.namespace else None
        items, rv = self.store.list(resource.group, resource.plural, namespace)
        items = [o for o in items if matches(label_selector, o["metadata"].get("labels")) and field_selector(o)]
        token = params.get("continue")
        if token:
            start_after, rv = json.loads(base64.urlsafe_b64decode(token))
            items = [o for o in items if _sort_key(o) > tuple(start_after)]
        metadata: Obj = {"resourceVersion": str(rv)}
        limit = int(params.get("limit") or 0)
        if limit and len(items) > limit:
            items = items[:limit]
            last = list(_sort_key(items[-1]))
            metadata["continue"] = base64.urlsafe_b64encode(json.dumps([last, rv]).encode()).decode()
        items = self._to(resource, items, target.version)
        if not resource.custom:
            items = [_without(o, "apiVersion", "kind") for o in items]
        body = {
            "apiVersion": resource.api_version(target.version),
            "kind": resource.list_kind_name,
            "metadata": metadata,
            "items": items,
        }
        return Response(200, body)

    def watch(self, target: Target, params: dict[str, str]) -> Iterator[Obj]:
        """Watch events as kube-apiserver streams them; ends on timeoutSeconds, 410, or server stop."""
        resource = target.resource
        label_selector = parse_label_selector(params.get("labelSelector", ""))
        field_selector = parse_field_selector(params.get("fieldSelector", ""))
        bookmarks = params.get("allowWatchBookmarks") == "true"
        deadline = time.monotonic() + float(params.get("timeoutSeconds") or 1800)
        namespace = target.namespace if resource.namespaced and target.namespace else None

        def selected(obj: Obj | None) -> bool:
            return obj is not None and matches(label_selector, obj["metadata"].get("labels")) and field_selector(obj)

        def ours(event: Event) -> bool:
            group, plural, ns, _name = event.key
            return (group, plural) == resource.key and (namespace is None or ns == namespace)

        def out(kind: str, obj: Obj) -> Obj:
            return {"type": kind, "object": self._to(resource, [obj], target.version)[0]}

        requested = params.get("resourceVersion", "")
        if requested in ("", "0"):
            items, cursor = self.store.list(resource.group, resource.plural, namespace)
            for obj in items:
                if selected(obj):
                    yield out("ADDED", obj)
        else:
            cursor = int(requested)
        last_bookmark = time.monotonic()
        while not self.stopping.is_set():
            with self.store.changed:
                events = self.store.events_after(cursor)
                if events == []:
                    wait = deadline - time.monotonic()
                    if bookmarks:
                        wait = min(wait, last_bookmark + self.bookmark_interval - time.monotonic())
                    if wait > 0:
                        self.store.changed.wait(min(wait, STOP_POLL_SECONDS))
                    events = self.store.events_after(cursor)
            if events is None:
                yield {"type": "ERROR", "object": errors.expired(cursor, self.store.oldest_available() + 1).status()}
                return
            for event in events:
                cursor = event.rv
                if not ours(event):
                    continue
                now_in, was_in = selected(event.object), event.previous is not None and selected(event.previous)
                kind = _transition(event.type, now_in, was_in)
                if kind:
                    try:
                        yield out(kind, event.object)
                    except ApiError as exc:
                        yield {"type": "ERROR", "object": exc.status()}
                        return
            if time.monotonic() >= deadline:
                return
            if bookmarks and time.monotonic() - last_bookmark >= self.bookmark_interval:
                last_bookmark = time.monotonic()
                cursor = max(cursor, self._quiet_rv(cursor))
                yield {
                    "type": "BOOKMARK",
                    "object": {
                        "apiVersion": resource.api_version(target.version),
                        "kind": resource.kind,
                        "metadata": {"resourceVersion": str(cursor)},
                    },
                }

    def _quiet_rv(self, cursor: int) -> int:
        """The store RV if nothing happened after `cursor` (then a bookmark may advance to it)."""
        with self.store.changed:
            events = self.store.events_after(cursor)
            return self.store.resource_version if events == [] else cursor

    # ---- writes --------------------------------------------------------------------------------

    def create(self, target: Target, body: Any, user: Obj, params: dict[str, str]) -> Response:
        resource = target.resource
        obj = self._check_body(target, body)
        metadata = obj["metadata"]
        request_name = metadata.get("name", "")
        if not request_name and not metadata.get("generateName"):
            raise errors.invalid(
                resource.kind, resource.group, "", "metadata.name: Required value: name or generateName is required"
            )
        self._namespace_lifecycle(target, "CREATE", request_name)
        dry_run = params.get("dryRun") == "All"
        options = {"dryRun": ["All"]} if dry_run else {}
        obj = self._structural(target, obj)
        attrs = self._attributes(
            target, "CREATE", user, name=request_name, object=obj, options=options, dry_run=dry_run
        )
        mutated, warnings = self.admission.mutate(attrs)
        assert mutated is not None
        obj = self._prepare_create(resource, target.version, self._structural(target, mutated))
        _validate_name(resource, obj["metadata"]["name"])
        self._validate_schema(target, obj)
        warnings += self.admission.validate(
            self._attributes(target, "CREATE", user, name=request_name, object=obj, options=options, dry_run=dry_run)
        )
        stored = self._to(resource, [obj], resource.storage_version)[0]
        key = self.key(resource, target.namespace, obj["metadata"]["name"])
        if dry_run:
            if self.store.get(key) is not None:
                raise errors.already_exists(resource.plural, resource.group, obj["metadata"]["name"])
            return Response(201, obj, warnings)
        written = self.store.write(key, stored, None)
        if written is None:
            raise errors.already_exists(resource.plural, resource.group, obj["metadata"]["name"])
        return Response(201, self._to(resource, [written], target.version)[0], warnings)

    def seed(self, target: Target, body: Any) -> Obj:
        """Store an object as if it had been created before any webhook existed (system namespaces, fixtures).

        Server fields are filled as on create; admission is skipped; the object must not exist yet.
        """
        obj = self._prepare_create(target.resource, target.version, self._check_body(target, body))
        stored = self._to(target.resource, [obj], target.resource.storage_version)[0]
        written = self.store.write(self.key(target.resource, target.namespace, obj["metadata"]["name"]), stored, None)
        if written is None:
            raise errors.already_exists(target.resource.plural, target.resource.group, obj["metadata"]["name"])
        return self._to(target.resource, [written], target.version)[0]

    def _prepare_create(self, resource: ResourceType, version: str, obj: Obj) -> Obj:
        obj = copy.deepcopy(obj)
        metadata = obj["metadata"]
        if not metadata.get("name"):
            suffix = "".join(random.choice(GENERATE_ALPHABET) for _ in range(5))
            metadata["name"] = metadata["generateName"] + suffix
        for dropped in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            metadata.pop(dropped, None)
        metadata["uid"] = str(uuid.uuid4())
        metadata["creationTimestamp"] = now_rfc3339(self.clock)
        if resource.sets_generation:
            metadata["generation"] = 1
        if resource.custom and resource.has_status(version):
            obj.pop("status", None)
        PREPARE_CREATE.get(resource.key, lambda o: o)(obj)
        return obj

    def update(self, target: Target, body: Any, user: Obj, params: dict[str, str]) -> Response:
        new = self._check_body(target, body)
        if new["metadata"].get("name") != target.name:
            raise errors.bad_request(
                f"the name of the object ({new['metadata'].get('name')}) does not match the name on the URL "
                f"({target.name})"
            )
        precondition = new["metadata"].get("resourceVersion") or None
        while True:
            current = self._read(target)
            old = self._to(target.resource, [current], target.version)[0]
            result = self._update(target, old, copy.deepcopy(new), user, params, precondition)
            if result is not None:
                return result

    def patch(self, target: Target, body: bytes, content_type: str, user: Obj, params: dict[str, str]) -> Response:
        kind = content_type.split(";")[0].strip()
        if kind not in PATCHERS or (kind == STRATEGIC and target.resource.custom):
            raise errors.unsupported_media_type(kind)
        try:
            patch = json.loads(body or b"null")
        except ValueError as exc:
            raise errors.bad_request(f"error decoding patch: {exc}") from exc
        for _attempt in range(MAX_PATCH_RETRIES):
            current = self._read(target)
            old = self._to(target.resource, [current], target.version)[0]
            try:
                new = PATCHERS[kind](copy.deepcopy(old), patch)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, ValueError) as exc:
                raise ApiError(422, "Invalid", str(exc)) from exc
            precondition = new.get("metadata", {}).get("resourceVersion")
            precondition = precondition if precondition != old["metadata"]["resourceVersion"] else None
            new.setdefault("metadata", {})["resourceVersion"] = precondition or old["metadata"]["resourceVersion"]
            result = self._update(target, old, new, user, params, precondition)
            if result is not None:
                return result
        raise errors.conflict(target.resource.plural, target.resource.group, target.name)

    def _update(
        self, target: Target, old: Obj, new: Obj, user: Obj, params: dict[str, str], precondition: str | None
    ) -> Response | None:
        """One attempt of an update; None when the CAS lost against a concurrent write and may be retried."""
        resource = target.resource
        dry_run = params.get("dryRun") == "All"
        options = {"dryRun": ["All"]} if dry_run else {}
        new = self._structural(target, self._check_body(target, new))
        attrs = self._attributes(target, "UPDATE", user, object=new, old_object=old, options=options, dry_run=dry_run)
        mutated, warnings = self.admission.mutate(attrs)
        assert mutated is not None
        if precondition is not None and precondition != old["metadata"]["resourceVersion"]:
            raise errors.conflict(resource.plural, resource.group, target.name)
        final = self._prepare_update(target, old, self._structural(target, mutated))
        self._validate_schema(target, final)
        warnings += self.admission.validate(
            self._attributes(target, "UPDATE", user, object=final, old_object=old, options=options, dry_run=dry_run)
        )
        if _same(final, old):
            return Response(200, old, warnings)
        finished = (
            not _finalizers(final)
            and final["metadata"].get("deletionTimestamp")
            and not _ns_spec_finalizers(resource, final)
        )
        if dry_run:
            return Response(200, final, warnings)
        key = self.key(resource, target.namespace, target.name)
        stored = self._to(resource, [final], resource.storage_version)[0]
        written = self.store.write(key, None if finished else stored, old["metadata"]["resourceVersion"])
        if written is None:
            if precondition is not None:
                raise errors.conflict(resource.plural, resource.group, target.name)
            return None
        if finished:
            written = stored
        return Response(200, self._to(resource, [written], target.version)[0], warnings)

    def _prepare_update(self, target: Target, old: Obj, new: Obj) -> Obj:
        resource = target.resource
        if target.sub == "status":
            final = copy.deepcopy(old)
            if "status" in new:
                final["status"] = new["status"]
            else:
                final.pop("status", None)
            return final
        final = copy.deepcopy(new)
        if resource.has_status(target.version):
            if "status" in old:
                final["status"] = copy.deepcopy(old["status"])
            else:
                final.pop("status", None)
        metadata, before = final["metadata"], old["metadata"]
        if metadata.get("uid") and metadata["uid"] != before["uid"]:
            raise errors.invalid(
                resource.kind,
                resource.group,
                target.name,
                f'metadata.uid: Invalid value: "{metadata["uid"]}": field is immutable',
            )
        for kept in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
            if kept in before:
                metadata[kept] = before[kept]
            else:
                metadata.pop(kept, None)
        metadata["resourceVersion"] = before["resourceVersion"]
        if before.get("deletionTimestamp"):
            added = [f for f in _finalizers(final) if f not in _finalizers(old)]
            if added:
                found = "[]string{" + ", ".join(f'"{f}"' for f in added) + "}"
                raise errors.invalid(resource.kind, resource.group, target.name, NEW_FINALIZERS.format(found=found))
        if resource.sets_generation:
            ignored = ("metadata", "status") if resource.has_status(target.version) else ("metadata",)
            if _without(final, *ignored) != _without(old, *ignored):
                metadata["generation"] = int(before.get("generation", 0)) + 1
        PREPARE_UPDATE.get(resource.key, lambda o: o)(final)
        return final

    def delete(self, target: Target, options: Obj, user: Obj, params: dict[str, str]) -> Response:
        resource = target.resource
        options = {k: v for k, v in (options or {}).items() if k not in ("kind", "apiVersion")}
        for name in ("propagationPolicy", "gracePeriodSeconds"):
            if name in params and name not in options:
                options[name] = int(params[name]) if name == "gracePeriodSeconds" else params[name]
        if params.get("dryRun") == "All":
            options["dryRun"] = ["All"]
        dry_run = options.get("dryRun") == ["All"]
        preconditions = options.get("preconditions") or {}
        while True:
            current = self._read(target)
            _check_preconditions(resource, target.name, current, preconditions)
            old = self._to(resource, [current], target.version)[0]
            self._namespace_lifecycle(target, "DELETE", target.name)
            attrs = self._attributes(target, "DELETE", user, old_object=old, options=options, dry_run=dry_run)
            _mutated, warnings = self.admission.mutate(attrs)
            warnings += self.admission.validate(attrs)
            final, remove = self._prepare_delete(resource, old, options.get("propagationPolicy"))
            if dry_run:
                return self._deleted_response(resource, final, warnings)
            key = self.key(resource, target.namespace, target.name)
            stored = None if remove else self._to(resource, [final], resource.storage_version)[0]
            if remove or not _same(final, old):
                written = self.store.write(key, stored, current["metadata"]["resourceVersion"])
                if written is None:
                    continue  # lost a race: re-read; preconditions are checked again against the new state
                if not remove:
                    final = self._to(resource, [written], target.version)[0]
            return self._deleted_response(resource, final, warnings, remove)

    def _prepare_delete(self, resource: ResourceType, old: Obj, propagation: str | None) -> tuple[Obj, bool]:
        """Graceful deletion with finalizers (and GC finalizers for Foreground/Orphan), or immediate removal."""
        final = copy.deepcopy(old)
        metadata = final["metadata"]
        finalizers = _finalizers(final)
        gc_finalizer = {"Foreground": FOREGROUND, "Orphan": ORPHAN}.get(propagation or "")
        if gc_finalizer and not metadata.get("deletionTimestamp") and gc_finalizer not in finalizers:
            finalizers.append(gc_finalizer)
            metadata["finalizers"] = finalizers
        if not finalizers and not _ns_spec_finalizers(resource, final):
            return final, True
        if not metadata.get("deletionTimestamp"):
            metadata["deletionTimestamp"] = now_rfc3339(self.clock)
            metadata["deletionGracePeriodSeconds"] = 0
            if resource is NAMESPACES:
                final.setdefault("status", {})["phase"] = "Terminating"
        return final, False

    def _deleted_response(
        self, resource: ResourceType, obj: Obj, warnings: list[str], removed: bool = True
    ) -> Response:
        if resource.custom or resource is NAMESPACES or not removed:
            return Response(200, obj, warnings)
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": obj["metadata"]["name"], "kind": resource.plural, "uid": obj["metadata"]["uid"]},
        }
        if resource.group:
            status["details"]["group"] = resource.group
        return Response(200, status, warnings)


DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def _validate_name(resource: ResourceType, name: str) -> None:
    """Namespaces are DNS labels (63), everything else the project uses a DNS subdomain (253)."""
    pattern, limit, message = (
        (DNS1123_LABEL, 63, LABEL_MESSAGE) if resource is NAMESPACES else (DNS1123_SUBDOMAIN, 253, SUBDOMAIN_MESSAGE)
    )
    if not pattern.fullmatch(name):
        raise errors.invalid(resource.kind, resource.group, name, f'metadata.name: Invalid value: "{name}": {message}')
    if len(name) > limit:
        detail = f"must be no more than {limit} characters"
        raise errors.invalid(resource.kind, resource.group, name, f'metadata.name: Invalid value: "{name}": {detail}')


def _transition(kind: str, now_in: bool, was_in: bool) -> str | None:
    """What a selector-filtered watcher sees: objects entering or leaving the selection are ADDED/DELETED."""
    if kind == "DELETED":
        return "DELETED" if now_in else None
    if kind == "ADDED":
        return "ADDED" if now_in else None
    return {(True, True): "MODIFIED", (True, False): "ADDED", (False, True): "DELETED"}.get((now_in, was_in))


def _sort_key(obj: Obj) -> tuple[str, str]:
    return (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def _same(a: Obj, b: Obj) -> bool:
    strip = ("resourceVersion", "managedFields")
    return _without(a, "metadata") == _without(b, "metadata") and _without(a["metadata"], *strip) == _without(
        b["metadata"], *strip
    )


def _ns_spec_finalizers(resource: ResourceType, obj: Obj) -> bool:
    return resource is NAMESPACES and bool((obj.get("spec") or {}).get("finalizers"))


def _check_preconditions(resource: ResourceType, name: str, obj: Obj, preconditions: Obj) -> None:
    metadata = obj["metadata"]
    uid, rv = preconditions.get("uid"), preconditions.get("resourceVersion")
    if uid and uid != metadata["uid"]:
        detail = errors.PRECONDITION_UID.format(want=uid, have=metadata["uid"])
        raise errors.conflict(resource.plural, resource.group, name, detail)
    if rv and rv != metadata["resourceVersion"]:
        detail = errors.PRECONDITION_RV.format(want=rv, have=metadata["resourceVersion"])
        raise errors.conflict(resource.plural, resource.group, name, detail)


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


def _json_patch(target: Obj, patch: Any) -> Obj:
    if not isinstance(patch, list):
        raise ValueError("json patch must be a list of operations")
    return jsonpatch.JsonPatch(patch).apply(target)


STRATEGIC = "application/strategic-merge-patch+json"
PATCHERS: dict[str, Callable[[Obj, Any], Obj]] = {
    "application/merge-patch+json": _merge_patch,
    "application/json-patch+json": _json_patch,
    # Built-ins only; the kinds the project uses have no keyed lists, so merge semantics are the same.
    STRATEGIC: _merge_patch,
}


def _prepare_namespace(obj: Obj) -> Obj:
    """kube-apiserver labels every Namespace with its name, and namespaces carry the `kubernetes` finalizer."""
    obj["metadata"].setdefault("labels", {})[NAME_LABEL] = obj["metadata"]["name"]
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj.setdefault("status", {}).setdefault("phase", "Active")
    return obj


def _prepare_secret(obj: Obj) -> Obj:
    """stringData is write-only: merged into data (base64) and dropped, as the Secret strategy does."""
    string_data = obj.pop("stringData", None) or {}
    if string_data:
        data = obj.setdefault("data", {})
        for name, value in string_data.items():
            data[name] = base64.b64encode(value.encode()).decode()
    obj.setdefault("type", "Opaque")
    return obj


PREPARE_CREATE: dict[tuple[str, str], Callable[[Obj], Obj]] = {
    ("", "namespaces"): _prepare_namespace,
    ("", "secrets"): _prepare_secret,
}
PREPARE_UPDATE: dict[tuple[str, str], Callable[[Obj], Obj]] = {
    ("", "namespaces"): lambda o: (
        o["metadata"].setdefault("labels", {}).update({NAME_LABEL: o["metadata"]["name"]}),
        o,
    )[1],
    ("", "secrets"): _prepare_secret,
}

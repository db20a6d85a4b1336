"""CRD version conversion as apiextensions-apiserver does it (webhook_converter.go, nop_converter.go).

`strategy: None` only rewrites apiVersion. `strategy: Webhook` posts a ConversionReview v1 with the
objects not yet at the target version and checks the answer: uid echo, GVK, Success, count, each
object's apiVersion and kind, and unchanged name/namespace/uid. Only labels and annotations may change
in metadata; every other metadata change is replaced by the original metadata.
"""

from __future__ import annotations

import copy
import ssl
import uuid
from typing import Any

import httpx

from tests.support.apiserver.admission import _go_transport_error
from tests.support.apiserver.errors import internal
from tests.support.apiserver.resources import ResourceType

FAILED = "conversion webhook for {gvk} failed: {reason}"
CONVERSION_TIMEOUT_SECONDS = 30


class ConversionError(Exception):
    pass


class WebhookConverter:
    """Converts objects between served versions, calling the conversion webhook when the CRD says so."""

    def __init__(self, webhook_base_url: str | None, ca_bundle: bytes | None) -> None:
        self._base = (webhook_base_url or "https://webhook-base-url-not-configured.invalid").rstrip("/")
        context = ssl.create_default_context()
        if ca_bundle:
            context.load_verify_locations(cadata=ca_bundle.decode())
        self._ssl = context
        self.reviews: list[dict[str, Any]] = []  # requests sent, for tests to inspect

    def convert(self, resource: ResourceType, objects: list[dict[str, Any]], version: str) -> list[dict[str, Any]]:
        target = resource.api_version(version)
        pending = [i for i, obj in enumerate(objects) if obj.get("apiVersion") != target]
        if not pending:
            return objects
        result = list(objects)
        if resource.conversion_strategy != "Webhook":
            for i in pending:
                result[i] = {**objects[i], "apiVersion": target}
            return result
        source = objects[pending[0]].get("apiVersion", "")
        gvk = f"{source}, Kind={resource.kind}"
        try:
            converted = self._call(resource, [objects[i] for i in pending], target)
        except ConversionError as exc:
            raise internal(FAILED.format(gvk=gvk, reason=exc)) from exc
        for i, obj in zip(pending, converted, strict=True):
            result[i] = obj
        return result

    def _call(self, resource: ResourceType, objects: list[dict[str, Any]], target: str) -> list[dict[str, Any]]:
        uid = str(uuid.uuid4())
        review = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": target, "objects": copy.deepcopy(objects)},
        }
        self.reviews.append(review)
        url = f"{self._base}{resource.conversion_path}?timeout={CONVERSION_TIMEOUT_SECONDS}s"
        try:
            with httpx.Client(verify=self._ssl, timeout=CONVERSION_TIMEOUT_SECONDS) as client:
                reply = client.post(url, json=review)
        except httpx.HTTPError as exc:
            raise ConversionError(f'Post "{url}": {_go_transport_error(exc)}') from exc
        if reply.status_code != 200:
            raise ConversionError(f"the server responded with the status code {reply.status_code}")
        try:
            body = reply.json()
        except ValueError as exc:
            raise ConversionError(f"unmarshal response: {exc}") from exc
        return _check(body, uid, objects, target, resource.kind)


def _check(body: Any, uid: str, objects: list[dict[str, Any]], target: str, kind: str) -> list[dict[str, Any]]:
    if not isinstance(body, dict) or (body.get("apiVersion"), body.get("kind")) != (
        "apiextensions.k8s.io/v1",
        "ConversionReview",
    ):
        raise ConversionError("expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview")
    response = body.get("response")
    if not isinstance(response, dict):
        raise ConversionError("no response provided")
    if response.get("uid") != uid:
        raise ConversionError(f'expected response.uid="{uid}", got "{response.get("uid", "")}"')
    result = response.get("result") or {}
    if result.get("status") != "Success":
        raise ConversionError(result.get("message") or "conversion failed without a message")
    converted = response.get("convertedObjects") or []
    if len(converted) != len(objects):
        raise ConversionError(f"returned {len(converted)} objects, expected {len(objects)}")
    out = []
    for original, obj in zip(objects, converted, strict=True):
        if obj.get("apiVersion") != target:
            raise ConversionError(f"invalid apiVersion {obj.get('apiVersion')!r}, expected {target!r}")
        if obj.get("kind") != kind:
            raise ConversionError(f"invalid kind {obj.get('kind')!r}, expected {kind!r}")
        out.append(_restore_metadata(original, obj))
    return out


def _restore_metadata(original: dict[str, Any], converted: dict[str, Any]) -> dict[str, Any]:
    """Keep only label and annotation edits; name, namespace and uid must not change (restoreObjectMeta)."""
    before, after = original.get("metadata") or {}, converted.get("metadata") or {}
    for field in ("name", "namespace", "uid"):
        if before.get(field) != after.get(field):
            raise ConversionError(f"{field} changed from {before.get(field)!r} to {after.get(field)!r}")
    metadata = copy.deepcopy(before)
    for field in ("labels", "annotations"):
        if after.get(field):
            metadata[field] = after[field]
        else:
            metadata.pop(field, None)
    return {**converted, "metadata": metadata}

"""Calling admission webhooks the way kube-apiserver's webhook dispatchers do.

- AdmissionReview v1 requests built field by field (request/admissionreview.go), posted to the
  webhook URL with `?timeout=Ns` over TLS verified against the caBundle.
- Responses verified as VerifyAdmissionResponse does; a call error or an invalid response is subject
  to failurePolicy; a patch that does not apply, or any patch on DELETE, is an internal error that
  rejects the request even under Ignore (mutating/dispatcher.go).
- Mutating webhooks run serially before validation, each seeing the previous one's result.
- A denial becomes the same Status kube-apiserver returns (webhookerrors.ToStatusErr).
"""

from __future__ import annotations

import base64
import copy
import json
import ssl
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

import httpx
import jsonpatch

from tests.support.apiserver.errors import ApiError, bad_request, internal
from tests.support.apiserver.resources import NAMESPACES, ResourceType
from tests.support.apiserver.webhooks import Webhook

DENIED = 'admission webhook "{name}" denied the request'
CALL_FAILED = 'failed calling webhook "{name}": {reason}'
POST_FAILED = 'failed to call webhook: Post "{url}": {error}'
INVALID_RESPONSE = "received invalid webhook response: {error}"
PATCH_ON_DELETE = 'admission webhook "{name}" attempted to modify the object, which is not supported for this operation'
PATCH_NOT_APPLIED = 'admission webhook "{name}" returned a patch that could not be applied: {error}'
NO_DRY_RUN = 'admission webhook "{name}" does not support dry run'
REVIEW_GVK = ("admission.k8s.io/v1", "AdmissionReview")

OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


class Converter(Protocol):
    def convert(self, resource: ResourceType, objects: list[dict[str, Any]], version: str) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class Attributes:
    """What one admission pass is about (admission.Attributes)."""

    resource: ResourceType
    version: str
    operation: str
    sub: str
    namespace: str
    name: str
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None
    options: dict[str, Any]
    dry_run: bool
    user: dict[str, Any]


class CallError(Exception):
    """webhookutil.ErrCallingWebhook: subject to failurePolicy."""


def _go_transport_error(exc: httpx.HTTPError) -> str:
    """Say what Go's net/http would have said, so messages read like a real cluster's."""
    text = str(exc)
    if isinstance(exc, httpx.TimeoutException):
        return "context deadline exceeded"
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    if isinstance(exc, httpx.ConnectError):
        host = exc.request.url.netloc.decode() if exc.request else "?"
        return f"dial tcp {host}: connect: connection refused"
    return text or type(exc).__name__


class Admission:
    """The webhook half of the admission chain for one double."""

    def __init__(
        self,
        hooks: list[Webhook],
        ca_bundle: bytes | None,
        converter: Converter,
        namespace_labels: Callable[[str], dict[str, str] | None],
    ) -> None:
        self.hooks = hooks
        self._converter = converter
        self._namespace_labels = namespace_labels
        context = ssl.create_default_context()
        if ca_bundle:
            context.load_verify_locations(cadata=ca_bundle.decode())
        self._ssl = context
        self.calls: list[tuple[str, dict[str, Any]]] = []  # (webhook name, request) for tests to inspect

    def mutate(self, attrs: Attributes) -> tuple[dict[str, Any] | None, list[str]]:
        """Run every matching mutating webhook in order; returns the final object and their warnings."""
        warnings: list[str] = []
        for hook in self._matching("mutating", attrs):
            attrs, more = self._mutate_one(hook, attrs)
            warnings += more
        return attrs.object, warnings

    def validate(self, attrs: Attributes) -> list[str]:
        warnings: list[str] = []
        for hook in self._matching("validating", attrs):
            warnings += self._call_guarded(hook, attrs)[1]
        return warnings

    def _matching(self, kind: str, attrs: Attributes) -> list[tuple[Webhook, str]]:
        namespaced = bool(attrs.namespace) and attrs.resource is not NAMESPACES
        selected = []
        for hook in self.hooks:
            if hook.type != kind:
                continue
            version = hook.match_version(attrs.resource, attrs.version, attrs.operation, attrs.sub, namespaced)
            if version is None or not hook.selects_object(attrs.object, attrs.old_object):
                continue
            if not self._selects_namespace(hook, attrs):
                continue
            selected.append((hook, version))
        return selected

    def _selects_namespace(self, hook: Webhook, attrs: Attributes) -> bool:
        """Cluster-scoped objects skip the namespaceSelector, except Namespaces, which match on themselves."""
        if attrs.resource is NAMESPACES:
            subject = attrs.object or attrs.old_object or {}
            return hook.selects_namespace(subject.get("metadata", {}).get("labels"))
        if not attrs.namespace:
            return True
        return hook.selects_namespace(self._namespace_labels(attrs.namespace))

    def _mutate_one(self, matched: tuple[Webhook, str], attrs: Attributes) -> tuple[Attributes, list[str]]:
        hook, version = matched
        response, warnings = self._call_guarded(matched, attrs)
        if response is None or not response.get("patch"):
            return attrs, warnings
        if attrs.object is None:
            raise internal(PATCH_ON_DELETE.format(name=hook.name))
        sent = self._in_version(attrs, attrs.object, version)
        try:
            patch = jsonpatch.JsonPatch(json.loads(base64.b64decode(response["patch"])))
            patched = patch.apply(sent)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, ValueError, TypeError) as exc:
            raise internal(PATCH_NOT_APPLIED.format(name=hook.name, error=exc)) from exc
        if version != attrs.version:
            patched = self._converter.convert(attrs.resource, [patched], attrs.version)[0]
        return replace(attrs, object=patched), warnings

    def _in_version(self, attrs: Attributes, obj: dict[str, Any] | None, version: str) -> dict[str, Any] | None:
        if obj is None or version == attrs.version:
            return obj
        return self._converter.convert(attrs.resource, [obj], version)[0]

    def _call_guarded(self, matched: tuple[Webhook, str], attrs: Attributes) -> tuple[dict[str, Any] | None, list[str]]:
        """Call and apply failurePolicy; raise the denial Status when the webhook says no."""
        hook, _version = matched
        if attrs.dry_run and hook.side_effects not in ("None", "NoneOnDryRun"):
            raise bad_request(NO_DRY_RUN.format(name=hook.name))
        try:
            response = self._call(matched, attrs)
        except CallError as exc:
            if hook.failure_policy == "Ignore":
                return None, []
            raise internal(CALL_FAILED.format(name=hook.name, reason=exc)) from exc
        warnings = list(response.get("warnings") or [])
        if not response.get("allowed"):
            raise _denial(hook.name, response.get("status"))
        return response, warnings

    def _call(self, matched: tuple[Webhook, str], attrs: Attributes) -> dict[str, Any]:
        hook, version = matched
        review = self._review(hook, version, attrs)
        uid = review["request"]["uid"]
        self.calls.append((hook.name, review["request"]))
        url = f"{hook.url}?timeout={hook.timeout_seconds}s"
        try:
            with httpx.Client(verify=self._ssl, timeout=hook.timeout_seconds) as client:
                reply = client.post(url, json=review, headers={"Accept": "application/json"})
        except httpx.HTTPError as exc:
            raise CallError(POST_FAILED.format(url=url, error=_go_transport_error(exc))) from exc
        if reply.status_code != 200:
            raise CallError(
                f"failed to call webhook: the server responded with the status code {reply.status_code} "
                "but did not return more information"
            )
        try:
            body = reply.json()
        except ValueError as exc:
            raise CallError(INVALID_RESPONSE.format(error=exc)) from exc
        problem = verify_response(body, uid, hook.type == "mutating")
        if problem:
            raise CallError(INVALID_RESPONSE.format(error=problem))
        response = body["response"]
        if response.get("patch") and response.get("patchType") != "JSONPatch":
            raise CallError(f"unsupported patch type {response.get('patchType')!r}")
        return response

    def _review(self, hook: Webhook, version: str, attrs: Attributes) -> dict[str, Any]:
        resource = attrs.resource
        sent_object = self._in_version(attrs, attrs.object, version)
        sent_old = self._in_version(attrs, attrs.old_object, version)
        gvk = {"group": resource.group, "version": version, "kind": resource.kind}
        gvr = {"group": resource.group, "version": version, "resource": resource.plural}
        request: dict[str, Any] = {
            "uid": str(uuid.uuid4()),
            "kind": gvk,
            "resource": gvr,
            "requestKind": {**gvk, "version": attrs.version},
            "requestResource": {**gvr, "version": attrs.version},
            "operation": attrs.operation,
            "userInfo": {k: copy.deepcopy(v) for k, v in attrs.user.items() if v},  # omitempty, as Go encodes it
            "object": copy.deepcopy(sent_object),
            "oldObject": copy.deepcopy(sent_old),
            "dryRun": attrs.dry_run,
            "options": {"kind": OPTIONS_KIND[attrs.operation], "apiVersion": "meta.k8s.io/v1", **attrs.options},
        }
        if attrs.name:
            request["name"] = attrs.name
        if attrs.sub:
            request["subResource"] = attrs.sub
            request["requestSubResource"] = attrs.sub
        if attrs.namespace:
            request["namespace"] = attrs.namespace
        return {"apiVersion": REVIEW_GVK[0], "kind": REVIEW_GVK[1], "request": request}


def verify_response(body: Any, uid: str, mutating: bool) -> str | None:
    """VerifyAdmissionResponse for v1: the reason a response is invalid, or None."""
    if not isinstance(body, dict) or not isinstance(body.get("response"), dict):
        return "webhook response was absent"
    response = body["response"]
    if response.get("uid") != uid:
        return f"expected response.uid={uid!r}, got {response.get('uid', '')!r}".replace("'", '"')
    if (body.get("apiVersion"), body.get("kind")) != REVIEW_GVK:
        got = f"{body.get('apiVersion', '')}, Kind={body.get('kind', '')}"
        return f"expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {got}"
    patch, patch_type = response.get("patch"), response.get("patchType")
    if mutating and patch and not patch_type:
        return "webhook returned response.patch but not response.patchType"
    if mutating and patch_type and not patch:
        return "webhook returned response.patchType but not response.patch"
    if not mutating and (patch or patch_type):
        return "validating webhooks may not return patches"
    return None


def _denial(name: str, status: dict[str, Any] | None) -> ApiError:
    """webhookerrors.ToStatusErr: code below 400 becomes 400; message prefixed with the webhook name."""
    status = status or {}
    code = int(status.get("code") or 0)
    code = code if code >= 400 else 400
    denied = DENIED.format(name=name)
    if status.get("message"):
        message = f"{denied}: {status['message']}"
    elif status.get("reason"):
        message = f"{denied}: {status['reason']}"
    else:
        message = f"{denied} without explanation"
    return ApiError(code, status.get("reason", ""), message, status.get("details"))

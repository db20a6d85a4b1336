"""Kubernetes `Status` errors as kube-apiserver writes them.

Every failure the double returns is an `ApiError` carrying a complete `metav1.Status`, so the official
client raises `ApiException` with the same status code, reason and message a real cluster would give.
The message formats are copied from k8s.io/apimachinery/pkg/api/errors; tests assert them exactly.
"""

from __future__ import annotations

from typing import Any

NOT_FOUND = '{resource} "{name}" not found'
ALREADY_EXISTS = '{resource} "{name}" already exists'
CONFLICT = 'Operation cannot be fulfilled on {resource} "{name}": {detail}'
MODIFIED = "the object has been modified; please apply your changes to the latest version and try again"
PRECONDITION_UID = "Precondition failed: UID in precondition: {want}, UID in object meta: {have}"
PRECONDITION_RV = "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {have}"
EXPIRED = "too old resource version: {requested} ({oldest})"
NAMESPACE_TERMINATING = "unable to create new content in namespace {namespace} because it is being terminated"
INTERNAL = "Internal error occurred: {detail}"


class ApiError(Exception):
    """A request failure with the `Status` object kube-apiserver would return."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        """The `Status` body (also the object of a watch ERROR event)."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def qualified(plural: str, group: str) -> str:
    """`configmaps` for the core group, `releases.solar.opendefense.cloud` otherwise (GroupResource.String)."""
    return f"{plural}.{group}" if group else plural


def _details(plural: str, group: str, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": plural}
    if group:
        details["group"] = group
    return details


def not_found(plural: str, group: str, name: str) -> ApiError:
    message = NOT_FOUND.format(resource=qualified(plural, group), name=name)
    return ApiError(404, "NotFound", message, _details(plural, group, name))


def already_exists(plural: str, group: str, name: str) -> ApiError:
    message = ALREADY_EXISTS.format(resource=qualified(plural, group), name=name)
    return ApiError(409, "AlreadyExists", message, _details(plural, group, name))


def conflict(plural: str, group: str, name: str, detail: str = MODIFIED) -> ApiError:
    message = CONFLICT.format(resource=qualified(plural, group), name=name, detail=detail)
    return ApiError(409, "Conflict", message, _details(plural, group, name))


def expired(requested: int, oldest: int) -> ApiError:
    return ApiError(410, "Expired", EXPIRED.format(requested=requested, oldest=oldest))


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def invalid(kind: str, group: str, name: str, message: str) -> ApiError:
    full = f'{kind}.{group} "{name}" is invalid: {message}' if group else f'{kind} "{name}" is invalid: {message}'
    return ApiError(422, "Invalid", full, {"name": name, "group": group, "kind": kind})


def forbidden(plural: str, group: str, name: str, detail: str) -> ApiError:
    resource = qualified(plural, group)
    message = f'{resource} "{name}" is forbidden: {detail}'
    return ApiError(403, "Forbidden", message, _details(plural, group, name))


def internal(detail: str) -> ApiError:
    return ApiError(500, "InternalError", INTERNAL.format(detail=detail), {"causes": [{"message": detail}]})


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted "
        f"media types include: application/json-patch+json, application/merge-patch+json, "
        f"application/apply-patch+yaml (got {content_type})",
    )


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def method_not_allowed(method: str) -> ApiError:
    return ApiError(
        405, "MethodNotAllowed", f"the server does not allow this method on the requested resource ({method})"
    )

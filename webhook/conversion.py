"""ConversionReview v1 framing for ``POST /convert`` (apiextensions.k8s.io/v1).

This module knows the wire only: envelope checks, uid echo, one converter call per object from
the table in :mod:`policies.conversion`, and the response. What a conversion means lives in the
kind modules there. The HTTP layer maps :class:`MalformedReview` to HTTP 400 with its message;
everything else is answered with HTTP 200 and ``result.status`` Success or Failed, because the
apiserver reads a failed conversion from the result, not from the status code.

The apiserver rejects a response that changes an object's kind, name, namespace or uid, and keeps
only label and annotation changes from the rest of ``metadata``; we check the same before
answering, so a converter bug surfaces as a Failed result naming the object instead of as data
silently replaced by the apiserver.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from policies.conversion import CONVERTERS, ConversionError
from policies.objects import json_type, shown
from webhook.nesting import depth_problem

API_VERSION: Final = "apiextensions.k8s.io/v1"
KIND: Final = "ConversionReview"

NOT_A_REVIEW = f"expected an {API_VERSION} {KIND}, got {{got}}"
NO_REQUEST = "ConversionReview has no request object"
NO_UID = "ConversionReview request has no uid"
NO_DESIRED_VERSION = "ConversionReview request has no desiredAPIVersion"
BAD_DESIRED_VERSION = "ConversionReview request.desiredAPIVersion {version!r} is not group/version"
OBJECTS_NOT_A_LIST = "ConversionReview request.objects must be an array"

FAILED = "objects[{index}] ({subject}): {reason}"
"""Per-object failure, as ``result.message``: the index, the object, then the reason."""
NOT_AN_OBJECT = "not a Kubernetes object"
NO_API_VERSION = "apiVersion must be group/version, got {got}"
NO_KIND = "kind must be a non-empty string"
NO_METADATA = "metadata must be an object"
OTHER_GROUP = "cannot convert {api_version} to {desired}: the API group differs"
NO_CONVERTER = "no conversion for {kind}.{group} from {source} to {target}"
CONVERTER_CHANGED = "internal error: the converter changed {field}"
CONVERTER_CRASHED = "internal error: {error}"

PRESERVED_METADATA_EXCEPT: Final = frozenset({"labels", "annotations"})
"""Only these metadata fields may differ between an object and its conversion."""


class MalformedReview(ValueError):
    """The envelope itself is unusable (HTTP 400); per-object problems are a Failed result instead."""


def convert_review(review: Mapping[str, Any]) -> dict[str, Any]:
    """Answer one ConversionReview; raises :class:`MalformedReview` only for a bad envelope."""
    uid, desired, objects = _request(review)
    group, _, version = desired.partition("/")
    converted: list[dict[str, Any] | Mapping[str, Any]] = []
    for index, obj in enumerate(objects):
        try:
            converted.append(_convert_one(obj, desired, group, version))
        except ConversionError as err:
            return _response(uid, _failed(index, obj, str(err)))
        except Exception as err:  # a converter bug must fail this review, not the server
            return _response(uid, _failed(index, obj, CONVERTER_CRASHED.format(error=f"{type(err).__name__}: {err}")))
    return _response(uid, {"status": "Success"}, converted)


def _request(review: Mapping[str, Any]) -> tuple[str, str, list[Any]]:
    if not isinstance(review, Mapping) or review.get("apiVersion") != API_VERSION or review.get("kind") != KIND:
        got = (
            f"{shown(review.get('apiVersion'))} {shown(review.get('kind'))}"
            if isinstance(review, Mapping)
            else json_type(review)
        )
        raise MalformedReview(NOT_A_REVIEW.format(got=got))
    request = review.get("request")
    if not isinstance(request, Mapping):
        raise MalformedReview(NO_REQUEST)
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise MalformedReview(NO_UID)
    desired = request.get("desiredAPIVersion")
    if not isinstance(desired, str) or not desired:
        raise MalformedReview(NO_DESIRED_VERSION)
    group, slash, version = desired.partition("/")
    if not (group and slash and version) or "/" in version:
        raise MalformedReview(BAD_DESIRED_VERSION.format(version=desired))
    objects = request.get("objects")
    if not isinstance(objects, list):
        raise MalformedReview(OBJECTS_NOT_A_LIST)
    return uid, desired, objects


def _convert_one(obj: Any, desired: str, group: str, version: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise ConversionError(NOT_AN_OBJECT)
    # Admission refuses the same objects (policies/nesting.py), so only one stored before that
    # rule existed gets here; answering Failed names it instead of an unencodable answer (500).
    if too_deep := depth_problem(obj):
        raise ConversionError(too_deep)
    api_version = obj.get("apiVersion")
    obj_group, slash, obj_version = api_version.partition("/") if isinstance(api_version, str) else ("", "", "")
    if not (obj_group and slash and obj_version):
        raise ConversionError(
            NO_API_VERSION.format(got=repr(api_version) if isinstance(api_version, str) else shown(api_version))
        )
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ConversionError(NO_KIND)
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping):
        raise ConversionError(NO_METADATA)
    if obj_group != group:
        raise ConversionError(OTHER_GROUP.format(api_version=api_version, desired=desired))
    if obj_version == version:
        return obj
    converter = CONVERTERS.get((group, kind, obj_version, version))
    if converter is None:
        raise ConversionError(NO_CONVERTER.format(kind=kind, group=group, source=obj_version, target=version))
    result = converter(obj)
    result["apiVersion"] = desired
    _check_identity(obj, metadata, result)
    return result


def _check_identity(obj: Mapping[str, Any], metadata: Mapping[str, Any], result: Mapping[str, Any]) -> None:
    """What the apiserver would refuse or silently revert (reference 2.5)."""
    if result.get("kind") != obj.get("kind"):
        raise ConversionError(CONVERTER_CHANGED.format(field="kind"))
    converted = result.get("metadata")
    if converted is metadata:
        return
    if not isinstance(converted, Mapping):
        raise ConversionError(CONVERTER_CHANGED.format(field="metadata"))
    for name in metadata.keys() | converted.keys():
        if name in PRESERVED_METADATA_EXCEPT:
            continue
        before, after = metadata.get(name), converted.get(name)
        if before is not after and before != after:
            raise ConversionError(CONVERTER_CHANGED.format(field=f"metadata.{name}"))


def _failed(index: int, obj: Any, reason: str) -> dict[str, str]:
    return {"status": "Failed", "message": FAILED.format(index=index, subject=_describe(obj), reason=reason)}


def _describe(obj: Any) -> str:
    """``Kind ns/name apiVersion`` as far as the object allows, for messages."""
    if not isinstance(obj, Mapping):
        return "not an object"
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    name, namespace = metadata.get("name"), metadata.get("namespace")
    name = shown(name) if name else "<unnamed>"
    ref = f"{shown(namespace)}/{name}" if namespace else name
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    return f"{shown(kind) if kind else '<no kind>'} {ref} {shown(api_version) if api_version else '<no apiVersion>'}"


def _response(
    uid: str, result: dict[str, str], converted: list[dict[str, Any] | Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "result": result}
    if converted is not None:
        response["convertedObjects"] = converted
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}

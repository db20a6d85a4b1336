"""The normalized admission request every rule receives.

The wire format (AdmissionReview v1) is parsed by ``webhook.admission``; rules only ever see
this small, immutable shape so they can be called from tests and from the sidecar alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

Obj = Mapping[str, Any]
"""A Kubernetes object as decoded JSON. Rules must treat it as read-only."""


class Operation(StrEnum):
    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    CONNECT = "CONNECT"


@dataclass(frozen=True, slots=True)
class GroupKind:
    """An API group and kind; versions are a wire detail (conversion makes them equivalent)."""

    group: str
    kind: str

    def __str__(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind


@dataclass(frozen=True, slots=True)
class UserInfo:
    username: str = ""
    groups: tuple[str, ...] = ()
    uid: str = ""


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """One admission call, normalized.

    ``object`` is absent on DELETE and ``old_object`` on CREATE, as on the wire. ``name`` and
    ``namespace`` come from the request (on CREATE with ``generateName`` the name may be empty).
    """

    uid: str
    operation: Operation
    kind: GroupKind
    version: str = ""
    name: str = ""
    namespace: str = ""
    sub_resource: str = ""
    object: Obj | None = None
    old_object: Obj | None = None
    user: UserInfo = field(default_factory=UserInfo)
    dry_run: bool = False

    @property
    def subject(self) -> Obj:
        """The object the request is about: the new object, or the old one on DELETE."""
        return self.object if self.object is not None else (self.old_object or {})

    @property
    def ref(self) -> str:
        """``namespace/name`` (or ``name`` for cluster-scoped objects), as messages print it."""
        metadata = self.subject.get("metadata") if isinstance(self.subject, Mapping) else None
        name = self.name or str((metadata.get("name") if isinstance(metadata, Mapping) else None) or "")
        return f"{self.namespace}/{name}" if self.namespace else name

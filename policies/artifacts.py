"""Where a ComponentVersion's artifact lives in its registry (OCM naming in OCI), as pure functions.

The availability loop, the referenced set and reclamation all need the same answer to "which
manifest backs this catalog entry", so it is computed once here from the objects alone:

- the Component gives the registry (``spec.registry``, ``host[:port]``), the transport
  (``spec.scheme``: ``http`` means plain HTTP, ``https`` or empty means TLS) and
  ``spec.repository`` = ``<base>/<OCM component name>`` as SolAr discovery writes it;
- OCM stores every version of a component in ``<base>/component-descriptors/<component>``
  (ocm-spec, OCI storage backend) and tags a version with build metadata ``+`` encoded as
  ``.build-`` (``1.2.3+ci.42`` -> ``1.2.3.build-ci.42``; Helm's ``_`` is a different rule);
- the ComponentVersion gives the version (``spec.tag``) and, when discovery saw a digest, the
  label ``solar.opendefense.cloud/digest``.

The digest label is ``<hex>`` minus ``sha256:`` cut to 63 characters (a label value's limit),
and a sha256 digest has 64 hex digits, so the label as discovery writes it is always one digit
short: it cannot address a manifest. Only a label of the full 64 hex digits (hand-written) is
used as a digest. A shorter all-hex label becomes :attr:`ArtifactRef.digest_prefix`: the
manifest is looked up by tag and the prefix tells whether the tag still resolves to the
manifest discovery saw (:meth:`ArtifactRef.matches`). Any other label value is ignored.

The Component's ``spec.repository`` does not say where the base ends and the OCM component name
begins (``test/opendefense.cloud/ocm-demo``), so :func:`descriptor_repository` splits it where
the rest, named as discovery names Components (``SanitizeWithHash``), gives the Component's own
name; failing that, before the first segment that is a DNS domain (OCM component names start
with one). A repository that already contains ``component-descriptors`` is taken as it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from policies.kinds import COMPONENT
from policies.model import Obj
from policies.objects import dig, labels_of, name_of, namespace_of, ref_of
from policies.view import View

OCM_META_SEPARATOR = ".build-"
"""OCM encodes semver build metadata ``+`` as ``.build-`` in tags (Helm uses ``_`` instead)."""

COMPONENT_DESCRIPTORS = "component-descriptors"
"""The path segment below which OCM stores component versions; reclamation stays below it."""

DIGEST_LABEL = "solar.opendefense.cloud/digest"
SHA256 = "sha256:"

_HEX = re.compile(r"[0-9a-f]+")
_FULL_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
# Distribution spec grammar (spec.md, "Pulling manifests"); a name that fails it is never requested.
REPOSITORY_NAME = re.compile(r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*")
TAG_NAME = re.compile(r"[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}")
# The start of an OCM component name: a DNS domain with at least one dot (ocm-spec, component identity).
_DOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\.[a-z]{2,}")
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
_SCHEMES: Mapping[str, bool] = {"": False, "https": False, "http": True}
"""``spec.scheme`` -> plain HTTP. Discovery writes ``http`` or ``https``; empty means TLS."""


# --- OCM naming ----------------------------------------------------------------------------------


def ocm_tag(version: str) -> str:
    """The OCI tag of an OCM component version: ``1.2.3+ci.42`` -> ``1.2.3.build-ci.42``."""
    return version.replace("+", OCM_META_SEPARATOR, 1)


def ocm_version(tag: str) -> str:
    """The OCM version a tag encodes: ``1.2.3.build-ci.42`` -> ``1.2.3+ci.42`` (inverse of :func:`ocm_tag`)."""
    return tag.replace(OCM_META_SEPARATOR, "+", 1)


def component_descriptor_repository(base: str, component: str) -> str:
    """The repository holding every version of ``component`` below ``base``.

    ``("ocm", "example.com/demo")`` -> ``ocm/component-descriptors/example.com/demo``; an empty base
    gives the root-level form ``component-descriptors/example.com/demo``.
    """
    parts = [p for p in (base.strip("/"), COMPONENT_DESCRIPTORS, component.strip("/")) if p]
    return "/".join(parts)


def split_component_descriptor_repository(repository: str) -> tuple[str, str] | None:
    """``(base, component)`` of a component-descriptor repository, ``None`` for any other repository.

    The first ``component-descriptors`` path segment splits it, as SolAr's scanner does.
    """
    segments = repository.strip("/").split("/")
    if COMPONENT_DESCRIPTORS not in segments:
        return None
    at = segments.index(COMPONENT_DESCRIPTORS)
    component = "/".join(segments[at + 1 :])
    if not component:
        return None
    return "/".join(segments[:at]), component


def is_managed_repository(repository: str) -> bool:
    """Whether reclamation may touch ``repository``: only OCM component-descriptor repositories."""
    return split_component_descriptor_repository(repository) is not None


def sanitize_with_hash(name: str) -> str:
    """The Kubernetes name SolAr discovery gives the Component of OCM component ``name``.

    Mirrors ``SanitizeWithHash`` (solution-arsenal ``pkg/discovery/helpers.go``): lowercase, runs of
    anything but ``[a-z0-9]`` become ``-``, trimmed, cut to 63; from 57 characters on, the first 57
    plus ``-`` and the FNV-1a 32-bit hash (hex) of the original name.
    """
    clean = _NOT_ALNUM.sub("-", name.lower()).strip("-")
    if len(clean) > 63:
        clean = clean[:63].rstrip("-")
    if len(clean) < 57:
        return clean
    return f"{clean[:57]}-{_fnv1a32(name.encode()):x}"


def _fnv1a32(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def descriptor_repository(repository: str, component_name: str = "") -> str | None:
    """``<base>/component-descriptors/<component>`` for a Component's ``spec.repository``.

    ``component_name`` is the Component's ``metadata.name``; it picks the split point when the
    name was derived from the OCM component name (discovery's Components). ``None`` when no split
    point can be found.
    """
    repository = repository.strip("/")
    if is_managed_repository(repository):
        return repository
    segments = repository.split("/")
    if component_name:
        for at in range(len(segments)):
            if sanitize_with_hash("/".join(segments[at:])) == component_name:
                return component_descriptor_repository("/".join(segments[:at]), "/".join(segments[at:]))
    for at, segment in enumerate(segments[:-1]):
        if _DOMAIN.fullmatch(segment):
            return component_descriptor_repository("/".join(segments[:at]), "/".join(segments[at:]))
    return None


# --- Resolution ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArtifactRef:
    """The coordinates of the manifest backing one ComponentVersion.

    ``digest`` (``sha256:<64 hex>``) is set only from a full digest label; the manifest is then
    looked up by digest, otherwise by ``tag``. ``digest_prefix`` is the shortened label, for
    :meth:`matches`.
    """

    registry: str
    repository: str
    tag: str
    digest: str | None = None
    plain_http: bool = False
    digest_prefix: str = ""

    @property
    def reference(self) -> str:
        """What a manifest request names: the digest when known, else the tag."""
        return self.digest or self.tag

    def __str__(self) -> str:
        sep = "@" if self.digest else ":"
        return f"{self.registry}/{self.repository}{sep}{self.reference}"

    def matches(self, digest: str | None) -> bool:
        """Whether a resolved ``digest`` is the manifest the label names (True when nothing to compare)."""
        if not digest:
            return True
        if self.digest:
            return digest == self.digest
        if self.digest_prefix:
            return digest.removeprefix(SHA256).startswith(self.digest_prefix)
        return True


class UnresolvedReason(StrEnum):
    """Why a ComponentVersion's artifact has no coordinates (each leaves the referenced set incomplete)."""

    NO_COMPONENT_REF = "NoComponentRef"
    COMPONENT_MISSING = "ComponentMissing"
    NO_REGISTRY = "NoRegistry"
    UNKNOWN_SCHEME = "UnknownScheme"
    NO_REPOSITORY = "NoRepository"
    BAD_REPOSITORY = "BadRepository"
    NO_TAG = "NoTag"
    BAD_TAG = "BadTag"


MSG_UNRESOLVED: Mapping[UnresolvedReason, str] = {
    UnresolvedReason.NO_COMPONENT_REF: "spec.componentRef.name is empty",
    UnresolvedReason.COMPONENT_MISSING: "Component {component} does not exist",
    UnresolvedReason.NO_REGISTRY: "Component {component} has an empty spec.registry",
    UnresolvedReason.UNKNOWN_SCHEME: "Component {component} has spec.scheme {scheme!r}; expected http or https",
    UnresolvedReason.NO_REPOSITORY: "Component {component} has an empty spec.repository",
    UnresolvedReason.BAD_REPOSITORY: (
        "Component {component} spec.repository {repository!r} gives no valid component-descriptor repository"
    ),
    UnresolvedReason.NO_TAG: "spec.tag is empty",
    UnresolvedReason.BAD_TAG: "spec.tag {tag!r} is not a valid OCI tag once '+' becomes '.build-'",
}


@dataclass(frozen=True, slots=True)
class Unresolved:
    """A ComponentVersion whose artifact cannot be located; ``message`` names what to fix."""

    cv: str
    reason: UnresolvedReason
    message: str

    def __str__(self) -> str:
        return f"ComponentVersion {self.cv}: {self.message}"


def resolve_artifact(cv: Obj, component: Obj | None) -> ArtifactRef | Unresolved:
    """The artifact of ``cv`` given its Component (``None`` when the Component is absent)."""
    key = ref_of(cv)
    component_name = str(dig(cv, "spec", "componentRef", "name", default=""))
    component_key = f"{namespace_of(cv)}/{component_name}"

    def unresolved(reason: UnresolvedReason, **fields: str) -> Unresolved:
        return Unresolved(key, reason, MSG_UNRESOLVED[reason].format(component=component_key, **fields))

    if not component_name:
        return unresolved(UnresolvedReason.NO_COMPONENT_REF)
    if component is None:
        return unresolved(UnresolvedReason.COMPONENT_MISSING)
    registry = str(dig(component, "spec", "registry", default="")).strip().rstrip("/")
    scheme = str(dig(component, "spec", "scheme", default="")).strip().lower()
    raw_repository = str(dig(component, "spec", "repository", default="")).strip()
    version = str(dig(cv, "spec", "tag", default="")).strip()
    if not registry:
        return unresolved(UnresolvedReason.NO_REGISTRY)
    if scheme not in _SCHEMES:
        return unresolved(UnresolvedReason.UNKNOWN_SCHEME, scheme=scheme)
    if not raw_repository:
        return unresolved(UnresolvedReason.NO_REPOSITORY)
    repository = descriptor_repository(raw_repository, name_of(component))
    if repository is None or not REPOSITORY_NAME.fullmatch(repository):
        return unresolved(UnresolvedReason.BAD_REPOSITORY, repository=raw_repository)
    if not version:
        return unresolved(UnresolvedReason.NO_TAG)
    tag = ocm_tag(version)
    if not TAG_NAME.fullmatch(tag):
        return unresolved(UnresolvedReason.BAD_TAG, tag=version)
    digest, prefix = digest_from_label(labels_of(cv).get(DIGEST_LABEL, ""))
    return ArtifactRef(registry, repository, tag, digest, _SCHEMES[scheme], prefix)


_DEFAULT_PORTS: Mapping[bool, str] = {False: ":443", True: ":80"}
"""plain HTTP -> the port a host without one is reached on."""


def registry_key(host: str, plain_http: bool = False) -> str:
    """One spelling per registry: ``Reg.Example:443`` and ``reg.example`` are the same host.

    Host names are case-insensitive and a scheme's default port may be written or left out. The
    referenced set is keyed by this, and reclamation looks a registry up by it: a Component that
    spelled its host differently from the Registry must still keep its artifacts.
    """
    key = host.strip().rstrip("/").lower()
    return key.removesuffix(_DEFAULT_PORTS[plain_http])


def digest_from_label(value: str) -> tuple[str | None, str]:
    """``(digest, prefix)`` from a digest label: a full digest, a shortened one to compare, or neither."""
    value = value.strip().lower().removeprefix(SHA256)
    if _FULL_SHA256_HEX.fullmatch(value):
        return SHA256 + value, ""
    if _HEX.fullmatch(value):
        return None, value
    return None, ""


def artifact_of(cv: Obj, view: View) -> ArtifactRef | Unresolved:
    """:func:`resolve_artifact` with the Component read from ``view`` (same namespace, LocalObjectReference)."""
    component_name = str(dig(cv, "spec", "componentRef", "name", default=""))
    component = view.get(COMPONENT, component_name, namespace_of(cv)) if component_name else None
    return resolve_artifact(cv, component)

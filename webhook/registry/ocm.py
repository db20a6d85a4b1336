"""OCM naming conventions in OCI, as small pure functions.

They belong with the policy layer in spirit (no I/O, no clock); they live here until a second
caller outside the registry client needs them. Source: ocm-spec ``doc/04-extensions/03-storage-backends/oci.md``
and ocm ``componentmapping/constants.go``.
"""

from __future__ import annotations

OCM_META_SEPARATOR = ".build-"
"""OCM encodes semver build metadata ``+`` as ``.build-`` in tags (Helm uses ``_`` instead)."""

COMPONENT_DESCRIPTORS = "component-descriptors"


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

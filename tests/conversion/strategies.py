"""Hypothesis strategies for PackageRevision objects in each version.

Objects use every field the mapping tables name, in every shape the converters distinguish
(absent, empty, mappable, not mappable, colliding labels, a foreign value in the carried-data
annotation), plus unknown extra fields. Unknown fields use an ``x-`` prefix: the names one version
gives a meaning to are reserved in the other (the apiserver prunes them), see docs/conversion.md.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from policies.conversion import CONVERSION_DATA

Obj = dict[str, Any]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)
names = st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)
extra_keys = st.text(max_size=8).map(lambda s: f"x-{s}")
extras = st.dictionaries(extra_keys, json_values, max_size=2)


def optional(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Obj]:
    """An object with any subset of ``fields``."""
    return st.fixed_dictionaries({}, optional=fields)


@st.composite
def with_extras(draw: st.DrawFn, base: st.SearchStrategy[Obj]) -> Obj:
    return {**draw(extras), **draw(base)}


def foreign_annotation(consumed_by: str) -> st.SearchStrategy[str]:
    """A value already in the reserved annotation that is not a payload from ``consumed_by``."""
    others = [v for v in ("v1alpha1", "v1alpha2", "v9") if v != consumed_by]
    stale = st.builds(
        lambda source, data: json.dumps({"from": source, **data}),
        st.sampled_from(others),
        st.dictionaries(extra_keys, scalars, max_size=2),
    )
    return st.one_of(st.text(max_size=20), stale, st.just("{not json"), st.just("[1, 2]"))


@st.composite
def metadata(draw: st.DrawFn, label_keys: list[str], consumed_by: str) -> Obj:
    """metadata with name, namespace, uid and maybe labels (some of ``label_keys``) and annotations.

    ``consumed_by``: the version whose payload the object must not carry (it would be restored).
    """
    meta: Obj = {"name": draw(names), "namespace": draw(names), "uid": draw(st.uuids()).hex}
    meta.update(draw(optional(resourceVersion=st.integers(1, 10**9).map(str), generation=st.integers(1, 99))))
    labels = draw(
        st.none() | st.dictionaries(st.sampled_from([*label_keys, "app", "team"]), st.text(max_size=6), max_size=4)
    )
    if labels is not None:
        meta["labels"] = labels
    annotations = draw(
        st.none() | st.dictionaries(st.sampled_from(["a.io/x", "b.io/y"]), st.text(max_size=6), max_size=2)
    )
    if annotations is not None:
        meta["annotations"] = annotations
        if draw(st.booleans()):
            annotations[CONVERSION_DATA] = draw(foreign_annotation(consumed_by))
    return meta


# -- PackageRevision ---------------------------------------------------------------------------
PR_LABELS = ["kpt.dev/latest-revision", "porch.kpt.dev/latest-revision"]
ref = with_extras(optional(name=names))
upstream = with_extras(optional(type=st.sampled_from(["git", "oci"]), git=json_values))
lifecycles = st.sampled_from(["", "Draft", "Proposed", "Published", "DeletionProposed"])
times = st.datetimes().map(lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ"))
conditions = st.lists(
    with_extras(optional(type=names, status=st.sampled_from(["True", "False"]), reason=names, message=st.text())),
    max_size=3,
)

task_bodies = {
    "init": with_extras(optional(subpackage=names, description=st.text(), keywords=st.lists(names), site=names)),
    "clone": with_extras(optional(upstreamRef=upstream, strategy=names)),
    "edit": with_extras(optional(sourceRef=ref)),
    # currentPackage is the v1alpha2 name of localPackageRevisionRef: a body with both cannot be renamed.
    "upgrade": with_extras(
        optional(
            oldUpstream=ref,
            newUpstream=ref,
            localPackageRevisionRef=ref,
            currentPackage=ref,
            strategy=st.just("resource-merge"),
        )
    ),
    "render": optional(),
    "eval": with_extras(optional(image=names)),
}


@st.composite
def task(draw: st.DrawFn) -> Obj:
    task_type = draw(st.sampled_from(sorted(task_bodies)))
    result: Obj = {"type": task_type, **draw(extras)}
    shape = draw(st.sampled_from(["body", "body", "none", "scalar"]))
    if shape == "body":
        result[task_type] = draw(task_bodies[task_type])
    elif shape == "scalar":
        result[task_type] = draw(scalars)
    return result


def repeated(item: st.SearchStrategy[Any], small: int) -> st.SearchStrategy[list[Any]]:
    """Short lists, empty ones, and large ones (a short list repeated 50 to 300 times)."""
    short = st.lists(item, max_size=small)
    large = st.tuples(st.lists(item, min_size=1, max_size=5), st.integers(50, 300)).map(lambda p: p[0] * p[1])
    return st.one_of(short, st.just([]), large)


tasks = repeated(task(), small=4)

v2_source_members = {
    "init": task_bodies["init"],
    "cloneFrom": upstream,
    "copyFrom": ref,
    "upgrade": with_extras(
        optional(oldUpstream=ref, newUpstream=ref, currentPackage=ref, localPackageRevisionRef=ref, strategy=names)
    ),
}
v2_sources = st.one_of(
    st.sampled_from(sorted(v2_source_members)).flatmap(lambda k: v2_source_members[k].map(lambda v: {k: v})),
    st.just({}),
    st.fixed_dictionaries({"init": task_bodies["init"], "copyFrom": ref}),
    st.fixed_dictionaries({"copyFrom": ref}).flatmap(lambda s: extras.map(lambda e: {**e, **s})),
    st.fixed_dictionaries({"init": scalars}),
    scalars,
    st.lists(scalars, max_size=2),
)
readiness = repeated(with_extras(optional(conditionType=names)), small=2)
common_spec = {
    "packageName": names,
    "repository": names,
    "workspaceName": names,
    "lifecycle": lifecycles,
    "readinessGates": readiness,
    "packageMetadata": optional(labels=st.dictionaries(names, names, max_size=2)),
}


@st.composite
def package_revision_v1alpha1(draw: st.DrawFn) -> Obj:
    obj: Obj = {"apiVersion": "porch.kpt.dev/v1alpha1", "kind": "PackageRevision", **draw(extras)}
    obj["metadata"] = draw(metadata(PR_LABELS, consumed_by="v1alpha2"))
    spec = draw(st.none() | with_extras(optional(**common_spec, revision=st.integers(-1, 99), tasks=tasks)))
    if spec is not None:
        obj["spec"] = spec
    status = draw(
        st.none()
        | with_extras(
            optional(
                publishedBy=names,
                publishTimestamp=times,
                upstreamLock=json_values,
                selfLock=json_values,
                deployment=st.booleans(),
                conditions=conditions,
            )
        )
    )
    if status is not None:
        obj["status"] = status
    return obj


@st.composite
def package_revision_v1alpha2(draw: st.DrawFn) -> Obj:
    obj: Obj = {"apiVersion": "porch.kpt.dev/v1alpha2", "kind": "PackageRevision", **draw(extras)}
    obj["metadata"] = draw(metadata(PR_LABELS, consumed_by="v1alpha1"))
    spec = draw(st.none() | with_extras(optional(**common_spec, source=v2_sources)))
    if spec is not None:
        obj["spec"] = spec
    status = draw(
        st.none()
        | with_extras(
            optional(
                revision=st.integers(-1, 99),
                publishedBy=names,
                publishedAt=times,
                upstreamLock=json_values,
                observedGeneration=st.integers(0, 99),
                observedPrrResourceVersion=names,
                renderingPrrResourceVersion=names,
                creationSource=st.sampled_from(["init", "clone", "copy", "upgrade"]),
                packageConditions=json_values,
                conditions=conditions,
            )
        )
    )
    if status is not None:
        obj["status"] = status
    return obj

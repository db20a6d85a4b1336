"""Package bookkeeping plan: revision numbers, publish record, latest label, finalizer release.

Each case is the revisions of one package (and whether its Repository exists) and the exact
writes expected; every case also checks that applying those writes yields a steady state.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from policies.kinds import PACKAGE_REVISION, REPOSITORY
from policies.model import Obj
from policies.package_bookkeeping import LATEST_LABEL, package_writes, plan
from policies.packages import FINALIZER, PUBLISHED_AT, PUBLISHED_BY
from policies.view import MemoryView

NS = "team-a"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
NOW_TEXT = "2026-11-29T12:00:00Z"
REPO_UID = "uid-repo"
ALICE = "alice"
T1 = "2026-11-28T10:00:00Z"
T2 = "2026-11-28T11:00:00Z"


def rev(
    name: str,
    lifecycle: str = "Published",
    *,
    number: int | None = None,
    latest: str | None = "false",
    record: tuple[str, str] | None = None,
    status: dict[str, Any] | None = None,
    terminating: bool = False,
    owner_uid: str = REPO_UID,
    package: str = "web",
) -> Obj:
    st = dict(status or {})
    if number is not None:
        st["revision"] = number
    meta: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "uid": f"uid-{name}",
        "resourceVersion": "1",
        "creationTimestamp": "2026-11-01T00:00:00Z",
        "finalizers": [FINALIZER],
        "labels": {} if latest is None else {LATEST_LABEL: latest},
        "ownerReferences": [
            {
                "apiVersion": "config.porch.kpt.dev/v1alpha1",
                "kind": "Repository",
                "name": "blueprints",
                "uid": owner_uid,
            }
        ],
    }
    if record:
        meta["annotations"] = {PUBLISHED_BY: record[0], PUBLISHED_AT: record[1]}
    if terminating:
        meta["deletionTimestamp"] = "2026-11-29T11:00:00Z"
    body: Obj = {
        "apiVersion": "porch.kpt.dev/v1alpha2",
        "kind": "PackageRevision",
        "metadata": meta,
        "spec": {"repository": "blueprints", "packageName": package, "workspaceName": name, "lifecycle": lifecycle},
    }
    if st:
        body["status"] = st
    return body


def view_of(revisions: list[Obj], repo_uid: str | None = REPO_UID, repo_deleting: bool = False) -> MemoryView:
    view = MemoryView()
    for r in revisions:
        view.put(PACKAGE_REVISION, r)
    if repo_uid is not None:
        meta = {"name": "blueprints", "namespace": NS, "uid": repo_uid}
        if repo_deleting:
            meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        view.put(REPOSITORY, {"metadata": meta})
    return view


@dataclass(frozen=True)
class Want:
    status: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    release: bool = False


@dataclass(frozen=True)
class Case:
    id: str
    revisions: list[Obj]
    want: dict[str, Want] = field(default_factory=dict)
    repo_uid: str | None = REPO_UID
    repo_deleting: bool = False


def _without_finalizer(revision: Obj) -> Obj:
    """Our finalizer already released; another controller's still holds the object."""
    revision["metadata"]["finalizers"] = ["example.com/other"]
    return revision


LATEST_TRUE = {"labels": {LATEST_LABEL: "true"}}
LATEST_FALSE = {"labels": {LATEST_LABEL: "false"}}
DROP_RECORD = {PUBLISHED_BY: None, PUBLISHED_AT: None}

CASES = [
    Case("steady: drafts only", [rev("a", "Draft"), rev("b", "Proposed")]),
    Case("steady: two numbered, highest is latest", [rev("a", number=1), rev("b", number=2, latest="true")]),
    Case(
        "first publish: number 1, record moved, latest",
        [rev("a", record=(ALICE, T1)), rev("b", "Draft")],
        {
            "a": Want(
                {"revision": 1, "publishedBy": ALICE, "publishedAt": T1},
                {**LATEST_TRUE, "annotations": DROP_RECORD},
            )
        },
    ),
    Case(
        "second publish: highest + 1, label moves",
        [rev("a", number=1, latest="true"), rev("b", record=(ALICE, T2))],
        {
            "a": Want(metadata=LATEST_FALSE),
            "b": Want(
                {"revision": 2, "publishedBy": ALICE, "publishedAt": T2}, {**LATEST_TRUE, "annotations": DROP_RECORD}
            ),
        },
    ),
    Case(
        "two published at once: numbered in publish order",
        [rev("late", record=(ALICE, T2)), rev("early", record=(ALICE, T1))],
        {
            "early": Want({"revision": 1, "publishedBy": ALICE, "publishedAt": T1}, {"annotations": DROP_RECORD}),
            "late": Want(
                {"revision": 2, "publishedBy": ALICE, "publishedAt": T2}, {**LATEST_TRUE, "annotations": DROP_RECORD}
            ),
        },
    ),
    Case(
        "DeletionProposed counts as published for numbers and latest",
        [rev("a", "DeletionProposed", number=3), rev("b", record=(ALICE, T2))],
        {
            "b": Want(
                {"revision": 4, "publishedBy": ALICE, "publishedAt": T2}, {**LATEST_TRUE, "annotations": DROP_RECORD}
            )
        },
    ),
    Case(
        "a terminating revision keeps its number but loses latest",
        [
            rev("a", number=1),
            rev("b", "DeletionProposed", number=2, latest="true", terminating=True),
            rev("c", record=(ALICE, T2)),
        ],
        {
            "b": Want(release=True),
            "c": Want(
                {"revision": 3, "publishedBy": ALICE, "publishedAt": T2}, {**LATEST_TRUE, "annotations": DROP_RECORD}
            ),
        },
    ),
    Case(
        "deleting the latest moves the label back",
        [rev("a", number=1), rev("b", "DeletionProposed", number=2, latest="true", terminating=True)],
        {"a": Want(metadata=LATEST_TRUE), "b": Want(release=True)},
    ),
    Case(
        "published without any record: publishedAt is now",
        [rev("a")],
        {"a": Want({"revision": 1, "publishedAt": NOW_TEXT}, LATEST_TRUE)},
    ),
    Case(
        "status already holds the record: annotations only dropped",
        [rev("a", number=1, latest="true", record=("bob", T1), status={"publishedBy": ALICE, "publishedAt": T2})],
        {"a": Want(metadata={"annotations": DROP_RECORD})},
    ),
    Case(
        "a missing label on a draft becomes false", [rev("a", "Draft", latest=None)], {"a": Want(metadata=LATEST_FALSE)}
    ),
    Case(
        "a draft claiming latest is corrected", [rev("a", "Draft", latest="true")], {"a": Want(metadata=LATEST_FALSE)}
    ),
    Case("terminating Published with its Repository: blocked", [rev("a", number=1, terminating=True)]),
    Case(
        "a blocked terminating latest gives the label up: exactly one true",
        [rev("a", number=1), rev("b", number=2, latest="true", terminating=True)],
        {"a": Want(metadata=LATEST_TRUE), "b": Want(metadata=LATEST_FALSE)},
    ),
    Case(
        "a terminating latest held by another finalizer gives the label up",
        [
            rev("a", number=1),
            _without_finalizer(rev("b", "DeletionProposed", number=2, latest="true", terminating=True)),
        ],
        {"a": Want(metadata=LATEST_TRUE), "b": Want(metadata=LATEST_FALSE)},
    ),
    Case(
        "terminating Published, Repository gone: released",
        [rev("a", number=1, terminating=True)],
        {"a": Want(release=True)},
        repo_uid=None,
    ),
    Case(
        "terminating Published, Repository re-created: released",
        [rev("a", number=1, terminating=True)],
        {"a": Want(release=True)},
        repo_uid="uid-other",
    ),
    Case(
        "terminating Published, Repository being deleted (a foreground cascade waits for it): released",
        [rev("a", number=1, terminating=True)],
        {"a": Want(release=True)},
        repo_deleting=True,
    ),
    Case("terminating Draft: released", [rev("a", "Draft", terminating=True)], {"a": Want(release=True)}),
    Case("terminating Proposed: released", [rev("a", "Proposed", terminating=True)], {"a": Want(release=True)}),
]


def _got(revisions: list[Obj], repo_uid: str | None, repo_deleting: bool = False) -> dict[str, Want]:
    writes = package_writes(revisions, view_of(revisions, repo_uid, repo_deleting), NOW)
    return {
        w.obj["metadata"]["name"]: Want(
            dict(w.status) if w.status is not None else None,
            dict(w.metadata) if w.metadata is not None else None,
            w.release_finalizer,
        )
        for w in writes
    }


def _apply(revisions: list[Obj], want: dict[str, Want]) -> list[Obj]:
    """What the shell leaves behind; released revisions are gone."""
    out = []
    for r in copy.deepcopy(revisions):
        w = want.get(r["metadata"]["name"])
        if w is None:
            out.append(r)
            continue
        if w.release:
            continue
        if w.status is not None:
            r["status"] = w.status
        meta = r["metadata"]
        for key, changes in (w.metadata or {}).items():
            merged = {**meta.get(key, {}), **changes}
            meta[key] = {k: v for k, v in merged.items() if v is not None}
        out.append(r)
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_package_writes(case: Case) -> None:
    assert _got(case.revisions, case.repo_uid, case.repo_deleting) == case.want


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_applying_the_writes_is_a_steady_state(case: Case) -> None:
    after = _apply(case.revisions, case.want)
    assert _got(after, case.repo_uid, case.repo_deleting) == {}


def test_packages_are_planned_apart_by_repository_and_name() -> None:
    web = [rev("web-a", number=1, latest="true"), rev("web-b", record=(ALICE, T2))]
    api = [rev("api-a", record=(ALICE, T1), package="api")]
    view = view_of([*web, *api])

    planned = plan(view, NOW)

    assert [p.package for p in planned] == [(NS, "blueprints", "api"), (NS, "blueprints", "web")]
    numbers = {w.key: w.status["revision"] for p in planned for w in p.revisions if w.status}
    assert numbers == {f"{NS}/api-a": 1, f"{NS}/web-b": 2}


def test_a_steady_view_plans_nothing() -> None:
    assert plan(view_of([rev("a", number=1, latest="true"), rev("b", "Draft")]), NOW) == ()


def _broken(field_path: tuple[str, ...], value: object, **kwargs: Any) -> Obj:
    bad = rev("bad", number=1, **kwargs)
    target: Any = bad
    for step in field_path[:-1]:
        target = target[step]
    target[field_path[-1]] = value
    return bad


@pytest.mark.parametrize(
    ("bad", "want"),
    [
        pytest.param(
            _broken(("status",), "x", record=(ALICE, T1)),
            Want({"revision": 1, "publishedBy": ALICE, "publishedAt": T1}, {**LATEST_TRUE, "annotations": DROP_RECORD}),
            id="status-a-string",
        ),
        pytest.param(_broken(("metadata", "labels"), "x"), Want(metadata=LATEST_TRUE), id="labels-a-string"),
        pytest.param(_broken(("metadata", "annotations"), "x"), Want(metadata=LATEST_TRUE), id="annotations-a-string"),
        # an owner reference that cannot be read names no other uid: the Repository by name still exists
        pytest.param(_broken(("metadata", "ownerReferences"), "x", terminating=True), None, id="owners-a-string"),
        pytest.param(_broken(("metadata", "ownerReferences"), ["x"], terminating=True), None, id="owner-a-string"),
    ],
)
def test_a_malformed_revision_does_not_stop_the_pass(bad: Obj, want: Want | None) -> None:
    other = rev("other-a", record=(ALICE, T1), package="other")
    planned = {p.package[2]: p for p in plan(view_of([bad, other]), NOW)}
    assert [w.key for w in planned["other"].revisions] == [f"{NS}/other-a"]
    got = {
        w.obj["metadata"]["name"]: Want(
            dict(w.status) if w.status is not None else None,
            dict(w.metadata) if w.metadata is not None else None,
            w.release_finalizer,
        )
        for w in (planned["web"].revisions if "web" in planned else ())
    }
    assert got == ({"bad": want} if want is not None else {})

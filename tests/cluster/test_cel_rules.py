"""Every CEL rule (``x-kubernetes-validations``) in ``manifests/crds`` evaluated by kube-apiserver.

One row per rule and outcome: the object written (a create, or an update of a valid object),
and the apiserver's exact ``422 Invalid`` message, or ``None`` where the write must pass. The
rules are the CRDs' own, so :func:`test_every_cel_rule_in_the_crds_has_a_row` fails when a rule is
added without a row here. CEL runs after the mutating webhooks and before the validating ones, so
the session's server must be up for the guarded kinds (failurePolicy Fail).
"""

from __future__ import annotations

import contextlib
import copy
import re
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.controlplane.cluster import Cluster, ServerProcess
from webhook.kube.client import ApiError, Kube, NotFound

Obj = dict[str, Any]

REPOSITORIES = "/apis/config.porch.kpt.dev/v1alpha1/namespaces/{ns}/repositories"
REVISIONS = "/apis/porch.kpt.dev/v1alpha2/namespaces/{ns}/packagerevisions"
CHART_REPOSITORIES = "/apis/helm.deckhouse.io/v1alpha1/helmclusteraddonrepositories"

GIT = {"repo": "https://git.example.com/blueprints.git", "branch": "main", "directory": "pkgs"}
OCI = {"registry": "registry.example.com/blueprints"}


def git_repository(**spec: Any) -> Obj:
    return {"type": "git", "git": dict(GIT), **spec}


def oci_repository(**spec: Any) -> Obj:
    return {"type": "oci", "oci": dict(OCI), **spec}


def revision_spec(**spec: Any) -> Obj:
    base = {"repository": "blueprints", "packageName": "nginx", "workspaceName": "v1", "source": {"init": {}}}
    return {**base, **spec}


@dataclass(frozen=True)
class Case:
    """``spec`` created; with ``patch`` set, ``spec`` is created first and the merge patch is the write."""

    id: str
    kind: str
    spec: Obj
    patch: Obj | None
    error: str | None
    """``"<field>: Invalid value: <message>"`` as the apiserver words it (a scalar's value quoted before the
    message), or None: accepted."""


REPOSITORY, REVISION, CHART_REPOSITORY = "Repository", "PackageRevision", "HelmClusterAddonRepository"
KINDS = {
    REPOSITORY: ("config.porch.kpt.dev/v1alpha1", REPOSITORIES, 'Repository.config.porch.kpt.dev "{name}"'),
    REVISION: ("porch.kpt.dev/v1alpha2", REVISIONS, 'PackageRevision.porch.kpt.dev "{name}"'),
    CHART_REPOSITORY: (
        "helm.deckhouse.io/v1alpha1",
        CHART_REPOSITORIES,
        'HelmClusterAddonRepository.helm.deckhouse.io "{name}"',
    ),
}
INVALID = re.compile(r'(\S+): Invalid value: (?:"[^"]*": )?(.+)')
SOURCE_ONE_OF = "exactly one of init, cloneFrom, copyFrom, or upgrade must be set"
URL_RULE = "URL must have a valid protocol (http, https, oci) and a non-empty path"

CASES = [
    # Repository spec.git: branch, directory, repo immutable
    Case("git-branch-changed", REPOSITORY, git_repository(), {"spec": {"git": {"branch": "dev"}}},
         "spec.git: Invalid value: spec.git.branch is immutable"),
    Case("git-branch-kept-author-changed", REPOSITORY, git_repository(), {"spec": {"git": {"author": "bob"}}}, None),
    Case("git-branch-set-when-defaulted", REPOSITORY, git_repository(git={"repo": GIT["repo"]}),
         {"spec": {"git": {"branch": "main"}}}, None),
    Case("git-directory-changed", REPOSITORY, git_repository(), {"spec": {"git": {"directory": "other"}}},
         "spec.git: Invalid value: spec.git.directory is immutable"),
    Case("git-directory-removed", REPOSITORY, git_repository(), {"spec": {"git": {"directory": None}}},
         "spec.git: Invalid value: spec.git.directory is immutable"),
    Case("git-directory-added", REPOSITORY, git_repository(git={"repo": GIT["repo"]}),
         {"spec": {"git": {"directory": "pkgs"}}}, "spec.git: Invalid value: spec.git.directory is immutable"),
    Case("git-repo-changed", REPOSITORY, git_repository(), {"spec": {"git": {"repo": "https://git.example.com/x"}}},
         "spec.git: Invalid value: spec.git.repo is immutable"),
    # Repository spec.oci: registry immutable
    Case("oci-registry-changed", REPOSITORY, oci_repository(), {"spec": {"oci": {"registry": "other.example.com/x"}}},
         "spec.oci: Invalid value: spec.oci.registry is immutable"),
    Case("oci-secret-added", REPOSITORY, oci_repository(), {"spec": {"oci": {"secretRef": {"name": "pull"}}}}, None),
    # Repository spec: type immutable, git/oci required by type
    Case("type-changed", REPOSITORY, git_repository(oci=dict(OCI)), {"spec": {"type": "oci"}},
         "spec: Invalid value: spec.type is immutable"),
    Case("type-set-first-time", REPOSITORY, {"git": dict(GIT)}, {"spec": {"type": "git"}}, None),
    Case("git-type-without-git", REPOSITORY, {"type": "git", "oci": dict(OCI)}, None,
         "spec: Invalid value: spec.git is required when spec.type is git"),
    Case("oci-type-without-oci", REPOSITORY, {"type": "oci", "git": dict(GIT)}, None,
         "spec: Invalid value: spec.oci is required when spec.type is oci"),
    Case("git-type-with-git", REPOSITORY, git_repository(), None, None),
    Case("oci-type-with-oci", REPOSITORY, oci_repository(), None, None),
    # PackageRevision (v1alpha2) spec: repository, packageName, workspaceName required and non-empty
    Case("revision-complete", REVISION, revision_spec(), None, None),
    Case("repository-missing", REVISION, {k: v for k, v in revision_spec().items() if k != "repository"}, None,
         "spec: Invalid value: spec.repository is required"),
    Case("repository-empty", REVISION, revision_spec(repository=""), None,
         "spec: Invalid value: spec.repository is required"),
    Case("package-name-missing", REVISION, {k: v for k, v in revision_spec().items() if k != "packageName"}, None,
         "spec: Invalid value: spec.packageName is required"),
    Case("package-name-empty", REVISION, revision_spec(packageName=""), None,
         "spec: Invalid value: spec.packageName is required"),
    Case("workspace-missing", REVISION, {k: v for k, v in revision_spec().items() if k != "workspaceName"}, None,
         "spec: Invalid value: spec.workspaceName is required"),
    Case("workspace-empty", REVISION, revision_spec(workspaceName=""), None,
         "spec: Invalid value: spec.workspaceName is required"),
    # PackageRevision spec.source: exactly one way of making it
    Case("source-empty", REVISION, revision_spec(source={}), None, f"spec.source: Invalid value: {SOURCE_ONE_OF}"),
    Case("source-two", REVISION, revision_spec(source={"init": {}, "copyFrom": {"name": "blueprints.nginx.v0"}}), None,
         f"spec.source: Invalid value: {SOURCE_ONE_OF}"),
    Case("source-copy-from", REVISION, revision_spec(source={"copyFrom": {"name": "blueprints.nginx.v0"}}), None,
         None),
    Case("source-upgrade", REVISION, revision_spec(source={"upgrade": {"oldUpstream": {"name": "a"}}}), None, None),
    # HelmClusterAddonRepository spec.url: a protocol and a path
    Case("url-oci", CHART_REPOSITORY, {"url": "oci://registry.example.com/charts/podinfo"}, None, None),
    Case("url-https", CHART_REPOSITORY, {"url": "https://charts.example.com"}, None, None),
    Case("url-http", CHART_REPOSITORY, {"url": "http://charts.example.com"}, None, None),
    Case("url-ftp", CHART_REPOSITORY, {"url": "ftp://charts.example.com"}, None,
         f'spec.url: Invalid value: "ftp://charts.example.com": {URL_RULE}'),
    Case("url-no-path", CHART_REPOSITORY, {"url": "oci://"}, None, f'spec.url: Invalid value: "oci://": {URL_RULE}'),
    Case("url-changed-to-bare-host", CHART_REPOSITORY, {"url": "https://charts.example.com"},
         {"spec": {"url": "charts.example.com"}}, f'spec.url: Invalid value: "charts.example.com": {URL_RULE}'),
]  # fmt: skip

RULES_COVERED = {
    ("packagerevisions.porch.kpt.dev", "spec.source", SOURCE_ONE_OF),
    ("packagerevisions.porch.kpt.dev", "spec", "spec.repository is required"),
    ("packagerevisions.porch.kpt.dev", "spec", "spec.packageName is required"),
    ("packagerevisions.porch.kpt.dev", "spec", "spec.workspaceName is required"),
    ("repositories.config.porch.kpt.dev", "spec.git", "spec.git.branch is immutable"),
    ("repositories.config.porch.kpt.dev", "spec.git", "spec.git.directory is immutable"),
    ("repositories.config.porch.kpt.dev", "spec.git", "spec.git.repo is immutable"),
    ("repositories.config.porch.kpt.dev", "spec.oci", "spec.oci.registry is immutable"),
    ("repositories.config.porch.kpt.dev", "spec", "spec.type is immutable"),
    ("repositories.config.porch.kpt.dev", "spec", "spec.git is required when spec.type is git"),
    ("repositories.config.porch.kpt.dev", "spec", "spec.oci is required when spec.type is oci"),
    ("helmclusteraddonrepositories.helm.deckhouse.io", "spec.url", URL_RULE),
}
"""(CRD, field, message) of every rule the table exercises."""


def cel_rules(schema: Obj, where: str) -> list[tuple[str, str]]:
    """(field path, message) of every ``x-kubernetes-validations`` entry under ``schema``."""
    found = [(where, str(rule["message"])) for rule in schema.get("x-kubernetes-validations", [])]
    for key, child in (schema.get("properties") or {}).items():
        found += cel_rules(child, f"{where}.{key}" if where else key)
    if isinstance(schema.get("items"), dict):
        found += cel_rules(schema["items"], f"{where}[*]")
    return found


def test_every_cel_rule_in_the_crds_has_a_row(cluster: Cluster) -> None:
    """The rules as shipped (and as kube-apiserver accepted them), each with a rejecting row."""
    shipped = {
        (crd["metadata"]["name"], where, message)
        for crd in cluster.applied
        if crd["kind"] == "CustomResourceDefinition"
        for version in crd["spec"]["versions"]
        for where, message in cel_rules(version["schema"]["openAPIV3Schema"], "")
    }
    rejected = {INVALID.fullmatch(case.error).groups() for case in CASES if case.error}  # type: ignore[union-attr]

    assert shipped == RULES_COVERED
    assert {(where, message) for _, where, message in RULES_COVERED} == rejected


def manifest(case: Case, name: str, ns: str) -> tuple[str, Obj]:
    api_version, path, _ = KINDS[case.kind]
    metadata = {"name": name} if case.kind == CHART_REPOSITORY else {"name": name, "namespace": ns}
    body = {"apiVersion": api_version, "kind": case.kind, "metadata": metadata, "spec": copy.deepcopy(case.spec)}
    return path.format(ns=ns), body


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_cel_rule(case: Case, server: ServerProcess, admin: Kube, ns: str, name: str) -> None:
    path, body = manifest(case, name, ns)
    created = None if case.patch is None else admin.request("POST", path, body=body)
    try:
        if created is None:
            admin.request("POST", path, body=body)
        else:
            admin.request("PATCH", f"{path}/{name}", body=case.patch, content_type="application/merge-patch+json")
    except ApiError as exc:
        assert case.error is not None, f"refused: {exc.status} {exc.message}"
        assert (exc.status, exc.reason) == (422, "Invalid")
        assert exc.message == f"{KINDS[case.kind][2].format(name=name)} is invalid: {case.error}"
        if created is None:
            with pytest.raises(NotFound):
                admin.request("GET", f"{path}/{name}")
        else:
            assert admin.request("GET", f"{path}/{name}")["spec"] == created["spec"]
    else:
        assert case.error is None, f"accepted, expected: {case.error}"
    finally:
        if case.kind == CHART_REPOSITORY:  # cluster-scoped: the namespace's deletion does not take it
            with contextlib.suppress(NotFound):
                admin.request("DELETE", f"{path}/{name}")

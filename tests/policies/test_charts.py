"""The charts family rules (DESIGN.md section 5, "Charts"), table-driven with exact messages."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from policies import charts
from policies.charts import (
    MSG_CHART_TAKEN,
    MSG_FORBIDDEN,
    MSG_OCI_BAD_REPOSITORY,
    MSG_OCI_EMPTY_CHART,
    MSG_OCI_NO_CHART,
    MSG_REPOSITORY_IN_USE,
    MSG_URL_SCHEME,
    MSG_VERSION_MISSING,
    MSG_VERSION_UNUSABLE,
    WARN_NO_USABLE_VERSION,
)
from policies.charts_naming import helm_cluster_addon_chart_name
from policies.config import PolicyConfig
from policies.decision import Decision
from policies.families import INDEXES, TABLES
from policies.identity import Identities
from policies.kinds import HELM_CLUSTER_ADDON, HELM_CLUSTER_ADDON_CHART, HELM_CLUSTER_ADDON_REPOSITORY
from policies.model import AdmissionRequest, GroupKind, Obj, Operation, UserInfo
from policies.rules import Context, RuleFn
from policies.view import MemoryView

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
USER = UserInfo("alice", ("system:authenticated",))
ADMIN = UserInfo("admin", ("system:masters", "system:authenticated"))
GC = UserInfo("system:serviceaccount:kube-system:generic-garbage-collector")
NS_CONTROLLER = UserInfo("system:serviceaccount:kube-system:namespace-controller")
WARDEN = UserInfo("system:serviceaccount:catalog-warden:catalog-warden")

OCI_REPO = "oci-repo"
HTTP_REPO = "http-repo"
CHART = "podinfo"
OCI_CHART_OBJ = helm_cluster_addon_chart_name(OCI_REPO, CHART)
HTTP_CHART_OBJ = helm_cluster_addon_chart_name(HTTP_REPO, CHART)
MT = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"


# --- builders --------------------------------------------------------------------------------------


def repository(name: str, url: str, *, deleting: bool = False) -> Obj:
    meta: dict[str, Any] = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-05-01T11:00:00Z"
    return {
        "apiVersion": "helm.deckhouse.io/v1alpha1",
        "kind": "HelmClusterAddonRepository",
        "metadata": meta,
        "spec": {"url": url},
    }


def chart_object(name: str, versions: list[dict[str, Any]], repo: str = "", chart: str = CHART) -> Obj:
    """A chart object; with ``repo``, labelled as operator-helm labels it (B2), which is how it is found."""
    meta: dict[str, Any] = {"name": name}
    if repo:
        meta["labels"] = {"heritage": "deckhouse", "repository": repo, "chart": chart}
    return {
        "apiVersion": "helm.deckhouse.io/v1alpha1",
        "kind": "HelmClusterAddonChart",
        "metadata": meta,
        "status": {"versions": versions},
    }


def oci_chart(versions: list[dict[str, Any]]) -> Obj:
    return chart_object(OCI_CHART_OBJ, versions, OCI_REPO)


def http_chart(versions: list[dict[str, Any]]) -> Obj:
    return chart_object(HTTP_CHART_OBJ, versions, HTTP_REPO)


def addon(
    name: str,
    repo: str = OCI_REPO,
    chart: str = CHART,
    version: str | None = "1.0.0",
    *,
    last_applied: dict[str, str] | None = None,
    deleting: bool = False,
) -> Obj:
    ref: dict[str, Any] = {"helmClusterAddonChart": chart, "helmClusterAddonRepository": repo}
    if version is not None:
        ref["version"] = version
    meta: dict[str, Any] = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-05-01T11:00:00Z"
        meta["finalizers"] = ["helm.deckhouse.io/cleanup"]
    obj: dict[str, Any] = {
        "apiVersion": "helm.deckhouse.io/v1alpha1",
        "kind": "HelmClusterAddon",
        "metadata": meta,
        "spec": {"chart": ref},
    }
    if last_applied is not None:
        obj["status"] = {"lastAppliedChart": last_applied}
    return obj


def view_of(*items: tuple[GroupKind, Obj]) -> MemoryView:
    view = MemoryView(INDEXES)
    for kind, obj in items:
        view.put(kind, obj)
    return view


def request(
    kind: GroupKind,
    op: Operation,
    obj: Obj | None = None,
    old: Obj | None = None,
    user: UserInfo = USER,
    sub_resource: str = "",
) -> AdmissionRequest:
    subject = obj if obj is not None else old or {}
    return AdmissionRequest(
        uid="uid-1",
        operation=op,
        kind=kind,
        version="v1alpha1",
        name=subject.get("metadata", {}).get("name", ""),
        sub_resource=sub_resource,
        object=obj,
        old_object=old,
        user=user,
    )


def run(
    fn: RuleFn, req: AdmissionRequest, view: MemoryView | None = None, config: PolicyConfig | None = None
) -> Decision:
    return fn(req, Context(view or view_of(), NOW, config or PolicyConfig()))


def rule_names(kind: GroupKind, op: Operation, sub: str = "") -> list[str]:
    return [r.name for r in TABLES["charts"].lookup(False, kind, op, sub)]


# --- registration ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "op", "sub", "names"),
    [
        (HELM_CLUSTER_ADDON_CHART, Operation.CREATE, "", ["charts.chart-module-only"]),
        (HELM_CLUSTER_ADDON_CHART, Operation.UPDATE, "", ["charts.chart-module-only"]),
        (HELM_CLUSTER_ADDON_CHART, Operation.DELETE, "", ["charts.chart-module-only"]),
        (HELM_CLUSTER_ADDON_CHART, Operation.CREATE, "status", ["charts.chart-module-only"]),
        (HELM_CLUSTER_ADDON_CHART, Operation.UPDATE, "status", ["charts.chart-module-only"]),
        (HELM_CLUSTER_ADDON_CHART, Operation.DELETE, "status", ["charts.chart-module-only"]),
        (HELM_CLUSTER_ADDON, Operation.CREATE, "", ["charts.addon-unique-chart", "charts.addon-deployable-version"]),
        (HELM_CLUSTER_ADDON, Operation.UPDATE, "", ["charts.addon-unique-chart", "charts.addon-deployable-version"]),
        (HELM_CLUSTER_ADDON, Operation.UPDATE, "status", []),
        (HELM_CLUSTER_ADDON, Operation.DELETE, "", []),
        (HELM_CLUSTER_ADDON_REPOSITORY, Operation.DELETE, "", ["charts.repository-in-use"]),
        (HELM_CLUSTER_ADDON_REPOSITORY, Operation.CREATE, "", ["charts.repository-url"]),
        (HELM_CLUSTER_ADDON_REPOSITORY, Operation.UPDATE, "", ["charts.repository-url"]),
        (HELM_CLUSTER_ADDON_REPOSITORY, Operation.UPDATE, "status", []),
    ],
)
def test_rules_are_registered_for(kind, op, sub, names):
    assert rule_names(kind, op, sub) == names


def test_only_view_free_rules_skip_the_sync_gate():
    needs = {r.name: r.needs_view for r in charts.RULES}
    assert needs == {
        "charts.chart-module-only": False,
        "charts.addon-unique-chart": True,
        "charts.addon-deployable-version": True,
        "charts.repository-in-use": True,
        "charts.repository-url": False,
    }


def test_no_charts_rule_mutates():
    assert TABLES["charts"].lookup(True, HELM_CLUSTER_ADDON, Operation.CREATE, "") == ()


# --- HelmClusterAddonChart: module identities only ---------------------------------------------------

SA = "system:serviceaccount:"
ALLOWED_IDENTITIES = [
    f"{SA}kube-system:foo",
    f"{SA}d8-system:deckhouse",
    f"{SA}d8-operator-helm:operator-helm-controller",
    f"{SA}d8-operator-helm:nelm-source-controller",
    f"{SA}d8-operator-helm:helm-controller",
    f"{SA}d8-operator-helm:chart-values-controller",
    f"{SA}catalog-warden:catalog-warden",
    f"{SA}kube-system:",  # CEL startsWith matches the bare prefix too
]
DENIED_IDENTITIES = [
    UserInfo(f"{SA}kube-systemx:foo"),
    UserInfo(f"{SA}d8-systemx:foo"),
    UserInfo(f"{SA}kube-system"),
    UserInfo(f"{SA}d8-operator-helm:other-controller"),
    UserInfo(f"{SA}d8-operator-helm:operator-helm-controllerx"),
    UserInfo(f"{SA}catalog-warden:catalog-wardenx"),
    ADMIN,
    UserInfo("alice", ("system:serviceaccounts:kube-system",)),
    UserInfo(""),
]
CHART_OBJ = oci_chart([{"version": "1.0.0", "mediaType": MT}])
CHART_CHANGED = oci_chart([{"version": "1.0.0", "mediaType": MT}, {"version": "2.0.0"}])
CHART_REQUESTS = [
    (Operation.CREATE, "", CHART_OBJ, None),
    (Operation.UPDATE, "", CHART_CHANGED, CHART_OBJ),
    (Operation.DELETE, "", None, CHART_OBJ),
    (Operation.UPDATE, "status", CHART_CHANGED, CHART_OBJ),
]


@pytest.mark.parametrize("username", ALLOWED_IDENTITIES)
@pytest.mark.parametrize(("op", "sub", "obj", "old"), CHART_REQUESTS)
def test_chart_module_identities_may_write_charts(username, op, sub, obj, old):
    req = request(HELM_CLUSTER_ADDON_CHART, op, obj, old, UserInfo(username), sub)
    assert run(charts.chart_module_only, req) == Decision()


@pytest.mark.parametrize("user", DENIED_IDENTITIES, ids=lambda u: u.username or "<empty>")
@pytest.mark.parametrize(("op", "sub", "obj", "old"), CHART_REQUESTS)
def test_everyone_else_is_forbidden_to_write_charts(user, op, sub, obj, old):
    req = request(HELM_CLUSTER_ADDON_CHART, op, obj, old, user, sub)
    decision = run(charts.chart_module_only, req)
    assert (decision.allowed, decision.code, decision.reason, decision.message) == (
        False,
        403,
        "Forbidden",
        "Operation forbidden for this user.",
    )
    assert MSG_FORBIDDEN == "Operation forbidden for this user."
    assert user.username == "" or user.username not in decision.message


NO_MODULES = PolicyConfig(identities=Identities(chartModules=()))


@pytest.mark.parametrize(
    ("user", "op", "allowed"),
    [
        (GC, Operation.DELETE, True),
        (NS_CONTROLLER, Operation.DELETE, True),
        (GC, Operation.UPDATE, False),
        (GC, Operation.CREATE, False),
        (WARDEN, Operation.UPDATE, True),
        (UserInfo(f"{SA}kube-system:foo"), Operation.DELETE, False),
    ],
)
def test_chart_identities_come_from_configuration(user, op, allowed):
    """With no module identities configured, only the warden writes and cleanup still deletes."""
    obj = None if op is Operation.DELETE else CHART_CHANGED
    old = None if op is Operation.CREATE else CHART_OBJ
    decision = run(charts.chart_module_only, request(HELM_CLUSTER_ADDON_CHART, op, obj, old, user), config=NO_MODULES)
    assert decision.allowed is allowed
    assert decision.message == ("" if allowed else MSG_FORBIDDEN)


def test_default_chart_modules_match_operator_helm_policy():
    """Reference B4: the CEL expression's two prefixes and four exact names."""
    assert Identities().chartModules == (
        "system:serviceaccount:kube-system:",
        "system:serviceaccount:d8-system:",
        "system:serviceaccount:d8-operator-helm:operator-helm-controller",
        "system:serviceaccount:d8-operator-helm:nelm-source-controller",
        "system:serviceaccount:d8-operator-helm:helm-controller",
        "system:serviceaccount:d8-operator-helm:chart-values-controller",
    )


# --- HelmClusterAddon: deployable versions --------------------------------------------------------

OCI_VERSIONS = [
    {
        "version": "3.0.0",
        "unavailableReason": "UnsupportedMediaType",
        "unavailableMessage": 'config media type "application/vnd.oci.image.config.v1+json" is not a helm chart config',
    },
    {"version": "2.1.0", "unavailableReason": "ResolvePending"},
    {"version": "2.0.0", "mediaType": "application/tar+gzip"},
    {
        "version": "1.5.0",
        "mediaType": MT,
        "unavailableReason": "RemovedFromRepository",
        "unavailableMessage": "no longer listed",
    },
    {"version": "1.4.0"},
    {"version": "1.0.0", "mediaType": MT},
]
HTTP_VERSIONS = [
    {"version": "2.0.0"},
    {"version": "1.9.0", "unavailableReason": "RemovedFromRepository"},
]
CHART_VIEW = [
    (HELM_CLUSTER_ADDON_REPOSITORY, repository(OCI_REPO, "oci://registry.example.com/charts/podinfo")),
    (HELM_CLUSTER_ADDON_REPOSITORY, repository(HTTP_REPO, "https://charts.example.com")),
    (HELM_CLUSTER_ADDON_CHART, oci_chart(OCI_VERSIONS)),
    (HELM_CLUSTER_ADDON_CHART, http_chart(HTTP_VERSIONS)),
]
REFORCE = f"or annotate HelmClusterAddonRepository {OCI_REPO} with reconcile.helm.deckhouse.io/force to re-examine it"
UNSUPPORTED_3 = (
    f'HelmClusterAddonChart {OCI_CHART_OBJ} version "3.0.0" cannot be deployed: UnsupportedMediaType: '
    'config media type "application/vnd.oci.image.config.v1+json" is not a helm chart config; '
    f"choose a usable version, {REFORCE}"
)


@pytest.mark.parametrize(
    ("repo", "version", "allowed", "message"),
    [
        (OCI_REPO, "1.0.0", True, ""),
        (OCI_REPO, "2.0.0", True, ""),  # legacy layer type is a usable media type
        (OCI_REPO, "1.5.0", True, ""),  # retained with its media type: deliberately passes
        (OCI_REPO, "3.0.0", False, UNSUPPORTED_3),
        (
            OCI_REPO,
            "2.1.0",
            False,
            f'HelmClusterAddonChart {OCI_CHART_OBJ} version "2.1.0" cannot be deployed: ResolvePending; '
            f"choose a usable version, {REFORCE}",
        ),
        (
            OCI_REPO,
            "1.4.0",
            False,
            f'HelmClusterAddonChart {OCI_CHART_OBJ} version "1.4.0" cannot be deployed yet: '
            "the repository catalog has not resolved it yet (no verdict recorded); "
            f"the next sync of HelmClusterAddonRepository {OCI_REPO} examines it, retry after that",
        ),
        (
            OCI_REPO,
            "9.9.9",
            False,
            f'HelmClusterAddonChart {OCI_CHART_OBJ} does not have version "9.9.9"; '
            "choose a version listed in its status.versions without an unavailableReason",
        ),
        (OCI_REPO, "v1.0.0", False, MSG_VERSION_MISSING.format(chart=OCI_CHART_OBJ, version="v1.0.0")),
        (HTTP_REPO, "2.0.0", True, ""),  # HTTP: mediaType is never checked
        (
            HTTP_REPO,
            "1.9.0",
            False,
            MSG_VERSION_UNUSABLE.format(
                chart=HTTP_CHART_OBJ, version="1.9.0", detail="RemovedFromRepository", repository=HTTP_REPO
            ),
        ),
    ],
)
def test_addon_create_needs_a_deployable_version(repo, version, allowed, message):
    req = request(HELM_CLUSTER_ADDON, Operation.CREATE, addon("a", repo, version=version))
    decision = run(charts.addon_deployable_version, req, view_of(*CHART_VIEW))
    assert (decision.allowed, decision.message, decision.warnings) == (allowed, message, ())
    if not allowed:
        assert (decision.code, decision.reason) == (403, "Forbidden")


def test_repository_not_cached_uses_either_usability_signal():
    """Chart object present but repository gone from the cache: mediaType or no reason passes."""
    view = view_of(*CHART_VIEW[2:])
    for version, allowed in [("1.0.0", True), ("1.4.0", True), ("3.0.0", False), ("2.1.0", False)]:
        decision = run(
            charts.addon_deployable_version,
            request(HELM_CLUSTER_ADDON, Operation.CREATE, addon("a", version=version)),
            view,
        )
        assert decision.allowed is allowed, version


LAST_APPLIED_UNSUPPORTED = {"helmClusterAddonChart": CHART, "helmClusterAddonRepository": OCI_REPO, "version": "3.0.0"}


@pytest.mark.parametrize(
    ("old", "new", "allowed", "message"),
    [
        # unchanged spec.chart: never blocked, whatever the version's state
        (addon("a", version="3.0.0"), addon("a", version="3.0.0"), True, ""),
        # back to the version the addon runs: passes even though it is unusable now
        (
            addon("a", version="1.0.0", last_applied=LAST_APPLIED_UNSUPPORTED),
            addon("a", version="3.0.0"),
            True,
            "",
        ),
        # last applied without chart/repository recorded still counts
        (addon("a", version="1.0.0", last_applied={"version": "3.0.0"}), addon("a", version="3.0.0"), True, ""),
        # the status in the request is not trusted: only the stored one
        (
            addon("a", version="1.0.0"),
            addon("a", version="3.0.0", last_applied=LAST_APPLIED_UNSUPPORTED),
            False,
            UNSUPPORTED_3,
        ),
        # last applied version of another chart does not open the gate
        (
            addon("a", version="1.0.0", last_applied={**LAST_APPLIED_UNSUPPORTED, "helmClusterAddonChart": "other"}),
            addon("a", version="3.0.0"),
            False,
            UNSUPPORTED_3,
        ),
        # a changed version is checked
        (addon("a", version="1.0.0"), addon("a", version="2.0.0"), True, ""),
        (addon("a", version="1.0.0"), addon("a", version="3.0.0"), False, UNSUPPORTED_3),
    ],
)
def test_addon_update_checks_only_a_changed_chart(old, new, allowed, message):
    req = request(HELM_CLUSTER_ADDON, Operation.UPDATE, new, old)
    decision = run(charts.addon_deployable_version, req, view_of(*CHART_VIEW))
    assert (decision.allowed, decision.message) == (allowed, message)


def test_addon_create_ignores_a_forged_last_applied_status():
    req = request(
        HELM_CLUSTER_ADDON, Operation.CREATE, addon("a", version="3.0.0", last_applied=LAST_APPLIED_UNSUPPORTED)
    )
    assert run(charts.addon_deployable_version, req, view_of(*CHART_VIEW)).message == UNSUPPORTED_3


@pytest.mark.parametrize(
    ("view_items", "version", "warning"),
    [
        ([], "1.0.0", f"chart {CHART} of repository {OCI_REPO} not indexed yet, 1.0.0 unchecked"),
        ([], None, f"chart {CHART} of repository {OCI_REPO} not indexed yet, nothing to install"),
        (CHART_VIEW, None, None),
        (
            [
                CHART_VIEW[0],
                (HELM_CLUSTER_ADDON_CHART, oci_chart(OCI_VERSIONS[:2] + OCI_VERSIONS[4:5])),
            ],
            None,
            f"HelmClusterAddonChart {OCI_CHART_OBJ} has no usable version yet",
        ),
        (
            [CHART_VIEW[0], (HELM_CLUSTER_ADDON_CHART, oci_chart([]))],
            None,
            WARN_NO_USABLE_VERSION.format(chart=OCI_CHART_OBJ),
        ),
    ],
)
def test_addon_allowed_with_a_warning_when_it_cannot_be_checked(view_items, version, warning):
    req = request(HELM_CLUSTER_ADDON, Operation.CREATE, addon("a", version=version))
    decision = run(charts.addon_deployable_version, req, view_of(*view_items))
    assert decision.allowed
    assert decision.warnings == ((warning,) if warning else ())


def test_warnings_fit_120_characters_for_the_longest_names():
    repo, chart = "r" * 63, "c" * 63
    longest = helm_cluster_addon_chart_name(repo, chart)
    lonely = chart_object(longest, [], repo, chart)
    for view, version in (([], "10.20.30"), ([], None), ([(HELM_CLUSTER_ADDON_CHART, lonely)], None)):
        req = request(HELM_CLUSTER_ADDON, Operation.CREATE, addon("a", repo, chart, version))
        (warning,) = run(charts.addon_deployable_version, req, view_of(*view)).warnings
        assert len(warning) <= 120, warning


ODD_VERSIONS = [
    {"version": "4.0.0", "unavailableReason": "ResolvePending", "unavailableMessage": "manifest request failed"}
]


@pytest.mark.parametrize(
    "name",
    [
        "a-very-long-reposito-chart-ingress-nginx-dec14d9642db",  # upstream's current scheme (B5)
        "a-very-long-repository-name-x-ingress-nginx",  # the older "<repo>-<chart>" scheme
        "catalog-0001",  # any other scheme upstream may adopt
    ],
)
def test_addon_chart_found_by_its_labels_whatever_its_name(name):
    """Today's lookup derived the name; any other scheme read as "not indexed yet" and let 4.0.0 through."""
    repo, chart = "a-very-long-repository-name-x", "ingress-nginx"
    view = view_of(
        (HELM_CLUSTER_ADDON_REPOSITORY, repository(repo, "oci://r.example.com/ingress-nginx")),
        (HELM_CLUSTER_ADDON_CHART, chart_object(name, ODD_VERSIONS, repo, chart)),
    )
    decision = run(
        charts.addon_deployable_version,
        request(HELM_CLUSTER_ADDON, Operation.CREATE, addon("a", repo, chart, "4.0.0")),
        view,
    )
    assert (decision.allowed, decision.warnings) == (False, ())
    assert decision.message == (
        f'HelmClusterAddonChart {name} version "4.0.0" cannot be deployed: ResolvePending: manifest request failed; '
        "choose a usable version, or annotate HelmClusterAddonRepository a-very-long-repository-name-x "
        "with reconcile.helm.deckhouse.io/force to re-examine it"
    )


def test_addon_chart_is_never_found_by_its_name_alone():
    """An object with the derived name but another pair's labels (or none) is not this chart."""
    for labels in ({}, {"repository": OCI_REPO, "chart": "other"}):
        obj = oci_chart(ODD_VERSIONS)
        obj["metadata"]["labels"] = labels
        req = request(HELM_CLUSTER_ADDON, Operation.CREATE, addon("a", OCI_REPO, CHART, "4.0.0"))
        decision = run(charts.addon_deployable_version, req, view_of(CHART_VIEW[0], (HELM_CLUSTER_ADDON_CHART, obj)))
        assert decision.allowed
        assert decision.warnings == (f"chart {CHART} of repository {OCI_REPO} not indexed yet, 4.0.0 unchecked",)


def test_two_objects_with_one_pair_resolve_the_same_way_every_time():
    """Live before terminating, then the lowest name: every reader (gate and index) picks the same one."""
    good = chart_object("z-live", [{"version": "1.0.0", "mediaType": MT}], OCI_REPO)
    going = chart_object("a-going", [], OCI_REPO)
    going["metadata"]["deletionTimestamp"] = "2026-05-01T11:00:00Z"
    other = chart_object("b-live", ODD_VERSIONS, OCI_REPO)
    view = view_of(*((HELM_CLUSTER_ADDON_CHART, c) for c in (good, going, other)))
    assert charts.find_chart(view, OCI_REPO, CHART) is not None
    assert charts.find_chart(view, OCI_REPO, CHART)["metadata"]["name"] == "b-live"
    assert charts.find_chart(view, OCI_REPO, "") is None
    assert charts.find_chart(view, OCI_REPO, "other") is None


@pytest.mark.parametrize(
    "labels",
    [None, "repository=x", {"repository": 7, "chart": "podinfo"}, {"repository": "", "chart": "podinfo"}],
)
def test_malformed_chart_labels_are_not_indexed(labels):
    obj = oci_chart([])
    obj["metadata"]["labels"] = labels
    assert list(charts.INDEXES[HELM_CLUSTER_ADDON_CHART][charts.CHARTS_BY_LABELS](obj)) == []


# --- HelmClusterAddon: one addon per (repository, chart) --------------------------------------------

TAKEN_BY_B = (
    f"chart {CHART} of HelmClusterAddonRepository {OCI_REPO} is already used by HelmClusterAddon b; "
    "change that addon instead, or delete it first"
)


@pytest.mark.parametrize(
    ("existing", "op", "obj", "old", "message"),
    [
        ([], Operation.CREATE, addon("a"), None, ""),
        ([addon("b")], Operation.CREATE, addon("a"), None, TAKEN_BY_B),
        ([addon("c"), addon("b")], Operation.CREATE, addon("a"), None, TAKEN_BY_B),  # names the first by name
        ([addon("b", deleting=True)], Operation.CREATE, addon("a"), None, TAKEN_BY_B),  # still holds the release
        ([addon("b", chart="other")], Operation.CREATE, addon("a"), None, ""),
        ([addon("b", repo=HTTP_REPO)], Operation.CREATE, addon("a"), None, ""),
        # the request's own stored object is not a conflict
        ([addon("a")], Operation.UPDATE, addon("a", version="2.0.0"), addon("a"), ""),
        # the cache may already hold the request's own object under the new pair (re-evaluation, retries)
        ([addon("a")], Operation.CREATE, addon("a"), None, ""),
        ([addon("a")], Operation.UPDATE, addon("a"), addon("a", chart="other"), ""),
        # moving onto a taken chart is denied
        ([addon("b")], Operation.UPDATE, addon("a"), addon("a", chart="other"), TAKEN_BY_B),
        # a pair that does not change is never re-judged (legacy duplicates stay editable)
        ([addon("a"), addon("b")], Operation.UPDATE, addon("a", version="2.0.0"), addon("a"), ""),
        # an addon that only ran this chart before (lastAppliedChart) does not hold it
        (
            [
                addon(
                    "b",
                    chart="other",
                    last_applied={"helmClusterAddonChart": CHART, "helmClusterAddonRepository": OCI_REPO},
                )
            ],
            Operation.CREATE,
            addon("a"),
            None,
            "",
        ),
    ],
)
def test_one_addon_per_repository_and_chart(existing, op, obj, old, message):
    view = view_of(*((HELM_CLUSTER_ADDON, a) for a in existing))
    decision = run(charts.addon_unique_chart, request(HELM_CLUSTER_ADDON, op, obj, old), view)
    assert (decision.allowed, decision.message) == (not message, message)
    if message:
        assert message == MSG_CHART_TAKEN.format(chart=CHART, repository=OCI_REPO, other="b")


# --- HelmClusterAddonRepository: in use -----------------------------------------------------------

REPO_OBJ = repository(OCI_REPO, "oci://registry.example.com/charts/podinfo")
WAY_OUT = "delete those addons or point them at another repository first"


def delete_repo(user: UserInfo = USER) -> AdmissionRequest:
    return request(HELM_CLUSTER_ADDON_REPOSITORY, Operation.DELETE, None, REPO_OBJ, user)


@pytest.mark.parametrize(
    ("addons", "message"),
    [
        ([], ""),
        ([addon("other", repo=HTTP_REPO)], ""),
        ([addon("gone", deleting=True)], ""),
        ([addon("a1")], f"used by 1 HelmClusterAddon: a1; {WAY_OUT}"),
        (
            [addon("a1", repo=HTTP_REPO, last_applied={"helmClusterAddonRepository": OCI_REPO, "version": "1.0.0"})],
            f"used by 1 HelmClusterAddon: a1; {WAY_OUT}",
        ),
        ([addon(f"a{i}", chart=f"c{i}") for i in (3, 1, 2)], f"used by 3 HelmClusterAddons: a1, a2, a3; {WAY_OUT}"),
        (
            [addon(f"a{i}", chart=f"c{i}") for i in range(5)],
            f"used by 5 HelmClusterAddons: a0, a1, a2, a3, a4; {WAY_OUT}",
        ),
        (
            [addon(f"a{i}", chart=f"c{i}") for i in range(7)] + [addon("z", chart="z", deleting=True)],
            f"used by 7 HelmClusterAddons: a0, a1, a2, a3, a4 and 2 more; {WAY_OUT}",
        ),
    ],
)
def test_repository_in_use_cannot_be_deleted(addons, message):
    view = view_of((HELM_CLUSTER_ADDON_REPOSITORY, REPO_OBJ), *((HELM_CLUSTER_ADDON, a) for a in addons))
    decision = run(charts.repository_in_use, delete_repo(), view)
    assert (decision.allowed, decision.message) == (not message, message)
    if message:
        assert (decision.code, decision.reason) == (403, "Forbidden")


def test_repository_in_use_lists_as_many_as_configured():
    view = view_of(*((HELM_CLUSTER_ADDON, addon(f"a{i}", chart=f"c{i}")) for i in range(4)))
    decision = run(charts.repository_in_use, delete_repo(), view, PolicyConfig(maxListedReferrers=2))
    assert decision.message == MSG_REPOSITORY_IN_USE.format(count=4, plural="s", names="a0, a1 and 2 more")
    assert decision.message == f"used by 4 HelmClusterAddons: a0, a1 and 2 more; {WAY_OUT}"


@pytest.mark.parametrize(
    ("user", "allowed"),
    [
        (GC, True),
        (NS_CONTROLLER, True),
        (ADMIN, False),
        (UserInfo(f"{SA}kube-system:foo"), False),  # module identities get no pass here
        (UserInfo(f"{SA}kube-systemx:generic-garbage-collector"), False),
        (WARDEN, False),
    ],
)
def test_repository_in_use_cleanup_identities_pass(user, allowed):
    view = view_of((HELM_CLUSTER_ADDON, addon("a1")))
    assert run(charts.repository_in_use, delete_repo(user), view).allowed is allowed


def test_repository_deletable_once_addons_are_gone():
    view = view_of((HELM_CLUSTER_ADDON, addon("a1")))
    assert not run(charts.repository_in_use, delete_repo(), view).allowed
    view.remove(HELM_CLUSTER_ADDON, "a1")
    assert run(charts.repository_in_use, delete_repo(), view) == Decision()


# --- HelmClusterAddonRepository: spec.url ---------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "template"),
    [
        ("https://charts.example.com", None),
        ("http://charts.example.com/stable", None),
        ("oci://registry.example.com/charts/podinfo", None),
        ("oci://registry.example.com:5000/podinfo/", None),
        ("oci://localhost/podinfo", None),
        ("", MSG_URL_SCHEME),
        ("charts.example.com", MSG_URL_SCHEME),
        ("ftp://charts.example.com", MSG_URL_SCHEME),
        ("https://", MSG_URL_SCHEME),
        ("HTTPS://charts.example.com", MSG_URL_SCHEME),
        (" https://charts.example.com", MSG_URL_SCHEME),
        ("https://charts.example.com\n", MSG_URL_SCHEME),
        ("oci://registry.example.com", MSG_OCI_NO_CHART),
        ("oci://registry.example.com/", MSG_OCI_NO_CHART),
        ("oci://registry.example.com//", MSG_OCI_EMPTY_CHART),
        ("oci://registry.example.com/charts//", MSG_OCI_EMPTY_CHART),
        ("oci://registry.example.com/Charts/PodInfo", MSG_OCI_BAD_REPOSITORY),
        ("oci://registry.example.com/p", MSG_OCI_BAD_REPOSITORY),
        ("oci://registry.example.com/charts/pod info", MSG_OCI_BAD_REPOSITORY),
    ],
)
def test_repository_url_validated_as_upstream(url, template):
    obj = repository("r", url)
    decision = run(charts.repository_url, request(HELM_CLUSTER_ADDON_REPOSITORY, Operation.CREATE, obj))
    if template is None:
        assert decision == Decision()
    else:
        assert (decision.allowed, decision.code, decision.reason, decision.message) == (
            False,
            422,
            "Invalid",
            template.format(url=url),
        )


def test_repository_url_messages_exactly():
    assert MSG_URL_SCHEME.format(url="ftp://x") == (
        'spec.url "ftp://x": URL must have a valid protocol (http, https, oci) and a non-empty path'
    )
    assert MSG_OCI_NO_CHART.format(url="oci://r") == (
        'spec.url "oci://r": repository url must contain the chart image name; '
        "an oci:// repository is one chart, e.g. oci://registry.example.com/charts/podinfo"
    )


def test_repository_url_is_ratcheted_on_update():
    legacy = repository("r", "oci://registry.example.com")
    with_finalizer_removed = repository("r", "oci://registry.example.com")
    req = request(HELM_CLUSTER_ADDON_REPOSITORY, Operation.UPDATE, with_finalizer_removed, legacy)
    assert run(charts.repository_url, req) == Decision()
    changed = repository("r", "oci://other.example.com")
    req = request(HELM_CLUSTER_ADDON_REPOSITORY, Operation.UPDATE, changed, legacy)
    assert run(charts.repository_url, req).message == MSG_OCI_NO_CHART.format(url="oci://other.example.com")


def test_url_pattern_is_the_crd_cel_rule():
    """The CRD carries the same rule; both must agree (see test_charts_crds)."""
    assert charts.URL_PATTERN.pattern == "(https?|oci)://.+"


# --- malformed addons: 422 naming the field, never an internal error ------------------------------


def with_chart(value: Any) -> Obj:
    obj = addon("a")
    obj["spec"]["chart"] = value
    return obj


def with_chart_field(field: str, value: Any) -> Obj:
    obj = addon("a")
    obj["spec"]["chart"][field] = value
    return obj


CHART_REF_SHAPE = (
    "spec.chart must be an object {{helmClusterAddonChart, helmClusterAddonRepository, version?}}, not {got}"
)


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (with_chart("podinfo"), CHART_REF_SHAPE.format(got="a string")),
        (with_chart(["podinfo"]), CHART_REF_SHAPE.format(got="an array")),
        (with_chart_field("version", 1.0), "spec.chart.version must be a string, not a number"),
        (
            with_chart_field("helmClusterAddonRepository", ["r"]),
            "spec.chart.helmClusterAddonRepository must be a string, not an array",
        ),
        (
            with_chart_field("helmClusterAddonChart", {"name": "x"}),
            "spec.chart.helmClusterAddonChart must be a string, not an object",
        ),
        ({**addon("a"), "spec": "podinfo"}, "spec must be an object, not a string"),
    ],
)
@pytest.mark.parametrize("fn", [charts.addon_unique_chart, charts.addon_deployable_version])
def test_malformed_addon_chart_reference_is_invalid(obj, message, fn):
    view = view_of(*CHART_VIEW, (HELM_CLUSTER_ADDON, addon("b")))
    for req in (
        request(HELM_CLUSTER_ADDON, Operation.CREATE, obj),
        request(HELM_CLUSTER_ADDON, Operation.UPDATE, obj, addon("a")),
    ):
        decision = run(fn, req, view)
        assert (decision.allowed, decision.code, decision.reason, decision.message) == (False, 422, "Invalid", message)


def test_malformed_addon_left_unchanged_on_update_is_not_rejudged():
    """Ratcheting: an addon stored before the CRD check existed keeps its finalizer edits."""
    obj = with_chart_field("version", 1.0)
    for fn in (charts.addon_unique_chart, charts.addon_deployable_version):
        assert run(fn, request(HELM_CLUSTER_ADDON, Operation.UPDATE, obj, obj), view_of(*CHART_VIEW)) == Decision()


@pytest.mark.parametrize("last_applied", ["3.0.0", ["3.0.0"], {"version": 3}])
def test_malformed_stored_last_applied_chart_is_ignored_not_an_error(last_applied):
    old = addon("a", version="1.0.0")
    old["status"] = {"lastAppliedChart": last_applied}
    req = request(HELM_CLUSTER_ADDON, Operation.UPDATE, addon("a", version="3.0.0"), old)
    assert run(charts.addon_deployable_version, req, view_of(*CHART_VIEW)).message == UNSUPPORTED_3


def test_malformed_addons_in_the_cache_do_not_break_its_indexes():
    bad_status = addon("c", chart="c")
    bad_status["status"] = {"lastAppliedChart": "oci-repo"}
    view = view_of((HELM_CLUSTER_ADDON, with_chart("podinfo")), (HELM_CLUSTER_ADDON, bad_status))
    assert [name_of_(a) for a in view.indexed(HELM_CLUSTER_ADDON, charts.ADDONS_BY_REPOSITORY, OCI_REPO)] == ["c"]
    assert view.indexed(HELM_CLUSTER_ADDON, charts.ADDONS_BY_CHART, f"{OCI_REPO}/{CHART}") == ()


def name_of_(obj: Obj) -> str:
    return obj["metadata"]["name"]


def test_not_indexed_warning_fits_with_a_long_version():
    """The version is the user's own text; with the longest names the warning is fitted, the version kept."""
    repo, chart = "r" * 63, "c" * 63
    req = request(HELM_CLUSTER_ADDON, Operation.CREATE, addon("a", repo, chart, "10.20.30-beta.1+build.5"))
    decision = run(charts.addon_deployable_version, req)
    (warning,) = decision.warnings
    assert len(warning) <= 120
    assert warning.startswith("chart ccc") and warning.endswith(" not indexed yet, 10.20.30-beta.1+build.5 unchecked")
    assert " of repository rrr" in warning


# --- InvalidChartReference and ociRef (reference B2, B7) ------------------------------------------

DIGEST_REF = (
    'oci reference "oci://ghcr.io/acme/podinfo@sha256:0f" addresses a digest, '
    "which cannot be expressed as a chart version tag"
)
OCI_REF_VERSIONS = [
    {"version": "3.0.0", "ociRef": "oci://ghcr.io/acme/podinfo:3.0.0"},
    {"version": "2.5.0", "unavailableReason": "InvalidChartReference", "unavailableMessage": DIGEST_REF},
    {"version": "2.4.0", "unavailableReason": "InvalidChartReference"},
]


def invalid_reference(chart: str, repo: str, version: str, detail: str) -> str:
    return (
        f'HelmClusterAddonChart {chart} version "{version}" cannot be deployed: {detail}; '
        f"the Helm repository index of HelmClusterAddonRepository {repo} points at an invalid OCI reference, "
        "choose another version or have the repository fix its index"
    )


@pytest.mark.parametrize(
    ("version", "cached_repo", "message"),
    [
        ("3.0.0", True, ""),  # an ociRef version has no mediaType by design: examined at deploy time
        ("3.0.0", False, ""),
        (
            "2.5.0",
            True,
            invalid_reference(HTTP_CHART_OBJ, HTTP_REPO, "2.5.0", f"InvalidChartReference: {DIGEST_REF}"),
        ),
        ("2.4.0", True, invalid_reference(HTTP_CHART_OBJ, HTTP_REPO, "2.4.0", "InvalidChartReference")),
        ("2.4.0", False, invalid_reference(HTTP_CHART_OBJ, HTTP_REPO, "2.4.0", "InvalidChartReference")),
    ],
)
def test_http_repository_index_pointing_at_oci(version, cached_repo, message):
    items = [(HELM_CLUSTER_ADDON_CHART, http_chart(OCI_REF_VERSIONS))]
    if cached_repo:
        items.append(CHART_VIEW[1])
    req = request(HELM_CLUSTER_ADDON, Operation.CREATE, addon("a", HTTP_REPO, version=version))
    decision = run(charts.addon_deployable_version, req, view_of(*items))
    assert (decision.allowed, decision.message, decision.warnings) == (not message, message, ())


def test_invalid_chart_reference_is_never_usable_even_with_a_media_type():
    """A reference that cannot be pulled cannot be made deployable by a recorded layer type."""
    entry = {"version": "1.0.0", "mediaType": MT, "unavailableReason": "InvalidChartReference"}
    for oci in (True, False, None):
        assert charts.entry_usable(entry, oci) is False
    req = request(HELM_CLUSTER_ADDON, Operation.CREATE, addon("a", version="1.0.0"))
    decision = run(
        charts.addon_deployable_version, req, view_of(CHART_VIEW[0], (HELM_CLUSTER_ADDON_CHART, oci_chart([entry])))
    )
    assert decision.message == invalid_reference(OCI_CHART_OBJ, OCI_REPO, "1.0.0", "InvalidChartReference")


def test_latest_with_only_invalid_references_warns():
    only_invalid = http_chart(OCI_REF_VERSIONS[1:])
    req = request(HELM_CLUSTER_ADDON, Operation.CREATE, addon("a", HTTP_REPO, version=None))
    decision = run(
        charts.addon_deployable_version, req, view_of(CHART_VIEW[1], (HELM_CLUSTER_ADDON_CHART, only_invalid))
    )
    assert decision.allowed
    assert decision.warnings == (f"HelmClusterAddonChart {HTTP_CHART_OBJ} has no usable version yet",)


# --- seed 004's upgrade window: entries in the pre-upgrade shape ----------------------------------

PRE_UPGRADE = [
    {"version": "1.1.0", "digest": "sha256:11", "pulled": True},
    {"version": "1.0.0", "digest": "sha256:10", "pulled": False},
]
"""``status.versions[]`` as operator-helm @7c1f84f writes it (shared/upstream/operator-helm CRD): no verdicts."""


def unresolved(chart: str, repo: str, version: str) -> str:
    return (
        f'HelmClusterAddonChart {chart} version "{version}" cannot be deployed yet: '
        "the repository catalog has not resolved it yet (no verdict recorded); "
        f"the next sync of HelmClusterAddonRepository {repo} examines it, retry after that"
    )


@pytest.mark.parametrize(
    ("repo", "version", "message"),
    [
        (HTTP_REPO, "1.1.0", ""),  # HTTP versions never carry a media type: listed means usable
        (HTTP_REPO, "1.0.0", ""),  # pulled: false says nothing about usability
        (OCI_REPO, "1.1.0", unresolved(OCI_CHART_OBJ, OCI_REPO, "1.1.0")),  # no media type: examined next pass
    ],
)
def test_pre_upgrade_entries_are_read_as_not_examined_yet(repo, version, message):
    chart = chart_object(helm_cluster_addon_chart_name(repo, CHART), PRE_UPGRADE, repo)
    repository_item = CHART_VIEW[0] if repo == OCI_REPO else CHART_VIEW[1]
    req = request(HELM_CLUSTER_ADDON, Operation.CREATE, addon("a", repo, version=version))
    decision = run(charts.addon_deployable_version, req, view_of(repository_item, (HELM_CLUSTER_ADDON_CHART, chart)))
    assert (decision.allowed, decision.message, decision.warnings) == (not message, message, ())


def test_pre_upgrade_running_version_stays_changeable():
    """The version the addon runs passes during the window, so its values can still be edited."""
    chart = oci_chart(PRE_UPGRADE)
    applied = {"helmClusterAddonChart": CHART, "helmClusterAddonRepository": OCI_REPO, "version": "1.1.0"}
    old = addon("a", version="1.0.0", last_applied=applied)
    new = addon("a", version="1.1.0", last_applied=applied)
    req = request(HELM_CLUSTER_ADDON, Operation.UPDATE, new, old)
    assert (
        run(charts.addon_deployable_version, req, view_of(CHART_VIEW[0], (HELM_CLUSTER_ADDON_CHART, chart)))
        == Decision()
    )


# --- the default chart-module identities against upstream's own policy (reference B4) -------------

UPSTREAM_PREFIXES = ("system:serviceaccount:kube-system:", "system:serviceaccount:d8-system:")
UPSTREAM_NAMES = (
    "system:serviceaccount:d8-operator-helm:operator-helm-controller",
    "system:serviceaccount:d8-operator-helm:nelm-source-controller",
    "system:serviceaccount:d8-operator-helm:helm-controller",
    "system:serviceaccount:d8-operator-helm:chart-values-controller",
)


def upstream_vap_allows(username: str) -> bool:
    """operator-helm-restricted-access-policy's CEL expression (newest version, B4), as written."""
    return any(username.startswith(p) for p in UPSTREAM_PREFIXES) or username in UPSTREAM_NAMES


@pytest.mark.parametrize(
    "username",
    [
        *UPSTREAM_NAMES,
        "system:serviceaccount:kube-system:generic-garbage-collector",
        "system:serviceaccount:kube-system:",
        "system:serviceaccount:d8-system:deckhouse",
        "system:serviceaccount:kube-system",  # no trailing colon: not the prefix
        "system:serviceaccount:kube-systemx:a",
        "system:serviceaccount:d8-operator-helm:operator-helm-controller-2",
        "system:serviceaccount:d8-operator-helm:default",
        "system:serviceaccount:other:operator-helm-controller",
        "system:serviceaccount:d8-operator-helm:",
        "alice",
        "system:admin",
        "",
    ],
)
def test_default_chart_modules_are_no_broader_than_upstreams_policy(username):
    """Every username is judged as upstream's VAP judges it; the warden is the one addition (standalone)."""
    assert Identities().is_chart_module(UserInfo(username)) is upstream_vap_allows(username)


def test_the_warden_is_the_only_chart_module_upstream_does_not_list():
    identities = Identities()
    assert identities.is_chart_module(UserInfo(identities.warden))
    assert not upstream_vap_allows(identities.warden)

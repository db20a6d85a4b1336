"""The admission wire contract, over real HTTPS to a real server process."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from policies.decision import allow
from policies.kinds import CATALOG_KINDS, RELEASE
from policies.model import Operation
from policies.rules import Family, Rule, RuleTable
from tests.server.reviews import release, review
from tests.support.server import REPO, Endpoint, ServerThread

DENIED_RED = (
    "Release team-a/web denied by catalog.release-binding: ComponentVersion team-a/ocm-demo-v1.1.0 is "
    "Available=False (ArtifactMissing) since 2026-11-28T10:15:00Z: manifest not found after 3 checks; "
    "bind the Release to an available version"
)


def post(server: Endpoint, path: str, body: object, **headers: str) -> httpx.Response:
    with server.client() as c:
        return c.post(path, json=body, headers=headers)


def test_create_round_trip_denies_red_and_echoes_uid(server: Endpoint) -> None:
    body = review("CREATE", release("ocm-demo-v1.1.0"), uid="uid-create")
    r = post(server, "/validate/catalog", body)
    assert r.status_code == 200
    assert r.json() == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {
            "uid": "uid-create",
            "allowed": False,
            "status": {"code": 403, "message": DENIED_RED, "reason": "Forbidden"},
        },
    }


def test_update_with_unchanged_binding_to_red_passes(server: Endpoint) -> None:
    old = release("ocm-demo-v1.1.0")
    new = release("ocm-demo-v1.1.0", targetNamespace="elsewhere")
    r = post(server, "/validate/catalog", review("UPDATE", new, old, uid="uid-update"))
    assert r.json()["response"] == {"uid": "uid-update", "allowed": True}


def test_update_rebinding_to_red_is_denied(server: Endpoint) -> None:
    old = release("ocm-demo-v1.2.0")
    new = release("ocm-demo-v1.1.0")
    r = post(server, "/validate/catalog", review("UPDATE", new, old))
    assert r.json()["response"]["status"]["message"] == DENIED_RED


def test_delete_round_trip_has_no_patch(server: Endpoint) -> None:
    r = post(server, "/mutate/catalog", review("DELETE", None, release("ocm-demo-v1.1.0"), uid="uid-delete"))
    assert r.json()["response"] == {"uid": "uid-delete", "allowed": True}


def test_dry_run_answers_like_any_other(server: Endpoint) -> None:
    r = post(server, "/validate/catalog", review("CREATE", release("ocm-demo-v1.1.0"), dry_run=True))
    assert r.json()["response"]["status"]["message"] == DENIED_RED


EIGHT_MIB = (
    b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","pad":"'
    + (b"a" * (8 * 1024 * 1024))
    + b'"}}'
)

MALFORMED = [
    ("empty body", b"", "application/json", "/validate/catalog", 400,
     "empty body: expected an admission.k8s.io/v1 AdmissionReview"),
    ("not JSON", b"{not json", "application/json", "/validate/catalog", 400,
     "body is not JSON: unexpected character, expected a string key: line 1 column 2 (char 1)"),
    ("JSON array", b"[1, 2]", "application/json", "/validate/catalog", 400,
     "body is not a JSON object: expected an admission.k8s.io/v1 AdmissionReview"),
    ("not an AdmissionReview", b'{"apiVersion": "v1", "kind": "Pod"}', "application/json", "/validate/catalog", 400,
     "unsupported apiVersion v1 kind Pod: only admission.k8s.io/v1 AdmissionReview is served"),
    ("no request", b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', "application/json",
     "/validate/catalog", 400, "AdmissionReview has no request"),
    ("missing uid",
     json.dumps({**review("CREATE", release("x")), "request": {**review("CREATE", release("x"))["request"],
                                                              "uid": ""}}).encode(),
     "application/json", "/validate/catalog", 400, "AdmissionReview request.uid is missing or not a string"),
    ("v1beta1", json.dumps({**review("CREATE", release("x")), "apiVersion": "admission.k8s.io/v1beta1"}).encode(),
     "application/json", "/validate/catalog", 400,
     "unsupported apiVersion admission.k8s.io/v1beta1 kind AdmissionReview: "
     "only admission.k8s.io/v1 AdmissionReview is served"),
    ("8 MiB body", EIGHT_MIB, "application/json", "/validate/catalog", 413,
     f"request body of {len(EIGHT_MIB)} bytes exceeds the limit of 7340032 bytes"),
    ("wrong content type", json.dumps(review("CREATE", release("x"))).encode(), "text/plain", "/validate/catalog",
     415, "unsupported content type 'text/plain': expected application/json"),
    ("unknown family", json.dumps(review("CREATE", release("x"))).encode(), "application/json", "/validate/pods",
     404, "unknown rule family 'pods': expected catalog, packages or charts"),
    ("unknown path", b"{}", "application/json", "/validate", 404,
     "no such path /validate: expected /validate/{family}, /mutate/{family} or /convert"),
    ("nested path", b"{}", "application/json", "/mutate/catalog/x", 404,
     "no such path /mutate/catalog/x: expected /validate/{family}, /mutate/{family} or /convert"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "ctype", "path", "status", "message"), [m[1:] for m in MALFORMED],
                         ids=[m[0] for m in MALFORMED])  # fmt: skip
def test_malformed_input(server: Endpoint, body: bytes, ctype: str, path: str, status: int, message: str) -> None:
    with server.client() as c:
        r = c.post(path, content=body, headers={"Content-Type": ctype})
    assert (r.status_code, r.json()["message"]) == (status, message)
    assert r.json()["kind"] == "Status"


def with_request(**fields: object) -> bytes:
    """A valid Release CREATE review with ``fields`` of its request replaced (dotted keys reach into them)."""
    body = review("CREATE", release("x"))
    for key, value in fields.items():
        cur = body["request"]
        *parents, last = key.split("__")
        for parent in parents:
            cur = cur[parent]
        cur[last] = value
    return json.dumps(body).encode()


WRONG_TYPES = [
    ("userInfo list", with_request(userInfo=["alice"]), "request.userInfo must be an object, not an array"),
    ("userInfo string", with_request(userInfo="alice"), "request.userInfo must be an object, not a string"),
    ("username", with_request(userInfo__username=["alice"]),
     "request.userInfo.username must be a string, not an array"),
    ("groups number", with_request(userInfo__groups=5),
     "request.userInfo.groups must be an array of strings, not a number"),
    ("groups member", with_request(userInfo__groups=["system:authenticated", 7]),
     "request.userInfo.groups[1] must be a string, not a number"),
    ("userInfo uid", with_request(userInfo__uid={}), "request.userInfo.uid must be a string, not an object"),
    ("object string, empty name", with_request(object="x", name=""),
     "request.object must be an object, not a string"),
    ("oldObject list", with_request(oldObject=[]), "request.oldObject must be an object, not an array"),
    ("name", with_request(name=5), "request.name must be a string, not a number"),
    ("namespace", with_request(namespace={"a": 1}), "request.namespace must be a string, not an object"),
    ("subResource", with_request(subResource=True), "request.subResource must be a string, not a boolean"),
    ("dryRun", with_request(dryRun="yes"), "request.dryRun must be a boolean, not a string"),
    ("kind.group", with_request(kind__group=5), "request.kind.group must be a string, not a number"),
    ("kind.version", with_request(kind__version=[]), "request.kind.version must be a string, not an array"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "message"), [w[1:] for w in WRONG_TYPES], ids=[w[0] for w in WRONG_TYPES])
@pytest.mark.parametrize("path", ["/validate/catalog", "/mutate/catalog"])
def test_a_wrong_typed_envelope_field_is_a_400_naming_it(
    server: Endpoint, path: str, body: bytes, message: str
) -> None:
    """Fields kube-apiserver fills itself: a wrong type means the sender is no apiserver (was an HTTP 500)."""
    with server.client() as c:
        r = c.post(path, content=body, headers={"Content-Type": "application/json"})
    assert (r.status_code, r.json()) == (
        400,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "code": 400,
            "message": f"AdmissionReview {message}",
        },
    )


def test_an_envelope_value_nested_past_pythons_recursion_limit_is_named_by_its_type(server: Endpoint) -> None:
    body = b'{"apiVersion":' + b'{"a":' * 1000 + b"{}" + b"}" * 1000 + b',"kind":"AdmissionReview"}'
    with server.client() as c:
        r = c.post("/validate/catalog", content=body, headers={"Content-Type": "application/json"})
        conv = c.post("/convert", content=body.replace(b"AdmissionReview", b"ConversionReview"),
                      headers={"Content-Type": "application/json"})  # fmt: skip
    assert (r.status_code, r.json()["message"]) == (
        400,
        "unsupported apiVersion an object kind AdmissionReview: only admission.k8s.io/v1 AdmissionReview is served",
    )
    assert (conv.status_code, conv.json()["message"]) == (
        400,
        "expected an apiextensions.k8s.io/v1 ConversionReview, got an object ConversionReview",
    )


def test_chunked_body_over_the_limit_is_refused_without_reading_it_all(server: Endpoint) -> None:
    def chunks():
        yield EIGHT_MIB[: 4 * 1024 * 1024]
        yield EIGHT_MIB[4 * 1024 * 1024 :]

    with server.client() as c:
        r = c.post("/validate/catalog", content=chunks(), headers={"Content-Type": "application/json"})
    assert (r.status_code, r.json()["message"]) == (413, "request body exceeds the limit of 7340032 bytes")


def test_unknown_kind_is_allowed_with_a_warning(server: Endpoint) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"}}
    r = post(server, "/validate/catalog", review("CREATE", pod, group="", version="v1", kind="Pod", uid="u-pod"))
    assert r.json()["response"] == {
        "uid": "u-pod",
        "allowed": True,
        "warnings": ["catalog-warden: Pod is not guarded by the catalog rules; admitted"],
    }


def test_known_kind_without_rules_simply_passes(server: Endpoint) -> None:
    cv = {"apiVersion": "solar.opendefense.cloud/v1alpha1", "kind": "ReferenceGrant",
          "metadata": {"name": "g", "namespace": "team-a"}}  # fmt: skip
    r = post(server, "/validate/packages", review("CREATE", cv, kind="ReferenceGrant", uid="u-rg"))
    assert r.json()["response"]["allowed"] is True


@pytest.mark.parametrize("kind", ["Profile", "RenderTask", "RenderArtifact", "RenderBinding"])
def test_the_solar_kinds_served_in_standalone_mode_are_catalog_kinds(server: Endpoint, kind: str) -> None:
    obj = {"apiVersion": "solar.opendefense.cloud/v1alpha1", "kind": kind, "metadata": {"name": "x", "namespace": "a"}}
    r = post(server, "/validate/catalog", review("CREATE", obj, kind=kind, uid="u-solar"))
    assert r.json()["response"] == {"uid": "u-solar", "allowed": True}  # no "not guarded" warning


def test_metrics_count_requests_by_path_family_operation_and_decision(server: Endpoint) -> None:
    name = 'catalog_warden_admission_requests_total{allowed="false",code="403",family="catalog",operation="CREATE"'
    before = server.metric(name)
    post(server, "/validate/catalog", review("CREATE", release("ocm-demo-v1.1.0")))
    text = httpx.get(f"{server.probe_url}/metrics").text
    line = next(x for x in text.splitlines() if x.startswith(name))
    assert float(line.rsplit(" ", 1)[1]) == before + 1
    assert 'catalog_warden_admission_duration_seconds_bucket{family="catalog",le="0.005"' in text


def test_probes(server: Endpoint) -> None:
    assert httpx.get(f"{server.probe_url}/healthz").text == "ok"
    assert httpx.get(f"{server.probe_url}/readyz").status_code == 200


# --- a rule that raises, a slow-to-sync view, warnings and patches: in-process with custom tables ---


def _boom(req, ctx):
    raise RuntimeError("kaboom")


def _long_warning(req, ctx):
    return allow("w" * 300, "short", "short")


def _tables() -> dict[str, RuleTable]:
    fam = Family(
        "catalog",
        CATALOG_KINDS,
        (
            Rule("test.warns", RELEASE, frozenset({Operation.UPDATE}), _long_warning, needs_view=False),
            Rule("test.raises", RELEASE, frozenset({Operation.CREATE}), _boom, needs_view=False),
        ),
    )
    return {"catalog": RuleTable.build(fam)}


@pytest.fixture(scope="module")
def custom(certs: Path):
    with ServerThread(certs, tables=_tables()) as endpoint:
        yield endpoint


def test_rule_that_raises_is_a_500_denial_and_the_server_keeps_serving(custom: Endpoint) -> None:
    before = custom.metric("catalog_warden_rule_errors_total")
    r = post(custom, "/validate/catalog", review("CREATE", release("a"), uid="u-boom"))
    assert r.status_code == 200
    assert r.json()["response"] == {
        "uid": "u-boom",
        "allowed": False,
        "status": {
            "code": 500,
            "message": "Release team-a/web: internal error in rule test.raises: RuntimeError: kaboom",
            "reason": "InternalError",
        },
    }
    assert custom.metric("catalog_warden_rule_errors_total") == before + 1
    again = post(custom, "/validate/catalog", review("UPDATE", release("a"), release("a")))
    assert again.json()["response"]["allowed"] is True


def test_warnings_are_cut_to_120_characters_and_deduplicated(custom: Endpoint) -> None:
    r = post(custom, "/validate/catalog", review("UPDATE", release("a"), release("a")))
    assert r.json()["response"]["warnings"] == ["w" * 119 + "…", "short"]
    assert all(len(w) <= 120 for w in r.json()["response"]["warnings"])


def _needs_cache(req, ctx):
    return allow()


@pytest.fixture(scope="module")
def unsynced(certs: Path):
    from policies.view import MemoryView

    fam = Family("catalog", CATALOG_KINDS, (Rule("test.needs-cache", RELEASE, frozenset(Operation), _needs_cache),))
    view = MemoryView(synced=False)
    server = ServerThread(certs, view=view, tables={"catalog": RuleTable.build(fam)})
    server.endpoint  # noqa: B018 - ports are chosen in the constructor
    server.thread.start()
    from tests.support.server import wait_until

    # /readyz stays 503 while the view is unsynced; wait for the listener itself instead.
    wait_until(lambda: _answers(server.endpoint), what="listener")
    yield server.endpoint, view
    server.__exit__()


def _answers(ep: Endpoint) -> bool:
    try:
        return httpx.get(f"{ep.probe_url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_unsynced_cache_fails_closed_with_503_and_readyz_says_why(unsynced) -> None:
    ep, _view = unsynced
    r = post(ep, "/validate/catalog", review("CREATE", release("a"), uid="u-503"))
    assert r.json()["response"]["status"] == {
        "code": 503,
        "message": "Release team-a/web denied by test.needs-cache: cluster state is not synced yet, "
        "so test.needs-cache cannot decide; retry shortly",
        "reason": "ServiceUnavailable",
    }
    readyz = httpx.get(f"{ep.probe_url}/readyz")
    assert (readyz.status_code, readyz.text) == (503, "cluster state not synced")


class _StaleView:
    """A view that was synced and went stale (what the informer cache reports when a watch is down)."""

    synced = False

    @staticmethod
    def staleness() -> str:
        return "Release.solar.opendefense.cloud watch down since 2026-12-01T09:00:00Z"


@pytest.mark.parametrize(
    ("fail_open", "expected"),
    [
        (
            False,
            {
                "allowed": False,
                "code": 503,
                "message": "Release team-a/web denied by test.needs-cache: cluster state is stale (Release."
                "solar.opendefense.cloud watch down since 2026-12-01T09:00:00Z), so test.needs-cache cannot decide; "
                "retry shortly",
                "warnings": (),
            },
        ),
        (
            True,
            {
                "allowed": True,
                "code": 200,
                "message": "",
                "warnings": ("catalog-warden: cluster state stale; test.needs-cache skipped (fail open)",),
            },
        ),
    ],
)
def test_a_stale_view_fails_closed_naming_the_stale_kinds(fail_open: bool, expected: dict) -> None:
    from policies.config import PolicyConfig
    from webhook.admission import Admission, normalize

    fam = Family("catalog", CATALOG_KINDS, (Rule("test.needs-cache", RELEASE, frozenset(Operation), _needs_cache),))
    admission = Admission(
        lambda: _StaleView(),  # type: ignore[arg-type, return-value]
        PolicyConfig(failOpenWhenUnsynced=fail_open),
        tables={"catalog": RuleTable.build(fam)},
    )
    d = admission.evaluate("catalog", False, normalize(review("CREATE", release("a"))["request"])).decision
    assert {"allowed": d.allowed, "code": d.code, "message": d.message, "warnings": d.warnings} == expected


def test_readiness_names_the_stale_kinds() -> None:
    from policies.view import not_synced_reason

    assert not_synced_reason(_StaleView()) == (  # type: ignore[arg-type]
        "cluster state stale: Release.solar.opendefense.cloud watch down since 2026-12-01T09:00:00Z"
    )


@pytest.mark.parametrize(
    "user",
    [
        "system:serviceaccount:kube-system:generic-garbage-collector",
        "system:serviceaccount:kube-system:namespace-controller",
    ],
)
def test_cluster_cleanup_deletes_pass_even_unsynced(unsynced, user: str) -> None:
    ep, _ = unsynced
    r = post(ep, "/validate/catalog", review("DELETE", None, release("a"), user=user))
    assert r.json()["response"]["allowed"] is True
    other = post(ep, "/validate/catalog", review("DELETE", None, release("a"), user="alice"))
    assert other.json()["response"]["status"]["code"] == 503


def test_every_decision_is_one_json_log_line_with_the_request_fields(server: Endpoint) -> None:
    post(server, "/validate/catalog", review("CREATE", release("ocm-demo-v1.1.0"), uid="uid-logged"))

    def logged() -> list[dict]:
        lines = server.extra["log"].read_text().splitlines()
        return [e for e in map(json.loads, lines) if e.get("uid") == "uid-logged"]

    from tests.support.server import wait_until

    wait_until(lambda: bool(logged()), timeout=5, what="the log line")
    entry = logged()[0]
    assert {k: entry[k] for k in ("msg", "kind", "name", "namespace", "operation", "decision", "code", "rule")} == {
        "msg": "admission",
        "kind": "Release.solar.opendefense.cloud",
        "name": "web",
        "namespace": "team-a",
        "operation": "CREATE",
        "decision": "denied",
        "code": 403,
        "rule": "catalog.release-binding",
    }
    assert entry["user"] == "alice@example.com"
    assert isinstance(entry["duration_ms"], float)


def test_get_is_not_allowed(server: Endpoint) -> None:
    with server.client() as c:
        r = c.get("/validate/catalog")
    assert (r.status_code, r.json()["message"]) == (405, "method GET not allowed on /validate/catalog: use POST")


# --- deep objects: validate, mutate and convert agree on one bound (policies/nesting.py) ---

TOO_DEEP = (
    "status.upstreamLock.a.a… nests deeper than 128 levels, the most catalog-warden admits and converts; flatten it"
)


def deep_revision(levels: int) -> bytes:
    """A v1alpha1 PackageRevision whose ``status.upstreamLock`` makes it ``levels`` deep, as JSON text.

    Text, because orjson and json encode only a few hundred levels; orjson decodes 1,024. No
    lifecycle, so the mutating path (alongside Porch: the Draft default only) returns a patch.
    """
    lock = b'{"a":' * (levels - 3) + b"{}" + b"}" * (levels - 3)
    obj = {
        "apiVersion": "porch.kpt.dev/v1alpha1",
        "kind": "PackageRevision",
        "metadata": {"name": "blueprints.nginx.v1", "namespace": "team-a"},
        "spec": {"repository": "blueprints", "packageName": "nginx", "workspaceName": "v1"},
        "status": {"upstreamLock": "LOCK"},
    }
    return json.dumps(obj).encode().replace(b'"LOCK"', lock)


def admission_body(obj: bytes) -> bytes:
    body = review("CREATE", {"metadata": {"name": "blueprints.nginx.v1", "namespace": "team-a"}},
                  group="porch.kpt.dev", kind="PackageRevision", uid="u-deep")  # fmt: skip
    body["request"]["object"] = "OBJECT"
    return json.dumps(body).encode().replace(b'"OBJECT"', obj)


def conversion_body(obj: bytes, desired: str = "porch.kpt.dev/v1alpha2") -> bytes:
    body = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "c-deep", "desiredAPIVersion": desired, "objects": ["OBJECT"]}}  # fmt: skip
    return json.dumps(body).encode().replace(b'"OBJECT"', obj)


def send(server: Endpoint, path: str, body: bytes) -> httpx.Response:
    with server.client() as c:
        return c.post(path, content=body, headers={"Content-Type": "application/json"})


def test_an_object_at_the_depth_bound_passes_validate_mutate_and_convert(server: Endpoint) -> None:
    obj = deep_revision(128)
    validated = send(server, "/validate/packages", admission_body(obj)).json()["response"]
    assert validated["allowed"] is True, validated
    mutated = send(server, "/mutate/packages", admission_body(obj)).json()["response"]
    assert mutated["allowed"] is True and mutated["patchType"] == "JSONPatch", mutated
    converted = send(server, "/convert", conversion_body(obj)).json()["response"]
    assert converted["result"] == {"status": "Success"}
    (v2,) = converted["convertedObjects"]
    assert v2["status"]["upstreamLock"] == json.loads(obj)["status"]["upstreamLock"]
    back = send(server, "/convert", conversion_body(json.dumps(v2).encode(), "porch.kpt.dev/v1alpha1")).json()
    assert back["response"]["result"] == {"status": "Success"}


@pytest.mark.parametrize("levels", [129, 250, 1000], ids=["one-beyond", "orjson-limit", "decoder-limit"])
def test_an_object_beyond_the_bound_is_refused_by_all_three(server: Endpoint, levels: int) -> None:
    obj = deep_revision(levels)
    for path in ("/validate/packages", "/mutate/packages"):
        r = send(server, path, admission_body(obj))
        assert r.status_code == 200
        assert r.json()["response"] == {
            "uid": "u-deep",
            "allowed": False,
            "status": {
                "code": 422,
                "message": f"PackageRevision team-a/blueprints.nginx.v1 denied by nesting.max-depth: {TOO_DEEP}",
                "reason": "Invalid",
            },
        }, path
    r = send(server, "/convert", conversion_body(obj))
    assert r.status_code == 200
    assert r.json()["response"] == {
        "uid": "c-deep",
        "result": {
            "status": "Failed",
            "message": f"objects[0] (PackageRevision team-a/blueprints.nginx.v1 porch.kpt.dev/v1alpha1): {TOO_DEEP}",
        },
    }


# --- Porch's v1alpha1 approval subresource reaches the transition rule -----------------------------


def test_an_approval_from_a_draft_is_denied_with_the_transition_rule(server: Endpoint) -> None:
    path = REPO / "examples" / "reviews" / "packagerevision-approval-from-draft-denied.json"
    response = send(server, "/validate/packages", path.read_bytes()).json()["response"]
    assert (response["allowed"], response["status"]["code"]) == (False, 403)
    assert response["status"]["message"] == (
        "PackageRevision team-a/blueprints.nginx.v1 denied by packages.revision-lifecycle: "
        "spec.lifecycle cannot change from Draft to Published (allowed from Draft: Proposed); "
        "propose it first (spec.lifecycle: Proposed)"
    )

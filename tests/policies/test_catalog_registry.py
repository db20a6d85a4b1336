"""Registry credentials and bindings: field validation, push credentials, ambiguous bindings."""

from __future__ import annotations

from decimal import Decimal

import pytest

from policies.catalog_registry import go_duration_ns, is_host_port
from policies.model import Operation
from tests.policies.test_catalog_support import (
    NS,
    OTHER_NS,
    allowed,
    changed,
    context,
    denied,
    reference_grant,
    registry,
    registry_binding,
    request,
    target,
    validate,
)

FLAVOR = "spec.flavor is required when spec.webhookPath is set (e.g. zot)"
HOSTNAME_REQUIRED = "spec.hostname is required: host[:port] such as registry.example.com:5000"


def not_duration(value: object) -> str:
    return f'spec.scanInterval "{value}" is not a duration such as 30s, 5m or 1h30m'


def not_positive(value: str) -> str:
    return f'spec.scanInterval "{value}" must be greater than 0; leave it unset to switch scanning off'


def bad_host(value: str) -> str:
    return f'spec.hostname "{value}" is not host[:port] (no scheme, no path), e.g. registry.example.com:5000'


def fields(*messages: str) -> object:
    return denied("catalog.registry-fields", "; ".join(messages), 422)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({}, allowed(), id="minimal"),
        pytest.param({"webhookPath": "zot-events"}, fields(FLAVOR), id="webhook-without-flavor"),
        pytest.param({"webhookPath": "zot-events", "flavor": "zot"}, allowed(), id="webhook-with-flavor"),
        pytest.param({"flavor": "zot"}, allowed(), id="flavor-alone"),
        pytest.param({"scanInterval": "30s"}, allowed(), id="scan-30s"),
        pytest.param({"scanInterval": "1h30m"}, allowed(), id="scan-1h30m"),
        pytest.param({"scanInterval": "0s"}, fields(not_positive("0s")), id="scan-zero"),
        pytest.param({"scanInterval": "0"}, fields(not_positive("0")), id="scan-bare-zero"),
        pytest.param({"scanInterval": "-5m"}, fields(not_positive("-5m")), id="scan-negative"),
        pytest.param({"scanInterval": "30"}, fields(not_duration("30")), id="scan-no-unit"),
        pytest.param({"scanInterval": "1d"}, fields(not_duration("1d")), id="scan-days"),
        pytest.param({"scanInterval": 30}, fields(not_duration(30)), id="scan-number"),
        pytest.param({"hostname": None}, fields(HOSTNAME_REQUIRED), id="no-hostname"),
        pytest.param({"hostname": "https://zot.example.com"}, fields(bad_host("https://zot.example.com")), id="scheme"),
        pytest.param({"hostname": "zot.example.com/team"}, fields(bad_host("zot.example.com/team")), id="path"),
        pytest.param(
            {"hostname": "https://zot", "webhookPath": "events", "scanInterval": "0s"},
            fields(bad_host("https://zot"), FLAVOR, not_positive("0s")),
            id="all-at-once",
        ),
    ],
)
def test_registry_fields_on_create(spec, expected):
    hostname = spec.pop("hostname", "zot.example.com:5000")
    req = request(Operation.CREATE, registry(hostname=hostname, **spec))
    assert validate(req, context()) == expected


@pytest.mark.parametrize(
    ("value", "nanoseconds"),
    [
        ("30s", Decimal(30_000_000_000)),
        ("1.5h", Decimal(5_400_000_000_000)),
        ("1h30m", Decimal(5_400_000_000_000)),
        ("500ms", Decimal(500_000_000)),
        ("2us", Decimal(2_000)),
        ("2µs", Decimal(2_000)),
        (".5s", Decimal(500_000_000)),
        ("+1m", Decimal(60_000_000_000)),
        ("-1m", Decimal(-60_000_000_000)),
        ("0", Decimal(0)),
        ("", None),
        ("5", None),
        ("s", None),
        ("1h-5m", None),
        ("5 m", None),
        ("+", None),
    ],
)
def test_go_duration(value, nanoseconds):
    assert go_duration_ns(value) == nanoseconds


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("registry.example.com", True),
        ("registry.example.com:5000", True),
        ("Zot.Example.COM:443", True),
        ("localhost:5000", True),
        ("10.0.0.1:5000", True),
        ("[::1]:5000", True),
        ("[fd00::1]", True),
        ("zot.example.com:", False),
        ("zot.example.com:0", False),
        ("zot.example.com:65536", False),
        ("::1", False),
        ("[not-ip]:5000", False),
        ("-zot.example.com", False),
        ("zot..example.com", False),
        ("zot example.com", False),
        ("oci://zot.example.com", False),
        ("a" * 64 + ".example.com", False),
    ],
)
def test_host_port(value, ok):
    assert is_host_port(value) is ok


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            registry(hostname=None),
            registry(hostname=None, finalizers=("solar.opendefense.cloud/registry-ref",)),
            allowed(),
            id="old-violation-kept-finalizer-added",
        ),
        pytest.param(registry(), registry(scanInterval="0s"), fields(not_positive("0s")), id="new-violation"),
        pytest.param(
            registry(webhookPath="events"),
            registry(webhookPath="events", scanInterval="soon"),
            fields(not_duration("soon")),
            id="only-the-new-one-reported",
        ),
        pytest.param(registry(scanInterval="0s"), registry(scanInterval="5m"), allowed(), id="fixed"),
        pytest.param(
            registry(webhookPath="events"),
            registry(webhookPath="other-events"),
            fields(FLAVOR),
            id="webhook-path-changed-still-without-flavor",
        ),
        pytest.param(
            registry(webhookPath="events", flavor="zot"),
            registry(webhookPath="events", flavor=""),
            fields(FLAVOR),
            id="flavor-removed",
        ),
        pytest.param(
            registry(hostname=None),
            registry(hostname=""),
            allowed(),
            id="hostname-still-unset",
        ),
        pytest.param(
            registry(hostname=None, webhookPath="events"),
            registry(hostname=None, webhookPath="events", plainHTTP=True),
            allowed(),
            id="unrelated-field-changed",
        ),
    ],
)
def test_registry_fields_ratchet_on_update(old, new, expected):
    assert validate(request(Operation.UPDATE, new, old), context()) == expected


NO_PUSH = (
    "render Registry {} has no spec.solarSecretRef (missing push credentials); "
    "set it on the Registry first or choose another spec.renderRegistryRef"
)


@pytest.mark.parametrize(
    ("objs", "tgt", "expected"),
    [
        pytest.param([registry()], target(), allowed(), id="with-push-credentials"),
        pytest.param(
            [registry(solarSecretRef=None)],
            target(),
            denied("catalog.target-render-registry", NO_PUSH.format("team-a/zot")),
            id="without-push-credentials",
        ),
        pytest.param(
            [registry(solarSecretRef={"name": ""})],
            target(),
            denied("catalog.target-render-registry", NO_PUSH.format("team-a/zot")),
            id="empty-secret-name",
        ),
        pytest.param(
            [],
            target(),
            allowed("render Registry team-a/zot not found yet; the Target renders once it exists"),
            id="registry-not-yet-created",
        ),
        pytest.param([], target(registry_name=None), allowed(), id="no-render-registry"),
        pytest.param(
            [registry(ns=OTHER_NS, solarSecretRef=None), reference_grant(OTHER_NS, "Target", NS, "Registry")],
            target(registry_ns=OTHER_NS),
            denied("catalog.target-render-registry", NO_PUSH.format("team-b/zot")),
            id="cross-namespace-without-push-credentials",
        ),
    ],
)
def test_target_create_needs_push_credentials(objs, tgt, expected):
    assert validate(request(Operation.CREATE, tgt), context(*objs)) == expected


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            target(),
            changed(target(), "spec", "userdata", value={"site": "north"}),
            allowed(),
            id="unchanged-reference",
        ),
        pytest.param(
            target(registry_name="harbor"),
            target(),
            denied("catalog.target-render-registry", NO_PUSH.format("team-a/zot")),
            id="changed-to-registry-without-credentials",
        ),
        pytest.param(target(), target(registry_name="harbor"), allowed(), id="changed-to-registry-with-credentials"),
    ],
)
def test_target_update_is_judged_only_when_the_render_registry_changes(old, new, expected):
    ctx = context(registry(solarSecretRef=None), registry("harbor", hostname="harbor.example.com"))
    assert validate(request(Operation.UPDATE, new, old), ctx) == expected


ZOT = registry()
MIRROR = registry("zot-mirror", hostname="ZOT.example.com:5000")
HARBOR = registry("harbor", hostname="harbor.example.com")
EDGE_ZOT = registry_binding("edge-zot")


def ambiguous(binding: str, other: str, target_key: str = "team-a/edge-1") -> object:
    return denied(
        "catalog.registrybinding-ambiguous",
        f"RegistryBindings {binding} and {other} would both bind Target {target_key} to registry host "
        f"zot.example.com:5000; delete {other} or bind this one to another Target or Registry",
    )


@pytest.mark.parametrize(
    ("existing", "binding", "expected"),
    [
        pytest.param([EDGE_ZOT], registry_binding("edge-harbor", registry_name="harbor"), allowed(), id="other-host"),
        pytest.param(
            [EDGE_ZOT],
            registry_binding("edge-mirror", registry_name="zot-mirror"),
            ambiguous("team-a/edge-mirror", "team-a/edge-zot"),
            id="same-host-other-case",
        ),
        pytest.param(
            [EDGE_ZOT],
            registry_binding("edge-zot-2"),
            ambiguous("team-a/edge-zot-2", "team-a/edge-zot"),
            id="same-registry",
        ),
        pytest.param(
            [EDGE_ZOT],
            registry_binding("edge2-mirror", target_name="edge-2", registry_name="zot-mirror"),
            allowed(),
            id="other-target",
        ),
        pytest.param(
            [registry_binding("edge-zot", terminating=True)],
            registry_binding("edge-mirror", registry_name="zot-mirror"),
            allowed(),
            id="existing-terminating",
        ),
        pytest.param(
            [registry(ns=OTHER_NS), registry_binding("edge-zot", OTHER_NS, target_ns=NS)],
            registry_binding("edge-mirror", registry_name="zot-mirror"),
            ambiguous("team-a/edge-mirror", "team-b/edge-zot"),
            id="existing-from-other-namespace",
        ),
        pytest.param(
            [EDGE_ZOT],
            registry_binding("edge-ghost", registry_name="ghost"),
            allowed("Registry team-a/ghost not found yet; the binding is not checked for a duplicate host"),
            id="registry-not-yet-created",
        ),
    ],
)
def test_registry_binding_create_refuses_a_second_binding_per_host(existing, binding, expected):
    ctx = context(ZOT, MIRROR, HARBOR, *existing)
    assert validate(request(Operation.CREATE, binding), ctx) == expected


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            registry_binding("edge-mirror", registry_name="zot-mirror"),
            registry_binding(
                "edge-mirror",
                registry_name="zot-mirror",
                finalizers=("solar.opendefense.cloud/registrybinding-finalizer",),
            ),
            allowed(),
            id="finalizer-on-existing-ambiguity",
        ),
        pytest.param(
            registry_binding("edge-mirror", registry_name="harbor"),
            registry_binding("edge-mirror", registry_name="zot-mirror"),
            ambiguous("team-a/edge-mirror", "team-a/edge-zot"),
            id="registry-changed-into-ambiguity",
        ),
        pytest.param(
            EDGE_ZOT, registry_binding("edge-zot", registry_name="zot-mirror"), allowed(), id="itself-not-a-clash"
        ),
    ],
)
def test_registry_binding_update_is_judged_only_when_its_references_change(old, new, expected):
    ctx = context(ZOT, MIRROR, HARBOR, EDGE_ZOT, old)
    assert validate(request(Operation.UPDATE, new, old), ctx) == expected


def host_ambiguous(binding: str, other: str) -> object:
    return denied(
        "catalog.registry-hostname-ambiguous",
        f"hostname zot.example.com:5000 would make RegistryBindings {binding} and {other} both bind Target "
        "team-a/edge-1 to that host; keep the hostname or delete one of the bindings",
    )


EDGE_HARBOR = registry_binding("edge-harbor", registry_name="harbor")


@pytest.mark.parametrize(
    ("bindings", "new_host", "expected"),
    [
        pytest.param(
            [EDGE_ZOT, EDGE_HARBOR],
            "ZOT.example.com:5000",
            host_ambiguous("team-a/edge-harbor", "team-a/edge-zot"),
            id="renamed-onto-bound-host",
        ),
        pytest.param([EDGE_ZOT, EDGE_HARBOR], "harbor.example.com:443", allowed(), id="renamed-elsewhere"),
        pytest.param([EDGE_ZOT, EDGE_HARBOR], "Harbor.Example.com", allowed(), id="case-only"),
        pytest.param(
            [EDGE_ZOT, registry_binding("edge2-harbor", target_name="edge-2", registry_name="harbor")],
            "zot.example.com:5000",
            allowed(),
            id="bindings-of-other-targets",
        ),
        pytest.param(
            [registry_binding("edge-zot", terminating=True), EDGE_HARBOR],
            "zot.example.com:5000",
            allowed(),
            id="other-binding-terminating",
        ),
        pytest.param(
            [EDGE_HARBOR, registry_binding("edge-harbor-2", registry_name="harbor")],
            "harbor-2.example.com",
            allowed(),
            id="two-bindings-to-this-registry-left-alone",
        ),
    ],
)
def test_registry_hostname_change_refuses_to_make_bindings_ambiguous(bindings, new_host, expected):
    ctx = context(ZOT, HARBOR, *bindings)
    req = request(Operation.UPDATE, changed(HARBOR, "spec", "hostname", value=new_host), HARBOR)
    assert validate(req, ctx) == expected


def test_registry_created_after_its_bindings_is_checked_too():
    ctx = context(ZOT, EDGE_ZOT, registry_binding("edge-late", registry_name="late"))
    req = request(Operation.CREATE, registry("late", hostname="zot.example.com:5000"))
    assert validate(req, ctx) == host_ambiguous("team-a/edge-late", "team-a/edge-zot")


def test_registry_created_after_two_bindings_of_one_target_name_it_is_ambiguous():
    """Both bindings were admitted while the Registry did not exist (no host to compare); the
    clash becomes real when the Registry appears, so its creation is refused."""
    late_1 = registry_binding("edge-late-1", registry_name="late")
    late_2 = registry_binding("edge-late-2", registry_name="late")
    ctx = context(late_1, late_2)
    req = request(Operation.CREATE, registry("late", hostname="zot.example.com:5000"))
    assert validate(req, ctx) == host_ambiguous("team-a/edge-late-1", "team-a/edge-late-2")

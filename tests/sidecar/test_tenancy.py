"""Credentials by tenancy (issue 11, defect 3), against an htpasswd docker-registry and the apiserver double.

``team-a`` has a Registry for host H with a Secret; ``team-x`` has a Component for H and no Registry
nor Secret. Today's sidecar checked team-x's entry with team-a's Secret. What the registry received
is recorded per request (the ``Authorization`` header), so each test asserts on the wire, and on
the status the entry then carries.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from policies.availability import CHECK_FAILED_WHAT, MSG_CHECK_FAILED, Outcome
from policies.config import PolicyConfig
from policies.kinds import COMPONENT, COMPONENT_VERSION, NAMESPACE, REFERENCE_GRANT, REGISTRY, SECRET
from policies.objects import condition, ref_of
from policies.registry_credentials import MSG_NO_REGISTRY, MSG_WITH_GRANTED_SECRET, MSG_WITH_SECRET
from policies.sidecar_config import SidecarConfig
from tests.sidecar.conftest import SOLAR, T0, WARDEN_NS, Counting, Writes, counting_factory
from tests.support.registry import TEST_PASSWORD, TEST_USER, RegistryServer, push_ocm_component
from tests.support.server import wait_until
from webhook.kube.client import Kube
from webhook.sidecar.runner import CACHED_KINDS, Sidecar, SidecarSettings

pytestmark = pytest.mark.anyio

TEAM_A = "team-a"
TEAM_X = "team-x"
DESCRIPTORS = "ocm/component-descriptors"
BASIC_A = "Basic " + base64.b64encode(f"{TEST_USER}:{TEST_PASSWORD}".encode()).decode()
SETTLED = (COMPONENT, COMPONENT_VERSION, REGISTRY, REFERENCE_GRANT)


class Recording(Counting):
    """Also records, per request path, the ``Authorization`` header the registry received."""

    def __init__(self) -> None:
        super().__init__()
        self.authorizations: list[tuple[str, str | None]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.authorizations.append((request.url.path, request.headers.get("authorization")))
        return await super().handle_async_request(request)

    def sent_for(self, component: str) -> list[str | None]:
        return [auth for path, auth in self.authorizations if f"/{component}/manifests/" in path]


@pytest.fixture
def basic_registry(tmp_path: Any) -> Iterator[RegistryServer]:
    with RegistryServer(tmp_path / "basic", auth="basic") as server:
        yield server


@pytest.fixture
def recording() -> Recording:
    return Recording()


@pytest.fixture
def sidecar(kube: Kube, admin: Kube, recording: Recording) -> Iterator[Sidecar]:
    """The wired sidecar (its own cache of CACHED_KINDS, its own clients), loops driven by hand."""
    admin.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEAM_X}})
    config = SidecarConfig.model_validate({"referencedSet": {"namespace": WARDEN_NS}, "packages": {"enabled": False}})
    built = Sidecar(
        kube,
        PolicyConfig(sidecar=config),
        SidecarSettings(namespace=WARDEN_NS, identity="pod-a"),
        client_factory=counting_factory(recording),
    )
    built.cache.start()
    assert built.cache.wait_synced(15), "informer cache did not sync"
    yield built
    built.cache.stop()


def create(admin: Kube, kind: Any, namespace: str, name: str, **body: Any) -> None:
    metadata = {"name": name, "namespace": namespace}
    admin.create(kind, {"apiVersion": SOLAR, "kind": kind.kind, "metadata": metadata, **body})


def settle(admin: Kube, sidecar: Sidecar) -> None:
    def same() -> bool:
        for kind in SETTLED:
            api = {ref_of(o): o["metadata"]["resourceVersion"] for o in admin.list(kind)["items"]}
            if api != {ref_of(o): o["metadata"]["resourceVersion"] for o in sidecar.cache.list(kind)}:
                return False
        return True

    wait_until(same, timeout=10, what="the informer cache to catch up with the apiserver")


def entry(admin: Kube, namespace: str, component: str, host: str) -> None:
    """A Component for ``example.com/<component>`` on ``host`` and its version 1.0.0, in ``namespace``."""
    spec = {"registry": host, "repository": f"ocm/example.com/{component}", "scheme": "http"}
    create(admin, COMPONENT, namespace, f"example-com-{component}", spec=spec)
    create(
        admin,
        COMPONENT_VERSION,
        namespace,
        "v1",
        spec={"componentRef": {"name": f"example-com-{component}"}, "tag": "1.0.0"},
    )


@pytest.fixture
def tenants(admin: Kube, basic_registry: RegistryServer, sidecar: Sidecar) -> str:
    """team-a: Registry ``reg`` for H with Secret ``creds``, and entry ``v1`` (demo-a); team-x: entry ``v1``
    (demo-x) for H, no Registry, no Secret. Both artifacts exist. Returns H."""
    host = basic_registry.hostname
    with basic_registry.http() as http:
        push_ocm_component(http, "ocm", "example.com/demo-a", "1.0.0")
        push_ocm_component(http, "ocm", "example.com/demo-x", "1.0.0")
    data = {
        "username": base64.b64encode(TEST_USER.encode()).decode(),
        "password": base64.b64encode(TEST_PASSWORD.encode()).decode(),
    }
    admin.create(
        SECRET, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": TEAM_A}, "data": data}
    )
    create(
        admin, REGISTRY, TEAM_A, "reg", spec={"hostname": host, "plainHTTP": True, "solarSecretRef": {"name": "creds"}}
    )
    entry(admin, TEAM_A, "demo-a", host)
    entry(admin, TEAM_X, "demo-x", host)
    settle(admin, sidecar)
    return host


def status_of(admin: Kube, namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    cv = admin.get(COMPONENT_VERSION, "v1", namespace)
    return condition(cv, "Available") or {}, (cv.get("status") or {}).get("availability") or {}


def grant_team_x(admin: Kube) -> None:
    spec = {
        "from": [{"group": "solar.opendefense.cloud", "kind": "ComponentVersion", "namespace": TEAM_X}],
        "to": [{"group": "solar.opendefense.cloud", "kind": "Registry"}],
    }
    create(admin, REFERENCE_GRANT, TEAM_A, "cvs-of-team-x", spec=spec)


async def test_an_entry_without_a_registry_of_its_own_is_never_checked_with_another_tenants_secret(
    admin: Kube, sidecar: Sidecar, tenants: str, recording: Recording, writes: Writes
) -> None:
    report = await sidecar.availability.run_once(T0)
    settle(admin, sidecar)

    assert report.outcomes == {f"{TEAM_A}/v1": Outcome.FOUND, f"{TEAM_X}/v1": Outcome.UNAUTHORIZED}
    assert recording.sent_for("demo-x") == [None], "team-x's lookup carried credentials"
    assert BASIC_A in recording.sent_for("demo-a"), "team-a's own entry is checked with team-a's Secret"

    note = MSG_NO_REGISTRY.format(host=tenants, namespace=TEAM_X)
    cond, availability = status_of(admin, TEAM_X)
    assert (cond["status"], cond["reason"]) == ("Unknown", "CheckFailed")
    assert cond["message"] == MSG_CHECK_FAILED.format(
        artifact=f"{tenants}/{DESCRIPTORS}/example.com/demo-x:1.0.0",
        what=CHECK_FAILED_WHAT[Outcome.UNAUTHORIZED],
        detail=f" (HTTP 401; {note})",
    )
    assert availability["credentials"] == note
    assert status_of(admin, TEAM_A)[1]["credentials"] == MSG_WITH_SECRET.format(
        secret=f"{TEAM_A}/creds", registry=f"{TEAM_A}/reg"
    )

    # the note is stable: a second pass over the same state writes nothing
    writes.clear()
    steady = await sidecar.availability.run_once(T0 + timedelta(minutes=5))
    assert steady.outcomes == report.outcomes and steady.written == {}
    assert writes.of("componentversions") == []


async def test_a_reference_grant_lends_team_a_registry_credentials_to_team_x_and_revoking_it_takes_them_back(
    admin: Kube, sidecar: Sidecar, tenants: str, recording: Recording, writes: Writes
) -> None:
    grant_team_x(admin)
    settle(admin, sidecar)

    report = await sidecar.availability.run_once(T0)
    settle(admin, sidecar)
    assert report.outcomes == {f"{TEAM_A}/v1": Outcome.FOUND, f"{TEAM_X}/v1": Outcome.FOUND}
    assert BASIC_A in recording.sent_for("demo-x")
    cond, availability = status_of(admin, TEAM_X)
    assert (cond["status"], cond["reason"]) == ("True", "ArtifactResolved")
    assert availability["credentials"] == MSG_WITH_GRANTED_SECRET.format(
        secret=f"{TEAM_A}/creds", registry=f"{TEAM_A}/reg", grant=f"{TEAM_A}/cvs-of-team-x"
    )

    writes.clear()
    assert (await sidecar.availability.run_once(T0 + timedelta(minutes=5))).written == {}
    assert writes.of("componentversions") == []

    admin.delete(REFERENCE_GRANT, "cvs-of-team-x", TEAM_A)
    settle(admin, sidecar)
    recording.authorizations.clear()
    report = await sidecar.availability.run_once(T0 + timedelta(minutes=10))
    settle(admin, sidecar)
    assert report.outcomes[f"{TEAM_X}/v1"] is Outcome.UNAUTHORIZED
    assert recording.sent_for("demo-x") == [None]
    cond, availability = status_of(admin, TEAM_X)
    assert cond["status"] == "Unknown", "an anonymous 401 proves nothing: never False"
    assert availability["credentials"] == MSG_NO_REGISTRY.format(host=tenants, namespace=TEAM_X)


async def test_a_grant_for_another_kind_or_namespace_lends_nothing(
    admin: Kube, sidecar: Sidecar, tenants: str, recording: Recording
) -> None:
    """A Target -> Registry grant for team-x and a ComponentVersion grant for team-y: neither admits team-x."""
    for name, kind, namespace in (
        ("targets-of-team-x", "Target", TEAM_X),
        ("cvs-of-team-y", "ComponentVersion", "team-y"),
    ):
        spec = {
            "from": [{"group": "solar.opendefense.cloud", "kind": kind, "namespace": namespace}],
            "to": [{"group": "solar.opendefense.cloud", "kind": "Registry"}],
        }
        create(admin, REFERENCE_GRANT, TEAM_A, name, spec=spec)
    settle(admin, sidecar)
    report = await sidecar.availability.run_once(T0)
    assert report.outcomes[f"{TEAM_X}/v1"] is Outcome.UNAUTHORIZED
    assert recording.sent_for("demo-x") == [None]


def test_the_sidecar_caches_reference_grants() -> None:
    assert REFERENCE_GRANT in CACHED_KINDS

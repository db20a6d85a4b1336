"""The events endpoint: zot CloudEvents and distribution notifications become early re-checks of
exactly the matching entries, and never a deletion; bad payloads are refused with a clear message."""

from __future__ import annotations

import base64
import json
from datetime import timedelta

import httpx
import pytest

from policies.availability import Outcome
from policies.sidecar_config import AvailabilityConfig
from tests.sidecar.conftest import NS, T0, Counting, World, Writes
from tests.support.registry import RegistryServer, push_ocm_component
from webhook.kube.client import Kube
from webhook.kube.writes import Writer
from webhook.sidecar.availability import AvailabilityLoop
from webhook.sidecar.clients import RegistryClients
from webhook.sidecar.events import (
    DISTRIBUTION,
    MSG_BINARY_HEADERS,
    MSG_CONTENT_TYPE,
    MSG_DATA,
    MSG_DIST_EVENT,
    MSG_ENVELOPE,
    MSG_NOT_BATCH,
    MSG_NOT_EVENT,
    MSG_UNAUTHORIZED,
    events_app,
)

pytestmark = pytest.mark.anyio

REPO = "ocm/component-descriptors/example.com/demo"


@pytest.fixture
def setup(registry: RegistryServer, world: World, cache, kube: Kube, clients: RegistryClients) -> dict:
    with registry.http() as http:
        pushed = {v: push_ocm_component(http, "ocm", "example.com/demo", v, v.encode()) for v in ("1.0.0", "2.0.0")}
    world.component("example-com-demo", registry.hostname, "ocm/example.com/demo")
    world.version("one", "example-com-demo", "1.0.0")
    world.version("two", "example-com-demo", "2.0.0")
    world.settle()
    loop = AvailabilityLoop(cache, Writer(kube), clients, AvailabilityConfig())
    return {"pushed": pushed, "loop": loop, "app": events_app(cache, loop.request_recheck)}


def client_for(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sidecar")


def zot_event(kind: str, name: str, reference: str, digest: str = "") -> dict:
    return {
        "specversion": "1.0",
        "id": "e-1",
        "source": "zotregistry.dev",
        "type": f"zotregistry.image.{kind}",
        "datacontenttype": "application/json",
        "data": {
            "name": name,
            "reference": reference,
            "digest": digest,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
        },
    }


async def test_a_zot_deleted_event_rechecks_exactly_the_matching_entry_and_deletes_nothing(
    registry: RegistryServer, setup: dict, world: World, counting: Counting, writes: Writes
) -> None:
    loop: AvailabilityLoop = setup["loop"]
    await loop.run_once(T0)
    world.settle()
    # the artifact goes; the registry tells us (zot's API delete path is the only one that does)
    with registry.http() as http:
        http.delete(f"/v2/{REPO}/manifests/{setup['pushed']['1.0.0'].digest}")
    async with client_for(setup["app"]) as http:
        answer = await http.post(
            "/events",
            content=json.dumps(zot_event("deleted", REPO, "1.0.0")),
            headers={"Content-Type": "application/cloudevents+json"},
        )
    assert (answer.status_code, answer.json()) == (202, {"matched": [f"{NS}/one"], "ignored": 0})
    assert loop.recheck_wanted.is_set()
    keys = loop.take_rechecks()
    assert keys == {f"{NS}/one"}

    counting.clear()
    writes.clear()
    report = await loop.run_once(T0 + timedelta(seconds=5), only=keys)
    assert report.outcomes == {f"{NS}/one": Outcome.NOT_FOUND}
    assert counting.requests == [("HEAD", f"/v2/{REPO}/manifests/1.0.0")]
    assert [w[:3] for w in writes.of()] == [("patch", "componentversions", f"{NS}/one")]
    assert world.get("one")["status"]["conditions"][0]["reason"] == "Pending"


async def test_binary_mode_and_batches_and_digest_only_events_match(setup: dict, world: World) -> None:
    loop: AvailabilityLoop = setup["loop"]
    digest = setup["pushed"]["2.0.0"].digest
    async with client_for(setup["app"]) as http:
        binary = await http.post(
            "/events",
            content=json.dumps({"name": REPO, "reference": "2.0.0", "digest": digest}),
            headers={
                "Content-Type": "application/json",
                "ce-specversion": "1.0",
                "ce-id": "b-1",
                "ce-source": "zotregistry.dev",
                "ce-type": "zotregistry.image.updated",
            },
        )
        assert (binary.status_code, binary.json()["matched"]) == (202, [f"{NS}/two"])
        assert loop.take_rechecks() == {f"{NS}/two"}

        encoded = zot_event("deleted", REPO, "")
        encoded["data_base64"] = base64.b64encode(
            json.dumps(encoded.pop("data") | {"reference": "1.0.0"}).encode()
        ).decode()
        batch = await http.post(
            "/events",
            content=json.dumps(
                [encoded, zot_event("scanned", REPO, "2.0.0"), zot_event("deleted", "elsewhere", "1.0.0")]
            ),
            headers={"Content-Type": "application/cloudevents-batch+json"},
        )
        assert (batch.status_code, batch.json()) == (202, {"matched": [f"{NS}/one"], "ignored": 1})

        # a digest matches entries that resolved to it once a pass has recorded resolvedDigest
        await loop.run_once(T0)
        world.settle()
        loop.take_rechecks()
        by_digest = await http.post(
            "/events",
            content=json.dumps(zot_event("deleted", REPO, digest)),
            headers={"Content-Type": "application/cloudevents+json"},
        )
        assert by_digest.json()["matched"] == [f"{NS}/two"]


async def test_distribution_envelope_push_and_delete_match_and_pulls_are_ignored(setup: dict, world: World) -> None:
    loop: AvailabilityLoop = setup["loop"]
    await loop.run_once(T0)
    world.settle()
    loop.take_rechecks()
    digest = setup["pushed"]["1.0.0"].digest
    envelope = {
        "events": [
            {"id": "1", "action": "delete", "target": {"repository": REPO, "digest": digest}},
            {"id": "2", "action": "delete", "target": {"repository": REPO, "tag": "1.0.0"}},
            {"id": "3", "action": "pull", "target": {"repository": REPO, "tag": "2.0.0"}},
            {
                "id": "4",
                "action": "push",
                "target": {"repository": REPO, "digest": "sha256:" + "0" * 64, "mediaType": "application/octet-stream"},
            },
        ]
    }
    async with client_for(setup["app"]) as http:
        answer = await http.post(
            "/events", content=json.dumps(envelope), headers={"Content-Type": DISTRIBUTION + "; charset=utf-8"}
        )
    assert (answer.status_code, answer.json()) == (202, {"matched": [f"{NS}/one"], "ignored": 1})
    assert loop.take_rechecks() == {f"{NS}/one"}


@pytest.mark.parametrize(
    ("content_type", "body", "headers", "status", "error"),
    [
        ("application/cloudevents+json", "{not json", {}, 400, None),
        ("application/cloudevents+json", '{"type": "zotregistry.image.deleted"}', {}, 400, MSG_NOT_EVENT),
        ("application/cloudevents-batch+json", "{}", {}, 400, MSG_NOT_BATCH),
        (
            "application/cloudevents+json",
            json.dumps(
                {"specversion": "1.0", "id": "x", "source": "s", "type": "zotregistry.image.deleted", "data": {}}
            ),
            {},
            400,
            MSG_DATA.format(id="x"),
        ),
        (
            "application/json",
            "{}",
            {"ce-type": "zotregistry.image.deleted"},
            400,
            MSG_BINARY_HEADERS,
        ),
        (DISTRIBUTION, "[]", {}, 400, MSG_ENVELOPE),
        (
            DISTRIBUTION,
            json.dumps({"events": [{"action": "push", "target": {}}]}),
            {},
            400,
            MSG_DIST_EVENT.format(index=0),
        ),
        ("text/plain", "hello", {}, 415, MSG_CONTENT_TYPE.format(content_type="text/plain")),
        ("application/json", "{}", {}, 415, MSG_CONTENT_TYPE.format(content_type="application/json")),
    ],
)
async def test_bad_payloads_are_refused_with_a_clear_message(
    setup: dict, content_type: str, body: str, headers: dict, status: int, error: str | None
) -> None:
    async with client_for(setup["app"]) as http:
        answer = await http.post("/events", content=body, headers={"Content-Type": content_type, **headers})
    assert answer.status_code == status
    if error is None:
        assert answer.json()["error"].startswith("body is not JSON: ")
    else:
        assert answer.json() == {"error": error}
    assert not setup["loop"].recheck_wanted.is_set()


async def test_health_and_metrics_are_served(setup: dict) -> None:
    async with client_for(setup["app"]) as http:
        assert (await http.get("/healthz")).text == "ok"
        assert "catalog_warden_registry_events_total" in (await http.get("/metrics")).text


@pytest.mark.parametrize(
    ("authorization", "status"),
    [(None, 401), ("Bearer wrong", 401), ("s3cret", 401), ("Bearer s3cret", 202)],
)
async def test_a_configured_token_is_required(setup: dict, authorization: str | None, status: int) -> None:
    app = events_app(setup["loop"].view, setup["loop"].request_recheck, token="s3cret")
    headers = {"Content-Type": "application/cloudevents+json"}
    if authorization is not None:
        headers["Authorization"] = authorization
    async with client_for(app) as http:
        answer = await http.post("/events", json=zot_event("deleted", "ocm/component-descriptors/x", "1.0.0"),
                                 headers=headers)  # fmt: skip
    assert answer.status_code == status
    if status == 401:
        assert answer.json() == {"error": MSG_UNAUTHORIZED}

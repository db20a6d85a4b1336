"""The availability loop against Debian's docker-registry and the apiserver double.

Passes are driven with ``run_once(now)`` and injected times (never slept); the cache is settled
between passes so each pass decides from the state the previous one wrote.
"""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest

from policies.artifacts import DIGEST_LABEL
from policies.availability import (
    CHECK_FAILED_WHAT,
    MSG_CHECK_FAILED,
    MSG_MISSING,
    MSG_PENDING,
    MSG_RESOLVED,
    Outcome,
)
from policies.kinds import COMPONENT_VERSION, REGISTRY
from policies.objects import condition, format_time
from policies.registry_credentials import MSG_NO_REGISTRY, MSG_NO_SECRET
from policies.sidecar_config import AvailabilityConfig
from tests.sidecar.conftest import NS, T0, Counting, World, Writes
from tests.support.registry import RegistryServer, push_helm_chart, push_ocm_component
from webhook.kube.client import ApiError, Kube
from webhook.kube.writes import Writer
from webhook.sidecar.availability import AvailabilityLoop
from webhook.sidecar.clients import RegistryClients

pytestmark = pytest.mark.anyio

DESCRIPTORS = "ocm/component-descriptors"
DEMO = "example-com-demo"  # as discovery names the Component of example.com/demo
CHART = "example-com-chart"


def available(world: World, name: str) -> dict:
    cv = world.get(name)
    return {"condition": condition(cv, "Available"), "availability": cv.get("status", {}).get("availability")}


def loop_for(cache, kube: Kube, clients: RegistryClients, **config: object) -> AvailabilityLoop:
    return AvailabilityLoop(cache, Writer(kube), clients, AvailabilityConfig(**config))


@pytest.fixture
def catalog(registry: RegistryServer, world: World) -> dict:
    """Two OCM component versions and a Helm-shaped artifact in the OCM layout, each with its entry."""
    with registry.http() as http:
        pushed = {
            "a": push_ocm_component(http, "ocm", "example.com/demo", "1.0.0", b"a"),
            "b": push_ocm_component(http, "ocm", "example.com/demo", "1.1.0+ci.7", b"b"),
            "c": push_helm_chart(http, f"{DESCRIPTORS}/example.com", "chart", "2.0.0"),
        }
    world.component(DEMO, registry.hostname, "ocm/example.com/demo")
    world.component(CHART, registry.hostname, "ocm/example.com/chart")
    world.version("a", DEMO, "1.0.0")
    world.version("b", DEMO, "1.1.0+ci.7")
    world.version("c", CHART, "2.0.0")
    world.settle()
    return pushed


async def test_missing_artifact_turns_false_after_misses_and_grace_and_green_when_pushed_back(
    registry: RegistryServer,
    world: World,
    catalog: dict,
    cache,
    kube: Kube,
    clients: RegistryClients,
    counting: Counting,
    writes: Writes,
) -> None:
    loop = loop_for(cache, kube, clients)
    host = registry.hostname
    artifact = f"{host}/{DESCRIPTORS}/example.com/demo:1.0.0"

    first = await loop.run_once(T0)
    assert first.outcomes == {f"{NS}/a": Outcome.FOUND, f"{NS}/b": Outcome.FOUND, f"{NS}/c": Outcome.FOUND}
    assert sorted(counting.of("HEAD")) == sorted(
        [
            f"/v2/{DESCRIPTORS}/example.com/demo/manifests/1.0.0",
            f"/v2/{DESCRIPTORS}/example.com/demo/manifests/1.1.0.build-ci.7",
            f"/v2/{DESCRIPTORS}/example.com/chart/manifests/2.0.0",
        ]
    )
    assert len(counting.requests) == 3
    assert available(world, "a")["condition"]["message"] == MSG_RESOLVED.format(
        artifact=artifact, digest=catalog["a"].digest
    )
    assert sorted(w[2] for w in writes.of("componentversions", "patch")) == [f"{NS}/a", f"{NS}/b", f"{NS}/c"]
    world.settle()

    # a steady state: one request per entry, no API write at all
    writes.clear()
    counting.clear()
    steady = await loop.run_once(T0 + timedelta(minutes=1))
    assert len(counting.requests) == 3 and steady.requests == 3
    assert writes.of() == [] and steady.written == {}

    # the artifact vanishes without any notification
    with registry.http() as http:
        assert http.delete(f"/v2/{DESCRIPTORS}/example.com/demo/manifests/{catalog['a'].digest}").status_code == 202
    first_miss = T0 + timedelta(minutes=2)
    expected = {1: first_miss, 2: first_miss + timedelta(minutes=1), 3: first_miss + timedelta(minutes=2)}
    for misses, now in expected.items():
        writes.clear()
        report = await loop.run_once(now)
        assert report.outcomes[f"{NS}/a"] is Outcome.NOT_FOUND
        assert [w[2] for w in writes.of()] == [f"{NS}/a"]
        state = available(world, "a")
        assert (state["condition"]["status"], state["condition"]["reason"]) == ("Unknown", "Pending")
        assert state["condition"]["message"] == MSG_PENDING.format(
            artifact=artifact, misses=misses, limit=3, since=format_time(first_miss), grace="10m0s"
        )
        assert state["availability"]["consecutiveMisses"] == misses
        world.settle()

    # N misses are not enough: the grace must pass too
    red_at = first_miss + timedelta(minutes=10)
    await loop.run_once(red_at - timedelta(seconds=1))
    world.settle()
    assert available(world, "a")["condition"]["status"] == "Unknown"
    await loop.run_once(red_at)
    world.settle()
    state = available(world, "a")
    assert state["condition"] == {
        "type": "Available",
        "status": "False",
        "reason": "ArtifactMissing",
        "message": MSG_MISSING.format(artifact=artifact, since=format_time(first_miss), misses=3),
        "lastTransitionTime": format_time(red_at),
    }
    # red is a steady state too, and nothing was ever deleted
    writes.clear()
    await loop.run_once(red_at + timedelta(minutes=5))
    assert writes.of() == []
    assert kube.get(COMPONENT_VERSION, "a", NS)["metadata"]["name"] == "a"

    # the artifact comes back: green again, misses reset
    with registry.http() as http:
        push_ocm_component(http, "ocm", "example.com/demo", "1.0.0", b"a")
    await loop.run_once(red_at + timedelta(minutes=6))
    world.settle()
    state = available(world, "a")
    assert (state["condition"]["status"], state["condition"]["reason"]) == ("True", "ArtifactResolved")
    assert state["availability"] == {
        "consecutiveMisses": 0,
        "lastCheckedAt": format_time(red_at + timedelta(minutes=6)),
        "resolvedDigest": catalog["a"].digest,
        "credentials": MSG_NO_REGISTRY.format(host=host, namespace=NS),
    }
    assert writes.of(verb="delete") == []


async def test_registry_stopped_mid_pass_gives_unknown_and_nothing_false(
    registry: RegistryServer,
    world: World,
    catalog: dict,
    cache,
    kube: Kube,
    clients: RegistryClients,
    counting: Counting,
) -> None:
    loop = loop_for(cache, kube, clients, concurrency=1, misses=1, grace="0s")
    await loop.run_once(T0)
    world.settle()
    # "b" has been missing since long ago as far as its status says: one more 404 would make it red
    world.patch_status(
        "b", {"availability": {"consecutiveMisses": 1, "firstMissAt": format_time(T0 - timedelta(hours=1))}}
    )
    world.settle()
    counting.clear()

    async def stop_after_first(request, response) -> None:
        if request.method == "HEAD" and registry.process is not None and registry.process.poll() is None:
            registry.stop()

    counting.after = stop_after_first
    report = await loop.run_once(T0 + timedelta(minutes=5))
    world.settle()

    # a: answered before the stop; b: the connection failed; c: never reached (no request sent)
    assert report.outcomes == {
        f"{NS}/a": Outcome.FOUND,
        f"{NS}/b": Outcome.TRANSPORT_ERROR,
        f"{NS}/c": Outcome.PARTIAL_SCAN,
    }
    assert len(counting.of("HEAD")) == 2
    for name in ("b", "c"):
        state = available(world, name)
        assert (state["condition"]["status"], state["condition"]["reason"]) == ("Unknown", "CheckFailed")
    assert available(world, "c")["condition"]["message"] == MSG_CHECK_FAILED.format(
        artifact=f"{registry.hostname}/{DESCRIPTORS}/example.com/chart:2.0.0",
        what=CHECK_FAILED_WHAT[Outcome.PARTIAL_SCAN],
        detail="",
    )
    assert available(world, "b")["availability"]["consecutiveMisses"] == 1, "a failure never counts a miss"
    assert all(condition(cv, "Available")["status"] != "False" for cv in cache.list(COMPONENT_VERSION))


async def test_unauthorized_is_unknown_until_credentials_are_given(
    tmp_path, world: World, cache, kube: Kube, clients: RegistryClients, counting: Counting
) -> None:
    with RegistryServer(tmp_path / "basic", auth="basic") as registry:
        with registry.http() as http:
            push_ocm_component(http, "ocm", "example.com/demo", "1.0.0")
        world.component(DEMO, registry.hostname, "ocm/example.com/demo")
        world.version("a", DEMO, "1.0.0")
        world.registry("reg", registry.hostname)
        world.settle()
        loop = loop_for(cache, kube, clients)

        report = await loop.run_once(T0)
        world.settle()
        assert report.outcomes == {f"{NS}/a": Outcome.UNAUTHORIZED}
        state = available(world, "a")
        assert state["condition"]["message"] == MSG_CHECK_FAILED.format(
            artifact=f"{registry.hostname}/{DESCRIPTORS}/example.com/demo:1.0.0",
            what=CHECK_FAILED_WHAT[Outcome.UNAUTHORIZED],
            detail=f" (HTTP 401; {MSG_NO_SECRET.format(registry=f'{NS}/reg')})",
        )
        assert state["condition"]["status"] == "Unknown"

        world.secret("reg-creds", "warden", "warden-test-password")
        world.delete(REGISTRY, "reg")
        world.registry("reg", registry.hostname, secret="reg-creds")
        world.settle()
        report = await loop.run_once(T0 + timedelta(minutes=1))
        assert report.outcomes == {f"{NS}/a": Outcome.FOUND}


async def test_full_digest_label_is_looked_up_by_digest(
    registry: RegistryServer, world: World, cache, kube: Kube, clients: RegistryClients, counting: Counting
) -> None:
    with registry.http() as http:
        pushed = push_ocm_component(http, "ocm", "example.com/demo", "1.0.0")
    world.component(DEMO, registry.hostname, "ocm/example.com/demo")
    world.version("a", DEMO, "1.0.0", labels={DIGEST_LABEL: pushed.digest.removeprefix("sha256:")})
    world.settle()
    report = await loop_for(cache, kube, clients).run_once(T0)
    assert report.outcomes == {f"{NS}/a": Outcome.FOUND}
    assert counting.of("HEAD") == [f"/v2/{DESCRIPTORS}/example.com/demo/manifests/{pushed.digest}"]


async def test_unresolved_entry_is_unknown_without_a_request(
    world: World, cache, kube: Kube, clients: RegistryClients, counting: Counting
) -> None:
    world.version("orphan", "no-such-component", "1.0.0")
    world.settle()
    report = await loop_for(cache, kube, clients).run_once(T0)
    assert report.outcomes == {f"{NS}/orphan": Outcome.UNRESOLVED}
    assert counting.requests == []
    state = available(world, "orphan")
    assert state["condition"]["message"] == MSG_CHECK_FAILED.format(
        artifact=f"the artifact of ComponentVersion {NS}/orphan",
        what=CHECK_FAILED_WHAT[Outcome.UNRESOLVED],
        detail=f" (Component {NS}/no-such-component does not exist)",
    )


async def test_a_server_error_is_unknown_with_a_stable_detail(
    registry: RegistryServer,
    world: World,
    catalog: dict,
    cache,
    kube: Kube,
    clients: RegistryClients,
    counting: Counting,
    writes: Writes,
) -> None:
    loop = loop_for(cache, kube, clients)
    counting.rewrite = lambda request: httpx.Response(503) if "demo/manifests/1.0.0" in request.url.path else None
    report = await loop.run_once(T0)
    world.settle()
    assert report.outcomes[f"{NS}/a"] is Outcome.SERVER_ERROR
    assert available(world, "a")["condition"]["message"].endswith(
        "could not be checked: the registry answered with a server error (HTTP 503); "
        "Available stays Unknown until a check answers"
    )
    writes.clear()
    await loop.run_once(T0 + timedelta(minutes=1))
    assert writes.of() == [], "the same failure again is not a change"


@pytest.mark.parametrize(
    ("status", "headers", "outcome"),
    [(403, {}, Outcome.FORBIDDEN), (429, {"Retry-After": "30"}, Outcome.RATE_LIMITED), (500, {}, Outcome.SERVER_ERROR)],
)
async def test_other_answers_are_unknown_and_never_count_a_miss(
    registry: RegistryServer,
    world: World,
    catalog: dict,
    cache,
    kube: Kube,
    clients: RegistryClients,
    counting: Counting,
    status: int,
    headers: dict,
    outcome: Outcome,
) -> None:
    world.patch_status("a", {"availability": {"consecutiveMisses": 2, "firstMissAt": format_time(T0)}})
    world.settle()
    counting.rewrite = lambda request: (
        httpx.Response(status, headers=headers) if "demo/manifests/1.0.0" in request.url.path else None
    )
    report = await loop_for(cache, kube, clients, misses=3, grace="0s").run_once(T0 + timedelta(hours=1))
    world.settle()
    assert report.outcomes[f"{NS}/a"] is outcome
    state = available(world, "a")
    assert (state["condition"]["status"], state["condition"]["reason"]) == ("Unknown", "CheckFailed")
    anonymous = f"; {MSG_NO_REGISTRY.format(host=registry.hostname, namespace=NS)}" if status == 403 else ""
    assert f"{CHECK_FAILED_WHAT[outcome]} (HTTP {status}{anonymous})" in state["condition"]["message"]
    assert state["availability"]["consecutiveMisses"] == 2


async def test_lookups_in_flight_are_bounded_by_the_configured_concurrency(
    registry: RegistryServer, world: World, cache, kube: Kube, clients: RegistryClients, counting: Counting
) -> None:
    import asyncio

    with registry.http() as http:
        for i in range(5):
            push_ocm_component(http, "ocm", "example.com/demo", f"1.0.{i}")
    world.component(DEMO, registry.hostname, "ocm/example.com/demo")
    for i in range(5):
        world.version(f"v{i}", DEMO, f"1.0.{i}")
    world.settle()
    in_flight, peak, gate = 0, 0, asyncio.Event()
    inner = counting.handle_async_request

    async def held(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await gate.wait()
        try:
            return await inner(request)
        finally:
            in_flight -= 1

    counting.handle_async_request = held  # type: ignore[method-assign]
    task = asyncio.create_task(loop_for(cache, kube, clients, concurrency=2).run_once(T0))
    for _ in range(50):  # let every task that could start, start
        await asyncio.sleep(0)
    assert (in_flight, peak) == (2, 2)
    gate.set()
    report = await task
    assert peak == 2 and report.requests == 5


async def test_one_entry_that_cannot_be_written_does_not_stop_the_pass_for_the_others(
    world: World, catalog: dict, cache, kube: Kube, clients: RegistryClients, writes: Writes
) -> None:
    class RefusesA(Writer):
        def patch_status(self, kind, obj, desired_status):  # type: ignore[no-untyped-def]
            if obj["metadata"]["name"] == "a":
                raise ApiError(500, "InternalError", "etcdserver: request timed out")
            return super().patch_status(kind, obj, desired_status)

    loop = AvailabilityLoop(cache, RefusesA(kube), clients, AvailabilityConfig())
    report = await loop.run_once(T0)
    assert report.outcomes == {f"{NS}/a": Outcome.FOUND, f"{NS}/b": Outcome.FOUND, f"{NS}/c": Outcome.FOUND}
    assert sorted(report.written) == [f"{NS}/b", f"{NS}/c"]
    assert report.errors == {f"{NS}/a": "ApiError: 500 InternalError: etcdserver: request timed out"}
    assert sorted(w[2] for w in writes.of("componentversions", "patch")) == [f"{NS}/b", f"{NS}/c"]
    assert condition(world.get("a"), "Available") is None


async def test_credentials_that_cannot_be_read_leave_entries_unchanged_and_the_pass_completes(
    world: World, catalog: dict, registry: RegistryServer, cache, kube: Kube, counting: Counting, writes: Writes
) -> None:
    from tests.sidecar.conftest import counting_factory

    world.registry("reg", registry.hostname, secret="reg-creds")
    world.settle()
    writes.clear()

    def unreadable(namespace: str, name: str) -> dict:
        raise ApiError(0, "Unreachable", "connection refused")

    loop = AvailabilityLoop(
        cache, Writer(kube), RegistryClients(cache, unreadable, counting_factory(counting)), AvailabilityConfig()
    )
    report = await loop.run_once(T0)
    assert sorted(report.errors) == [f"{NS}/a", f"{NS}/b", f"{NS}/c"]
    assert report.errors[f"{NS}/a"] == "ApiError: 0 Unreachable: connection refused"
    assert counting.requests == [] and writes.of() == []


async def test_a_finalizer_protected_entry_turns_red_and_stays_put_with_its_artifact_kept(
    registry: RegistryServer, world: World, catalog: dict, cache, kube: Kube, clients: RegistryClients, writes: Writes
) -> None:
    from policies.referenced_set import ReferencedSet, compute

    protection = "solar.opendefense.cloud/componentversion-ref"
    world.admin.patch(COMPONENT_VERSION, "a", NS, {"metadata": {"finalizers": [protection]}})
    world.settle()
    with registry.http() as http:
        assert http.delete(f"/v2/{DESCRIPTORS}/example.com/demo/manifests/{catalog['a'].digest}").status_code == 202
    writes.clear()
    loop = loop_for(cache, kube, clients, misses=2, grace="0s")
    for minute in range(4):
        await loop.run_once(T0 + timedelta(minutes=minute))
        world.settle()
    cv = world.get("a")
    assert (condition(cv, "Available")["status"], condition(cv, "Available")["reason"]) == ("False", "ArtifactMissing")
    assert cv["metadata"]["finalizers"] == [protection] and "deletionTimestamp" not in cv["metadata"]
    assert {w[0] for w in writes.of()} == {"patch"} and {w[3] for w in writes.of()} <= {"", "status"}
    referenced = compute(cache, 1, T0 + timedelta(minutes=4))
    assert isinstance(referenced, ReferencedSet)
    assert "1.0.0" in referenced.keep(registry.hostname, f"{DESCRIPTORS}/example.com/demo").tags

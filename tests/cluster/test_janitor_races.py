"""The retention janitor's two races of seed 000 through kube-apiserver, as the sidecar's
ServiceAccount with the janitor component's RBAC (``manifests/components/janitor``).

The janitor runs in process (its cache as the sidecar's token, the real Writer) and the race is
forced, never timed: the Writer is hooked so that the cluster changes after the plan and before
its delete is sent. The delete carries the uid and resourceVersion the plan evaluated; the
apiserver refuses it with a real 409 (precondition failed), the outcome is ``SkippedConflict`` and
the ComponentVersion survives. A control run with no change in between deletes the entry, and
without the component the sidecar may not delete at all (the base grants no delete).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.availability import AVAILABLE
from policies.catalog_deletion import CV_PROTECTION_FINALIZER
from policies.kinds import COMPONENT, COMPONENT_VERSION, EVENT, REGISTRY, RELEASE
from policies.model import GroupKind, Obj
from policies.sidecar_config import RetentionConfig
from tests.support.controlplane.cluster import (
    MANIFESTS,
    NAMESPACE,
    SIDECAR_ACCOUNT,
    Cluster,
    ServerProcess,
    wait_for,
)
from webhook.kube.cache import InformerCache
from webhook.kube.client import ApiError, Kube, NotFound, build_api_client
from webhook.kube.writes import DeleteResult, Writer
from webhook.sidecar.janitor import EVENT_REASON, FAILED, Janitor

pytestmark = pytest.mark.anyio

SOLAR = "solar.opendefense.cloud/v1alpha1"
JANITOR_RBAC = MANIFESTS / "components" / "janitor" / "rbac.yaml"
KINDS = (COMPONENT, COMPONENT_VERSION, REGISTRY, RELEASE)
CONFIG = RetentionConfig(enabled=True, keepLast=0)
WARDEN = f"system:serviceaccount:{NAMESPACE}:{SIDECAR_ACCOUNT}"
NOW = datetime.now(UTC).replace(microsecond=0)
RED_SINCE = (NOW - timedelta(days=8)).strftime("%Y-%m-%dT%H:%M:%SZ")
"""Past the default minRedAge of 168h."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class RecordingKube(Kube):
    """The sidecar's client; remembers every refused delete (status, the apiserver's message)."""

    refusals: list[tuple[int, str]]

    def delete(self, kind: GroupKind, name: str, namespace: str = "", options: dict[str, Any] | None = None,
               timeout: float | None = None) -> dict[str, Any]:  # fmt: skip
        try:
            return super().delete(kind, name, namespace, options, timeout)
        except ApiError as exc:
            self.refusals.append((exc.status, exc.message))
            raise


class HookedWriter(Writer):
    """The real Writer; ``between`` runs after the plan, just before each delete is sent."""

    between: Callable[[Obj], None] | None = None

    def delete_if_unchanged(self, kind: GroupKind, obj: Obj) -> DeleteResult:
        if self.between is not None:
            self.between(obj)
        return super().delete_if_unchanged(kind, obj)


def may_delete(kube: Kube) -> bool:
    review = kube.request(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        body={"spec": {"resourceAttributes": {"group": "solar.opendefense.cloud", "resource": "componentversions",
                                              "verb": "delete"}}},
    )  # fmt: skip
    return bool(review["status"]["allowed"])


@contextlib.contextmanager
def janitor_rbac(cluster: Cluster, warden: Kube) -> Iterator[None]:
    """The janitor component's ClusterRole and binding, applied as shipped and removed afterwards."""
    docs = [d for d in yaml.safe_load_all(JANITOR_RBAC.read_text()) if d]
    cluster.apply(docs)
    try:
        wait_for(lambda: may_delete(warden), "RBAC to grant the sidecar delete on ComponentVersions")
        yield
    finally:
        for doc in docs:
            with contextlib.suppress(NotFound):
                cluster.admin.request(
                    "DELETE", f"/apis/rbac.authorization.k8s.io/v1/{doc['kind'].lower()}s/{doc['metadata']['name']}"
                )
        wait_for(lambda: not may_delete(warden), "RBAC to take the delete back")


@pytest.fixture
def warden(cluster: Cluster) -> RecordingKube:
    kube = RecordingKube(build_api_client(cluster.service_account(NAMESPACE, SIDECAR_ACCOUNT)))
    kube.refusals = []
    return kube


@pytest.fixture
def cache(warden: RecordingKube) -> Iterator[InformerCache]:
    """The sidecar's cache as the runner builds it (Releases included), with the sidecar's token."""
    c = InformerCache(warden, KINDS).start()
    assert c.wait_synced(30), "informer cache did not sync"
    yield c
    c.stop()


@pytest.fixture
def writer(warden: RecordingKube) -> HookedWriter:
    return HookedWriter(warden, instance="test")


def patch(kube: Kube, ns: str, name: str, body: Obj) -> Obj:
    return kube.patch(COMPONENT_VERSION, name, ns, body)  # no status subresource: a merge patch of the object


def available(kube: Kube, ns: str, name: str, status: str, reason: str, since: str) -> None:
    condition = {"type": AVAILABLE, "status": status, "reason": reason, "message": reason, "lastTransitionTime": since}
    patch(kube, ns, name, {"status": {"conditions": [condition]}})


def settled(admin: Kube, cache: InformerCache, ns: str, name: str) -> bool:
    cached = cache.get(COMPONENT_VERSION, name, ns)
    current = admin.get(COMPONENT_VERSION, name, ns)["metadata"]["resourceVersion"]
    return cached is not None and cached["metadata"]["resourceVersion"] == current


@pytest.fixture
def old(server: ServerProcess, admin: Kube, warden: RecordingKube, cache: InformerCache, ns: str) -> str:
    """``old``: red for 8 days, unreferenced, no finalizer, in a Component with keepLast 0."""
    spec = {"registry": "registry.example.com", "repository": "demo", "scheme": "https"}
    admin.create(COMPONENT, {"apiVersion": SOLAR, "kind": "Component", "metadata": {"name": "demo", "namespace": ns},
                             "spec": spec})  # fmt: skip
    body = {"apiVersion": SOLAR, "kind": "ComponentVersion", "metadata": {"name": "old", "namespace": ns},
            "spec": {"componentRef": {"name": "demo"}, "tag": "1.0.0"}}  # fmt: skip
    admin.create(COMPONENT_VERSION, body)
    available(warden, ns, "old", "False", "ArtifactMissing", RED_SINCE)  # as the availability loop writes it
    wait_for(lambda: settled(admin, cache, ns, "old"), "the janitor's cache to see old red")
    return "old"


def exists(admin: Kube, ns: str, name: str) -> Obj | None:
    try:
        return admin.get(COMPONENT_VERSION, name, ns)
    except NotFound:
        return None


def deletions(admin: Kube, ns: str) -> list[str]:
    return [e["involvedObject"]["name"] for e in admin.list(EVENT, ns)["items"] if e["reason"] == EVENT_REASON]


def artifact_returns(admin: Kube, warden: Kube, ns: str) -> Callable[[Obj], None]:
    """Race (b): the artifact is pushed again and the availability loop turns the entry green."""

    def act(obj: Obj) -> None:
        available(warden, ns, obj["metadata"]["name"], "True", "ArtifactResolved", NOW.strftime("%Y-%m-%dT%H:%M:%SZ"))

    return act


def release_binds(admin: Kube, warden: Kube, ns: str) -> Callable[[Obj], None]:
    """Race (a): a Release binds and the Release controller adds its protection finalizer.

    Through the real webhook a Release can bind only an entry that is no longer red
    (``catalog.release-binding`` refuses a red one), so the artifact returns first; the Release
    is created as soon as the server's cache has seen that, then the controller's finalizer.
    """
    green = artifact_returns(admin, warden, ns)

    def act(obj: Obj) -> None:
        name = obj["metadata"]["name"]
        green(obj)
        release = {"apiVersion": SOLAR, "kind": "Release", "metadata": {"name": "late", "namespace": ns},
                   "spec": {"componentVersionRef": {"name": name}}}  # fmt: skip

        def bound() -> bool:
            try:
                admin.create(RELEASE, release)
            except ApiError as exc:
                if exc.status == 403 and "denied by catalog.release-binding" in exc.message:
                    return False  # the server's cache has not seen it green yet
                raise
            return True

        wait_for(bound, "the webhook to admit the Release once the entry is green")
        patch(admin, ns, name, {"metadata": {"finalizers": [CV_PROTECTION_FINALIZER]}})

    return act


async def test_without_the_component_the_janitor_may_not_delete_and_with_it_the_entry_goes(
    cluster: Cluster, admin: Kube, warden: RecordingKube, cache: InformerCache, writer: HookedWriter, old: str, ns: str
) -> None:
    janitor = Janitor(cache, writer, CONFIG)
    refused = await janitor.run_once(NOW, force=True)
    assert refused is not None and refused.results == {f"{ns}/{old}": FAILED}
    forbidden = (
        f'componentversions.solar.opendefense.cloud "{old}" is forbidden: User "{WARDEN}" cannot delete resource '
        f'"componentversions" in API group "solar.opendefense.cloud" in the namespace "{ns}"'
    )
    assert warden.refusals == [(403, forbidden)]
    assert exists(admin, ns, old)

    with janitor_rbac(cluster, warden):
        report = await janitor.run_once(NOW, force=True)
    assert report is not None and report.results == {f"{ns}/{old}": str(DeleteResult.DELETED)}
    assert exists(admin, ns, old) is None
    assert deletions(admin, ns) == [old]


@pytest.mark.parametrize("race", [release_binds, artifact_returns], ids=["release-binds", "artifact-returns"])
async def test_a_change_between_plan_and_delete_gets_a_real_409_and_the_entry_survives(
    race: Callable[[Kube, Kube, str], Callable[[Obj], None]],
    cluster: Cluster, admin: Kube, warden: RecordingKube, cache: InformerCache, writer: HookedWriter, old: str,
    ns: str, tmp_path: Path,
) -> None:  # fmt: skip
    planned: list[str] = []

    def between(obj: Obj) -> None:
        planned.append(obj["metadata"]["resourceVersion"])
        race(admin, warden, ns)(obj)

    writer.between = between
    with janitor_rbac(cluster, warden):
        report = await Janitor(cache, writer, CONFIG).run_once(NOW, force=True)

    assert report is not None and report.results == {f"{ns}/{old}": str(DeleteResult.SKIPPED_CONFLICT)}
    [version] = planned
    current: Any = exists(admin, ns, old)
    assert current is not None and "deletionTimestamp" not in current["metadata"]
    assert warden.refusals == [
        (
            409,
            f'Operation cannot be fulfilled on ComponentVersion.solar.opendefense.cloud "{old}": the '
            f"ResourceVersion in the precondition ({version}) does not match the ResourceVersion in record "
            f"({current['metadata']['resourceVersion']}). The object might have been modified",
        )
    ]
    assert deletions(admin, ns) == []

"""The chart indexer: per ``oci://`` HelmClusterAddonRepository, list tags once and examine only new ones.

Seed 004's economics: the recorded verdicts in ``HelmClusterAddonChart.status.versions[]`` are
the set of tags already examined, so a steady pass costs exactly one registry request per
repository (the tag listing) and no API write; each new tag costs one manifest GET (one attempt,
at most ``chartIndex.concurrency`` in flight). What the verdicts and the merged list are is decided
in ``policies.chart_index``; this module only sends the requests and the writes.

Per-tag errors (seed 004 taxonomy): 404 means the tag vanished mid-pass (treated as not listed);
401/403 stop this repository's pass with no write at all (the credentials are wrong for every
tag alike); anything else is ResolvePending for that tag and the rest of the pass is published.
A failed tag listing writes nothing: a read error never turns into a verdict. Each repository's
failure, whatever it is, stays its own: the pass goes on with the others.

The chart object is found by its ``repository`` and ``chart`` labels (the cache index
``policies.charts.CHARTS_BY_LABELS``), whatever name the module that created it gave it; only a
missing one is created, labelled, named by ``policies.charts_naming`` and owned by its
repository. It is never deleted here (an addon may still use it; the owner cascade removes it
with the repository). The force-reconcile annotation is removed only after a pass whose fetch
ran and whose result was stored, so a request for a full pass cannot be swallowed by a pass that
failed before fetching or whose status write met a conflict.

Credentials: a HelmClusterAddonRepository is cluster-scoped, so no tenant owns it and no tenant's
Registry may lend it a Secret (that would publish a tenant's private chart versions cluster-wide).
Only a Registry in the warden's own namespace for the host does; otherwise the listing is anonymous.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
import yaml  # type: ignore[import-untyped, unused-ignore]

from policies.chart_http_index import desired_http_versions, read_index
from policies.chart_index import (
    FORCE_RECONCILE_ANNOTATION,
    Examination,
    Pending,
    Vanished,
    desired_versions,
    examine_manifest,
    listed_versions,
    pending_count,
    referenced_versions,
    tags_to_examine,
)
from policies.chart_repository_status import PassOutcome, desired_repository_status
from policies.charts import ADDONS_BY_REPOSITORY, LABEL_CHART, LABEL_REPOSITORY, OCI_SCHEME, find_chart
from policies.charts_naming import helm_cluster_addon_chart_name
from policies.kinds import HELM_CLUSTER_ADDON, HELM_CLUSTER_ADDON_CHART, HELM_CLUSTER_ADDON_REPOSITORY
from policies.model import Obj
from policies.objects import dig, name_of
from policies.sidecar_config import ChartIndexConfig
from policies.view import View
from webhook.kube.client import ApiError, Conflict, Kube
from webhook.kube.writes import Writer
from webhook.registry.client import RegistryClient, default_tls_context, tls_context
from webhook.registry.errors import Forbidden, RegistryError, Unauthorized
from webhook.registry.errors import NotFound as ManifestNotFound
from webhook.sidecar.clients import RegistryClients

log = logging.getLogger("catalog_warden.sidecar.chart_index")

CHART_API_VERSION = "helm.deckhouse.io/v1alpha1"
REPOSITORY_API_VERSION = "helm.deckhouse.io/v1alpha1"


class RepositoryDenied(Exception):
    """401/403 on a manifest: terminal for the repository's pass (seed 004 escalation)."""


@dataclass(frozen=True, slots=True)
class OciLocation:
    """Where an ``oci://host[:port]/path/chart`` repository's chart lives; the last segment is the chart."""

    hostname: str
    repository: str
    chart: str


def oci_location(url: str) -> OciLocation | None:
    """Parse a repository URL; None for a non-OCI URL or one without a chart path."""
    if not url.startswith(OCI_SCHEME):
        return None
    parts = urlsplit(url)
    path = parts.path.strip("/")
    if not parts.netloc or not path:
        return None
    return OciLocation(parts.netloc.lower(), path, path.rsplit("/", 1)[-1])


@dataclass
class RepositoryReport:
    """What one repository's pass did."""

    requests: int = 0
    """Registry requests sent (tag listing + manifest GETs)."""
    examined: list[str] = field(default_factory=list)
    created: bool = False
    written: bool = False
    """The chart's status was written."""
    repository_written: bool = False
    """The repository's status was written."""
    pending: int = 0
    error: str = ""


@dataclass
class IndexReport:
    now: datetime
    repositories: dict[str, RepositoryReport] = field(default_factory=dict)


class ChartIndexer:
    """One pass over every HelmClusterAddonRepository with an ``oci://`` URL, from the informer cache."""

    def __init__(
        self,
        view: View,
        kube: Kube,
        writer: Writer,
        clients: RegistryClients,
        config: ChartIndexConfig,
        *,
        namespace: str,
    ) -> None:
        self.view = view
        self.namespace = namespace
        """The warden's namespace: only its Registries lend credentials (repositories are cluster-scoped)."""
        self.kube = kube
        self.writer = writer
        self.clients = clients
        self.config = config
        self._last_pass: datetime | None = None

    def due(self, now: datetime) -> bool:
        """Passes ride on the sidecar's schedule; at least ``chartIndex.interval`` apart."""
        return self._last_pass is None or now - self._last_pass >= self.config.interval

    async def run_once(self, now: datetime) -> IndexReport:
        self._last_pass = now
        report = IndexReport(now)
        self.clients.begin_pass()
        repositories = sorted(self.view.list(HELM_CLUSTER_ADDON_REPOSITORY), key=name_of)
        for repo in repositories:
            one = RepositoryReport()
            try:
                url = str(dig(repo, "spec", "url", default=""))
                if url.startswith(HTTP_SCHEMES):
                    report.repositories[name_of(repo)] = one
                    await self._index_http(repo, url, one, now)
                    continue
                location = oci_location(url)
                if location is None:
                    continue
                report.repositories[name_of(repo)] = one
                await self._index(repo, location, one, now)
            except Exception as exc:  # one repository's failure (even an unforeseen one) never stops the others
                report.repositories[name_of(repo)] = one
                one.error = f"{type(exc).__name__}: {exc}"
                expected = isinstance(exc, (RegistryError, RepositoryDenied, ApiError, IndexFetchError))
                log.warning(
                    "chart index failed",
                    exc_info=not expected,
                    extra={"fields": {"repository": name_of(repo), "error": one.error}},
                )
        log.info(
            "chart index pass",
            extra={"fields": {"repositories": len(report.repositories), "requests": _requests(report)}},
        )
        return report

    async def _index(self, repo: Obj, location: OciLocation, report: RepositoryReport, now: datetime) -> None:
        client = (await self.clients.for_namespace(self.namespace, location.hostname, requester=None)).client
        force = FORCE_RECONCILE_ANNOTATION in (dig(repo, "metadata", "annotations", default=None) or {})
        try:
            tags, current, desired = await self._fetch(client, repo, location, force, report)
        except (RegistryError, RepositoryDenied) as exc:
            failed = PassOutcome(fetched=True, failed=True, error=f"{type(exc).__name__}: {exc}")
            await asyncio.to_thread(self._write_repository, repo, failed, now, False, report)
            raise
        chart_name = (
            name_of(current) if current is not None else helm_cluster_addon_chart_name(name_of(repo), location.chart)
        )
        stored = await asyncio.to_thread(self._write, repo, chart_name, location.chart, current, desired, report)
        if not stored:
            return  # a conflict: the next pass decides again from fresh state, repository status included
        charts = 1 if listed_versions(tags) else 0
        outcome = PassOutcome(fetched=True, pending=report.pending, charts=charts, force_handled=force)
        await asyncio.to_thread(self._write_repository, repo, outcome, now, force, report)

    async def _fetch(
        self, client: RegistryClient, repo: Obj, location: OciLocation, force: bool, report: RepositoryReport
    ) -> tuple[list[str], Obj | None, list[dict[str, Any]]]:
        """The tag listing and the manifest requests: the listed tags, the chart as read, its desired versions."""
        report.requests += 1
        tags = await client.tags(location.repository)
        repo_name = name_of(repo)
        chart = find_chart(self.view, repo_name, location.chart)
        existing = dig(chart, "status", "versions", default=None)
        existing = existing if isinstance(existing, list) else None
        todo = tags_to_examine(tags, existing, force)
        examined = await self._examine_all(client, location.repository, todo, report)
        addons = self.view.indexed(HELM_CLUSTER_ADDON, ADDONS_BY_REPOSITORY, repo_name)
        referenced = referenced_versions(addons, repo_name, location.chart)
        desired = desired_versions(tags, existing, examined, referenced)
        report.pending = pending_count(desired)
        return list(tags), chart, desired

    async def _examine_all(
        self, client: RegistryClient, repository: str, tags: list[str], report: RepositoryReport
    ) -> dict[str, Examination]:
        """One manifest request per tag, at most ``concurrency`` in flight.

        A 401/403 ends the repository's pass: requests in flight are cancelled, and the flag is set
        before the semaphore is released, so no waiting tag sends a request after the denial.
        """
        limit = asyncio.Semaphore(self.config.concurrency)
        results: dict[str, Examination] = {}
        denied = asyncio.Event()

        async def one(tag: str) -> None:
            async with limit:
                if denied.is_set():
                    return
                report.requests += 1
                report.examined.append(tag)
                try:
                    results[tag] = await _examine(client, repository, tag)
                except RepositoryDenied:
                    denied.set()
                    raise

        try:
            async with asyncio.TaskGroup() as group:
                for tag in tags:
                    group.create_task(one(tag))
        except ExceptionGroup as failed:
            raise failed.exceptions[0] from None
        return results

    # ---- Helm HTTP repositories: one index.yaml per pass ------------------------------------------

    async def _index_http(self, repo: Obj, url: str, report: RepositoryReport, now: datetime) -> None:
        """Every chart the repository's ``index.yaml`` lists, one request for all (B2: ociRef, iconURL).

        A chart the index no longer lists is left as it is (the owner cascade removes it with the
        repository; an addon may still use it). A failed fetch writes no chart, only the failure.
        """
        force = FORCE_RECONCILE_ANNOTATION in (dig(repo, "metadata", "annotations", default=None) or {})
        try:
            report.requests += 1
            listed = read_index(await _fetch_index(repo, url))
        except IndexFetchError as exc:
            failed = PassOutcome(fetched=True, failed=True, error=f"{type(exc).__name__}: {exc}")
            await asyncio.to_thread(self._write_repository, repo, failed, now, False, report)
            raise
        repo_name = name_of(repo)
        addons = self.view.indexed(HELM_CLUSTER_ADDON, ADDONS_BY_REPOSITORY, repo_name)
        for chart, indexed in sorted(listed.items()):
            current = find_chart(self.view, repo_name, chart)
            existing = dig(current, "status", "versions", default=None)
            referenced = referenced_versions(addons, repo_name, chart)
            desired = desired_http_versions(
                indexed.versions, existing if isinstance(existing, list) else None, referenced
            )
            extra = {"iconURL": indexed.icon_url} if indexed.icon_url else {}
            name = name_of(current) if current is not None else helm_cluster_addon_chart_name(repo_name, chart)
            stored = await asyncio.to_thread(self._write, repo, name, chart, current, desired, report, extra)
            if not stored:
                return  # a conflict: the next pass decides again from fresh state
        outcome = PassOutcome(fetched=True, charts=len(listed), force_handled=force)
        await asyncio.to_thread(self._write_repository, repo, outcome, now, force, report)

    # ---- writes (blocking; run in a worker thread) ----------------------------------------------

    def _write(
        self,
        repo: Obj,
        chart_name: str,
        chart: str,
        current: Obj | None,
        desired: list[dict[str, Any]],
        report: RepositoryReport,
        extra: Mapping[str, Any] | None = None,
    ) -> bool:
        """Bring the chart's status to ``desired`` (and ``extra`` fields); False when a conflict left it as it was."""
        if current is None:
            if not desired:
                return True
            current = self.kube.create(HELM_CLUSTER_ADDON_CHART, _chart_object(repo, chart_name, chart))
            report.created = True
        status = current.get("status")
        base = dict(status) if isinstance(status, Mapping) else {}
        try:
            report.written = (
                self.writer.patch_status(
                    HELM_CLUSTER_ADDON_CHART, current, {**base, **(extra or {}), "versions": desired}
                )
                is not None
            )
        except Conflict:
            # read from a stale cache: the next pass decides again from fresh state (and a force
            # request stays, or the verdicts it paid for would be lost with it)
            log.info("chart status conflict", extra={"fields": {"chart": chart_name}})
            return False
        return True

    def _write_repository(
        self, repo: Obj, outcome: PassOutcome, now: datetime, force: bool, report: RepositoryReport
    ) -> None:
        """The repository's status (only when it changed), then the force request is consumed.

        Both are conditional on the resourceVersion read; the status goes first and the annotation
        is removed at the version that write produced, so the two never conflict with each other,
        and a force request stays when the status recording that it was acted on could not be written.
        """
        desired = desired_repository_status(
            repo.get("status") if isinstance(repo.get("status"), Mapping) else None, outcome, now
        )
        try:
            written = self.writer.patch_status(HELM_CLUSTER_ADDON_REPOSITORY, repo, desired)
        except Conflict:
            log.info("repository status conflict", extra={"fields": {"repository": name_of(repo)}})
            return
        report.repository_written = written is not None
        if force:
            self._consume_force(written if written is not None else repo)

    def _consume_force(self, repo: Obj) -> None:
        meta = repo.get("metadata") or {}
        patch = {
            "metadata": {"resourceVersion": meta["resourceVersion"], "annotations": {FORCE_RECONCILE_ANNOTATION: None}}
        }
        try:
            self.kube.patch(HELM_CLUSTER_ADDON_REPOSITORY, name_of(repo), "", patch)
        except Conflict:
            log.info("force annotation changed during the pass", extra={"fields": {"repository": name_of(repo)}})


async def _examine(client: RegistryClient, repository: str, tag: str) -> Examination:
    """One attempt; only 401/403 leave this function as an error."""
    try:
        manifest = await client.get_manifest(repository, tag)
    except ManifestNotFound:
        return Vanished()
    except (Unauthorized, Forbidden) as exc:
        raise RepositoryDenied(str(exc)) from exc
    except RegistryError as exc:
        return Pending(f"manifest request failed: {exc}")
    return examine_manifest(manifest.descriptor.media_type, manifest.content, manifest.descriptor.digest)


def _chart_object(repo: Obj, chart_name: str, chart: str) -> Obj:
    owner = {
        "apiVersion": REPOSITORY_API_VERSION,
        "kind": HELM_CLUSTER_ADDON_REPOSITORY.kind,
        "name": name_of(repo),
        "uid": dig(repo, "metadata", "uid", default=""),
        "controller": True,
        "blockOwnerDeletion": True,
    }
    metadata = {
        "name": chart_name,
        "labels": {LABEL_REPOSITORY: name_of(repo), LABEL_CHART: chart},
        "ownerReferences": [owner],
    }
    return {"apiVersion": CHART_API_VERSION, "kind": HELM_CLUSTER_ADDON_CHART.kind, "metadata": metadata}


class IndexFetchError(Exception):
    """The Helm repository's ``index.yaml`` could not be read (transport, status, size or YAML)."""


HTTP_SCHEMES = ("http://", "https://")
INDEX_LIMIT = 64 * 1024 * 1024
"""Bytes of ``index.yaml`` read at most (large public repositories publish tens of MiB)."""
INDEX_TIMEOUT = 30.0


async def _fetch_index(repo: Obj, url: str) -> Any:
    """GET ``<url>/index.yaml`` with the repository's own auth and TLS settings (B6), parsed."""
    auth = dig(repo, "spec", "auth", default=None)
    user = auth.get("username") if isinstance(auth, Mapping) else None
    password = auth.get("password") if isinstance(auth, Mapping) else None
    basic = (user, password) if isinstance(user, str) and isinstance(password, str) and user else None
    ca = dig(repo, "spec", "caCertificate", default=None)
    verify: Any = False if dig(repo, "spec", "insecureSkipVerify", default=False) is True else default_tls_context()
    if isinstance(ca, str) and ca.strip() and verify is not False:
        verify = tls_context(ca)
    target = url.rstrip("/") + "/index.yaml"
    try:
        async with (
            httpx.AsyncClient(verify=verify, timeout=httpx.Timeout(INDEX_TIMEOUT), auth=basic) as http,
            http.stream("GET", target) as response,
        ):
            if response.status_code != 200:
                raise IndexFetchError(f"GET {target}: HTTP {response.status_code}")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > INDEX_LIMIT:
                    raise IndexFetchError(f"GET {target}: index larger than {INDEX_LIMIT} bytes")
    except httpx.HTTPError as exc:
        raise IndexFetchError(f"GET {target}: {type(exc).__name__}: {exc}") from exc
    try:
        return yaml.load(bytes(body), Loader=_LOADER)
    except yaml.YAMLError as exc:
        raise IndexFetchError(f"GET {target}: not YAML: {exc}") from exc


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _requests(report: IndexReport) -> int:
    return sum(r.requests for r in report.repositories.values())

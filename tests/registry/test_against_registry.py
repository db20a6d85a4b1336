"""The client against Debian's docker-registry 2.8.2, anonymous: listing, resolving, deleting."""

from __future__ import annotations

import pytest

from tests.support.registry import RegistryServer, push_helm_chart, push_index, push_ocm_component
from webhook.registry import (
    InvalidReference,
    NotFound,
    RegistryClient,
    TransportError,
    Unsupported,
    component_descriptor_repository,
    ocm_tag,
)
from webhook.registry.media_types import OCI_INDEX, OCI_MANIFEST

pytestmark = pytest.mark.anyio


def client_for(registry: RegistryServer, **kwargs) -> RegistryClient:
    return RegistryClient(registry.hostname, plain_http=True, **kwargs)


async def test_ping_answers_for_a_running_registry(registry):
    async with client_for(registry) as client:
        await client.ping()


async def test_catalog_follows_relative_link_pages(registry, repo, counting):
    with registry.http() as http:
        for name in ("c", "a", "b"):
            push_helm_chart(http, repo, name, "1.0.0")
    async with client_for(registry, transport=counting) as client:
        repositories = await client.catalog(page_size=1)
    ours = [r for r in repositories if r.startswith(repo + "/")]
    assert ours == [f"{repo}/a", f"{repo}/b", f"{repo}/c"]
    # one request per page of one: the registry sends no Link with the last page
    assert len(counting.requests) == len(repositories)
    assert all(path == "/v2/_catalog" for _, path in counting.requests)


async def test_tags_are_sorted_client_side_although_the_registry_ignores_n(registry, repo):
    with registry.http() as http:
        for version in ("0.2.0", "0.10.0", "0.1.0", "0.3.0+build.1"):
            push_helm_chart(http, repo, "chart", version)
    async with client_for(registry) as client:
        assert await client.tags(f"{repo}/chart", page_size=2) == ["0.1.0", "0.10.0", "0.2.0", "0.3.0_build.1"]


async def test_head_by_tag_and_by_digest_give_the_pushed_descriptor(registry, repo):
    with registry.http() as http:
        pushed = push_ocm_component(http, repo, "example.com/demo", "1.2.3+ci.42")
    assert pushed.repository == f"{repo}/component-descriptors/example.com/demo"
    assert pushed.tag == "1.2.3.build-ci.42"
    async with client_for(registry) as client:
        by_tag = await client.head_manifest(
            component_descriptor_repository(repo, "example.com/demo"), ocm_tag("1.2.3+ci.42")
        )
        by_digest = await client.head_manifest(pushed.repository, pushed.digest)
    assert by_tag.digest == by_digest.digest == pushed.digest
    assert by_tag.media_type == by_digest.media_type == OCI_MANIFEST
    assert by_tag.size == by_digest.size == len(pushed.manifest)


async def test_get_manifest_returns_the_exact_bytes_and_an_index_media_type(registry, repo):
    with registry.http() as http:
        child = push_helm_chart(http, repo, "multi", "1.0.0")
        index = push_index(http, f"{repo}/multi", "all", [child])
    async with client_for(registry) as client:
        manifest = await client.get_manifest(index.repository, "all")
    assert manifest.content == index.manifest
    assert manifest.descriptor.digest == index.digest
    assert manifest.descriptor.media_type == OCI_INDEX
    assert manifest.json()["manifests"][0]["digest"] == child.digest


async def test_missing_tag_and_missing_repository_are_not_found_with_their_codes(registry, repo):
    with registry.http() as http:
        push_helm_chart(http, repo, "present", "1.0.0")
    async with client_for(registry) as client:
        with pytest.raises(NotFound) as missing_tag:
            await client.get_manifest(f"{repo}/present", "9.9.9")
        with pytest.raises(NotFound) as missing_repo:
            await client.tags(f"{repo}/absent")
    assert missing_tag.value.codes == ("MANIFEST_UNKNOWN",)
    assert missing_repo.value.codes == ("NAME_UNKNOWN",)
    assert missing_repo.value.status == 404


async def test_head_of_a_missing_manifest_is_not_found(registry, repo):
    async with client_for(registry) as client:
        with pytest.raises(NotFound) as raised:
            await client.head_manifest(f"{repo}/nothing", "1.0.0")
    assert str(raised.value) == f"HEAD {registry.base_url}/v2/{repo}/nothing/manifests/1.0.0: HTTP 404"


async def test_delete_by_digest_removes_the_manifest_and_every_tag_on_it(registry, repo):
    with registry.http() as http:
        kept = push_helm_chart(http, repo, "chart", "0.1.0")
        doomed = push_helm_chart(http, repo, "chart", "0.2.0")
        http.put(
            f"/v2/{doomed.repository}/manifests/alias",
            content=doomed.manifest,
            headers={"Content-Type": doomed.media_type},
        ).raise_for_status()
    async with client_for(registry) as client:
        assert await client.tags(doomed.repository) == ["0.1.0", "0.2.0", "alias"]
        await client.delete_manifest(doomed.repository, doomed.digest)
        assert await client.tags(doomed.repository) == ["0.1.0"]
        with pytest.raises(NotFound):
            await client.head_manifest(doomed.repository, doomed.digest)
        assert (await client.head_manifest(kept.repository, "0.1.0")).digest == kept.digest


async def test_delete_by_tag_is_unsupported_on_distribution_2_8(registry, repo):
    with registry.http() as http:
        pushed = push_helm_chart(http, repo, "chart", "0.1.0")
    async with client_for(registry) as client:
        with pytest.raises(Unsupported) as raised:
            await client.delete_tag(pushed.repository, "0.1.0")
        assert raised.value.codes == ("DIGEST_INVALID",)
        assert (await client.head_manifest(pushed.repository, "0.1.0")).digest == pushed.digest


async def test_malformed_names_are_refused_before_any_request(registry, counting):
    async with client_for(registry, transport=counting) as client:
        with pytest.raises(InvalidReference, match=r"^not a valid repository name: '\.\./etc'$"):
            await client.head_manifest("../etc", "1.0.0")
        with pytest.raises(InvalidReference, match=r"^not a valid tag or digest: '1\.0\.0\+x'$"):
            await client.head_manifest("ok/repo", "1.0.0+x")
        with pytest.raises(InvalidReference, match=r"^not a valid digest: 'latest'$"):
            await client.delete_manifest("ok/repo", "latest")
    assert counting.requests == []


async def test_a_stopped_registry_is_a_transport_error_not_a_miss(tmp_path):
    server = RegistryServer(tmp_path).start()
    with server.http() as http:
        pushed = push_helm_chart(http, "charts", "chart", "1.0.0")
    async with client_for(server) as client:
        assert (await client.head_manifest(pushed.repository, "1.0.0")).digest == pushed.digest
        server.stop()
        with pytest.raises(TransportError) as raised:
            await client.head_manifest(pushed.repository, "1.0.0")
    assert not isinstance(raised.value, NotFound)
    assert str(raised.value).startswith(f"HEAD {server.base_url}/v2/charts/chart/manifests/1.0.0: ConnectError")


async def test_tls_with_a_custom_ca(tls_registry):
    with tls_registry.http() as http:
        pushed = push_helm_chart(http, "charts", "secure", "1.0.0")
    async with RegistryClient(tls_registry.hostname, ca_pem=tls_registry.tls.ca_pem) as client:
        assert (await client.head_manifest(pushed.repository, "1.0.0")).digest == pushed.digest
    async with RegistryClient(tls_registry.hostname) as untrusting:
        with pytest.raises(TransportError, match="CERTIFICATE_VERIFY_FAILED"):
            await untrusting.ping()


async def test_garbage_collect_after_delete_frees_exactly_the_deleted_artifacts_blobs(tmp_path):
    server = RegistryServer(tmp_path).start()
    with server.http() as http:
        kept = push_helm_chart(http, "charts", "chart", "0.1.0")
        doomed = push_helm_chart(http, "charts", "chart", "0.2.0")
        ocm = push_ocm_component(http, "ocm", "example.com/demo", "1.0.0")
    # manifests are stored as blobs too
    stored = {kept.digest, *kept.blobs, doomed.digest, *doomed.blobs, ocm.digest, *ocm.blobs}
    assert server.blob_digests() == stored
    async with client_for(server) as client:
        await client.delete_manifest(doomed.repository, doomed.digest)
    server.stop()
    output = server.garbage_collect()
    assert "3 blobs and 0 manifests eligible for deletion" in output
    assert server.blob_digests() == stored - {doomed.digest, *doomed.blobs}

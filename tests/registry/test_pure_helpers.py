"""The registry package's pure pieces: challenge parsing, Retry-After, OCM naming, Secret credentials."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest

from webhook.registry import (
    Credentials,
    InvalidSecret,
    component_descriptor_repository,
    credentials_from_secret_data,
    ocm_tag,
    ocm_version,
    split_component_descriptor_repository,
)
from webhook.registry.auth import Challenge, TokenCache, parse_challenges
from webhook.registry.responses import parse_retry_after


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_bearer_challenge_with_commas_inside_quotes():
    header = 'Bearer realm="https://auth.example/token",service="reg",scope="repository:a/b:pull,push"'
    assert parse_challenges(header) == [
        Challenge(
            "bearer", {"realm": "https://auth.example/token", "service": "reg", "scope": "repository:a/b:pull,push"}
        )
    ]


def test_several_challenges_and_escaped_quotes():
    header = r'Basic realm="say \"hi\"", Bearer realm="https://t/x",error="insufficient_scope"'
    assert parse_challenges(header) == [
        Challenge("basic", {"realm": 'say "hi"'}),
        Challenge("bearer", {"realm": "https://t/x", "error": "insufficient_scope"}),
    ]


def test_bare_scheme_and_empty_header():
    assert parse_challenges("Basic") == [Challenge("basic", {})]
    assert parse_challenges("") == []


NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", timedelta(seconds=120)),
        (" 0 ", timedelta(0)),
        ("Sun, 01 Mar 2026 12:00:30 GMT", timedelta(seconds=30)),
        ("Sunday, 01-Mar-26 12:01:00 GMT", timedelta(minutes=1)),
        ("Sun, 01 Mar 2026 11:59:00 GMT", timedelta(0)),
        ("-5", None),
        ("1.5", None),
        (None, None),
    ],
)
def test_retry_after_seconds_or_http_date(value, expected):
    assert parse_retry_after(value, NOW) == expected


def test_token_cache_expires_a_margin_before_the_lifetime():
    cache = TokenCache()
    key = ("https://t/x", "svc", "repository:a:pull")
    cache.put(key, "tok", timedelta(seconds=60), NOW)
    assert cache.get(key, NOW + timedelta(seconds=54)) == "tok"
    assert cache.get(key, NOW + timedelta(seconds=55)) is None
    assert cache.get(("https://t/x", "svc", "repository:b:pull"), NOW) is None


@pytest.mark.parametrize(
    ("version", "tag"),
    [("1.2.3", "1.2.3"), ("1.2.3+ci.42", "1.2.3.build-ci.42"), ("v26.4.2-rc.1+build.7", "v26.4.2-rc.1.build-build.7")],
)
def test_ocm_tag_round_trip(version, tag):
    assert ocm_tag(version) == tag
    assert ocm_version(tag) == version


@pytest.mark.parametrize(
    ("base", "component", "repository"),
    [
        ("ocm", "example.com/demo", "ocm/component-descriptors/example.com/demo"),
        ("test/", "/opendefense.cloud/ocm-demo", "test/component-descriptors/opendefense.cloud/ocm-demo"),
        ("", "example.com/demo", "component-descriptors/example.com/demo"),
    ],
)
def test_component_descriptor_repository(base, component, repository):
    assert component_descriptor_repository(base, component) == repository
    assert split_component_descriptor_repository(repository) == (base.strip("/"), component.strip("/"))


def test_split_rejects_other_repositories():
    assert split_component_descriptor_repository("charts/mychart") is None
    assert split_component_descriptor_repository("ocm/component-descriptors") is None


def test_credentials_from_secret_data():
    credentials = credentials_from_secret_data({"username": b64("robot"), "password": b64("s3cr:et")})
    assert credentials == Credentials("robot", "s3cr:et")
    assert "s3cr" not in repr(credentials)
    assert credentials.basic_header() == "Basic " + b64("robot:s3cr:et")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            None,
            "secret data lacks 'username', 'password': a registry Secret needs base64 data keys "
            "'username' and 'password'",
        ),
        (
            {"username": b64("u")},
            "secret data lacks 'password': a registry Secret needs base64 data keys 'username' and 'password'",
        ),
        ({"username": "not base64!", "password": b64("p")}, "secret data key 'username' is not valid base64"),
    ],
)
def test_credentials_from_a_bad_secret(data, message):
    with pytest.raises(InvalidSecret) as raised:
        credentials_from_secret_data(data)
    assert str(raised.value) == message

"""A bounded fuzz of the wire contract (issue 11, DESIGN.md section 4).

Every body that parses as JSON gets either a 400 Status or a typed answer whose uid is the
request's: never an HTTP 5xx, never a rule's internal error (code 500), and every patch applies
to the request object. Most cases drive the ASGI app in-process (httpx's ASGITransport, app
exceptions turned into the 500 uvicorn would send); a smaller sample goes through the real TLS
server process.

Before issue 11, 4,699 of 128,775 such AdmissionReviews got uvicorn's plain-text 500 (a list
where ``userInfo`` belongs, ``groups: 5``, a string ``object`` with an empty name) and /convert
answered 500 for objects nested 250 levels or more.
"""

from __future__ import annotations

import asyncio
import base64
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import jsonpatch
import orjson
import pytest
from hypothesis import HealthCheck, given, settings

from policies.config import PolicyConfig
from policies.families import INDEXES
from policies.model import GroupKind
from policies.view import MemoryView
from tests.server import fuzz
from tests.support.server import Endpoint
from webhook.admission import Admission
from webhook.app import WebhookApp
from webhook.conversion import convert_review
from webhook.metrics import Metrics

ADMISSION = ("admission.k8s.io/v1", "AdmissionReview")
CONVERSION = ("apiextensions.k8s.io/v1", "ConversionReview")
FUZZ = settings(
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)

Post = Callable[[str, bytes], tuple[int, bytes]]


def _view() -> MemoryView:
    """The seed objects themselves, so the rules that read cluster state find what they look for."""
    view = MemoryView(indexes=INDEXES)
    for obj, _ in fuzz.ADMISSION_OBJECTS:
        group = obj["apiVersion"].rpartition("/")[0]
        view.put(GroupKind(group, obj["kind"]), obj)
    return view


@pytest.fixture(scope="module")
def in_process() -> Iterator[Post]:
    view = _view()
    metrics = Metrics()
    app = WebhookApp(Admission(lambda: view, PolicyConfig(), metrics), metrics, convert_review)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    loop = asyncio.new_event_loop()
    client = httpx.AsyncClient(transport=transport, base_url="https://warden")

    def post(path: str, body: bytes) -> tuple[int, bytes]:
        r = loop.run_until_complete(client.post(path, content=body, headers={"Content-Type": "application/json"}))
        return r.status_code, r.content

    yield post
    loop.run_until_complete(client.aclose())
    loop.close()


@pytest.fixture(scope="module")
def over_tls(server: Endpoint) -> Iterator[Post]:
    with server.client() as client:

        def post(path: str, body: bytes) -> tuple[int, bytes]:
            r = client.post(path, content=body, headers={"Content-Type": "application/json"})
            return r.status_code, r.content

        yield post


def check_admission(status: int, body: bytes, doc: Any, path: str, sent: bytes) -> str:
    """Assert the contract for one answer (``sent``: the request body); returns what kind of answer it was."""
    uid = fuzz.request_uid(doc, ADMISSION)
    assert status in (200, 400), (status, body[:300])
    answer = orjson.loads(body)
    if status == 400:
        assert (answer["kind"], answer["code"]) == ("Status", 400)
        if uid is not None:  # a parsed review: the message names the field
            assert answer["message"].startswith("AdmissionReview request."), answer["message"]
        return "400"
    assert uid is not None, "only a parsed AdmissionReview gets an answer"
    assert (answer["apiVersion"], answer["kind"]) == ADMISSION
    response = answer["response"]
    assert response["uid"] == uid
    if not response["allowed"]:
        code = response["status"]["code"]
        assert code < 500, response["status"]["message"]
        return "422" if code == 422 else "denied"
    if "patch" in response:
        assert path.startswith("/mutate/")
        patch = orjson.loads(base64.b64decode(response["patch"]))
        jsonpatch.apply_patch(orjson.loads(sent)["request"]["object"], patch)  # raises if it does not apply
        return "patched"
    return "allowed"


def check_conversion(status: int, body: bytes, doc: Any) -> str:
    uid = fuzz.request_uid(doc, CONVERSION)
    assert status in (200, 400), (status, body[:300])
    answer = orjson.loads(body)
    if status == 400:
        assert (answer["kind"], answer["code"]) == ("Status", 400) and answer["message"]
        return "400"
    assert uid is not None
    assert (answer["apiVersion"], answer["kind"]) == CONVERSION
    response = answer["response"]
    assert response["uid"] == uid
    result = response["result"]
    if result["status"] == "Failed":
        assert result["message"].startswith("objects["), result["message"]
        return "failed"
    assert result["status"] == "Success"
    assert len(response["convertedObjects"]) == len(doc["request"]["objects"])
    return "converted"


def run_admission(post: Post, examples: int) -> Counter[str]:
    seen: Counter[str] = Counter()

    @settings(FUZZ, max_examples=examples)
    @given(fuzz.admission_cases())
    def one(case: tuple[str, bytes, Any]) -> None:
        path, body, doc = case
        status, answer = post(path, body)
        seen[check_admission(status, answer, doc, path, body)] += 1

    one()
    return seen


def run_conversion(post: Post, examples: int) -> Counter[str]:
    seen: Counter[str] = Counter()

    @settings(FUZZ, max_examples=examples)
    @given(fuzz.conversion_cases())
    def one(case: tuple[bytes, Any]) -> None:
        body, doc = case
        status, answer = post("/convert", body)
        seen[check_conversion(status, answer, doc)] += 1

    one()
    return seen


def test_admission_fuzz_in_process(in_process: Post) -> None:
    seen = run_admission(in_process, 1500)
    # The fuzz reaches every kind of answer, so a contract break anywhere would have been seen.
    assert all(seen[k] > 0 for k in ("400", "422", "denied", "allowed", "patched")), seen


def test_conversion_fuzz_in_process(in_process: Post) -> None:
    seen = run_conversion(in_process, 600)
    assert all(seen[k] > 0 for k in ("400", "failed", "converted")), seen


def test_admission_fuzz_over_tls(over_tls: Post) -> None:
    seen = run_admission(over_tls, 200)
    assert seen["400"] > 0 and seen["allowed"] + seen["denied"] + seen["422"] > 0, seen


def test_conversion_fuzz_over_tls(over_tls: Post) -> None:
    seen = run_conversion(over_tls, 100)
    assert seen["400"] > 0 and seen["converted"] > 0, seen

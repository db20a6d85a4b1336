"""Metric labels come from a closed set: no path a client sends can add a series."""

from __future__ import annotations

import httpx

from tests.server.reviews import release, review
from tests.support.server import Endpoint
from webhook.metrics import Metrics


def series(endpoint: Endpoint) -> list[str]:
    text = httpx.get(f"{endpoint.probe_url}/metrics", timeout=10).text
    return [line.rsplit(" ", 1)[0] for line in text.splitlines() if line and not line.startswith("#")]


def test_distinct_unknown_paths_and_families_leave_the_series_count_constant(server: Endpoint) -> None:
    body = review("CREATE", release("ocm-demo-v1.2.0"))
    with server.client() as c:
        for path in ("/validate/first", "/mutate/first", "/first"):  # the one "unknown" series of each
            c.post(path, json=body)
        before = series(server)
        answers = {c.post(path, json=body).status_code for i in range(150)
                   for path in (f"/validate/family-{i}", f"/mutate/f{i}", f"/path-{i}/x", f"/convert/{i}")}  # fmt: skip
    after = series(server)
    assert answers == {404}
    assert len(after) == len(before)
    assert not [s for s in after if "family-" in s or "path-" in s]
    unknown = 'catalog_warden_admission_requests_total{allowed="false",code="404",family="unknown",operation="",'
    assert server.metric(unknown + 'path="unknown"}') >= 301  # /path-i/x and /convert/i, and the first
    assert server.metric(unknown + 'path="validate"}') >= 151  # unknown families on /validate, and the first
    assert server.metric(unknown + 'path="mutate"}') >= 150


def test_observe_maps_every_label_outside_the_closed_set_to_unknown() -> None:
    metrics = Metrics(families=["catalog"])
    for i in range(1000):
        metrics.observe(f"p{i}", f"f{i}", "CREATE", "false", "404", seconds=0.001)
    metrics.observe("validate", "catalog", "CREATE", "true", "200", seconds=0.001)
    metrics.observe("convert", "", "", "true", "200", seconds=0.001)
    labels = {
        (s.labels["path"], s.labels["family"])
        for family in metrics.requests.collect()
        for s in family.samples
        if s.name.endswith("_total")
    }
    assert labels == {("unknown", "unknown"), ("validate", "catalog"), ("convert", "")}

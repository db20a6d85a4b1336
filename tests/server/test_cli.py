"""The CLI as users run it: the examples answered by `serve` and by `review`, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.server import REPO, Endpoint

EXAMPLES = sorted((REPO / "examples" / "reviews").glob("*.json"))
EXPECTED_ALLOWED = {
    "release-create-allowed.json": True,
    "release-create-denied.json": False,
    "release-update-unchanged-allowed.json": True,
    "release-create-unknown-cv-warns.json": True,
    "packagerevision-create-published-denied.json": False,
    "packagerevision-approval-from-draft-denied.json": False,
    "packagerevision-approval-allowed.json": True,
    "helmclusteraddonchart-status-by-user-denied.json": False,
}


def path_of(review: dict) -> str:
    """The webhook path the manifests route this review to (its kind's family)."""
    from policies.families import FAMILIES
    from policies.model import GroupKind

    kind = review["request"]["kind"]
    gk = GroupKind(kind["group"], kind["kind"])
    return "/validate/" + next(name for name, fam in FAMILIES.items() if gk in fam.kinds)


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "webhook.cli", *args], cwd=REPO, capture_output=True, text=True, input=stdin,
        timeout=60,
    )  # fmt: skip


def test_every_example_is_covered() -> None:
    assert sorted(p.name for p in EXAMPLES) == sorted(EXPECTED_ALLOWED)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_serve_and_review_give_the_same_answer(server: Endpoint, path: Path) -> None:
    with server.client() as c:
        served = c.post(
            path_of(json.loads(path.read_bytes())),
            content=path.read_bytes(),
            headers={"Content-Type": "application/json"},
        )
    offline = cli("review", str(path), "--state", "examples/state")
    assert offline.returncode == 0, offline.stderr
    assert json.loads(offline.stdout) == served.json()
    assert served.json()["response"]["allowed"] is EXPECTED_ALLOWED[path.name]


def test_review_reads_standard_input() -> None:
    path = REPO / "examples" / "reviews" / "release-create-denied.json"
    out = cli("review", "-", "--state", "examples/state", stdin=path.read_text())
    assert json.loads(out.stdout)["response"]["allowed"] is False


ERRORS = [
    (("serve", "--bogus"), 2, "catalog-warden: error: unrecognized arguments: --bogus"),
    (("serve", "--cert-dir", "/nonexistent/certs", "--state", "examples/state"), 1,
     "catalog-warden: error: --cert-dir /nonexistent/certs: no such directory "
     "(create one with `catalog-warden certs --out /nonexistent/certs`)"),
    (("review", "/nonexistent/review.json"), 1,
     "catalog-warden: error: cannot read /nonexistent/review.json: No such file or directory"),
    (("review", "examples/reviews/release-create-denied.json", "--state", "/nonexistent/state"), 1,
     "catalog-warden: error: state directory /nonexistent/state does not exist"),
    (("review", "pyproject.toml"), 1,
     "catalog-warden: error: pyproject.toml is not JSON or YAML: line 2 column 1: "
     "expected '<document start>', but found '<scalar>'"),
    (("review", "manifests/webhooks/kustomization.yaml"), 1,
     "catalog-warden: error: manifests/webhooks/kustomization.yaml: not an AdmissionReview with a request"),
    (("serve", "--state", "examples/state", "--kubeconfig", "kubeconfig"), 2,
     "catalog-warden serve: error: argument --kubeconfig: not allowed with argument --state"),
    (("certs",), 2, "catalog-warden certs: error: the following arguments are required: --out"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "code", "line"), ERRORS, ids=[" ".join(a) for a, _, _ in ERRORS])
def test_errors_are_one_line_and_non_zero(args: tuple[str, ...], code: int, line: str) -> None:
    out = cli(*args)
    assert (out.returncode, out.stderr) == (code, line + "\n")


def test_unreadable_state_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("kind: ComponentVersion\nmetadata: {name: x}\n")
    out = cli("review", "examples/reviews/release-create-denied.json", "--state", str(tmp_path))
    assert out.stderr == f"catalog-warden: error: {tmp_path}/bad.yaml document 1: object has no apiVersion\n"
    (tmp_path / "bad.yaml").write_text("a: [\n")
    out = cli("review", "examples/reviews/release-create-denied.json", "--state", str(tmp_path))
    assert out.returncode == 1
    assert out.stderr.startswith(f"catalog-warden: error: state file {tmp_path}/bad.yaml is not valid YAML: ")
    assert out.stderr.count("\n") == 1


def test_bad_config_names_the_key(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("identities:\n  warden: 3\n  bogus: x\n")
    out = cli("review", "examples/reviews/release-create-denied.json", "--config", str(tmp_path / "c.yaml"))
    assert out.stderr == (
        f"catalog-warden: error: config file {tmp_path}/c.yaml: identities.warden: Input should be a valid string\n"
    )


@pytest.mark.parametrize(
    ("informer", "error"),
    [
        (
            "watchTimeout: 1500ms",
            "informer.watchTimeout: Value error, must be a whole number of seconds, at least 1s "
            "(it is sent as timeoutSeconds)",
        ),
        ("maxWatchGap: 0s", "informer.maxWatchGap: Value error, must be greater than 0"),
        ("maxWatchGaps: 5s", "informer.maxWatchGaps: Extra inputs are not permitted"),
    ],
)
def test_bad_informer_bounds_name_the_key(tmp_path: Path, informer: str, error: str) -> None:
    (tmp_path / "c.yaml").write_text(f"informer:\n  {informer}\n")
    out = cli("review", "examples/reviews/release-create-denied.json", "--config", str(tmp_path / "c.yaml"))
    assert out.stderr == f"catalog-warden: error: config file {tmp_path}/c.yaml: {error}\n"


def test_certs_writes_a_chain_and_prints_the_ca_bundle(tmp_path: Path) -> None:
    import base64

    from cryptography import x509

    out = cli("certs", "--out", str(tmp_path), "--dns", "catalog-warden.catalog-warden.svc")
    assert out.returncode == 0
    assert base64.b64decode(out.stdout.strip()) == (tmp_path / "ca.crt").read_bytes()
    leaf = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["catalog-warden.catalog-warden.svc", "localhost"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


def test_a_bad_identity_pattern_names_the_key(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("identities:\n  observers: ['system:serviceaccount:**:solar-discovery']\n")
    out = cli("review", "examples/reviews/release-create-denied.json", "--config", str(tmp_path / "c.yaml"))
    assert out.stderr == (
        f"catalog-warden: error: config file {tmp_path}/c.yaml: identities.observers.0: Value error, "
        "'system:serviceaccount:**:solar-discovery' has '**'; one '*' already matches a whole namespace or name\n"
    )

"""What our packages mutating path writes fits Porch's own CRDs as shipped (schema-fit).

Alongside Porch v1alpha2 the object our mutating webhook returns is stored by upstream's
``packagerevisions.porch.kpt.dev`` CRD (``shared/upstream/porch``), not ours: every field we write
must be declared there (or the apiserver prunes it), hold a value its schema accepts, and the owner
reference must name the Repository as upstream's ``repositories.config.porch.kpt.dev`` serves it.
Metadata is never pruned, but its labels must be the v1alpha2 key upstream's printer column and
controller read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.model import Operation
from tests.policies.test_packages_support import (
    CONTROLLER,
    changed,
    context,
    mutate_all,
    repository,
    request,
    revision,
)
from tests.support.apiserver.schema import prune, validate

UPSTREAM = Path("/work/shared/upstream/porch")
PR_CRD = UPSTREAM / "porch.kpt.dev_packagerevisions.yaml"
REPO_CRD = UPSTREAM / "config.porch.kpt.dev_repositories.yaml"

pytestmark = pytest.mark.skipif(not PR_CRD.exists(), reason=f"upstream CRDs not present at {UPSTREAM}")


def served(path: Path, version: str) -> tuple[dict[str, Any], dict[str, Any]]:
    crd = yaml.safe_load(path.read_text())
    (v,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    return crd, v["schema"]["openAPIV3Schema"]


def mutated(op: Operation, obj: dict[str, Any], old: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    out, _ = mutate_all(request(op, obj, old, **kw), context(repository()))
    return out


CASES = [
    ("create, no lifecycle", lambda: mutated(Operation.CREATE, revision(None))),
    ("create, empty lifecycle", lambda: mutated(Operation.CREATE, revision(""))),
    ("create Proposed", lambda: mutated(Operation.CREATE, revision("Proposed"))),
    ("discovered, Published", lambda: mutated(Operation.CREATE, revision("Published", source=None), user=CONTROLLER)),
    (
        "publish (the publish record)",
        lambda: mutated(
            Operation.UPDATE,
            changed(revision("Proposed"), "spec", "lifecycle", value="Published"),
            revision("Proposed"),
        ),
    ),
    (
        "update with an empty lifecycle",
        lambda: mutated(Operation.UPDATE, changed(revision("Draft"), "spec", "lifecycle", value=""), revision("Draft")),
    ),
]


@pytest.mark.parametrize("build", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_upstreams_v1alpha2_crd_accepts_and_keeps_what_we_write(build) -> None:
    obj = build()
    _, schema = served(PR_CRD, "v1alpha2")
    assert validate(obj, schema) == []
    assert prune(obj, schema) == obj, "a field we wrote is not declared upstream and would be pruned"
    labels = obj["metadata"].get("labels", {})
    assert set(labels) <= {"porch.kpt.dev/latest-revision"}
    assert labels.get("porch.kpt.dev/latest-revision", "false") in ("true", "false")


def test_the_owner_reference_names_upstreams_repository() -> None:
    crd, _ = served(REPO_CRD, "v1alpha1")
    (owner,) = mutated(Operation.CREATE, revision(None))["metadata"]["ownerReferences"]
    assert owner["apiVersion"] == f"{crd['spec']['group']}/v1alpha1"
    assert owner["kind"] == crd["spec"]["names"]["kind"]
    assert crd["spec"]["scope"] == "Namespaced", "an owner in the revision's own namespace"


def test_we_write_nothing_to_a_repository_and_upstreams_crd_accepts_ours() -> None:
    """No mutating rule touches a Repository; the Repository our tests build is one upstream accepts."""
    from policies.families import TABLES
    from policies.kinds import REPOSITORY

    for op in (Operation.CREATE, Operation.UPDATE):
        assert TABLES["packages"].lookup(True, REPOSITORY, op, "") == ()
    _, schema = served(REPO_CRD, "v1alpha1")
    assert validate(repository(), schema) == []

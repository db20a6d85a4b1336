from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

Review = dict[str, Any]


@pytest.fixture
def review() -> Callable[..., Review]:
    """A ConversionReview request as kube-apiserver sends it."""

    def build(desired: str, objects: list[Any], uid: str = "705ab4f5-6393-11e8-b7cc-42010a800002") -> Review:
        return {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
        }

    return build

"""The one mutation of the catalog family: the parent Component label on a new ComponentVersion.

Discovery labels the ComponentVersions it writes with ``solar.opendefense.cloud/component`` (the
Component's name) and finds siblings by it; hand-written entries usually lack it. The label is
derived from ``spec.componentRef`` only when absent, so a second pass changes nothing. Status is
never touched: availability belongs to the sidecar, and an absent ``Available`` condition means
"not checked yet", which must not be invented here.
"""

from __future__ import annotations

import copy
import re

from policies.catalog_refs import COMPONENT_LABEL, reference_problem
from policies.decision import Decision, allow, fit_warning, invalid, mutate
from policies.model import AdmissionRequest
from policies.objects import dig, labels_of
from policies.rules import Context

_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")

WARN_COMPONENT_LABEL_SKIPPED = (
    "label " + COMPONENT_LABEL + " not added: Component name {component} is not a valid label value"
)


def componentversion_component_label(req: AdmissionRequest, ctx: Context) -> Decision:
    """Add the parent Component label from ``spec.componentRef.name`` when the label is missing."""
    if problem := reference_problem(req.object, "spec", "componentRef"):
        return invalid(problem)
    cv = req.object or {}
    component = dig(cv, "spec", "componentRef", "name", default="")
    if not component or COMPONENT_LABEL in labels_of(cv):
        return allow()
    if not _LABEL_VALUE.fullmatch(component):
        return allow(fit_warning(WARN_COMPONENT_LABEL_SKIPPED, component=component))
    desired = copy.deepcopy(dict(cv))
    metadata = desired.setdefault("metadata", {})
    metadata["labels"] = {**(metadata.get("labels") or {}), COMPONENT_LABEL: component}
    return mutate(cv, desired)

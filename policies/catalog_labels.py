"""The one mutation of the catalog family: the parent Component label on a new ComponentVersion.

Discovery labels the ComponentVersions it writes with ``solar.opendefense.cloud/component`` (the
Component's name) and finds siblings by it; hand-written entries usually lack it. The label is
derived from ``spec.componentRef`` only when absent, so a second pass changes nothing. Status is
never touched: availability belongs to the sidecar, and an absent ``Available`` condition means
"not checked yet", which must not be invented here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from policies.catalog_refs import COMPONENT_LABEL, MSG_NOT_AN_OBJECT, reference_problem
from policies.decision import Decision, allow, fit_warning, invalid, mutate
from policies.model import AdmissionRequest, Obj
from policies.objects import dig, json_type, labels_of
from policies.patch import Edit
from policies.rules import Context

_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")

WARN_COMPONENT_LABEL_SKIPPED = (
    "label " + COMPONENT_LABEL + " not added: Component name {component} is not a valid label value"
)


def _labels_problem(obj: Obj | None) -> str | None:
    """Why the label cannot be written: ``metadata`` or ``metadata.labels`` is not an object."""
    metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
    if metadata is not None and not isinstance(metadata, Mapping):
        return MSG_NOT_AN_OBJECT.format(field="metadata", got=json_type(metadata))
    labels = metadata.get("labels") if metadata is not None else None
    if labels is not None and not isinstance(labels, Mapping):
        return MSG_NOT_AN_OBJECT.format(field="metadata.labels", got=json_type(labels))
    return None


def componentversion_component_label(req: AdmissionRequest, ctx: Context) -> Decision:
    """Add the parent Component label from ``spec.componentRef.name`` when the label is missing."""
    if problem := reference_problem(req.object, "spec", "componentRef") or _labels_problem(req.object):
        return invalid(problem)
    cv = req.object or {}
    component = dig(cv, "spec", "componentRef", "name", default="")
    if not component or COMPONENT_LABEL in labels_of(cv):
        return allow()
    if not _LABEL_VALUE.fullmatch(component):
        return allow(fit_warning(WARN_COMPONENT_LABEL_SKIPPED, component=component))
    edit = Edit(cv)
    edit.at("metadata", "labels")[COMPONENT_LABEL] = component
    return mutate(cv, edit.root)

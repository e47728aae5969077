"""Health checks: pure functions from a ledger (and its snapshot) to problems with their
remediation, after the seed's troubleshooting table."""
from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext as _

SEVERITY_ORDER = {"bad": 0, "warn": 1, "info": 2}


@dataclass
class Problem:
    severity: str  # bad | warn | info
    kind: str
    subject: str  # node name or resource
    message: str
    remedy: str
    wizard: str = ""  # procedure code that fixes it, if any


def problems(ledger, snapshot=None) -> list[Problem]:
    out: list[Problem] = []
    for n in ledger.nodes:
        for r in n.stale:
            if r.stale_severity == "allocatable":
                out.append(Problem("bad", "stale-allocatable", n.name,
                                   _("%(res)s is stale but still allocatable (%(a)d): pods asking for it can be "
                                     "scheduled here and fail with UnexpectedAdmissionError.")
                                   % {"res": r.resource, "a": r.allocatable},
                                   _("Clean up now: remove it from node status (step 5 of procedure A/B), then "
                                     "recreate any pod that failed.")))
            else:
                out.append(Problem("warn", "stale-capacity", n.name,
                                   _("%(res)s is left in capacity (allocatable 0).") % {"res": r.resource},
                                   _("Harmless for scheduling; remove it with the status patch of step 5.")))
        if n.convention == "brick" and n.mode == "unlabelled":
            out.append(Problem("bad", "label-typo", n.name,
                               _("Sharing label value %(v)r is neither none nor timeslicing: no device plugin "
                                 "selects this node.") % {"v": n.sharing_label},
                               _("Set brick.cloud/gpu.sharing to exactly none or timeslicing (procedure A or B)."),
                               "A"))
        elif n.convention == "brick" and n.plugin_state in ("missing", "pending"):
            out.append(Problem("bad", "plugin-missing", n.name,
                               _("No Running device-plugin pod (%(s)s): the node exposes no GPU resource.")
                               % {"s": n.plugin_state},
                               _("If the pod is Pending or absent on a tainted node, a toleration is missing: keep "
                                 "both DaemonSets' tolerations identical in the managed manifest and apply it.")))
        if n.mode == "timeslicing" and n.replicas != n.configured_replicas and n.plugin_state == "running":
            out.append(Problem("warn", "replicas-not-reflected", n.name,
                               _("Replicas configured %(c)d but the plugin advertises %(r)d per GPU.")
                               % {"c": n.configured_replicas, "r": n.replicas},
                               _("The rollout restart was skipped (procedure C step 2): restart the time-slicing "
                                 "plugin."), "C"))
    for row in ledger.by_resource:
        if row.allocated > row.logical:
            out.append(Problem("bad", "quota-over-total", row.resource,
                               _("Allocated quota %(a)d exceeds the Total %(t)d.") % {"a": row.allocated,
                                                                                       "t": row.logical},
                               _("Replicas were lowered or nodes converted: lower Workspace quotas of this type.")))
    out.sort(key=lambda p: (SEVERITY_ORDER.get(p.severity, 9), p.kind, p.subject))
    return out


def drift_problems(drift_items) -> list[Problem]:
    """Live device-plugin objects that differ from the managed manifest (someone used
    kubectl edit, or a version was saved but not applied)."""
    out = []
    for d in drift_items:
        if d.state == "in-sync":
            continue
        what = _("missing on the cluster") if d.state == "missing" else \
            _("differs from the managed manifest at %(paths)s") % {"paths": ", ".join(d.paths[:5])}
        out.append(Problem("warn", "manifest-drift", f"{d.kind}/{d.name}", what,
                           _("Apply the managed manifest (or save the live change as a new version first, if it "
                             "was intended). A later apply of an old file would silently undo hand edits.")))
    return out

"""Whether a Workspace's pods' GPUs count against its quota, in words, for its owner's page and
the admin's detail. The decision is brickadmin/cluster/quotascope.py's (as the API server
makes it), read from the Workspace's line of the cluster view (its quotas and scopes, each
pod's requests and scope facts): no API call. Only the pods that are not plainly counted get
a note: a GPU resource the namespace's quotas do not cap (an approval caps only the resource
it approved; another is neither counted nor limited there), or one a quota's scope leaves out
(the product's Jobs)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from brickadmin.cluster import quotascope as qs

from .models import JOB_PRIORITY_CLASS

TERMINAL = ("Succeeded", "Failed")


@dataclass
class QuotaCounting:
    notes: dict[str, str] = field(default_factory=dict)  # pod name -> why it is not counted
    uncounted_running: int = 0  # of "Requested by pods" (pods bound to a node), the GPUs no quota counts
    uncounted: int = 0  # of every pod the quota would count (not finished), the GPUs no quota counts

    @property
    def requested_note(self) -> str:
        n = self.uncounted_running
        if not n:
            return ""
        return ngettext(
            "%(n)s of these is not counted against this Workspace's quota (see the pods marked below).",
            "%(n)s of these are not counted against this Workspace's quota (see the pods marked below).",
            n,
        ) % {"n": n}

    @property
    def used_note(self) -> str:
        n = self.uncounted
        if not n:
            return ""
        return ngettext(
            "Used leaves out %(n)s GPU that this namespace's pods ask for: no quota here counts it "
            "(see the pods marked above).",
            "Used leaves out %(n)s GPUs that this namespace's pods ask for: no quota here counts them "
            "(see the pods marked above).",
            n,
        ) % {"n": n}


def _scope_text(selector) -> str:
    """A scope selector as Kubernetes writes it: ``PriorityClass NotIn brick-job-priority``."""
    values = ", ".join(selector.get("values") or [])
    return " ".join(part for part in (selector.get("scopeName", ""), selector.get("operator", ""), values) if part)


def note(c: qs.Counting) -> str:
    """Why one GPU resource of a pod is not counted against the namespace's quota ('' when it is)."""
    if c.verdict == qs.COUNTED:
        return ""
    if c.verdict == qs.NOT_CAPPED and c.capped:
        text = _(
            "Not counted against this Workspace's quota: this pod asks for %(res)s, and the quota caps only "
            "%(capped)s. Other GPU resources are not capped in this namespace: neither counted nor limited."
        ) % {"res": c.resource, "capped": ", ".join(c.capped)}
    elif c.verdict == qs.NOT_CAPPED:
        text = _(
            "Not counted against any quota: this pod asks for %(res)s, and no quota of this namespace caps a GPU "
            "resource."
        ) % {"res": c.resource}
    else:
        text = _(
            "Not counted against this Workspace's quota: quota %(quota)s caps %(res)s, but its scope (%(scope)s) "
            "leaves this pod out."
        ) % {"quota": ", ".join(c.quotas), "res": c.resource, "scope": _scope_text(c.left_out_by)}
    return text


def quota_scopes(line, *, scoped: bool = True) -> list[qs.QuotaScope]:
    """The quotas stored on ``line`` (a Workspace line of the view) as the scope decision reads
    them; ``scoped=False`` drops their scopes (every pod taken as selected)."""
    return [
        qs.quota_scope(q.get("name", ""), q.get("hard") or {}, (q.get("scopes") or []) if scoped else [])
        for q in line.quotas or []
    ]


def of_line(line) -> QuotaCounting:
    """The counting of ``line``'s (a Workspace line of the view) pods against its quotas."""
    out = QuotaCounting()
    if line is None:
        return out
    scoped, unscoped = quota_scopes(line), quota_scopes(line, scoped=False)
    for p in line.pods or []:
        if p.get("phase") in TERMINAL or not p.get("requests"):
            continue  # a finished pod counts against no quota
        facts = p.get("scope")
        # a pod line stored before scope facts were kept: its scopes are taken as matching
        lines = qs.counting(p["requests"], facts or {}, scoped if facts is not None else unscoped)
        words = [w for w in map(note, lines) if w]
        if words and (facts or {}).get("priority_class") == JOB_PRIORITY_CLASS:
            words.append(_("It is a Job's pod: Jobs run at the scavenging priority, outside Workspace quotas."))
        if words:
            out.notes[p.get("name", "")] = " ".join(words)
        missed = qs.uncounted(lines)
        out.uncounted += missed
        if p.get("node"):  # bound to a node: in "Requested by pods", as the scheduler counts it
            out.uncounted_running += missed
    return out

"""Why a Workspace's GPU pods wait, in words, with what to do: for its owner's page and the
admin's detail. Reads the view only (the Workspace line, the stored GPU capacity, the
kubelet-refusal findings): two queries besides the line, no API call. The causes are
gpus/pod_waits.py's."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.urls import reverse
from django.utils.translation import gettext as _

from gpus.numbers import pod_waits as pw
from gpus.view.reading import pod_admission_findings, stored_gpu_capacity

from .counting import quota_scopes


@dataclass
class Cause:
    kind: str
    pod: str
    message: str
    remedy: str
    links: list[tuple[str, str]] = field(default_factory=list)  # (text, url)
    said: str = ""  # the scheduler's own words (Kueue's, for a Workload it has not admitted), shown beside
    said_by: str = "scheduler"  # or "kueue"


def _names(pods) -> str:
    return ", ".join(f"{name} ({n})" for name, n in pods)


def causes(line, *, admin: bool) -> list[Cause]:
    """The causes of ``line``'s waiting and failed GPU pods (``line``: a Workspace line of the
    view, gpus.view.reading.workspace_line)."""
    if line is None:
        return []
    queued = kueue_causes(line.namespace, admin=admin)
    pods = line.pods or []
    if not any((p.get("phase") in ("Pending", "Failed")) for p in pods) and not line.quota:
        return queued
    found = pw.waits(pods, line.gpu_quotas or {}, stored_gpu_capacity(), quota_scopes(line))
    # A pod Kueue holds back (its Workload not admitted) is not yet the scheduler's: Kueue's cause says why.
    held = {c.pod for c in queued}
    found = [w for w in found if not (w.kind == pw.STARTING and w.pod in held)]
    diagnoses = pod_admission_findings(line.namespace) if any(w.kind == pw.ADMISSION for w in found) else {}
    return queued + [_words(w, line.namespace, admin, diagnoses.get(w.pod)) for w in found]


def kueue_causes(namespace: str, *, admin: bool) -> list[Cause]:
    """The Workspace's Workloads Kueue has not admitted (its QuotaReserved condition false), with
    Kueue's message and their place in the Workspace's queue, as the beat last read them
    (workspaces/elastic.py): one query, no API call; none without Kueue."""
    from . import elastic

    mine = [w for w in elastic.facts().waiting if w.get("namespace") == namespace]
    out = []
    for w in mine:
        owner = str(w.get("owner") or "")
        kind, _sep, name = owner.partition("/")
        facts = {"what": owner, "wl": w.get("workload", ""), "pos": w.get("position") or 0, "n": len(mine)}
        out.append(
            Cause(
                kind="kueue-not-admitted",
                pod=name if kind == "Pod" else "",
                message=_(
                    "Kueue has not admitted %(what)s (Workload %(wl)s) yet: it is number %(pos)d of %(n)d "
                    "waiting in this Workspace's queue."
                )
                % facts,
                remedy=_(
                    "Kueue admits it once the Workspace's ClusterQueue has quota for it (an admitted Workload"
                    " ends, or the cohort lends idle GPUs). Raise the guarantee or the burst ceiling if the"
                    " Workspace needs more for long."
                )
                if admin
                else _(
                    "It starts when your guarantee has room for it or the cohort has idle GPUs to lend up to"
                    " your burst ceiling. End a pod or Job you no longer need to make room sooner."
                ),
                links=[(_("Elastic quota"), reverse("workspace_quota", args=[namespace]))] if admin else [],
                said=str(w.get("message") or w.get("reason") or ""),
                said_by="kueue",
            )
        )
    return out


@dataclass
class _Words:
    """What a wait is said as: its message, the owner's and the admin's remedy and links."""

    message: str
    remedy: str
    admin_remedy: str
    links: list[tuple[str, str]] = field(default_factory=list)
    admin_links: list[tuple[str, str]] = field(default_factory=list)


def _filled(namespace: str, why: str, want=None) -> str:
    """The request form, filled from the Workspace (workspaces.views.workspace_request reads it)."""
    query = {"from": namespace, "why": why}
    if want:
        query["gpu"] = want
    return reverse("workspace_request") + "?" + urlencode(query)


def _request_more(namespace: str, w: pw.Wait):
    return (_("Request more GPUs"), _filled(namespace, "more", w.facts.get("want")))


def _change_type(namespace: str, w: pw.Wait):
    return (_("Change the GPU type"), _filled(namespace, "type", w.facts.get("want")))


def _see_free():
    return (_("See which GPU types are free"), reverse("availability"))


def _node_links(w: pw.Wait) -> list[tuple[str, str]]:
    return [
        (_("Node %(node)s") % {"node": n}, reverse("node_detail", args=[n])) for n in (w.facts.get("nodes") or [])[:3]
    ]


def _quota_full(w: pw.Wait, f: dict, namespace: str, diagnosis) -> _Words:
    return _Words(
        message=_(
            "The Workspace's quota of %(res)s is used up: %(used)d of %(hard)d, held by %(pods)s. A new pod "
            "asking for it is refused until one of them ends."
        )
        % {**f, "used": w.facts["used"], "hard": w.facts["hard"], "pods": _names(w.facts["pods"]) or "-"},
        remedy=_("End a pod you no longer need, or request more GPUs."),
        admin_remedy=_("Raise the quota if the owner needs more, or ask the owner to end a pod they no longer need."),
        links=[_request_more(namespace, w)],
        admin_links=[(_("The quota in the cluster"), reverse("cluster_workspace", args=[namespace]) + "#quota")],
    )


def _shared_many(w: pw.Wait, f: dict, namespace: str, diagnosis) -> _Words:
    return _Words(
        message=(
            _(
                "Pod %(pod)s asked for %(want)d shared GPUs and the kubelet refused it: time-slicing gives one "
                "shared GPU per pod (failRequestsGreaterThanOne)."
            )
            if w.facts.get("refused")
            else _(
                "Pod %(pod)s asks for %(want)d shared GPUs: time-slicing gives one shared GPU per pod "
                "(failRequestsGreaterThanOne), so it will be refused."
            )
        )
        % f,
        remedy=_(
            "Ask for one shared GPU per pod and recreate the pod; for more GPUs in one pod, change the "
            "Workspace's type to exclusive GPUs."
        ),
        admin_remedy=_("Tell the owner: one shared GPU per pod. A pod that needs more needs an exclusive GPU type."),
        links=[_change_type(namespace, w)],
        admin_links=[(_("Findings"), reverse("health"))],
    )


def _no_such_type(w: pw.Wait, f: dict, namespace: str, diagnosis) -> _Words:
    return _Words(
        message=_("Pod %(pod)s waits for %(res)s, which no node offers now.") % f,
        remedy=_("Change the Workspace's GPU type to one the cluster offers."),
        admin_remedy=_("Convert a node to the mode that serves it, or move the Workspace to a type offered now."),
        links=[_see_free(), _change_type(namespace, w)],
        admin_links=[(_("Conversions"), reverse("procedure_index"))],
    )


def _cordoned_only(w: pw.Wait, f: dict, namespace: str, diagnosis) -> _Words:
    nodes = w.facts.get("nodes") or []
    return _Words(
        message=_(
            "Pod %(pod)s waits for %(want)d %(res)s: only cordoned nodes (%(nodes)s) have room for it; "
            "%(exist)d exist in the cluster, %(free)d are free on nodes it may use."
        )
        % {**f, "nodes": ", ".join(nodes[:5])},
        remedy=_("It starts when an admin uncordons a node after its maintenance; or change the GPU type."),
        admin_remedy=_("Uncordon the node when its maintenance is over (or finish the run that cordoned it)."),
        links=[_see_free(), _change_type(namespace, w)],
        admin_links=_node_links(w),
    )


def _taint(w: pw.Wait, f: dict, namespace: str, diagnosis) -> _Words:
    return _Words(
        message=_(
            "Pod %(pod)s waits for %(want)d %(res)s: the free ones are on nodes with a taint it does not "
            "tolerate (%(taints)s); %(exist)d exist, %(free)d are free on other nodes (at most %(most)d on "
            "one)."
        )
        % {**f, "taints": ", ".join(w.facts.get("taints") or []) or "?"},
        remedy=_("Those nodes are reserved: ask an admin for access, or change the GPU type."),
        admin_remedy=_(
            "Remove the taint if the node is no longer reserved, or give this Workspace's pods the toleration."
        ),
        links=[_see_free(), _change_type(namespace, w)],
        admin_links=_node_links(w),
    )


def _no_free(w: pw.Wait, f: dict, namespace: str, diagnosis) -> _Words:
    return _Words(
        message=_(
            "Pod %(pod)s waits for %(want)d %(res)s: %(exist)d exist, %(free)d are free, at most %(most)d "
            "on one node (a pod's GPUs come from one node)."
        )
        % f,
        remedy=_("It starts when enough GPUs free up on one node. Ask for fewer GPUs per pod, or change the GPU type."),
        admin_remedy=_("Free GPUs held by idle Workspaces, or add nodes of this type."),
        links=[_see_free(), _change_type(namespace, w)],
        admin_links=[
            (_("Idle allocations"), reverse("cluster_workspaces") + "?sort=idle_since"),
            (_("Availability"), reverse("availability")),
        ],
    )


def _admission(w: pw.Wait, f: dict, namespace: str, diagnosis) -> _Words:
    admin_links: list[tuple[str, str]] = []
    if diagnosis is not None:
        message, admin_remedy = diagnosis.message, diagnosis.remedy
        if diagnosis.fix:
            admin_links = [(_("Fix"), diagnosis.fix_plan_url)]
    else:
        message = _("The kubelet on %(node)s refused pod %(pod)s: %(why)s") % {
            **f,
            "node": w.facts.get("node") or "?",
            "why": w.facts.get("message") or pw.ADMISSION_ERROR,
        }
        admin_remedy = _("Read the kubelet's message; recreate the pod once its cause is fixed.")
    return _Words(
        message=message,
        remedy=_("The pod will not start by itself: an admin has been told. Recreate it once the cause is fixed."),
        admin_remedy=admin_remedy,
        admin_links=admin_links,
    )


def _container(w: pw.Wait, f: dict, namespace: str, diagnosis) -> _Words:
    remedy = _(
        "ImagePullBackOff or ErrImagePull: check the image name and that the registry is reachable. "
        "ContainerCreating: wait."
    )
    why = " ".join(x for x in (w.facts.get("reason"), w.facts.get("message")) if x)
    return _Words(_("Pod %(pod)s is placed; its container waits: %(why)s") % {**f, "why": why}, remedy, remedy)


def _failed(w: pw.Wait, f: dict, namespace: str, diagnosis) -> _Words:
    code = w.facts.get("exitCode")
    why = " ".join(
        str(x)
        for x in (
            w.facts.get("reason"),
            w.facts.get("message"),
            (_("exit code %(code)s") % {"code": code}) if code is not None else "",
        )
        if x
    )
    remedy = _("Read its logs, then recreate it once the cause is fixed.")
    return _Words(_("Pod %(pod)s failed: %(why)s") % {**f, "why": why or "?"}, remedy, remedy)


def _scheduler(w: pw.Wait, f: dict, namespace: str, diagnosis) -> _Words:
    remedy = _("Check the pod's node selector and its CPU and memory requests.")
    message = (
        _(
            "Pod %(pod)s waits: %(free)d %(res)s are free (at most %(most)d on one node), so another of its "
            "requirements is not met (a node selector, CPU or memory). The scheduler's words are below."
        )
        % f
    )
    return _Words(message, remedy, remedy)


def _claims(w: pw.Wait, f: dict, namespace: str, diagnosis) -> _Words:
    remedy = _("Check its claims' device class and selectors against the devices the nodes publish.")
    message = _(
        "Pod %(pod)s waits for its ResourceClaims (%(claims)s): the scheduler cannot allocate them. "
        "The scheduler's words are below."
    ) % {**f, "claims": ", ".join(w.facts.get("claims") or [])}
    return _Words(message, remedy, remedy)


def _starting(w: pw.Wait, f: dict, namespace: str, diagnosis) -> _Words:
    return _Words(_("Pod %(pod)s is being placed: %(res)s has room for it.") % f, "", "")


# Each wait kind (gpus.numbers.pod_waits decides it) beside its words, checked in order; a kind
# not listed (STARTING) is said as a pod being placed.
WORDS = (
    (pw.QUOTA_FULL, _quota_full),
    (pw.SHARED_MANY, _shared_many),
    (pw.NO_SUCH_TYPE, _no_such_type),
    (pw.CORDONED_ONLY, _cordoned_only),
    (pw.TAINT, _taint),
    (pw.NO_FREE, _no_free),
    (pw.ADMISSION, _admission),
    (pw.CONTAINER, _container),
    (pw.FAILED, _failed),
    (pw.SCHEDULER, _scheduler),
    (pw.CLAIMS, _claims),
)


def _words(w: pw.Wait, namespace: str, admin: bool, diagnosis) -> Cause:
    f = {
        "pod": w.pod,
        "res": w.facts.get("resource", ""),
        "want": w.facts.get("want", 0),
        "exist": w.facts.get("exist", 0),
        "free": w.facts.get("free", 0),
        "most": w.facts.get("most_free", 0),
    }
    say = next((say for kind, say in WORDS if w.kind == kind), _starting)
    words = say(w, f, namespace, diagnosis)
    return Cause(
        kind=w.kind,
        pod=w.pod,
        message=words.message,
        remedy=words.admin_remedy if admin else words.remedy,
        links=words.admin_links if admin else words.links,
        said=w.facts.get("said", ""),
    )


def tell_owners() -> int:
    """Tell each Workspace's owner why a GPU pod of theirs waits or was refused: once per cause
    (a pod and what holds it), however often the cluster is read, in the owner's language, with
    their Workspace page's causes to act from; a pod the kubelet refused is told to the admins
    too, as the owner's page says. Reads the view only. Returns how many were told."""
    from django.contrib.auth import get_user_model

    from brickadmin import notify
    from brickadmin.accounts.models import Notification
    from gpus.view.reading import read_cluster

    from .models import WorkspaceRequest

    read_cluster()  # the view as the pages read it (a twin's brought up to date)
    told = 0
    records = dict(WorkspaceRequest.objects.filter(status=WorkspaceRequest.Status.APPROVED).values_list("name", "pk"))
    admins = list(get_user_model().objects.filter(is_staff=True, is_active=True))
    for line in directory_lines():
        if line.namespace not in records:
            continue
        for cause in causes(line, admin=False):
            if cause.kind == pw.STARTING:
                continue
            told += _tell_once(notify, Notification, line, cause, records[line.namespace], admins)
    return told


def directory_lines():
    from . import directory

    return directory.lines()


def _tell_once(notify, notification, line, cause, pk, admins) -> int:
    anchor = f"#wait-{cause.kind}-{cause.pod}"
    owner = notify.owner_of(line.namespace)
    link = reverse("workspace_detail", args=[pk]) + anchor

    def words(admin=False):
        said = next((c for c in causes(line, admin=admin) if (c.kind, c.pod) == (cause.kind, cause.pod)), cause)
        subject = _("Pod %(pod)s of Workspace %(ws)s waits") % {"pod": cause.pod, "ws": line.namespace}
        if cause.kind == pw.ADMISSION:
            subject = _("Pod %(pod)s of Workspace %(ws)s was refused") % {"pod": cause.pod, "ws": line.namespace}
        return subject, f"{said.message} {said.remedy}".strip()

    told = 0
    if owner is not None and not notification.objects.filter(recipient=owner, kind="pod-wait", link=link).exists():
        told += notify.notify(owner, "pod-wait", words, link) is not None
    if cause.kind == pw.ADMISSION:  # the owner's page says an admin has been told
        admin_link = reverse("cluster_workspace", args=[line.namespace]) + anchor
        for admin in admins:
            if not notification.objects.filter(recipient=admin, kind="pod-refused", link=admin_link).exists():
                told += notify.notify(admin, "pod-refused", lambda: words(admin=True), admin_link) is not None
    return told

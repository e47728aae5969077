"""Why a Workspace's GPU pods wait, in words, with what to do: for its owner's page and the
admin's detail. Reads the view only (the Workspace line, the stored GPU capacity, the
kubelet-refusal findings): two queries besides the line, no API call. The causes are
gpus/pod_waits.py's."""

from __future__ import annotations

from dataclasses import dataclass, field

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
    said: str = ""  # the scheduler's own words, shown beside


def _names(pods) -> str:
    return ", ".join(f"{name} ({n})" for name, n in pods)


def causes(line, *, admin: bool) -> list[Cause]:
    """The causes of ``line``'s waiting and failed GPU pods (``line``: a Workspace line of the
    view, gpus.view.reading.workspace_line)."""
    if line is None:
        return []
    pods = line.pods or []
    if not any((p.get("phase") in ("Pending", "Failed")) for p in pods) and not line.quota:
        return []
    found = pw.waits(pods, line.gpu_quotas or {}, stored_gpu_capacity(), quota_scopes(line))
    diagnoses = pod_admission_findings(line.namespace) if any(w.kind == pw.ADMISSION for w in found) else {}
    return [_words(w, line.namespace, admin, diagnoses.get(w.pod)) for w in found]


def _words(w: pw.Wait, namespace: str, admin: bool, diagnosis) -> Cause:
    f = {
        "pod": w.pod,
        "res": w.facts.get("resource", ""),
        "want": w.facts.get("want", 0),
        "exist": w.facts.get("exist", 0),
        "free": w.facts.get("free", 0),
        "most": w.facts.get("most_free", 0),
    }
    request_more = (_("Request more GPUs"), reverse("workspace_request"))
    change_type = (_("Change the GPU type"), reverse("workspace_request"))
    see_free = (_("See which GPU types are free"), reverse("availability"))
    links: list[tuple[str, str]] = []
    admin_links: list[tuple[str, str]] = []
    kind = w.kind
    if kind == pw.QUOTA_FULL:
        message = _(
            "The Workspace's quota of %(res)s is used up: %(used)d of %(hard)d, held by %(pods)s. A new pod "
            "asking for it is refused until one of them ends."
        ) % {**f, "used": w.facts["used"], "hard": w.facts["hard"], "pods": _names(w.facts["pods"]) or "-"}
        remedy = (
            _("End a pod you no longer need, or request more GPUs.")
            if not admin
            else _("Raise the quota if the owner needs more, or ask the owner to end a pod they no longer need.")
        )
        links = [request_more]
        admin_links = [(_("The quota in the cluster"), reverse("cluster_workspace", args=[namespace]) + "#quota")]
    elif kind == pw.SHARED_MANY:
        message = (
            _(
                "Pod %(pod)s asked for %(want)d shared GPUs and the kubelet refused it: time-slicing gives one "
                "shared GPU per pod (failRequestsGreaterThanOne)."
            )
            if w.facts.get("refused")
            else _(
                "Pod %(pod)s asks for %(want)d shared GPUs: time-slicing gives one shared GPU per pod "
                "(failRequestsGreaterThanOne), so it will be refused."
            )
        ) % f
        remedy = (
            _(
                "Ask for one shared GPU per pod and recreate the pod; for more GPUs in one pod, change the "
                "Workspace's type to exclusive GPUs."
            )
            if not admin
            else _("Tell the owner: one shared GPU per pod. A pod that needs more needs an exclusive GPU type.")
        )
        links = [change_type]
        admin_links = [(_("Findings"), reverse("health"))]
    elif kind == pw.NO_SUCH_TYPE:
        message = _("Pod %(pod)s waits for %(res)s, which no node offers now.") % f
        remedy = (
            _("Change the Workspace's GPU type to one the cluster offers.")
            if not admin
            else _("Convert a node to the mode that serves it, or move the Workspace to a type offered now.")
        )
        links = [see_free, change_type]
        admin_links = [(_("Conversions"), reverse("procedure_index"))]
    elif kind == pw.CORDONED_ONLY:
        nodes = w.facts.get("nodes") or []
        message = _(
            "Pod %(pod)s waits for %(want)d %(res)s: only cordoned nodes (%(nodes)s) have room for it; "
            "%(exist)d exist in the cluster, %(free)d are free on nodes it may use."
        ) % {**f, "nodes": ", ".join(nodes[:5])}
        remedy = (
            _("It starts when an admin uncordons a node after its maintenance; or change the GPU type.")
            if not admin
            else _("Uncordon the node when its maintenance is over (or finish the run that cordoned it).")
        )
        links = [see_free, change_type]
        admin_links = [(_("Node %(node)s") % {"node": n}, reverse("node_detail", args=[n])) for n in nodes[:3]]
    elif kind == pw.TAINT:
        nodes = w.facts.get("nodes") or []
        message = _(
            "Pod %(pod)s waits for %(want)d %(res)s: the free ones are on nodes with a taint it does not "
            "tolerate (%(taints)s); %(exist)d exist, %(free)d are free on other nodes (at most %(most)d on "
            "one)."
        ) % {**f, "taints": ", ".join(w.facts.get("taints") or []) or "?"}
        remedy = (
            _("Those nodes are reserved: ask an admin for access, or change the GPU type.")
            if not admin
            else _("Remove the taint if the node is no longer reserved, or give this Workspace's pods the toleration.")
        )
        links = [see_free, change_type]
        admin_links = [(_("Node %(node)s") % {"node": n}, reverse("node_detail", args=[n])) for n in nodes[:3]]
    elif kind == pw.NO_FREE:
        message = (
            _(
                "Pod %(pod)s waits for %(want)d %(res)s: %(exist)d exist, %(free)d are free, at most %(most)d "
                "on one node (a pod's GPUs come from one node)."
            )
            % f
        )
        remedy = (
            _("It starts when enough GPUs free up on one node. Ask for fewer GPUs per pod, or change the GPU type.")
            if not admin
            else _("Free GPUs held by idle Workspaces, or add nodes of this type.")
        )
        links = [see_free, change_type]
        admin_links = [
            (_("Idle allocations"), reverse("cluster_workspaces") + "?sort=idle_since"),
            (_("Availability"), reverse("availability")),
        ]
    elif kind == pw.ADMISSION:
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
        remedy = (
            admin_remedy
            if admin
            else _("The pod will not start by itself: an admin has been told. Recreate it once the cause is fixed.")
        )
    elif kind == pw.CONTAINER:
        message = _("Pod %(pod)s is placed; its container waits: %(why)s") % {
            **f,
            "why": " ".join(x for x in (w.facts.get("reason"), w.facts.get("message")) if x),
        }
        remedy = _(
            "ImagePullBackOff or ErrImagePull: check the image name and that the registry is reachable. "
            "ContainerCreating: wait."
        )
    elif kind == pw.FAILED:
        code = w.facts.get("exitCode")
        message = _("Pod %(pod)s failed: %(why)s") % {
            **f,
            "why": " ".join(
                str(x)
                for x in (
                    w.facts.get("reason"),
                    w.facts.get("message"),
                    (_("exit code %(code)s") % {"code": code}) if code is not None else "",
                )
                if x
            )
            or "?",
        }
        remedy = _("Read its logs, then recreate it once the cause is fixed.")
    elif kind == pw.SCHEDULER:
        message = (
            _(
                "Pod %(pod)s waits: %(free)d %(res)s are free (at most %(most)d on one node), so another of its "
                "requirements is not met (a node selector, CPU or memory). The scheduler's words are below."
            )
            % f
        )
        remedy = _("Check the pod's node selector and its CPU and memory requests.")
    else:  # STARTING
        message = _("Pod %(pod)s is being placed: %(res)s has room for it.") % f
        remedy = ""
    return Cause(
        kind=kind,
        pod=w.pod,
        message=message,
        remedy=remedy,
        links=admin_links if admin else links,
        said=w.facts.get("said", ""),
    )

"""What the procedures of every family share: step 0 (the pre-checks again at run time, and
the node as it was before the run, what Restore puts back), the capacity table and the
acknowledgements a plan asks for (GPU pods evicted, capacity left under the allocated quota),
the Workspaces holding a quota, and the base of the Fixes (``Fix``, and ``name_field`` for the
object names they take as parameters)."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from brickadmin.cluster import vocabulary as vocab
from brickadmin.cluster.deviceplugin import pod_gpu_requests
from brickadmin.wording import joined, said
from gpus.numbers import capacity as capacity_mod
from gpus.numbers import ledger as ledger_mod
from gpus.view.live import LiveRead

from ..base import Check, NothingToDo, Outcome, Param, ProcedureDef, Step
from ..steps import GPU_SHARED, SHARING_LABEL, TYPE_LABEL


class PrecheckStep(Step):
    """Step 0: the procedure's pre-checks again, at run time (the cluster may have changed
    since the plan was shown)."""

    key = "precheck"

    def __init__(self, proc):
        self.proc = proc

    def title(self, run):
        return _("Pre-check")

    def kubectl(self, run):
        return self.proc.precheck_kubectl(run)

    def ensure(self, ctx):
        """Before anything changes: a fix whose finding has gone ends here (NothingToDo);
        record the node as it is (what "Restore the node" puts back)."""
        live = LiveRead(ctx.gateway)
        reason = self.proc.nothing_to_do(live, ctx.node, ctx.params)
        if reason:
            raise NothingToDo(reason)
        if self.proc.restorable and ctx.node:
            from brickadmin.cluster import NotFound

            try:
                before = node_state(live.get_node(ctx.node), self.proc.restored_labels)
            except NotFound:
                return Outcome()
            labels = ", ".join(f"{k}={v if v is not None else '-'}" for k, v in before["labels"].items())
            ctx.remember(
                NODE_BEFORE,
                before,
                said(
                    "step.node_before",
                    labels=labels,
                    state=said("step.cordoned") if before["unschedulable"] else said("step.schedulable"),
                ),
            )
        return Outcome()

    def verify(self, ctx):
        checks = self.proc.prechecks(LiveRead(ctx.gateway), ctx.node, ctx.params)
        # the capacity table goes into the record too: what the admin saw and acknowledged
        # (kept as messages: each reader of the run reads them in their own language)
        detail = joined([precheck_record(c) for c in checks])
        blocks = [c for c in checks if c.level == "block"]
        if blocks:
            return Check(False, detail, joined([c.fix or c.detail for c in blocks], " "))
        for c in checks:
            if c.level != "ack":
                continue
            asked = [p.name for p in self.proc.confirm_params if p.confirm == "ack" and c.asks_for(p.name)]
            if c.ack == CAPACITY_ACK and CAPACITY_ACK not in ctx.params:
                # Started by code, not from a plan (the wizard and the terminal always carry the
                # answer, ticked or not, and refuse to start without it): the table is recorded.
                continue
            if not all(c.acknowledged(ctx.params.get(name)) for name in asked):
                return Check(
                    False,
                    detail,
                    said("step.acknowledgement_missing", what=c.detail),
                )
        return Check(True, detail)


def precheck_record(check: Check):
    """One pre-check as step 0 records it: its level and what it found, and under it, indented,
    the capacity table's lines."""
    lines = [said("precheck.line", level=check.level, text=check.detail), *(check.items if check.capacity else [])]
    text = lines[-1]
    for line in reversed(lines[:-1]):
        text = said("precheck.item", first=line, rest=text)
    return text


NODE_BEFORE = "node_before"  # the run event (engine Context.remember) holding the node before the run
RESTORED_LABELS = (TYPE_LABEL, SHARING_LABEL)  # the labels node procedures change, and Restore puts back


def node_state(raw: dict, keys=RESTORED_LABELS) -> dict:
    """What a node procedure may change on a node: its GPU labels ``keys`` (None: absent) and whether it is
    cordoned."""
    labels = raw["metadata"].get("labels") or {}
    return {
        "labels": {k: labels.get(k) for k in keys or RESTORED_LABELS},
        "unschedulable": bool((raw.get("spec") or {}).get("unschedulable")),
    }


def shared_quota(live: LiveRead, resource=GPU_SHARED) -> dict[str, int]:
    alloc = ledger_mod.allocated_by_namespace(live.list_resource_quotas())
    return {ns: per.get(resource, 0) for ns, per in alloc.items() if resource in per}


def quota_over(live: LiveRead, resource, allocated, new_total, detail, fix) -> Check | None:
    """A block when the approved Workspace quotas of ``resource`` (``allocated`` in all) no longer
    fit under its Total after a change, naming the Workspaces holding it. ``fix`` is the code of a
    message taking %(d)d and %(ws)s, or (that code, its other parameters)."""
    if allocated <= new_total:
        return None
    items = ws_list({k: v for k, v in shared_quota(live, resource).items() if v}, live.owners())
    code, more = fix if isinstance(fix, tuple) else (fix, {})
    return Check(
        False, detail, said(code, **more, d=allocated - new_total, ws=joined(items, "; ")), level="block", items=items
    )


def ws_list(quotas: dict[str, int], owners: dict[str, str]) -> list:
    return [
        said("precheck.workspace_quota", ns=ns, owner=owners.get(ns) or "?", n=n)
        for ns, n in sorted(quotas.items(), key=lambda kv: -kv[1])
    ]


CAPACITY_ACK = "capacity_acknowledged"
CAPACITY_PARAM = Param(
    CAPACITY_ACK,
    lambda: forms.IntegerField(
        required=False,
        min_value=0,
        label=gettext_lazy("I understand the GPU types listed will have less capacity than their allocated quota."),
    ),
    confirm="ack",
    cli="--acknowledge-overcommit",
    words=gettext_lazy("GPUs over the Total acknowledged"),
    refusal=gettext_lazy(
        "Tick the acknowledgement that names how much allocated quota will be over the Total (if "
        "the number changed since the plan was shown, look at the capacity table again)."
    ),
)


def capacity_line_text(line):
    """One GPU type's Total / Allocated / Available now and after, as the run records it."""

    def avail(n):
        shown, over = capacity_mod.shown_available(n)
        return str(shown) if not over else said("precheck.over_allocated_by", n=over)

    return said(
        "precheck.capacity_line",
        res=line.resource,
        t=line.total,
        t2=line.total_after,
        a=line.allocated,
        a2=line.allocated_after,
        v=avail(line.available),
        v2=avail(line.available_after),
    )


def capacity_checks(proc, gateway, node, params, checks) -> list[Check]:
    """The capacity table of a plan (every GPU type, Total / Allocated / Available now and
    after the run) as a check; when the run leaves a type with less capacity than its allocated
    quota, an acknowledgement naming by how much, recorded with the run's parameters. A type
    another check already blocks is shown, not asked about (the block stops the run)."""
    live = LiveRead.of(gateway)
    snap, led = live.snapshot(), live.ledger()
    change = proc.capacity_change(live, led, snap, node, params)
    if change is None:
        return []
    lines = capacity_mod.capacity_after(led, change)
    shown = [line for line in lines if line.changes] or lines
    items = [capacity_line_text(line) for line in shown]
    guard = over_total_check(lines)
    if guard is not None and any(c.level == "block" for c in checks):
        return [Check(True, said("precheck.capacity_blocked"), level="info", items=items, capacity=lines)]
    if guard is None:
        detail = said("precheck.capacity_kept") if change else said("precheck.capacity_once_advertised")
        return [Check(True, detail, level="info", items=items, capacity=lines)]
    return [guard]


def over_total_check(lines) -> Check | None:
    """The one guard wherever capacity goes over the Total: a procedure's plan, a quota raised on
    its page, an undo of a quota change. When the change takes a GPU type over its Total (or
    further over), an acknowledgement naming by how many GPUs, the same words everywhere; None
    when every type it touches keeps its allocated quota (or only gets closer to it)."""
    over = capacity_mod.left_over(lines)
    if not over:
        return None
    by = sum(line.over_after for line in over)
    names = ", ".join(f"{line.resource} ({line.over_after})" for line in over)
    shown = [line for line in lines if line.changes] or lines
    return Check(
        True,
        said("precheck.capacity_over", types=names),
        level="ack",
        items=[capacity_line_text(line) for line in shown],
        capacity=lines,
        ack=CAPACITY_ACK,
        ack_count=by,
        ack_label=ngettext(
            "I understand %(n)d GPU of allocated quota will be over the Total.",
            "I understand %(n)d GPUs of allocated quota will be over the Total.",
            by,
        )
        % {"n": by},
    )


EVICTIONS_ACK = "evictions_acknowledged"
EVICTIONS_PARAM = Param(
    EVICTIONS_ACK,
    lambda: forms.IntegerField(
        required=False, min_value=0, label=gettext_lazy("I understand the GPU pods listed will be evicted.")
    ),
    confirm="ack",
    cli="--acknowledge-evictions",
    words=gettext_lazy("GPU pods to evict acknowledged"),
    refusal=gettext_lazy(
        "Tick the acknowledgement that names how many GPU pods will be evicted (if the number "
        "changed since the plan was shown, look at the list again)."
    ),
)


def blast_radius(live, node):
    """Every pod the drain will evict (the drain's own rule, read live), with its
    Workspace, owner and GPU request; GPU pods need an acknowledgement naming their count."""
    namespaces = {ns["metadata"]["name"]: ns["metadata"].get("labels") or {} for ns in live.list_namespaces()}
    pods = [p for p in live.pods_on(node) if not vocab.is_terminal(p) and vocab.drain_decision(p) == vocab.EVICT]
    rows = []
    for p in pods:
        ns = p["metadata"].get("namespace", "")
        labels = namespaces.get(ns, {})
        gpus = pod_gpu_requests(p) or {
            f"ResourceClaim {c.get('resourceClaimName') or c.get('resourceClaimTemplateName') or c.get('name')}": 1
            for c in (p.get("spec") or {}).get("resourceClaims") or []
        }
        rows.append(
            (
                not gpus,
                vocab.pod_key(p),
                said(
                    "precheck.evicted_pod",
                    pod=vocab.pod_key(p),
                    ws=ns if labels.get(vocab.WORKSPACE_LABEL) == "true" else said("precheck.no_workspace", ns=ns),
                    owner=labels.get(vocab.OWNER_LABEL) or "-",
                    gpu=", ".join(f"{r} {n}" for r, n in sorted(gpus.items())) or said("precheck.none"),
                ),
            )
        )
    rows.sort()
    items = [text for _gpu_last, _key, text in rows]
    gpu_pods = sum(1 for no_gpu, _k, _t in rows if not no_gpu)
    if gpu_pods:
        return [
            Check(
                True,
                said("precheck.gpu_pods_evicted", n=gpu_pods, node=node, all=len(rows)),
                level="ack",
                items=items,
                ack=EVICTIONS_ACK,
                ack_count=gpu_pods,
                ack_label=ngettext(
                    "I understand %(n)d GPU pod will be evicted.",
                    "I understand %(n)d GPU pods will be evicted.",
                    gpu_pods,
                )
                % {"n": gpu_pods},
            )
        ]
    if rows:
        return [
            Check(
                True,
                said("precheck.pods_evicted", n=len(rows), node=node),
                level="warn",
                items=items,
            )
        ]
    return [Check(True, said("precheck.no_pod_to_evict", node=node), level="info")]


def metrics_configured() -> bool:
    """Whether a Prometheus is configured (else the numbers are the cluster's own)."""
    from django.conf import settings

    return bool(settings.PROMETHEUS_URL)


# --- The base of the Fixes: unlisted procedures, each offered on the health findings it fixes ---


def _k8s_name(value: str) -> None:
    """A Kubernetes object name (DNS-1123 subdomain): lowercase letters, digits, '-' and '.',
    starting and ending with a letter or digit. Checked without a regular expression."""
    allowed = set("abcdefghijklmnopqrstuvwxyz0123456789-.")
    if not value or len(value) > 253 or not set(value) <= allowed or value[0] in "-." or value[-1] in "-.":
        raise forms.ValidationError(_("Not a Kubernetes object name: %(v)s") % {"v": value[:80]})


def name_field(label):
    """A Fix's parameter naming a Kubernetes object (a pod, a namespace, a Workspace)."""
    return lambda: forms.CharField(max_length=253, label=label, validators=[_k8s_name])


class Fix(ProcedureDef):
    listed = False

    def confirm_sentence(self, node: str, params: dict) -> str:
        return _(
            "Run “%(fix)s” on %(target)s? It changes the cluster as planned above and is recorded under your name."
        ) % {"fix": self.label, "target": node or _("the cluster")}

    def prechecks(self, gateway, node, params):
        """``nothing_to_do`` and ``fix_prechecks`` read one LiveRead: the cluster they decide on."""
        from brickadmin.cluster import NotFound

        live = LiveRead.of(gateway)
        try:
            reason = self.nothing_to_do(live, node, params)
        except NotFound as exc:
            return [Check(False, str(exc), said("precheck.object_gone"))]
        if reason:
            return [
                Check(
                    True,
                    said("precheck.nothing_to_do_now", why=reason),
                    level="info",
                )
            ]
        return self.fix_prechecks(live, node, params)

    def fix_prechecks(self, gateway, node, params):
        return []

"""Template helpers: glossary help texts on every number, GPU type names, pagination."""

import json
import re

from django import template
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import mark_safe
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from gpus.numbers import capacity
from gpus.numbers.dra_lines import is_dra_resource

from ..choices import GpuMode, GpuType

register = template.Library()

# A unit in a column header, e.g. "(MiB)": headers are shown in capitals (brickadmin.css),
# and a unit keeps the case it is written in (MiB, not MIB).
UNIT_IN_HEADER = re.compile(r"\((MiB|GiB|KiB|TiB|%)\)")


@register.filter
def as_json(value) -> str:
    """A recorded request as JSON, indented (what the API server was sent), not as a Python dict."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@register.filter
def units_as_written(label) -> str:
    """The header text, escaped, its unit in a span that the capitals leave alone."""
    return mark_safe(UNIT_IN_HEADER.sub(r'(<span class="unit">\1</span>)', str(conditional_escape(str(label)))))


# The glossary of docs/operator-guide.md (#physical-and-logical-counts, #procedures).
# Keys are used by {% term %}.
GLOSSARY = {
    "physical": (
        _("Physical"),
        _("GPU devices installed (DCGM: distinct GPU UUIDs). Fixed, whatever the sharing mode."),
    ),
    "physical_used": (
        _("In use physically"),
        _(
            "Physical GPU devices a Running pod holds (DCGM names the pods per "
            "device; otherwise placed as the device plugin allocates). Counted in "
            "devices, whatever the sharing mode."
        ),
    ),
    "logical": (
        _("Logical"),
        _("Schedulable units: kubelet allocatable. One physical GPU at time-slicing replicas R is R logical GPUs."),
    ),
    "allocated": (
        _("Allocated to Workspaces"),
        _(
            "Workspace quota ceilings: sum of ResourceQuota requests.<resource>, "
            "in the units of that resource. A promise, not a use."
        ),
    ),
    "requested": (
        _("Requested by pods"),
        _(
            "What pods hold now: GPU requests of scheduled, non-terminal pods, in "
            "the units of their resource (a time-sliced GPU counts once per "
            "replica)."
        ),
    ),
    "free": (
        _("Quota headroom"),
        _(
            "Logical total that neither Workspace quota nor pods hold: the Total less the larger of "
            "allocated and requested. Never below 0."
        ),
    ),
    "node_free": (
        _("Unrequested on the node"),
        _(
            "This node's logical GPUs no pod requests; 0 on a cordoned node, which takes no new pod. Quotas "
            "are cluster-wide, so a unit here may already be promised to a Workspace (see quota headroom)."
        ),
    ),
    "idle": (
        _("Idle"),
        _(
            "Quota allocated to Workspaces that had no Running GPU pod, or utilisation under the "
            "threshold, for the whole idle window (24 h by default): it could be reclaimed."
        ),
    ),
    "available": (_("Available"), _("Logical total minus allocated quota. 0 means approval may be delayed.")),
    "replicas": (_("Replicas"), _("How many logical GPUs one physical GPU becomes under time-slicing.")),
    "stale": (
        _("Stale resource"),
        _(
            "A previous mode's resource kubelet left on the node. Capacity only: "
            "harmless, clean up. Also allocatable: mis-scheduling risk, clean up now."
        ),
    ),
    "capacity": (_("Capacity"), _("What kubelet reports the node has, including resources no longer served.")),
}


@register.simple_tag
def term(key, text=None):
    """A glossary-linked label: <abbr title="help">Label</abbr>."""
    name, help_text = GLOSSARY[key]
    return format_html(
        '<abbr class="term" title="{}: {}" data-term="{}">{}</abbr>',
        name,
        help_text,
        key,
        text if text is not None else name,
    )


@register.filter
def gpu_type_name(gpu_type):
    """'Exclusive', 'Shared (time-slicing)', 'MIG 1g.5gb' (gpus.choices.GpuType); DRA's
    dynamic MIG is 'MIG, dynamic'."""
    if gpu_type == "mig-dynamic":
        return gettext("MIG, dynamic")
    return GpuType.label_of(gpu_type)


# How a GPU published through DRA is offered (gpus.numbers.dra_lines: DraGpu.mode)
DRA_MODES = {
    "whole": _("Whole GPU"),
    "static-mig": _("MIG, static"),
    "dynamic-mig": _("MIG, dynamic (partitioned when claimed)"),
    "shared": _("Consumable shares"),
    "vfio": _("VFIO passthrough"),
}

# Which stack publishes a node's GPUs (NodeLedger.stack)
STACKS = {"device-plugin": _("Device plugin"), "dra": _("DRA"), "both": _("Both")}


@register.filter
def is_dra(resource):
    """Whether a resource line counts a DeviceClass's devices (DRA), not a device plugin's resource."""
    return is_dra_resource(str(resource or ""))


@register.filter
def dra_mode_name(mode):
    """'Whole GPU', 'MIG, static', 'MIG, dynamic (...)', 'Consumable shares', 'VFIO passthrough'."""
    return DRA_MODES.get(str(mode or ""), mode)


@register.filter
def fits_now(by_profile):
    """Dynamic MIG: the MIG devices of each profile that fit in what is free now, those that
    fit at all ('1g.10gb ×2, 1g.20gb ×1'); the whole GPU is named 'whole GPU'."""
    return ", ".join(
        f"{gettext('whole GPU') if profile == 'gpu' else profile} ×{n}"
        for profile, n in (by_profile or {}).items()
        if n
    )


# What one unit of plain nvidia.com/gpu is on the nodes giving it (ResourceRow.parts)
RESOURCE_PARTS = {
    "whole": _("whole GPUs"),
    "time-slicing": _("time-sliced replicas"),
    "mps": _("MPS replicas"),
    "mig-single": _("MIG instances (MIG strategy single)"),
}


@register.filter
def resource_part_name(kind):
    """'whole GPUs', 'time-sliced replicas', 'MPS replicas', 'MIG instances (MIG strategy single)'."""
    return RESOURCE_PARTS.get(str(kind or ""), kind)


@register.filter
def stack_name(stack):
    """'Device plugin', 'DRA', 'Both' ('' for a node that publishes no GPU yet)."""
    return STACKS.get(str(stack or ""), "")


@register.filter
def type_row_label(row):
    """A Dashboard model × type row as people read it: 'NVIDIA A30 (Shared)', 'NVIDIA H100 MIG,
    dynamic', 'NVIDIA L40S (Consumable shares)' (the types DRA adds, in the reader's language)."""
    if row.gpu_type == "mig-dynamic":
        return gettext("%(model)s MIG, dynamic") % {"model": row.model}
    if row.sharing_strategy == "consumable-shares":
        return gettext("%(model)s (Consumable shares)") % {"model": row.model}
    return row.label


@register.filter
def mode_name(mode):
    member = GpuMode.of(mode)
    return member.label if member is not None else mode


@register.filter
def sharing_name(strategy):
    """How a node shares what it replicates, by NVIDIA's name: 'Time-slicing', 'MPS' ('' for none)."""
    return {"time-slicing": _("Time-slicing"), "mps": _("MPS")}.get(str(strategy or ""), "")


@register.filter
def node_mode_name(node):
    """A node's mode as the Nodes page names it: a node whose plugin shares whole GPUs by MPS
    is "MPS" (its mode), never "Time-slicing" (NVIDIA's two sharing strategies are not the
    same thing); a view stored before MPS was a mode of its own says it by its strategy."""
    if getattr(node, "sharing_strategy", "") == "mps" and node.mode == "timeslicing":
        return mode_name("mps")
    return mode_name(node.mode)


@register.filter
def mode_colour(mode):
    """The tag class of a GPU mode (gpus.choices.GpuMode)."""
    member = GpuMode.of(mode)
    return member.colour if member is not None else ""


@register.simple_tag(takes_context=True)
def query_with(context, **kwargs):
    """The current query string with some parameters replaced (for pagination links)."""
    params = context["request"].GET.copy()
    for k, v in kwargs.items():
        params[k] = v
    return "?" + params.urlencode()


@register.filter
def took(duration):
    """A duration as people say it: '0.4 s', '3 min 12 s', '2 h 5 min' ('' for None)."""
    if duration is None:
        return ""
    secs = max(0.0, duration.total_seconds())
    if secs < 60:
        return gettext("%(s)s s") % {"s": f"{secs:.1f}"}
    whole = int(secs)
    if whole < 3600:
        return gettext("%(m)s min %(s)s s") % {"m": whole // 60, "s": whole % 60}
    return gettext("%(h)s h %(m)s min") % {"h": whole // 3600, "m": whole % 3600 // 60}


@register.simple_tag
def percent(part, whole):
    try:
        return int(round(100 * float(part) / float(whole))) if whole else 0
    except (TypeError, ValueError):
        return 0


@register.simple_tag
def procedure_actions(node):
    """[(procedure, url, primary)] the node's page offers: each procedure says whether it applies.
    One that leads on the node (the MIG layout on a MIG node) comes first and alone is primary;
    otherwise every node procedure is."""
    from gpus.procedures import registry

    offered = [p for p in registry.all_procedures() if p.offered_on(node)]
    leading = [p for p in offered if p.leads_on(node)]
    ordered = leading + [p for p in offered if p not in leading]
    return [(p, p.pick_url(node.name), p in leading if leading else p.needs_node) for p in ordered]


@register.inclusion_tag("components/table_head.html", takes_context=True)
def table_head(context, table):
    """The header row of a brickadmin.tables table: sort links that keep the other filters."""
    return {"table": table, "request": context["request"]}


@register.inclusion_tag("components/hidden_params.html", takes_context=True)
def hidden_params(context, exclude="q page format"):
    """Hidden inputs carrying the current filters through a GET form (minus ``exclude``)."""
    skip = set(exclude.split())
    return {"params": [(k, v) for k, vs in context["request"].GET.lists() if k not in skip for v in vs]}


@register.simple_tag(takes_context=True)
def available(context, value):
    """Available as a page shows it: never below 0. An over-allocated type is "none available"
    to users, and says by how much to admins (they can lower quotas)."""
    from gpus.numbers.capacity import shown_available

    try:
        shown, over = shown_available(int(value))
    except (TypeError, ValueError):
        return value
    if not over:
        return shown
    request = context.get("request")
    if request is not None and request.user.is_authenticated and request.user.is_staff:
        return gettext("none available; over-allocated by %(n)d") % {"n": over}
    return gettext("none available")


@register.simple_tag
def node_free(node):
    """A node's logical GPUs no pod requests, 0 when it is cordoned (gpus.numbers.capacity)."""
    return capacity.unrequested_on_node(node.logical, node.requested, bool(getattr(node, "cordoned", False)))

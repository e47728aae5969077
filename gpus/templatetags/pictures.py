"""The pictures as template pieces: ``{% load pictures %}``, then

    {% capacity_picture name total allocated requested %}   one stacked bar, legend, table
    {% capacity_pictures ledger.by_resource %}              one per GPU type (resource)
    {% gpu_map node %}                                      a node's GPU map (a NodeLedger)
    {% utilisation_chart "workspace" namespace %}           a lazily loaded utilisation chart
                                                            (scope: cluster|type|node|workspace)

Each renders a template under templates/components/pictures/, which sets the words in
HTML (where they wrap in any language) and puts a table with the same numbers beside the
picture (a <details>, for screen readers and for anyone who would rather read)."""

from django import template
from django.urls import reverse
from django.utils.http import urlencode

from gpus.numbers import gpumap, pictures

from ..choices import GpuType

register = template.Library()


def _bar(name, total, allocated, requested, subtitle=""):
    total, allocated, requested = int(total or 0), int(allocated or 0), int(requested or 0)
    held = max(allocated, requested)
    return {
        "name": name,
        "subtitle": subtitle,
        "total": total,
        "allocated": allocated,
        "requested": requested,
        "allocated_only": max(0, allocated - requested),
        "free": max(0, total - held),
        "over": max(0, held - total),
        "svg": pictures.capacity_bar(name, total, allocated, requested),
    }


def capacity_bar_data(name, total, allocated, requested, subtitle="") -> dict:
    """One bar for components/pictures/capacity.html from numbers that may have fractions
    (physical GPU-hours): rounded to whole ones, as the bar draws them."""
    return _bar(name, round(total or 0), round(allocated or 0), round(requested or 0), subtitle)


@register.inclusion_tag("components/pictures/capacity.html")
def capacity_picture(name, total, allocated, requested, subtitle=""):
    """One GPU type's bar: requested by pods, allocated to Workspaces, free, against Total."""
    return {"bars": [_bar(name, total, allocated, requested, subtitle)]}


@register.inclusion_tag("components/pictures/capacity.html")
def capacity_pictures(rows):
    """A bar per resource row (``gpus.numbers.ledger.ResourceRow``: resource, logical, allocated, requested)."""
    return {"bars": [_bar(r.resource, r.logical, r.allocated, r.requested, GpuType.label_of(r.gpu_type)) for r in rows]}


@register.inclusion_tag("components/pictures/gpu_map.html")
def gpu_map(node):
    """The node's GPU map: one tile per physical GPU, one row per slot."""
    m = gpumap.node_map(node)
    tiles = [
        {"tile": t, "svg": pictures.gpu_tile(t.title, [s.as_dict() for s in t.slots], caption=t.caption)}
        for t in m.tiles
    ]
    counts = [(state, gpumap.STATE_TEXT[state], m.count(state)) for state in pictures.SLOT_STATES]
    return {"map": m, "tiles": tiles, "counts": counts, "node": node}


@register.inclusion_tag("components/pictures/utilisation_lazy.html")
def utilisation_chart(scope, subject="", range_key="day", title=""):
    """A placeholder that loads the chart with htmx once the page is shown, so a page
    never waits for Prometheus. The fragment: gpus.views.pictures.utilisation."""
    query = {"range": range_key}
    if subject:
        query["of"] = subject
    url = reverse("utilisation_chart", args=[scope]) + "?" + urlencode(query)
    return {"url": url, "scope": scope, "subject": subject, "title": title}

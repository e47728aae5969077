"""Pictures drawn on the server as SVG: pure functions from plain numbers to markup.

No chart framework runs in the browser. Every function here takes numbers and words
(already translated by the caller or through gettext), escapes every piece of text it
puts into the markup, and returns a ``Markup``. Colours are never written here:
each shape carries a CSS class (``pic-*``) that static/css/brickadmin.css colours
through its custom properties, so the dark theme applies to the pictures too.

Each SVG is ``role="img"`` with a ``<title>`` and an ``aria-label`` saying what it shows;
the templates (templates/components/pictures/) put a table with the same numbers beside
each picture. Words that must survive Korean (legends, axis labels) are set in HTML by
those templates, where they wrap; the SVGs hold only shapes and short numbers.

- ``capacity_bar``: one stacked bar per GPU type: requested by pods, allocated to
  Workspaces but not requested, free, against the Total, with the part beyond the Total
  (overcommit) drawn distinctly.
- ``gpu_tile``: one physical GPU of the node map, split into its slots (time-slicing
  replicas or MIG instances), each coloured by its state and naming its pod.
- ``line_chart``: utilisation over time, 0–100 %, gaps left open (never drawn as 0).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from html import escape as _esc
from typing import Any

from gpus.numbers.markup import Markup, format_html, mark_safe
from gpus.numbers.words import gettext as _

# --- the stacked capacity bar ----------------------------------------------------------

BAR_HEIGHT = 22


@dataclass(frozen=True)
class Segment:
    """One part of a bar: where it starts and how wide it is, in % of the bar."""

    kind: str  # requested | allocated | free | over
    value: int
    x: float
    width: float


def capacity_segments(total: int, allocated: int, requested: int) -> tuple[list[Segment], float, int]:
    """The geometry of a capacity bar: (segments, x of the Total marker in %, overcommit).

    The bar's full length is the largest of Total, allocated and requested, so what lies
    beyond the Total (allocated quota or pod requests above the logical Total) shows as
    an extra segment after the marker. Widths are proportional to the numbers."""
    total, allocated, requested = max(0, int(total)), max(0, int(allocated)), max(0, int(requested))
    held = max(allocated, requested)
    scale = max(total, held, 1)
    over = max(0, held - total)
    parts = [("requested", requested), ("allocated", max(0, allocated - requested)), ("free", max(0, total - held))]
    segments, x = [], 0.0
    for kind, value in parts:
        if value:
            w = 100.0 * value / scale
            segments.append(Segment(kind, value, round(x, 3), round(w, 3)))
            x += w
    if over:
        segments.append(Segment("over", over, round(100.0 * total / scale, 3), round(100.0 * over / scale, 3)))
    return segments, round(100.0 * total / scale, 3), over


def capacity_summary(name: str, total: int, allocated: int, requested: int) -> str:
    """One sentence with every number of the bar (the picture's text equivalent)."""
    over = max(0, max(allocated, requested) - total)
    text = _(
        "%(name)s: Total %(total)s, allocated to Workspaces %(allocated)s, requested by pods "
        "%(requested)s, free %(free)s."
    ) % {
        "name": name,
        "total": total,
        "allocated": allocated,
        "requested": requested,
        "free": max(0, total - max(allocated, requested)),
    }
    if over:
        text += " " + _("%(over)s beyond the Total (overcommitted).") % {"over": over}
    return text


def capacity_bar(name: str, total: int, allocated: int, requested: int) -> Markup:
    """A stacked bar of allocated / requested / free against Total, overcommit beyond it."""
    segments, marker, over = capacity_segments(total, allocated, requested)
    label = capacity_summary(name, total, allocated, requested)
    parts = [
        format_html(
            '<svg class="pic pic-bar" role="img" aria-label="{}" width="100%" height="{}" '
            'preserveAspectRatio="none" data-total="{}" data-allocated="{}" data-requested="{}" '
            'data-over="{}"><title>{}</title>',
            label,
            BAR_HEIGHT + 8,
            total,
            allocated,
            requested,
            over,
            label,
        ),
        format_html('<rect class="pic-track" x="0" y="4" width="100%" height="{}" rx="4"/>', BAR_HEIGHT),
    ]
    for s in segments:
        title = {
            "requested": _("Requested by pods: %(n)s"),
            "allocated": _("Allocated, not requested: %(n)s"),
            "free": _("Free: %(n)s"),
            "over": _("Beyond the Total: %(n)s"),
        }[s.kind] % {"n": s.value}
        parts.append(
            format_html(
                '<rect class="pic-seg pic-{}" data-kind="{}" x="{}%" y="4" width="{}%" height="{}">'
                "<title>{}</title></rect>",
                s.kind,
                s.kind,
                s.x,
                s.width,
                BAR_HEIGHT,
                title,
            )
        )
    if over:  # the marker of the Total, so the part beyond it reads as beyond
        parts.append(
            format_html('<line class="pic-marker" x1="{}%" x2="{}%" y1="0" y2="{}"/>', marker, marker, BAR_HEIGHT + 8)
        )
    parts.append(mark_safe("</svg>"))
    return mark_safe("".join(parts))


# --- the node's GPU map ------------------------------------------------------------

SLOT_STATES = ("free", "requested", "in_use", "stale", "cordoned")
TILE_WIDTH = 220
LABEL_WIDTH = 54  # the slot's label ("2/4", "1g.10gb"): eight characters
SLOT_HEIGHT = 26
HEAD_HEIGHT = 24
WIDE = frozenset("WF")  # East Asian width classes Wide and Fullwidth: two cells each
CHAR_WIDTH = 6.6  # of the 11 px monospace the slots use: how many characters fit


def _cells(ch: str) -> int:
    """Monospace cells a character takes: Hangul, CJK and other wide characters take two."""
    return 2 if unicodedata.east_asian_width(ch) in WIDE else 1


def fit(text: str, width: float, char_width: float = CHAR_WIDTH) -> str:
    """``text`` shortened with an ellipsis to what fits ``width`` (monospace; wide
    characters such as Korean count twice)."""
    room = max(0, int(width // char_width))
    if sum(_cells(c) for c in text) <= room:
        return text
    out, used = [], 0
    for c in text:
        if used + _cells(c) > room - 1:
            break
        out.append(c)
        used += _cells(c)
    return "".join(out) + "…" if out else ""


def gpu_tile(title: str, slots: list[dict[str, Any]], *, caption: str = "") -> Markup:
    """One physical GPU: a head naming it, then one row per slot (time-slicing replica
    or MIG instance; a whole GPU is one slot), each with its state's class and, where a
    pod holds it, the pod's name (visible, shortened to fit; whole in the title).

    ``slots``: [{"label": "1/2" or "1g.5gb", "state": one of SLOT_STATES, "pod": "ns/name" or "",
    "state_text": the translated state}]. Built with the standard library's escape (a
    node of 128 slots is drawn per page view: format_html would be most of the cost)."""
    height = HEAD_HEIGHT + max(1, len(slots)) * SLOT_HEIGHT + 4
    described = "; ".join(
        f"{s['label']}: {s['state_text']}" + (f" ({s['pod']})" if s.get("pod") else "") for s in slots
    )
    label = _esc(f"{title}{' · ' + caption if caption else ''}: {described}")
    out = [
        f'<svg class="pic pic-tile" role="img" aria-label="{label}" viewBox="0 0 {TILE_WIDTH} {height}" '
        f'data-slots="{len(slots)}"><title>{label}</title>',
        f'<rect class="pic-tile-frame" x="0.5" y="0.5" width="{TILE_WIDTH - 1}" height="{height - 1}" rx="6"/>',
        f'<text class="pic-tile-head" x="8" y="16">{_esc(fit(title, TILE_WIDTH - 16, 7.2))}</text>',
    ]
    text_x, text_width = 12 + LABEL_WIDTH + 6, TILE_WIDTH - LABEL_WIDTH - 30
    for i, s in enumerate(slots):
        y = HEAD_HEIGHT + i * SLOT_HEIGHT
        state = s["state"] if s["state"] in SLOT_STATES else "free"
        pod = s.get("pod") or ""
        tip = f"{s['label']}: {s['state_text']}" + (f" — {pod}" if pod else "")
        out.append(
            f'<g class="pic-slot pic-{state}" data-state="{state}" data-pod="{_esc(pod)}"><title>{_esc(tip)}</title>'
            f'<rect x="6" y="{y}" width="{TILE_WIDTH - 12}" height="{SLOT_HEIGHT - 4}" rx="3"/>'
            f'<text class="pic-slot-label" x="12" y="{y + 16}">{_esc(fit(s["label"], LABEL_WIDTH))}</text>'
            f'<text class="pic-slot-text" x="{text_x}" y="{y + 16}">'
            f"{_esc(fit(pod or str(s['state_text']), text_width))}</text></g>"
        )
    out.append("</svg>")
    return mark_safe("".join(out))  # noqa: S308  (every piece of text above is escaped)


# --- utilisation over time ----------------------------------------------------------

CHART_W, CHART_H = 600, 160


def line_segments(
    points: list[tuple[float, float | None]], start: float, end: float, step: float
) -> list[list[tuple[float, float]]]:
    """Points (unix time, percent or None) in chart coordinates, split where a sample is
    missing (a gap longer than 1.5 steps, or None): a gap is left open, never drawn as 0."""
    span = max(end - start, 1e-9)
    runs: list[list[tuple[float, float]]] = []
    run: list[tuple[float, float]] = []
    last_t = None
    for t, v in sorted(points, key=lambda p: p[0]):
        if v is None or (last_t is not None and t - last_t > 1.5 * step):
            if run:
                runs.append(run)
            run = []
        if v is not None:
            x = CHART_W * (t - start) / span
            y = CHART_H * (1 - min(max(float(v), 0.0), 100.0) / 100.0)
            run.append((round(x, 2), round(y, 2)))
        last_t = t
    if run:
        runs.append(run)
    return runs


def line_chart(points: list[tuple[float, float | None]], start: float, end: float, step: float, label: str) -> Markup:
    """Utilisation (0–100 %) over [start, end]: a line per run of consecutive samples,
    horizontal guides at 25/50/75 %. The SVG stretches to its box (strokes keep their
    width); the axis labels are HTML around it, so they wrap in any language."""
    runs = line_segments(points, start, end, step)
    out = [
        format_html(
            '<svg class="pic pic-chart" role="img" aria-label="{}" viewBox="0 0 {} {}" '
            'preserveAspectRatio="none" data-points="{}"><title>{}</title>',
            label,
            CHART_W,
            CHART_H,
            sum(len(r) for r in runs),
            label,
        )
    ]
    for pct in (25, 50, 75):
        y = CHART_H * (1 - pct / 100)
        out.append(
            format_html(
                '<line class="pic-grid" x1="0" x2="{}" y1="{}" y2="{}" vector-effect="non-scaling-stroke"/>',
                CHART_W,
                y,
                y,
            )
        )
    for run in runs:
        if len(run) == 1:  # one sample alone: a short flat stroke, so it is seen
            ((x, y),) = run
            run = [(max(0.0, x - 2), y), (min(float(CHART_W), x + 2), y)]
        d = "M" + " L".join(f"{x},{y}" for x, y in run)
        area = d + f" L{run[-1][0]},{CHART_H} L{run[0][0]},{CHART_H} Z"
        out.append(format_html('<path class="pic-area" d="{}"/>', area))
        out.append(format_html('<path class="pic-line" d="{}" vector-effect="non-scaling-stroke"/>', d))
    out.append(mark_safe("</svg>"))
    return mark_safe("".join(out))

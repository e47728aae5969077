"""Markup the pictures write, without importing Django: text escaped as Django's ``escape``
does (the standard library's ``html.escape``), and a ``Markup`` string that templates put in
as it is, because it has ``__html__`` (which Django's ``conditional_escape`` honours)."""

from __future__ import annotations

from html import escape as _escape
from typing import Any


class Markup(str):
    """Text whose every piece was escaped when it was written."""

    __slots__ = ()

    def __html__(self) -> Markup:
        return self


def escape(value: Any) -> Markup:
    """``value`` escaped, unless it is markup already."""
    if hasattr(value, "__html__"):
        return Markup(value.__html__())
    return Markup(_escape(str(value)))


def format_html(template: str, *args: Any) -> Markup:
    """``template`` with each argument escaped (Django's ``format_html``)."""
    return Markup(template.format(*(escape(a) for a in args)))


def mark_safe(text: str) -> Markup:
    """``text`` as markup: the caller escaped every piece of it."""
    return Markup(text)

"""Lists that sort, search, paginate and export the same way on every page.

A ``Table`` names its columns once. ``table.bind(request, rows)`` reads ``?q=`` (search),
``?sort=`` (a column key, ``-`` in front for descending) and ``?page=`` from the URL, so a
filtered, sorted view can be shared by its address, and ``?format=csv`` exports every
matching row (not only the page). Rows are a QuerySet (searched and sorted in SQL) or a
list (rows built from the cluster view: searched and sorted in Python).

    NODES = Table(Column("name", _("Name")), Column("gpus", _("GPUs"), numeric=True),
                  search=("name",), default="name")
    table = NODES.bind(request, rows)
    if table.wants_csv:
        return table.csv_response("nodes")
    return render(request, "...", {"table": table, "page": table.page})

Templates: ``{% include "components/table_tools.html" %}`` (search box and CSV link) and
``{% table_head table %}`` (the header row with sort links and ``aria-sort``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial, reduce
from operator import or_
from types import SimpleNamespace
from typing import Any

from django.conf import settings
from django.core.paginator import Paginator
from django.db.models import F, Q, QuerySet
from django.http import StreamingHttpResponse
from django.utils import timezone

SEARCH_MAX = 100  # characters of ?q= that are used; more is cut, never an error
CSV_BATCH = 500  # rows written at a time by the CSV export (one chunk of the response)


@dataclass(frozen=True)
class Column:
    """One column. ``key`` is its name in the URL and the CSV header.

    ``order``: the ORM path (QuerySet) or attribute/key path (list) to sort by; defaults to
    ``key``; ``None`` when the column cannot be sorted. ``value``: what the CSV holds, an
    attribute/key path or a function of the row; defaults to ``order`` or ``key``. ``term``:
    a glossary key (gpus/templatetags/brick.py GLOSSARY) that explains the header.
    """

    key: str
    label: Any
    order: str | None = ""
    value: str | Callable[[Any], Any] | None = None
    numeric: bool = False
    term: str = ""
    export: bool = True  # False: a page-only column (its buttons), not in the CSV

    @property
    def sort_path(self) -> str | None:
        return self.key if self.order == "" else self.order

    def cell(self, row) -> Any:
        return self.getter()(row)

    def getter(self) -> Callable[[Any], Any]:
        """A function of the row giving this column's value: the CSV asks it once per column,
        then once per row (a path is split once, not at every row)."""
        getter = self.value if self.value is not None else (self.sort_path or self.key)
        if callable(getter):
            return getter
        if "." not in getter and "__" not in getter:
            return partial(_one, getter)
        return partial(lookup, path=getter)


def _one(name: str, row) -> Any:
    """``lookup`` of a path of one part (most columns): the same answer, without the split."""
    value = row.get(name) if isinstance(row, dict) else getattr(row, name, None)
    return value() if callable(value) else value


def lookup(row, path: str) -> Any:
    """``a__b`` or ``a.b`` on an object or a dict; None where a link is missing."""
    value = row
    for part in path.replace("__", ".").split("."):
        if value is None:
            return None
        value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
    return value() if callable(value) else value


class Table:
    def __init__(self, *columns: Column, search: tuple[str, ...] = (), default: str = "", per_page: int | None = None):
        self.columns = columns
        self.search = search
        self.default = default
        self.per_page = per_page
        self._by_key = {c.key: c for c in columns}

    def unsorted(self) -> SimpleNamespace:
        """The header row alone, without sort links: a short excerpt of the list on another page."""
        return SimpleNamespace(headers=[Header(c.label, c.key, c.numeric, False, term=c.term) for c in self.columns])

    def bind(self, request, rows) -> BoundTable:
        q = request.GET.get("q", "").strip()[:SEARCH_MAX]
        sort = request.GET.get("sort", "")
        column = self._by_key.get(sort.removeprefix("-"))
        if column is None or column.sort_path is None:
            sort = self.default
        rows = self._search(rows, q)
        rows = self._sort(rows, sort)
        return BoundTable(self, request, rows, q, sort)

    def _search(self, rows, q: str):
        if not q or not self.search:
            return rows
        if isinstance(rows, QuerySet):
            return rows.filter(reduce(or_, (Q(**{f"{path}__icontains": q}) for path in self.search)))
        needle = q.casefold()
        return [r for r in rows if any(needle in str(lookup(r, p) or "").casefold() for p in self.search)]

    def _sort(self, rows, sort: str):
        if not sort:
            return rows
        descending = sort.startswith("-")
        column = self._by_key.get(sort.removeprefix("-"))
        path = column.sort_path if column else sort.removeprefix("-")
        if isinstance(rows, QuerySet):
            expr = F(path).desc(nulls_last=True) if descending else F(path).asc(nulls_last=True)
            return rows.order_by(expr, "-pk" if descending else "pk")

        def key(row):
            v = lookup(row, path)
            return v.casefold() if isinstance(v, str) else v

        present = [r for r in rows if lookup(r, path) is not None]
        missing = [r for r in rows if lookup(r, path) is None]  # last, whichever the direction
        return sorted(present, key=key, reverse=descending) + missing


@dataclass
class Header:
    label: Any
    key: str
    numeric: bool
    sortable: bool
    state: str = "none"  # the aria-sort value: ascending, descending or none
    next_sort: str = ""  # what a click on the header asks for
    term: str = ""


@dataclass
class BoundTable:
    table: Table
    request: Any
    rows: Any
    q: str
    sort: str
    headers: list[Header] = field(init=False)

    def __post_init__(self):
        self.headers = []
        for c in self.table.columns:
            h = Header(c.label, c.key, c.numeric, c.sort_path is not None, term=c.term)
            if self.sort.removeprefix("-") == c.key:
                h.state = "descending" if self.sort.startswith("-") else "ascending"
            h.next_sort = c.key if h.state == "descending" or (h.state == "none" and not c.numeric) else "-" + c.key
            self.headers.append(h)

    @property
    def page(self):
        per_page = self.table.per_page or settings.PAGE_SIZE
        return Paginator(self.rows, per_page).get_page(self.request.GET.get("page"))

    @property
    def wants_csv(self) -> bool:
        return self.request.GET.get("format") == "csv"

    def csv_response(self, name: str) -> StreamingHttpResponse:
        stamp = timezone.localtime().strftime("%Y%m%d-%H%M")
        cols = [c for c in self.table.columns if c.export]
        getters = [c.getter() for c in cols]

        def lines():
            # Written CSV_BATCH rows at a time: one chunk of the response per batch, not per row.
            out = io.StringIO()
            writer = csv.writer(out)
            writer.writerow([c.key for c in cols])
            rows = self.rows.iterator() if isinstance(self.rows, QuerySet) else self.rows
            batch = []
            for row in rows:
                batch.append([csv_cell(get(row)) for get in getters])
                if len(batch) == CSV_BATCH:
                    writer.writerows(batch)
                    batch.clear()
                    yield out.getvalue()
                    out.seek(0)
                    out.truncate()
            writer.writerows(batch)
            if tail := out.getvalue():
                yield tail

        response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{name}-{stamp}.csv"'
        return response


def csv_cell(value) -> str:
    """A cell as text; a leading = + - @ is quoted so a spreadsheet never runs it as a formula."""
    if value is None:
        return ""
    if type(value) is int or type(value) is float:  # a number is never a formula (most cells)
        return str(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    text = str(value)
    if text[:1] in ("=", "+", "-", "@", "\t", "\r") and not _is_number(text):
        return "'" + text
    return text


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True

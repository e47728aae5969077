"""Lists sort, search, paginate and export the same way (brickadmin/tables.py), from the URL
alone, on a QuerySet (in SQL) and on a list of rows; the audit log is the first list on it."""

import csv
import io

import pytest
from django.test import RequestFactory

from brickadmin.tables import Column, Table, csv_cell
from workspaces.models import Decision

pytestmark = pytest.mark.django_db

ROWS = [{"name": "node-b", "gpus": 8}, {"name": "Node-a", "gpus": None}, {"name": "node-c", "gpus": 2}]
TABLE = Table(
    Column("name", "Name"),
    Column("gpus", "GPUs", numeric=True),
    Column("note", "Note", None),
    search=("name",),
    default="name",
)


def bound(query, rows=ROWS, table=TABLE):
    return table.bind(RequestFactory().get("/x/", query), rows)


def names(t):
    return [r["name"] if isinstance(r, dict) else r.subject for r in t.rows]


def test_sorting_from_the_url_either_way_with_empty_values_last():
    assert names(bound({})) == ["Node-a", "node-b", "node-c"]  # default, without case
    assert names(bound({"sort": "-gpus"})) == ["node-b", "node-c", "Node-a"]
    assert names(bound({"sort": "gpus"})) == ["node-c", "node-b", "Node-a"]


def test_an_unknown_or_unsortable_sort_falls_back_to_the_default():
    for sort in ("note", "-note", "password", "__class__", "-" * 50):
        assert names(bound({"sort": sort})) == ["Node-a", "node-b", "node-c"]


def test_headers_say_the_current_order_and_what_a_click_does():
    heads = {h.key: h for h in bound({"sort": "-gpus"}).headers}
    assert heads["gpus"].state == "descending" and heads["gpus"].next_sort == "gpus"
    assert heads["name"].state == "none" and heads["name"].next_sort == "name"
    assert heads["note"].sortable is False
    assert {h.key: h for h in bound({"sort": "name"}).headers}["name"].next_sort == "-name"


def test_search_without_case_and_cut_to_a_hundred_characters():
    assert names(bound({"q": "NODE-B"})) == ["node-b"]
    t = bound({"q": "x" * 5000})
    assert len(t.q) == 100 and names(t) == []


def test_queryset_rows_are_searched_and_sorted_in_sql(admin_user):
    for subject, amount in (("team-b", 4), ("team-a", 1), ("other", 2)):
        Decision.objects.create(
            actor_name="root",
            action=Decision.Action.APPROVE,
            subject=subject,
            gpu_resource="nvidia.com/gpu",
            amount=amount,
        )
    table = Table(
        Column("subject", "Subject"), Column("amount", "GPU", numeric=True), search=("subject",), default="-amount"
    )
    t = bound({"q": "team"}, Decision.objects.all(), table)
    assert "ORDER BY" in str(t.rows.query) and names(t) == ["team-b", "team-a"]
    assert names(bound({"sort": "subject"}, Decision.objects.all(), table)) == ["other", "team-a", "team-b"]


def test_csv_has_every_matching_row_not_only_the_page_and_never_a_formula(settings):
    settings.PAGE_SIZE = 1
    rows = [{"name": '=HYPERLINK("http://x")', "gpus": -3}] + ROWS
    t = bound({"format": "csv"}, rows)
    assert t.wants_csv and len(t.page.object_list) == 1
    response = t.csv_response("nodes")
    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="nodes-' in response["Content-Disposition"]
    body = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert body[0] == ["name", "gpus", "note"] and len(body) == 1 + len(rows)
    assert ['\'=HYPERLINK("http://x")', "-3", ""] in body
    assert csv_cell("@SUM(A1)") == "'@SUM(A1)" and csv_cell("-1.5") == "-1.5"


def test_the_audit_log_sorts_searches_and_exports(admin_client):
    for subject in ("team-a", "team-b"):
        Decision.objects.create(
            actor_name="root", action=Decision.Action.APPROVE, subject=subject, gpu_resource="nvidia.com/gpu", amount=2
        )
    page = admin_client.get("/workspaces/audit/", {"q": "team-b"}).content.decode()
    assert "team-b" in page and "team-a" not in page
    assert 'aria-sort="descending"' in page  # newest first, and the header says so
    assert 'href="?q=team-b&amp;sort=subject&amp;page=1"' in page  # a sort link keeps the search
    assert 'name="q" value="team-b"' in page
    page = admin_client.get("/workspaces/audit/", {"q": "nothing-like-it"}).content.decode()
    assert "No decisions match this search." in page
    exported = admin_client.get("/workspaces/audit/", {"format": "csv", "sort": "subject"})
    lines = b"".join(exported.streaming_content).decode().splitlines()
    assert lines[0].startswith("at,actor,action,subject") and [ln.split(",")[3] for ln in lines[1:]] == [
        "team-a",
        "team-b",
    ]


def test_the_csv_export_is_for_admins_only(alice_client):
    assert alice_client.get("/workspaces/audit/", {"format": "csv"}).status_code in (302, 403)

"""A database that refuses writes: a 503 page that says the database cannot
be written and that nothing was saved, instead of a plain 500; pages that only read keep
working. The read-only condition is real: SQLite's ``PRAGMA query_only`` or PostgreSQL's
``SET TRANSACTION READ ONLY`` on the test's own connection (bin/test runs PostgreSQL)."""

from __future__ import annotations

import contextlib

import pytest
from django.db import OperationalError, connection, transaction
from django.test import RequestFactory
from django.urls import reverse

from tests.conftest import require_service
from workspaces.models import WorkspaceRequest

pytestmark = pytest.mark.django_db

REQUEST = {"name": "team-ro", "gpu": 0, "cpu": 2, "memory_gib": 8, "storage_gib": 20}


@contextlib.contextmanager
def read_only_database():
    """The database refuses every write until the block ends."""
    if connection.vendor == "sqlite":
        with connection.cursor() as c:
            c.execute("PRAGMA query_only = ON")
        try:
            yield
        finally:
            with connection.cursor() as c:
                c.execute("PRAGMA query_only = OFF")
    elif connection.vendor == "postgresql":
        # Inside a savepoint of the test's transaction: rolling back to it undoes the setting
        # and the failed write alike.
        sid = transaction.savepoint()
        with connection.cursor() as c:
            c.execute("SET TRANSACTION READ ONLY")
        try:
            yield
        finally:
            transaction.savepoint_rollback(sid)
    else:
        require_service(False, f"a read-only switch for {connection.vendor}")  # a failure in CI, never a skip


def test_a_write_to_a_read_only_database_is_a_503_saying_nothing_was_saved(twin, alice_client):
    with read_only_database():
        assert alice_client.get(reverse("workspace_list")).status_code == 200  # reads still work
        r = alice_client.post(reverse("workspace_request"), REQUEST)
    assert r.status_code == 503
    html = r.content.decode()
    assert "The database cannot be written" in html and "Nothing was saved" in html
    assert r["Retry-After"]
    assert not WorkspaceRequest.objects.exists()
    # and once it is writable again, the same request goes through
    assert alice_client.post(reverse("workspace_request"), REQUEST).status_code == 302
    assert WorkspaceRequest.objects.filter(name="team-ro").exists()


def test_an_admin_write_to_a_read_only_database_is_a_503(twin, admin_client):
    content = __import__("gpus.manifest", fromlist=["current"]).current().content.replace("replicas: 2", "replicas: 3")
    with read_only_database():
        r = admin_client.post(reverse("manifest_save"), {"content": content, "note": "ro"})
    assert r.status_code == 503 and "The database cannot be written" in r.content.decode()


def test_errors_outside_views_get_the_page_too_and_bugs_stay_500s():
    """Handler500 (errors in a middleware, e.g. reading the session) gives the same page;
    an IntegrityError is a bug and stays a 500."""
    from django.db import IntegrityError

    from brickadmin.middleware import database_problem
    from brickadmin.views import server_error

    request = RequestFactory().post("/workspaces/new/")
    try:
        raise OperationalError("could not connect to server: Connection refused")
    except OperationalError:
        resp = server_error(request)
    assert resp.status_code == 503 and "The database cannot be reached" in resp.content.decode()
    assert database_problem(OperationalError("attempt to write a readonly database")) == "read-only"
    assert database_problem(OperationalError("database is locked")) == "busy"
    assert database_problem(IntegrityError("UNIQUE constraint failed")) is None
    assert database_problem(ValueError("x")) is None

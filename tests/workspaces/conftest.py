"""Fixtures of the workspaces tests: requests made the way the form makes them."""

import re

import pytest
from celery import current_app

from workspaces import approvals as ws_approvals


@pytest.fixture
def make_request(db):
    def _make(user, name, gpu=1, cpu=2, memory_gib=8, storage_gib=20):
        return ws_approvals.create_request(
            user, name=name, gpu=gpu, cpu=cpu, memory_gib=memory_gib, storage_gib=storage_gib
        )

    return _make


@pytest.fixture
def approved(make_request, admin_user, twin):
    """An approved Workspace of a user, on the seed-example twin."""

    def _approved(user, name, resource="nvidia.com/gpu.shared", gpu=1, overcommit=True):
        req = make_request(user, name, gpu=gpu)
        return ws_approvals.approve(req.pk, admin_user, resource, overcommit=overcommit)

    return _approved


def text(html: bytes | str) -> str:
    """A page's visible text, tags dropped and whitespace collapsed."""
    if isinstance(html, bytes):
        html = html.decode()
    html = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", html, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def objects(gw, kind, namespace=None):
    return {o["metadata"]["name"]: o for o in gw._list(kind, namespace)}


@pytest.fixture
def login():
    """A new, separate Client per user (alice_client and admin_client share one Client)."""
    from django.test import Client

    def _login(user):
        c = Client()
        c.force_login(user)
        return c

    return _login


# The concurrency tests (test_races.py) run approvals in threads, each with its own
# connection: with SQLite the test database must then be a file, not memory (as in
# tests/gpus/conftest.py; whichever conftest runs first names it).
def _file_test_database():
    import atexit
    import os
    from pathlib import Path

    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        test = db.setdefault("TEST", {})
        if not test.get("NAME"):
            test["NAME"] = name = str(Path(settings.VAR_DIR) / f"test-workspaces-{os.getpid()}.sqlite3")

            @atexit.register
            def _remove_wal_files():  # Django removes the database file, WAL mode leaves these
                for suffix in ("-wal", "-shm"):
                    Path(name + suffix).unlink(missing_ok=True)


_file_test_database()


@pytest.fixture
def worker_inline(settings):
    """The worker's tasks run where they are queued (Celery's eager mode), retries at once."""
    was = current_app.conf.task_always_eager
    current_app.conf.task_always_eager = True
    settings.BRICK_NOTIFY_RETRIES = 2
    settings.BRICK_NOTIFY_RETRY_SECONDS = 0
    yield
    current_app.conf.task_always_eager = was

"""Approval-queue benchmark (not a test): SQL queries to render one page of the queue
with 10 and with 1,000 pending Workspace requests. The count must not grow with the
queue (one page is PAGE_SIZE requests; the GPU choices come from one snapshot).

Run: .venv/bin/python bench/approval_queue.py
(uses its own SQLite file under /tmp unless DATABASE_URL is set).
"""

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("BRICK_VAR_DIR", tempfile.mkdtemp(prefix="brick-bench-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brickadmin.settings")
os.environ["BRICK_CLUSTER"] = "twin"
os.environ.pop("PROMETHEUS_URL", None)

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

from brickadmin.cluster import scenarios  # noqa: E402
from brickadmin.cluster.twin import TwinGateway  # noqa: E402
from workspaces.models import WorkspaceRequest  # noqa: E402


def fill(n: int, users) -> None:
    WorkspaceRequest.objects.all().delete()
    WorkspaceRequest.objects.bulk_create(
        WorkspaceRequest(
            name=f"bench-ws-{i:05d}",
            requester=users[i % len(users)],
            requester_name=users[i % len(users)].username,
            gpu=1 + i % 3,
            cpu=2,
            memory_gib=8,
            storage_gib=20,
        )
        for i in range(n)
    )


def measure(client, url):
    """(SQL statements, ms, the statements) of one request. Counted at the cursor: Django empties its
    query log when a request starts (request_started), so CaptureQueriesContext says 0."""
    client.get(url)  # warm: the twin's snapshot cache, templates
    captured = []

    def record(execute, sql, params, many, context):
        captured.append({"sql": sql})
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        t0 = time.perf_counter()
        r = client.get(url)
        ms = (time.perf_counter() - t0) * 1000
    assert r.status_code == 200, r.status_code
    return len(captured), ms, captured


def main():
    call_command("migrate", verbosity=0)
    objects, hardware, plugin_configs = scenarios.read("seed-example")
    TwinGateway().load(objects, hardware, plugin_configs)
    User = get_user_model()
    User.objects.filter(username__startswith="bench-").delete()
    admin = User.objects.create_user("bench-admin", is_staff=True)
    users = [User.objects.create_user(f"bench-user-{i}") for i in range(50)]
    client = Client(HTTP_HOST="localhost")
    client.force_login(admin)
    results = {}
    for n in (10, 1000):
        fill(n, users)
        for label, url in (("first page", "/workspaces/approvals/"), ("last page", "/workspaces/approvals/?page=last")):
            queries, ms, captured = measure(client, url)
            results[(n, label)] = queries
            print(f"{n:>5} pending, {label:<10}: {queries} SQL queries, {ms:.0f} ms (page size {settings.PAGE_SIZE})")
    counts = set(results.values())
    print("query count constant:", "yes" if len(counts) == 1 else f"NO {results}")
    print("the queries (1,000 pending, last page):")
    for q in captured:
        print("   ", q["sql"][:110])
    WorkspaceRequest.objects.all().delete()
    User.objects.filter(username__startswith="bench-").delete()
    return 0 if len(counts) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
